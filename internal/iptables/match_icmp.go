package iptables

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The icmp (libipt_icmp) and icmp6 (libip6t_icmp6) matches, with the type
// name tables and parser of libxt_icmp.h.

// icmpName is one named ICMP type with its code range.
type icmpName struct {
	name             string
	typ              uint8
	codeMin, codeMax uint8
}

// icmpAnyType is the type value meaning "any type" in the IPv4 icmp match.
const icmpAnyType = 0xff

// icmpCodes are the ICMP names of libxt_icmp.h, in its order (the order
// decides which names an ambiguous abbreviation reports).
var icmpCodes = []icmpName{
	{"any", 0xff, 0, 0xff},
	{"echo-reply", 0, 0, 0xff},
	{"pong", 0, 0, 0xff},
	{"destination-unreachable", 3, 0, 0xff},
	{"network-unreachable", 3, 0, 0},
	{"host-unreachable", 3, 1, 1},
	{"protocol-unreachable", 3, 2, 2},
	{"port-unreachable", 3, 3, 3},
	{"fragmentation-needed", 3, 4, 4},
	{"source-route-failed", 3, 5, 5},
	{"network-unknown", 3, 6, 6},
	{"host-unknown", 3, 7, 7},
	{"network-prohibited", 3, 9, 9},
	{"host-prohibited", 3, 10, 10},
	{"TOS-network-unreachable", 3, 11, 11},
	{"TOS-host-unreachable", 3, 12, 12},
	{"communication-prohibited", 3, 13, 13},
	{"host-precedence-violation", 3, 14, 14},
	{"precedence-cutoff", 3, 15, 15},
	{"source-quench", 4, 0, 0xff},
	{"redirect", 5, 0, 0xff},
	{"network-redirect", 5, 0, 0},
	{"host-redirect", 5, 1, 1},
	{"TOS-network-redirect", 5, 2, 2},
	{"TOS-host-redirect", 5, 3, 3},
	{"echo-request", 8, 0, 0xff},
	{"ping", 8, 0, 0xff},
	{"router-advertisement", 9, 0, 0xff},
	{"router-solicitation", 10, 0, 0xff},
	{"time-exceeded", 11, 0, 0xff},
	{"ttl-exceeded", 11, 0, 0xff},
	{"ttl-zero-during-transit", 11, 0, 0},
	{"ttl-zero-during-reassembly", 11, 1, 1},
	{"parameter-problem", 12, 0, 0xff},
	{"ip-header-bad", 12, 0, 0},
	{"required-option-missing", 12, 1, 1},
	{"timestamp-request", 13, 0, 0xff},
	{"timestamp-reply", 14, 0, 0xff},
	{"address-mask-request", 17, 0, 0xff},
	{"address-mask-reply", 18, 0, 0xff},
}

// icmpv6Codes are the ICMPv6 names. Deviation from 1.8.9: the MLD names
// (130–132) of later releases are included; the conformance suite uses them.
var icmpv6Codes = []icmpName{
	{"destination-unreachable", 1, 0, 0xff},
	{"no-route", 1, 0, 0},
	{"communication-prohibited", 1, 1, 1},
	{"beyond-scope", 1, 2, 2},
	{"address-unreachable", 1, 3, 3},
	{"port-unreachable", 1, 4, 4},
	{"failed-policy", 1, 5, 5},
	{"reject-route", 1, 6, 6},
	{"packet-too-big", 2, 0, 0xff},
	{"time-exceeded", 3, 0, 0xff},
	{"ttl-exceeded", 3, 0, 0xff},
	{"ttl-zero-during-transit", 3, 0, 0},
	{"ttl-zero-during-reassembly", 3, 1, 1},
	{"parameter-problem", 4, 0, 0xff},
	{"bad-header", 4, 0, 0},
	{"unknown-header-type", 4, 1, 1},
	{"unknown-option", 4, 2, 2},
	{"echo-request", 128, 0, 0xff},
	{"ping", 128, 0, 0xff},
	{"echo-reply", 129, 0, 0xff},
	{"pong", 129, 0, 0xff},
	{"mld-listener-query", 130, 0, 0xff},
	{"mld-listener-report", 131, 0, 0xff},
	{"mld-listener-done", 132, 0, 0xff},
	{"mld-listener-reduction", 132, 0, 0xff},
	{"router-solicitation", 133, 0, 0xff},
	{"router-advertisement", 134, 0, 0xff},
	{"neighbour-solicitation", 135, 0, 0xff},
	{"neighbor-solicitation", 135, 0, 0xff},
	{"neighbour-advertisement", 136, 0, 0xff},
	{"neighbor-advertisement", 136, 0, 0xff},
	{"redirect", 137, 0, 0xff},
}

// parseICMPRange is libxt_icmp.h's parse_range: "n" or "n:m" (0–255,
// base 0) at the start of s; it returns the rest of s.
func parseICMPRange(s string) (lo, hi uint8, rest string, ok bool) {
	v, end, ok := xtStrtouiPrefix(s, 0, maxUint8)
	if !ok {
		return 0, 0, "", false
	}
	lo, hi, rest = uint8(v), uint8(v), s[end:]
	if strings.HasPrefix(rest, ":") {
		w, end2, ok := xtStrtouiPrefix(rest[1:], 0, maxUint8)
		if !ok {
			return 0, 0, "", false
		}
		hi, rest = uint8(w), rest[1+end2:]
	}
	return lo, hi, rest, true
}

// parseICMPType is libxt_icmp.h's __ipt_parse_icmp: a name (or unambiguous
// case-insensitive abbreviation), "type", or "type/code[:code]".
func parseICMPType(codes []icmpName, what, s string) (typ, codeMin, codeMax uint8, f *failure) {
	match := -1
	for i, c := range codes {
		if len(s) > len(c.name) || !strings.EqualFold(c.name[:len(s)], s) {
			continue
		}
		if match >= 0 {
			return 0, 0, 0, paramErr("Ambiguous %s type `%s': `%s' or `%s'?", what, s, codes[match].name, c.name)
		}
		match = i
	}
	if match >= 0 {
		c := codes[match]
		return c.typ, c.codeMin, c.codeMax, nil
	}
	tlo, thi, rest, ok := parseICMPRange(s)
	if !ok {
		return 0, 0, 0, paramErr("Unknown %s type `%s'", what, s)
	}
	codeMin, codeMax = 0, 0xff
	switch {
	case rest == "":
	case rest[0] == '/':
		var ok bool
		codeMin, codeMax, rest, ok = parseICMPRange(rest[1:])
		if !ok {
			return 0, 0, 0, paramErr("Unknown %s code `%s'", what, s)
		}
		if rest != "" {
			return 0, 0, 0, paramErr("unknown character %c", rest[0])
		}
	default:
		return 0, 0, 0, paramErr("unknown character %c", rest[0])
	}
	if tlo != thi {
		return 0, 0, 0, paramErr("%s type range not supported", what)
	}
	return tlo, codeMin, codeMax, nil
}

// icmp guided option id.
const icmpOptType = 0

// icmpExt is the icmp match module (IPv4).
var icmpExt = registerMatch(&extension{
	name:   "icmp",
	family: ir.IPv4,
	x6: []x6opt{
		{name: "icmp-type", id: icmpOptType, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &icmpState{} },
})

// icmp6Ext is the icmp6 match module (IPv6).
var icmp6Ext = registerMatch(&extension{
	name:   "icmp6",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "icmpv6-type", id: icmpOptType, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &icmpState{v6: true} },
})

// icmpState is one icmp or icmp6 match being parsed.
type icmpState struct {
	v6    bool
	m     ir.ICMPMatch
	flags x6flags
}

// ext returns the module of the match.
func (s *icmpState) ext() *extension {
	if s.v6 {
		return icmp6Ext
	}
	return icmpExt
}

// parse implements matchState.
func (s *icmpState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(s.ext(), o.id, invert); f != nil {
		return f
	}
	codes, what := icmpCodes, "ICMP"
	if s.v6 {
		codes, what = icmpv6Codes, "ICMPv6"
	}
	typ, lo, hi, f := parseICMPType(codes, what, arg)
	if f != nil {
		return f
	}
	s.m = ir.ICMPMatch{V6: s.v6, Invert: invert, Type: typ, CodeMin: lo, CodeMax: hi}
	// In the IPv4 match type 255 matches every type, whatever the codes.
	s.m.Any = !s.v6 && typ == icmpAnyType
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *icmpState) final(*parseCtx) *failure { return s.flags.fcheck(s.ext()) }

// build implements matchState.
func (s *icmpState) build() ir.Match { m := s.m; return &m }
