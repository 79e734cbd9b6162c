package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// trivialCase is a ruleset and the base chains whose walks are trivial.
type trivialCase struct {
	name   string
	tables []string // empty tables the ruleset has besides filter
	rules  []string
	want   [NumChains]bool
}

var trivialCases = []trivialCase{
	{name: "no rule", want: [NumChains]bool{true, true, true}},
	{name: "FORWARD policy DROP", rules: []string{"-P FORWARD DROP"}, want: [NumChains]bool{true, false, true}},
	{name: "INPUT rule", rules: []string{"-A INPUT -p tcp --dport 22 -j ACCEPT"},
		want: [NumChains]bool{false, true, true}},
	{name: "unconditional ACCEPT", rules: []string{"-A INPUT -j ACCEPT"}, want: [NumChains]bool{true, true, true}},
	{name: "counting rule", rules: []string{"-A OUTPUT", "-A OUTPUT"}, want: [NumChains]bool{true, true, true}},
	{name: "unconditional DROP", rules: []string{"-A OUTPUT -j DROP"}, want: [NumChains]bool{true, true, false}},
	{name: "LOG", rules: []string{"-A FORWARD -j LOG"}, want: [NumChains]bool{true, false, true}},
	// A jump to a chain without rules is a counted CONTINUE (emptyJump).
	{name: "empty user chain", rules: []string{"-N X", "-A INPUT -j X"}, want: [NumChains]bool{true, true, true}},
	// A goto's CONTINUE goes to the chain's end, not the next position:
	// not recognised as trivial (TestEmptyChainJumps checks its walk).
	{name: "empty user chain, goto", rules: []string{"-N X", "-A INPUT -g X", "-A INPUT -j DROP"},
		want: [NumChains]bool{false, true, true}},
	{name: "user chain with a rule", rules: []string{"-N X", "-A X -p udp", "-A INPUT -j X"},
		want: [NumChains]bool{false, true, true}},
	{name: "limit probe", rules: []string{"-A INPUT -m limit --limit 1/s -j ACCEPT"},
		want: [NumChains]bool{false, true, true}},
	{name: "conntrack anywhere", rules: []string{"-A OUTPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT"}},
	{name: "empty raw and mangle", tables: []string{ir.TableRaw, ir.TableMangle},
		want: [NumChains]bool{true, true, true}},
	{name: "empty mangle, filter rule", tables: []string{ir.TableMangle},
		rules: []string{"-A FORWARD -s 10.0.0.0/8 -j DROP"}, want: [NumChains]bool{true, false, true}},
	{name: "mangle MARK", tables: []string{ir.TableMangle},
		rules: []string{"-t mangle -A PREROUTING -j MARK --set-mark 1"}, want: [NumChains]bool{false, false, true}},
	// Without a rule that asks for connection tracking the kernel's nat
	// chains see no packet (ctpull.go).
	{name: "empty nat", tables: []string{ir.TableNat}, want: [NumChains]bool{true, true, true}},
	{name: "empty nat, conntrack rule", tables: []string{ir.TableNat},
		rules: []string{"-A FORWARD -m conntrack --ctstate INVALID -j DROP"}},
	{name: "empty nat, MASQUERADE", rules: []string{"-t nat -A POSTROUTING -o eth0 -j MASQUERADE"}},
	{name: "empty security, OUTPUT DROP", tables: []string{ir.TableSecurity},
		rules: []string{"-P OUTPUT DROP"}, want: [NumChains]bool{true, true, false}},
}

// TestTrivialWalk checks which walks are trivial and, for those, that the
// reference interpreter counts exactly TrivialWalk's counters and accepts,
// for packets of every kind the walk's chain can see.
func TestTrivialWalk(t *testing.T) {
	packets := []*Packet{
		tcpPacket(0, 64),
		{Proto: 17, Sport: 53, Dport: 5353, TTL: 1, IIF: 3, Src: U64(0x0b000001), Dst: U64(0x0a000001)},
		{Proto: 1, ICMP: 8 << 8, TTL: 200, IIF: 1, Src: U64(0x7f000001), Dst: U64(0x7f000001)},
	}
	for _, tc := range trivialCases {
		rs := parseRuleset(t, ir.IPv4, tc.rules...)
		for _, name := range tc.tables {
			rs.EnsureTable(name)
		}
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for h := 0; h < NumChains; h++ {
			counters, ok := g.TrivialWalk(h)
			if ok != tc.want[h] {
				t.Errorf("%s: chain %d trivial %v, want %v", tc.name, h, ok, tc.want[h])
				continue
			}
			if ok {
				checkTrivial(t, tc.name, g, h, counters, packets)
			}
		}
	}
}

// checkTrivial checks a trivial walk's counters against the reference
// interpreter's walk of every packet.
func checkTrivial(t *testing.T, name string, g *Generation, h int, counters []uint32, packets []*Packet) {
	t.Helper()
	var want []string
	for _, c := range counters {
		want = append(want, counterName(g, c))
	}
	for _, p := range packets {
		q := *p
		if h == ChainOutput {
			q.IIF, q.OIF = 0, 2
		}
		got := walk(g, &q, h)
		if got.verdict != ActAccept || !slices.Equal(got.counted, want) {
			t.Errorf("%s: chain %d: reference counted %v verdict %d, trivial walk counts %v",
				name, h, got.counted, got.verdict, want)
		}
	}
}

// TestTrivialWalkInPlace checks the in-place changes: the changed chain's
// walk is no longer trivial (its conditions are not known in a generation
// read back from the data plane), the others keep theirs with their
// counter indexes moved as the rules' are.
func TestTrivialWalkInPlace(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A INPUT -p tcp --dport 22 -j ACCEPT", "-A FORWARD -j ACCEPT")
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	fwd := uint32(NumChains + 1) // FORWARD's rule, after INPUT's
	if counters, ok := g.TrivialWalk(ChainForward); !ok || !slices.Equal(counters, []uint32{fwd}) {
		t.Fatalf("compiled: FORWARD trivial %v counters %v", ok, counters)
	}
	rule := rs.Chain("INPUT").Rules[0]
	g, err = AppendRule(g, rule, ChainInput, NumChains+1, RuleRef{Chain: "INPUT", Index: 1}, testIfaces)
	if err != nil {
		t.Fatal(err)
	}
	if counters, ok := g.TrivialWalk(ChainForward); !ok || !slices.Equal(counters, []uint32{fwd + 1}) {
		t.Fatalf("after append: FORWARD trivial %v counters %v", ok, counters)
	}
	g, err = DeleteRule(g, rule, ChainInput, NumChains, testIfaces)
	if err != nil {
		t.Fatal(err)
	}
	if counters, ok := g.TrivialWalk(ChainForward); !ok || !slices.Equal(counters, []uint32{fwd}) {
		t.Fatalf("after delete: FORWARD trivial %v counters %v", ok, counters)
	}
	if _, ok := g.TrivialWalk(ChainInput); ok {
		t.Fatal("INPUT changed in place: still trivial")
	}
	if counters, ok := g.TrivialWalk(ChainOutput); !ok || !slices.Equal(counters, []uint32{ChainOutput}) {
		t.Fatalf("OUTPUT trivial %v counters %v", ok, counters)
	}
	g, err = AppendRule(g, rule, ChainForward, fwd+1, RuleRef{Chain: "FORWARD", Index: 1}, testIfaces)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.TrivialWalk(ChainForward); ok {
		t.Fatal("FORWARD changed in place: still trivial")
	}
}
