package conntrack

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol numbers conntrack formats specially.
const (
	ProtoICMP    = 1
	ProtoTCP     = 6
	ProtoUDP     = 17
	ProtoDCCP    = 33
	ProtoGRE     = 47
	ProtoICMPv6  = 58
	ProtoSCTP    = 132
	ProtoUDPLite = 136
)

// Status bits of Conn.Status (bpf/common.h XFW_CTST_*, the kernel's IPS_*
// bits 0–3 and xfw's own above them).
const (
	StatusExpected  = 0x1
	StatusSeenReply = 0x2
	StatusAssured   = 0x4
	StatusConfirmed = 0x8
	// StatusOrigB says the originator is endpoint b of the data plane's
	// key (xfw's own bit; the data plane reader resolves it).
	StatusOrigB = 0x100
)

// Version is the conntrack-tools release whose messages xfw reproduces.
const Version = "v1.4.7"

// Prefix starts conntrack's messages on stderr.
const Prefix = "conntrack " + Version + " (conntrack-tools): "

// TCPStates are the names of the TCP states (enum xfw_tcp_state, the
// kernel's numbering) as conntrack prints them.
var TCPStates = [...]string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED",
	"FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

// SCTPStates are the names of the SCTP states (the kernel's enum
// sctp_conntrack) as conntrack prints them.
var SCTPStates = [...]string{"NONE", "CLOSED", "COOKIE_WAIT", "COOKIE_ECHOED", "ESTABLISHED",
	"SHUTDOWN_SENT", "SHUTDOWN_RECD", "SHUTDOWN_ACK_SENT", "HEARTBEAT_SENT"}

// Conn is one tracked connection in the terms conntrack prints it: the
// original direction's tuple, the reply tuple when a translation makes it
// other than its mirror, and the connection's state.
type Conn struct {
	// IPv6 is the address family (false: IPv4).
	IPv6 bool
	// Proto is the layer-4 protocol number.
	Proto uint8
	// Src and Dst are the original direction's addresses.
	Src, Dst netip.Addr
	// SPort and DPort are the original direction's ports; ICMP and ICMPv6
	// queries carry their identifier in both, GRE its source and
	// destination keys.
	SPort, DPort uint16
	// ICMPType and ICMPCode are an ICMP query's original type and code.
	ICMPType, ICMPCode uint8
	// TCPState is the TCP state (index of TCPStates), or an SCTP
	// connection's state (index of SCTPStates).
	TCPState uint8
	// Status holds Status* bits.
	Status uint32
	// Timeout is the seconds left before the connection expires.
	Timeout uint64
	// Packets and Bytes count each direction (0 original, 1 reply).
	Packets, Bytes [2]uint64
	// DNAT says the destination was translated: the reply comes from
	// ReplSrc port ReplSPort, not from Dst and DPort.
	DNAT      bool
	ReplSrc   netip.Addr
	ReplSPort uint16
	// SNAT says the source was translated: the reply goes to ReplDst
	// port ReplDPort, not to Src and SPort.
	SNAT      bool
	ReplDst   netip.Addr
	ReplDPort uint16
	// Mark is the connection's mark (CONNMARK).
	Mark uint32
}

// ProtoName is libnetfilter_conntrack's name of a layer-4 protocol:
// "unknown" for those it has no extension for.
func ProtoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoUDPLite:
		return "udplite"
	case ProtoICMP:
		return "icmp"
	case ProtoICMPv6:
		return "icmpv6"
	case ProtoSCTP:
		return "sctp"
	case ProtoGRE:
		return "gre"
	case ProtoDCCP:
		return "dccp"
	}
	return "unknown"
}

// hasPorts reports whether conntrack prints sport= and dport= for p.
func hasPorts(p uint8) bool {
	switch p {
	case ProtoTCP, ProtoUDP, ProtoUDPLite, ProtoSCTP, ProtoDCCP:
		return true
	}
	return false
}

// isICMP reports whether a connection of protocol p in the family is an
// ICMP query (type=, code=, id=).
func (c *Conn) isICMP() bool {
	return (!c.IPv6 && c.Proto == ProtoICMP) || (c.IPv6 && c.Proto == ProtoICMPv6)
}

// ReplyICMPType is the type of the reply to an ICMP query of type t: the
// kernel's invert maps (echo, timestamp, information, address mask; for
// ICMPv6 echo and node information). Others map to themselves.
func ReplyICMPType(ipv6 bool, t uint8) uint8 {
	if ipv6 {
		switch t {
		case 128:
			return 129
		case 129:
			return 128
		case 139:
			return 140
		case 140:
			return 139
		}
		return t
	}
	switch t {
	case 8:
		return 0
	case 0:
		return 8
	case 13, 15, 17:
		return t + 1
	case 14, 16, 18:
		return t - 1
	}
	return t
}

// FormatOptions are the -o output options that change the line.
type FormatOptions struct {
	// Extended prefixes the layer-3 protocol (-o extended).
	Extended bool
}

// Format returns c as one line of `conntrack -L` (with its newline):
//
//	tcp      6 431999 ESTABLISHED src=… dst=… sport=… dport=… src=… … [ASSURED] mark=N use=1
func Format(c Conn, o FormatOptions) string {
	var b strings.Builder
	if o.Extended {
		if c.IPv6 {
			b.WriteString("ipv6     10 ")
		} else {
			b.WriteString("ipv4     2 ")
		}
	}
	fmt.Fprintf(&b, "%-8s %d %d ", ProtoName(c.Proto), c.Proto, c.Timeout)
	if c.Proto == ProtoTCP || c.Proto == ProtoSCTP {
		names := TCPStates[:]
		if c.Proto == ProtoSCTP {
			names = SCTPStates[:]
		}
		if int(c.TCPState) < len(names) {
			b.WriteString(names[c.TCPState])
		} else {
			b.WriteString("INVALID")
		}
		b.WriteByte(' ')
	}
	c.tuple(&b, c.Src, c.Dst, c.SPort, c.DPort, c.ICMPType)
	if c.Status&StatusSeenReply == 0 {
		b.WriteString("[UNREPLIED] ")
	}
	rsrc, rsport, rdst, rdport := c.Dst, c.DPort, c.Src, c.SPort
	if c.DNAT {
		rsrc, rsport = c.ReplSrc, c.ReplSPort
	}
	if c.SNAT {
		rdst, rdport = c.ReplDst, c.ReplDPort
	}
	c.tuple(&b, rsrc, rdst, rsport, rdport, ReplyICMPType(c.IPv6, c.ICMPType))
	if c.Status&StatusAssured != 0 {
		b.WriteString("[ASSURED] ")
	}
	fmt.Fprintf(&b, "mark=%d use=1\n", c.Mark)
	return b.String()
}

// tuple writes one direction's addresses and layer-4 part.
func (c *Conn) tuple(b *strings.Builder, src, dst netip.Addr, sport, dport uint16, icmpType uint8) {
	b.WriteString("src=")
	b.WriteString(FormatAddr(src))
	b.WriteString(" dst=")
	b.WriteString(FormatAddr(dst))
	b.WriteByte(' ')
	switch {
	case c.isICMP():
		fmt.Fprintf(b, "type=%d code=%d id=%d ", icmpType, c.ICMPCode, sport)
	case hasPorts(c.Proto):
		fmt.Fprintf(b, "sport=%d dport=%d ", sport, dport)
	case c.Proto == ProtoGRE:
		// The keys (version 1's call ID in the destination key;
		// version 0's are 0): libnetfilter_conntrack prints them in hex.
		fmt.Fprintf(b, "srckey=0x%x dstkey=0x%x ", sport, dport)
	}
}

// FormatAddr writes an address as inet_ntop does: IPv6 addresses whose
// first 96 bits are zero (and not ::/::1-like, i.e. exactly six leading
// zero words) end in dotted IPv4, as do IPv4-mapped ones.
func FormatAddr(a netip.Addr) string {
	if !a.IsValid() {
		return "?"
	}
	if a.Is4() || a.Is4In6() {
		return a.String()
	}
	b := a.As16()
	zero6 := true
	for _, x := range b[:12] {
		if x != 0 {
			zero6 = false
		}
	}
	if zero6 && (b[12] != 0 || b[13] != 0) {
		return "::" + netip.AddrFrom4([4]byte(b[12:16])).String()
	}
	return a.String()
}

// Summary is the message conntrack ends a listing (deleted false) or a
// deletion with, on stderr (with its newline).
func Summary(n int, deleted bool) string {
	verb := "shown"
	if deleted {
		verb = "deleted"
	}
	return Prefix + strconv.Itoa(n) + " flow entries have been " + verb + ".\n"
}

// Flushed is the message of a flush (-F), on stderr (with its newline).
const Flushed = Prefix + "connection tracking table has been emptied.\n"
