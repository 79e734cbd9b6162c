package dataplane

import (
	"fmt"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// RunningRuleset returns fam's running ruleset with its live counters, or
// an empty filter table when xfw holds none in this namespace, and where
// the running rules lie in their binary form (nil when none is loaded), so
// that a commit that keeps them encodes them by copying. It decodes the
// binary form saved with the running generation: the ruleset was checked
// (sets included) when it was committed.
func RunningRuleset(fam ir.Family) (*ir.Ruleset, *ir.Encoded, error) {
	return RunningRulesetSkip(fam, ir.Skip{})
}

// RunningRulesetSkip is RunningRuleset with what skip says not decoded
// (ir.UnmarshalRulesetSkip): the rules of whole tables, for a caller that
// replaces them wholesale (a restore without --noflush), or of the user
// chains a --noflush restore flushes before it uses them. Those tables
// and chains keep their policies (with their counters) and no rules; the
// rules decoded have the counters and Handles of a full decode.
func RunningRulesetSkip(fam ir.Family, skip ir.Skip) (*ir.Ruleset, *ir.Encoded, error) {
	t := time.Now()
	saved, counters, err := Running(fam)
	if err != nil {
		return nil, nil, fmt.Errorf("read running ruleset: %w", err)
	}
	if saved == nil {
		return ir.NewRuleset(fam), nil, nil
	}
	t = TraceSince("load: saved ruleset, counters", t)
	rs, enc, err := ir.UnmarshalRulesetSkip(saved, skip)
	if err == nil && rs.Family != fam {
		err = fmt.Errorf("saved as the %s ruleset", rs.Family)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("running ruleset is unreadable (%w); `xfw stop` clears it", err)
	}
	if skip.Tables == nil && skip.Rules == nil {
		applyCounters(rs, counters)
	} else {
		applyCountersCounted(rs, enc.RuleCounts(), counters)
	}
	t = TraceSince("load: decode", t)
	if traceOn {
		TraceSince(fmt.Sprintf("load: %d of %d rules decoded", decodedRules(rs), decodedRules(rs)+skippedRules(rs, enc)), t)
	}
	return rs, enc, nil
}

// applyCounters copies data-plane counters into the IR (indexed as the
// compiler numbers them: filter's policies 0–2, then its rules chain by
// chain, then the other tables' policies and rules,
// compiler.ForEachCounter) and gives every rule its Handle (its counter
// index + 1).
func applyCounters(rs *ir.Ruleset, counters []ir.Counters) {
	for hook, name := range ir.BuiltinChains {
		if c := rs.Chain(name); c != nil && hook < len(counters) {
			c.Counters = counters[hook]
		}
	}
	compiler.ForEachCounter(rs, func(i int, _ compiler.RuleRef, c *ir.Chain, r *ir.Rule) {
		switch {
		case r == nil:
			if i < len(counters) {
				c.Counters = counters[i]
			}
		default:
			if i < len(counters) {
				r.Counters = counters[i]
			}
			r.Handle = uint32(i + 1)
		}
	})
}

// applyCountersCounted is applyCounters for a ruleset some of whose
// chains' rules were not decoded (RunningRulesetSkip): counts holds
// how many rules each chain had (ir.Encoded.RuleCounts), by which the
// counter indexes of the rules after them advance as in a full decode
// (compiler.ForEachCounter's layout).
func applyCountersCounted(rs *ir.Ruleset, counts []int, counters []ir.Counters) {
	at := func(i int) ir.Counters {
		if i < len(counters) {
			return counters[i]
		}
		return ir.Counters{}
	}
	for hook, name := range ir.BuiltinChains {
		if c := rs.Chain(name); c != nil && hook < len(counters) {
			c.Counters = counters[hook]
		}
	}
	i, k := compiler.NumChains, 0
	chains := func(t *ir.Ruleset) {
		for _, c := range t.Chains {
			for j, r := range c.Rules {
				r.Counters = at(i + j)
				r.Handle = uint32(i + j + 1)
			}
			if k < len(counts) {
				i += counts[k]
			}
			k++
		}
	}
	chains(rs)
	for _, t := range rs.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if c := t.Chain(name); c != nil {
				if i < len(counters) {
					c.Counters = counters[i]
				}
				i++
			}
		}
		chains(t)
	}
}

// decodedRules is how many rules rs holds.
func decodedRules(rs *ir.Ruleset) int {
	n := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		for _, c := range t.Chains {
			n += len(c.Rules)
		}
	}
	return n
}

// skippedRules is how many rules the decode of rs from enc stepped over
// (RunningRulesetSkip).
func skippedRules(rs *ir.Ruleset, enc *ir.Encoded) int {
	n := 0
	for _, c := range enc.RuleCounts() {
		n += c
	}
	return n - decodedRules(rs)
}
