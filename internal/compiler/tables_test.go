package compiler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// walkOutcome is what a simulated walk did: the counters it counted (named
// table/chain/rule, "policy" for a policy) and its verdict.
type walkOutcome struct {
	counted []string
	verdict Action
}

// counterName names counter i of g.
func counterName(g *Generation, i uint32) string {
	if i < NumChains {
		return "filter/" + ir.BuiltinChains[i] + "/policy"
	}
	ref := g.Rules[i-NumChains]
	table := ref.Table
	if table == "" {
		table = ir.TableFilter
	}
	if ref.Index == PolicyIndex {
		return table + "/" + ref.Chain + "/policy"
	}
	return fmt.Sprintf("%s/%s/%d", table, ref.Chain, ref.Index+1)
}

// walk simulates p in chain's walk of g.
func walk(g *Generation, p *Packet, chain int) walkOutcome {
	res := g.Classify(p, chain)
	var out walkOutcome
	count := func(e *Entry) {
		if e.Flags&EFCount != 0 && e.Rule != NoRule {
			out.counted = append(out.counted, counterName(g, e.Rule))
		}
	}
	for _, i := range res.Path {
		count(&g.Entries[i])
	}
	switch {
	case res.Hotdrop:
		out.verdict = ActDrop
	case res.Entry >= 0:
		count(&g.Entries[res.Entry])
		out.verdict = g.Entries[res.Entry].Action
	default:
		out.counted = append(out.counted, counterName(g, uint32(chain)))
		out.verdict = ActAccept
		if g.PolicyDrop[chain] {
			out.verdict = ActDrop
		}
	}
	return out
}

// tcpPacket is a TCP packet in connection state ct (a CtValue) with TTL ttl.
func tcpPacket(ct uint32, ttl uint32) *Packet {
	return &Packet{Proto: 6, Sport: 1000, Dport: 80, TCPFlags: 0x02, TTL: ttl, Ct: ct,
		IIF: 2, Src: U64(0x0a000002), Dst: U64(0x0a000001)}
}

// TestTableWalks checks the walks through the tables besides filter: the
// kernel's order of the tables' chains, ACCEPT ending one table, DROP and
// policies, nat for a connection's first packet only, raw before
// conntrack, the TTL PREROUTING sees on a forwarded packet.
func TestTableWalks(t *testing.T) {
	first := CtValue(CtsNew, false, 0, 6)
	retrans := CtValue(CtsNew, false, 1<<3, 6) // NEW, CONFIRMED
	est := CtValue(CtsEstablished, true, 1<<3|1<<1, 6)
	common := []string{
		"-t raw -A PREROUTING -p tcp",
		"-t raw -A OUTPUT -p tcp",
		"-t mangle -N M",
		"-t mangle -A M -p tcp",
		"-t mangle -A M -j ACCEPT",
		"-t mangle -A M -p tcp",
		"-t mangle -A PREROUTING -j M",
		"-t mangle -A PREROUTING -p tcp",
		"-t nat -A PREROUTING -p tcp",
		"-t mangle -A INPUT -p tcp",
		"-A INPUT -p tcp",
		"-A INPUT -p tcp -j ACCEPT",
		"-t security -A INPUT -p tcp",
		"-t nat -A INPUT -p tcp",
		"-t mangle -A FORWARD -p tcp",
		"-t security -A FORWARD -p tcp",
		"-t mangle -A POSTROUTING -p tcp",
		"-t nat -A POSTROUTING -p tcp",
		"-t mangle -A OUTPUT -p tcp",
		"-t nat -A OUTPUT -p tcp",
		"-t security -A OUTPUT -p tcp",
		// A rule that asks for connection tracking, without which the
		// nat chains see no packet (ctpull.go); in a chain no rule
		// reaches, as the kernel counts it too.
		"-N TRACKING", "-A TRACKING -m conntrack --ctstate INVALID",
	}
	tests := []struct {
		name  string
		extra []string
		p     *Packet
		chain int
		want  walkOutcome
	}{
		{name: "input, first packet", p: tcpPacket(first, 64), chain: ChainInput, want: walkOutcome{[]string{
			"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/M/1", "mangle/M/2",
			"nat/PREROUTING/1", "nat/PREROUTING/policy",
			"mangle/INPUT/1", "mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/2",
			"security/INPUT/1", "security/INPUT/policy", "nat/INPUT/1", "nat/INPUT/policy"}, ActAccept}},
		{name: "input, retransmitted first packet skips nat", p: tcpPacket(retrans, 64), chain: ChainInput,
			want: walkOutcome{[]string{
				"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/M/1", "mangle/M/2",
				"mangle/INPUT/1", "mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/2",
				"security/INPUT/1", "security/INPUT/policy"}, ActAccept}},
		{name: "forward, established", p: tcpPacket(est, 63), chain: ChainForward, want: walkOutcome{[]string{
			"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/M/1", "mangle/M/2",
			"mangle/FORWARD/1", "mangle/FORWARD/policy", "filter/FORWARD/policy",
			"security/FORWARD/1", "security/FORWARD/policy", "mangle/POSTROUTING/1", "mangle/POSTROUTING/policy"}, ActAccept}},
		{name: "output, first packet", p: tcpPacket(first, 64), chain: ChainOutput, want: walkOutcome{[]string{
			"raw/OUTPUT/1", "raw/OUTPUT/policy", "mangle/OUTPUT/1", "mangle/OUTPUT/policy", "nat/OUTPUT/1", "nat/OUTPUT/policy",
			"filter/OUTPUT/policy", "security/OUTPUT/1", "security/OUTPUT/policy",
			"mangle/POSTROUTING/1", "mangle/POSTROUTING/policy", "nat/POSTROUTING/1", "nat/POSTROUTING/policy"}, ActAccept}},
		{name: "raw DROP ends the walk", extra: []string{"-t raw -I PREROUTING -p tcp --dport 80 -j DROP"},
			p: tcpPacket(first, 64), chain: ChainInput, want: walkOutcome{[]string{"raw/PREROUTING/1"}, ActDrop}},
		{name: "mangle FORWARD policy DROP", extra: []string{"-t mangle -P FORWARD DROP"},
			p: tcpPacket(est, 63), chain: ChainForward, want: walkOutcome{[]string{
				"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/M/1", "mangle/M/2",
				"mangle/FORWARD/1", "mangle/FORWARD/policy"}, ActDrop}},
		{name: "filter DROP before security", extra: []string{"-I INPUT -j DROP"},
			p: tcpPacket(est, 64), chain: ChainInput, want: walkOutcome{[]string{
				"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/M/1", "mangle/M/2",
				"mangle/INPUT/1", "mangle/INPUT/policy", "filter/INPUT/1"}, ActDrop}},
		{name: "security DROP after filter's ACCEPT", extra: []string{"-t security -I INPUT -j DROP"},
			p: tcpPacket(est, 64), chain: ChainInput, want: walkOutcome{[]string{
				"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/M/1", "mangle/M/2",
				"mangle/INPUT/1", "mangle/INPUT/policy", "filter/INPUT/1", "filter/INPUT/2", "security/INPUT/1"}, ActDrop}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := parseRuleset(t, ir.IPv4, append(slices.Clone(common), tt.extra...)...)
			g, err := Compile(rs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := walk(g, tt.p, tt.chain)
			if got.verdict != tt.want.verdict || !slices.Equal(got.counted, tt.want.counted) {
				t.Errorf("got %v %v\nwant %v %v", got.verdict, got.counted, tt.want.verdict, tt.want.counted)
			}
		})
	}
}

// TestTableSegmentViews checks the conditions a segment sees differently
// from its walk: raw has no connection yet, PREROUTING of a forwarded
// packet sees the TTL before the decrement, and LOG lines of PREROUTING
// and POSTROUTING chains carry their view bits.
func TestTableSegmentViews(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-t raw -A PREROUTING -m conntrack --ctstate INVALID",
		"-t raw -A PREROUTING -m conntrack --ctstate NEW",
		"-t mangle -A PREROUTING -m ttl --ttl-eq 64",
		"-t mangle -A PREROUTING -j LOG --log-prefix pre",
		"-t mangle -A POSTROUTING -j LOG --log-prefix post",
		"-t mangle -A INPUT -j LOG --log-prefix in",
	)
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	est := CtValue(CtsEstablished, false, 1<<3, 6)
	for _, tc := range []struct {
		chain int
		ttl   uint32
		want  []string
	}{
		{ChainInput, 64, []string{"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/PREROUTING/2",
			"mangle/PREROUTING/policy", "mangle/INPUT/1", "mangle/INPUT/policy", "filter/INPUT/policy"}},
		{ChainForward, 63, []string{"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/1", "mangle/PREROUTING/2",
			"mangle/PREROUTING/policy", "mangle/FORWARD/policy", "filter/FORWARD/policy",
			"mangle/POSTROUTING/1", "mangle/POSTROUTING/policy"}},
		{ChainForward, 64, []string{"raw/PREROUTING/1", "raw/PREROUTING/policy", "mangle/PREROUTING/2",
			"mangle/PREROUTING/policy", "mangle/FORWARD/policy", "filter/FORWARD/policy",
			"mangle/POSTROUTING/1", "mangle/POSTROUTING/policy"}},
	} {
		got := walk(g, tcpPacket(est, tc.ttl), tc.chain)
		if !slices.Equal(got.counted, tc.want) || got.verdict != ActAccept {
			t.Errorf("%s ttl %d: got %v %v, want %v", ir.BuiltinChains[tc.chain], tc.ttl, got.verdict, got.counted, tc.want)
		}
	}
	views := map[string]uint8{}
	for _, lc := range g.LogConfigs {
		views[lc.Prefix] = lc.Flags
	}
	want := map[string]uint8{"pre": ir.LogViewPrerouting, "post": ir.LogViewPostrouting, "in": 0}
	for p, f := range want {
		if views[p] != f {
			t.Errorf("LOG %q: flags %#x, want %#x", p, views[p], f)
		}
	}
	if g.Active&(1<<FieldCt) != 0 {
		t.Errorf("raw's conntrack conditions were decided at compile time, yet FieldCt is active")
	}
}

// TestTableRefusals checks what the walk cannot do yet: SNAT's shifted
// port maps (DNAT's are translated: nat_range_test.go).
func TestTableRefusals(t *testing.T) {
	for _, rule := range []string{
		"-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1000-1010/80",
		"-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1-10.0.0.2:1000-1010/80",
	} {
		rs := parseRuleset(t, ir.IPv4, rule)
		_, err := Compile(rs, Options{})
		if err == nil || !strings.Contains(err.Error(), "not supported by xfw") {
			t.Errorf("%s: got %v, want a refusal", rule, err)
		}
	}
}

// TestFilterOnlyUnchanged checks that a ruleset without other tables
// compiles as before: no walks, the established fast path kept.
func TestFilterOnlyUnchanged(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT", "-A INPUT -j DROP")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Walks() {
		t.Errorf("filter-only ruleset walks other tables")
	}
	if _, _, ok := g.CtFastPath(ChainInput); !ok {
		t.Errorf("fast path lost")
	}
	rs = parseRuleset(t, ir.IPv4, "-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT", "-t mangle -A INPUT")
	if g, err = Compile(rs, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := g.CtFastPath(ChainInput); ok || !g.Walks() {
		t.Errorf("fast path kept before mangle INPUT (walks %v)", g.Walks())
	}
}
