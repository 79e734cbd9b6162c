package dataplane

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestNatIfAddr6 checks the IPv6 addresses REDIRECT takes from an
// interface's list in the kernel's order (nf_nat_redirect_ipv6): the
// first usable one (not tentative unless optimistic, not IPv4-mapped) and
// the first usable link-local one.
func TestNatIfAddr6(t *testing.T) {
	addr := func(s string, flags int) netlink.Addr {
		return netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(s), Mask: net.CIDRMask(64, 128)}, Flags: flags}
	}
	for _, tc := range []struct {
		name  string
		addrs []netlink.Addr
		want  natIfAddr
	}{
		{"none", nil, natIfAddr{}},
		{"the newest global first, then link-local",
			[]netlink.Addr{addr("fd00:4::1", unix.IFA_F_PERMANENT), addr("fd00:1::1", unix.IFA_F_PERMANENT),
				addr("fe80::1", unix.IFA_F_PERMANENT)},
			natIfAddr{Flags6: natIfa6Any | natIfa6LL, AnyHi: 0xfd00_0004_0000_0000, AnyLo: 1, LLHi: 0xfe80 << 48, LLLo: 1}},
		{"a tentative address skipped, an optimistic one taken",
			[]netlink.Addr{addr("fd00:4::1", unix.IFA_F_TENTATIVE), addr("fd00:1::1", unix.IFA_F_TENTATIVE|unix.IFA_F_OPTIMISTIC),
				addr("fe80::1", unix.IFA_F_TENTATIVE)},
			natIfAddr{Flags6: natIfa6Any, AnyHi: 0xfd00_0001_0000_0000, AnyLo: 1}},
		{"only link-local",
			[]netlink.Addr{addr("fe80::2", 0)},
			natIfAddr{Flags6: natIfa6Any | natIfa6LL, AnyHi: 0xfe80 << 48, AnyLo: 2, LLHi: 0xfe80 << 48, LLLo: 2}},
		{"IPv4-mapped skipped",
			[]netlink.Addr{addr("::ffff:10.0.0.1", 0), addr("fd00::9", 0)},
			natIfAddr{Flags6: natIfa6Any, AnyHi: 0xfd00 << 48, AnyLo: 9}},
	} {
		var got natIfAddr
		natIfAddr6(&got, tc.addrs)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestNatIfAddrs checks the grouping of one dump of both families by
// interface: the first IPv4 address of each (4 bytes in the dump), the
// IPv6 ones in their order, an IPv4-mapped IPv6 address (16 bytes) never
// taken for IPv4, interfaces without a usable address left out.
func TestNatIfAddrs(t *testing.T) {
	v4 := func(idx int, s string) netlink.Addr {
		return netlink.Addr{LinkIndex: idx, IPNet: &net.IPNet{IP: net.ParseIP(s).To4(), Mask: net.CIDRMask(24, 32)}}
	}
	v6 := func(idx int, s string, flags int) netlink.Addr {
		return netlink.Addr{LinkIndex: idx, Flags: flags, IPNet: &net.IPNet{IP: net.ParseIP(s), Mask: net.CIDRMask(64, 128)}}
	}
	got := natIfAddrs([]netlink.Addr{
		v4(2, "10.0.0.1"), v4(2, "10.0.0.2"), v4(3, "192.0.2.1"),
		v6(2, "fd00::1", 0), v6(2, "fe80::1", 0),
		v6(4, "::ffff:10.9.9.9", 0),
		v6(5, "fd00::5", unix.IFA_F_TENTATIVE),
		v6(3, "fd00::3", 0),
	})
	want := map[uint32]natIfAddr{
		2: {Addr4: 0x0a000001, Flags6: natIfa6Any | natIfa6LL, AnyHi: 0xfd00 << 48, AnyLo: 1, LLHi: 0xfe80 << 48, LLLo: 1},
		3: {Addr4: 0xc0000201, Flags6: natIfa6Any, AnyHi: 0xfd00 << 48, AnyLo: 3},
	}
	if len(got) != len(want) {
		t.Fatalf("interfaces %v, want %v", got, want)
	}
	for idx, w := range want {
		if got[idx] == nil || *got[idx] != w {
			t.Errorf("interface %d: %+v, want %+v", idx, got[idx], w)
		}
	}
}
