package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The ipv6header match (libip6t_ipv6header.c): which extension headers a
// packet carries.

// ipv6header guided option ids (O_HEADER, O_SOFT).
const (
	ip6hdrOptHeader = iota
	ip6hdrOptSoft
)

// ip6hdrExt is the ipv6header match module.
var ip6hdrExt = registerMatch(&extension{
	name:   "ipv6header",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "header", id: ip6hdrOptHeader, typ: xtString, flags: xtMand | xtInvert},
		{name: "soft", id: ip6hdrOptSoft, typ: xtNone},
	},
	newMatch: func(*parseCtx) matchState { return &ip6hdrState{} },
})

// ip6hdrState is one ipv6header match being parsed.
type ip6hdrState struct {
	m     ir.IPv6HeaderMatch
	flags x6flags
}

// Protocol numbers of the header names (IPPROTO_*).
const (
	protoHopOpts  = 0
	protoRouting  = 43
	protoFragment = 44
	protoNoNext   = 59
	protoDstOpts  = 60
	protoRaw      = 255
)

// ip6hdrNames is the module's chain_protos: names tried after
// /etc/protocols, and what it prints for a number /etc/protocols lacks.
var ip6hdrNames = []chainProto{
	{"hop-by-hop", protoHopOpts}, {"protocol", protoRaw}, {"hop", protoHopOpts},
	{"dst", protoDstOpts}, {"route", protoRouting}, {"frag", protoFragment},
	{"auth", protoAH}, {"esp", protoESP}, {"none", protoNoNext}, {"prot", protoRaw},
	{"0", protoHopOpts}, {"60", protoDstOpts}, {"43", protoRouting}, {"44", protoFragment},
	{"51", protoAH}, {"50", protoESP}, {"59", protoNoNext}, {"255", protoRaw},
}

// ip6hdrFlags is chain_flags: each header's bit, in print order.
var ip6hdrFlags = []struct {
	proto int
	flag  uint8
}{
	{protoHopOpts, ir.IP6HdrHop}, {protoDstOpts, ir.IP6HdrDst}, {protoRouting, ir.IP6HdrRoute},
	{protoFragment, ir.IP6HdrFrag}, {protoAH, ir.IP6HdrAuth}, {protoESP, ir.IP6HdrESP},
	{protoNoNext, ir.IP6HdrNone}, {protoRaw, ir.IP6HdrProto},
}

// ip6hdrBit is name_to_proto and add_proto_to_mask for one name.
func ip6hdrBit(name string) (uint8, *failure) {
	proto, ok := getprotobyname(name)
	if !ok {
		for _, p := range ip6hdrNames {
			if p.name == name {
				proto, ok = int(p.num), true
				break
			}
		}
	}
	if !ok {
		return 0, paramErr("unknown header `%s' specified", name)
	}
	for _, f := range ip6hdrFlags {
		if f.proto == proto {
			return f.flag, nil
		}
	}
	return 0, paramErr("unknown header `%d' specified", proto)
}

// parseIP6HdrList is parse_header: the comma-separated names (strtok:
// empty words are skipped).
func parseIP6HdrList(arg string) (uint8, *failure) {
	var flags uint8
	for _, w := range strings.Split(arg, ",") {
		if w == "" {
			continue
		}
		bit, f := ip6hdrBit(w)
		if f != nil {
			return 0, f
		}
		flags |= bit
	}
	if flags == 0 {
		return 0, paramErr("ip6t_ipv6header: cannot parse header names")
	}
	return flags, nil
}

// parse implements matchState (ipv6header_parse).
func (s *ip6hdrState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	_, f := s.flags.begin(ip6hdrExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case ip6hdrOptHeader:
		if s.m.Flags, f = parseIP6HdrList(arg); f != nil {
			return f
		}
		s.m.Invert = s.m.Invert || invert
	case ip6hdrOptSoft:
		s.m.Soft = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *ip6hdrState) final(*parseCtx) *failure { return s.flags.fcheck(ip6hdrExt) }

// build implements matchState.
func (s *ip6hdrState) build() ir.Match { m := s.m; return &m }

// ip6hdrText is print_header: the names of the bits in chain_flags order
// (proto_to_name: /etc/protocols first, except for 0), "NONE" for none.
func ip6hdrText(flags uint8) string {
	var words []string
	for _, f := range ip6hdrFlags {
		if flags&f.flag == 0 {
			continue
		}
		name, ok := "", false
		if f.proto != 0 {
			name, ok = getprotobynumber(f.proto)
		}
		for i := 0; !ok && i < len(ip6hdrNames); i++ {
			if int(ip6hdrNames[i].num) == f.proto {
				name, ok = ip6hdrNames[i].name, true
			}
		}
		words = append(words, name)
	}
	if len(words) == 0 {
		return "NONE"
	}
	return strings.Join(words, ",")
}

// writeIP6Hdr prints the match as ipv6header_save does.
func writeIP6Hdr(b *strings.Builder, m *ir.IPv6HeaderMatch) {
	fmt.Fprintf(b, "%s --header %s", bangIf(m.Invert), ip6hdrText(m.Flags))
	if m.Soft {
		b.WriteString(" --soft")
	}
}

// listIP6Hdr prints the match as ipv6header_print does (-L).
func listIP6Hdr(b *strings.Builder, m *ir.IPv6HeaderMatch, numeric bool) {
	b.WriteString(" ipv6header")
	if m.Flags != 0 || m.Invert {
		fmt.Fprintf(b, " flags:%s", invString(m.Invert))
		if numeric {
			fmt.Fprintf(b, "0x%02X", m.Flags)
		} else {
			b.WriteString(ip6hdrText(m.Flags))
		}
	}
	if m.Soft {
		b.WriteString(" soft")
	}
}
