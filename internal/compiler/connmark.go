package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The connmark match and the CONNMARK target in the walk (xt_connmark.c).
//
// The connection's mark lives in the data plane's connection entry
// (bpf/connmark.h): a packet without a connection (INVALID, UNTRACKED) has
// none, the match is false for it whatever its inversion and the target
// does nothing, as the kernel's nf_ct_get finds no connection. A CONNMARK
// rule changes the mark in rule order, so a later -m connmark (or, with
// --restore-mark, a later -m mark) sees the change: the match is a probe
// (ProbeConnmark), the target an action entry (EFAct) whose probe
// (ProbeSetConnmark) the walk runs for its effect, as MARK's (mark.go).
// Both read the packet's connection, so their entries carry the
// condition that makes the generation track connections (ctFullKeys).

// Probe arguments of ProbeSetConnmark (Probe.Arg): the mode in the low
// byte (ir.ConnmarkSet, ...), the shift direction and width above it.
const (
	// ConnmarkModeMask selects the mode.
	ConnmarkModeMask = 0xff
	// ConnmarkShiftRight shifts right (else left).
	ConnmarkShiftRight = 1 << 8
	// ConnmarkShiftPos is the position of the shift's width (0-31).
	ConnmarkShiftPos = 16
	// ConnmarkShiftBits selects the width after the shift: a 32-bit
	// shift in C takes the count modulo 32 on the machines the kernel
	// runs on, and the kernel refuses 32 anyway (iptables' check).
	ConnmarkShiftBits = 31
)

// connmarkProbe returns the probe of a connmark match: Arg 1 when
// inverted.
func connmarkProbe(m *ir.ConnmarkMatch) Probe {
	pr := Probe{Kind: ProbeConnmark, Val: m.Value, Mask: m.Mask}
	if m.Invert {
		pr.Arg = 1
	}
	return pr
}

// ConnmarkSetProbe returns the probe of a CONNMARK target: Arg packs the
// mode and the shift, Mask is the ctmask, Val the ctmark (--set-*) or
// the nfmask (--save-mark, --restore-mark, whose ctmark is unused).
func ConnmarkSetProbe(t *ir.ConnmarkTarget) (Probe, error) {
	if t.Mode > ir.ConnmarkRestore {
		return Probe{}, fmt.Errorf("CONNMARK target: mode %d is not supported by xfw", t.Mode)
	}
	pr := Probe{Kind: ProbeSetConnmark, Mask: t.CtMask, Val: t.CtMark,
		Arg: uint32(t.Mode) | uint32(t.ShiftBits&ConnmarkShiftBits)<<ConnmarkShiftPos}
	if t.ShiftRight {
		pr.Arg |= ConnmarkShiftRight
	}
	if t.Mode != ir.ConnmarkSet {
		pr.Val = t.NfMask
	}
	return pr, nil
}

// connmarkAction fills e, the entry of a CONNMARK rule: a counted
// CONTINUE entry whose probe changes the connection's or the packet's
// mark, under the condition that keeps connections tracked.
func (fl *flattener) connmarkAction(e *Entry, t *ir.ConnmarkTarget) error {
	if t == nil {
		return fmt.Errorf("CONNMARK target without values")
	}
	pr, err := ConnmarkSetProbe(t)
	if err != nil {
		return err
	}
	k, err := fl.probeIndex(pr)
	if err != nil {
		return err
	}
	cond, _ := e.Cond.Full().and(Cond{FieldCt: ctFullKeys})
	e.Cond = cond.List()
	e.Action, e.Aux = ActContinue, k
	e.Flags |= EFAct
	return nil
}

// connmarkShift shifts v as the probe's Arg says.
func connmarkShift(arg, v uint32) uint32 {
	n := arg >> ConnmarkShiftPos & ConnmarkShiftBits
	if arg&ConnmarkShiftRight != 0 {
		return v >> n
	}
	return v << n
}

// ConnmarkApply is the CONNMARK target (connmark_tg_shift) on a packet's
// mark and its connection's: the new marks.
func ConnmarkApply(pr Probe, mark, ctmark uint32) (newMark, newCtmark uint32) {
	switch ir.ConnmarkMode(pr.Arg & ConnmarkModeMask) {
	case ir.ConnmarkSet:
		ctmark = connmarkShift(pr.Arg, ctmark&^pr.Mask^pr.Val)
	case ir.ConnmarkSave:
		ctmark = ctmark&^pr.Mask ^ connmarkShift(pr.Arg, mark&pr.Val)
	case ir.ConnmarkRestore:
		mark = mark&^pr.Val ^ connmarkShift(pr.Arg, ctmark&pr.Mask)
	}
	return mark, ctmark
}

// hasConnection reports whether the packet belongs to a connection (it
// has a connection mark).
func (p *Packet) hasConnection() bool {
	s := uint8(p.Ct & CtValStateMask)
	return s != CtsInvalid && s != CtsUntracked
}

// connmarkAnswer answers a connmark-kind probe for the simulator, updating
// p.Mark and p.CtMark for ProbeSetConnmark (always true).
func (p *Packet) connmarkAnswer(pr Probe) bool {
	switch pr.Kind {
	case ProbeConnmark:
		return p.hasConnection() && (p.CtMark&pr.Mask == pr.Val) != (pr.Arg != 0)
	case ProbeSetConnmark:
		if p.hasConnection() {
			p.Mark, p.CtMark = ConnmarkApply(pr, p.Mark, p.CtMark)
		}
		return true
	}
	return false
}
