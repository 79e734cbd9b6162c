package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"

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
// (fillLocal): at every commit (the agent's commands: after a change the
// watch saw, fillNetFacts) and on the agent's address events.
//
// One dump of every address of both families answers for all
// interfaces: the kernel walks each device's list in order, so an
// interface's addresses of one family keep their order in it.
func fillNatAddrs(m *ebpf.Map) error {
	if m == nil {
		return nil // a data plane without REDIRECT's table: nothing to fill
	}
	addrs, err := listAddrs(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list the interfaces' addresses: %w", err)
	}
	vals := natIfAddrs(addrs)
	keep := make(map[uint32]bool, len(vals))
	for idx, v := range vals {
		if err := m.Put(idx, v); err != nil {
			return fmt.Errorf("record the addresses of interface %d: %w", idx, err)
		}
		keep[idx] = true
	}
	if _, err := pruneMap(m, keep); err != nil {
		return fmt.Errorf("forget removed interface addresses: %w", err)
	}
	return nil
}

// natIfAddrs groups a dump of both families' addresses by interface
// index into the values of xfw_nat_ifaddr, leaving out interfaces with
// no usable address. The family is the address's length in the dump (an
// IPv4-mapped IPv6 address also converts to IPv4, so To4 cannot tell).
func natIfAddrs(addrs []netlink.Addr) map[uint32]*natIfAddr {
	v6 := map[uint32][]netlink.Addr{}
	vals := map[uint32]*natIfAddr{}
	get := func(idx uint32) *natIfAddr {
		if vals[idx] == nil {
			vals[idx] = &natIfAddr{}
		}
		return vals[idx]
	}
	for _, a := range addrs {
		if a.IPNet == nil {
			continue
		}
		idx := uint32(a.LinkIndex)
		switch len(a.IP) {
		case net.IPv4len:
			if v := get(idx); v.Addr4 == 0 {
				v.Addr4 = binary.BigEndian.Uint32(a.IP)
			}
		case net.IPv6len:
			v6[idx] = append(v6[idx], a)
		}
	}
	for idx, list := range v6 {
		natIfAddr6(get(idx), list)
	}
	for idx, v := range vals {
		if v.Addr4 == 0 && v.Flags6 == 0 {
			delete(vals, idx)
		}
	}
	return vals
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
