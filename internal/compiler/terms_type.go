package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Address and packet types: -m addrtype and -m pkttype. The data plane
// computes the facts once per packet (bpf/local.h, xfw_addrtype_value;
// the XDP hook sets the packet type), and the conditions here enumerate
// the values whose facts the kernel's match accepts.

// FieldAddrType packs the facts of the source address in bits 0-4 and of
// the destination address in bits 5-9 (enum xfw_addrtype, bpf/common.h).
//
// IPv4, the route type inet_dev_addr_type gives (xt_addrtype.c: the local
// table, merged with the main table when there are no policy rules):
// bits 0-2 the type (RTN_UNICAST 1 for an address without a local-table
// route, LOCAL 2, BROADCAST 3, ANYCAST 4, MULTICAST 5; 0.0.0.0 and
// 255.255.255.255 are BROADCAST and 224.0.0.0/4 MULTICAST whatever the
// routes), AddrTypeViaIn when the route's device is the packet's input
// device and AddrTypeViaOut when it is its output device (both for the
// three kinds of address whose type depends on no route): with
// --limit-iface-in/out a route through another device makes the address
// UNICAST.
//
// IPv6 (match_type6): bits 0-1 the class ipv6_addr_type gives
// (AddrClass*), AddrType6Local when the route the lookup finds is a local
// route (RTF_LOCAL), AddrType6Anycast when it is an anycast route.
const (
	// AddrTypeBits is the width of one address's facts.
	AddrTypeBits = 5
	// AddrTypeDstShift is where the destination's facts start.
	AddrTypeDstShift = AddrTypeBits
	// AddrTypeRTN masks an IPv4 address's route type.
	AddrTypeRTN = 0x7
	// AddrTypeViaIn and AddrTypeViaOut: the route is through the input
	// (output) device, or the type depends on no route.
	AddrTypeViaIn  = 0x8
	AddrTypeViaOut = 0x10
	// AddrClassMask masks an IPv6 address's class.
	AddrClassMask = 0x3
	// AddrType6Local and AddrType6Anycast: the route is local (anycast).
	AddrType6Local   = 0x4
	AddrType6Anycast = 0x8

	addrTypeDomain = 1 << (2 * AddrTypeBits)
	// pktTypeDomain holds PACKET_HOST … PACKET_OTHERHOST.
	pktTypeDomain = 4
)

// IPv6 address classes (ipv6_addr_type): unicast, multicast, the
// unspecified address (::), and the rest (IPv4-mapped), which is neither.
const (
	AddrClassOther     = 0
	AddrClassUnicast   = 1
	AddrClassMulticast = 2
	AddrClassAny       = 3
)

// Route types of IPv4 addresses (RTN_* of linux/rtnetlink.h).
const (
	rtnUnicast = 1
)

// AddrTypeMatches reports whether an address with facts (AddrTypeBits
// wide) has one of the types of mask, as xt_addrtype.c's match_type (IPv4)
// and match_type6 (IPv6) decide, with the device limit of m (IPv4 only).
func AddrTypeMatches(fam ir.Family, facts uint32, mask uint16, limitIn, limitOut bool) bool {
	if fam == ir.IPv6 {
		return addrType6Matches(facts, mask)
	}
	t := facts & AddrTypeRTN
	if (limitIn && facts&AddrTypeViaIn == 0) || (limitOut && facts&AddrTypeViaOut == 0) {
		t = rtnUnicast
	}
	return mask&(1<<t) != 0
}

// addrType6Matches is match_type6 without a device: the class conditions
// of MULTICAST, UNICAST and UNSPEC must all hold, then one of LOCAL and
// ANYCAST when the mask names a type the route lookup decides.
func addrType6Matches(facts uint32, mask uint16) bool {
	class := facts & AddrClassMask
	switch {
	case mask&ir.AddrTypeMulticast != 0 && class != AddrClassMulticast:
		return false
	case mask&ir.AddrTypeUnicast != 0 && class != AddrClassUnicast:
		return false
	case mask&ir.AddrTypeUnspec != 0 && class != AddrClassAny:
		return false
	}
	if mask&(ir.AddrTypeLocal|ir.AddrTypeAnycast|ir.AddrTypeUnreachable) == 0 {
		return true
	}
	var route uint16
	if facts&AddrType6Local != 0 {
		route |= ir.AddrTypeLocal
	}
	if facts&AddrType6Anycast != 0 {
		route |= ir.AddrTypeAnycast
	}
	return mask&route != 0
}

// addrTypeSupported refuses what the data plane cannot decide: in IPv6,
// UNREACHABLE (a route lookup of any address, which XDP cannot make on a
// host that does not forward) and --limit-iface-in/out (a lookup through
// one device), and the types the kernel refuses in IPv6.
func addrTypeSupported(fam ir.Family, m *ir.AddrTypeMatch) error {
	if fam != ir.IPv6 {
		return nil
	}
	types := m.Src | m.Dst
	switch {
	case m.LimitIn || m.LimitOut:
		return fmt.Errorf("addrtype match: --limit-iface-in and --limit-iface-out are not supported by xfw's data plane in IPv6")
	case types&ir.AddrTypeUnreachable != 0:
		return fmt.Errorf("addrtype match: type UNREACHABLE is not supported by xfw's data plane in IPv6")
	case types&^(ir.AddrTypeUnspec|ir.AddrTypeUnicast|ir.AddrTypeLocal|ir.AddrTypeAnycast|ir.AddrTypeMulticast) != 0:
		return fmt.Errorf("addrtype match: IPv6 has no type BROADCAST, BLACKHOLE, PROHIBIT, THROW, NAT or XRESOLVE")
	}
	return nil
}

// addrType adds an addrtype match: the FieldAddrType values whose source
// and destination facts satisfy it (addrtype_mt_v1: the source's test,
// then the destination's, each inverted on its own).
func (b *termBuilder) addrType(m *ir.AddrTypeMatch) error {
	if err := addrTypeSupported(b.fam, m); err != nil {
		return err
	}
	const factsMask = 1<<AddrTypeBits - 1
	var ivs []Interval
	for v := uint32(0); v < addrTypeDomain; v++ {
		ok := true
		if m.Src != 0 {
			ok = AddrTypeMatches(b.fam, v&factsMask, m.Src, m.LimitIn, m.LimitOut) != m.InvSrc
		}
		if ok && m.Dst != 0 {
			ok = AddrTypeMatches(b.fam, v>>AddrTypeDstShift, m.Dst, m.LimitIn, m.LimitOut) != m.InvDst
		}
		if ok {
			ivs = append(ivs, Interval{U64(uint64(v)), U64(uint64(v))})
		}
	}
	b.and(FieldAddrType, NewSet(ivs...))
	return nil
}

// pktType adds a pkttype match (skb->pkt_type, PACKET_LOOPBACK apart: the
// data plane never sees the copies the host loops back to itself).
func (b *termBuilder) pktType(m *ir.PktTypeMatch) {
	s := invertIf(Point(U64(uint64(m.Type))), m.Invert, U64(0), U64(pktTypeDomain-1))
	b.and(FieldPktType, s)
}
