package nettest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// maxExtHeaders bounds the IPv6 extension header walk in Parse.
const maxExtHeaders = 16

// Packet is a frame or IP packet decoded by Parse or ParseIP, as far as its
// bytes allowed. Fields of layers that were absent are zero.
type Packet struct {
	// Raw is the frame (or IP packet) as given.
	Raw []byte
	// DstMAC and SrcMAC are the Ethernet addresses (nil for ParseIP).
	DstMAC, SrcMAC net.HardwareAddr
	// VLANs are the VLAN tags, outermost first.
	VLANs []VLANTag
	// EtherType is the innermost EtherType.
	EtherType uint16

	// IPVersion is 4 or 6, or 0 when there is no IP layer.
	IPVersion int
	// Src and Dst are the IP addresses.
	Src, Dst netip.Addr
	// TTL is the IPv4 TTL or the IPv6 hop limit.
	TTL uint8
	// Protocol is the transport protocol: IPv4 Protocol, or the IPv6 Next
	// Header after the extension headers.
	Protocol uint8
	// ExtHeaders are the IPv6 extension header types, in order.
	ExtHeaders []uint8
	// IPv4Options are the raw IPv4 options.
	IPv4Options []byte
	// IPv4ID is the IPv4 identification.
	IPv4ID uint16
	// DontFragment is the IPv4 DF flag.
	DontFragment bool
	// Fragment is true for a fragment (IPv4 MF or non-zero offset, or an IPv6
	// fragment header).
	Fragment bool
	// FragOffset is the fragment offset in 8-byte units.
	FragOffset uint16
	// MoreFragments is the MF / M flag.
	MoreFragments bool
	// FragID is the IPv4 or IPv6 fragment identification.
	FragID uint32

	// SrcPort and DstPort are the TCP or UDP ports.
	SrcPort, DstPort uint16
	// TCPFlags are the TCP flags (TCPFin ... TCPNs).
	TCPFlags uint16
	// Seq and Ack are the TCP sequence and acknowledgement numbers.
	Seq, Ack uint32
	// ICMPType and ICMPCode are the ICMPv4 or ICMPv6 type and code.
	ICMPType, ICMPCode uint8
	// ICMPRest is bytes 4-7 of the ICMP header (echo: ID<<16 | Seq).
	ICMPRest uint32
	// Payload is what follows the transport header (the L4 bytes of a
	// non-first fragment or unknown protocol).
	Payload []byte
	// Inner is the packet quoted by an ICMP error (partial by nature).
	Inner *Packet
	// Truncated is true when the bytes end before the headers or lengths
	// say they should.
	Truncated bool
}

// Parse decodes an Ethernet frame. It always returns a Packet with the layers
// it could decode; the error says where decoding stopped.
func Parse(frame []byte) (*Packet, error) {
	p := &Packet{Raw: frame}
	if len(frame) < ethHeaderLen {
		p.Truncated = true
		return p, fmt.Errorf("frame of %d bytes is shorter than an Ethernet header", len(frame))
	}
	p.DstMAC = net.HardwareAddr(frame[0:6])
	p.SrcMAC = net.HardwareAddr(frame[6:12])
	off := 12 // EtherType or first TPID
	for {
		et := binary.BigEndian.Uint16(frame[off:])
		if et != EtherTypeVLAN && et != EtherTypeQinQ {
			p.EtherType = et
			off += 2
			break
		}
		if len(frame) < off+vlanTagLen+2 {
			p.Truncated = true
			return p, fmt.Errorf("truncated VLAN tag at %d", off)
		}
		tci := binary.BigEndian.Uint16(frame[off+2:])
		p.VLANs = append(p.VLANs, VLANTag{TPID: et, PCP: uint8(tci >> 13), DEI: tci&(1<<12) != 0, ID: tci & 0xfff})
		off += vlanTagLen
	}
	switch p.EtherType {
	case EtherTypeIPv4, EtherTypeIPv6:
		return p, p.parseIP(frame[off:])
	}
	p.Payload = frame[off:]
	return p, nil
}

// ParseIP decodes an IPv4 or IPv6 packet (no Ethernet header), like Parse.
func ParseIP(pkt []byte) (*Packet, error) {
	p := &Packet{Raw: pkt}
	return p, p.parseIP(pkt)
}

// parseIP decodes the IP layer and what it carries.
func (p *Packet) parseIP(b []byte) error {
	if len(b) < 1 {
		p.Truncated = true
		return fmt.Errorf("empty IP packet")
	}
	switch b[0] >> 4 {
	case 4:
		return p.parseIPv4(b)
	case 6:
		return p.parseIPv6(b)
	}
	return fmt.Errorf("IP version %d", b[0]>>4)
}

// parseIPv4 decodes an IPv4 header and its payload.
func (p *Packet) parseIPv4(b []byte) error {
	p.IPVersion = 4
	if len(b) < ipv4HeaderLen {
		p.Truncated = true
		return fmt.Errorf("IPv4 header truncated at %d bytes", len(b))
	}
	hlen := int(b[0]&0xf) * 4
	if hlen < ipv4HeaderLen {
		return fmt.Errorf("IPv4 header length %d", hlen)
	}
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.TTL = b[8]
	p.Protocol = b[9]
	p.IPv4ID = binary.BigEndian.Uint16(b[4:])
	p.FragID = uint32(p.IPv4ID)
	flags := binary.BigEndian.Uint16(b[6:])
	p.DontFragment = flags&ipv4DontFragment != 0
	p.MoreFragments = flags&ipv4MoreFragments != 0
	p.FragOffset = flags & ipv4OffsetMask
	p.Fragment = p.MoreFragments || p.FragOffset != 0
	if len(b) < hlen {
		p.Truncated = true
		return fmt.Errorf("IPv4 options truncated")
	}
	p.IPv4Options = b[ipv4HeaderLen:hlen]
	end := int(binary.BigEndian.Uint16(b[2:]))
	if end > len(b) {
		p.Truncated = true
		end = len(b)
	}
	if end < hlen {
		return fmt.Errorf("IPv4 total length %d below header length %d", end, hlen)
	}
	if p.FragOffset != 0 {
		p.Payload = b[hlen:end]
		return nil
	}
	return p.parseTransport(b[hlen:end])
}

// parseIPv6 decodes an IPv6 header, its extension headers and payload.
func (p *Packet) parseIPv6(b []byte) error {
	p.IPVersion = 6
	if len(b) < ipv6HeaderLen {
		p.Truncated = true
		return fmt.Errorf("IPv6 header truncated at %d bytes", len(b))
	}
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	p.TTL = b[7]
	end := ipv6HeaderLen + int(binary.BigEndian.Uint16(b[4:]))
	if end > len(b) {
		p.Truncated = true
		end = len(b)
	}
	nh, off := b[6], ipv6HeaderLen
	for i := 0; i < maxExtHeaders; i++ {
		switch nh {
		case ProtoHopByHop, ProtoRouting, ProtoDestOpts, ProtoFragment, ProtoAH:
		default:
			p.Protocol = nh
			if p.FragOffset != 0 {
				p.Payload = b[off:end]
				return nil
			}
			return p.parseTransport(b[off:end])
		}
		if off+2 > end {
			p.Truncated = true
			p.Protocol = nh
			return fmt.Errorf("IPv6 extension header %d truncated", nh)
		}
		p.ExtHeaders = append(p.ExtHeaders, nh)
		hl := (int(b[off+1]) + 1) * extHeaderUnit
		switch nh {
		case ProtoFragment:
			hl = extHeaderUnit
			if off+hl <= end {
				v := binary.BigEndian.Uint16(b[off+2:])
				p.Fragment = true
				p.FragOffset = v >> 3
				p.MoreFragments = v&1 != 0
				p.FragID = binary.BigEndian.Uint32(b[off+4:])
			}
		case ProtoAH:
			hl = (int(b[off+1]) + 2) * ahHeaderUnit
		}
		if off+hl > end {
			p.Truncated = true
			p.Protocol = nh
			return fmt.Errorf("IPv6 extension header %d truncated", nh)
		}
		nh, off = b[off], off+hl
	}
	return fmt.Errorf("more than %d IPv6 extension headers", maxExtHeaders)
}

// parseTransport decodes TCP, UDP, ICMPv4 and ICMPv6 headers.
func (p *Packet) parseTransport(b []byte) error {
	switch p.Protocol {
	case ProtoTCP:
		if len(b) < tcpHeaderLen {
			p.Truncated = true
			return p.shortPorts(b, "TCP")
		}
		p.SrcPort = binary.BigEndian.Uint16(b[0:])
		p.DstPort = binary.BigEndian.Uint16(b[2:])
		p.Seq = binary.BigEndian.Uint32(b[4:])
		p.Ack = binary.BigEndian.Uint32(b[8:])
		p.TCPFlags = uint16(b[12]&1)<<8 | uint16(b[13])
		hlen := int(b[12]>>4) * 4
		if hlen < tcpHeaderLen || hlen > len(b) {
			p.Truncated = hlen > len(b)
			return fmt.Errorf("TCP data offset %d for %d bytes", hlen, len(b))
		}
		p.Payload = b[hlen:]
	case ProtoUDP:
		if len(b) < udpHeaderLen {
			p.Truncated = true
			return p.shortPorts(b, "UDP")
		}
		p.SrcPort = binary.BigEndian.Uint16(b[0:])
		p.DstPort = binary.BigEndian.Uint16(b[2:])
		p.Payload = b[udpHeaderLen:]
	case ProtoICMP, ProtoICMPv6:
		if len(b) < icmpHeaderLen {
			p.Truncated = true
			if len(b) >= 2 {
				p.ICMPType, p.ICMPCode = b[0], b[1]
			}
			return fmt.Errorf("ICMP header truncated at %d bytes", len(b))
		}
		p.ICMPType, p.ICMPCode = b[0], b[1]
		p.ICMPRest = binary.BigEndian.Uint32(b[4:])
		p.Payload = b[icmpHeaderLen:]
		if p.IsICMPError() && len(p.Payload) > 0 {
			inner, _ := ParseIP(p.Payload) // quoted packets are partial by nature
			p.Inner = inner
		}
	default:
		p.Payload = b
	}
	return nil
}

// shortPorts records the ports of a transport header too short to decode.
func (p *Packet) shortPorts(b []byte, name string) error {
	if len(b) >= 4 {
		p.SrcPort = binary.BigEndian.Uint16(b[0:])
		p.DstPort = binary.BigEndian.Uint16(b[2:])
	}
	return fmt.Errorf("%s header truncated at %d bytes", name, len(b))
}

// IsICMPError reports whether p is an ICMP error message (destination
// unreachable, time exceeded, parameter problem, ...), which quotes the
// offending packet in Inner.
func (p *Packet) IsICMPError() bool {
	switch {
	case p.IPVersion == 4 && p.Protocol == ProtoICMP:
		const (
			sourceQuench = 4
			redirect     = 5
			paramProblem = 12
		)
		switch p.ICMPType {
		case ICMPv4DestUnreachable, sourceQuench, redirect, ICMPv4TimeExceeded, paramProblem:
			return true
		}
		return false
	case p.IPVersion == 6 && p.Protocol == ProtoICMPv6:
		return p.ICMPType >= ICMPv6DestUnreachable && p.ICMPType <= ICMPv6ParamProblem
	}
	return false
}

// IsICMPUnreachable reports whether p is an ICMPv4 or ICMPv6 destination
// unreachable message (what REJECT sends, except for tcp-reset).
func (p *Packet) IsICMPUnreachable() bool {
	return (p.IPVersion == 4 && p.Protocol == ProtoICMP && p.ICMPType == ICMPv4DestUnreachable) ||
		(p.IPVersion == 6 && p.Protocol == ProtoICMPv6 && p.ICMPType == ICMPv6DestUnreachable)
}

// IsTCPReset reports whether p is a TCP segment with RST set.
func (p *Packet) IsTCPReset() bool {
	return p.IPVersion != 0 && p.Protocol == ProtoTCP && p.TCPFlags&TCPRst != 0
}

// String summarises p for test logs.
func (p *Packet) String() string {
	var sb strings.Builder
	for _, v := range p.VLANs {
		fmt.Fprintf(&sb, "vlan %d ", v.ID)
	}
	switch p.IPVersion {
	case 0:
		fmt.Fprintf(&sb, "ethertype %#04x %d bytes", p.EtherType, len(p.Raw))
		return sb.String()
	case 4:
		sb.WriteString("IPv4 ")
	case 6:
		sb.WriteString("IPv6 ")
	}
	for _, e := range p.ExtHeaders {
		fmt.Fprintf(&sb, "ext %d ", e)
	}
	if p.Fragment {
		fmt.Fprintf(&sb, "frag id %#x off %d mf %v ", p.FragID, p.FragOffset, p.MoreFragments)
	}
	switch p.Protocol {
	case ProtoTCP:
		fmt.Fprintf(&sb, "%s > %s TCP flags %#x", netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort), p.TCPFlags)
	case ProtoUDP:
		fmt.Fprintf(&sb, "%s > %s UDP", netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort))
	case ProtoICMP, ProtoICMPv6:
		fmt.Fprintf(&sb, "%s > %s ICMP type %d code %d", p.Src, p.Dst, p.ICMPType, p.ICMPCode)
	default:
		fmt.Fprintf(&sb, "%s > %s proto %d", p.Src, p.Dst, p.Protocol)
	}
	fmt.Fprintf(&sb, " payload %d", len(p.Payload))
	if p.Truncated {
		sb.WriteString(" (truncated)")
	}
	if p.Inner != nil {
		fmt.Fprintf(&sb, " [quoting %s]", p.Inner)
	}
	return sb.String()
}
