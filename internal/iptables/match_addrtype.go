package iptables

import (
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The addrtype match (libxt_addrtype.c, revision 1: the one iptables 1.8.9
// uses in both families) and the pkttype match (libxt_pkttype.c).

// addrtype guided option ids (O_SRC_TYPE …).
const (
	addrtypeOptSrc = iota
	addrtypeOptDst
	addrtypeOptLimitIn
	addrtypeOptLimitOut
)

// addrtypeExt is the addrtype match module.
var addrtypeExt = registerMatch(&extension{
	name: "addrtype",
	x6: []x6opt{
		{name: "src-type", id: addrtypeOptSrc, typ: xtString, flags: xtInvert},
		{name: "dst-type", id: addrtypeOptDst, typ: xtString, flags: xtInvert},
		{name: "limit-iface-in", id: addrtypeOptLimitIn, typ: xtNone, excl: 1 << addrtypeOptLimitOut},
		{name: "limit-iface-out", id: addrtypeOptLimitOut, typ: xtNone, excl: 1 << addrtypeOptLimitIn},
	},
	newMatch: func(*parseCtx) matchState { return &addrtypeState{} },
})

// addrtypeState is one addrtype match being parsed.
type addrtypeState struct {
	m     ir.AddrTypeMatch
	flags x6flags
}

// parseAddrType is libxt_addrtype's parse_type: the first type name the
// word is a case-insensitive prefix of (strncasecmp over the word's
// length, so "LOC" is LOCAL and "UN" is UNSPEC).
func parseAddrType(word string) (uint16, bool) {
	if word == "" {
		return 0, false
	}
	for i, name := range ir.AddrTypeNames {
		if len(word) <= len(name) && strings.EqualFold(word, name[:len(word)]) {
			return 1 << i, true
		}
	}
	return 0, false
}

// parseAddrTypes is parse_types: a comma-separated list of type names. A
// bad name before a comma is quoted with the rest of the argument.
func parseAddrTypes(arg string) (uint16, *failure) {
	var mask uint16
	for {
		comma := strings.IndexByte(arg, ',')
		if comma < 0 {
			break
		}
		t, ok := parseAddrType(arg[:comma])
		if !ok {
			return 0, paramErr("addrtype: bad type `%s'", arg)
		}
		mask |= t
		arg = arg[comma+1:]
	}
	t, ok := parseAddrType(arg)
	if !ok {
		return 0, paramErr("addrtype: bad type \"%s\"", arg)
	}
	return mask | t, nil
}

// parse implements matchState.
func (s *addrtypeState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(addrtypeExt, o.id, invert); f != nil {
		return f
	}
	switch o.id {
	case addrtypeOptSrc, addrtypeOptDst:
		mask, f := parseAddrTypes(arg)
		if f != nil {
			return f
		}
		if o.id == addrtypeOptSrc {
			s.m.Src, s.m.InvSrc = s.m.Src|mask, s.m.InvSrc || invert
		} else {
			s.m.Dst, s.m.InvDst = s.m.Dst|mask, s.m.InvDst || invert
		}
	case addrtypeOptLimitIn:
		s.m.LimitIn = true
	case addrtypeOptLimitOut:
		s.m.LimitOut = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState: addrtype_check, then the guided checks.
func (s *addrtypeState) final(*parseCtx) *failure {
	if !s.flags.has(addrtypeOptSrc) && !s.flags.has(addrtypeOptDst) {
		return paramErr("addrtype: you must specify --src-type or --dst-type")
	}
	return s.flags.fcheck(addrtypeExt)
}

// build implements matchState.
func (s *addrtypeState) build() ir.Match { m := s.m; return &m }

// addrTypeList prints a type mask as print_types does.
func addrTypeList(mask uint16) string {
	var names []string
	for i, name := range ir.AddrTypeNames {
		if mask&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}

// writeAddrType prints the match as addrtype_save_v1 does.
func writeAddrType(b *strings.Builder, m *ir.AddrTypeMatch) {
	if m.Src != 0 {
		if m.InvSrc {
			b.WriteString(" !")
		}
		b.WriteString(" --src-type " + addrTypeList(m.Src))
	}
	if m.Dst != 0 {
		if m.InvDst {
			b.WriteString(" !")
		}
		b.WriteString(" --dst-type " + addrTypeList(m.Dst))
	}
	if m.LimitIn {
		b.WriteString(" --limit-iface-in")
	}
	if m.LimitOut {
		b.WriteString(" --limit-iface-out")
	}
}

// listAddrType prints the match as addrtype_print_v1 does (-L).
func listAddrType(b *strings.Builder, m *ir.AddrTypeMatch) {
	b.WriteString(" ADDRTYPE match")
	if m.Src != 0 {
		b.WriteString(" src-type " + invString(m.InvSrc) + addrTypeList(m.Src))
	}
	if m.Dst != 0 {
		b.WriteString(" dst-type " + invString(m.InvDst) + addrTypeList(m.Dst))
	}
	if m.LimitIn {
		b.WriteString(" limit-in")
	}
	if m.LimitOut {
		b.WriteString(" limit-out")
	}
}

// addrTypeHookOK is addrtype_mt_checkentry_v1 for a rule reachable from
// hooks: the kernel refuses both limits at once, --limit-iface-out from
// INPUT, --limit-iface-in from OUTPUT, and in IPv6 the types its lookup
// cannot tell (BROADCAST, BLACKHOLE, PROHIBIT and above).
func addrTypeHookOK(fam ir.Family, m *ir.AddrTypeMatch, hooks hookMask) bool {
	switch {
	case m.LimitIn && m.LimitOut:
		return false
	case m.LimitOut && hooks&(hookLocalIn|hookPreRouting) != 0:
		return false
	case m.LimitIn && hooks&(hookLocalOut|hookPostRouting) != 0:
		return false
	}
	if fam == ir.IPv6 {
		types := m.Src | m.Dst
		if types&ir.AddrTypeBlackhole != 0 || types >= ir.AddrTypeProhibit || types&ir.AddrTypeBroadcast != 0 {
			return false
		}
	}
	return true
}

// pkttypeExt is the pkttype match module.
var pkttypeExt = registerMatch(&extension{
	name: "pkttype",
	x6: []x6opt{
		{name: "pkt-type", id: 0, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &pkttypeState{} },
})

// pktTypes are libxt_pkttype's supported_types, in its order: printing
// uses the first name of a type.
var pktTypes = []struct {
	name string
	typ  uint8
}{
	{"unicast", ir.PktTypeHost}, {"broadcast", ir.PktTypeBroadcast}, {"multicast", ir.PktTypeMulticast},
	{"otherhost", ir.PktTypeOtherHost}, {"bcast", ir.PktTypeBroadcast}, {"mcast", ir.PktTypeMulticast},
	{"host", ir.PktTypeHost},
}

// pkttypeState is one pkttype match being parsed.
type pkttypeState struct {
	m     ir.PktTypeMatch
	flags x6flags
}

// parse implements matchState (pkttype_parse).
func (s *pkttypeState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(pkttypeExt, o.id, invert); f != nil {
		return f
	}
	found := false
	for _, t := range pktTypes {
		if strings.EqualFold(arg, t.name) {
			s.m.Type, found = t.typ, true
			break
		}
	}
	if !found {
		return paramErr("Bad packet type '%s'", arg)
	}
	s.m.Invert = s.m.Invert || invert
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *pkttypeState) final(*parseCtx) *failure { return s.flags.fcheck(pkttypeExt) }

// build implements matchState.
func (s *pkttypeState) build() ir.Match { m := s.m; return &m }

// pktTypeName is print_pkttype: the first name of the type.
func pktTypeName(t uint8) string {
	for _, p := range pktTypes {
		if p.typ == t {
			return p.name
		}
	}
	return strconv.Itoa(int(t))
}

// writePktType prints the match as pkttype_save does.
func writePktType(b *strings.Builder, m *ir.PktTypeMatch) {
	if m.Invert {
		b.WriteString(" !")
	}
	b.WriteString(" --pkt-type " + pktTypeName(m.Type))
}

// listPktType prints the match as pkttype_print does (-L).
func listPktType(b *strings.Builder, m *ir.PktTypeMatch) {
	b.WriteString(" PKTTYPE " + invString(m.Invert) + "= " + pktTypeName(m.Type))
}
