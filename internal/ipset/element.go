package ipset

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// parseUint parses a decimal (or 0x hex) number within [min, max] with
// ipset's messages.
func parseUint(s string, min, max uint64) (uint64, *Error) {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, syntaxErr("'%s' is out of range %d-%d", s, min, max)
		}
		return 0, syntaxErr("'%s' is invalid as number", s)
	}
	if n < min || n > max {
		return 0, syntaxErr("'%s' is out of range %d-%d", s, min, max)
	}
	return n, nil
}

// addrRange is a parsed address part: an inclusive range of addresses, or
// a prefix (cidr given).
type addrRange struct {
	from, to netip.Addr
	bits     int  // prefix length written, or the family's full length
	isRange  bool // from-to written
	hasCIDR  bool // /n written
}

// parseAddrPart parses IP, IP/cidr or IP-IP of family fam.
func parseAddrPart(s string, fam Family) (addrRange, *Error) {
	var r addrRange
	host, cidr, hasCIDR := strings.Cut(s, "/")
	from, to, isRange := strings.Cut(host, "-")
	if (hasCIDR && (isRange || cidr == "")) || from == "" || (isRange && to == "") {
		return r, syntaxErr("cannot parse %s: resolving to %s address failed", s, famWord(fam))
	}
	if hasCIDR {
		// ipset reads the prefix length before it resolves the address.
		n, e := parseUint(cidr, 0, uint64(fam.bits()))
		if e != nil {
			return r, e
		}
		r.bits, r.hasCIDR = int(n), true
	}
	a, ok := parseAddr(from, fam)
	if !ok {
		return r, syntaxErr("cannot parse %s: resolving to %s address failed", from, famWord(fam))
	}
	r.from, r.to = a, a
	if !hasCIDR {
		r.bits = fam.bits()
	}
	if isRange {
		if fam == Inet6 {
			return r, syntaxErr("%%RANGE6%%: %s", s)
		}
		b, ok := parseAddr(to, fam)
		if !ok {
			return r, syntaxErr("cannot parse %s: resolving to %s address failed", to, famWord(fam))
		}
		if b.Less(a) {
			a, b = b, a
		}
		r.from, r.to, r.isRange = a, b, true
	}
	return r, nil
}

// parseAddr parses an address of family fam as getaddrinfo does for
// numeric hosts: IPv4 in any inet_aton form ("10" is 0.0.0.10, "10.1" is
// 10.0.0.1). Host names are not resolved.
func parseAddr(s string, fam Family) (netip.Addr, bool) {
	if fam == Inet6 {
		a, err := netip.ParseAddr(s)
		if err == nil && a.Is6() && a.Zone() == "" {
			return a, true
		}
	} else if a, ok := parseInetAton(s); ok {
		return a, true
	}
	return hostsLookup(s, fam)
}

// hostsLookup resolves a host name through /etc/hosts (xfw does not ask
// DNS, which ipset would).
func hostsLookup(name string, fam Family) (netip.Addr, bool) {
	netdb.hostOnce.Do(loadHosts)
	for _, a := range netdb.hosts[name] {
		if a.Is4() == (fam == Inet) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// parseInetAton parses a.b.c.d, a.b.c, a.b or a, each part decimal, octal
// (leading 0) or hex (0x), the last part filling the remaining bytes.
func parseInetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, p := range parts {
		if p == "" || p[0] == '+' || p[0] == '-' {
			return netip.Addr{}, false
		}
		base := 10
		if len(p) > 1 && p[0] == '0' {
			base = 8 // as inet_aton; ipset takes no hex
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var addr uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		addr |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	return uint32ToAddr(uint32(addr | last)), true
}

func famWord(f Family) string {
	if f == Inet6 {
		return "IPv6"
	}
	return "IPv4"
}

// addrToUint32 and uint32ToAddr convert IPv4 addresses.
func addrToUint32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func uint32ToAddr(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// ipBlocks returns the addresses (as full-length or netmask-length
// prefixes) a hash:ip style address part stands for, in the kernel's order.
// It stops after limit+1 blocks (the caller reports the set full).
func ipBlocks(r addrRange, fam Family, netmask uint8, limit int) ([]netip.Prefix, *Error) {
	if r.hasCIDR && r.bits == 0 {
		return nil, kernelErr(msgInvalidCIDR)
	}
	mask := fam.bits()
	if netmask != 0 {
		mask = int(netmask)
	}
	if fam == Inet6 {
		p, _ := r.from.Prefix(mask)
		return []netip.Prefix{p}, nil
	}
	from, to := addrToUint32(r.from), addrToUint32(r.to)
	if r.hasCIDR {
		p, _ := r.from.Prefix(r.bits)
		from = addrToUint32(p.Addr())
		to = from | (^uint32(0) >> r.bits)
	}
	step := uint64(1) << (32 - mask)
	var out []netip.Prefix
	for ip := uint64(from) &^ (step - 1); ip <= uint64(to); ip += step {
		out = append(out, netip.PrefixFrom(uint32ToAddr(uint32(ip)), mask))
		if len(out) > limit {
			break
		}
	}
	return out, nil
}

// netBlocks returns the networks a net-type address part stands for: the
// prefix written, or the fewest prefixes covering a range.
func netBlocks(r addrRange, fam Family) ([]netip.Prefix, *Error) {
	if r.hasCIDR && r.bits == 0 {
		return nil, kernelErr(msgInvalidCIDR)
	}
	if !r.isRange {
		p, _ := r.from.Prefix(r.bits)
		return []netip.Prefix{p}, nil
	}
	var out []netip.Prefix
	from, to := uint64(addrToUint32(r.from)), uint64(addrToUint32(r.to))
	for from <= to {
		size := 32
		for size > 0 {
			block := uint64(1) << (32 - (size - 1))
			if from%block != 0 || from+block-1 > to {
				break
			}
			size--
		}
		out = append(out, netip.PrefixFrom(uint32ToAddr(uint32(from)), size))
		from += uint64(1) << (32 - size)
	}
	return out, nil
}

// portRange is a parsed port part.
type portRange struct {
	proto    uint8
	from, to uint16
}

// parsePortPart parses [proto:]port[-port] (the second part of
// hash:ip,port and hash:net,port).
func parsePortPart(s string, fam Family) (portRange, *Error) {
	protoName, port, hasProto := strings.Cut(s, ":")
	if !hasProto || port == "" || protoName == "" {
		protoName, port = "tcp", s
	}
	proto, ok := protocolNumber(protoName)
	if !ok {
		return portRange{}, syntaxErr("cannot parse '%s' as a protocol", protoName)
	}
	pr := portRange{proto: proto}
	switch proto {
	case ProtoTCP, ProtoUDP, ProtoSCTP, ProtoUDPLite:
		r, err := parsePortRange(port, protoName)
		if err != nil {
			return pr, err
		}
		pr.from, pr.to = r.from, r.to
	case ProtoICMP:
		if fam == Inet6 {
			return pr, plainSyntaxErr("Syntax error: Protocol ICMP can be used with family inet only\nInvalid %s command: missing setname", "%CMD%")
		}
		v, ok := parseICMP(port, icmpTypes)
		if !ok {
			return pr, plainSyntaxErr("Cannot parse %s as an ICMP type/code.", port)
		}
		pr.from, pr.to = v, v
	case ProtoICMPv6:
		if fam == Inet {
			return pr, plainSyntaxErr("Syntax error: Protocol ICMPv6 can be used with family inet6 only\nInvalid %s command: missing setname", "%CMD%")
		}
		v, ok := parseICMP(port, icmp6Types)
		if !ok {
			return pr, plainSyntaxErr("Cannot parse %s as an ICMPv6 type/code.", port)
		}
		pr.from, pr.to = v, v
	default:
		// Protocols without ports take the pseudo port 0 only.
		if port != "0" {
			return pr, syntaxErr("Protocol %s can be used with pseudo port value 0 only.", protoName)
		}
	}
	return pr, nil
}

// parsePort parses a port number or service name. A failure is reported
// in ipset's three lines (the number, the protocol as a number, the port).
func parsePort(s, proto string, protoGiven bool) (uint16, *Error) {
	first := fmt.Sprintf("'%s' is invalid as number", s)
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		n, err := strconv.ParseUint(s, 10, 64)
		if err == nil && n <= 65535 {
			return uint16(n), nil
		}
		if err == nil || err.(*strconv.NumError).Err == strconv.ErrRange {
			first = fmt.Sprintf("'%s' is out of range 0-65535", s)
		}
	} else if p, ok := serviceByName(s, proto); ok {
		return p, nil
	}
	err := plainSyntaxErr("Syntax error: %s\nSyntax error: '%s' is invalid as number\ncannot parse '%s' as a %s port", first, proto, s, proto)
	err.noLine = true
	return 0, err
}

// parseICMP parses an ICMP type name or type/code.
func parseICMP(s string, names []icmpName) (uint16, bool) {
	for _, n := range names {
		if strings.EqualFold(n.name, s) {
			return uint16(n.typ)<<8 | uint16(n.code), true
		}
	}
	t, c, ok := strings.Cut(s, "/")
	if !ok {
		return 0, false
	}
	tv, err1 := strconv.ParseUint(t, 10, 8)
	cv, err2 := strconv.ParseUint(c, 10, 8)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return uint16(tv)<<8 | uint16(cv), true
}

// icmpName is an ICMP type/code name as ipset knows it.
type icmpName struct {
	name      string
	typ, code uint8
}

var icmpTypes = []icmpName{
	{"echo-reply", 0, 0}, {"pong", 0, 0},
	{"network-unreachable", 3, 0}, {"host-unreachable", 3, 1}, {"protocol-unreachable", 3, 2},
	{"port-unreachable", 3, 3}, {"fragmentation-needed", 3, 4}, {"source-route-failed", 3, 5},
	{"network-unknown", 3, 6}, {"host-unknown", 3, 7}, {"network-prohibited", 3, 9},
	{"host-prohibited", 3, 10}, {"TOS-network-unreachable", 3, 11}, {"TOS-host-unreachable", 3, 12},
	{"communication-prohibited", 3, 13}, {"host-precedence-violation", 3, 14},
	{"precedence-cutoff", 3, 15}, {"source-quench", 4, 0}, {"network-redirect", 5, 0},
	{"host-redirect", 5, 1}, {"TOS-network-redirect", 5, 2}, {"TOS-host-redirect", 5, 3},
	{"echo-request", 8, 0}, {"ping", 8, 0}, {"router-advertisement", 9, 0},
	{"router-solicitation", 10, 0}, {"ttl-zero-during-transit", 11, 0},
	{"ttl-zero-during-reassembly", 11, 1}, {"ip-header-bad", 12, 0},
	{"required-option-missing", 12, 1}, {"timestamp-request", 13, 0},
	{"timestamp-reply", 14, 0}, {"address-mask-request", 17, 0}, {"address-mask-reply", 18, 0},
}

var icmp6Types = []icmpName{
	{"no-route", 1, 0}, {"communication-prohibited", 1, 1}, {"address-unreachable", 1, 3},
	{"port-unreachable", 1, 4}, {"packet-too-big", 2, 0}, {"ttl-zero-during-transit", 3, 0},
	{"ttl-zero-during-reassembly", 3, 1}, {"bad-header", 4, 0},
	{"unknown-header-type", 4, 1}, {"unknown-option", 4, 2},
	{"echo-request", 128, 0}, {"ping", 128, 0}, {"echo-reply", 129, 0}, {"pong", 129, 0},
	{"router-solicitation", 133, 0}, {"router-advertisement", 134, 0},
	{"neighbour-solicitation", 135, 0}, {"neigbour-solicitation", 135, 0},
	{"neighbour-advertisement", 136, 0}, {"neigbour-advertisement", 136, 0},
	{"redirect", 137, 0},
}

// icmpText renders an ICMP type/code as ipset lists it.
func icmpText(v uint16, names []icmpName) string {
	for _, n := range names {
		if uint16(n.typ)<<8|uint16(n.code) == v {
			return n.name
		}
	}
	return fmt.Sprintf("%d/%d", v>>8, v&0xff)
}

// netdbFiles is /etc/protocols, /etc/hosts and /etc/services, each read
// once when first needed (a command naming "tcp" or a port number reads
// none).
type netdbFiles struct {
	protoOnce, hostOnce, serviceOnce sync.Once
	protos                           map[string]uint8
	names                            map[uint8]string
	services                         map[string]uint16 // "name/proto"
	hosts                            map[string][]netip.Addr
}

// The files names in members are looked up in.
const (
	protocolsFile = "/etc/protocols"
	hostsFile     = "/etc/hosts"
	servicesFile  = "/etc/services"
)

// NetdbFiles are the files an invocation may read besides the one -file
// names and the store ($XFW_IPSET_FILE): where names in members (hosts,
// services, protocols) are looked up.
var NetdbFiles = []string{protocolsFile, hostsFile, servicesFile}

// netdb is the files as this process read them (ForgetNetdb).
var netdb = &netdbFiles{}

// ForgetNetdb makes the next lookup read /etc/protocols, /etc/hosts and
// /etc/services again: a process that runs many invocations (xfw's agent)
// calls it before each, so that each sees the files as they are then, as
// the kernel's ipset, a process per command, does. Invocations must not
// run meanwhile (the namespace's lock serialises them).
func ForgetNetdb() { netdb = &netdbFiles{} }

// builtinProtos are the protocols ipset knows without /etc/protocols:
// they take precedence over the file's.
var builtinProtos = map[string]uint8{"tcp": ProtoTCP, "udp": ProtoUDP, "icmp": ProtoICMP,
	"icmpv6": ProtoICMPv6, "ipv6-icmp": ProtoICMPv6, "sctp": ProtoSCTP, "udplite": ProtoUDPLite}

// loadProtocols reads /etc/protocols.
func loadProtocols() {
	netdb.protos = map[string]uint8{}
	netdb.names = map[uint8]string{}
	readLines(protocolsFile, func(f []string) {
		if len(f) < 2 {
			return
		}
		n, err := strconv.ParseUint(f[1], 10, 8)
		if err != nil {
			return
		}
		for i, name := range append([]string{f[0]}, f[2:]...) {
			if _, ok := netdb.protos[name]; !ok {
				netdb.protos[name] = uint8(n)
			}
			if _, ok := netdb.names[uint8(n)]; !ok && i == 0 {
				netdb.names[uint8(n)] = name
			}
		}
	})
	for name, n := range builtinProtos {
		netdb.protos[name] = n
	}
	for n, name := range map[uint8]string{ProtoICMPv6: "ipv6-icmp", ProtoTCP: "tcp", ProtoUDP: "udp",
		ProtoICMP: "icmp", ProtoSCTP: "sctp", ProtoUDPLite: "udplite"} {
		if _, ok := netdb.names[n]; !ok {
			netdb.names[n] = name
		}
	}
}

// loadHosts reads /etc/hosts.
func loadHosts() {
	netdb.hosts = map[string][]netip.Addr{}
	readLines(hostsFile, func(f []string) {
		if len(f) < 2 {
			return
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil || a.Zone() != "" {
			return
		}
		for _, name := range f[1:] {
			netdb.hosts[name] = append(netdb.hosts[name], a)
		}
	})
}

// loadServices reads /etc/services.
func loadServices() {
	netdb.services = map[string]uint16{}
	readLines(servicesFile, func(f []string) {
		if len(f) < 2 {
			return
		}
		num, proto, ok := strings.Cut(f[1], "/")
		if !ok {
			return
		}
		n, err := strconv.ParseUint(num, 10, 16)
		if err != nil {
			return
		}
		for _, name := range append([]string{f[0]}, f[2:]...) {
			if _, ok := netdb.services[name+"/"+proto]; !ok {
				netdb.services[name+"/"+proto] = uint16(n)
			}
		}
	})
}

func readLines(path string, fn func([]string)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fn(strings.Fields(line))
	}
}

func protocolNumber(s string) (uint8, bool) {
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		return uint8(n), true
	}
	if n, ok := builtinProtos[strings.ToLower(s)]; ok {
		return n, true // whatever /etc/protocols says
	}
	netdb.protoOnce.Do(loadProtocols)
	n, ok := netdb.protos[strings.ToLower(s)]
	return n, ok
}

func protocolName(n uint8) string {
	netdb.protoOnce.Do(loadProtocols)
	if s, ok := netdb.names[n]; ok {
		return s
	}
	return strconv.Itoa(int(n))
}

func serviceByName(name, proto string) (uint16, bool) {
	netdb.serviceOnce.Do(loadServices)
	p, ok := netdb.services[name+"/"+proto]
	return p, ok
}
