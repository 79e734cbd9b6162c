package compiler

// Field numbers, value sentinels, actions and flags: the same values as
// bpf/common.h (TestEnumMirrors in the dataplane package checks the enums).

// Field is a classification field (enum xfw_field).
type Field int

// Classification fields.
const (
	FieldSrc Field = iota
	FieldDst
	FieldProto
	FieldSport
	FieldDport
	FieldTCPFlags
	FieldICMP
	FieldIIF
	FieldOIF
	FieldFrag
	FieldLen
	FieldTTL
	FieldMAC
	// FieldSets is the packet's set-membership bits: bit k is the result
	// (before "!") of the generation's set condition k (Generation.SetConds),
	// a small field of 8 bits, computed by the BPF program's xfw_set_bits.
	FieldSets
	// FieldCt is the packet's connection-tracking facts (XFW_F_CT), a
	// small field of 16 bits packed as CtValue describes. Its conditions
	// are kept in key order (ctKey), not value order: see ctKey.
	FieldCt
	// FieldCtOrigSrc and FieldCtOrigDst are the addresses of the packet's
	// connection in its original direction (--ctorigsrc, --ctrepldst and
	// --ctorigdst, --ctreplsrc: xfw has no NAT, so the reply tuple is the
	// original one inverted); 0 for a packet without a connection.
	FieldCtOrigSrc
	FieldCtOrigDst
	// FieldCtOrigSport and FieldCtOrigDport are the connection's original
	// source and destination "ports" as the kernel's tuple has them
	// (ICMP: the identifier and type << 8 | code; protocols without
	// ports: 0).
	FieldCtOrigSport
	FieldCtOrigDport
	// FieldCtReplSport and FieldCtReplDport are the reply tuple's ports:
	// the original ones swapped, except for ICMP, whose reply tuple keeps
	// the identifier as source and has the reply's type << 8 | code as
	// destination.
	FieldCtReplSport
	FieldCtReplDport
	// FieldAddrType is the route types of the packet's addresses, for
	// -m addrtype: a small field of 10 bits packed as AddrTypeValue
	// describes (XFW_F_ADDRTYPE).
	FieldAddrType
	// FieldPktType is the packet's skb->pkt_type (ir.PktType*), for
	// -m pkttype (XFW_F_PKTTYPE).
	FieldPktType
	// FieldTOS is the IPv4 TOS / IPv6 traffic class byte, for -m dscp,
	// -m tos and -m ecn's --ecn-ip-ect (XFW_F_TOS).
	FieldTOS
	// FieldTCPMSS is a TCP packet's maximum segment size option, for
	// -m tcpmss: 0-65535, ValNone without one, ValTrunc when the header
	// or its options are cut short or the data offset is below 5
	// (XFW_F_TCPMSS; terms_header.go).
	FieldTCPMSS
	// FieldExt6 is the answers of the generation's IPv6 extension header
	// matches (terms_ip6ext.go, XFW_F_EXT6).
	FieldExt6
	// FieldHdr4 is the answers of the generation's sctp, dccp, esp, ah
	// and tcp option conditions (terms_hdr4.go, XFW_F_HDR4).
	FieldHdr4
	// FieldPhysIn and FieldPhysOut are the bridge ports of a packet
	// br_netfilter passes to iptables, for -m physdev (physdev.go): the
	// ports' ifindexes, PhysNone without bridge information, PhysNull
	// for no port, PhysAnyPort for a port the data plane cannot name
	// (XFW_F_PHYSIN, XFW_F_PHYSOUT).
	FieldPhysIn
	FieldPhysOut
	NumFields
)

var fieldNames = [NumFields]string{"src", "dst", "proto", "sport", "dport", "tcpflags",
	"icmp", "iif", "oif", "frag", "len", "ttl", "mac", "sets", "ct", "ctosrc", "ctodst",
	"ctosport", "ctodport", "ctrsport", "ctrdport", "addrtype", "pkttype",
	"tos", "tcpmss", "ext6", "hdr4", "physin", "physout"}

// String names the field.
func (f Field) String() string {
	if f >= 0 && f < NumFields {
		return fieldNames[f]
	}
	return "field?"
}

// FieldKind says how a field's value is mapped to its class in the data plane.
type FieldKind int

const (
	// KindSmall fields are looked up in a direct array indexed by value.
	KindSmall FieldKind = iota
	// KindAddr fields are looked up by binary search over interval bounds.
	KindAddr
	// KindHash fields are looked up in a hash map with a default class.
	KindHash
)

// Kind returns the lookup structure of the field.
func (f Field) Kind() FieldKind {
	switch f {
	case FieldSrc, FieldDst, FieldCtOrigSrc, FieldCtOrigDst:
		return KindAddr
	case FieldIIF, FieldOIF, FieldMAC, FieldPhysIn, FieldPhysOut:
		return KindHash
	}
	return KindSmall
}

// isIfaceField reports whether f's values are interface indexes (the
// hash holds every known device, the default class the others).
func isIfaceField(f Field) bool {
	return f == FieldIIF || f == FieldOIF || f == FieldPhysIn || f == FieldPhysOut
}

// NumAddrFields is the number of KindAddr fields (xfw_family_cfg
// addr_base, addr_count).
const NumAddrFields = 4

// AddrIndex returns the place of KindAddr field f among the address
// fields: its bounds are Generation.Bounds[AddrBase[i] : AddrBase[i]+
// AddrCount[i]].
func (f Field) AddrIndex() int {
	switch f {
	case FieldDst:
		return 1
	case FieldCtOrigSrc:
		return 2
	case FieldCtOrigDst:
		return 3
	}
	return 0
}

// Value sentinels (XFW_V_*, XFW_FLAGS_*, XFW_PROTO_*).
const (
	// ValNone is a port or ICMP value of a packet without that header.
	ValNone = 65536
	// ValTrunc is a port or ICMP value of a packet whose header is cut short.
	ValTrunc = 65537
	// ValShort + p is the port value p of a TCP or UDP header cut short
	// after its first four bytes: multiport reads the port, the tcp and
	// udp matches hotdrop the packet (classify.h's view of ValTrunc).
	ValShort = 65538
	// FlagsNone is the TCP flags value of a non-TCP packet or later fragment.
	FlagsNone = 256
	// FlagsTrunc is the TCP flags value of a truncated TCP header.
	FlagsTrunc = 257
	// FlagsLater + b is the TCP flags value of a TCP later fragment whose
	// bytes at the kernel's transport offset give flags byte b (ecn's
	// TCP tests read it; the tcp match never matches a later fragment).
	FlagsLater = 258
	// ProtoErr is the protocol of an IPv6 packet whose extension headers
	// cannot be walked (rules with -p hotdrop it).
	ProtoErr = 256
	// ProtoNoMatch is the protocol of an IPv6 later fragment followed by
	// another extension header (rules with -p do not match it).
	ProtoNoMatch = 257
	// ifaceUnknown stands for every interface index the compiler was not
	// told about (ifindex 0xffffffff never names a device).
	ifaceUnknown = 0xffffffff
	// MACNone is the Ethernet source of a packet received on a device
	// that is not Ethernet (loopback): the kernel's mac match never
	// matches it, inverted or not (mac_mt checks the device type). It lies
	// beyond the 48-bit addresses, so no MAC condition contains it; the
	// compiler gives it its own hash entry. (XFW_MAC_NONE; found by the
	// differential test, internal/testkit/difftest.)
	MACNone = 1 << 48
)

// SmallDomain is the number of values of a KindSmall field, sentinels
// included: the size of its direct array.
func (f Field) SmallDomain() int {
	switch f {
	case FieldProto:
		return 258
	case FieldSport, FieldDport:
		return ValShort + 65536
	case FieldICMP:
		return 65538
	case FieldTCPFlags:
		return FlagsLater + 256
	case FieldFrag:
		return 2
	case FieldLen:
		return 65536
	case FieldTTL:
		return 256
	case FieldSets:
		return 1 << MaxSetConds
	case FieldCtOrigSport, FieldCtOrigDport, FieldCtReplSport, FieldCtReplDport:
		return 65536
	case FieldCt:
		return ctDomain
	case FieldAddrType:
		return addrTypeDomain
	case FieldPktType:
		return pktTypeDomain
	case FieldTOS:
		return tosDomain
	case FieldTCPMSS:
		return ValTrunc + 1
	case FieldExt6:
		return ext6Domain
	case FieldHdr4:
		return hdr4Domain
	}
	return 0
}

// smallIndex returns the direct-array index (the packet's value) of the
// k-th value of a KindSmall field in the order the compiler keeps the
// field's conditions in: k itself, except for FieldCt (ctValueOfKey).
func (f Field) smallIndex(k int) int {
	if f == FieldCt {
		return int(ctValueOfKey(uint32(k)))
	}
	return k
}

// Chains indices (enum xfw_chain).
const (
	ChainInput   = 0
	ChainForward = 1
	ChainOutput  = 2
	NumChains    = 3
)

// Action is an entry's action (enum xfw_action).
type Action uint8

// Entry actions.
const (
	ActAccept Action = iota
	ActDrop
	ActReject
	ActContinue
	// ActDNAT is nat PREROUTING's DNAT (nat.go): Next holds the new IPv4
	// address, Aux the new port (0: unchanged).
	ActDNAT
	// ActSNAT is nat POSTROUTING's SNAT or MASQUERADE (nat.go): accept,
	// the source translated; Next the new IPv4 address (MasqueradeAddr:
	// the output interface's), Aux the new port (0: chosen).
	ActSNAT
	// ActCall enters a user chain's region (regions.go): counted as a
	// CONTINUE entry, it pushes the position after it on the walk's
	// call stack and goes on at Next, the region's first entry. Aux
	// CallExitNext: its ActExit entry follows it, and a RETURN resumes
	// past that entry.
	ActCall
	// ActReturn ends a region (universal condition): the walk goes on at
	// the position the matching ActCall pushed.
	ActReturn
	// ActUnwind is ACCEPT in a region of a table's chain followed by
	// other tables in the walk: counted, it empties the call stack, goes
	// on at the position the outermost CALL pushed, its ActExit entry,
	// and marks the walk as unwinding.
	ActUnwind
	// ActExit follows a CALL entry of a table's chain followed by other
	// tables (universal condition, no rule): an unwinding walk goes on at
	// Next, the next table's chain; any other at the entry after it.
	ActExit
	// ActReroute ends the walk of a packet whose mark changed since its
	// route was made, where the kernel routes it again (mark_route.go):
	// the data plane routes it with its mark and resumes the walk at
	// Next (Layout.Reroute), in the chain that route picks.
	ActReroute
)

// CallExitNext is the Aux of an ActCall entry followed by its ActExit
// entry (XFW_CALL_EXIT_NEXT): a RETURN from the region resumes past the
// exit entry, which would only send the walk on to the next entry (one
// search step per call saved); an unwinding walk still resumes at it.
const CallExitNext = 1

// retPastExit marks a call stack position pushed by a CallExitNext CALL
// (XFW_RET_PAST_EXIT): positions are below 2^23.
const retPastExit = 1 << 31

// Entry flags (XFW_EF_*).
const (
	// EFCount increments the entry's rule counters.
	EFCount uint8 = 0x01
	// EFLog emits a LOG event.
	EFLog uint8 = 0x02
	// EFHotdropL4 drops, uncounted, a packet whose transport header is cut
	// short (XFW_HD_L4) when it reaches this entry.
	EFHotdropL4 uint8 = 0x04
	// EFHotdropProto drops, uncounted, an IPv6 packet whose extension
	// headers cannot be walked (XFW_HD_PROTO).
	EFHotdropProto uint8 = 0x08
	// EFSetCount marks a set counting probe (XFW_EF_SETCOUNT): a CONTINUE
	// entry of no rule, placed before a rule whose set match updates set
	// entry counters, with the condition under which the kernel evaluates
	// that match (the rule's other conditions before it); Aux is the set
	// condition, with SetCountSkipSub for "! --update-subcounters".
	EFSetCount uint8 = 0x10
	// EFProbe marks a probe (XFW_EF_PROBE): a CONTINUE entry of no rule,
	// placed before a rule with a probed match (-m limit, ...), with the
	// condition under which the kernel evaluates that match (the rule's
	// other conditions before it); Aux is the probe (Generation.Probes).
	// When the probe answers true the search goes on at the next entry,
	// otherwise at Next, past the rule (probe.go).
	EFProbe uint8 = 0x20
	// EFAct marks the entry of a rule whose target changes the packet and
	// continues (XFW_EF_ACT: -j MARK): the walk runs probe Aux for its
	// effect, then goes on at Next (mark.go).
	EFAct uint8 = 0x40
	// EFNatRange marks a NAT entry (ActDNAT, ActSNAT) with a range or
	// random flags (XFW_EF_NATRANGE): Aux is its ProbeNatRange (nat.go).
	EFNatRange uint8 = 0x80
)

// SetCountSkipSub is the Aux bit of a set counting probe whose match has
// "! --update-subcounters" (XFW_SETCNT_SKIPSUB).
const SetCountSkipSub = 0x100

// NoRule is the counter index of synthetic entries (XFW_NO_RULE).
const NoRule = 0xffffffff

// ChunkWords and ChunkBits are the size of a bit-vector chunk.
const (
	ChunkWords = 64
	ChunkBits  = ChunkWords * 64
	// MaxChunks bounds the entries of one family (XFW_MAX_CHUNKS).
	MaxChunks = 1024
	// MaxEntries is the largest flattened ruleset of one family.
	MaxEntries = MaxChunks * ChunkBits
	// MaxBounds is the most interval bounds an address field may have
	// (the data plane's binary search takes 22 steps).
	MaxBounds = 1 << 22
	// LogPrefixLen is the size of a LOG (NFLOG) prefix in the data plane.
	LogPrefixLen = 64
)

// Reject types (enum xfw_reject), indexed by iptables' canonical name.
var RejectTypes = map[string]uint16{
	"icmp-net-unreachable":   0,
	"icmp-host-unreachable":  1,
	"icmp-proto-unreachable": 2,
	"icmp-port-unreachable":  3,
	"icmp-net-prohibited":    4,
	"icmp-host-prohibited":   5,
	"icmp-admin-prohibited":  6,
	"tcp-reset":              7,
	"icmp6-no-route":         8,
	"icmp6-adm-prohibited":   9,
	"icmp6-addr-unreachable": 10,
	"icmp6-port-unreachable": 11,
	"icmp6-policy-fail":      12,
	"icmp6-reject-route":     13,
}
