package dataplane

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// natIfAddr mirrors struct xfw_nat_ifaddr_val (bpf/xfw_structs.h): an
// interface's addresses REDIRECT (and IPv4 MASQUERADE) take.
type natIfAddr struct {
	Addr4  uint32 // the primary IPv4 address (host order); 0: none
	Flags6 uint32 // natIfa6Any, natIfa6LL: which IPv6 addresses are set
	AnyHi  uint64 // the first usable IPv6 address of the device's list
	AnyLo  uint64
	LLHi   uint64 // the first usable link-local one
	LLLo   uint64
}

// The bits of natIfAddr.Flags6 (XFW_NAT_IFA6_*).
const (
	natIfa6Any = 1
	natIfa6LL  = 2
)

// fillNatAddrs copies each interface's REDIRECT addresses into the data
// plane's xfw_nat_ifaddr (bpf/nat.h): the primary IPv4 address
// (nf_nat_redirect_ipv4: the first of the device's address list, also
// IPv4 MASQUERADE's) and the IPv6 ones natIfAddr6 picks; interfaces
// without any are forgotten. It runs with the local addresses
// (fillLocal): at every commit and on the agent's address events.
func fillNatAddrs(m *ebpf.Map) error {
	if m == nil {
		return nil // a data plane without REDIRECT's table: nothing to fill
	}
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	keep := map[uint32]bool{}
	for _, l := range links {
		var v natIfAddr
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("list the addresses of %s: %w", l.Attrs().Name, err)
		}
		if len(addrs) > 0 {
			if ip4 := addrs[0].IP.To4(); ip4 != nil {
				v.Addr4 = binary.BigEndian.Uint32(ip4)
			}
		}
		addrs, err = netlink.AddrList(l, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("list the IPv6 addresses of %s: %w", l.Attrs().Name, err)
		}
		natIfAddr6(&v, addrs)
		if v.Addr4 == 0 && v.Flags6 == 0 {
			continue
		}
		idx := uint32(l.Attrs().Index)
		if err := m.Put(idx, &v); err != nil {
			return fmt.Errorf("record the addresses of %s: %w", l.Attrs().Name, err)
		}
		keep[idx] = true
	}
	if _, err := pruneMap(m, keep); err != nil {
		return fmt.Errorf("forget removed interface addresses: %w", err)
	}
	return nil
}

// natIfAddr6 sets v's IPv6 addresses from an interface's IPv6 addresses in
// the kernel's order (the netlink dump walks the device's list: larger
// scopes first, the newest first within a scope) as nf_nat_redirect_ipv6
// picks them: the first usable one, and the first usable link-local one
// for a link-local destination. Usable: not IPv4-mapped, not tentative
// unless optimistic.
func natIfAddr6(v *natIfAddr, addrs []netlink.Addr) {
	for _, a := range addrs {
		ip := a.IP.To16()
		if ip == nil || a.IP.To4() != nil {
			continue // IPv4-mapped
		}
		if a.Flags&unix.IFA_F_TENTATIVE != 0 && a.Flags&unix.IFA_F_OPTIMISTIC == 0 {
			continue
		}
		hi, lo := binary.BigEndian.Uint64(ip[:8]), binary.BigEndian.Uint64(ip[8:])
		if v.Flags6&natIfa6Any == 0 {
			v.Flags6 |= natIfa6Any
			v.AnyHi, v.AnyLo = hi, lo
		}
		if v.Flags6&natIfa6LL == 0 && ip.IsLinkLocalUnicast() {
			v.Flags6 |= natIfa6LL
			v.LLHi, v.LLLo = hi, lo
		}
	}
}
