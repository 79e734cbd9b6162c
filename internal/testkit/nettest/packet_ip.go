package nettest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// This file builds IPv4 and IPv6 packets (with options and extension
// headers), and whole UDP, TCP and echo packets from addresses.

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
