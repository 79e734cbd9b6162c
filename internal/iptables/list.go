package iptables

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// "iptables -L": the table listing of iptables-legacy 1.8.9 (list_entries,
// print_header and print_firewall of iptables.c/ip6tables.c, the helpers of
// xshared.c and libxtables, and the print functions of the extensions),
// byte for byte, trailing spaces included.
//
// Name resolution without -n: iptables asks getnameinfo() for the name of
// every address it prints in the source and destination columns. xfw does
// no lookups at run time. It prints what iptables prints on a machine
// whose resolver answers "no such name": the name from /etc/hosts for the
// addresses in listHosts (the reference machine's /etc/hosts), and the
// number for every other address. A machine whose resolver cannot be
// reached at all differs: there getnameinfo fails and iptables falls back
// on /etc/networks, printing for example "loopback/8" for 127.0.0.0/8.
// Protocol and service names come from the compiled-in netbase tables
// (netdb_data.go), as getprotobynumber and getservbyport find them.

// ListOptions are the listing flags of -L.
type ListOptions struct {
	// Verbose is -v: packet and byte counters, the in and out interface
	// columns, and the policy counters in the chain headers.
	Verbose bool
	// Numeric is -n: addresses, ports, protocols, ICMP types and LOG levels
	// as numbers.
	Numeric bool
	// Exact is -x: counters in full instead of with K/M/G/T suffixes.
	Exact bool
	// LineNumbers is --line-numbers: a "num" column.
	LineNumbers bool
	// RuleNum is -L CHAIN N: only that rule (1-based), without the chain
	// header; 0 lists every rule.
	RuleNum int
}

// FormatList renders `iptables -L [CHAIN [N]]` for rs (all chains when
// chain == "") as iptables-legacy prints it; errors are *Error with
// iptables' message and status (e.g. unknown chain, bad rule number).
//
// A rule number past the end of the chain lists nothing, as iptables does.
// The libiptc dump that iptables appends for -vv is not produced.
func FormatList(rs *ir.Ruleset, chain string, opts ListOptions) (string, error) {
	out, f := formatList(rs, chain, opts)
	if f != nil {
		return "", f.render(ProgramName(rs.Family), 0)
	}
	return out, nil
}

// formatList is list_entries.
func formatList(rs *ir.Ruleset, chain string, opts ListOptions) (string, *failure) {
	if opts.RuleNum < 0 {
		return "", paramErr("Invalid rule number `%d'", opts.RuleNum)
	}
	l := lister{fam: rs.Family, opts: opts}
	found := false
	for _, c := range OrderedChains(rs) {
		if chain != "" && c.Name != chain {
			continue
		}
		if found {
			l.b.WriteByte('\n')
		}
		if opts.RuleNum == 0 {
			l.header(c, references(rs, c.Name))
		}
		for i, r := range c.Rules {
			if opts.RuleNum == 0 || i+1 == opts.RuleNum {
				l.rule(i+1, r)
			}
		}
		found = true
	}
	if !found {
		// list_entries leaves errno at ENOENT.
		return "", iptcErr(errNoChain)
	}
	return l.b.String(), nil
}

// lister accumulates one listing.
type lister struct {
	fam  ir.Family
	opts ListOptions
	b    strings.Builder
}

// printf appends formatted text.
func (l *lister) printf(format string, args ...any) {
	fmt.Fprintf(&l.b, format, args...)
}

// num is xtables_print_num: a counter in its column ("%8llu " with -x,
// else at most five characters with a K, M, G or T suffix), or with
// notable bare for the chain header.
func (l *lister) num(n uint64, notable bool) {
	pad := func(w int) int {
		if notable {
			return 0
		}
		return w
	}
	if l.opts.Exact {
		l.printf("%*d ", pad(8), n)
		return
	}
	if n <= 99999 {
		l.printf("%*d ", pad(5), n)
		return
	}
	// The additions wrap around for counters near 2^64, as in C.
	for _, suffix := range []string{"K", "M", "G"} {
		n = (n + 500) / 1000
		if n <= 9999 {
			l.printf("%*d%s ", pad(4), n, suffix)
			return
		}
	}
	n = (n + 500) / 1000
	l.printf("%*dT ", pad(4), n)
}

// header is print_header: the chain line and the column titles.
func (l *lister) header(c *ir.Chain, refs int) {
	l.printf("Chain %s", c.Name)
	if c.Builtin {
		l.printf(" (policy %s", c.Policy)
		if l.opts.Verbose {
			l.b.WriteByte(' ')
			l.num(c.Counters.Packets, true)
			l.b.WriteString("packets, ")
			l.num(c.Counters.Bytes, true)
			l.b.WriteString("bytes")
		}
		l.b.WriteString(")\n")
	} else {
		l.printf(" (%d references)\n", refs)
	}
	if l.opts.LineNumbers {
		l.printf("%-4s ", "num")
	}
	if l.opts.Verbose {
		if l.opts.Exact {
			l.printf("%8s %10s ", "pkts", "bytes")
		} else {
			l.printf("%5s %5s ", "pkts", "bytes")
		}
	}
	l.printf("%-9s ", "target")
	l.b.WriteString(" prot opt")
	if l.opts.Verbose {
		l.printf(" %-6s %-6s ", "in", "out")
	}
	l.printf(" %-19s  %-19s \n", "source", "destination")
}

// targetName is what iptc_get_target returns for the rule: the verdict,
// target module or chain name, "" for a rule without target.
func targetName(t ir.Target) string {
	switch t.Kind {
	case ir.TargetAccept:
		return "ACCEPT"
	case ir.TargetDrop:
		return "DROP"
	case ir.TargetReturn:
		return "RETURN"
	case ir.TargetJump, ir.TargetGoto:
		return t.Chain
	case ir.TargetReject:
		return "REJECT"
	case ir.TargetLog:
		return "LOG"
	case ir.TargetNFLog:
		return "NFLOG"
	case ir.TargetSet:
		return "SET"
	case ir.TargetDNAT:
		return "DNAT"
	case ir.TargetSNAT:
		return "SNAT"
	case ir.TargetMasquerade:
		return "MASQUERADE"
	case ir.TargetRedirect:
		return "REDIRECT"
	case ir.TargetMark:
		return "MARK"
	case ir.TargetConnmark:
		return "CONNMARK"
	}
	if ir.IsMangleTarget(t.Kind) {
		return mangleTargetName(t.Kind)
	}
	return ""
}

// rule is print_firewall for one rule in table format.
func (l *lister) rule(num int, r *ir.Rule) {
	numeric := l.opts.Numeric
	// print_rule_details
	if l.opts.LineNumbers {
		l.printf("%-4d ", num)
	}
	if l.opts.Verbose {
		l.num(r.Counters.Packets, false)
		l.num(r.Counters.Bytes, false)
	}
	l.printf("%-9s ", targetName(r.Target))
	proto := uint8(0)
	if r.Proto.Set {
		proto = r.Proto.Num
	}
	l.b.WriteByte(invChar(r.Proto.Set && r.Proto.Invert, ' '))
	if name := protoToName(proto); numeric || name == "" {
		l.printf("%-4d ", proto)
	} else {
		l.printf("%-4s ", name)
	}
	// print_fragment: ip6tables has no -f and prints "--".
	if l.fam == ir.IPv6 || !r.Fragment.Set {
		l.b.WriteString("-- ")
	} else {
		l.b.WriteByte(invChar(r.Fragment.Invert, '-'))
		l.b.WriteString("f ")
	}
	// print_ifaces
	if l.opts.Verbose {
		l.printf(" %-6s ", l.iface(r.InIface))
		l.printf("%-6s ", l.iface(r.OutIface))
	}
	// print_ipv4_addresses / print_ipv6_addresses
	l.b.WriteByte(invChar(r.Src.Set && r.Src.Invert, ' '))
	l.printf("%-19s ", l.addr(r.Src))
	l.b.WriteByte(invChar(r.Dst.Set && r.Dst.Invert, ' '))
	l.printf("%-19s ", l.addr(r.Dst))
	if r.Target.Kind == ir.TargetGoto {
		l.b.WriteString("[goto] ")
	}
	for _, m := range r.Matches {
		l.match(r, m)
	}
	l.target(r.Target)
	l.b.WriteByte('\n')
}

// invChar returns '!' when inverted, else def.
func invChar(inverted bool, def byte) byte {
	if inverted {
		return '!'
	}
	return def
}

// iface is one interface column of print_ifaces.
func (l *lister) iface(m ir.IfaceMatch) string {
	name := "any"
	if l.opts.Numeric {
		name = "*"
	}
	if m.Set && m.Name != "" {
		name = m.Name
	}
	if m.Set && m.Invert {
		name = "!" + name
	}
	return name
}

// addr is ipv4_addr_to_string / ipv6_addr_to_string: "anywhere" (IPv4:
// netmask 0; IPv6: address ::) unless numeric, else the address (a host
// name without -n) followed by the netmask, which is omitted for a host.
func (l *lister) addr(a ir.AddrMatch) string {
	bits := l.fam.AddrBits()
	addr, mask := zeroAddr(l.fam), zeroAddr(l.fam)
	if a.Set && a.Addr.IsValid() && a.Mask.IsValid() {
		if l.fam == ir.IPv6 {
			addr, mask = netip.AddrFrom16(a.Addr.As16()), netip.AddrFrom16(a.Mask.As16())
		} else {
			addr, mask = a.Addr.Unmap(), a.Mask.Unmap()
		}
	}
	if !l.opts.Numeric {
		if (l.fam == ir.IPv4 && mask.IsUnspecified()) || (l.fam == ir.IPv6 && addr.IsUnspecified()) {
			return "anywhere"
		}
	}
	s := formatAddr(addr)
	if !l.opts.Numeric {
		s = hostName(addr)
	}
	switch n := maskBits(mask); {
	case n == bits:
	case n >= 0:
		s += fmt.Sprintf("/%d", n)
	default:
		s += "/" + formatAddr(mask)
	}
	return s
}

// zeroAddr is the all-zero address of the family.
func zeroAddr(fam ir.Family) netip.Addr {
	if fam == ir.IPv6 {
		return netip.IPv6Unspecified()
	}
	return netip.IPv4Unspecified()
}

// listHosts are the entries of the reference machine's /etc/hosts that
// getnameinfo returns for an address (the first name of the first line
// with that address). Only 127.0.0.1 has one there: "::1" has no line, so
// iptables prints it as a number.
var listHosts = map[netip.Addr]string{
	netip.AddrFrom4([4]byte{127, 0, 0, 1}): "localhost",
}

// hostName is xtables_ipaddr_to_anyname / xtables_ip6addr_to_anyname
// without DNS: the /etc/hosts name, else the number.
func hostName(a netip.Addr) string {
	if name, ok := listHosts[a]; ok {
		return name
	}
	return formatAddr(a)
}

// getservbyport returns the first /etc/services name for port and proto
// ("" matches every protocol).
func getservbyport(port uint16, proto string) (string, bool) {
	for _, s := range etcServices {
		if s.port == int(port) && (proto == "" || s.proto == proto) {
			return s.name, true
		}
	}
	return "", false
}

// port prints a port number, or its service name for proto without -n.
func (l *lister) port(port uint16, proto string) {
	if !l.opts.Numeric {
		if name, ok := getservbyport(port, proto); ok {
			l.b.WriteString(name)
			return
		}
	}
	l.printf("%d", port)
}

// ports is libxt_tcp/libxt_udp's print_ports: " spt:22", " dpts:!1:1023".
func (l *lister) ports(name string, p ir.PortMatch, proto string) {
	r := fullPortRange
	if p.Set {
		r = p.Range
	}
	inv := p.Set && p.Invert
	if r == fullPortRange && !inv {
		return
	}
	l.printf(" %s", name)
	if r.First == r.Last {
		l.b.WriteByte(':')
	} else {
		l.b.WriteString("s:")
	}
	if inv {
		l.b.WriteByte('!')
	}
	l.port(r.First, proto)
	if r.First != r.Last {
		l.b.WriteByte(':')
		l.port(r.Last, proto)
	}
}

// multiportProto is libxt_multiport's proto_to_name: the protocol whose
// service names the ports print with ("" for any).
func multiportProto(proto uint8) string {
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

// tcpFlagsList is libxt_tcp's print_tcpf.
func tcpFlagsList(v uint8) string {
	if v&0x3f != v {
		// Flags beyond URG have no name in print_tcpf's table.
		return fmt.Sprintf("0x%02X", v)
	}
	return tcpFlagString(v)
}

// logLevelNames are the syslog level names LOG prints without -n, by level.
var logLevelNames = [...]string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

// match prints a match as its module's print function does.
func (l *lister) match(r *ir.Rule, m ir.Match) {
	numeric := l.opts.Numeric
	if text, ok := stateListing(l.fam, m); ok {
		l.b.WriteString(text)
		return
	}
	switch m := m.(type) {
	case *ir.TCPMatch:
		l.tcp(m)
	case *ir.UDPMatch:
		l.b.WriteString(" udp")
		l.ports("spt", m.SrcPort, "udp")
		l.ports("dpt", m.DstPort, "udp")
	case *ir.MultiportMatch:
		l.multiport(r, m)
	case *ir.ICMPMatch:
		if m.V6 {
			l.b.WriteString(" ipv6-icmp")
			l.icmpType(icmpv6Codes, m)
		} else {
			l.b.WriteString(" icmp")
			l.icmpType(icmpCodes, m)
		}
	case *ir.IPRangeMatch:
		l.addrRange("source", m.Src)
		l.addrRange("destination", m.Dst)
	case *ir.CommentMatch:
		l.printf(" /* %s */", m.Text)
	case *ir.LengthMatch:
		l.printf(" length %s", invString(m.Invert))
		if m.Min == m.Max {
			l.printf("%d", m.Min)
		} else {
			l.printf("%d:%d", m.Min, m.Max)
		}
	case *ir.TTLMatch:
		op := cmpOpNames[m.Op]
		if m.HL {
			l.printf(" HL match HL %s %d", op, m.Value)
		} else {
			l.printf(" TTL match TTL %s %d", op, m.Value)
		}
	case *ir.MACMatch:
		l.b.WriteString(" MAC")
		if m.Invert {
			l.b.WriteString(" !")
		}
		a := m.Addr
		l.printf(" %02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5])
	case *ir.AddrTypeMatch:
		listAddrType(&l.b, m)
	case *ir.PktTypeMatch:
		listPktType(&l.b, m)
	case *ir.DSCPMatch:
		listDSCP(&l.b, m)
	case *ir.TOSMatch:
		listTOS(&l.b, m, numeric)
	case *ir.ECNMatch:
		listECN(&l.b, m)
	case *ir.TCPMSSMatch:
		listTCPMSS(&l.b, m)
	case *ir.SetMatch:
		var sb strings.Builder
		writeSetMatch(&sb, m, "")
		l.b.WriteString(sb.String())
	case *ir.ConntrackMatch:
		var sb strings.Builder
		writeConntrack(&sb, m, "", numeric)
		l.b.WriteString(sb.String())
	case *ir.OwnerMatch:
		l.b.WriteString(ownerListing(m, numeric))
	case *ir.DevGroupMatch:
		l.b.WriteString(devGroupText(m, "", numeric))
	case *ir.PhysdevMatch:
		l.b.WriteString(" PHYSDEV match" + physdevText(m))
	default:
		if !listIP6Ext(&l.b, m) && !listIP6Hdr2(&l.b, m, numeric) && !l.listHdr4(m) {
			l.printf(" %s ", m.ModuleName())
		}
	}
}

// stateListing returns the -L text of the matches whose listing needs
// nothing but the match (the rate limits, the predicates, the marks); false
// for the others.
func stateListing(fam ir.Family, m ir.Match) (string, bool) {
	switch m := m.(type) {
	case *ir.LimitMatch:
		return limitListing(m), true
	case *ir.RecentMatch:
		return recentListing(fam, m), true
	case *ir.HashLimitMatch:
		return hashLimitText(fam, m, false), true
	case *ir.StringMatch:
		return stringListing(m), true
	case *ir.U32Match:
		return u32Listing(m), true
	case *ir.TimeMatch:
		return timeListing(m), true
	case *ir.ConnlimitMatch:
		return connlimitListing(m), true
	case *ir.CPUMatch:
		return cpuListing(m), true
	case *ir.StatisticMatch:
		return statisticListing(m), true
	case *ir.MarkMatch:
		return markListing(m), true
	case *ir.ConnmarkMatch:
		return connmarkListing(m), true
	}
	return "", false
}

// tcp lists a tcp match: ports, option, flags.
func (l *lister) tcp(m *ir.TCPMatch) {
	l.b.WriteString(" tcp")
	l.ports("spt", m.SrcPort, "tcp")
	l.ports("dpt", m.DstPort, "tcp")
	if m.Option.Kind != 0 || m.Option.Invert {
		l.printf(" option=%s%d", invString(m.Option.Invert), m.Option.Kind)
	}
	if m.Flags.Mask != 0 || m.Flags.Invert {
		l.printf(" flags:%s", invString(m.Flags.Invert))
		if l.opts.Numeric {
			l.printf("0x%02X/0x%02X", m.Flags.Mask, m.Flags.Comp)
		} else {
			l.printf("%s/%s", tcpFlagsList(m.Flags.Mask), tcpFlagsList(m.Flags.Comp))
		}
	}
}

// multiport lists a multiport match of rule r.
func (l *lister) multiport(r *ir.Rule, m *ir.MultiportMatch) {
	l.b.WriteString(" multiport ")
	switch m.Dir {
	case ir.MultiportSource:
		l.b.WriteString("sports ")
	case ir.MultiportDestination:
		l.b.WriteString("dports ")
	case ir.MultiportEither:
		l.b.WriteString("ports ")
	default:
		l.b.WriteString("ERROR ")
	}
	if m.Invert {
		l.b.WriteString(" !")
	}
	proto := multiportProto(r.Proto.Num)
	for i, p := range m.Ports {
		if i > 0 {
			l.b.WriteByte(',')
		}
		l.port(p.First, proto)
		if p.First != p.Last {
			l.b.WriteByte(':')
			l.port(p.Last, proto)
		}
	}
}

// cmpOpNames are the comparisons as the ttl and hl matches print them.
var cmpOpNames = map[ir.CmpOp]string{ir.CmpEq: "==", ir.CmpNe: "!=", ir.CmpLt: "<", ir.CmpGt: ">"}

// invString returns "!" when inverted.
func invString(inverted bool) string {
	if inverted {
		return "!"
	}
	return ""
}

// icmpType is print_icmptype / print_icmpv6type: the type's name without
// -n when one has exactly the type and code range, else "type T" with the
// code or codes. The name is preceded by a space, "type" is not.
func (l *lister) icmpType(codes []icmpName, m *ir.ICMPMatch) {
	if !l.opts.Numeric {
		for _, c := range codes {
			if m.V6 && c.typ >= icmpv6MLDFirst && c.typ <= icmpv6MLDLast {
				// The MLD names came after 1.8.9.
				continue
			}
			if c.typ == m.Type && c.codeMin == m.CodeMin && c.codeMax == m.CodeMax {
				l.printf(" %s%s", invString(m.Invert), c.name)
				return
			}
		}
	}
	if m.Invert {
		l.b.WriteString(" !")
	}
	l.printf("type %d", m.Type)
	if m.CodeMin == m.CodeMax {
		l.printf(" code %d", m.CodeMin)
	} else if m.CodeMin != 0 || m.CodeMax != 0xff {
		l.printf(" codes %d-%d", m.CodeMin, m.CodeMax)
	}
}

// The ICMPv6 types of the MLD names that iptables 1.8.9 does not know.
const (
	icmpv6MLDFirst = 130
	icmpv6MLDLast  = 132
)

// addrRange prints one direction of the iprange match (always numeric).
func (l *lister) addrRange(dir string, r ir.AddrRange) {
	if !r.Set {
		return
	}
	l.printf(" %s IP range", dir)
	if r.Invert {
		l.b.WriteString(" !")
	}
	l.printf(" %s-%s", formatAddr(r.From), formatAddr(r.To))
}

// target prints the target's own part (standard verdicts and chains have
// none).
func (l *lister) target(t ir.Target) {
	if isNatTarget(t.Kind) {
		l.b.WriteString(natTargetText(l.fam, t, false))
		return
	}
	switch t.Kind {
	case ir.TargetMark:
		l.b.WriteString(markTargetListing(t.Mark))
	case ir.TargetConnmark:
		l.b.WriteString(connmarkTargetListing(t.Connmark))
	case ir.TargetTCPMSS, ir.TargetDSCP, ir.TargetTOS, ir.TargetTTL, ir.TargetHL,
		ir.TargetCTNotrack, ir.TargetNotrack:
		l.b.WriteString(mangleTargetListing(t, l.opts.Numeric))
	case ir.TargetReject:
		l.printf(" reject-with %s", t.RejectWith)
	case ir.TargetNFLog:
		l.b.WriteString(nflogOptionsText(t.NFLog, ""))
	case ir.TargetSet:
		l.b.WriteString(setTargetText(t.Set, ""))
	case ir.TargetLog:
		o := ir.LogOptions{Level: DefaultLogLevel}
		if t.Log != nil {
			o = *t.Log
		}
		l.b.WriteString(" LOG")
		if l.opts.Numeric {
			l.printf(" flags %d level %d", o.Flags, o.Level)
		} else {
			if int(o.Level) < len(logLevelNames) {
				l.printf(" level %s", logLevelNames[o.Level])
			} else {
				l.printf(" UNKNOWN level %d", o.Level)
			}
			flags := []struct {
				bit  uint8
				name string
			}{
				{ir.LogFlagTCPSeq, "tcp-sequence"},
				{ir.LogFlagTCPOpt, "tcp-options"},
				{ir.LogFlagIPOpt, "ip-options"},
				{ir.LogFlagUID, "uid"},
				{ir.LogFlagMACDecode, "macdecode"},
			}
			known := uint8(0)
			for _, f := range flags {
				known |= f.bit
				if o.Flags&f.bit != 0 {
					l.printf(" %s", f.name)
				}
			}
			if o.Flags&^known != 0 {
				l.b.WriteString(" unknown-flags")
			}
		}
		if o.Prefix != "" {
			l.printf(" prefix \"%s\"", o.Prefix)
		}
	}
}
