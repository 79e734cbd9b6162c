package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The esp match (libxt_esp.c, both families) and IPv4's ah match
// (libipt_ah.c): an SPI range each.

// spiOpt is the id of --espspi / --ahspi.
const spiOpt = 0

// espExt is the esp match module.
var espExt = registerMatch(&extension{
	name: "esp",
	x6: []x6opt{
		{name: "espspi", id: spiOpt, typ: xtUint32RC, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState {
		return &spiState{name: "esp"}
	},
})

// ah4Ext is IPv4's ah match module.
var ah4Ext = registerMatch(&extension{
	name:   "ah",
	family: ir.IPv4,
	x6: []x6opt{
		{name: "ahspi", id: spiOpt, typ: xtUint32RC, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState {
		return &spiState{name: "ah"}
	},
})

// spiState is one esp or IPv4 ah match being parsed.
type spiState struct {
	name  string // "esp" or "ah"
	spis  [2]uint32
	inv   bool
	flags x6flags
}

// parse implements matchState (esp_parse, ah_parse).
func (s *spiState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	e := s.ext()
	x, f := s.flags.begin(e, o.id, invert)
	if f != nil {
		return f
	}
	if s.spis, f = parseXTUint32Range(e.name, x, arg); f != nil {
		return f
	}
	s.inv = invert
	s.flags.done(o.id)
	return nil
}

// ext returns the module (espExt or ah4Ext; looked up by name, as the
// modules' constructors cannot name them).
func (s *spiState) ext() *extension { return matchExts[s.name] }

// final implements matchState.
func (s *spiState) final(*parseCtx) *failure { return s.flags.fcheck(s.ext()) }

// build implements matchState.
func (s *spiState) build() ir.Match {
	spis := s.spis
	if !s.flags.has(spiOpt) {
		spis = [2]uint32{0, math.MaxUint32}
	}
	if s.name == "esp" {
		return &ir.ESPMatch{SPIs: spis, InvSPIs: s.inv}
	}
	return &ir.AH4Match{SPIs: spis, InvSPIs: s.inv}
}

// writeSPIs prints an SPI range as esp_save and ah_save do. Deviation
// from 1.8.9: an inverted 0:4294967295 range is saved, as later releases
// and the conformance suite do.
func writeSPIs(b *strings.Builder, name string, r [2]uint32, inv bool) {
	if r[0] == 0 && r[1] == math.MaxUint32 && !inv {
		return
	}
	fmt.Fprintf(b, "%s --%s %s", invSpace(inv), name, rangeText(r))
}

// writeHdr4 prints an sctp, dccp, esp or IPv4 ah match as its save
// function does; false when m is none of them.
func writeHdr4(b *strings.Builder, m ir.Match) bool {
	switch m := m.(type) {
	case *ir.SCTPMatch:
		writeSCTP(b, m)
	case *ir.DCCPMatch:
		writeDCCP(b, m)
	case *ir.ESPMatch:
		writeSPIs(b, "espspi", m.SPIs, m.InvSPIs)
	case *ir.AH4Match:
		writeSPIs(b, "ahspi", m.SPIs, m.InvSPIs)
	default:
		return false
	}
	return true
}

// listHdr4 prints an sctp, dccp, esp or IPv4 ah match as its print
// function does (-L); false when m is none of them.
func (l *lister) listHdr4(m ir.Match) bool {
	switch m := m.(type) {
	case *ir.SCTPMatch:
		l.listSCTP(m)
	case *ir.DCCPMatch:
		l.listDCCP(m)
	case *ir.ESPMatch:
		l.b.WriteString(" esp")
		listNums(&l.b, "spi", m.SPIs, m.InvSPIs)
	case *ir.AH4Match:
		// ah_print: " ah " and print_spis without a leading space.
		var spis strings.Builder
		listNums(&spis, "spi", m.SPIs, m.InvSPIs)
		l.b.WriteString(" ah " + strings.TrimPrefix(spis.String(), " "))
	default:
		return false
	}
	return true
}

// hdr4ProtoOK is x_tables' protocol check of these matches (each module
// is registered for one protocol): the rule must have -p of it, not
// inverted.
func hdr4ProtoOK(r *ir.Rule, m ir.Match) bool {
	switch m.(type) {
	case *ir.SCTPMatch:
		return needsProto(r, protoSCTP)
	case *ir.DCCPMatch:
		return needsProto(r, protoDCCP)
	case *ir.ESPMatch:
		return needsProto(r, protoESP)
	}
	return needsProto(r, protoAH)
}
