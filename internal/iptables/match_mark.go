package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The mark match (libxt_mark revision 1) and the MARK target (libxt_MARK
// revision 2, xt_mark.c): options, checks and printing as iptables 1.8.9.
// The kernel restricts neither to a table or hook.

// markExt is the mark match module.
var markExt = registerMatch(&extension{
	name: "mark",
	x6: []x6opt{
		{name: "mark", id: 0, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &markState{name: "mark"} },
})

// markState is one mark or connmark match being parsed: both take one
// [!] --mark VALUE[/MASK].
type markState struct {
	name  string // the module: "mark" or "connmark" (match_connmark.go)
	m     ir.MarkMatch
	flags x6flags
}

// parse implements matchState.
func (s *markState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(matchExts[s.name], o.id, invert)
	if f != nil {
		return f
	}
	v, m, f := parseMarkMask(s.name, x.name, arg)
	if f != nil {
		return f
	}
	s.m = ir.MarkMatch{Value: v, Mask: m, Invert: invert}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *markState) final(*parseCtx) *failure { return s.flags.fcheck(matchExts[s.name]) }

// build implements matchState.
func (s *markState) build() ir.Match {
	m := s.m
	if s.name == connmarkExt.name {
		return &ir.ConnmarkMatch{Value: m.Value, Mask: m.Mask, Invert: m.Invert}
	}
	return &m
}

// parseMarkMask is xtopt_parse_markmask: VALUE[/MASK], the mask all ones
// when absent.
func parseMarkMask(ext, opt, arg string) (value, mask uint32, f *failure) {
	bad := paramErr("%s: bad integer value for option \"--%s\", or out of range.\n", ext, opt)
	v, end, ok := xtStrtouiPrefix(arg, 0, math.MaxUint32)
	if !ok {
		return 0, 0, bad
	}
	m := uint64(math.MaxUint32)
	if end < len(arg) && arg[end] == '/' {
		rest := arg[end+1:]
		var n int
		if m, n, ok = xtStrtouiPrefix(rest, 0, math.MaxUint32); !ok {
			return 0, 0, bad
		}
		end += 1 + n
	}
	if end != len(arg) {
		return 0, 0, paramErr("%s: trailing garbage after value for option \"--%s\".\n", ext, opt)
	}
	return uint32(v), uint32(m), nil
}

// markText prints VALUE[/MASK] (print_mark): the mask when not all ones.
func markText(value, mask uint32) string {
	if mask == math.MaxUint32 {
		return fmt.Sprintf(" 0x%x", value)
	}
	return fmt.Sprintf(" 0x%x/0x%x", value, mask)
}

// writeMark prints the mark match as iptables-save does.
func writeMark(b *strings.Builder, m *ir.MarkMatch) {
	if m.Invert {
		b.WriteString(" !")
	}
	b.WriteString(" --mark" + markText(m.Value, m.Mask))
}

// markListing is the mark match as iptables -L prints it.
func markListing(m *ir.MarkMatch) string {
	s := " mark match"
	if m.Invert {
		s += " !"
	}
	return s + markText(m.Value, m.Mask)
}

// MARK target option ids (libxt_MARK's enum).
const (
	markOptSetXMark = iota
	markOptSetMark
	markOptAndMark
	markOptOrMark
	markOptXorMark
)

// markAnyOpt is F_ANY: the options exclude each other.
const markAnyOpt = 1<<markOptSetXMark | 1<<markOptSetMark | 1<<markOptAndMark | 1<<markOptOrMark | 1<<markOptXorMark

// markTargetExt is the MARK target module (revision 2).
var markTargetExt = registerTarget(&extension{
	name: "MARK",
	x6: []x6opt{
		{name: "set-xmark", id: markOptSetXMark, typ: xtString, excl: markAnyOpt},
		{name: "set-mark", id: markOptSetMark, typ: xtString, excl: markAnyOpt},
		{name: "and-mark", id: markOptAndMark, typ: xtUint32, max: math.MaxUint32, excl: markAnyOpt},
		{name: "or-mark", id: markOptOrMark, typ: xtUint32, max: math.MaxUint32, excl: markAnyOpt},
		{name: "xor-mark", id: markOptXorMark, typ: xtUint32, max: math.MaxUint32, excl: markAnyOpt},
	},
	newTarget: func(*parseCtx) targetState { return &markTargetState{} },
})

// markTargetState is a MARK target being parsed.
type markTargetState struct {
	t     ir.MarkTarget
	flags x6flags
}

// parse implements targetState (mark_tg_parse).
func (s *markTargetState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(markTargetExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case markOptSetXMark, markOptSetMark:
		v, m, f := parseMarkMask(markTargetExt.name, x.name, arg)
		if f != nil {
			return f
		}
		if o.id == markOptSetMark {
			m |= v
		}
		s.t = ir.MarkTarget{Value: v, Mask: m}
	default:
		u, ok := xtStrtoui(arg, 0, math.MaxUint32)
		if !ok {
			return paramErr("MARK: bad value for option \"--%s\", or out of range (0-4294967295).\n", x.name)
		}
		v := uint32(u)
		switch o.id {
		case markOptAndMark:
			s.t = ir.MarkTarget{Value: 0, Mask: ^v}
		case markOptOrMark:
			s.t = ir.MarkTarget{Value: v, Mask: v}
		case markOptXorMark:
			s.t = ir.MarkTarget{Value: v, Mask: 0}
		}
	}
	s.flags.done(o.id)
	return nil
}

// final implements targetState (mark_tg_check).
func (s *markTargetState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("MARK: One of the --set-xmark, --{and,or,xor,set}-mark options is required")
	}
	return s.flags.fcheck(markTargetExt)
}

// build implements targetState.
func (s *markTargetState) build(t *ir.Target) {
	*t = ir.Target{Kind: ir.TargetMark, Mark: s.t}
}

// markTargetSave is the MARK target's options as iptables-save prints them.
func markTargetSave(t ir.MarkTarget) string {
	return fmt.Sprintf(" --set-xmark 0x%x/0x%x", t.Value, t.Mask)
}

// markTargetListing is the MARK target as iptables -L prints it
// (mark_tg_print).
func markTargetListing(t ir.MarkTarget) string {
	switch {
	case t.Value == 0:
		return fmt.Sprintf(" MARK and 0x%x", ^t.Mask)
	case t.Value == t.Mask:
		return fmt.Sprintf(" MARK or 0x%x", t.Value)
	case t.Mask == 0:
		return fmt.Sprintf(" MARK xor 0x%x", t.Value)
	case t.Mask == math.MaxUint32:
		return fmt.Sprintf(" MARK set 0x%x", t.Value)
	}
	return fmt.Sprintf(" MARK xset 0x%x/0x%x", t.Value, t.Mask)
}
