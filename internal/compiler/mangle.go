package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The packet-rewriting targets (TCPMSS, DSCP, TOS, TTL, HL) and the
// notrack targets (CT --notrack, NOTRACK) in the walk.
//
// The kernel's targets change the packet and continue (XT_CONTINUE): the
// next rule sees the new TOS byte, TTL, MSS option or connection state.
// Each such rule is an action entry (EFAct): a counted CONTINUE entry
// whose probe (ProbeMangle) the walk runs for its effect on its copy of
// the packet, after which the data plane looks the changed field's class
// up again (bpf/mangle.h); the hook writes the rewrites into the packet
// after an ACCEPT (bpf/mangle_apply.h). A notrack rule makes the packet
// UNTRACKED (FieldCt) and lets its connection go unconfirmed.

// CtNotrackValue is the FieldCt value of a packet a notrack rule made
// UNTRACKED: the state with the direction bit, which the tracker never
// gives a packet without a connection. Later tables' conditions take it
// for UNTRACKED as conntrack_mt does (it ignores the direction of a packet
// without a connection); raw's, which otherwise see every packet as
// INVALID (no connection yet), tell it apart (rawCtView).
const CtNotrackValue = uint32(CtsUntracked) | CtValDirReply

// ProbeMangle's Arg: the rewrite (enum xfw_mangle_op).
const (
	// MangleTOS sets tos = (tos & ^Mask) ^ Val (DSCP, TOS).
	MangleTOS = iota
	// MangleTTLSet, MangleTTLInc and MangleTTLDec are the TTL and HL
	// targets' modes, Val their value.
	MangleTTLSet
	MangleTTLInc
	MangleTTLDec
	// MangleMSS is TCPMSS --set-mss Val.
	MangleMSS
	// MangleClamp is TCPMSS --clamp-mss-to-pmtu.
	MangleClamp
	// MangleNotrack is CT --notrack and NOTRACK.
	MangleNotrack
	// MangleOpMask selects the rewrite.
	MangleOpMask = 0xff
	// ManglePreDec marks a TTL rewrite in PREROUTING of the FORWARD
	// walk: the rule sees the TTL one above the walk's (ip_forward
	// decrements after PREROUTING, the data plane before the walk).
	ManglePreDec = 0x100
)

// dscpMask is the TOS byte's code point bits (~XT_DSCP_ECN_MASK).
const dscpMask = 0xff &^ ecnIPMask

// ttlOps maps the TTL and HL targets' modes to their rewrites.
var ttlOps = map[ir.TTLMode]uint32{ir.TTLSet: MangleTTLSet, ir.TTLInc: MangleTTLInc, ir.TTLDec: MangleTTLDec}

// mangleProbe returns the probe of a packet-rewriting or notrack target;
// preDec says the rule's chain is PREROUTING in the FORWARD walk.
func mangleProbe(t ir.Target, preDec bool) (Probe, error) {
	m := ir.MangleTarget{}
	if t.Mangle != nil {
		m = *t.Mangle
	}
	pr := Probe{Kind: ProbeMangle}
	switch t.Kind {
	case ir.TargetDSCP:
		pr.Arg, pr.Val, pr.Mask = MangleTOS, uint32(m.Value)<<dscpShift, dscpMask
	case ir.TargetTOS:
		pr.Arg, pr.Val, pr.Mask = MangleTOS, uint32(m.Value), uint32(m.Mask)
	case ir.TargetTTL, ir.TargetHL:
		op, ok := ttlOps[m.Mode]
		if !ok {
			return Probe{}, fmt.Errorf("TTL (HL) target: mode %d is not supported by xfw", m.Mode)
		}
		pr.Arg, pr.Val = op, uint32(m.Value)
		if preDec {
			pr.Arg |= ManglePreDec
		}
	case ir.TargetTCPMSS:
		pr.Arg, pr.Val = MangleMSS, uint32(m.MSS)
		if m.MSS == ir.TCPMSSClampPMTU {
			pr.Arg, pr.Val = MangleClamp, 0
		}
	case ir.TargetCTNotrack, ir.TargetNotrack:
		pr.Arg = MangleNotrack
	default:
		return Probe{}, fmt.Errorf("target %d is no packet-rewriting target", t.Kind)
	}
	return pr, nil
}

// mangleAction fills e, the entry of a packet-rewriting or notrack rule:
// a counted CONTINUE entry whose probe rewrites the walk's packet.
func (fl *flattener) mangleAction(e *Entry, t ir.Target) error {
	preDec := fl.view.seg != nil && fl.view.seg.chain == ir.ChainPrerouting && fl.view.walk == ChainForward
	pr, err := mangleProbe(t, preDec)
	if err != nil {
		return err
	}
	return fl.actionEntry(e, pr)
}

// mangleAnswer applies a mangle probe to the simulated packet, as
// bpf/mangle.h does (always true). The simulated packet has no TCP header
// length: the MSS option bpf/mangle.h counts a bare header with is not
// simulated.
func (p *Packet) mangleAnswer(pr Probe) bool {
	switch pr.Arg & MangleOpMask {
	case MangleTOS:
		p.TOS = p.TOS&^pr.Mask ^ pr.Val
	case MangleTTLSet, MangleTTLInc, MangleTTLDec:
		p.TTL = MangledTTL(pr, p.TTL)
	case MangleMSS:
		if p.TCPMSS <= maxMSS && pr.Val < p.TCPMSS {
			p.TCPMSS = pr.Val
		}
	case MangleNotrack:
		p.Ct = CtNotrackValue
	}
	return true
}

// The bits of Generation.MSSTargets (bpf/common.h XFW_MSST_*).
const (
	// MSSTargetAny: some rule's target is TCPMSS.
	MSSTargetAny = 1 << iota
	// MSSTargetClamp: some rule's is TCPMSS --clamp-mss-to-pmtu.
	MSSTargetClamp
)

// MSSTargets returns the MSSTarget* bits of the TCPMSS targets g's rules
// use: the data plane then reads every TCP packet's MSS option, which a
// walk that adds one needs (bpf/tcpopt.h).
func (g *Generation) MSSTargets() uint32 {
	var bits uint32
	for _, pr := range g.Probes {
		if pr.Kind != ProbeMangle {
			continue
		}
		switch pr.Arg & MangleOpMask {
		case MangleMSS:
			bits |= MSSTargetAny
		case MangleClamp:
			bits |= MSSTargetAny | MSSTargetClamp
		}
	}
	return bits
}

// maxMSS is the largest MSS option value (larger FieldTCPMSS values are
// sentinels).
const maxMSS = 0xffff

// maxTTL is the largest TTL (hop limit).
const maxTTL = 255

// MangledTTL returns the walk's TTL after TTL (HL) probe pr, for the
// walk's value v (xt_HL's ttl_tg: increments stop at 255, decrements at
// 0).
func MangledTTL(pr Probe, v uint32) uint32 {
	preDec := pr.Arg&ManglePreDec != 0
	if preDec {
		v++
	}
	switch pr.Arg & MangleOpMask {
	case MangleTTLSet:
		v = pr.Val
	case MangleTTLInc:
		v = min(v+pr.Val, maxTTL)
	case MangleTTLDec:
		if v > pr.Val {
			v -= pr.Val
		} else {
			v = 0
		}
	}
	if preDec && v > 0 {
		v--
	}
	return v
}

// rawCtView rewrites a raw segment's condition s on FieldCt for the
// walk's packet: raw runs before connection tracking, so conntrack_mt
// sees INVALID there, or, when the table has notrack rules (notrack),
// UNTRACKED after one (the walk's value CtNotrackValue). nil: every
// packet matches; an empty set: none.
func rawCtView(s *Set, notrack bool) *Set {
	key := Point(U64(uint64(ctKey(CtNotrackValue))))
	others := Complement(key, U64(0), U64(ctDomain-1))
	invalid, untracked := s.Contains(U64(0)), notrack && s.Contains(U64(uint64(ctKey(CtNotrackValue))))
	switch {
	case invalid && (untracked || !notrack):
		return nil
	case invalid && untracked:
		return nil
	case invalid:
		return others
	case untracked:
		return key
	}
	return &Set{}
}

// hasNotrack reports whether table t (raw) has a notrack rule.
func hasNotrack(t *ir.Ruleset) bool {
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			if r.Target.Kind == ir.TargetNotrack || r.Target.Kind == ir.TargetCTNotrack {
				return true
			}
		}
	}
	return false
}
