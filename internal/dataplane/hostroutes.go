package dataplane

import (
	"bytes"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// What -m addrtype sees of an entry of the local table where it differs
// from the routing type (localVal.AT): for IPv6 bpf/common.h's
// XFW_AT6_LOCAL and XFW_AT6_ANYCAST, for IPv4 bpf/local.h's
// XFW_AT4_UNICAST.
const (
	at6Local   = 0x4 // the route found has RTF_LOCAL (type local)
	at6Anycast = 0x8 // ipv6_anycast_destination: RTF_ANYCAST, or a connected prefix's network address
	at4Unicast = 0x1 // main's route of this host's, unseen by inet_addr_type's local-table lookup
)

// hostEntries computes the data plane's local table of family fam from the
// namespace's local and main routing tables, as the kernel's lookups see
// them:
//
//   - IPv4 with merged tables (no policy rule ever configured: the
//     kernel's local table is then a view of one trie holding main's routes
//     too, and inet_addr_type takes the longest prefix of both, local's
//     route winning a tie): main's routes of this host's types, and main's
//     other routes more specific than a route of this host's types, which
//     make the addresses they cover UNICAST. Unmerged (merged false), the
//     local table's rule first, then main's, for routing, as in IPv6, but
//     -m addrtype sees the local table only: main's routes of this host's
//     types are marked at4Unicast.
//   - IPv6 (the local table's rule first, then main's, for both routing
//     and -m addrtype's route lookup): main's routes of this host's types
//     that no local-table route covers, main's other routes more specific
//     than those, and a /128 entry for the network address of every
//     prefix reached without a gateway, which ipv6_anycast_destination
//     calls ANYCAST (the route's own type kept for routing: on a host that
//     does not forward the kernel does not deliver it).
func hostEntries(fam int, local, main []netlink.Route, merged bool) []localRoute {
	var out []localRoute
	if fam == netlink.FAMILY_V4 {
		_, mc, _ := net.ParseCIDR("224.0.0.0/4")
		_, bc, _ := net.ParseCIDR("255.255.255.255/32")
		out = append(out, localRoute{mc, localVal{Type: unix.RTN_MULTICAST}}, localRoute{bc, localVal{Type: unix.RTN_BROADCAST}})
	}
	bits := 32
	if fam == netlink.FAMILY_V6 {
		bits = 128
	}
	var localDsts []*net.IPNet
	for _, r := range local {
		dst := routeDst(r, bits)
		localDsts = append(localDsts, dst)
		out = append(out, localRoute{dst, routeVal(fam, r)})
	}
	out = append(out, mainEntries(fam, main, localDsts, bits, merged)...)
	if fam == netlink.FAMILY_V6 {
		out = addNetworkAnycast(out, local, main, localDsts)
	}
	return out
}

// routeDst returns r's destination (a default route's 0/0 for none).
func routeDst(r netlink.Route, bits int) *net.IPNet {
	if r.Dst != nil {
		return r.Dst
	}
	return &net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}
}

// routeVal returns the data plane's value for route r: its type and device
// when it is this host's, RTN_UNICAST otherwise, and for IPv6 the facts
// -m addrtype draws from it (RTF_LOCAL for type local; RTF_ANYCAST only
// for the kernel's own anycast routes: one added with type anycast gets
// no such flag).
func routeVal(fam int, r netlink.Route) localVal {
	if !localRouteTypes[r.Type] {
		return localVal{Type: unix.RTN_UNICAST}
	}
	v := localVal{Type: uint8(r.Type), Ifindex: uint32(r.LinkIndex)}
	if fam == netlink.FAMILY_V6 {
		switch {
		case r.Type == unix.RTN_LOCAL:
			v.AT = at6Local
		case r.Type == unix.RTN_ANYCAST && r.Protocol == unix.RTPROT_KERNEL:
			v.AT = at6Anycast
		}
	}
	return v
}

// mainEntries returns the entries main's routes add (hostEntries): its
// routes of this host's types and the routes more specific than one of
// those or (merged IPv4 tables) than a local-table route; where the local
// table is looked up first (IPv6, unmerged IPv4), none that a local-table
// route covers.
func mainEntries(fam int, main []netlink.Route, localDsts []*net.IPNet, bits int, merged bool) []localRoute {
	var out []localRoute
	localFirst := fam == netlink.FAMILY_V6 || !merged
	var covers []*net.IPNet
	if !localFirst {
		covers = append(covers, localDsts...)
	}
	shadowed := func(dst *net.IPNet) bool {
		for _, l := range localDsts {
			if samePrefix(l, dst) || (localFirst && within(dst, l)) {
				return true
			}
		}
		return false
	}
	for _, r := range main {
		dst := routeDst(r, bits)
		if localRouteTypes[r.Type] && !shadowed(dst) {
			v := routeVal(fam, r)
			if fam == netlink.FAMILY_V4 && !merged {
				v.AT = at4Unicast
			}
			out = append(out, localRoute{dst, v})
			covers = append(covers, dst)
		}
	}
	for _, r := range main {
		dst := routeDst(r, bits)
		if localRouteTypes[r.Type] || shadowed(dst) {
			continue
		}
		for _, c := range covers {
			if within(dst, c) && !samePrefix(dst, c) {
				out = append(out, localRoute{dst, routeVal(fam, r)})
				break
			}
		}
	}
	return out
}

// addNetworkAnycast adds to the IPv6 entries a /128 entry, ANYCAST to
// -m addrtype, for the network address of each prefix the kernel reaches
// without a gateway (ipv6_anycast_destination: prefix shorter than /127,
// neither RTF_GATEWAY nor RTF_NONEXTHOP), when the route the kernel finds
// for that address (the local table's, else main's) is that prefix's.
// The entry keeps the type and device of the entry covering it.
func addNetworkAnycast(entries []localRoute, local, main []netlink.Route, localDsts []*net.IPNet) []localRoute {
	for _, table := range [][]netlink.Route{local, main} {
		for _, r := range table {
			if !connectedPrefix(r) {
				continue
			}
			a := routeDst(r, 128).IP.To16()
			found, ok := lookupRoute(local, a)
			if !ok {
				found, ok = lookupRoute(main, a)
			}
			if !ok || !connectedPrefix(found) || !routeDst(found, 128).IP.Equal(a) {
				continue
			}
			host := &net.IPNet{IP: a, Mask: net.CIDRMask(128, 128)}
			i, v := longestEntry(entries, a)
			if i >= 0 && samePrefix(entries[i].dst, host) {
				entries[i].val.AT |= at6Anycast
				continue
			}
			v.AT |= at6Anycast
			entries = append(entries, localRoute{host, v})
		}
	}
	return entries
}

// connectedPrefix reports whether r is a prefix route shorter than /127
// that reaches its addresses without a gateway and is no reject route.
func connectedPrefix(r netlink.Route) bool {
	if r.Gw != nil || r.Via != nil {
		return false
	}
	for _, nh := range r.MultiPath {
		if nh.Gw != nil || nh.Via != nil {
			return false
		}
	}
	switch r.Type {
	case unix.RTN_UNREACHABLE, unix.RTN_BLACKHOLE, unix.RTN_PROHIBIT, unix.RTN_THROW:
		return false
	}
	ones, _ := routeDst(r, 128).Mask.Size()
	return ones < 127
}

// lookupRoute returns the route of table with the longest prefix covering
// a (the lowest metric among equals).
func lookupRoute(table []netlink.Route, a net.IP) (netlink.Route, bool) {
	best, bestLen, ok := netlink.Route{}, -1, false
	for _, r := range table {
		dst := routeDst(r, 128)
		ones, _ := dst.Mask.Size()
		if !dst.Contains(a) || ones < bestLen || (ones == bestLen && r.Priority >= best.Priority) {
			continue
		}
		best, bestLen, ok = r, ones, true
	}
	return best, ok
}

// longestEntry returns the index and value of the entry with the longest
// prefix covering a (-1 and RTN_UNICAST for none), as the LPM map finds it.
func longestEntry(entries []localRoute, a net.IP) (int, localVal) {
	idx, bestLen := -1, -1
	for i, e := range entries {
		ones, _ := e.dst.Mask.Size()
		if e.dst.Contains(a) && ones > bestLen {
			idx, bestLen = i, ones
		}
	}
	if idx < 0 {
		return -1, localVal{Type: unix.RTN_UNICAST}
	}
	return idx, entries[idx].val
}

// within reports whether prefix a lies inside prefix b (equal included).
func within(a, b *net.IPNet) bool {
	oa, _ := a.Mask.Size()
	ob, _ := b.Mask.Size()
	return oa >= ob && b.Contains(a.IP)
}

// samePrefix reports whether a and b are the same prefix.
func samePrefix(a, b *net.IPNet) bool {
	oa, _ := a.Mask.Size()
	ob, _ := b.Mask.Size()
	return oa == ob && bytes.Equal(a.IP.Mask(a.Mask).To16(), b.IP.Mask(b.Mask).To16())
}
