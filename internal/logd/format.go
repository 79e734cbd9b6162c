package logd

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

// Event is one LOG event of the data plane (see dataplane.LogEvent).
type Event = dataplane.LogEvent

// Sizes and offsets of the headers, in bytes.
const (
	ethHeaderLen = 14 // destination, source, EtherType
	ethAddrLen   = 6
	ethTypeLen   = 2
	// pppoeSesLen is a PPPoE session frame's header and PPP protocol
	// after the Ethernet header, EtherType etherPPPoESes (the IP header
	// of a bridged one that xfw judges is after them).
	pppoeSesLen   = 8
	etherPPPoESes = 0x8864
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	tcpHeaderLen  = 20
	udpHeaderLen  = 8
	icmpHeaderLen = 8 // struct icmphdr and struct icmp6hdr
	ahHeaderLen   = 12
	espHeaderLen  = 8
	fragHeaderLen = 8 // IPv6 fragment header
	optHeaderLen  = 2 // next header and length of an IPv6 extension header
)

// IP protocol numbers.
const (
	protoHopOpts  = 0
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoRouting  = 43
	protoFragment = 44
	protoESP      = 50
	protoAH       = 51
	protoICMPv6   = 58
	protoNone     = 59
	protoDstOpts  = 60
	protoUDPLite  = 136
)

// IPv4 header bits.
const (
	ipTOSMask  = 0x1e   // IPTOS_TOS_MASK
	ipPrecMask = 0xe0   // IPTOS_PREC_MASK
	ipCE       = 0x8000 // the reserved ("congestion") flag
	ipDF       = 0x4000
	ipMF       = 0x2000
	ipOffset   = 0x1fff
)

// ICMP types and codes the kernel decodes.
const (
	icmpEchoReply    = 0
	icmpDestUnreach  = 3
	icmpSourceQuench = 4
	icmpRedirect     = 5
	icmpEcho         = 8
	icmpTimeExceeded = 11
	icmpParamProb    = 12
	icmpFragNeeded   = 4 // code of icmpDestUnreach
	nrICMPTypes      = 18

	icmp6DestUnreach = 1
	icmp6PktTooBig   = 2
	icmp6TimeExceed  = 3
	icmp6ParamProb   = 4
	icmp6EchoRequest = 128
	icmp6EchoReply   = 129
	icmp6MgmQuery    = 130
	icmp6MgmReport   = 131
	icmp6MgmReduce   = 132
)

// icmpRequiredLen is the kernel's required_len[]: bytes of ICMP message a
// type needs to be printed in full (0: no check).
var icmpRequiredLen = [nrICMPTypes + 1]uint32{
	icmpEchoReply:    4,
	icmpDestUnreach:  icmpHeaderLen + ipv4HeaderLen,
	icmpSourceQuench: icmpHeaderLen + ipv4HeaderLen,
	icmpRedirect:     icmpHeaderLen + ipv4HeaderLen,
	icmpEcho:         4,
	icmpTimeExceeded: icmpHeaderLen + ipv4HeaderLen,
	icmpParamProb:    icmpHeaderLen + ipv4HeaderLen,
	13:               20, // ICMP_TIMESTAMP
	14:               20, // ICMP_TIMESTAMPREPLY
	17:               12, // ICMP_ADDRESS
	18:               12, // ICMP_ADDRESSREPLY
}

// TCP header bits (of the 32-bit word at offset 12).
const (
	tcpReservedBits  = 0x0e000000 // TCP_RESERVED_BITS (0x01000000 is AE)
	tcpReservedShift = 22         // the kernel prints the bits >> 22
)

// tcpFlags are the flag names in the kernel's order, with their bit in the
// 16-bit word at offset 12 of the TCP header.
var tcpFlags = []struct {
	bit  uint16
	name string
}{
	{0x0100, "AE "},
	{0x0080, "CWR "},
	{0x0040, "ECE "},
	{0x0020, "URG "},
	{0x0010, "ACK "},
	{0x0008, "PSH "},
	{0x0004, "RST "},
	{0x0002, "SYN "},
	{0x0001, "FIN "},
}

// IPv6 fragment header fields.
const (
	ip6FragOffset = 0xfff8 // offset bits, printed as is
	ip6FragMore   = 0x0001
)

// Devices.
const (
	// loopbackIfindex is LOOPBACK_IFINDEX: lo is ARPHRD_LOOPBACK, which
	// --log-macdecode does not decode.
	loopbackIfindex = 1
	// lineMax is what the kernel's nf_log_buf keeps of a line: S_SIZE
	// (1024 - sizeof(unsigned int) - 1) less the NUL, less the two bytes of
	// KERN_SOH and level that start the buffer.
	lineMax = 1024 - 4 - 1 - 1 - 2
)

// line is the kernel's nf_log_buf: once an addition does not fit, the text
// is cut at the limit and every later addition is dropped.
type line struct {
	b    []byte
	full bool
}

// add appends formatted text, as nf_log_buf_add.
func (l *line) add(format string, args ...any) {
	l.str(fmt.Sprintf(format, args...))
}

// str appends s, as nf_log_buf_add.
func (l *line) str(s string) {
	if l.full {
		return
	}
	if len(l.b)+len(s) >= lineMax+1 {
		l.b = append(l.b, s[:lineMax-len(l.b)]...)
		l.full = true
		return
	}
	l.b = append(l.b, s...)
}

// packet is the packet from its network header on, as netfilter sees it.
type packet struct {
	data []byte // the bytes known (at most skbLen)
	// skbLen is skb->len at the hook: the IP datagram's length.
	skbLen uint32
}

// header returns the n bytes at off, or nil where skb_header_pointer would
// fail (past the packet) or the bytes are past the snapshot.
func (p *packet) header(off uint32, n uint32) []byte {
	end := uint64(off) + uint64(n)
	if end > uint64(p.skbLen) || end > uint64(len(p.data)) {
		return nil
	}
	return p.data[off:end]
}

// formatter holds one event's formatting state.
type formatter struct {
	l     line
	p     packet
	flags uint8
	// ttlDelta is subtracted from the outer TTL / hop limit (FORWARD).
	ttlDelta uint8
	// received is true on INPUT and FORWARD, input on INPUT only.
	received, input bool
	// host answers the lookups of the IPv4 option rewrites.
	host host
	// mark is the packet's mark at the rule: MARK= ends the line when
	// it is not 0.
	mark uint32
	// uid and gid are its socket's file's ids, printed (UID= GID=) with
	// --log-uid when hasUID.
	hasUID   bool
	uid, gid uint32
}

// Format renders ev as the kernel's LOG target prints the line (without
// the syslog level and the trailing newline). ifName maps an interface
// index to its name; it is called only for non-zero indexes.
//
// The kernel rewrites the record route and timestamp IPv4 options of a
// received packet before logging it (pointer, overflow count, address and
// time slots, bytes after the end of the list); Format replays that. On
// FORWARD the address the kernel records is the preferred source of the
// route back to the sender, which Format does not know: it leaves that slot
// as received (Run asks the routing table). Timestamps come from the clock
// at formatting time, not at the hook.
func Format(ev Event, ifName func(index uint32) string) string {
	return formatEvent(ev, ifName, offlineHost{})
}

// formatEvent is Format with the host's answers to the kernel's lookups.
func formatEvent(ev Event, ifName func(index uint32) string, h host) string {
	f := formatter{
		flags:    ev.Flags,
		host:     h,
		received: ev.Chain != ir.ChainOutput,
		input:    ev.Chain == ir.ChainInput,
		mark:     ev.Mark,
		hasUID:   ev.HasUID && ev.Flags&ir.LogFlagUID != 0,
		uid:      ev.UID,
		gid:      ev.GID,
	}
	// A PREROUTING chain's line: no output device, the packet as
	// received; a POSTROUTING chain's: no input device (ir.LogView*).
	prerouting := ev.Flags&ir.LogViewPrerouting != 0
	if prerouting {
		ev.OutIfindex = 0
		f.received, f.input = false, false
	}
	if ev.Flags&ir.LogViewPostrouting != 0 {
		ev.InIfindex = 0
	}
	name := func(i uint32) string {
		if i == 0 || ifName == nil {
			return ""
		}
		return ifName(i)
	}
	f.l.str(ev.Prefix)
	f.l.add("IN=%s OUT=%s ", name(ev.InIfindex), name(ev.OutIfindex))
	f.physPorts(ev, prerouting, name)
	if ev.InIfindex != 0 {
		f.dumpMAC(ev)
	}
	l3 := []byte(nil)
	if ev.L3Off <= len(ev.Frame) {
		l3 = ev.Frame[ev.L3Off:]
	}
	frameL3 := max(max(ev.FrameLen, len(ev.Frame))-ev.L3Off, 0)
	f.p = packet{data: l3, skbLen: ipLength(ev.Family, l3, uint32(frameL3))}
	if uint32(len(f.p.data)) > f.p.skbLen {
		f.p.data = f.p.data[:f.p.skbLen]
	}
	// A frame bridged from port to port is not routed: FORWARD sees its
	// TTL as received.
	if ev.Chain == ir.ChainForward && !prerouting && ev.PhysOut == 0 {
		f.ttlDelta = 1
	}
	if ev.Family == ir.IPv6 {
		f.dumpIPv6(0, true)
	} else {
		f.dumpIPv4(0)
	}
	return string(f.l.b)
}

// physPorts prints br_netfilter's ports as nf_log_dump_packet_common
// does: PHYSIN= for a packet a bridge port received (bridged, or passed
// up: every chain but OUTPUT), PHYSOUT= for one the bridge forwards to a
// port (FORWARD, POSTROUTING: the port is chosen after PREROUTING).
func (f *formatter) physPorts(ev Event, prerouting bool, name func(uint32) string) {
	if ev.PhysIn != 0 && ev.PhysIn != ev.InIfindex {
		f.l.add("PHYSIN=%s ", name(ev.PhysIn))
	}
	if ev.PhysOut != 0 && ev.PhysOut != ev.OutIfindex && !prerouting && ev.Chain != ir.ChainInput {
		f.l.add("PHYSOUT=%s ", name(ev.PhysOut))
	}
}

// ipLength returns skb->len at the netfilter hook for a datagram whose
// frame holds frameL3 bytes from the IP header on: the stack trims the
// frame to the IP header's length (a length of 0 is GSO's "see skb->len").
func ipLength(fam ir.Family, l3 []byte, frameL3 uint32) uint32 {
	var n uint32
	switch {
	case fam == ir.IPv4 && len(l3) >= ipv4HeaderLen:
		n = uint32(binary.BigEndian.Uint16(l3[2:]))
	case fam == ir.IPv6 && len(l3) >= ipv6HeaderLen:
		if pl := uint32(binary.BigEndian.Uint16(l3[4:])); pl != 0 {
			n = pl + ipv6HeaderLen
		} else if l3[6] != 0 {
			// Payload length 0 without a hop-by-hop header (which could
			// announce a jumbogram): ip6_rcv_core trims the packet to its
			// header (found by the differential test, internal/testkit/difftest).
			n = ipv6HeaderLen
		}
	}
	if n == 0 || n > frameL3 {
		return frameL3
	}
	return n
}

// dumpMAC is dump_mac_header for the input device.
func (f *formatter) dumpMAC(ev Event) {
	var mac []byte
	if ev.HasMAC && ev.L3Off >= ethHeaderLen && len(ev.Frame) >= ev.L3Off {
		// The stack removes a VLAN tag before the VLAN device sees the
		// frame: the header is the addresses and the inner EtherType.
		// A PPPoE header stays (br_netfilter's IP header is after it):
		// the EtherType is PPPoE's.
		typ := ev.Frame[ev.L3Off-ethTypeLen : ev.L3Off]
		if ev.L3Off == ethHeaderLen+pppoeSesLen &&
			binary.BigEndian.Uint16(ev.Frame[2*ethAddrLen:]) == etherPPPoESes {
			typ = ev.Frame[2*ethAddrLen : ethHeaderLen]
		}
		mac = append(mac, ev.Frame[:2*ethAddrLen]...)
		mac = append(mac, typ...)
	}
	if f.flags&ir.LogFlagMACDecode != 0 && mac != nil && ev.InIfindex != loopbackIfindex {
		f.l.add("MACSRC=%s MACDST=%s MACPROTO=%04x ",
			hexBytes(mac[ethAddrLen:2*ethAddrLen], ":", false),
			hexBytes(mac[:ethAddrLen], ":", false),
			binary.BigEndian.Uint16(mac[2*ethAddrLen:]))
		return
	}
	f.l.str("MAC=")
	if mac != nil {
		f.l.str(hexBytes(mac, ":", false))
	}
	f.l.str(" ")
}

// hexBytes prints b as two-digit hex numbers joined by sep.
func hexBytes(b []byte, sep string, upper bool) string {
	digits := "0123456789abcdef"
	if upper {
		digits = "0123456789ABCDEF"
	}
	var s strings.Builder
	for i, c := range b {
		if i > 0 {
			s.WriteString(sep)
		}
		s.WriteByte(digits[c>>4])
		s.WriteByte(digits[c&0xf])
	}
	return s.String()
}

// ipv4String is %pI4.
func ipv4String(b []byte) string {
	return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3])
}

// ipv6String is %pI6: eight groups of four lower-case hex digits.
func ipv6String(b []byte) string {
	var s strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			s.WriteByte(':')
		}
		s.WriteString(hexBytes(b[i:i+2], "", false))
	}
	return s.String()
}

// dumpIPv4 is dump_ipv4_packet; off is the IP header's offset (0 for the
// packet, else an ICMP error's quoted header, which does not recurse).
//
// IPv4 header: version and IHL at 0, TOS 1, total length 2, ID 4, flags
// and fragment offset 6, TTL 8, protocol 9, addresses 12 and 16.
func (f *formatter) dumpIPv4(off uint32) {
	ih := f.p.header(off, ipv4HeaderLen)
	if ih == nil {
		f.l.str("TRUNCATED")
		return
	}
	top := off == 0
	f.l.add("SRC=%s DST=%s ", ipv4String(ih[12:16]), ipv4String(ih[16:20]))
	ttl := ih[8]
	if top {
		ttl -= f.ttlDelta
	}
	totLen := uint32(binary.BigEndian.Uint16(ih[2:]))
	if top && totLen == 0 {
		totLen = f.p.skbLen // iph_totlen of a GSO packet
	}
	f.l.add("LEN=%d TOS=0x%02X PREC=0x%02X TTL=%d ID=%d ",
		totLen, ih[1]&ipTOSMask, ih[1]&ipPrecMask, ttl, binary.BigEndian.Uint16(ih[4:]))
	fragOff := binary.BigEndian.Uint16(ih[6:])
	if fragOff&ipCE != 0 {
		f.l.str("CE ")
	}
	if fragOff&ipDF != 0 {
		f.l.str("DF ")
	}
	if fragOff&ipMF != 0 {
		f.l.str("MF ")
	}
	frag := fragOff & ipOffset
	if frag != 0 {
		f.l.add("FRAG:%d ", frag)
	}
	ihl := uint32(ih[0]&0xf) * 4 // IHL, in 32-bit words
	if f.flags&ir.LogFlagIPOpt != 0 && ihl > ipv4HeaderLen {
		op := f.p.header(off+ipv4HeaderLen, ihl-ipv4HeaderLen)
		if op == nil {
			f.l.str("TRUNCATED")
			return
		}
		if top && f.received {
			op = receivedOptions(op, ih, f.input, f.host)
		}
		f.l.add("OPT (%s) ", hexBytes(op, "", true))
	}
	l4 := off + ihl
	switch proto := ih[9]; proto {
	case protoTCP:
		if f.dumpTCP(frag != 0, l4) {
			return
		}
	case protoUDP, protoUDPLite:
		if f.dumpUDP(proto, frag != 0, l4) {
			return
		}
	case protoICMP:
		f.dumpICMP(frag != 0, off, l4)
	case protoAH:
		if frag != 0 {
			break
		}
		f.l.str("PROTO=AH ")
		ah := f.p.header(l4, ahHeaderLen)
		if ah == nil {
			f.l.add("INCOMPLETE [%d bytes] ", f.p.skbLen-l4)
			break
		}
		f.l.add("SPI=0x%x ", binary.BigEndian.Uint32(ah[4:]))
	case protoESP:
		f.l.str("PROTO=ESP ")
		if frag != 0 {
			break
		}
		eh := f.p.header(l4, espHeaderLen)
		if eh == nil {
			f.l.add("INCOMPLETE [%d bytes] ", f.p.skbLen-l4)
			break
		}
		f.l.add("SPI=0x%x ", binary.BigEndian.Uint32(eh[0:]))
	default:
		f.l.add("PROTO=%d ", proto)
	}
	if top {
		f.dumpOwner()
		f.dumpMark()
	}
}

// dumpOwner prints --log-uid's UID= and GID= of the packet's socket, as
// nf_log_dump_sk_uid_gid (nothing where the packet has none: received
// packets at XDP, the kernel's own).
func (f *formatter) dumpOwner() {
	if f.hasUID {
		f.l.add("UID=%d GID=%d ", f.uid, f.gid)
	}
}

// dumpMark ends the line of the packet (not of a quoted one) with the
// packet's mark when it is not 0, as dump_ipv4_packet and
// dump_ipv6_packet do.
func (f *formatter) dumpMark() {
	if f.mark != 0 {
		f.l.add("MARK=0x%x ", f.mark)
	}
}

// dumpICMP prints the ICMP part of dump_ipv4_packet; iphoff is the IP
// header's offset and off the ICMP header's (type at 0, code 1, echo ID and
// sequence 4 and 6, gateway or parameter pointer 4, MTU 6).
func (f *formatter) dumpICMP(fragment bool, iphoff, off uint32) {
	f.l.str("PROTO=ICMP ")
	if fragment {
		return
	}
	rest := f.p.skbLen - off // unsigned, as the kernel's
	ich := f.p.header(off, icmpHeaderLen)
	if ich == nil {
		f.l.add("INCOMPLETE [%d bytes] ", rest)
		return
	}
	typ, code := ich[0], ich[1]
	f.l.add("TYPE=%d CODE=%d ", typ, code)
	if typ <= nrICMPTypes && icmpRequiredLen[typ] != 0 && rest < icmpRequiredLen[typ] {
		f.l.add("INCOMPLETE [%d bytes] ", rest)
		return
	}
	switch typ {
	case icmpEchoReply, icmpEcho:
		f.l.add("ID=%d SEQ=%d ", binary.BigEndian.Uint16(ich[4:]), binary.BigEndian.Uint16(ich[6:]))
	case icmpParamProb:
		f.l.add("PARAMETER=%d ", ich[4])
	case icmpRedirect, icmpDestUnreach, icmpSourceQuench, icmpTimeExceeded:
		if typ == icmpRedirect {
			f.l.add("GATEWAY=%s ", ipv4String(ich[4:8]))
		}
		if iphoff == 0 { // only one level of recursion
			f.l.str("[")
			f.dumpIPv4(off + icmpHeaderLen)
			f.l.str("] ")
		}
		if typ == icmpDestUnreach && code == icmpFragNeeded {
			f.l.add("MTU=%d ", binary.BigEndian.Uint16(ich[6:]))
		}
	}
}

// dumpTCP is nf_log_dump_tcp_header; true where it returns 1 (the kernel
// then ends the line without UID= and MARK=).
//
// TCP header: ports at 0 and 2, sequence 4, acknowledgement 8, data offset,
// reserved bits, AE and the flags 12-13, window 14, urgent pointer 18.
func (f *formatter) dumpTCP(fragment bool, off uint32) bool {
	f.l.str("PROTO=TCP ")
	if fragment {
		return false
	}
	th := f.p.header(off, tcpHeaderLen)
	if th == nil {
		f.l.add("INCOMPLETE [%d bytes] ", f.p.skbLen-off)
		return true
	}
	f.l.add("SPT=%d DPT=%d ", binary.BigEndian.Uint16(th[0:]), binary.BigEndian.Uint16(th[2:]))
	if f.flags&ir.LogFlagTCPSeq != 0 {
		f.l.add("SEQ=%d ACK=%d ", binary.BigEndian.Uint32(th[4:]), binary.BigEndian.Uint32(th[8:]))
	}
	f.l.add("WINDOW=%d ", binary.BigEndian.Uint16(th[14:]))
	word := binary.BigEndian.Uint32(th[12:])
	f.l.add("RES=0x%02x ", uint8((word&tcpReservedBits)>>tcpReservedShift))
	bits := binary.BigEndian.Uint16(th[12:])
	for _, fl := range tcpFlags {
		if bits&fl.bit != 0 {
			f.l.str(fl.name)
		}
	}
	f.l.add("URGP=%d ", binary.BigEndian.Uint16(th[18:]))
	hlen := uint32(th[12]>>4) * 4 // data offset, in 32-bit words
	if f.flags&ir.LogFlagTCPOpt != 0 && hlen > tcpHeaderLen {
		op := f.p.header(off+tcpHeaderLen, hlen-tcpHeaderLen)
		if op == nil {
			f.l.str("OPT (TRUNCATED)")
			return true
		}
		f.l.add("OPT (%s) ", hexBytes(op, "", true))
	}
	return false
}

// dumpUDP is nf_log_dump_udp_header (UDP header: ports at 0 and 2, length
// at 4); true where it returns 1, as dumpTCP.
func (f *formatter) dumpUDP(proto uint8, fragment bool, off uint32) bool {
	if proto == protoUDP {
		f.l.str("PROTO=UDP ")
	} else {
		f.l.str("PROTO=UDPLITE ")
	}
	if fragment {
		return false
	}
	uh := f.p.header(off, udpHeaderLen)
	if uh == nil {
		f.l.add("INCOMPLETE [%d bytes] ", f.p.skbLen-off)
		return true
	}
	f.l.add("SPT=%d DPT=%d LEN=%d ", binary.BigEndian.Uint16(uh[0:]),
		binary.BigEndian.Uint16(uh[2:]), binary.BigEndian.Uint16(uh[4:]))
	return false
}

// isIPv6Ext is nf_ip6_ext_hdr.
func isIPv6Ext(h uint8) bool {
	switch h {
	case protoHopOpts, protoRouting, protoFragment, protoESP, protoAH, protoNone, protoDstOpts:
		return true
	}
	return false
}

// dumpIPv6 is dump_ipv6_packet; off is the IP header's offset and recurse
// allows one level of ICMPv6 error recursion.
//
// IPv6 header: version, traffic class and flow label at 0, payload length
// 4, next header 6, hop limit 7, addresses 8 and 24. Extension headers:
// next header 0, length 1; fragment offset and M flag 2, ID 4; AH SPI 4;
// ESP SPI 0.
func (f *formatter) dumpIPv6(off uint32, recurse bool) {
	ih := f.p.header(off, ipv6HeaderLen)
	if ih == nil {
		f.l.str("TRUNCATED")
		return
	}
	f.l.add("SRC=%s DST=%s ", ipv6String(ih[8:24]), ipv6String(ih[24:40])) // 16-byte addresses
	w := binary.BigEndian.Uint32(ih[0:])
	hop := ih[7]
	if off == 0 {
		hop -= f.ttlDelta
	}
	f.l.add("LEN=%d TC=%d HOPLIMIT=%d FLOWLBL=%d ",
		uint32(binary.BigEndian.Uint16(ih[4:]))+ipv6HeaderLen,
		(w&0x0ff00000)>>20, hop, w&0x000fffff) // traffic class and flow label bits
	ipopt := f.flags&ir.LogFlagIPOpt != 0
	fragment := false
	ptr := off + ipv6HeaderLen
	cur := ih[6]
	for cur != protoNone && isIPv6Ext(cur) {
		hp := f.p.header(ptr, optHeaderLen)
		if hp == nil {
			f.l.str("TRUNCATED")
			return
		}
		if ipopt {
			f.l.str("OPT ( ")
		}
		var hdrlen uint32
		switch cur {
		case protoFragment:
			f.l.str("FRAG:")
			fh := f.p.header(ptr, fragHeaderLen)
			if fh == nil {
				f.l.str("TRUNCATED ")
				return
			}
			fo := binary.BigEndian.Uint16(fh[2:]) // offset and M flag
			f.l.add("%d ", fo&ip6FragOffset)
			if fo&ip6FragMore != 0 {
				f.l.str("INCOMPLETE ")
			}
			f.l.add("ID:%08x ", binary.BigEndian.Uint32(fh[4:]))
			if fo&ip6FragOffset != 0 {
				fragment = true
			}
			hdrlen = fragHeaderLen
		case protoDstOpts, protoRouting, protoHopOpts:
			if fragment {
				if ipopt {
					f.l.str(")")
				}
				return
			}
			hdrlen = (uint32(hp[1]) + 1) * 8 // ipv6_optlen
		case protoAH:
			if ipopt {
				f.l.str("AH ")
				if fragment {
					f.l.str(")")
					return
				}
				ah := f.p.header(ptr, ahHeaderLen)
				if ah == nil {
					f.l.add("INCOMPLETE [%d bytes] )", f.p.skbLen-ptr)
					return
				}
				f.l.add("SPI=0x%x ", binary.BigEndian.Uint32(ah[4:]))
			}
			hdrlen = (uint32(hp[1]) + 2) * 4 // ipv6_authlen
		case protoESP:
			if ipopt {
				f.l.str("ESP ")
				if fragment {
					f.l.str(")")
					return
				}
				eh := f.p.header(ptr, espHeaderLen)
				if eh == nil {
					f.l.add("INCOMPLETE [%d bytes] )", f.p.skbLen-ptr)
					return
				}
				f.l.add("SPI=0x%x )", binary.BigEndian.Uint32(eh[0:]))
			}
			return
		}
		if ipopt {
			f.l.str(") ")
		}
		cur = hp[0]
		ptr += hdrlen
	}
	switch cur {
	case protoTCP:
		if f.dumpTCP(fragment, ptr) {
			return
		}
	case protoUDP, protoUDPLite:
		if f.dumpUDP(cur, fragment, ptr) {
			return
		}
	case protoICMPv6:
		if f.dumpICMPv6(fragment, ptr, recurse) {
			return
		}
	default:
		f.l.add("PROTO=%d ", cur)
	}
	if recurse {
		f.dumpOwner()
		f.dumpMark()
	}
}

// dumpICMPv6 prints the ICMPv6 part of dump_ipv6_packet (type at 0, code
// 1, echo ID and sequence 4 and 6, pointer or MTU 4); true where the
// kernel's line ends there.
func (f *formatter) dumpICMPv6(fragment bool, off uint32, recurse bool) bool {
	f.l.str("PROTO=ICMPv6 ")
	if fragment {
		return false
	}
	ic := f.p.header(off, icmpHeaderLen)
	if ic == nil {
		f.l.add("INCOMPLETE [%d bytes] ", f.p.skbLen-off)
		return true // the kernel returns: no MARK=
	}
	typ := ic[0]
	f.l.add("TYPE=%d CODE=%d ", typ, ic[1])
	switch typ {
	case icmp6EchoRequest, icmp6EchoReply:
		f.l.add("ID=%d SEQ=%d ", binary.BigEndian.Uint16(ic[4:]), binary.BigEndian.Uint16(ic[6:]))
	case icmp6MgmQuery, icmp6MgmReport, icmp6MgmReduce:
	case icmp6ParamProb, icmp6DestUnreach, icmp6PktTooBig, icmp6TimeExceed:
		if typ == icmp6ParamProb {
			f.l.add("POINTER=%08x ", binary.BigEndian.Uint32(ic[4:]))
		}
		if recurse {
			f.l.str("[")
			f.dumpIPv6(off+icmpHeaderLen, false)
			f.l.str("] ")
		}
		if typ == icmp6PktTooBig {
			f.l.add("MTU=%d ", binary.BigEndian.Uint32(ic[4:]))
		}
	}
	return false
}
