package dataplane

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
)

// fillNatAddrs copies each interface's primary IPv4 address, REDIRECT's
// address for packets it receives (nf_nat_redirect_ipv4: the first of
// the device's address list), into the data plane's xfw_nat_ifaddr
// (bpf/nat.h), and forgets interfaces that lost theirs. It runs with the
// local addresses (fillLocal): at every commit and on the agent's address
// events.
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
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("list the addresses of %s: %w", l.Attrs().Name, err)
		}
		if len(addrs) == 0 {
			continue
		}
		ip4 := addrs[0].IP.To4()
		if ip4 == nil {
			continue
		}
		idx := uint32(l.Attrs().Index)
		if err := m.Put(idx, binary.BigEndian.Uint32(ip4)); err != nil {
			return fmt.Errorf("record the address of %s: %w", l.Attrs().Name, err)
		}
		keep[idx] = true
	}
	if _, err := pruneMap(m, keep); err != nil {
		return fmt.Errorf("forget removed interface addresses: %w", err)
	}
	return nil
}
