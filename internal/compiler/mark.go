package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The statistic match, the mark match and the MARK target in the walk.
//
// A statistic match (xt_statistic) answers from a random number or from a
// counter the packet advances, so it is a probe (ProbeStatistic): an nth
// match has one per match instance (a rule that user chains flatten more
// than once keeps one counter, as the kernel has one match), its counter
// belonging to the generation, as the kernel's belongs to the table
// iptables replaced; random matches of one probability share one.
//
// The packet's mark changes during the walk (a MARK rule in mangle
// PREROUTING changes what a later rule's -m mark sees), while the
// classification fields are looked up once per packet: the mark match is
// therefore a probe too (ProbeMark), asked in rule order with the mark as
// the walk has it then. The MARK target is an action entry (EFAct): a
// CONTINUE entry of the rule, counted, whose probe (ProbeSetMark) the walk
// runs for its effect on the mark, then goes on with the next rule, as
// the kernel's XT_CONTINUE.

// Probe arguments of ProbeStatistic (Probe.Arg bits).
const (
	// StatisticInvert inverts the answer (XT_STATISTIC_INVERT).
	StatisticInvert = 1 << 0
	// StatisticNth selects the nth mode (else random).
	StatisticNth = 1 << 1
)

// statisticProbe returns the probe of statistic match i (m) of rule r:
// Val is the random mode's threshold or the nth mode's --every minus one,
// Mask the nth mode's --packet, Inst the nth mode's instance (its own
// counter). A random-mode match holds no state (xt_statistic draws a
// number each time it is asked), so the random matches of one probability
// and inversion share one probe: kube-proxy's 10K services × 10 endpoints
// name 90,000 of them, beyond an entry's 16-bit probe index.
func (fl *flattener) statisticProbe(r *ir.Rule, i int, m *ir.StatisticMatch) (Probe, error) {
	pr := Probe{Kind: ProbeStatistic}
	if m.Invert {
		pr.Arg |= StatisticInvert
	}
	switch m.Mode {
	case ir.StatisticRandom:
		pr.Val = m.Probability
	case ir.StatisticNth:
		inst, err := fl.statistics.index(r, i, MaxProbes, "statistic matches", func() StatisticInst {
			return StatisticInst{Rule: fl.ruleInfo(r).id, Match: i}
		})
		if err != nil {
			return Probe{}, err
		}
		pr.Arg |= StatisticNth
		pr.Val, pr.Mask, pr.Inst = m.Every, m.Packet, inst
	default:
		return Probe{}, fmt.Errorf("statistic match: mode %d is not supported by xfw", m.Mode)
	}
	return pr, nil
}

// StatisticInst is an nth statistic match's instance (Probe.Inst): its
// rule's counter index and the match's index among the rule's matches.
type StatisticInst struct {
	Rule  uint32
	Match int
}

// markProbe returns the probe of a mark match: Arg 1 when inverted.
func markProbe(m *ir.MarkMatch) Probe {
	pr := Probe{Kind: ProbeMark, Val: m.Value, Mask: m.Mask}
	if m.Invert {
		pr.Arg = 1
	}
	return pr
}

// markAction fills e, the entry of a MARK rule: a counted CONTINUE entry
// whose probe sets the mark (ProbeSetMark).
func (fl *flattener) markAction(e *Entry, t ir.MarkTarget) error {
	return fl.actionEntry(e, Probe{Kind: ProbeSetMark, Val: t.Value, Mask: t.Mask})
}

// NthInitialCount is the counter an nth probe starts from
// (statistic_mt_check: every - packet); the probe matches when the count,
// advanced by one per packet modulo every + 1, comes to 0.
func NthInitialCount(pr Probe) uint64 {
	return uint64(pr.Val - pr.Mask)
}

// markAnswer answers a mark-kind probe for the simulator, updating
// p.Mark for ProbeSetMark (always true).
func (p *Packet) markAnswer(pr Probe) bool {
	switch pr.Kind {
	case ProbeSetMark:
		p.Mark = p.Mark&^pr.Mask ^ pr.Val
		return true
	case ProbeMark:
		return (p.Mark&pr.Mask == pr.Val) != (pr.Arg != 0)
	case ProbeStatistic:
		return p.Statistic == nil || p.Statistic(pr)
	}
	return false
}
