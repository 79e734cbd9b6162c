package dataplane

import (
	"fmt"
	"net"
	"net/netip"

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
func hostEntries(fam int, local, main []tableRoute, merged bool) []localRoute {
	var out []localRoute
	if fam == netlink.FAMILY_V4 {
		out = append(out, localRoute{prefixNet(netip.MustParsePrefix("224.0.0.0/4")), localVal{Type: unix.RTN_MULTICAST}},
			localRoute{prefixNet(netip.MustParsePrefix("255.255.255.255/32")), localVal{Type: unix.RTN_BROADCAST}})
	}
	for _, r := range local {
		out = append(out, localRoute{prefixNet(r.dst), r.val(fam)})
	}
	out = append(out, mainEntries(fam, main, local, merged)...)
	if fam == netlink.FAMILY_V6 {
		out = addNetworkAnycast(out, local, main)
	}
	return out
}

// tableRoute is what the copies of the routing tables need of a route
// (hostEntries for the local table, routeEntries4 and routeEntries6 for
// the main table's: routes_main.go): a main table holds many, kept compact
// (no pointers) between the dump and the copies.
type tableRoute struct {
	dst       netip.Prefix // masked; a default route's 0/0
	typ       int          // RTN_*
	ifindex   int          // the device (0 for a multipath route)
	kernel    bool         // added by the kernel (RTPROT_KERNEL)
	connected bool         // reaches its addresses without a gateway, no reject route
	gateway   bool         // has a gateway (RTA_GATEWAY)
	multipath bool         // has next hops of its own (RTA_MULTIPATH)
	priority  int
	mtu       int  // the mtu metric (0: none)
	prefsrc   bool // has a preferred source (RTA_PREFSRC)
}

// compactRoute returns r as a tableRoute of a family of bits-bit addresses.
func compactRoute(r netlink.Route, bits int) tableRoute {
	dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if bits == 128 {
		dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	if r.Dst != nil {
		ones, _ := r.Dst.Mask.Size()
		ip := r.Dst.IP
		if bits == 32 {
			ip = ip.To4()
		} else {
			ip = ip.To16()
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			dst = netip.PrefixFrom(a, ones).Masked()
		}
	}
	return tableRoute{dst: dst, typ: r.Type, ifindex: r.LinkIndex, kernel: r.Protocol == unix.RTPROT_KERNEL,
		connected: reachedDirectly(r), gateway: r.Gw != nil, multipath: len(r.MultiPath) > 0,
		priority: r.Priority, mtu: r.MTU, prefsrc: r.Src != nil && !r.Src.IsUnspecified()}
}

// familyRoutes is one family's local and main routing tables, from one
// dump: the local table copy (localRoutes) and the main table's
// (fillRoutes) are both made from it.
type familyRoutes struct {
	local, main []tableRoute
	// localRaw is the local table as dumped (ipv4TablesMerged asks the
	// kernel about its addresses); it holds a few routes per address.
	localRaw []netlink.Route
}

// netRoutes is the namespace's local and main routing tables of both
// families (dumpNetRoutes).
type netRoutes struct {
	v4, v6 familyRoutes
}

// of returns family fam's tables.
func (n *netRoutes) of(fam int) *familyRoutes {
	if fam == netlink.FAMILY_V6 {
		return &n.v6
	}
	return &n.v4
}

// dumpNetRoutes lists the local and main routing tables of both families,
// one netlink dump per family.
func dumpNetRoutes() (netRoutes, error) {
	var n netRoutes
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		r, err := dumpRoutes(fam)
		if err != nil {
			return netRoutes{}, err
		}
		*n.of(fam) = r
	}
	return n, nil
}

// dumpRoutes lists family fam's local and main routing tables in one dump
// of every table (the kernel sends them all whatever the table asked for:
// the request is not strict), kept compact: a large main table's parsing
// and keeping are the cost.
func dumpRoutes(fam int) (familyRoutes, error) {
	bits, version := 32, 4
	if fam == netlink.FAMILY_V6 {
		bits, version = 128, 6
	}
	var out familyRoutes
	err := consistentDumpErr("the routing table", func() error {
		out = familyRoutes{}
		return netlink.RouteListFilteredIter(fam, &netlink.Route{}, netlink.RT_FILTER_TABLE, func(r netlink.Route) bool {
			switch r.Table {
			case unix.RT_TABLE_LOCAL:
				out.local = append(out.local, compactRoute(r, bits))
				out.localRaw = append(out.localRaw, r)
			case unix.RT_TABLE_MAIN:
				out.main = append(out.main, compactRoute(r, bits))
			}
			return true
		})
	})
	if err != nil {
		return familyRoutes{}, fmt.Errorf("list IPv%d routes: %w", version, err)
	}
	return out, nil
}

// reachedDirectly reports whether r reaches its addresses without a
// gateway (neither RTF_GATEWAY nor, as reject routes have, RTF_NONEXTHOP).
func reachedDirectly(r netlink.Route) bool {
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
	return true
}

// prefixNet returns p as a *net.IPNet.
func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// val returns the data plane's value for route r: its type and device
// when it is this host's, RTN_UNICAST otherwise, and for IPv6 the facts
// -m addrtype draws from it (RTF_LOCAL for type local; RTF_ANYCAST only
// for the kernel's own anycast routes: one added with type anycast gets
// no such flag).
func (r tableRoute) val(fam int) localVal {
	if !localRouteTypes[r.typ] {
		return localVal{Type: unix.RTN_UNICAST}
	}
	v := localVal{Type: uint8(r.typ), Ifindex: uint32(r.ifindex)}
	if fam == netlink.FAMILY_V6 {
		switch {
		case r.typ == unix.RTN_LOCAL:
			v.AT = at6Local
		case r.typ == unix.RTN_ANYCAST && r.kernel:
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
func mainEntries(fam int, main, local []tableRoute, merged bool) []localRoute {
	var out []localRoute
	localFirst := fam == netlink.FAMILY_V6 || !merged
	var covers []netip.Prefix
	if !localFirst {
		for _, l := range local {
			covers = append(covers, l.dst)
		}
	}
	shadowed := func(p netip.Prefix) bool {
		for _, l := range local {
			if l.dst == p || (localFirst && l.dst.Bits() <= p.Bits() && l.dst.Contains(p.Addr())) {
				return true
			}
		}
		return false
	}
	for _, r := range main {
		if localRouteTypes[r.typ] && !shadowed(r.dst) {
			v := r.val(fam)
			if fam == netlink.FAMILY_V4 && !merged {
				v.AT = at4Unicast
			}
			out = append(out, localRoute{prefixNet(r.dst), v})
			covers = append(covers, r.dst)
		}
	}
	// The main table may be large: its other routes are kept only when
	// inside one of the few covering prefixes.
	for _, r := range main {
		if localRouteTypes[r.typ] {
			continue
		}
		for _, c := range covers {
			if c.Bits() < r.dst.Bits() && c.Contains(r.dst.Addr()) && !shadowed(r.dst) {
				out = append(out, localRoute{prefixNet(r.dst), r.val(fam)})
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
func addNetworkAnycast(entries []localRoute, local, main []tableRoute) []localRoute {
	for _, table := range [][]tableRoute{local, main} {
		for _, r := range table {
			if !r.connected || r.dst.Bits() >= 127 {
				continue
			}
			a := r.dst.Addr()
			found, ok := lookupRoute(local, a)
			if !ok {
				found, ok = lookupRoute(main, a)
			}
			if !ok || !found.connected || found.dst.Bits() >= 127 || found.dst.Addr() != a {
				continue
			}
			host := netip.PrefixFrom(a, 128)
			i, v := longestEntry(entries, a)
			if i >= 0 && toPrefix(entries[i].dst) == host {
				entries[i].val.AT |= at6Anycast
				continue
			}
			v.AT |= at6Anycast
			entries = append(entries, localRoute{prefixNet(host), v})
		}
	}
	return entries
}

// lookupRoute returns the route of table with the longest prefix covering
// a (the lowest metric among equals).
func lookupRoute(table []tableRoute, a netip.Addr) (tableRoute, bool) {
	best, ok := tableRoute{}, false
	for _, r := range table {
		if !r.dst.Contains(a) || (ok && (r.dst.Bits() < best.dst.Bits() ||
			(r.dst.Bits() == best.dst.Bits() && r.priority >= best.priority))) {
			continue
		}
		best, ok = r, true
	}
	return best, ok
}

// longestEntry returns the index and value of the entry with the longest
// prefix covering a (-1 and RTN_UNICAST for none), as the LPM map finds it.
func longestEntry(entries []localRoute, a netip.Addr) (int, localVal) {
	idx, bestLen := -1, -1
	for i, e := range entries {
		p := toPrefix(e.dst)
		if p.Contains(a) && p.Bits() > bestLen {
			idx, bestLen = i, p.Bits()
		}
	}
	if idx < 0 {
		return -1, localVal{Type: unix.RTN_UNICAST}
	}
	return idx, entries[idx].val
}

// toPrefix returns n as a masked netip.Prefix (IPv4 as 4 bytes).
func toPrefix(n *net.IPNet) netip.Prefix {
	ones, bits := n.Mask.Size()
	ip := n.IP.To16()
	if bits == 32 {
		ip = n.IP.To4()
	}
	a, _ := netip.AddrFromSlice(ip)
	return netip.PrefixFrom(a, ones).Masked()
}
