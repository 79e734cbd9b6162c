package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRuleMetTwiceCountsAsNumberedLast compiles a ruleset in which one
// rule (the same *ir.Rule) stands at two places: both places' entries
// count to the counter numbered last, as when numbering indexed the rules
// by identity as it went; a rule met once keeps its own. With a limit match
// in it, the bucket's rule (found by rule) is the same counter too.
func TestRuleMetTwiceCountsAsNumberedLast(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule string
	}{
		{"plain", "-A FORWARD -p tcp --dport 22 -j DROP"},
		{"with a limit", "-A FORWARD -p tcp --dport 22 -m limit --limit 5/s -j DROP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := parseRuleset(t, ir.IPv4,
				tc.rule,
				"-A FORWARD -p udp -j ACCEPT",
				"-A INPUT -p udp -j ACCEPT",
			)
			fwd, in := rs.Chain("FORWARD"), rs.Chain("INPUT")
			shared := fwd.Rules[0]
			in.Rules = append(in.Rules, shared) // INPUT: udp ACCEPT, then the shared rule
			g, err := Compile(rs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ids := map[uint32]bool{}
			var udp []uint32
			for _, e := range g.Entries {
				if e.Rule == NoRule {
					continue
				}
				if e.Action == ActDrop {
					ids[e.Rule] = true
				} else if e.Action == ActAccept {
					udp = append(udp, e.Rule)
				}
			}
			// Counters: policies, then INPUT's rules (udp, shared), then
			// FORWARD's (shared, udp) in ForEachCounter's order; the
			// shared rule's entries all count to the last of its two.
			last := -1
			ForEachCounter(rs, func(i int, _ RuleRef, _ *ir.Chain, r *ir.Rule) {
				if r == shared {
					last = i
				}
			})
			if len(ids) != 1 || !ids[uint32(last)] {
				t.Errorf("the shared rule's entries count to %v, want only %d", ids, last)
			}
			if len(udp) != 2 || udp[0] == udp[1] {
				t.Errorf("the udp rules count to %v, want two counters", udp)
			}
			for _, l := range g.Limits {
				if l.Rule != uint32(last) {
					t.Errorf("limit bucket of rule %d, want %d", l.Rule, last)
				}
			}
		})
	}
}

// TestHasDuplicate checks the identity test numberRules uses.
func TestHasDuplicate(t *testing.T) {
	a, b, c := &ir.Rule{}, &ir.Rule{}, &ir.Rule{}
	for _, tc := range []struct {
		rules []*ir.Rule
		want  bool
	}{
		{nil, false},
		{[]*ir.Rule{a}, false},
		{[]*ir.Rule{a, b, c}, false},
		{[]*ir.Rule{a, b, a}, true},
		{[]*ir.Rule{c, b, a, b}, true},
	} {
		if got := hasDuplicate(tc.rules); got != tc.want {
			t.Errorf("hasDuplicate(%p): %v, want %v", tc.rules, got, tc.want)
		}
	}
}
