package dataplane

// The main routing table's routes as the data plane needs them beyond
// bpf_fib_lookup (bpf/route_main.h): each IPv6 route's prefix length for
// ICMPv6 rate limits, and the mtu metric of the routes that carry one for
// TCPMSS --clamp-mss-to-pmtu (bpf_fib_lookup reports a route's MTU only
// when it is locked). IPv4 routes sit at their IPv4-mapped IPv6 prefixes.

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routeVal mirrors struct xfw_route_val.
type routeVal struct {
	Plen    uint32
	MTU     uint32
	Ifindex uint32
	Fam     uint32
}

// The kernel's largest route MTUs (IP_MAX_MTU, IP6_MAX_MTU): dst_mtu
// gives no more whatever the metric says.
const (
	ipMaxMTU  = 0xffff
	ip6MaxMTU = 0xffff + 40
)

// ipv4MappedPlen is the prefix length of ::ffff:0:0/96, under which the
// IPv4 routes are keyed.
const ipv4MappedPlen = 96

// fillRoutes records the main table's routes in m (bpf/route_main.h):
// every IPv6 route, and the IPv4 routes with an mtu metric with the routes
// inside their prefixes (an address there takes the longest of them, as
// the kernel's lookup does). When the IPv4 ones do not fit beside the
// IPv6 ones, none is recorded: clamps then take the device's MTU.
func fillRoutes(m *ebpf.Map) error {
	routes6, err := listRoutes(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list IPv6 routes: %w", err)
	}
	routes4, err := listRoutes(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list IPv4 routes: %w", err)
	}
	entries := routeEntries6(routes6)
	entries4 := routeEntries4(routes4, mappedPlen(entries))
	if len(entries)+len(entries4) <= int(m.MaxEntries()) {
		for k, v := range entries4 {
			entries[k] = v
		}
	}
	for k, v := range entries {
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("record route %s: %w", lpmKey6Prefix(k), err)
		}
	}
	if _, err := pruneMapFunc(m, func(k lpmKey6) bool { _, ok := entries[k]; return ok }); err != nil {
		return fmt.Errorf("forget removed routes: %w", err)
	}
	return nil
}

// routeDst is r's destination (the default route's is nil) in family fam.
func routeDst(r netlink.Route, fam int) *net.IPNet {
	if r.Dst != nil {
		return r.Dst
	}
	if fam == 4 {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

// routeDev is r's device, 0 for a multipath route (its metrics are every
// next hop's).
func routeDev(r netlink.Route) uint32 {
	if len(r.MultiPath) > 0 {
		return 0
	}
	return uint32(r.LinkIndex)
}

// routeMTU is r's mtu metric as dst_mtu caps it (0: none).
func routeMTU(r netlink.Route, max int) uint32 {
	if r.MTU <= 0 {
		return 0
	}
	return uint32(min(r.MTU, max))
}

// preferred keeps, of the routes to the same prefix, the one the kernel
// takes: the lowest priority (metric); r is better than the kept one.
func preferred(kept map[lpmKey6]netlink.Route, k lpmKey6, r netlink.Route) bool {
	old, ok := kept[k]
	return !ok || r.Priority < old.Priority
}

// routeEntries6 gives the IPv6 routes' entries. A destination on a route
// without a gateway (on-link) counts as a /128 for the rate limits: the
// kernel's route to it is a host clone (found against the kernel:
// ratelimit_test.go).
func routeEntries6(routes []netlink.Route) map[lpmKey6]routeVal {
	kept := map[lpmKey6]netlink.Route{}
	for _, r := range routes {
		dst := routeDst(r, 6)
		ones, _ := dst.Mask.Size()
		k := lpmKey6{Prefixlen: uint32(ones)}
		copy(k.Addr[:], dst.IP.To16())
		if preferred(kept, k, r) {
			kept[k] = r
		}
	}
	out := make(map[lpmKey6]routeVal, len(kept))
	for k, r := range kept {
		plen := k.Prefixlen
		if r.Gw == nil && len(r.MultiPath) == 0 {
			plen = ipv6HostPlen
		}
		out[k] = routeVal{Plen: plen, MTU: routeMTU(r, ip6MaxMTU), Ifindex: routeDev(r), Fam: 6}
	}
	return out
}

// mappedPlen is the rate limits' prefix length for the IPv4-mapped
// addresses by the IPv6 entries: the longest route over ::ffff:0:0/96's,
// else a host's.
func mappedPlen(entries map[lpmKey6]routeVal) uint32 {
	mapped := net.IPv4zero.To16()
	plen, best := uint32(ipv6HostPlen), -1
	for k, v := range entries {
		// Byte by byte: net.IPNet takes ::ffff:a.b.c.d for an IPv4 address.
		if k.Prefixlen <= ipv4MappedPlen && int(k.Prefixlen) > best && prefixHolds(k, mapped) {
			plen, best = v.Plen, int(k.Prefixlen)
		}
	}
	return plen
}

// prefixHolds tells whether the 16-byte address a lies within k's prefix.
func prefixHolds(k lpmKey6, a net.IP) bool {
	m := net.CIDRMask(int(k.Prefixlen), 128)
	for i := range m {
		if k.Addr[i]&m[i] != a[i]&m[i] {
			return false
		}
	}
	return true
}

// routeEntries4 gives the entries of the IPv4 routes with an mtu metric
// and of the routes inside their prefixes, at their IPv4-mapped prefixes
// with rate limit prefix length plen.
func routeEntries4(routes []netlink.Route, plen uint32) map[lpmKey6]routeVal {
	var withMTU []*net.IPNet
	for _, r := range routes {
		if r.MTU > 0 {
			withMTU = append(withMTU, routeDst(r, 4))
		}
	}
	kept := map[lpmKey6]netlink.Route{}
	for _, r := range routes {
		dst := routeDst(r, 4)
		if !insideAny(dst, withMTU) {
			continue
		}
		ones, _ := dst.Mask.Size()
		k := lpmKey6{Prefixlen: uint32(ipv4MappedPlen + ones)}
		copy(k.Addr[:], dst.IP.To16()) // ::ffff:a.b.c.d
		if preferred(kept, k, r) {
			kept[k] = r
		}
	}
	out := make(map[lpmKey6]routeVal, len(kept))
	for k, r := range kept {
		out[k] = routeVal{Plen: plen, MTU: routeMTU(r, ipMaxMTU), Ifindex: routeDev(r), Fam: 4}
	}
	return out
}

// insideAny tells whether prefix n lies within one of prefixes (equal
// counts).
func insideAny(n *net.IPNet, prefixes []*net.IPNet) bool {
	ones, _ := n.Mask.Size()
	for _, p := range prefixes {
		pones, _ := p.Mask.Size()
		if pones <= ones && p.Contains(n.IP) {
			return true
		}
	}
	return false
}

// lpmKey6Prefix is k as a prefix, for messages.
func lpmKey6Prefix(k lpmKey6) string {
	return fmt.Sprintf("%s/%d", net.IP(k.Addr[:]), k.Prefixlen)
}
