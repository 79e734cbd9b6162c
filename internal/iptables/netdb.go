package iptables

import "strconv"

// protoEntry is one line of /etc/protocols.
type protoEntry struct {
	name    string
	num     int
	aliases []string
}

// serviceEntry is one line of /etc/services.
type serviceEntry struct {
	name    string
	port    int
	proto   string
	aliases []string
}

// chainProto is an entry of libxtables' xtables_chain_protos: names iptables
// knows without asking /etc/protocols, checked first in both directions.
type chainProto struct {
	name string
	num  uint8
}

// Protocol numbers used by the parser and the kernel checks.
const (
	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	protoDCCP    = 33
	protoESP     = 50
	protoAH      = 51
	protoICMPv6  = 58
	protoMH      = 135
	protoSCTP    = 132
	protoUDPLite = 136
)

// xtablesChainProtos is iptables 1.8.9's xtables_chain_protos, in order.
var xtablesChainProtos = []chainProto{
	{"tcp", protoTCP},
	{"sctp", protoSCTP},
	{"udp", protoUDP},
	{"udplite", protoUDPLite},
	{"icmp", protoICMP},
	{"ipv6-icmp", protoICMPv6},
	{"icmpv6", protoICMPv6},
	{"esp", protoESP},
	{"ah", protoAH},
	{"mobility-header", protoMH},
	{"ipv6-mh", protoMH},
	{"mh", protoMH},
	{"all", 0},
}

// getprotobyname looks a protocol up in /etc/protocols by name or alias
// (case-sensitive, as glibc does).
func getprotobyname(name string) (int, bool) {
	for _, p := range etcProtocols {
		if p.name == name {
			return p.num, true
		}
		for _, a := range p.aliases {
			if a == name {
				return p.num, true
			}
		}
	}
	return 0, false
}

// LookupProtocol is getprotobyname on the reference machine's
// /etc/protocols (compiled in): the number of a protocol name or alias,
// compared exactly. Other front ends (xfw conntrack) share the table.
func LookupProtocol(name string) (int, bool) { return getprotobyname(name) }

// getprotobynumber returns the first /etc/protocols name for num.
func getprotobynumber(num int) (string, bool) {
	for _, p := range etcProtocols {
		if p.num == num {
			return p.name, true
		}
	}
	return "", false
}

// parseProtocol is xtables_parse_protocol: a number 0–255, a name from
// xtables_chain_protos, or a name from /etc/protocols. The result is the
// uint16 libxtables returns; callers store it in the 8-bit protocol field.
func parseProtocol(s string) (uint16, *failure) {
	if v, ok := xtStrtoui(s, 0, maxUint8); ok {
		return uint16(v), nil
	}
	for _, p := range xtablesChainProtos {
		if p.name == s {
			return uint16(p.num), nil
		}
	}
	if n, ok := getprotobyname(s); ok {
		return uint16(n), nil
	}
	return 0, paramErr("unknown protocol \"%s\" specified", s)
}

// protoToName is xshared.c's proto_to_name(proto, 0): the name iptables
// prints for a protocol number, or "" when it prints the number.
func protoToName(num uint8) string {
	for _, p := range xtablesChainProtos {
		if p.num == num {
			return p.name
		}
	}
	if num != 0 {
		if name, ok := getprotobynumber(int(num)); ok {
			return name
		}
	}
	return ""
}

// protoString is how iptables-save prints "-p NUM".
func protoString(num uint8) string {
	if name := protoToName(num); name != "" {
		return name
	}
	return strconv.Itoa(int(num))
}

// getservbyname looks a service up in /etc/services for one protocol.
func getservbyname(name, proto string) (int, bool) {
	for _, s := range etcServices {
		if s.proto != proto {
			continue
		}
		if s.name == name {
			return s.port, true
		}
		for _, a := range s.aliases {
			if a == name {
				return s.port, true
			}
		}
	}
	return 0, false
}

// getaddrinfoProtos is the order in which glibc's getaddrinfo tries
// protocols for a service name when no socket type is given.
var getaddrinfoProtos = []string{"tcp", "udp", "dccp", "udplite", "sctp"}

// getaddrinfoPort is the port libxtables' xtables_getportbyname finds with
// getaddrinfo(NULL, name, NULL): decimal numbers as glibc converts them
// (truncated to 16 bits), else the first protocol defining the service.
func getaddrinfoPort(name string) (int, bool) {
	v, n, _ := cStrtoul(name, decimal)
	if n == len(name) || name == "" {
		// glibc stores the number in an int; negative means "look it up
		// by name", which then fails.
		if num := int32(uint32(v)); num >= 0 {
			return int(uint16(num)), true
		}
		return 0, false
	}
	for _, proto := range getaddrinfoProtos {
		if port, ok := getservbyname(name, proto); ok {
			return port, true
		}
	}
	return 0, false
}

// parsePort is xtables_parse_port: a number 0–65535 (base 0) or a service
// name for the protocol.
func parsePort(s, proto string) (uint16, *failure) {
	if v, ok := xtStrtoui(s, 0, maxUint16); ok {
		return uint16(v), nil
	}
	if port, ok := getservbyname(s, proto); ok {
		return uint16(port), nil
	}
	return 0, paramErr("invalid port/service `%s' specified", s)
}
