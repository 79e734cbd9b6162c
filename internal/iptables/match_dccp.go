package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The dccp match (libxt_dccp.c, guided parser): ports, packet types and
// an option number.

// dccp guided option ids (O_SOURCE_PORT …).
const (
	dccpOptSport = iota
	dccpOptDport
	dccpOptTypes
	dccpOptOption
)

// dccpMaxOption is UINT8_MAX, --dccp-option's bound (its minimum is 1).
const dccpMaxOption = 255

// dccpExt is the dccp match module.
var dccpExt = registerMatch(&extension{
	name: "dccp",
	x6: []x6opt{
		{name: "source-port", id: dccpOptSport, typ: xtPortRC, flags: xtInvert},
		{name: "sport", id: dccpOptSport, typ: xtPortRC, flags: xtInvert},
		{name: "destination-port", id: dccpOptDport, typ: xtPortRC, flags: xtInvert},
		{name: "dport", id: dccpOptDport, typ: xtPortRC, flags: xtInvert},
		{name: "dccp-types", id: dccpOptTypes, typ: xtString, flags: xtInvert},
		{name: "dccp-option", id: dccpOptOption, typ: xtUint8, flags: xtInvert, min: 1, max: dccpMaxOption},
	},
	newMatch: func(*parseCtx) matchState { return &dccpState{} },
})

// dccpTypeNames are the packet type names (dccp_pkt_types), by type.
// INVALID stands for every type from 10 up (the header's four bits).
var dccpTypeNames = []string{"REQUEST", "RESPONSE", "DATA", "ACK", "DATAACK",
	"CLOSEREQ", "CLOSE", "RESET", "SYNC", "SYNCACK", "INVALID"}

// dccpInvalid is DCCP_PKT_INVALID and dccpInvalidMask its types 10-15.
const (
	dccpInvalid     = 10
	dccpInvalidMask = 0xfc00
)

// dccpState is one dccp match being parsed.
type dccpState struct {
	m     ir.DCCPMatch
	flags x6flags
}

// parse implements matchState (dccp_parse).
func (s *dccpState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(dccpExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case dccpOptSport, dccpOptDport:
		pm := &s.m.SrcPort
		if o.id == dccpOptDport {
			pm = &s.m.DstPort
		}
		if pm.Range, f = parsePortRangeRC(dccpExt.name, x, arg); f != nil {
			return f
		}
		pm.Set, pm.Invert = true, invert
	case dccpOptTypes:
		if s.m.TypeMask, f = parseDCCPTypes(arg); f != nil {
			return f
		}
		s.m.HasTypes, s.m.InvTypes = true, invert
	case dccpOptOption:
		if s.m.Option, f = x.parseUint8(dccpExt.name, arg); f != nil {
			return f
		}
		s.m.HasOption, s.m.InvOption = true, invert
	}
	s.flags.done(o.id)
	return nil
}

// parseDCCPTypes is parse_dccp_types: comma-separated type names.
func parseDCCPTypes(arg string) (uint16, *failure) {
	var mask uint16
	for _, word := range strings.Split(arg, ",") {
		if word == "" {
			continue
		}
		found := false
		for t, name := range dccpTypeNames {
			if strings.EqualFold(name, word) {
				if t == dccpInvalid {
					mask |= dccpInvalidMask
				} else {
					mask |= 1 << t
				}
				found = true
				break
			}
		}
		if !found {
			return 0, paramErr("Unknown DCCP type `%s'", word)
		}
	}
	return mask, nil
}

// final implements matchState.
func (s *dccpState) final(*parseCtx) *failure { return s.flags.fcheck(dccpExt) }

// build implements matchState.
func (s *dccpState) build() ir.Match { m := s.m; return &m }

// dccpTypes is print_types: the types by name (INVALID once for types
// 10-15) or, numeric, by number.
func dccpTypes(b *strings.Builder, mask uint16, numeric bool) {
	b.WriteByte(' ')
	sep := ""
	for t := 0; t < 16; t++ {
		if mask&(1<<t) == 0 {
			continue
		}
		b.WriteString(sep)
		sep = ","
		if numeric {
			fmt.Fprintf(b, "%d", t)
			continue
		}
		if t >= dccpInvalid {
			b.WriteString(dccpTypeNames[dccpInvalid])
			return
		}
		b.WriteString(dccpTypeNames[t])
	}
}

// writeDCCP prints the match as dccp_save does.
func writeDCCP(b *strings.Builder, m *ir.DCCPMatch) {
	writeSCTPPorts(b, "sport", m.SrcPort)
	writeSCTPPorts(b, "dport", m.DstPort)
	if m.HasTypes {
		b.WriteString(invSpace(m.InvTypes) + " --dccp-types")
		dccpTypes(b, m.TypeMask, false)
	}
	if m.HasOption {
		fmt.Fprintf(b, "%s --dccp-option %d", invSpace(m.InvOption), m.Option)
	}
}

// listDCCP prints the match as dccp_print does (-L).
func (l *lister) listDCCP(m *ir.DCCPMatch) {
	l.b.WriteString(" dccp")
	l.givenPorts(m.SrcPort, m.DstPort, "dccp")
	if m.HasTypes {
		l.b.WriteString(invSpace(m.InvTypes))
		dccpTypes(&l.b, m.TypeMask, l.opts.Numeric)
	}
	if m.HasOption && (m.Option != 0 || m.InvOption) {
		l.printf(" option=%s%d", invString(m.InvOption), m.Option)
	}
}
