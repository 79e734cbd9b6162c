package difftest

import (
	"encoding/binary"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Markers tie observations to probes. Each probe of a run gets a number m,
// written when it is sent into fields no supported match reads:
//
//   - the IPv4 identification (16 bits) or the IPv6 flow label (20 bits):
//     copies of the probe (forwarded, delivered, logged) and the packets
//     quoted by ICMP errors carry it;
//   - the TCP sequence number m<<12 and acknowledgement number m<<12|0x800:
//     a RST answering the probe acknowledges seq+len (len < 4096) or takes
//     the probe's ack as its sequence number;
//   - the ICMP echo identifier and sequence number (m): the echo reply
//     carries them back.
//
// Checksums are updated incrementally (RFC 1624), so a deliberately wrong
// checksum stays exactly as wrong.

// Header sizes used when walking frames.
const (
	ethHeaderLen  = 14
	vlanTagLen    = 4
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	tcpHeaderLen  = 20
	icmpHeaderLen = 8
)

// tcpMarkerShift places the marker in the TCP sequence numbers; what a RST
// acknowledges beyond the probe's sequence number (its payload, SYN, FIN)
// stays below 1<<tcpMarkerShift.
const tcpMarkerShift = 12

// tcpAckTag tells the probe's acknowledgement number from its sequence
// number.
const tcpAckTag = 0x800

// maxMarker returns the largest marker of a family: 16 bits for IPv4's
// identification, 20 for IPv6's flow label.
func maxMarker(v6 bool) uint32 {
	if v6 {
		return 1<<20 - 1
	}
	return 1<<16 - 1
}

// l3Offset returns where the IP header starts in an Ethernet frame (after
// any VLAN tags), or -1.
func l3Offset(frame []byte) int {
	off := 12
	for i := 0; i < 4; i++ { // at most a few stacked tags
		if len(frame) < off+2 {
			return -1
		}
		et := binary.BigEndian.Uint16(frame[off:])
		if et != nettest.EtherTypeVLAN && et != nettest.EtherTypeQinQ {
			if et != nettest.EtherTypeIPv4 && et != nettest.EtherTypeIPv6 {
				return -1
			}
			return off + 2
		}
		off += vlanTagLen
	}
	return -1
}

// csumAdjust returns checksum c updated for a 16-bit word changing from old
// to new (RFC 1624, eqn. 3).
func csumAdjust(c, old, new uint16) uint16 {
	sum := uint32(^c) + uint32(^old) + uint32(new)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// put16 writes v at b[off:] and adjusts the checksum at b[csum:] when
// csum >= 0.
func put16(b []byte, off int, v uint16, csum int) {
	old := binary.BigEndian.Uint16(b[off:])
	binary.BigEndian.PutUint16(b[off:], v)
	if csum >= 0 {
		c := binary.BigEndian.Uint16(b[csum:])
		binary.BigEndian.PutUint16(b[csum:], csumAdjust(c, old, v))
	}
}

// put32 writes v at b[off:] as two 16-bit words, adjusting the checksum at
// b[csum:].
func put32(b []byte, off int, v uint32, csum int) {
	put16(b, off, uint16(v>>16), csum)
	put16(b, off+2, uint16(v), csum)
}

// transport locates the transport header of the IP packet at b[l3:]: its
// protocol and offset, or ok false when there is none to write into (a
// later fragment, an extension header chain that cannot be walked).
func transport(b []byte, l3 int) (proto uint8, off int, ok bool) {
	if l3 < 0 || len(b) < l3+1 {
		return 0, 0, false
	}
	switch b[l3] >> 4 {
	case 4:
		if len(b) < l3+ipv4HeaderLen {
			return 0, 0, false
		}
		if binary.BigEndian.Uint16(b[l3+6:])&0x1fff != 0 {
			return 0, 0, false // a later fragment
		}
		return b[l3+9], l3 + int(b[l3]&0x0f)*4, true
	case 6:
		if len(b) < l3+ipv6HeaderLen {
			return 0, 0, false
		}
		nh, off := b[l3+6], l3+ipv6HeaderLen
		// The extension headers, walked as ipv6_find_hdr does: it reads
		// two bytes of each (four of a routing or fragment header) and
		// moves on by the stated length, even past the end.
		for i := 0; i < 8; i++ {
			switch nh {
			case nettest.ProtoHopByHop, nettest.ProtoRouting, nettest.ProtoDestOpts:
				if len(b) < off+2 || nh == nettest.ProtoRouting && len(b) < off+4 {
					return 0, 0, false
				}
				nh, off = b[off], off+(int(b[off+1])+1)*8
			case nettest.ProtoFragment:
				if len(b) < off+4 || binary.BigEndian.Uint16(b[off+2:])&0xfff8 != 0 {
					return 0, 0, false
				}
				nh, off = b[off], off+8
			case nettest.ProtoAH:
				if len(b) < off+2 {
					return 0, 0, false
				}
				nh, off = b[off], off+(int(b[off+1])+2)*4
			default:
				return nh, off, true
			}
		}
	}
	return 0, 0, false
}

// setMarker writes marker m into the IP packet at b[l3:] (see the top of
// this file) and reports whether the packet could carry it. With keepL4 the
// transport header is left alone (Probe.KeepL4).
func setMarker(b []byte, l3 int, m uint32, keepL4 bool) bool {
	if l3 < 0 || len(b) < l3+1 {
		return false
	}
	switch b[l3] >> 4 {
	case 4:
		if len(b) < l3+ipv4HeaderLen {
			return false
		}
		put16(b, l3+4, uint16(m), l3+10)
	case 6:
		if len(b) < l3+ipv6HeaderLen {
			return false
		}
		w := binary.BigEndian.Uint32(b[l3:])
		binary.BigEndian.PutUint32(b[l3:], w&^0xfffff|m&0xfffff)
	default:
		return false
	}
	proto, off, ok := transport(b, l3)
	if !ok || keepL4 {
		return true
	}
	switch proto {
	case nettest.ProtoTCP:
		if len(b) >= off+tcpHeaderLen {
			put32(b, off+4, m<<tcpMarkerShift, off+16)
			put32(b, off+8, m<<tcpMarkerShift|tcpAckTag, off+16)
		}
	case nettest.ProtoICMP, nettest.ProtoICMPv6:
		if len(b) >= off+icmpHeaderLen && (b[off] == nettest.ICMPv4EchoRequest && proto == nettest.ProtoICMP ||
			b[off] == nettest.ICMPv6EchoRequest && proto == nettest.ProtoICMPv6) {
			put32(b, off+4, m, off+2)
		}
	}
	return true
}

// flowLabel returns the flow label of the IPv6 packet raw (from its IP
// header on).
func flowLabel(raw []byte) uint32 {
	if len(raw) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(raw) & 0xfffff
}

// ipMarker returns the marker field of a decoded packet: its IPv4
// identification or IPv6 flow label. l3 is where its IP header starts in
// p.Raw.
func ipMarker(p *nettest.Packet, l3 int) uint32 {
	if p.IPVersion == 4 {
		return uint32(p.IPv4ID)
	}
	if l3 >= 0 && l3 < len(p.Raw) {
		return flowLabel(p.Raw[l3:])
	}
	return 0
}

// relation says how an observed packet relates to the probe it is
// attributed to.
type relation uint8

const (
	// relCopy: the probe itself (forwarded, delivered, looped back).
	relCopy relation = iota
	// relQuote: an ICMP error quoting the probe.
	relQuote
	// relAnswer: a TCP RST or ICMP echo reply answering it.
	relAnswer
)

// candidate is one way an observed packet might belong to a probe.
type candidate struct {
	marker   uint32
	rel      relation
	src, dst netip.Addr // what the probe's addresses must be
}

// candidates lists the markers an observed packet may carry, most specific
// first. l3 is where its IP header starts in p.Raw.
func candidates(p *nettest.Packet, l3 int) []candidate {
	if p == nil || p.IPVersion == 0 {
		return nil
	}
	out := []candidate{{marker: ipMarker(p, l3), rel: relCopy, src: p.Src, dst: p.Dst}}
	if p.Inner != nil && p.Inner.IPVersion != 0 {
		out = append(out, candidate{marker: ipMarker(p.Inner, 0), rel: relQuote, src: p.Inner.Src, dst: p.Inner.Dst})
	}
	switch {
	case p.Protocol == nettest.ProtoTCP:
		out = append(out,
			candidate{marker: p.Seq >> tcpMarkerShift, rel: relAnswer, src: p.Dst, dst: p.Src},
			candidate{marker: p.Ack >> tcpMarkerShift, rel: relAnswer, src: p.Dst, dst: p.Src})
	case p.Protocol == nettest.ProtoICMP && p.ICMPType == nettest.ICMPv4EchoReply,
		p.Protocol == nettest.ProtoICMPv6 && p.ICMPType == nettest.ICMPv6EchoReply:
		// An echo reply fw's stack sent: its identifier and sequence
		// number (32 bits of marker) say more than its IPv4 ID, which
		// the stack picks and may equal another probe's marker.
		out = append([]candidate{{marker: p.ICMPRest, rel: relAnswer, src: p.Dst, dst: p.Src}}, out...)
	}
	return out
}

// markedProbe is a probe's frames as sent, with its marker (0: none).
type markedProbe struct {
	frames [][]byte
	marker uint32
}

// markProbes gives the probes of c their markers (the next ones of the
// session) and returns their marked frames, and the probes by marker.
func (s *Session) markProbes(c *Corpus) ([]markedProbe, map[uint32]int) {
	v6 := s.cfg.Family == ir.IPv6
	probes := make([]markedProbe, len(c.Probes))
	byMarker := map[uint32]int{}
	for i, p := range c.Probes {
		m := s.next
		s.next++
		if s.next > maxMarker(v6) {
			s.next = 1
		}
		ok := false
		for _, f := range p.Frames {
			b := append([]byte(nil), f...)
			l3 := 0
			if p.From != FromFw {
				l3 = l3Offset(b)
			}
			if setMarker(b, l3, m, p.KeepL4) {
				ok = true
			}
			probes[i].frames = append(probes[i].frames, b)
		}
		if ok {
			probes[i].marker = m
			byMarker[m] = i
		}
	}
	return probes, byMarker
}
