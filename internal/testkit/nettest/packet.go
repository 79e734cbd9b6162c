package nettest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
)

// This file builds frames and packets. The builders compute lengths and
// checksums unless a field overrides them, so that well-formed packets take
// no effort and malformed ones take one field. They panic on programmer
// errors (an IPv6 address in an IPv4 header, options too long to encode), like
// netip.Addr.As4 does; they never fail on valid input.

// EtherType values.
const (
	// EtherTypeIPv4 is IPv4.
	EtherTypeIPv4 uint16 = 0x0800
	// EtherTypeARP is ARP.
	EtherTypeARP uint16 = 0x0806
	// EtherTypeVLAN is an 802.1Q tag.
	EtherTypeVLAN uint16 = 0x8100
	// EtherTypeQinQ is an 802.1ad service tag.
	EtherTypeQinQ uint16 = 0x88a8
	// EtherTypeIPv6 is IPv6.
	EtherTypeIPv6 uint16 = 0x86dd
)

// IP protocol numbers (IPv4 Protocol, IPv6 Next Header).
const (
	// ProtoHopByHop is the IPv6 hop-by-hop options header.
	ProtoHopByHop uint8 = 0
	// ProtoICMP is ICMP for IPv4.
	ProtoICMP uint8 = 1
	// ProtoTCP is TCP.
	ProtoTCP uint8 = 6
	// ProtoUDP is UDP.
	ProtoUDP uint8 = 17
	// ProtoRouting is the IPv6 routing header.
	ProtoRouting uint8 = 43
	// ProtoFragment is the IPv6 fragment header.
	ProtoFragment uint8 = 44
	// ProtoESP is IPsec ESP.
	ProtoESP uint8 = 50
	// ProtoAH is IPsec AH.
	ProtoAH uint8 = 51
	// ProtoICMPv6 is ICMPv6.
	ProtoICMPv6 uint8 = 58
	// ProtoNoNext is IPv6 "no next header".
	ProtoNoNext uint8 = 59
	// ProtoDestOpts is the IPv6 destination options header.
	ProtoDestOpts uint8 = 60
	// ProtoSCTP is SCTP.
	ProtoSCTP uint8 = 132
)

// TCP flags, for TCP.Flags (NS is the bit next to the data offset).
const (
	// TCPFin is FIN.
	TCPFin uint16 = 1 << iota
	// TCPSyn is SYN.
	TCPSyn
	// TCPRst is RST.
	TCPRst
	// TCPPsh is PSH.
	TCPPsh
	// TCPAck is ACK.
	TCPAck
	// TCPUrg is URG.
	TCPUrg
	// TCPEce is ECE.
	TCPEce
	// TCPCwr is CWR.
	TCPCwr
	// TCPNs is NS (ECN nonce, RFC 3540, historic).
	TCPNs
)

// ICMP types used by the helpers.
const (
	// ICMPv4EchoReply is an ICMPv4 echo reply.
	ICMPv4EchoReply uint8 = 0
	// ICMPv4DestUnreachable is an ICMPv4 destination unreachable.
	ICMPv4DestUnreachable uint8 = 3
	// ICMPv4EchoRequest is an ICMPv4 echo request.
	ICMPv4EchoRequest uint8 = 8
	// ICMPv4TimeExceeded is an ICMPv4 time exceeded.
	ICMPv4TimeExceeded uint8 = 11
	// ICMPv6DestUnreachable is an ICMPv6 destination unreachable.
	ICMPv6DestUnreachable uint8 = 1
	// ICMPv6PacketTooBig is an ICMPv6 packet too big.
	ICMPv6PacketTooBig uint8 = 2
	// ICMPv6TimeExceeded is an ICMPv6 time exceeded.
	ICMPv6TimeExceeded uint8 = 3
	// ICMPv6ParamProblem is an ICMPv6 parameter problem.
	ICMPv6ParamProblem uint8 = 4
	// ICMPv6EchoRequest is an ICMPv6 echo request.
	ICMPv6EchoRequest uint8 = 128
	// ICMPv6EchoReply is an ICMPv6 echo reply.
	ICMPv6EchoReply uint8 = 129
)

// Header sizes in bytes.
const (
	ethHeaderLen      = 14
	vlanTagLen        = 4
	ipv4HeaderLen     = 20
	ipv4MaxHeaderLen  = 60
	ipv6HeaderLen     = 40
	tcpHeaderLen      = 20
	tcpMaxHeaderLen   = 60
	udpHeaderLen      = 8
	icmpHeaderLen     = 8
	extHeaderUnit     = 8 // IPv6 extension headers are multiples of 8 bytes
	ahHeaderUnit      = 4 // except AH, counted in 4-byte words
	fragUnit          = 8 // fragment offsets count 8-byte units
	ipv6AddrLen       = 16
	routingAddrOffset = 6 // addresses start 6 bytes into a routing header's data
	defaultTTL        = 64
	ipv4DontFragment  = 0x4000
	ipv4MoreFragments = 0x2000
	ipv4ReservedFlag  = 0x8000
	ipv4OffsetMask    = 0x1fff
	srhRoutingType    = 4 // segment routing header: segment 0 is the final destination
	optPad1           = 0 // IPv6 Pad1 option
	optPadN           = 1 // IPv6 PadN option
	optRouterAlert    = 5 // IPv6 router alert option
)

// VLANTag is one 802.1Q (or 802.1ad) tag.
type VLANTag struct {
	// TPID is the tag protocol identifier; 0 means EtherTypeVLAN (0x8100).
	TPID uint16
	// PCP is the 3-bit priority.
	PCP uint8
	// DEI is the drop eligible indicator.
	DEI bool
	// ID is the 12-bit VLAN identifier.
	ID uint16
}

// Ethernet is an Ethernet header, optionally with VLAN tags.
type Ethernet struct {
	// Dst and Src are the MAC addresses.
	Dst, Src net.HardwareAddr
	// VLANs are the tags, outermost first.
	VLANs []VLANTag
	// EtherType is the payload's type; 0 means IPv4 or IPv6 from the
	// payload's version nibble.
	EtherType uint16
}

// WithVLAN returns a copy of e with tag appended as the innermost tag.
func (e Ethernet) WithVLAN(tag VLANTag) Ethernet {
	e.VLANs = append(append([]VLANTag(nil), e.VLANs...), tag)
	return e
}

// Frame returns the frame: the header followed by payload (no padding, no
// FCS). It panics if EtherType is 0 and payload is not IPv4 or IPv6.
func (e Ethernet) Frame(payload []byte) []byte {
	et := e.EtherType
	if et == 0 {
		switch {
		case len(payload) > 0 && payload[0]>>4 == 4:
			et = EtherTypeIPv4
		case len(payload) > 0 && payload[0]>>4 == 6:
			et = EtherTypeIPv6
		default:
			panic("nettest: Ethernet.Frame: set EtherType: payload is not an IP packet")
		}
	}
	b := make([]byte, 0, ethHeaderLen+vlanTagLen*len(e.VLANs)+len(payload))
	b = append(b, mac6(e.Dst)...)
	b = append(b, mac6(e.Src)...)
	for _, v := range e.VLANs {
		tpid := v.TPID
		if tpid == 0 {
			tpid = EtherTypeVLAN
		}
		tci := uint16(v.PCP&0x7)<<13 | v.ID&0xfff
		if v.DEI {
			tci |= 1 << 12
		}
		b = binary.BigEndian.AppendUint16(b, tpid)
		b = binary.BigEndian.AppendUint16(b, tci)
	}
	b = binary.BigEndian.AppendUint16(b, et)
	return append(b, payload...)
}

// mac6 returns a 6-byte MAC (zeros if m is empty).
func mac6(m net.HardwareAddr) []byte {
	out := make([]byte, 6)
	copy(out, m)
	return out
}

// Transport is a transport-layer (or any IP payload) header with its payload.
type Transport interface {
	// Protocol is the IP protocol number.
	Protocol() uint8
	// Marshal returns the bytes, with the checksum computed over the
	// pseudo-header of src and dst where the protocol has one.
	Marshal(src, dst netip.Addr) []byte
}

// Raw is an IP payload given as bytes, with no checksum computation.
type Raw struct {
	// Proto is the IP protocol number.
	Proto uint8
	// Data is the payload.
	Data []byte
}

// Protocol returns r.Proto.
func (r Raw) Protocol() uint8 { return r.Proto }

// Marshal returns r.Data.
func (r Raw) Marshal(_, _ netip.Addr) []byte { return append([]byte(nil), r.Data...) }

// UDP is a UDP header and payload.
type UDP struct {
	// SrcPort and DstPort are the ports.
	SrcPort, DstPort uint16
	// Payload is the datagram's data.
	Payload []byte
	// Length overrides the length field when non-zero.
	Length uint16
	// ZeroChecksum sends checksum 0 ("none", legal in IPv4 only).
	ZeroChecksum bool
	// BadChecksum makes the checksum wrong.
	BadChecksum bool
}

// Protocol returns ProtoUDP.
func (u UDP) Protocol() uint8 { return ProtoUDP }

// Marshal returns the UDP header and payload.
func (u UDP) Marshal(src, dst netip.Addr) []byte {
	b := make([]byte, udpHeaderLen, udpHeaderLen+len(u.Payload))
	binary.BigEndian.PutUint16(b[0:], u.SrcPort)
	binary.BigEndian.PutUint16(b[2:], u.DstPort)
	length := u.Length
	if length == 0 {
		length = uint16(udpHeaderLen + len(u.Payload))
	}
	binary.BigEndian.PutUint16(b[4:], length)
	b = append(b, u.Payload...)
	if !u.ZeroChecksum {
		sum := transportChecksum(src, dst, ProtoUDP, b)
		if sum == 0 {
			sum = 0xffff // 0 means "no checksum" in UDP
		}
		if u.BadChecksum {
			sum ^= 0xffff
		}
		binary.BigEndian.PutUint16(b[6:], sum)
	}
	return b
}

// TCP is a TCP header and payload.
type TCP struct {
	// SrcPort and DstPort are the ports.
	SrcPort, DstPort uint16
	// Seq and Ack are the sequence and acknowledgement numbers.
	Seq, Ack uint32
	// Flags is any combination of TCPFin ... TCPNs.
	Flags uint16
	// Window is the window field, as is.
	Window uint16
	// Urgent is the urgent pointer.
	Urgent uint16
	// Options are raw TCP options, padded with zeros (EOL) to 4 bytes.
	Options []byte
	// DataOffset overrides the header length (in 32-bit words) when non-zero.
	DataOffset uint8
	// Payload is the segment's data.
	Payload []byte
	// BadChecksum makes the checksum wrong.
	BadChecksum bool
}

// Protocol returns ProtoTCP.
func (t TCP) Protocol() uint8 { return ProtoTCP }

// Marshal returns the TCP header and payload.
func (t TCP) Marshal(src, dst netip.Addr) []byte {
	opts := padTo(t.Options, 4, 0)
	hlen := tcpHeaderLen + len(opts)
	if hlen > tcpMaxHeaderLen && t.DataOffset == 0 {
		panic(fmt.Sprintf("nettest: TCP options of %d bytes do not fit (max %d); set DataOffset to force", len(opts), tcpMaxHeaderLen-tcpHeaderLen))
	}
	off := t.DataOffset
	if off == 0 {
		off = uint8(hlen / 4)
	}
	b := make([]byte, tcpHeaderLen, hlen+len(t.Payload))
	binary.BigEndian.PutUint16(b[0:], t.SrcPort)
	binary.BigEndian.PutUint16(b[2:], t.DstPort)
	binary.BigEndian.PutUint32(b[4:], t.Seq)
	binary.BigEndian.PutUint32(b[8:], t.Ack)
	b[12] = off<<4 | uint8(t.Flags>>8&1)
	b[13] = uint8(t.Flags)
	binary.BigEndian.PutUint16(b[14:], t.Window)
	binary.BigEndian.PutUint16(b[18:], t.Urgent)
	b = append(b, opts...)
	b = append(b, t.Payload...)
	sum := transportChecksum(src, dst, ProtoTCP, b)
	if t.BadChecksum {
		sum ^= 0xffff
	}
	binary.BigEndian.PutUint16(b[16:], sum)
	return b
}

// ICMPv4 is an ICMP (for IPv4) message.
type ICMPv4 struct {
	// Type and Code are the message type and code.
	Type, Code uint8
	// Rest is bytes 4-7 of the header: for echo, ID<<16 | Seq.
	Rest uint32
	// Payload follows the 8-byte header.
	Payload []byte
	// BadChecksum makes the checksum wrong.
	BadChecksum bool
}

// Protocol returns ProtoICMP.
func (m ICMPv4) Protocol() uint8 { return ProtoICMP }

// Marshal returns the ICMP message (the checksum has no pseudo-header).
func (m ICMPv4) Marshal(_, _ netip.Addr) []byte {
	b := icmpHeader(m.Type, m.Code, m.Rest, m.Payload)
	sum := Checksum(b)
	if m.BadChecksum {
		sum ^= 0xffff
	}
	binary.BigEndian.PutUint16(b[2:], sum)
	return b
}

// ICMPv6 is an ICMPv6 message.
type ICMPv6 struct {
	// Type and Code are the message type and code.
	Type, Code uint8
	// Rest is bytes 4-7 of the header: for echo, ID<<16 | Seq.
	Rest uint32
	// Payload follows the 8-byte header.
	Payload []byte
	// BadChecksum makes the checksum wrong.
	BadChecksum bool
}

// Protocol returns ProtoICMPv6.
func (m ICMPv6) Protocol() uint8 { return ProtoICMPv6 }

// Marshal returns the ICMPv6 message with its pseudo-header checksum.
func (m ICMPv6) Marshal(src, dst netip.Addr) []byte {
	b := icmpHeader(m.Type, m.Code, m.Rest, m.Payload)
	sum := transportChecksum(src, dst, ProtoICMPv6, b)
	if m.BadChecksum {
		sum ^= 0xffff
	}
	binary.BigEndian.PutUint16(b[2:], sum)
	return b
}

// icmpHeader returns an ICMP header with a zero checksum, and payload.
func icmpHeader(typ, code uint8, rest uint32, payload []byte) []byte {
	b := make([]byte, icmpHeaderLen, icmpHeaderLen+len(payload))
	b[0], b[1] = typ, code
	binary.BigEndian.PutUint32(b[4:], rest)
	return append(b, payload...)
}

// Truncate returns a copy of the first n bytes of b (all of b if shorter).
func Truncate(b []byte, n int) []byte {
	if n > len(b) {
		n = len(b)
	}
	return append([]byte(nil), b[:n]...)
}

// concat joins byte slices.
func concat(parts [][]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// padTo pads b with pad bytes to a multiple of unit.
func padTo(b []byte, unit int, pad byte) []byte {
	out := append([]byte(nil), b...)
	for len(out)%unit != 0 {
		out = append(out, pad)
	}
	return out
}
