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
