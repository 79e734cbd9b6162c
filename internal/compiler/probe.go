package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Probes: the matches the walk asks in rule order (bpf/probe.h). A match
// whose answer changes state when asked (a limit match's token bucket) or
// that is no classification field cannot be one of the rule's terms: the
// flattener puts a probe entry (EFProbe) before the rule, with the
// condition under which the kernel evaluates the match (the rule's IP part
// and its matches before it; flattener.probes), and leaves the match out
// of the rule's own terms. The entry's Aux names one of the generation's
// Probes: its kind says which data-plane evaluator answers, its Arg is the
// kind's own (for ProbeLimit, the bucket in Generation.Limits). True, the
// search goes on with the next entry (the rule's own entries, which test
// the matches after the probed one, or the rule's next probe); false, it
// goes on past the rule. A rule's terms are disjoint, so a packet meets
// one probe entry per probed match.
//
// Adding a kind: a ProbeKind (and enum xfw_probe_kind in bpf/common.h), a
// case in probedMatch and in flattener.probeOf, the simulator's answer
// (Packet.probe), and the evaluator in bpf/probe.h.

// ProbeKind says what a probe evaluates (enum xfw_probe_kind).
type ProbeKind uint32

// Probe kinds.
const (
	// ProbeLimit takes a token from limit bucket Arg (Generation.Limits).
	ProbeLimit ProbeKind = iota
	// ProbeRecent asks recent match Arg (Generation.Recents).
	ProbeRecent
	// ProbeHashLimit asks hashlimit match Arg (Generation.HashLimits).
	ProbeHashLimit
	// ProbePred answers predicate Arg (Generation.Preds: string, u32,
	// time; pred.go).
	ProbePred
	// ProbeConnlimit counts the packet's connection under its masked
	// address (connlimit.go; Arg is ConnlimitArg).
	ProbeConnlimit
	// ProbeCtExpire compares the seconds left to the packet's connection
	// with CtExpires[Arg] (ctexpire.go).
	ProbeCtExpire
	// ProbeCPU compares the CPU processing the packet with the cpu
	// match's (cpu.go; Arg is CPUArg).
	ProbeCPU
	// ProbeStatistic asks a statistic match (mark.go): Arg its mode and
	// inversion (StatisticNth, StatisticInvert), Val and Mask its values.
	ProbeStatistic
	// ProbeMark asks a mark match: (mark & Mask) == Val, Arg 1 inverted.
	ProbeMark
	// ProbeSetMark is the MARK target's action (an EFAct entry's): mark =
	// (mark & ^Mask) ^ Val.
	ProbeSetMark
	// ProbeConnmark asks a connmark match (connmark.go): (ctmark & Mask)
	// == Val, Arg 1 inverted; false without a connection.
	ProbeConnmark
	// ProbeSetConnmark is the CONNMARK target's action (an EFAct entry's;
	// ConnmarkSetProbe packs it).
	ProbeSetConnmark
	// ProbeOwner asks an owner match (owner.go) about the packet's
	// socket.
	ProbeOwner
	// ProbeMangle is a packet-rewriting or notrack target's action (an
	// EFAct entry's; mangle.go): Arg the rewrite, Val and Mask its values.
	ProbeMangle
	// ProbeMarkMoved says whether the packet's mark differs from the one
	// its route was made with (mark_route.go); Arg RerouteTTL, RerouteTOS:
	// or its TTL, its TOS from the walk's first (a TTL or HL, a TOS or
	// DSCP rule in PREROUTING).
	ProbeMarkMoved
	// ProbeNatRange is never asked: it holds a NAT entry's range
	// (EFNatRange; nat.go): Arg the NatFlags, Val and Mask the addresses,
	// Wide the ports (min << 16 | max).
	ProbeNatRange
	// ProbeCtNat asks a --ctstate with SNAT or DNAT (ctnat.go).
	ProbeCtNat
	// ProbeCtRepl asks --ctreplsrc and --ctrepldst in a ruleset with NAT
	// (ctrepl.go).
	ProbeCtRepl
	// ProbeNatAddr6 is never asked: it holds an IPv6 address (nat6.go)
	// of a NAT range, named by its ProbeNatRange's Val or Mask, or of a
	// ProbeCtRepl's option: Val and Mask the high 64 bits, Wide the low.
	ProbeNatAddr6
	// ProbeSetTarget is the SET target's action (an EFAct entry's;
	// settarget.go): Arg the sets and flags, Val the --timeout.
	ProbeSetTarget
	// ProbeSetMatch asks a set match on a set SET targets write
	// (settarget.go): Arg the set and flags.
	ProbeSetMatch
	// NumProbeKinds counts the kinds.
	NumProbeKinds
)

// Probe is one probe of a generation (struct xfw_probe).
type Probe struct {
	Kind ProbeKind
	// Arg is the kind's argument: ProbeLimit's bucket index.
	Arg uint32
	// Val and Mask are the values of the statistic and mark kinds.
	Val, Mask uint32
	// Inst tells apart probes that must not be shared: a statistic
	// match's instance (its own counter). The data plane does not read it.
	Inst uint32
	// Wide is a kind's 64-bit value, the data plane's count word
	// (ProbeOwner: the gid range, OwnerGIDRange).
	Wide uint64
}

// MaxProbes bounds a generation's probes (an entry's Aux names one).
const MaxProbes = 1 << 16

// probedMatch reports whether match m is asked by a probe.
func probedMatch(m ir.Match) bool {
	switch m := m.(type) {
	case *ir.LimitMatch, *ir.RecentMatch, *ir.HashLimitMatch, *ir.ConnlimitMatch, *ir.CPUMatch,
		*ir.StatisticMatch, *ir.MarkMatch, *ir.ConnmarkMatch, *ir.OwnerMatch:
		return true
	case *ir.ConntrackMatch:
		return m.Expire.Set || ctNatProbed(m)
	case *ctReplMatch, *writtenSetMatch:
		return true
	}
	return isPred(m)
}

// hasProbedMatch reports whether r has a match asked by a probe: such a
// rule is never added or deleted in place (its probes and their state
// come with a full compile).
func hasProbedMatch(r *ir.Rule) bool {
	for _, m := range r.Matches {
		if probedMatch(m) {
			return true
		}
	}
	return false
}

// probeOf returns the probe that asks match i (m, probedMatch) of rule r
// met in base chain hook.
func (fl *flattener) probeOf(r *ir.Rule, i int, m ir.Match, hook int) (Probe, error) {
	switch m := m.(type) {
	case *ir.LimitMatch:
		k, err := fl.limitIndex(r, i, m)
		return Probe{Kind: ProbeLimit, Arg: k}, err
	case *ir.RecentMatch:
		k, err := fl.recentIndex(r, i, m)
		if hook == ChainForward {
			k |= RecentArgForward
		}
		return Probe{Kind: ProbeRecent, Arg: k}, err
	case *ir.HashLimitMatch:
		k, err := fl.hashLimitIndex(r, i, m)
		return Probe{Kind: ProbeHashLimit, Arg: k}, err
	case *ir.StringMatch, *ir.U32Match, *ir.TimeMatch:
		k, err := fl.predIndex(r, i, m)
		return Probe{Kind: ProbePred, Arg: k}, err
	case *ir.ConnlimitMatch:
		k, err := fl.connlimitIndex(r, i, m)
		return Probe{Kind: ProbeConnlimit, Arg: ConnlimitArg(k, m)}, err
	case *ir.CPUMatch:
		return Probe{Kind: ProbeCPU, Arg: CPUArg(m)}, nil
	case *ir.ConntrackMatch:
		if ctNatProbed(m) {
			return ctNatProbe(m)
		}
		k, err := fl.ctExpireIndex(r, i, m)
		return Probe{Kind: ProbeCtExpire, Arg: uint32(k)}, err
	case *ir.StatisticMatch:
		return fl.statisticProbe(r, i, m)
	case *ir.MarkMatch:
		return markProbe(m), nil
	case *ir.ConnmarkMatch:
		return connmarkProbe(m), nil
	case *ir.OwnerMatch:
		return ownerProbe(m)
	case *writtenSetMatch:
		return fl.writtenSetProbe(m)
	case *ctReplMatch:
		if fl.rs.Family != ir.IPv4 {
			return fl.ctReplProbe6(m) // nat6.go
		}
		return ctReplProbe(m), nil
	}
	return Probe{}, fmt.Errorf("match %T is not probed", m)
}

// actionEntry makes e an action entry (EFAct) of probe pr: a CONTINUE
// entry the walk runs pr for, then goes on.
func (fl *flattener) actionEntry(e *Entry, pr Probe) error {
	k, err := fl.probeIndex(pr)
	if err != nil {
		return err
	}
	e.Action, e.Aux = ActContinue, k
	e.Flags |= EFAct
	return nil
}

// probeIndex returns the index in the generation's probes of pr, adding
// it the first time: a rule that user chains flatten more than once asks
// one probe (and one bucket), as the kernel has one match instance.
func (fl *flattener) probeIndex(pr Probe) (uint16, error) {
	if k, ok := fl.probeIDs[pr]; ok {
		return k, nil
	}
	if len(fl.probeList) >= MaxProbes {
		return 0, fmt.Errorf("more than %d probed matches (limit, ...)", MaxProbes)
	}
	if fl.probeIDs == nil {
		fl.probeIDs = map[Probe]uint16{}
	}
	k := uint16(len(fl.probeList))
	fl.probeIDs[pr] = k
	fl.probeList = append(fl.probeList, pr)
	return k, nil
}
