package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The ah match of ip6tables (libip6t_ah.c): IPv6 authentication header
// fields. (IPv4's -m ah is another module, libipt_ah.)

// ah6 guided option ids (O_AHSPI …).
const (
	ah6OptSPI = iota
	ah6OptLen
	ah6OptRes
)

// ah6Ext is the IPv6 ah match module.
var ah6Ext = registerMatch6(&extension{
	name:   "ah",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "ahspi", id: ah6OptSPI, typ: xtUint32RC, flags: xtInvert},
		{name: "ahlen", id: ah6OptLen, typ: xtUint32, flags: xtInvert},
		{name: "ahres", id: ah6OptRes, typ: xtNone},
	},
	newMatch: func(*parseCtx) matchState {
		return &ah6State{m: ir.AH6Match{SPIs: [2]uint32{0, math.MaxUint32}}}
	},
})

// ah6State is one IPv6 ah match being parsed.
type ah6State struct {
	m     ir.AH6Match
	flags x6flags
}

// parse implements matchState (ah_parse).
func (s *ah6State) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(ah6Ext, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case ah6OptSPI:
		if s.m.SPIs, f = parseXTUint32Range(ah6Ext.name, x, arg); f != nil {
			return f
		}
		s.m.InvSPIs = s.m.InvSPIs || invert
	case ah6OptLen:
		if s.m.Len, f = parseXTUint32(ah6Ext.name, x, arg); f != nil {
			return f
		}
		s.m.InvLen = s.m.InvLen || invert
	case ah6OptRes:
		s.m.Res = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *ah6State) final(*parseCtx) *failure { return s.flags.fcheck(ah6Ext) }

// build implements matchState.
func (s *ah6State) build() ir.Match { m := s.m; return &m }

// writeAH6 prints the match as ah_save does. Deviation from 1.8.9: an
// inverted 0:4294967295 range is saved, as later releases and the
// conformance suite do.
func writeAH6(b *strings.Builder, m *ir.AH6Match) {
	if !(m.SPIs[0] == 0 && m.SPIs[1] == math.MaxUint32 && !m.InvSPIs) {
		fmt.Fprintf(b, "%s --ahspi %s", bangIf(m.InvSPIs), rangeText(m.SPIs))
	}
	if m.Len != 0 || m.InvLen {
		fmt.Fprintf(b, "%s --ahlen %d", bangIf(m.InvLen), m.Len)
	}
	if m.Res {
		b.WriteString(" --ahres")
	}
}

// listAH6 prints the match as ah_print does (-L): neither print_spis nor
// print_len puts a space before its name.
func listAH6(b *strings.Builder, m *ir.AH6Match) {
	b.WriteString(" ah ")
	var spis strings.Builder
	listNums(&spis, "spi", m.SPIs, m.InvSPIs)
	b.WriteString(strings.TrimPrefix(spis.String(), " "))
	if m.Len != 0 || m.InvLen {
		fmt.Fprintf(b, "length:%s%d", invString(m.InvLen), m.Len)
	}
	if m.Res {
		b.WriteString(" reserved")
	}
}

// writeIP6Ext prints an IPv6 extension header match as its save function
// does; false when m is none.
func writeIP6Ext(b *strings.Builder, m ir.Match) bool { return formatIP6Ext(b, m, false) }

// listIP6Ext prints an IPv6 extension header match as its print function
// does (-L); false when m is none.
func listIP6Ext(b *strings.Builder, m ir.Match) bool { return formatIP6Ext(b, m, true) }

// formatIP6Ext is writeIP6Ext (list false) and listIP6Ext (list true).
func formatIP6Ext(b *strings.Builder, m ir.Match, list bool) bool {
	switch m := m.(type) {
	case *ir.RTMatch:
		pick2(list, listRT, writeRT)(b, m)
	case *ir.FragMatch:
		pick2(list, listFrag, writeFrag)(b, m)
	case *ir.AH6Match:
		pick2(list, listAH6, writeAH6)(b, m)
	default:
		return !list && writeIP6Hdr2(b, m)
	}
	return true
}

// pick2 returns a when first, else b.
func pick2[T any](first bool, a, b T) T {
	if first {
		return a
	}
	return b
}
