package dataplane

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
)

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// key6 is the LPM key of prefix s (IPv4 ones at their IPv4-mapped prefix).
func key6(t *testing.T, s string) lpmKey6 {
	t.Helper()
	n := mustCIDR(t, s)
	ones, _ := n.Mask.Size()
	k := lpmKey6{Prefixlen: uint32(ones)}
	if n.IP.To4() != nil {
		k.Prefixlen += ipv4MappedPlen
	}
	copy(k.Addr[:], n.IP.To16())
	return k
}

func TestRouteEntries4(t *testing.T) {
	gw := net.ParseIP("10.0.0.1")
	routes := []netlink.Route{
		{Dst: nil, Gw: gw, LinkIndex: 2},                                        // default: no mtu, around nothing
		{Dst: mustCIDR(t, "10.1.0.0/16"), LinkIndex: 3, MTU: 1300},              // with an mtu
		{Dst: mustCIDR(t, "10.1.2.0/24"), LinkIndex: 4},                         // inside it: shadows it
		{Dst: mustCIDR(t, "10.1.3.0/24"), LinkIndex: 3, MTU: 1200, Priority: 5}, // same prefix twice:
		{Dst: mustCIDR(t, "10.1.3.0/24"), LinkIndex: 5, MTU: 1100, Priority: 9}, // the lower metric wins
		{Dst: mustCIDR(t, "10.2.0.0/16"), LinkIndex: 3},                         // outside any: left out
		{Dst: mustCIDR(t, "10.3.0.0/16"), MTU: 70000, MultiPath: []*netlink.NexthopInfo{{LinkIndex: 3}, {LinkIndex: 4}}},
	}
	got := routeEntries4(compact(routes, 32), 7)
	want := map[lpmKey6]routeVal{
		key6(t, "10.1.0.0/16"): {Plen: 7, MTU: 1300, Ifindex: 3, Fam: 4},
		key6(t, "10.1.2.0/24"): {Plen: 7, MTU: 0, Ifindex: 4, Fam: 4},
		key6(t, "10.1.3.0/24"): {Plen: 7, MTU: 1200, Ifindex: 3, Fam: 4},
		key6(t, "10.3.0.0/16"): {Plen: 7, MTU: ipMaxMTU, Ifindex: 0, Fam: 4},
	}
	compareRouteEntries(t, got, want)
	if n := len(routeEntries4(compact(routes[:1], 32), 7)); n != 0 {
		t.Errorf("no route with an mtu: %d entries, want none", n)
	}
}

func TestRouteEntries6(t *testing.T) {
	routes := []netlink.Route{
		{Dst: nil, Gw: net.ParseIP("fd00::1"), LinkIndex: 2},
		{Dst: mustCIDR(t, "fd01::/64"), LinkIndex: 3, MTU: 1300},
		{Dst: mustCIDR(t, "fd02::/64"), Gw: net.ParseIP("fd00::2"), LinkIndex: 2, MTU: 100000},
	}
	got := routeEntries6(compact(routes, 128))
	want := map[lpmKey6]routeVal{
		key6(t, "::/0"):      {Plen: 0, Ifindex: 2, Fam: 6},
		key6(t, "fd01::/64"): {Plen: ipv6HostPlen, MTU: 1300, Ifindex: 3, Fam: 6}, // on-link: a host clone
		key6(t, "fd02::/64"): {Plen: 64, MTU: ip6MaxMTU, Ifindex: 2, Fam: 6},
	}
	compareRouteEntries(t, got, want)
	if p := mappedPlen(got); p != 0 {
		t.Errorf("IPv4-mapped addresses' prefix length %d, want the default route's 0", p)
	}
	if p := mappedPlen(routeEntries6(compact(routes[1:], 128))); p != ipv6HostPlen {
		t.Errorf("IPv4-mapped addresses without a route: prefix length %d, want %d", p, ipv6HostPlen)
	}
}

// compareRouteEntries reports every entry of got that differs from want,
// and a different count.
func compareRouteEntries(t *testing.T, got, want map[lpmKey6]routeVal) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d entries, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s: %+v (present %v), want %+v", lpmKey6Prefix(k), g, ok, w)
		}
	}
}
