package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRawPreLayout checks which rulesets have raw PREROUTING judged before
// the route lookup (Layout.RawPre) and, for those, that each walk's
// position is right after its raw PREROUTING segment (its policy entry
// last), the INPUT and FORWARD segments hold the same counters, and no
// such walk is trivial.
func TestRawPreLayout(t *testing.T) {
	cases := []struct {
		name  string
		rules []string
		want  bool
	}{
		{name: "raw DROP", rules: []string{"-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"}, want: true},
		{name: "raw policy DROP, no rule", rules: []string{"-t raw -P PREROUTING DROP"}, want: true},
		{name: "empty raw PREROUTING", rules: []string{"-t raw -A OUTPUT -p icmp"}},
		{name: "user chain, RETURN, LOG, MARK", want: true, rules: []string{"-t raw -N R",
			"-t raw -A PREROUTING -p udp -j R", "-t raw -A R -p udp --dport 53 -j RETURN",
			"-t raw -A R -j LOG --log-prefix raw", "-t raw -A R -j MARK --set-mark 5", "-t raw -A R -j DROP"}},
		{name: "NOTRACK", rules: []string{"-t raw -A PREROUTING -p udp -j NOTRACK",
			"-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP"}},
		{name: "CT --notrack in a user chain", rules: []string{"-t raw -N R", "-t raw -A PREROUTING -j R",
			"-t raw -A R -p udp -j CT --notrack"}},
		{name: "conntrack match", rules: []string{"-t raw -A PREROUTING -m conntrack --ctstate INVALID -j DROP"}},
		{name: "mangle PREROUTING only", rules: []string{"-t mangle -A PREROUTING -s 10.100.0.0/16 -j DROP"}},
	}
	for _, tc := range cases {
		rs := parseRuleset(t, ir.IPv4, tc.rules...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if g.Layout.RawPre[ChainOutput] != 0 {
			t.Errorf("%s: OUTPUT has a raw PREROUTING position %d", tc.name, g.Layout.RawPre[ChainOutput])
		}
		var segs [NumChains][]string
		for _, h := range []int{ChainInput, ChainForward} {
			pos := g.Layout.RawPre[h]
			if (pos != 0) != tc.want {
				t.Errorf("%s: chain %d RawPre %d, want set %v", tc.name, h, pos, tc.want)
				continue
			}
			if pos == 0 {
				continue
			}
			if _, ok := g.TrivialWalk(h); ok {
				t.Errorf("%s: chain %d walk trivial with raw PREROUTING judged first", tc.name, h)
			}
			start, end := g.Walk(h)
			if pos-1 <= start || pos-1 > end {
				t.Fatalf("%s: chain %d RawPre %d outside its walk [%d, %d)", tc.name, h, pos, start, end)
			}
			last := g.Entries[pos-2]
			if last.Flags&EFCount == 0 || counterName(g, last.Rule) != "raw/PREROUTING/policy" {
				t.Errorf("%s: chain %d: the entry before RawPre is not raw PREROUTING's policy (%+v)", tc.name, h, last)
			}
			for i := start; i < pos-1; i++ {
				if e := g.Entries[i]; e.Flags&EFCount != 0 && e.Rule != NoRule {
					segs[h] = append(segs[h], counterName(g, e.Rule))
				}
			}
		}
		if tc.want && !slices.Equal(segs[ChainInput], segs[ChainForward]) {
			t.Errorf("%s: INPUT's raw segment counts %v, FORWARD's %v", tc.name, segs[ChainInput], segs[ChainForward])
		}
	}
}
