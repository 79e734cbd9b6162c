package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The physdev match (libxt_physdev, xt_physdev.c): options, checks and
// printing as iptables 1.8.9. Every option may be inverted; each once. The
// kernel refuses --physdev-out and --physdev-is-out in a chain reached
// from OUTPUT unless --physdev-is-bridged (not inverted) is given too
// (physdevOK).

// Physdev option ids (libxt_physdev's enum).
const (
	physdevOptIn = iota
	physdevOptOut
	physdevOptIsIn
	physdevOptIsOut
	physdevOptIsBridged
)

// physdevExt is the physdev match module.
var physdevExt = registerMatch(&extension{
	name: "physdev",
	x6: []x6opt{
		{name: "physdev-in", id: physdevOptIn, typ: xtString, flags: xtInvert},
		{name: "physdev-out", id: physdevOptOut, typ: xtString, flags: xtInvert},
		{name: "physdev-is-in", id: physdevOptIsIn, typ: xtNone, flags: xtInvert},
		{name: "physdev-is-out", id: physdevOptIsOut, typ: xtNone, flags: xtInvert},
		{name: "physdev-is-bridged", id: physdevOptIsBridged, typ: xtNone, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &physdevState{} },
})

// physdevState is one physdev match being parsed.
type physdevState struct {
	m     ir.PhysdevMatch
	flags x6flags
}

// physdevBits maps option ids to XT_PHYSDEV_OP_* bits.
var physdevBits = [...]uint8{
	physdevOptIn:        ir.PhysdevIn,
	physdevOptOut:       ir.PhysdevOut,
	physdevOptIsIn:      ir.PhysdevIsIn,
	physdevOptIsOut:     ir.PhysdevIsOut,
	physdevOptIsBridged: ir.PhysdevBridged,
}

// parse implements matchState (physdev_parse, with
// xtables_parse_interface for the names).
func (s *physdevState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(physdevExt, o.id, invert); f != nil {
		return f
	}
	if o.id == physdevOptIn || o.id == physdevOptOut {
		if len(arg)+1 > ifNameSize {
			return paramErr("interface name `%s' must be shorter than IFNAMSIZ (%d)", arg, ifNameSize-1)
		}
		if arg != "" && !strings.HasSuffix(arg, "+") && strings.ContainsAny(arg, "/ ") && c.notice != nil {
			c.notice("Warning: weird character in interface `" + arg + "' ('/' and ' ' are not allowed by the kernel).")
		}
		if o.id == physdevOptIn {
			s.m.In = arg
		} else {
			s.m.Out = arg
		}
	}
	bit := physdevBits[o.id]
	s.m.Bitmask |= bit
	if invert {
		s.m.Invert |= bit
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState (physdev_check).
func (s *physdevState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("PHYSDEV: no physdev option specified")
	}
	return nil
}

// build implements matchState.
func (s *physdevState) build() ir.Match { m := s.m; return &m }

// physdevText is physdev_save (and physdev_print after its " PHYSDEV
// match"): the options in the order is-in, in, is-out, out, is-bridged.
func physdevText(m *ir.PhysdevMatch) string {
	var b strings.Builder
	opt := func(bit uint8, text string) {
		if m.Bitmask&bit == 0 {
			return
		}
		if m.Invert&bit != 0 {
			b.WriteString(" !")
		}
		b.WriteString(text)
	}
	opt(ir.PhysdevIsIn, " --physdev-is-in")
	opt(ir.PhysdevIn, " --physdev-in "+m.In)
	opt(ir.PhysdevIsOut, " --physdev-is-out")
	opt(ir.PhysdevOut, " --physdev-out "+m.Out)
	opt(ir.PhysdevBridged, " --physdev-is-bridged")
	return b.String()
}

// physdevOK is physdev_mt_check's hook check: the output port is known
// only for bridged packets, never in OUTPUT.
func physdevOK(m *ir.PhysdevMatch, hooks hookMask) bool {
	bridged := m.Bitmask&ir.PhysdevBridged != 0 && m.Invert&ir.PhysdevBridged == 0
	return m.Bitmask&(ir.PhysdevOut|ir.PhysdevIsOut) == 0 || bridged || hooks&hookLocalOut == 0
}
