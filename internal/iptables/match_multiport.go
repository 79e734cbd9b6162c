package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The multiport match (libxt_multiport, revision 1).

// multiport guided option ids.
const (
	mpOptSource = iota
	mpOptDest
	mpOptEither
)

// mpExclAll makes the three directions mutually exclusive.
const mpExclAll = 1<<mpOptSource | 1<<mpOptDest | 1<<mpOptEither

// maxMultiPorts is XT_MULTI_PORTS: port slots, a range taking two.
const maxMultiPorts = 15

// multiportExt is the multiport match module.
var multiportExt = registerMatch(&extension{
	name: "multiport",
	x6: []x6opt{
		{name: "source-ports", id: mpOptSource, typ: xtString, flags: xtInvert, excl: mpExclAll},
		{name: "sports", id: mpOptSource, typ: xtString, flags: xtInvert, excl: mpExclAll},
		{name: "destination-ports", id: mpOptDest, typ: xtString, flags: xtInvert, excl: mpExclAll},
		{name: "dports", id: mpOptDest, typ: xtString, flags: xtInvert, excl: mpExclAll},
		{name: "ports", id: mpOptEither, typ: xtString, flags: xtInvert, excl: mpExclAll},
	},
	newMatch: func(*parseCtx) matchState { return &multiportState{} },
})

// multiportState is one multiport match being parsed.
type multiportState struct {
	m     ir.MultiportMatch
	flags x6flags
}

// multiportProtoName is libxt_multiport's proto_to_name: the protocols the
// match works with.
func multiportProtoName(proto uint8) string {
	switch proto {
	case protoTCP:
		return "tcp"
	case protoUDP:
		return "udp"
	case protoUDPLite:
		return "udplite"
	case protoSCTP:
		return "sctp"
	case protoDCCP:
		return "dccp"
	}
	return ""
}

// multiportCheckProto is libxt_multiport's check_proto, applied to the -p
// seen so far.
func multiportCheckProto(c *parseCtx) (string, *failure) {
	const onlyWorks = "multiport only works with TCP, UDP, UDPLITE, SCTP and DCCP"
	if c.protoInvert {
		return "", paramErr(onlyWorks)
	}
	if name := multiportProtoName(c.proto); name != "" {
		return name, nil
	}
	if c.proto == 0 {
		return "", paramErr("multiport needs `-p tcp', `-p udp', `-p udplite', `-p sctp' or `-p dccp'")
	}
	return "", paramErr(onlyWorks)
}

// parseMultiPorts is parse_multi_ports_v1: up to 15 slots, "a:b" taking two.
func parseMultiPorts(s, proto string) ([]ir.PortRange, *failure) {
	var out []ir.PortRange
	slots := 0
	rest, more := s, true
	for more && slots < maxMultiPorts {
		var elem string
		elem, rest, more = strings.Cut(rest, ",")
		lo, hi, isRange := strings.Cut(elem, ":")
		if isRange && slots == maxMultiPorts-1 {
			return nil, paramErr("too many ports specified")
		}
		first, f := parsePort(lo, proto)
		if f != nil {
			return nil, f
		}
		r := ir.PortRange{First: first, Last: first}
		slots++
		if isRange {
			if r.Last, f = parsePort(hi, proto); f != nil {
				return nil, f
			}
			if r.First >= r.Last {
				return nil, paramErr("invalid portrange specified")
			}
			slots++
		}
		out = append(out, r)
	}
	if more {
		return nil, paramErr("too many ports specified")
	}
	return out, nil
}

// parse implements matchState.
func (s *multiportState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(multiportExt, o.id, invert); f != nil {
		return f
	}
	proto, f := multiportCheckProto(c)
	if f != nil {
		return f
	}
	if s.m.Ports, f = parseMultiPorts(arg, proto); f != nil {
		return f
	}
	switch o.id {
	case mpOptSource:
		s.m.Dir = ir.MultiportSource
	case mpOptDest:
		s.m.Dir = ir.MultiportDestination
	default:
		s.m.Dir = ir.MultiportEither
	}
	if invert {
		s.m.Invert = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *multiportState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("multiport expection an option")
	}
	return s.flags.fcheck(multiportExt)
}

// build implements matchState.
func (s *multiportState) build() ir.Match { return s.m.CloneMatch() }
