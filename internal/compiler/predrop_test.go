package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// preDropCase is a ruleset and the leading drops it should give.
type preDropCase struct {
	name  string
	fam   ir.Family
	rules []string
	want  []PreDrop // Rule filled from wantRules
	// wantRules are the rules' counter names, one per want.
	wantRules []string
}

var preDropCases = []preDropCase{
	{name: "one source drop", rules: []string{"-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"},
		want:      []PreDrop{{Field: FieldSrc, Lo: U64(0x0a640000), Hi: U64(0x0a64ffff)}},
		wantRules: []string{"raw/PREROUTING/1"}},
	{name: "sources and a destination, then a protocol", rules: []string{
		"-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP",
		"-t raw -A PREROUTING -s 192.0.2.7 -j DROP",
		"-t raw -A PREROUTING -d 203.0.113.0/24 -j DROP",
		"-t raw -A PREROUTING -p udp -j DROP",
		"-t raw -A PREROUTING -s 10.200.0.0/16 -j DROP",
	},
		want: []PreDrop{{Field: FieldSrc, Lo: U64(0x0a640000), Hi: U64(0x0a64ffff)},
			{Field: FieldSrc, Lo: U64(0xc0000207), Hi: U64(0xc0000207)},
			{Field: FieldDst, Lo: U64(0xcb007100), Hi: U64(0xcb0071ff)}},
		wantRules: []string{"raw/PREROUTING/1", "raw/PREROUTING/2", "raw/PREROUTING/3"}},
	{name: "at most MaxPreDrops", rules: []string{
		"-t raw -A PREROUTING -s 10.1.0.0/16 -j DROP", "-t raw -A PREROUTING -s 10.2.0.0/16 -j DROP",
		"-t raw -A PREROUTING -s 10.3.0.0/16 -j DROP", "-t raw -A PREROUTING -s 10.4.0.0/16 -j DROP",
		"-t raw -A PREROUTING -s 10.5.0.0/16 -j DROP",
	},
		want: []PreDrop{{Field: FieldSrc, Lo: U64(0x0a010000), Hi: U64(0x0a01ffff)},
			{Field: FieldSrc, Lo: U64(0x0a020000), Hi: U64(0x0a02ffff)},
			{Field: FieldSrc, Lo: U64(0x0a030000), Hi: U64(0x0a03ffff)},
			{Field: FieldSrc, Lo: U64(0x0a040000), Hi: U64(0x0a04ffff)}},
		wantRules: []string{"raw/PREROUTING/1", "raw/PREROUTING/2", "raw/PREROUTING/3", "raw/PREROUTING/4"}},
	{name: "mangle PREROUTING judged before routing", rules: []string{"-t mangle -A PREROUTING -s 10.100.0.0/16 -j DROP"},
		want:      []PreDrop{{Field: FieldSrc, Lo: U64(0x0a640000), Hi: U64(0x0a64ffff)}},
		wantRules: []string{"mangle/PREROUTING/1"}},
	{name: "IPv6 source", fam: ir.IPv6, rules: []string{"-t raw -A PREROUTING -s 2001:db8::/32 -j DROP"},
		want:      []PreDrop{{Field: FieldSrc, Lo: U128{Hi: 0x20010db800000000}, Hi: U128{Hi: 0x20010db8ffffffff, Lo: ^uint64(0)}}},
		wantRules: []string{"raw/PREROUTING/1"}},
	{name: "a counting rule first", rules: []string{"-t raw -A PREROUTING", "-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"}},
	{name: "two conditions", rules: []string{"-t raw -A PREROUTING -s 10.100.0.0/16 -p udp -j DROP"}},
	{name: "negated source (two intervals)", rules: []string{"-t raw -A PREROUTING ! -s 10.100.0.0/16 -j DROP"}},
	{name: "ACCEPT", rules: []string{"-t raw -A PREROUTING -s 10.100.0.0/16 -j ACCEPT"}},
	{name: "interface", rules: []string{"-t raw -A PREROUTING -i eth0 -s 10.100.0.0/16 -j DROP"}},
	{name: "LOG first", rules: []string{"-t raw -A PREROUTING -s 10.100.0.0/16 -j LOG", "-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"}},
	{name: "filter FORWARD", rules: []string{"-A FORWARD -s 10.100.0.0/16 -j DROP"}},
	{name: "filter INPUT", rules: []string{"-A INPUT -s 10.100.0.0/16 -j DROP"}},
}

// TestPreDrops checks the leading drops the compiler lists and, for
// packets inside and outside each range, that the reference interpreter's
// INPUT and FORWARD walks drop those the first range holding them names,
// counting that rule alone, as the data plane's short path does.
func TestPreDrops(t *testing.T) {
	for _, tc := range preDropCases {
		fam := tc.fam
		if fam == 0 {
			fam = ir.IPv4
		}
		g, err := Compile(parseRuleset(t, fam, tc.rules...), Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := slices.Clone(g.PreDrops())
		var names []string
		for i := range got {
			names = append(names, counterName(g, got[i].Rule))
			got[i].Rule = 0
		}
		if !slices.Equal(got, tc.want) || !slices.Equal(names, tc.wantRules) {
			t.Errorf("%s: leading drops %+v (rules %v), want %+v (%v)", tc.name, got, names, tc.want, tc.wantRules)
			continue
		}
		checkPreDrops(t, tc.name, g)
	}
}

// checkPreDrops checks g's leading drops against the reference walks of
// packets at each range's ends, inside them and just outside them.
func checkPreDrops(t *testing.T, name string, g *Generation) {
	t.Helper()
	drops := g.PreDrops()
	holder := func(p *Packet) int {
		for i, d := range drops {
			v := p.Src
			if d.Field == FieldDst {
				v = p.Dst
			}
			if !v.Less(d.Lo) && !d.Hi.Less(v) {
				return i
			}
		}
		return -1
	}
	other := U64(0x0b000001)
	for _, d := range drops {
		for _, v := range []U128{d.Lo, d.Hi, d.Lo.Inc(), d.Lo.Dec(), d.Hi.Inc()} {
			p := &Packet{Proto: 17, Sport: 1000, Dport: 53, TTL: 64, IIF: 2, Src: v, Dst: other}
			if d.Field == FieldDst {
				p.Src, p.Dst = other, v
			}
			h := holder(p)
			for _, chain := range []int{ChainInput, ChainForward} {
				q := *p
				got := walk(g, &q, chain)
				if h < 0 {
					if slices.Contains(got.counted, counterName(g, drops[0].Rule)) {
						t.Errorf("%s: %v outside every range, counted %v", name, v, got.counted)
					}
					continue
				}
				want := []string{counterName(g, drops[h].Rule)}
				if got.verdict != ActDrop || !slices.Equal(got.counted, want) {
					t.Errorf("%s: chain %d, %v: reference counted %v verdict %d, short path counts %v and drops",
						name, chain, v, got.counted, got.verdict, want)
				}
			}
		}
	}
}

// TestPreDropsInPlace checks that an in-place change forgets the leading
// drops (the walk they stand for may have changed and their counters
// moved), and that the data plane's read-back restores them.
func TestPreDropsInPlace(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP", "-A INPUT -p tcp --dport 22 -j ACCEPT")
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.PreDrops()) != 1 {
		t.Fatalf("compiled: leading drops %+v, want one", g.PreDrops())
	}
	kept := slices.Clone(g.PreDrops())
	rule := rs.Chain("INPUT").Rules[0]
	g2, err := AppendRule(g, rule, ChainInput, uint32(g.NumCounters()), RuleRef{Chain: "INPUT", Index: 1}, testIfaces)
	if err != nil {
		t.Fatal(err)
	}
	if d := g2.PreDrops(); d != nil {
		t.Fatalf("after an in-place append: leading drops %+v, want none", d)
	}
	g2.SetPreDrops(kept)
	if !slices.Equal(g2.PreDrops(), kept) {
		t.Fatalf("SetPreDrops: %+v", g2.PreDrops())
	}
}
