package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The connlimit match (libxt_connlimit, revision 1): --connlimit-upto N,
// --connlimit-above N (either invertible, each the other's inverse),
// --connlimit-mask BITS, --connlimit-saddr or --connlimit-daddr, and its
// output.

// connlimit guided option ids, in libxt_connlimit's order (the order of
// its exclusion messages).
const (
	connlimitOptUpto = iota
	connlimitOptAbove
	connlimitOptMask
	connlimitOptSaddr
	connlimitOptDaddr
)

// connlimitExt is the connlimit match module.
var connlimitExt = registerMatch(&extension{
	name: "connlimit",
	x6: []x6opt{
		{name: "connlimit-upto", id: connlimitOptUpto, typ: xtUint32, flags: xtInvert,
			excl: 1 << connlimitOptAbove, max: 1<<32 - 1},
		{name: "connlimit-above", id: connlimitOptAbove, typ: xtUint32, flags: xtInvert,
			excl: 1 << connlimitOptUpto, max: 1<<32 - 1},
		{name: "connlimit-mask", id: connlimitOptMask, typ: xtString},
		{name: "connlimit-saddr", id: connlimitOptSaddr, typ: xtNone, excl: 1 << connlimitOptDaddr},
		{name: "connlimit-daddr", id: connlimitOptDaddr, typ: xtNone, excl: 1 << connlimitOptSaddr},
	},
	newMatch: func(c *parseCtx) matchState {
		// connlimit_init: the mask is all ones.
		return &connlimitState{m: ir.ConnlimitMatch{MaskBits: uint8(familyBits(c.fam))}}
	},
})

// familyBits is the length in bits of the family's addresses.
func familyBits(fam ir.Family) int {
	if fam == ir.IPv6 {
		return ipv6Bits
	}
	return ipv4Bits
}

// connlimitState is one connlimit match being parsed.
type connlimitState struct {
	m     ir.ConnlimitMatch
	flags x6flags
}

// parse implements matchState.
func (s *connlimitState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(connlimitExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case connlimitOptUpto, connlimitOptAbove:
		v, ok := xtStrtoui(arg, x.min, x.max)
		if !ok {
			return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n",
				connlimitExt.name, x.name, x.min, x.max)
		}
		s.m.Limit = uint32(v)
		// XT_CONNLIMIT_INVERT: set by --connlimit-upto, or by
		// ! --connlimit-above.
		s.m.Upto = (o.id == connlimitOptUpto) != invert
	case connlimitOptMask:
		bits, f := parsePlenMask(c.fam, connlimitExt.name, x.name, arg)
		if f != nil {
			return f
		}
		s.m.MaskBits = uint8(bits)
	case connlimitOptSaddr:
		s.m.Daddr = false
	case connlimitOptDaddr:
		s.m.Daddr = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState: connlimit_check, then the exclusions.
func (s *connlimitState) final(*parseCtx) *failure {
	if !s.flags.has(connlimitOptUpto) && !s.flags.has(connlimitOptAbove) {
		return paramErr("You must specify \"--connlimit-above\" or \"--connlimit-upto\".")
	}
	return s.flags.fcheck(connlimitExt)
}

// build implements matchState.
func (s *connlimitState) build() ir.Match { m := s.m; return &m }

// writeConnlimit prints a connlimit match's options (connlimit_save).
func writeConnlimit(b *strings.Builder, m *ir.ConnlimitMatch) {
	if m.Upto {
		fmt.Fprintf(b, " --connlimit-upto %d", m.Limit)
	} else {
		fmt.Fprintf(b, " --connlimit-above %d", m.Limit)
	}
	fmt.Fprintf(b, " --connlimit-mask %d", m.MaskBits)
	if m.Daddr {
		b.WriteString(" --connlimit-daddr")
	} else {
		b.WriteString(" --connlimit-saddr")
	}
}

// connlimitListing is a connlimit match in iptables -L's listing
// (connlimit_print).
func connlimitListing(m *ir.ConnlimitMatch) string {
	dir, op := "src", ">"
	if m.Daddr {
		dir = "dst"
	}
	if m.Upto {
		op = "<="
	}
	return fmt.Sprintf(" #conn %s/%d %s %d", dir, m.MaskBits, op, m.Limit)
}
