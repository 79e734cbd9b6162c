package dataplane

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// addr6 is an IPv6 address of device idx for the table tests.
func addr6(t *testing.T, cidr string, idx, flags int) netlink.Addr {
	t.Helper()
	ip, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	n.IP = ip.To16()
	return netlink.Addr{IPNet: n, LinkIndex: idx, Flags: flags}
}

// TestSaddr6Table checks the table's entries: candidates only, each
// rule's facts, and the bound.
func TestSaddr6Table(t *testing.T) {
	addrs := []netlink.Addr{
		addr6(t, "fd00:1::1/64", 2, 0),
		addr6(t, "fe80::1/64", 2, 0),
		addr6(t, "2001:db8::1/64", 3, unix.IFA_F_DEPRECATED),
		addr6(t, "2001:10::1/28", 3, unix.IFA_F_TEMPORARY),
		addr6(t, "2002::1/16", 3, unix.IFA_F_TENTATIVE), // not a candidate
		addr6(t, "2003::1/64", 3, unix.IFA_F_TENTATIVE|unix.IFA_F_OPTIMISTIC),
		addr6(t, "::1/128", 1, 0),
	}
	tab := saddr6Table(addrs, map[int]sa6DevFacts{3: {oifOnly: true}})
	if tab.N != 6 || tab.Over != 0 {
		t.Fatalf("n %d over %d, want 6, 0", tab.N, tab.Over)
	}
	want := []struct {
		idx                      uint32
		plen, scope, label, bits uint8
	}{
		{2, 64, sa6ScopeGlobal, 5, sa6Preferred | sa6Public},
		{2, 64, sa6ScopeLink, 1, sa6Preferred | sa6Public},
		{3, 64, sa6ScopeGlobal, 1, sa6Public | sa6OIFOnly},
		{3, 28, sa6ScopeGlobal, 7, sa6Preferred | sa6Orchid | sa6OIFOnly},
		{3, 64, sa6ScopeGlobal, 1, sa6Public | sa6Optimistic | sa6OIFOnly},
		{1, 128, sa6ScopeLink, 0, sa6Preferred | sa6Public},
	}
	for i, w := range want {
		e := tab.E[i]
		if e.Ifindex != w.idx || e.Plen != w.plen || e.Scope != w.scope || e.Label != w.label || e.Bits != w.bits {
			t.Errorf("entry %d (%v): %+v, want %+v", i, net.IP(e.Addr[:]), e, w)
		}
	}
	// Past the bound: marked, the first saddr6Max kept.
	var many []netlink.Addr
	for i := 0; i <= saddr6Max; i++ {
		many = append(many, addr6(t, "fd00::1/64", 2, 0))
	}
	if tab := saddr6Table(many, nil); tab.N != saddr6Max || tab.Over != 1 {
		t.Errorf("%d addresses: n %d over %d, want %d, 1", len(many), tab.N, tab.Over, saddr6Max)
	}
}
