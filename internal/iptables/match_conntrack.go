package iptables

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The conntrack match (libxt_conntrack revision 3, the one iptables-legacy
// 1.8.9 uses on kernel 6.18) and the state match, which 1.8.9 loads as an
// alias of conntrack revision 3 carrying only --state (saved back as
// "-m state --state …").

// Guided option ids of the conntrack match (enum O_CT* of libxt_conntrack).
const (
	ctOptState = iota
	ctOptProto
	ctOptOrigSrc
	ctOptOrigDst
	ctOptReplSrc
	ctOptReplDst
	ctOptOrigSrcPort
	ctOptOrigDstPort
	ctOptReplSrcPort
	ctOptReplDstPort
	ctOptStatus
	ctOptExpire
	ctOptDir
)

// conntrackExt is the conntrack match module (conntrack3_mt_opts, in
// table order).
var conntrackExt = registerMatch(&extension{
	name: "conntrack",
	x6: []x6opt{
		{name: "ctstate", id: ctOptState, typ: xtString, flags: xtInvert},
		{name: "ctproto", id: ctOptProto, typ: xtProtocol, flags: xtInvert},
		{name: "ctorigsrc", id: ctOptOrigSrc, typ: xtHostMask, flags: xtInvert},
		{name: "ctorigdst", id: ctOptOrigDst, typ: xtHostMask, flags: xtInvert},
		{name: "ctreplsrc", id: ctOptReplSrc, typ: xtHostMask, flags: xtInvert},
		{name: "ctrepldst", id: ctOptReplDst, typ: xtHostMask, flags: xtInvert},
		{name: "ctstatus", id: ctOptStatus, typ: xtString, flags: xtInvert},
		{name: "ctexpire", id: ctOptExpire, typ: xtUint32RC, flags: xtInvert},
		{name: "ctorigsrcport", id: ctOptOrigSrcPort, typ: xtPortRC, flags: xtInvert},
		{name: "ctorigdstport", id: ctOptOrigDstPort, typ: xtPortRC, flags: xtInvert},
		{name: "ctreplsrcport", id: ctOptReplSrcPort, typ: xtPortRC, flags: xtInvert},
		{name: "ctrepldstport", id: ctOptReplDstPort, typ: xtPortRC, flags: xtInvert},
		{name: "ctdir", id: ctOptDir, typ: xtString},
	},
	newMatch: func(*parseCtx) matchState { return &conntrackState{} },
})

// stateExt is the state match module (state_opts).
var stateExt = registerMatch(&extension{
	name: "state",
	x6: []x6opt{
		{name: "state", id: ctOptState, typ: xtString, flags: xtMand | xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &stateState{} },
})

// ctName is one name of a state or status bit.
type ctName struct {
	name string
	bit  uint16
}

// ctStateNames are the --ctstate names in the order conntrack_ps_state
// tries them (and print_state prints them: see ctStatePrintOrder).
var ctStateNames = []ctName{
	{"INVALID", ir.CtStateInvalid},
	{"NEW", ir.CtStateNew},
	{"ESTABLISHED", ir.CtStateEstablished},
	{"RELATED", ir.CtStateRelated},
	{"UNTRACKED", ir.CtStateUntracked},
	{"SNAT", ir.CtStateSNAT},
	{"DNAT", ir.CtStateDNAT},
}

// stateNames are the names the state match knows (state_parse_state): no
// SNAT or DNAT.
var stateNames = ctStateNames[:5]

// ctStatePrintOrder is print_state's order (RELATED before ESTABLISHED).
var ctStatePrintOrder = []ctName{
	{"INVALID", ir.CtStateInvalid},
	{"NEW", ir.CtStateNew},
	{"RELATED", ir.CtStateRelated},
	{"ESTABLISHED", ir.CtStateEstablished},
	{"UNTRACKED", ir.CtStateUntracked},
	{"SNAT", ir.CtStateSNAT},
	{"DNAT", ir.CtStateDNAT},
}

// ctStatusNames are the --ctstatus names, in parse and print order.
var ctStatusNames = []ctName{
	{"NONE", 0},
	{"EXPECTED", ir.CtStatusExpected},
	{"SEEN_REPLY", ir.CtStatusSeenReply},
	{"ASSURED", ir.CtStatusAssured},
	{"CONFIRMED", ir.CtStatusConfirmed},
}

// lookupCtName is conntrack_ps_state / conntrack_ps_status: the first name
// whose first len(word) letters equal word, ignoring case (strncasecmp with
// the word's length, so "e" is ESTABLISHED and "" is the first name).
func lookupCtName(names []ctName, word string) (uint16, bool) {
	for _, n := range names {
		if len(word) <= len(n.name) && strings.EqualFold(word, n.name[:len(word)]) {
			return n.bit, true
		}
	}
	return 0, false
}

// parseCtList is conntrack_ps_states / conntrack_ps_statuses: a comma list
// of names; what names the error ("ctstate") quotes the list from the
// first bad element on.
func parseCtList(names []ctName, what, arg string) (uint16, *failure) {
	var bits uint16
	for {
		word, rest, more := strings.Cut(arg, ",")
		if more && word == "" {
			return 0, paramErr("Bad %s \"%s\"", what, arg)
		}
		bit, ok := lookupCtName(names, word)
		if !ok || (!more && word == "") {
			return 0, paramErr("Bad %s \"%s\"", what, arg)
		}
		bits |= bit
		if !more {
			return bits, nil
		}
		arg = rest
	}
}

// parseStateList is state_parse_states: like parseCtList, but an empty
// last element has its own message.
func parseStateList(arg string) (uint16, *failure) {
	var bits uint16
	for {
		word, rest, more := strings.Cut(arg, ",")
		if !more {
			break
		}
		bit, ok := lookupCtName(stateNames, word)
		if word == "" || !ok {
			return 0, paramErr("Bad state \"%s\"", arg)
		}
		bits |= bit
		arg = rest
	}
	if arg == "" {
		return 0, paramErr("\"--state\" requires a list of states with no spaces, e.g. ESTABLISHED,RELATED")
	}
	bit, ok := lookupCtName(stateNames, arg)
	if !ok {
		return 0, paramErr("Bad state \"%s\"", arg)
	}
	return bits | bit, nil
}

// conntrackState is one conntrack match being parsed.
type conntrackState struct {
	m     ir.ConntrackMatch
	flags x6flags
}

// parse implements matchState (conntrack3_mt_parse).
func (s *conntrackState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(conntrackExt, o.id, invert)
	if f != nil {
		return f
	}
	if f := s.parseOption(c, x, arg, invert); f != nil {
		return f
	}
	s.flags.done(o.id)
	return nil
}

// parseOption parses the value of one option into the match.
func (s *conntrackState) parseOption(c *parseCtx, x *x6opt, arg string, invert bool) *failure {
	m := &s.m
	var f *failure
	switch x.id {
	case ctOptState:
		m.States.Bits, f = parseCtList(ctStateNames, "ctstate", arg)
		m.States.Set, m.States.Invert = true, invert
	case ctOptStatus:
		m.Status.Bits, f = parseCtList(ctStatusNames, "ctstatus", arg)
		m.Status.Set, m.Status.Invert = true, invert
	case ctOptProto:
		f = s.parseProto(arg, invert)
	case ctOptOrigSrc, ctOptOrigDst, ctOptReplSrc, ctOptReplDst:
		addr := [...]*ir.AddrMatch{&m.OrigSrc, &m.OrigDst, &m.ReplSrc, &m.ReplDst}[x.id-ctOptOrigSrc]
		*addr, f = parseCtHostMask(c.fam, x.name, arg)
		addr.Invert = invert
	case ctOptOrigSrcPort, ctOptOrigDstPort, ctOptReplSrcPort, ctOptReplDstPort:
		port := [...]*ir.PortMatch{&m.OrigSrcPort, &m.OrigDstPort, &m.ReplSrcPort, &m.ReplDstPort}[x.id-ctOptOrigSrcPort]
		// Deviation from 1.8.9: a decreasing range ("4:3", "5:0") is
		// refused as by parsePortRangeRC; 1.8.9 accepts it and prints
		// "5:0" as "5". The conformance suite expects "4:3" to fail.
		port.Range, f = parsePortRangeRC(conntrackExt.name, x, arg)
		port.Set, port.Invert = true, invert
	case ctOptExpire:
		// Deviation from 1.8.9: a decreasing range is refused (see
		// parseUint16Range); 1.8.9 accepts "--ctexpire 4:3".
		var n int
		m.Expire.Min, m.Expire.Max, n, f = x.parseUint32Range(conntrackExt.name, arg)
		if n == 1 {
			m.Expire.Max = m.Expire.Min
		}
		m.Expire.Set, m.Expire.Invert = true, invert
	case ctOptDir:
		switch {
		case strings.EqualFold(arg, "ORIGINAL"):
			m.Dir = ir.CtDirOriginal
		case strings.EqualFold(arg, "REPLY"):
			m.Dir = ir.CtDirReply
		default:
			f = paramErr("conntrack: Bad value for \"--ctdir\" option: \"%s\"", arg)
		}
	}
	return f
}

// parseProto is --ctproto (XTTYPE_PROTOCOL). Deviation from 1.8.9: protocol
// 0 ("all") is refused with the messages of later releases; 1.8.9 accepts
// it, making a rule that never (or, inverted, always) matches, and the
// conformance suite expects a failure.
func (s *conntrackState) parseProto(arg string, invert bool) *failure {
	num, f := parseProtocol(arg)
	if f != nil {
		return f
	}
	if num > maxUint8 {
		// As for -p: the field is 8 bits wide (see optProtocol).
		return paramErr("protocol \"%s\" (%d) does not fit the 8-bit protocol field", arg, num)
	}
	if num == 0 {
		if invert {
			return paramErr("conntrack: condition would always match protocol")
		}
		return paramErr("conntrack: rule would never match protocol")
	}
	s.m.Proto = ir.CtProtoMatch{Set: true, Invert: invert, Num: uint8(num)}
	return nil
}

// parseCtHostMask is xtopt_parse_hostmask for --ctorigsrc and friends:
// ADDRESS[/MASK]. The address is read as getaddrinfo reads a numeric host
// of the family (IPv4: inet_aton's forms, "10.1" is 10.0.0.1); host names
// are not resolved (see addr.go) and fail as unknown names do. The mask
// is a prefix length (base 0) or, failing that, an address-form netmask;
// a netmask that is not a prefix counts as the full mask, as 1.8.9 stores
// it. The address is not masked.
func parseCtHostMask(fam ir.Family, optName, arg string) (ir.AddrMatch, *failure) {
	host, maskText, hasMask := strings.Cut(arg, "/")
	addr, f := parseCtHost(fam, host)
	if f != nil {
		return ir.AddrMatch{}, f
	}
	bits := addr.BitLen()
	mask := bits
	if hasMask {
		mask, f = parseCtMask(fam, optName, maskText)
		if f != nil {
			return ir.AddrMatch{}, f
		}
	}
	return ir.AddrMatch{Set: true, Addr: addr, Mask: prefixMaskAddr(fam, mask)}, nil
}

// parseCtHost is xtopt_parse_host without name resolution.
func parseCtHost(fam ir.Family, host string) (netip.Addr, *failure) {
	v4, ok4 := inetAton4(host)
	v6, ok6 := inetPton6(host)
	switch {
	case fam == ir.IPv4 && ok4:
		return netip.AddrFrom4(v4), nil
	case fam == ir.IPv6 && ok6:
		return netip.AddrFrom16(v6), nil
	case ok4 || ok6:
		return netip.Addr{}, paramErr("getaddrinfo: Address family for hostname not supported\n")
	}
	return netip.Addr{}, paramErr("getaddrinfo: Name or service not known\n")
}

// parseCtMask is the mask half of xtopt_parse_hostmask: the prefix length
// it stands for (a non-prefix netmask stands for the full length).
func parseCtMask(fam ir.Family, optName, text string) (int, *failure) {
	return parsePlenMask(fam, conntrackExt.name, optName, text)
}

// parsePlenMask is parsePlen where a netmask that is not a prefix stands
// for the full length, as iptables 1.8.9 leaves the full mask in place
// (conntrack's and connlimit's masks).
func parsePlenMask(fam ir.Family, ext, optName, text string) (int, *failure) {
	n, f := parsePlen(fam, ext, optName, text)
	if f == nil && n < 0 {
		n = fam.AddrBits()
	}
	return n, f
}

// prefixMaskAddr returns the netmask of a prefix length as an address.
func prefixMaskAddr(fam ir.Family, bits int) netip.Addr {
	if fam == ir.IPv6 {
		return netip.AddrFrom16(prefixMask6(bits))
	}
	return netip.AddrFrom4(prefixMask4(bits))
}

// inetAton4 is glibc's inet_aton_exact, which getaddrinfo uses for numeric
// IPv4 hosts: one to four parts in base 0 ("0x" hex, "0" octal), the last
// filling the remaining bytes ("10.1" is 10.0.0.1), nothing after them.
func inetAton4(s string) ([ipv4Len]byte, bool) {
	var out [ipv4Len]byte
	var parts []uint64
	rest := s
	for {
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			return out, false
		}
		v, n, ok := atonPart(rest)
		if !ok {
			return out, false
		}
		parts = append(parts, v)
		rest = rest[n:]
		if rest == "" {
			break
		}
		if rest[0] != '.' || len(parts) == ipv4Len {
			return out, false
		}
		rest = rest[1:]
	}
	last := parts[len(parts)-1]
	lastBytes := ipv4Len - (len(parts) - 1)
	if last >= 1<<(8*lastBytes) {
		return out, false
	}
	for i, p := range parts[:len(parts)-1] {
		if p > 0xff {
			return out, false
		}
		out[i] = byte(p)
	}
	for i := 0; i < lastBytes; i++ {
		out[ipv4Len-1-i] = byte(last >> (8 * i))
	}
	return out, true
}

// atonPart reads one number of inet_aton: its value, length and whether
// it is valid (an 8 or 9 in an octal number is not, nor "0x" without a
// digit, nor a value beyond 32 bits).
func atonPart(s string) (v uint64, n int, ok bool) {
	base := uint64(10)
	if s[0] == '0' {
		base, n = 8, 1
		if len(s) > 1 && (s[1] == 'x' || s[1] == 'X') {
			base, n = 16, 2
			if len(s) == n || hexDigit(s[n]) < 0 {
				return 0, 0, false // "0x" needs a digit
			}
		}
	}
	for ; n < len(s); n++ {
		d := hexDigit(s[n])
		if d < 0 || (base == 10 && d > 9) {
			break
		}
		if base == 8 && d > 7 {
			if d > 9 {
				break
			}
			return 0, 0, false
		}
		if v = v*base + uint64(d); v > 0xffffffff {
			return 0, 0, false
		}
	}
	return v, n, true
}

// final implements matchState (conntrack_mt_check).
func (s *conntrackState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("conntrack: At least one option is required")
	}
	return nil
}

// build implements matchState.
func (s *conntrackState) build() ir.Match { m := s.m; return &m }

// stateState is one state match being parsed.
type stateState struct {
	m     ir.ConntrackMatch
	flags x6flags
}

// parse implements matchState (state_ct23_parse).
func (s *stateState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(stateExt, o.id, invert); f != nil {
		return f
	}
	bits, f := parseStateList(arg)
	if f != nil {
		return f
	}
	s.m = ir.ConntrackMatch{StateAlias: true, States: ir.CtBitsMatch{Set: true, Invert: invert, Bits: bits}}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *stateState) final(*parseCtx) *failure { return s.flags.fcheck(stateExt) }

// build implements matchState.
func (s *stateState) build() ir.Match { m := s.m; return &m }

// writeConntrack prints the conntrack or state match as conntrack_dump
// does: sep "--" for iptables-save, "" for iptables -L; numeric selects
// numeric addresses for -L (iptables-save always prints numbers).
func writeConntrack(b *strings.Builder, m *ir.ConntrackMatch, sep string, numeric bool) {
	if m.States.Set {
		name := "ctstate"
		if m.StateAlias {
			name = "state"
		}
		writeCtInvert(b, m.States.Invert)
		fmt.Fprintf(b, " %s%s %s", sep, name, ctBitsString(ctStatePrintOrder, m.States.Bits))
	}
	if m.Proto.Set {
		writeCtInvert(b, m.Proto.Invert)
		fmt.Fprintf(b, " %sctproto %d", sep, m.Proto.Num)
	}
	for i, a := range []ir.AddrMatch{m.OrigSrc, m.OrigDst, m.ReplSrc, m.ReplDst} {
		if a.Set {
			writeCtInvert(b, a.Invert)
			fmt.Fprintf(b, " %s%s %s", sep, [...]string{"ctorigsrc", "ctorigdst", "ctreplsrc", "ctrepldst"}[i], ctAddrString(a, numeric))
		}
	}
	for i, p := range []ir.PortMatch{m.OrigSrcPort, m.OrigDstPort, m.ReplSrcPort, m.ReplDstPort} {
		if p.Set {
			writeCtInvert(b, p.Invert)
			fmt.Fprintf(b, " %s%s %s", sep, [...]string{"ctorigsrcport", "ctorigdstport", "ctreplsrcport", "ctrepldstport"}[i], ctRangeString(uint64(p.Range.First), uint64(p.Range.Last)))
		}
	}
	if m.Status.Set {
		writeCtInvert(b, m.Status.Invert)
		fmt.Fprintf(b, " %sctstatus %s", sep, ctBitsString(ctStatusNames[1:], m.Status.Bits))
	}
	if m.Expire.Set {
		writeCtInvert(b, m.Expire.Invert)
		fmt.Fprintf(b, " %sctexpire %s", sep, ctRangeString(uint64(m.Expire.Min), uint64(m.Expire.Max)))
	}
	switch m.Dir {
	case ir.CtDirOriginal:
		fmt.Fprintf(b, " %sctdir ORIGINAL", sep)
	case ir.CtDirReply:
		fmt.Fprintf(b, " %sctdir REPLY", sep)
	}
}

// writeCtInvert prints the " !" of an inverted option.
func writeCtInvert(b *strings.Builder, inverted bool) {
	if inverted {
		b.WriteString(" !")
	}
}

// ctBitsString is print_state / print_status: the names of the set bits in
// order, comma-separated; "NONE" for an empty status mask.
func ctBitsString(names []ctName, bits uint16) string {
	var out []string
	for _, n := range names {
		if bits&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "NONE"
	}
	return strings.Join(out, ",")
}

// ctRangeString prints a port or expiry range: one number when both ends
// are equal (conntrack_dump_ports also when the upper end is 0).
func ctRangeString(lo, hi uint64) string {
	if lo == hi || hi == 0 {
		return strconv.FormatUint(lo, 10)
	}
	return strconv.FormatUint(lo, 10) + ":" + strconv.FormatUint(hi, 10)
}

// ctAddrString is conntrack_dump_addr: without numeric, the zero address
// is "anywhere" and others are host names where /etc/hosts knows them; the
// mask follows as "/N" unless it is the full mask.
func ctAddrString(a ir.AddrMatch, numeric bool) string {
	s := formatAddr(a.Addr)
	if !numeric {
		if a.Addr.IsUnspecified() {
			return "anywhere"
		}
		s = hostName(a.Addr)
	}
	if n := maskBits(a.Mask); n != a.Mask.BitLen() {
		s += "/" + formatMask(a.Mask)
	}
	return s
}
