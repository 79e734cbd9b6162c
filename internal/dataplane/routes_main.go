package dataplane

// The main routing table's routes as the data plane needs them beyond
// bpf_fib_lookup (bpf/route_main.h): each IPv6 route's prefix length for
// ICMPv6 rate limits, and the mtu metric of the routes that carry one for
// TCPMSS --clamp-mss-to-pmtu (bpf_fib_lookup reports a route's MTU only
// when it is locked). IPv4 routes sit at their IPv4-mapped IPv6 prefixes.

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
)

// routeVal mirrors struct xfw_route_val.
type routeVal struct {
	Plen    uint32
	MTU     uint32
	Ifindex uint32
	Fam     uint32
	Flags   uint32 // routePrefsrc
}

// routePrefsrc is XFW_RT_PREFSRC: the route has a preferred source, which
// an ICMPv6 error's source selection takes (bpf/reject_saddr.h).
const routePrefsrc = 1

// The kernel's largest route MTUs (IP_MAX_MTU, IP6_MAX_MTU): dst_mtu
// gives no more whatever the metric says.
const (
	ipMaxMTU  = 0xffff
	ip6MaxMTU = 0xffff + 40
)

// ipv4MappedPlen is the prefix length of ::ffff:0:0/96, under which the
// IPv4 routes are keyed.
const ipv4MappedPlen = 96

// fillRoutes records the main table's routes, from the dumped tables nr,
// in m (bpf/route_main.h): every IPv6 route, and the IPv4 routes with an
// mtu metric with the routes inside their prefixes (an address there
// takes the longest of them, as the kernel's lookup does). When the IPv4
// ones do not fit beside the IPv6 ones, none is recorded: clamps then
// take the device's MTU.
func fillRoutes(m *ebpf.Map, nr *netRoutes) error {
	entries := routeEntries6(nr.v6.main)
	entries4 := routeEntries4(nr.v4.main, mappedPlen(entries))
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

// routeKey is the LPM key of r's destination: an IPv6 prefix as it is, an
// IPv4 one at its IPv4-mapped prefix (::ffff:a.b.c.d/96+len).
func routeKey(r tableRoute) lpmKey6 {
	k := lpmKey6{Prefixlen: uint32(r.dst.Bits()), Addr: r.dst.Addr().As16()}
	if r.dst.Addr().Is4() {
		k.Prefixlen += ipv4MappedPlen
	}
	return k
}

// routeDev is r's device, 0 for a multipath route (its metrics are every
// next hop's).
func routeDev(r tableRoute) uint32 {
	if r.multipath {
		return 0
	}
	return uint32(r.ifindex)
}

// routeMTU is r's mtu metric as dst_mtu caps it (0: none).
func routeMTU(r tableRoute, max int) uint32 {
	if r.mtu <= 0 {
		return 0
	}
	return uint32(min(r.mtu, max))
}

// preferred keeps, of the routes to the same prefix, the one the kernel
// takes: the lowest priority (metric); r is better than the kept one.
func preferred(kept map[lpmKey6]tableRoute, k lpmKey6, r tableRoute) bool {
	old, ok := kept[k]
	return !ok || r.priority < old.priority
}

// routeEntries6 gives the IPv6 routes' entries. A destination on a route
// without a gateway (on-link) counts as a /128 for the rate limits: the
// kernel's route to it is a host clone (found against the kernel:
// ratelimit_test.go).
func routeEntries6(routes []tableRoute) map[lpmKey6]routeVal {
	kept := map[lpmKey6]tableRoute{}
	for _, r := range routes {
		k := routeKey(r)
		if preferred(kept, k, r) {
			kept[k] = r
		}
	}
	out := make(map[lpmKey6]routeVal, len(kept))
	for k, r := range kept {
		plen := k.Prefixlen
		if !r.gateway && !r.multipath {
			plen = ipv6HostPlen
		}
		v := routeVal{Plen: plen, MTU: routeMTU(r, ip6MaxMTU), Ifindex: routeDev(r), Fam: 6}
		if r.prefsrc {
			v.Flags = routePrefsrc
		}
		out[k] = v
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
func routeEntries4(routes []tableRoute, plen uint32) map[lpmKey6]routeVal {
	var withMTU []netip.Prefix
	for _, r := range routes {
		if r.mtu > 0 {
			withMTU = append(withMTU, r.dst)
		}
	}
	kept := map[lpmKey6]tableRoute{}
	for _, r := range routes {
		if !insideAny(r.dst, withMTU) {
			continue
		}
		k := routeKey(r)
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

// insideAny tells whether prefix p lies within one of prefixes (equal
// counts).
func insideAny(p netip.Prefix, prefixes []netip.Prefix) bool {
	for _, q := range prefixes {
		if q.Bits() <= p.Bits() && q.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// lpmKey6Prefix is k as a prefix, for messages.
func lpmKey6Prefix(k lpmKey6) string {
	return fmt.Sprintf("%s/%d", net.IP(k.Addr[:]), k.Prefixlen)
}
