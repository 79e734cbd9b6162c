package dataplane

import (
	"net"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// route builds a route of type typ to cidr (gw: its gateway, "" for none).
func route(typ int, cidr, gw string) netlink.Route {
	_, dst, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	r := netlink.Route{Type: typ, Dst: dst, LinkIndex: 2, Protocol: unix.RTPROT_BOOT}
	if gw != "" {
		r.Gw = net.ParseIP(gw)
	}
	return r
}

// lookupEntries returns the value the LPM map finds for address a.
func lookupEntries(entries []localRoute, a string) localVal {
	_, v := longestEntry(entries, netip.MustParseAddr(a))
	return v
}

// compact returns routes as hostEntries takes them.
func compact(routes []netlink.Route, bits int) []tableRoute {
	var out []tableRoute
	for _, r := range routes {
		out = append(out, compactRoute(r, bits))
	}
	return out
}

func TestHostEntries(t *testing.T) {
	const uc, lo, ac = unix.RTN_UNICAST, unix.RTN_LOCAL, unix.RTN_ANYCAST
	kernelAnycast := route(ac, "2001:db8:a::/128", "")
	kernelAnycast.Protocol = unix.RTPROT_KERNEL
	local4 := []netlink.Route{route(lo, "10.9.6.0/24", ""), route(lo, "10.9.5.1/32", "")}
	main4 := []netlink.Route{
		route(uc, "10.9.5.0/24", ""), route(uc, "10.9.6.128/25", "10.9.5.2"),
		route(lo, "10.9.7.0/24", ""), route(uc, "10.9.7.64/26", "10.9.5.2"),
		route(uc, "10.9.6.0/24", "10.9.5.2"), route(uc, "0.0.0.0/0", "10.9.5.2"),
	}
	local6 := []netlink.Route{
		route(lo, "2001:db8:1::1/128", ""), route(lo, "2001:db8:4::/64", ""),
		route(ac, "2001:db8:3::/64", ""), kernelAnycast, route(unix.RTN_MULTICAST, "ff00::/8", ""),
	}
	main6 := []netlink.Route{
		route(uc, "2001:db8:1::/64", ""), route(uc, "2001:db8:2::/64", ""), route(uc, "2001:db8:3::/64", ""),
		route(uc, "2001:db8:5::/64", "2001:db8:1::9"), route(lo, "2001:db8:8::/48", ""),
		route(uc, "2001:db8:8:1::/64", "2001:db8:1::9"), route(uc, "2001:db8:4:0:8000::/65", "2001:db8:1::9"),
		route(uc, "::/0", "2001:db8:1::9"),
	}
	cases := []struct {
		name        string
		fam         int
		local, main []netlink.Route
		merged      bool
		addr        string
		want        localVal
	}{
		{"v4 merged: main's more specific route", 4, local4, main4, true, "10.9.6.200", localVal{Type: uc}},
		{"v4 merged: the local route elsewhere", 4, local4, main4, true, "10.9.6.10", localVal{Type: lo, Ifindex: 2}},
		{"v4 merged: main's equal prefix loses", 4, local4, main4, true, "10.9.6.1", localVal{Type: lo, Ifindex: 2}},
		{"v4 merged: a local route of main", 4, local4, main4, true, "10.9.7.5", localVal{Type: lo, Ifindex: 2}},
		{"v4 merged: inside main's local route", 4, local4, main4, true, "10.9.7.70", localVal{Type: uc}},
		{"v4 unmerged: the local table only", 4, local4, main4, false, "10.9.6.200", localVal{Type: lo, Ifindex: 2}},
		{"v4 unmerged: main's local route, UNICAST to addrtype", 4, local4, main4, false, "10.9.7.5", localVal{Type: lo, AT: at4Unicast, Ifindex: 2}},
		{"v4 unmerged: inside main's local route", 4, local4, main4, false, "10.9.7.70", localVal{Type: uc}},
		{"v6 connected network address", 6, local6, main6, false, "2001:db8:2::", localVal{Type: uc, AT: at6Anycast}},
		{"v6 connected, another address", 6, local6, main6, false, "2001:db8:2::1", localVal{Type: uc}},
		{"v6 network address of a gateway route", 6, local6, main6, false, "2001:db8:5::", localVal{Type: uc}},
		{"v6 local prefix's network address", 6, local6, main6, false, "2001:db8:4::", localVal{Type: lo, AT: at6Local | at6Anycast, Ifindex: 2}},
		{"v6 local prefix", 6, local6, main6, false, "2001:db8:4::7", localVal{Type: lo, AT: at6Local, Ifindex: 2}},
		{"v6 main's route inside a local one unseen", 6, local6, main6, false, "2001:db8:4:0:8000::1", localVal{Type: lo, AT: at6Local, Ifindex: 2}},
		{"v6 anycast route added by hand", 6, local6, main6, false, "2001:db8:3::7", localVal{Type: ac, Ifindex: 2}},
		{"v6 its network address", 6, local6, main6, false, "2001:db8:3::", localVal{Type: ac, AT: at6Anycast, Ifindex: 2}},
		{"v6 the kernel's anycast route", 6, local6, main6, false, "2001:db8:a::", localVal{Type: ac, AT: at6Anycast, Ifindex: 2}},
		{"v6 main's local route", 6, local6, main6, false, "2001:db8:8::1", localVal{Type: lo, AT: at6Local, Ifindex: 2}},
		{"v6 inside main's local route", 6, local6, main6, false, "2001:db8:8:1::1", localVal{Type: uc}},
		{"v6 ff00:: of the multicast route", 6, local6, main6, false, "ff00::", localVal{Type: unix.RTN_MULTICAST, AT: at6Anycast, Ifindex: 2}},
		{"v6 a group", 6, local6, main6, false, "ff02::1", localVal{Type: unix.RTN_MULTICAST, Ifindex: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fam, bits := netlink.FAMILY_V4, 32
			if c.fam == 6 {
				fam, bits = netlink.FAMILY_V6, 128
			}
			got := lookupEntries(hostEntries(fam, compact(c.local, bits), compact(c.main, bits), c.merged), c.addr)
			if got != c.want {
				t.Errorf("%s: got %+v, want %+v", c.addr, got, c.want)
			}
		})
	}
}
