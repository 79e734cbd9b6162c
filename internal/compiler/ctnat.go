package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The conntrack match's --ctstate SNAT and DNAT (conntrack_mt): true when
// the packet's connection has its source (IPS_SRC_NAT) or destination
// (IPS_DST_NAT) translated. The translation is no classification field
// (FieldCt has no bits left for it), so a conntrack match whose
// --ctstate names SNAT or DNAT is asked by a probe of kind ProbeCtNat
// (bpf/ctnat.h) that answers the whole --ctstate test: Val has bit Cts*
// for each of the option's states and CtNatSNAT, CtNatDNAT, Arg 1 for
// "!". The match's other options stay the rule's terms, with a --ctstate
// that passes every state (so that, as in conntrack_mt, a packet without
// a connection passes on its state alone, which the probe decides).

// The probe's state bits for SNAT and DNAT (XFW_CTNAT_SNAT, _DNAT), above
// the five states' 1 << Cts*.
const (
	CtNatSNAT uint32 = 1 << 5
	CtNatDNAT uint32 = 1 << 6
)

// ctNatStates are the --ctstate bits a translation decides.
const ctNatStates = ir.CtStateSNAT | ir.CtStateDNAT

// ctAllStates is every --ctstate bit.
const ctAllStates = ir.CtStateInvalid | ir.CtStateNew | ir.CtStateEstablished | ir.CtStateRelated |
	ir.CtStateUntracked | ctNatStates

// ctNatProbed reports whether m's --ctstate is asked by a ProbeCtNat.
func ctNatProbed(m *ir.ConntrackMatch) bool {
	return m.States.Set && m.States.Bits&ctNatStates != 0
}

// ctNatProbe returns the probe asking m's --ctstate.
func ctNatProbe(m *ir.ConntrackMatch) (Probe, error) {
	if m.Expire.Set {
		return Probe{}, fmt.Errorf("conntrack match: --ctexpire with --ctstate SNAT or DNAT is not supported by xfw")
	}
	bits := []struct {
		state uint16
		val   uint32
	}{
		{ir.CtStateInvalid, 1 << CtsInvalid}, {ir.CtStateNew, 1 << CtsNew},
		{ir.CtStateEstablished, 1 << CtsEstablished}, {ir.CtStateRelated, 1 << CtsRelated},
		{ir.CtStateUntracked, 1 << CtsUntracked}, {ir.CtStateSNAT, CtNatSNAT}, {ir.CtStateDNAT, CtNatDNAT},
	}
	pr := Probe{Kind: ProbeCtNat}
	for _, b := range bits {
		if m.States.Bits&b.state != 0 {
			pr.Val |= b.val
		}
	}
	if m.States.Invert {
		pr.Arg = 1
	}
	return pr, nil
}

// ctNatTerms returns m as the rule's terms test it when its --ctstate is
// probed: the state option passing every state.
func ctNatTerms(m *ir.ConntrackMatch) *ir.ConntrackMatch {
	if !ctNatProbed(m) {
		return m
	}
	c := *m
	c.States = ir.CtBitsMatch{Set: true, Bits: ctAllStates}
	return &c
}

// CtNatAnswer is ProbeCtNat's answer for a packet whose FieldCt value is
// ct, its connection's translation given by snat and dnat.
func CtNatAnswer(pr Probe, ct uint32, snat, dnat bool) bool {
	state := ct & CtValStateMask
	bits := uint32(1) << state
	conn := uint8(state) != CtsInvalid && uint8(state) != CtsUntracked
	if conn && snat {
		bits |= CtNatSNAT
	}
	if conn && dnat {
		bits |= CtNatDNAT
	}
	return (bits&pr.Val != 0) != (pr.Arg&1 != 0)
}
