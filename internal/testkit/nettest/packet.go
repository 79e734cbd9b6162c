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

// IPv4 is an IPv4 header.
type IPv4 struct {
	// Src and Dst are the addresses (must be IPv4).
	Src, Dst netip.Addr
	// TOS is the DSCP and ECN byte.
	TOS uint8
	// ID is the identification field.
	ID uint16
	// DontFragment and MoreFragments are the DF and MF flags.
	DontFragment, MoreFragments bool
	// ReservedFlag sets the reserved ("evil") flag bit.
	ReservedFlag bool
	// FragOffset is the fragment offset in 8-byte units (13 bits).
	FragOffset uint16
	// TTL is the time to live; 0 means 64.
	TTL uint8
	// Protocol overrides the transport's protocol number when non-zero.
	Protocol uint8
	// Options are raw IPv4 options, padded with zeros (EOL) to 4 bytes.
	Options []byte
	// IHL overrides the header length (in 32-bit words) when non-zero.
	IHL uint8
	// TotalLength overrides the total length when non-zero.
	TotalLength uint16
	// BadChecksum makes the header checksum wrong.
	BadChecksum bool
}

// Packet returns the IPv4 packet carrying l4 (nil for an empty payload).
func (h IPv4) Packet(l4 Transport) []byte {
	var payload []byte
	proto := h.Protocol
	if l4 != nil {
		payload = l4.Marshal(h.Src, h.Dst)
		if proto == 0 {
			proto = l4.Protocol()
		}
	}
	return h.header(proto, payload)
}

// header returns the IPv4 header for proto followed by payload.
func (h IPv4) header(proto uint8, payload []byte) []byte {
	opts := padTo(h.Options, 4, 0)
	hlen := ipv4HeaderLen + len(opts)
	if hlen > ipv4MaxHeaderLen && h.IHL == 0 {
		panic(fmt.Sprintf("nettest: IPv4 options of %d bytes do not fit (max %d); set IHL to force", len(opts), ipv4MaxHeaderLen-ipv4HeaderLen))
	}
	ihl := h.IHL
	if ihl == 0 {
		ihl = uint8(hlen / 4)
	}
	total := h.TotalLength
	if total == 0 {
		total = uint16(hlen + len(payload))
	}
	ttl := h.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	frag := h.FragOffset & ipv4OffsetMask
	if h.DontFragment {
		frag |= ipv4DontFragment
	}
	if h.MoreFragments {
		frag |= ipv4MoreFragments
	}
	if h.ReservedFlag {
		frag |= ipv4ReservedFlag
	}
	src, dst := h.Src.As4(), h.Dst.As4()
	b := make([]byte, ipv4HeaderLen, hlen+len(payload))
	b[0] = 4<<4 | ihl&0xf
	b[1] = h.TOS
	binary.BigEndian.PutUint16(b[2:], total)
	binary.BigEndian.PutUint16(b[4:], h.ID)
	binary.BigEndian.PutUint16(b[6:], frag)
	b[8] = ttl
	b[9] = proto
	copy(b[12:16], src[:])
	copy(b[16:20], dst[:])
	b = append(b, opts...)
	sum := Checksum(b[:hlen])
	if h.BadChecksum {
		sum ^= 0xffff
	}
	binary.BigEndian.PutUint16(b[10:], sum)
	return append(b, payload...)
}

// ExtHeader is one IPv6 extension header.
type ExtHeader struct {
	// Type is the header's protocol number (ProtoHopByHop, ProtoRouting,
	// ProtoFragment, ProtoDestOpts, ProtoAH, or anything else).
	Type uint8
	// Data is the header after its Next Header and Hdr Ext Len bytes. It is
	// padded to the header's unit (8 bytes; 4 for AH): with PadN options for
	// hop-by-hop and destination options, with zeros otherwise. A fragment
	// header's Data is 6 bytes.
	Data []byte
}

// marshal returns the header with next as its Next Header.
func (e ExtHeader) marshal(next uint8) []byte {
	var data []byte
	var hdrLen uint8
	switch e.Type {
	case ProtoHopByHop, ProtoDestOpts:
		data = padOptions(e.Data)
		hdrLen = uint8((2+len(data))/extHeaderUnit - 1)
	case ProtoFragment:
		data = padTo(e.Data, extHeaderUnit-2, 0)
	case ProtoAH:
		data = padToUnit(e.Data, ahHeaderUnit)
		hdrLen = uint8((2+len(data))/ahHeaderUnit - 2)
	default:
		data = padToUnit(e.Data, extHeaderUnit)
		hdrLen = uint8((2+len(data))/extHeaderUnit - 1)
	}
	return append([]byte{next, hdrLen}, data...)
}

// padToUnit pads data with zeros so that 2+len is a multiple of unit.
func padToUnit(data []byte, unit int) []byte {
	out := append([]byte(nil), data...)
	for (2+len(out))%unit != 0 {
		out = append(out, 0)
	}
	return out
}

// padOptions pads an options area with Pad1 or PadN so that 2+len is a
// multiple of 8.
func padOptions(data []byte) []byte {
	out := append([]byte(nil), data...)
	switch n := (extHeaderUnit - (2+len(out))%extHeaderUnit) % extHeaderUnit; n {
	case 0:
	case 1:
		out = append(out, optPad1)
	default:
		out = append(out, PadNOption(n)...)
	}
	return out
}

// HopByHop returns a hop-by-hop options header with the given options
// (each a full TLV, see PadNOption, RouterAlertOption, TLVOption), padded.
func HopByHop(opts ...[]byte) ExtHeader {
	return ExtHeader{Type: ProtoHopByHop, Data: concat(opts)}
}

// DestOpts returns a destination options header with the given options.
func DestOpts(opts ...[]byte) ExtHeader {
	return ExtHeader{Type: ProtoDestOpts, Data: concat(opts)}
}

// RoutingHeader returns a routing header of routingType (0 deprecated,
// 2 mobile IPv6, 4 segment routing) with segmentsLeft and addresses.
func RoutingHeader(routingType, segmentsLeft uint8, addrs ...netip.Addr) ExtHeader {
	data := make([]byte, routingAddrOffset, routingAddrOffset+ipv6AddrLen*len(addrs))
	data[0], data[1] = routingType, segmentsLeft
	if routingType == srhRoutingType && len(addrs) > 0 {
		data[2] = uint8(len(addrs) - 1) // last entry
	}
	for _, a := range addrs {
		a16 := a.As16()
		data = append(data, a16[:]...)
	}
	return ExtHeader{Type: ProtoRouting, Data: data}
}

// FragmentHeader returns an IPv6 fragment header: offset in 8-byte units,
// the M (more fragments) flag and the identification.
func FragmentHeader(offset uint16, more bool, id uint32) ExtHeader {
	data := make([]byte, 6)
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(data[0:], v)
	binary.BigEndian.PutUint32(data[2:], id)
	return ExtHeader{Type: ProtoFragment, Data: data}
}

// TLVOption returns an IPv6 option of type typ with data.
func TLVOption(typ uint8, data []byte) []byte {
	return append([]byte{typ, uint8(len(data))}, data...)
}

// PadNOption returns an IPv6 padding option n bytes long in total (n >= 2);
// n == 1 gives Pad1.
func PadNOption(n int) []byte {
	if n == 1 {
		return []byte{optPad1}
	}
	return TLVOption(optPadN, make([]byte, n-2))
}

// RouterAlertOption returns an IPv6 router alert option (RFC 2711).
func RouterAlertOption(value uint16) []byte {
	return TLVOption(optRouterAlert, binary.BigEndian.AppendUint16(nil, value))
}

// IPv6 is an IPv6 header with its extension header chain.
type IPv6 struct {
	// Src and Dst are the addresses (must be IPv6).
	Src, Dst netip.Addr
	// TrafficClass is the traffic class byte.
	TrafficClass uint8
	// FlowLabel is the 20-bit flow label.
	FlowLabel uint32
	// HopLimit is the hop limit; 0 means 64.
	HopLimit uint8
	// Ext is the extension header chain, in order; Next Header fields are
	// chained automatically.
	Ext []ExtHeader
	// NextHeader overrides the last Next Header in the chain (the transport's
	// protocol) when non-zero.
	NextHeader uint8
	// PayloadLength overrides the payload length when non-zero.
	PayloadLength uint16
}

// Packet returns the IPv6 packet carrying l4 (nil for no payload: the
// last Next Header is then ProtoNoNext unless NextHeader is set). The
// transport checksum uses the final destination of a routing header.
func (h IPv6) Packet(l4 Transport) []byte {
	last := h.NextHeader
	var payload []byte
	if l4 != nil {
		payload = l4.Marshal(h.Src, h.finalDst())
		if last == 0 {
			last = l4.Protocol()
		}
	} else if last == 0 {
		last = ProtoNoNext
	}
	var ext []byte
	for i, e := range h.Ext {
		next := last
		if i+1 < len(h.Ext) {
			next = h.Ext[i+1].Type
		}
		ext = append(ext, e.marshal(next)...)
	}
	first := last
	if len(h.Ext) > 0 {
		first = h.Ext[0].Type
	}
	plen := h.PayloadLength
	if plen == 0 {
		plen = uint16(len(ext) + len(payload))
	}
	hop := h.HopLimit
	if hop == 0 {
		hop = defaultTTL
	}
	b := make([]byte, ipv6HeaderLen, ipv6HeaderLen+len(ext)+len(payload))
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(h.TrafficClass)<<20|h.FlowLabel&0xfffff)
	binary.BigEndian.PutUint16(b[4:], plen)
	b[6] = first
	b[7] = hop
	src, dst := h.Src.As16(), h.Dst.As16()
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
	b = append(b, ext...)
	return append(b, payload...)
}

// finalDst is the destination used in the transport pseudo-header: the last
// address of a routing header (the first, for segment routing), else Dst.
func (h IPv6) finalDst() netip.Addr {
	dst := h.Dst
	for _, e := range h.Ext {
		if e.Type != ProtoRouting || len(e.Data) < routingAddrOffset+ipv6AddrLen || e.Data[1] == 0 {
			continue
		}
		addrs := e.Data[routingAddrOffset:]
		n := len(addrs) / ipv6AddrLen
		i := n - 1
		if e.Data[0] == srhRoutingType {
			i = 0
		}
		dst = netip.AddrFrom16([16]byte(addrs[i*ipv6AddrLen : (i+1)*ipv6AddrLen]))
	}
	return dst
}

// IPPacket returns an IPv4 or IPv6 packet (default header fields, by the
// family of src and dst) carrying l4.
func IPPacket(src, dst netip.Addr, l4 Transport) []byte {
	if src.Is4() {
		return IPv4{Src: src, Dst: dst}.Packet(l4)
	}
	return IPv6{Src: src, Dst: dst}.Packet(l4)
}

// UDPPacket returns an IPv4 or IPv6 UDP packet from src to dst.
func UDPPacket(src, dst netip.AddrPort, payload []byte) []byte {
	return IPPacket(src.Addr(), dst.Addr(), UDP{SrcPort: src.Port(), DstPort: dst.Port(), Payload: payload})
}

// tcpDefaultWindow is the window the TCPPacket helper advertises.
const tcpDefaultWindow = 65535

// TCPPacket returns an IPv4 or IPv6 TCP segment from src to dst with flags,
// sequence number seq and payload (ack 0, window 65535).
func TCPPacket(src, dst netip.AddrPort, flags uint16, seq uint32, payload []byte) []byte {
	return IPPacket(src.Addr(), dst.Addr(), TCP{
		SrcPort: src.Port(), DstPort: dst.Port(),
		Flags: flags, Seq: seq, Window: tcpDefaultWindow, Payload: payload,
	})
}

// EchoRequest returns an ICMPv4 or ICMPv6 echo request from src to dst.
func EchoRequest(src, dst netip.Addr, id, seq uint16, payload []byte) []byte {
	rest := uint32(id)<<16 | uint32(seq)
	if src.Is4() {
		return IPPacket(src, dst, ICMPv4{Type: ICMPv4EchoRequest, Rest: rest, Payload: payload})
	}
	return IPPacket(src, dst, ICMPv6{Type: ICMPv6EchoRequest, Rest: rest, Payload: payload})
}

// Truncate returns a copy of the first n bytes of b (all of b if shorter).
func Truncate(b []byte, n int) []byte {
	if n > len(b) {
		n = len(b)
	}
	return append([]byte(nil), b[:n]...)
}

// FragmentIPv4 splits an IPv4 packet into fragments whose payloads are at
// most size bytes (rounded down to a multiple of 8). Options are copied into
// every fragment if their copied flag is set, into the first one otherwise.
// The packet's ID, DF and TTL are kept; an already fragmented packet is
// refragmented relative to its own offset.
func FragmentIPv4(pkt []byte, size int) ([][]byte, error) {
	if len(pkt) < ipv4HeaderLen || pkt[0]>>4 != 4 {
		return nil, fmt.Errorf("fragment IPv4: not an IPv4 packet (%d bytes)", len(pkt))
	}
	hlen := int(pkt[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(pkt[2:]))
	if hlen < ipv4HeaderLen || total < hlen || total > len(pkt) {
		return nil, fmt.Errorf("fragment IPv4: bad header length %d or total length %d for %d bytes", hlen, total, len(pkt))
	}
	size -= size % fragUnit
	if size <= 0 {
		return nil, fmt.Errorf("fragment IPv4: fragment size must be at least %d", fragUnit)
	}
	opts := pkt[ipv4HeaderLen:hlen]
	copied, err := copiedIPv4Options(opts)
	if err != nil {
		return nil, err
	}
	flags := binary.BigEndian.Uint16(pkt[6:])
	baseOff := int(flags & ipv4OffsetMask)
	lastMF := flags&ipv4MoreFragments != 0
	payload := pkt[hlen:total]
	var out [][]byte
	for start := 0; start < len(payload) || start == 0; start += size {
		end := min(start+size, len(payload))
		o := opts
		if start > 0 {
			o = copied
		}
		h := IPv4{
			Src:          netip.AddrFrom4([4]byte(pkt[12:16])),
			Dst:          netip.AddrFrom4([4]byte(pkt[16:20])),
			TOS:          pkt[1],
			ID:           binary.BigEndian.Uint16(pkt[4:]),
			DontFragment: flags&ipv4DontFragment != 0,
			ReservedFlag: flags&ipv4ReservedFlag != 0,
			// start is a multiple of 8 bytes.
			FragOffset:    uint16(baseOff + start/fragUnit),
			MoreFragments: end < len(payload) || lastMF,
			TTL:           pkt[8],
			Options:       o,
		}
		out = append(out, h.header(pkt[9], payload[start:end]))
		if end == len(payload) {
			break
		}
	}
	return out, nil
}

// copiedIPv4Options returns the options with the copied flag set.
func copiedIPv4Options(opts []byte) ([]byte, error) {
	const (
		optEOL    = 0
		optNOP    = 1
		copiedBit = 0x80
	)
	var out []byte
	for i := 0; i < len(opts); {
		switch t := opts[i]; t {
		case optEOL:
			return out, nil
		case optNOP:
			i++
			continue
		default:
			if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
				return nil, fmt.Errorf("fragment IPv4: malformed option %d at offset %d", t, i)
			}
			l := int(opts[i+1])
			if t&copiedBit != 0 {
				out = append(out, opts[i:i+l]...)
			}
			i += l
		}
	}
	return out, nil
}

// FragmentIPv6 splits an IPv6 packet into fragments with identification id,
// whose fragmentable parts are at most size bytes (rounded down to a
// multiple of 8). The unfragmentable part (the IPv6 header, hop-by-hop and
// routing headers, and destination options before a routing header) is
// repeated in each fragment, followed by a fragment header.
func FragmentIPv6(pkt []byte, size int, id uint32) ([][]byte, error) {
	if len(pkt) < ipv6HeaderLen || pkt[0]>>4 != 6 {
		return nil, fmt.Errorf("fragment IPv6: not an IPv6 packet (%d bytes)", len(pkt))
	}
	end := ipv6HeaderLen + int(binary.BigEndian.Uint16(pkt[4:]))
	if end > len(pkt) {
		return nil, fmt.Errorf("fragment IPv6: payload length %d exceeds the %d bytes given", end-ipv6HeaderLen, len(pkt)-ipv6HeaderLen)
	}
	size -= size % fragUnit
	if size <= 0 {
		return nil, fmt.Errorf("fragment IPv6: fragment size must be at least %d", fragUnit)
	}
	// Walk the leading hop-by-hop, routing and destination options headers.
	// The unfragmentable part ends after the last routing header, or after a
	// leading hop-by-hop header when there is no routing header.
	unfragEnd, unfragNH := ipv6HeaderLen, 6 // 6: Next Header field of the IPv6 header
	nhPos, off := unfragNH, ipv6HeaderLen
	for first := true; ; first = false { // ends: off grows by >= 8 each turn
		nh := pkt[nhPos]
		if nh != ProtoHopByHop && nh != ProtoRouting && nh != ProtoDestOpts {
			break
		}
		if off+2 > end {
			return nil, fmt.Errorf("fragment IPv6: truncated extension header at %d", off)
		}
		hl := (int(pkt[off+1]) + 1) * extHeaderUnit
		if off+hl > end {
			return nil, fmt.Errorf("fragment IPv6: extension header at %d overruns the packet", off)
		}
		if nh == ProtoRouting || (nh == ProtoHopByHop && first) {
			unfragEnd, unfragNH = off+hl, off
		}
		nhPos, off = off, off+hl
	}
	unfrag := pkt[:unfragEnd]
	fragNext := pkt[unfragNH]
	data := pkt[unfragEnd:end]
	var out [][]byte
	for start := 0; start < len(data) || start == 0; start += size {
		stop := min(start+size, len(data))
		fh := FragmentHeader(uint16(start/fragUnit), stop < len(data), id).marshal(fragNext)
		f := make([]byte, 0, len(unfrag)+len(fh)+stop-start)
		f = append(f, unfrag...)
		f[unfragNH] = ProtoFragment
		f = append(f, fh...)
		f = append(f, data[start:stop]...)
		binary.BigEndian.PutUint16(f[4:], uint16(len(f)-ipv6HeaderLen))
		out = append(out, f)
		if stop == len(data) {
			break
		}
	}
	return out, nil
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

// Checksum returns the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 {
	return ^fold(sum16(0, b))
}

// sum16 adds b as big-endian 16-bit words to acc.
func sum16(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// fold folds a 32-bit one's complement sum into 16 bits.
func fold(acc uint32) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// transportChecksum returns the checksum of a transport segment b over the
// IPv4 or IPv6 pseudo-header of src and dst.
func transportChecksum(src, dst netip.Addr, proto uint8, b []byte) uint16 {
	var acc uint32
	if src.Is4() {
		s, d := src.As4(), dst.As4()
		acc = sum16(acc, s[:])
		acc = sum16(acc, d[:])
		acc += uint32(proto) + uint32(len(b))
	} else {
		s, d := src.As16(), dst.As16()
		acc = sum16(acc, s[:])
		acc = sum16(acc, d[:])
		acc += uint32(len(b)>>16) + uint32(len(b)&0xffff) + uint32(proto)
	}
	return ^fold(sum16(acc, b))
}
