package compiler

import (
	"github.com/xfw-dev/xfw/internal/ir"
)

// The limit match (xt_limit) in the walk. Its answer depends on a token
// bucket the packet changes, so it cannot be a classification field: it
// is a probe of kind ProbeLimit (probe.go), whose Arg is the match's
// bucket. Only packets that reach the rule and pass its earlier matches
// meet the probe, which takes a token from the rule's bucket: given one,
// the search goes on with the rule; refused, past it. A token is spent
// even when a later match fails, as in the kernel.

// Limit is the token bucket of one limit match of one rule.
type Limit struct {
	// Rule is the rule's counter index, Match the match's index among
	// its matches.
	Rule  uint32
	Match int
	// Avg and Burst are the match's (ir.LimitMatch).
	Avg, Burst uint32
}

// MaxLimits bounds a generation's buckets (a probe's Aux names one).
const MaxLimits = 1 << 16

// limitIndex returns the bucket of match i (m) of rule r (matchIndex).
func (fl *flattener) limitIndex(r *ir.Rule, i int, m *ir.LimitMatch) (uint32, error) {
	return fl.limits.index(r, i, MaxLimits, "limit matches", func() Limit {
		return Limit{Rule: fl.ruleInfo(r).id, Match: i, Avg: m.Avg, Burst: m.Burst}
	})
}

// shiftLimitRules moves the counter indexes of the rules of the limit
// buckets and of the nth statistic instances from counter on by delta (a
// rule inserted or deleted before them): the state a command carries over
// (Limits and Statistics by rule) must name the rules where they now are.
func (g *Generation) shiftLimitRules(counter uint32, delta int) {
	for i := range g.Limits {
		if l := &g.Limits[i]; l.Rule >= counter {
			l.Rule = uint32(int(l.Rule) + delta)
		}
	}
	for i := range g.Statistics {
		if st := &g.Statistics[i]; st.Rule >= counter {
			st.Rule = uint32(int(st.Rule) + delta)
		}
	}
}
