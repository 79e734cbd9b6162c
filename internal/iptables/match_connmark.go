package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The connmark match (libxt_connmark revision 1) and the CONNMARK target
// (libxt_CONNMARK revision 2, xt_connmark.c): options, checks and printing
// as iptables 1.8.9. The kernel restricts neither to a table or hook.

// connmarkExt is the connmark match module.
var connmarkExt = registerMatch(&extension{
	name: "connmark",
	x6: []x6opt{
		{name: "mark", id: 0, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &markState{name: "connmark"} },
})

// writeConnmark prints the connmark match as iptables-save does: as the
// mark match's options.
func writeConnmark(b *strings.Builder, m *ir.ConnmarkMatch) {
	writeMark(b, &ir.MarkMatch{Value: m.Value, Mask: m.Mask, Invert: m.Invert})
}

// connmarkListing is the connmark match as iptables -L prints it
// (connmark_mt_print: a space before the inversion and one after it).
func connmarkListing(m *ir.ConnmarkMatch) string {
	s := " connmark match "
	if m.Invert {
		s += "!"
	}
	return s + markText(m.Value, m.Mask)
}

// CONNMARK target option ids (libxt_CONNMARK's enum).
const (
	cmOptSetMark = iota
	cmOptSaveMark
	cmOptRestoreMark
	cmOptAndMark
	cmOptOrMark
	cmOptXorMark
	cmOptLeftShift
	cmOptRightShift
	cmOptSetXMark
	cmOptCtMask
	cmOptNfMask
	cmOptMask
)

// cmAnyOp is F_OP_ANY: the operations exclude each other.
const cmAnyOp = 1<<cmOptSetMark | 1<<cmOptSaveMark | 1<<cmOptRestoreMark | 1<<cmOptAndMark |
	1<<cmOptOrMark | 1<<cmOptXorMark | 1<<cmOptSetXMark

// cmMaxShift is the largest shift libxt_CONNMARK accepts; the kernel
// refuses 32 (connmark_tg_check_v2: shift_bits > 31).
const (
	cmMaxShift       = 32
	cmMaxKernelShift = 31
)

// connmarkTargetExt is the CONNMARK target module (revision 2).
var connmarkTargetExt = registerTarget(&extension{
	name: "CONNMARK",
	x6: []x6opt{
		{name: "set-xmark", id: cmOptSetXMark, typ: xtString, excl: cmAnyOp},
		{name: "set-mark", id: cmOptSetMark, typ: xtString, excl: cmAnyOp},
		{name: "and-mark", id: cmOptAndMark, typ: xtUint32, max: math.MaxUint32, excl: cmAnyOp},
		{name: "or-mark", id: cmOptOrMark, typ: xtUint32, max: math.MaxUint32, excl: cmAnyOp},
		{name: "xor-mark", id: cmOptXorMark, typ: xtUint32, max: math.MaxUint32, excl: cmAnyOp},
		{name: "save-mark", id: cmOptSaveMark, typ: xtNone, excl: cmAnyOp},
		{name: "restore-mark", id: cmOptRestoreMark, typ: xtNone, excl: cmAnyOp},
		{name: "left-shift-mark", id: cmOptLeftShift, typ: xtUint8, max: cmMaxShift},
		{name: "right-shift-mark", id: cmOptRightShift, typ: xtUint8, max: cmMaxShift},
		{name: "ctmask", id: cmOptCtMask, typ: xtUint32, max: math.MaxUint32, excl: 1 << cmOptMask},
		{name: "nfmask", id: cmOptNfMask, typ: xtUint32, max: math.MaxUint32, excl: 1 << cmOptMask},
		{name: "mask", id: cmOptMask, typ: xtUint32, max: math.MaxUint32, excl: 1<<cmOptCtMask | 1<<cmOptNfMask},
	},
	newTarget: func(*parseCtx) targetState {
		// connmark_tg_init: both masks all ones, no shift.
		return &connmarkTargetState{t: ir.ConnmarkTarget{CtMask: math.MaxUint32, NfMask: math.MaxUint32}}
	},
})

// connmarkTargetState is a CONNMARK target being parsed.
type connmarkTargetState struct {
	t     ir.ConnmarkTarget
	flags x6flags
}

// parse implements targetState (connmark_tg_parse_v2).
func (s *connmarkTargetState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(connmarkTargetExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case cmOptSetXMark, cmOptSetMark:
		v, m, f := parseMarkMask(connmarkTargetExt.name, x.name, arg)
		if f != nil {
			return f
		}
		if o.id == cmOptSetMark {
			m |= v
		}
		s.t.Mode, s.t.CtMark, s.t.CtMask = ir.ConnmarkSet, v, m
	case cmOptSaveMark:
		s.t.Mode = ir.ConnmarkSave
	case cmOptRestoreMark:
		s.t.Mode = ir.ConnmarkRestore
	case cmOptLeftShift, cmOptRightShift:
		n, f := x.parseUint8(connmarkTargetExt.name, arg)
		if f != nil {
			return f
		}
		s.t.ShiftRight, s.t.ShiftBits = o.id == cmOptRightShift, n
	default:
		u, ok := xtStrtoui(arg, 0, math.MaxUint32)
		if !ok {
			return paramErr("CONNMARK: bad value for option \"--%s\", or out of range (0-4294967295).\n", x.name)
		}
		s.setValue(o.id, uint32(u))
	}
	s.flags.done(o.id)
	return nil
}

// setValue applies a 32-bit option: the and/or/xor spellings of SET, or
// a mask.
func (s *connmarkTargetState) setValue(id int, v uint32) {
	switch id {
	case cmOptAndMark:
		s.t.Mode, s.t.CtMark, s.t.CtMask = ir.ConnmarkSet, 0, ^v
	case cmOptOrMark:
		s.t.Mode, s.t.CtMark, s.t.CtMask = ir.ConnmarkSet, v, v
	case cmOptXorMark:
		s.t.Mode, s.t.CtMark, s.t.CtMask = ir.ConnmarkSet, v, 0
	case cmOptCtMask:
		s.t.CtMask = v
	case cmOptNfMask:
		s.t.NfMask = v
	case cmOptMask:
		s.t.CtMask, s.t.NfMask = v, v
	}
}

// final implements targetState (connmark_tg_check, then the guided
// checks).
func (s *connmarkTargetState) final(*parseCtx) *failure {
	if uint32(s.flags)&cmAnyOp == 0 {
		return paramErr("CONNMARK target: No operation specified")
	}
	return s.flags.fcheck(connmarkTargetExt)
}

// build implements targetState.
func (s *connmarkTargetState) build(t *ir.Target) {
	c := s.t
	*t = ir.Target{Kind: ir.TargetConnmark, Connmark: &c}
}

// connmarkShiftText is the shift as save (--NAME N) or list (NAME N)
// prints it, empty without one.
func connmarkShiftText(t *ir.ConnmarkTarget, dashes string) string {
	if t.ShiftBits == 0 {
		return ""
	}
	name := "left-shift-mark"
	if t.ShiftRight {
		name = "right-shift-mark"
	}
	return fmt.Sprintf(" %s%s %d", dashes, name, t.ShiftBits)
}

// connmarkTargetSave is the CONNMARK target's options as iptables-save
// prints them (connmark_tg_save_v2).
func connmarkTargetSave(t *ir.ConnmarkTarget) string {
	var s string
	switch t.Mode {
	case ir.ConnmarkSet:
		s = fmt.Sprintf(" --set-xmark 0x%x/0x%x", t.CtMark, t.CtMask)
	case ir.ConnmarkSave:
		s = fmt.Sprintf(" --save-mark --nfmask 0x%x --ctmask 0x%x", t.NfMask, t.CtMask)
	default:
		s = fmt.Sprintf(" --restore-mark --nfmask 0x%x --ctmask 0x%x", t.NfMask, t.CtMask)
	}
	return s + connmarkShiftText(t, "--")
}

// connmarkTargetListing is the CONNMARK target as iptables -L prints it
// (connmark_tg_print_v2, with its labels: "ctmask ~" for save's ctmask,
// "nfmask ~" for restore's nfmask).
func connmarkTargetListing(t *ir.ConnmarkTarget) string {
	var s string
	switch t.Mode {
	case ir.ConnmarkSet:
		s = markTargetListing(ir.MarkTarget{Value: t.CtMark, Mask: t.CtMask})
		s = " CONNMARK" + s[len(" MARK"):]
	case ir.ConnmarkSave:
		s = connmarkMaskListing("save", t.NfMask, t.CtMask, "nfmask", "ctmask")
	default:
		s = connmarkMaskListing("restore", t.CtMask, t.NfMask, "ctmask", "nfmask")
	}
	return s + connmarkShiftText(t, "")
}

// connmarkMaskListing is the listing of --save-mark (restore) with its
// masks: a first mask named a, a second b (connmark_tg_print_v2 labels the
// second with "~").
func connmarkMaskListing(verb string, a, b uint32, aName, bName string) string {
	switch {
	case a == math.MaxUint32 && b == math.MaxUint32:
		return " CONNMARK " + verb
	case a == b:
		return fmt.Sprintf(" CONNMARK %s mask 0x%x", verb, a)
	}
	return fmt.Sprintf(" CONNMARK %s %s 0x%x %s ~0x%x", verb, aName, a, bName, b)
}

// checkConnmarkTarget is connmark_tg_check_v2's refusal of a shift the
// kernel cannot make (EINVAL).
func checkConnmarkTarget(t *ir.ConnmarkTarget) *failure {
	if t != nil && t.ShiftBits > cmMaxKernelShift {
		return kernelEINVAL()
	}
	return nil
}
