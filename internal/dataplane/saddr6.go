package dataplane

// The host's IPv6 addresses as the kernel's source address selection
// (ipv6_dev_get_saddr) sees them, for the source of REJECT's ICMPv6
// errors about forwarded packets (bpf/reject_saddr.h): icmp6_send picks
// it on the input device, which bpf_fib_lookup cannot.

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// saddr6Map is the table's map (one entry).
const saddr6Map = "xfw_saddr6"

// saddr6Max is XFW_SADDR6_MAX: the table's bound.
const saddr6Max = 32

// The bits of saddr6Ent.Bits (XFW_SA6_*).
const (
	sa6Preferred  = 1 << iota // neither deprecated nor (unless used) optimistic
	sa6Public                 // rule 7 prefers it
	sa6Orchid                 // 2001:10::/28
	sa6Optimistic             // IFA_F_OPTIMISTIC
	sa6OIFOnly                // its device has use_oif_addrs_only
)

// Source scopes (the kernel's IPV6_ADDR_SCOPE_*).
const (
	sa6ScopeLink   = 0x2
	sa6ScopeSite   = 0x5
	sa6ScopeGlobal = 0xe
)

// saddr6Ent mirrors struct xfw_saddr6_ent.
type saddr6Ent struct {
	Addr    [16]byte
	Ifindex uint32
	Plen    uint8
	Scope   uint8
	Label   uint8
	Bits    uint8
}

// saddr6Tab mirrors struct xfw_saddr6_tab.
type saddr6Tab struct {
	N    uint32
	Over uint32
	E    [saddr6Max]saddr6Ent
}

// sa6Scope is __ipv6_addr_src_scope(__ipv6_addr_type(a)) for a unicast
// address: fe80::/10 link, fec0::/10 site, ::1 link (RFC 6724 3.4), all
// else global (ULAs, IPv4-compatible and -mapped addresses too).
func sa6Scope(a [16]byte) uint8 {
	switch {
	case a[0] == 0xfe && a[1]&0xc0 == 0x80:
		return sa6ScopeLink
	case a[0] == 0xfe && a[1]&0xc0 == 0xc0:
		return sa6ScopeSite
	case net.IP(a[:]).Equal(net.IPv6loopback):
		return sa6ScopeLink
	}
	return sa6ScopeGlobal
}

// sa6Labels is the kernel's default policy table
// (ipv6_addr_label_init_table), longest prefixes first.
var sa6Labels = []struct {
	prefix string
	label  uint8
}{
	{"::1/128", 0}, {"::ffff:0:0/96", 4}, {"::/96", 3}, {"2001::/32", 6},
	{"2001:10::/28", 7}, {"2002::/16", 2}, {"3ffe::/16", 12}, {"fec0::/10", 11},
	{"fc00::/7", 5}, {"::/0", 1},
}

// sa6Label is a's label in the default policy table.
func sa6Label(a [16]byte) uint8 {
	for _, l := range sa6Labels {
		_, n, _ := net.ParseCIDR(l.prefix)
		if n.Contains(net.IP(a[:])) {
			return l.label
		}
	}
	return 1
}

// sa6DevFacts are the per-device sysctls selection reads.
type sa6DevFacts struct {
	tempaddr2, oifOnly, useOptimistic bool
}

// readSa6DevFacts reads dev's use_tempaddr, use_oif_addrs_only and
// whether it uses optimistic addresses (optimistic_dad and use_optimistic,
// the device's or all's: ipv6_use_optimistic_addr). A missing sysctl
// counts as 0.
func readSa6DevFacts(dev string) (sa6DevFacts, error) {
	get := func(d, name string) (bool, int64, error) {
		n, err := readSysctlInt("net/ipv6/conf/" + d + "/" + name)
		if errors.Is(err, os.ErrNotExist) {
			return false, 0, nil
		}
		return n != 0, n, err
	}
	var f sa6DevFacts
	_, t, err := get(dev, "use_tempaddr")
	if err != nil {
		return f, err
	}
	f.tempaddr2 = t >= 2
	if f.oifOnly, _, err = get(dev, "use_oif_addrs_only"); err != nil {
		return f, err
	}
	on := func(name string) (bool, error) {
		a, _, err := get("all", name)
		if err != nil || a {
			return a, err
		}
		d, _, err := get(dev, name)
		return d, err
	}
	dad, err := on("optimistic_dad")
	if err != nil {
		return f, err
	}
	use, err := on("use_optimistic")
	f.useOptimistic = dad && use
	return f, err
}

// saddr6Entry returns a's entry, false when a is no candidate (tentative
// and not optimistic, unspecified, multicast, IPv4).
func saddr6Entry(a netlink.Addr, f sa6DevFacts) (saddr6Ent, bool) {
	var e saddr6Ent
	if a.IPNet == nil || len(a.IP) != net.IPv6len {
		return e, false
	}
	if a.Flags&unix.IFA_F_TENTATIVE != 0 && a.Flags&unix.IFA_F_OPTIMISTIC == 0 {
		return e, false
	}
	if a.IP.IsUnspecified() || a.IP.IsMulticast() {
		return e, false
	}
	copy(e.Addr[:], a.IP)
	e.Ifindex = uint32(a.LinkIndex)
	ones, _ := a.Mask.Size()
	e.Plen = uint8(ones)
	e.Scope = sa6Scope(e.Addr)
	e.Label = sa6Label(e.Addr)
	// Rule 3: IPv4-mapped, -compatible and loopback addresses are
	// always preferred (ipv6_saddr_preferred).
	avoid := unix.IFA_F_DEPRECATED
	if !f.useOptimistic {
		avoid |= unix.IFA_F_OPTIMISTIC
	}
	v4ish := e.Addr[0]|e.Addr[1]|e.Addr[2]|e.Addr[3]|e.Addr[4]|e.Addr[5]|e.Addr[6]|e.Addr[7] == 0 &&
		(e.Addr[8]|e.Addr[9]|e.Addr[10]|e.Addr[11] == 0 || (e.Addr[10] == 0xff && e.Addr[11] == 0xff))
	if v4ish || a.Flags&avoid == 0 {
		e.Bits |= sa6Preferred
	}
	// Rule 7: !(temporary) ^ (use_tempaddr >= 2).
	if (a.Flags&unix.IFA_F_TEMPORARY == 0) != f.tempaddr2 {
		e.Bits |= sa6Public
	}
	if e.Addr[0] == 0x20 && e.Addr[1] == 0x01 && e.Addr[2] == 0x00 && e.Addr[3]&0xf0 == 0x10 {
		e.Bits |= sa6Orchid
	}
	if a.Flags&unix.IFA_F_OPTIMISTIC != 0 {
		e.Bits |= sa6Optimistic
	}
	if f.oifOnly {
		e.Bits |= sa6OIFOnly
	}
	return e, true
}

// saddr6Table builds the table from a dump of the IPv6 addresses (in the
// kernel's order: devices as dumped, each device's list as it is) and
// the devices' facts (by ifindex; a device without facts gets the
// defaults).
func saddr6Table(addrs []netlink.Addr, facts map[int]sa6DevFacts) saddr6Tab {
	var t saddr6Tab
	for _, a := range addrs {
		e, ok := saddr6Entry(a, facts[a.LinkIndex])
		if !ok {
			continue
		}
		if t.N == saddr6Max {
			t.Over = 1
			break
		}
		t.E[t.N] = e
		t.N++
	}
	return t
}

// fillSaddr6 copies the host's IPv6 addresses into m (a data plane
// without the map: nothing to fill).
func fillSaddr6(m *ebpf.Map) error {
	if m == nil {
		return nil
	}
	addrs, err := listAddrs(nil, netlink.FAMILY_V6)
	if err != nil {
		return fmt.Errorf("list the IPv6 addresses: %w", err)
	}
	facts := map[int]sa6DevFacts{}
	for _, a := range addrs {
		if _, ok := facts[a.LinkIndex]; ok {
			continue
		}
		l, err := netlink.LinkByIndex(a.LinkIndex)
		if err != nil {
			continue // gone meanwhile: the next dump sees it
		}
		f, err := readSa6DevFacts(l.Attrs().Name)
		if err != nil {
			return err
		}
		facts[a.LinkIndex] = f
	}
	t := saddr6Table(addrs, facts)
	if err := m.Put(uint32(0), &t); err != nil {
		return fmt.Errorf("record the IPv6 addresses: %w", err)
	}
	return nil
}
