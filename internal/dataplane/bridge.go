package dataplane

import (
	"net"

	"github.com/vishvananda/netlink"
)

// Bridge ports (a container's veth enslaved to docker0, a VM's tap).
//
// The kernel refuses an XDP program on a device whose upper device (the
// bridge) runs one ("Cannot attach when an upper device already has a
// program"), and iptables sees a bridge's traffic where xfw attaches to the
// bridge itself: a frame a port receives for the host or to be routed is
// passed up by the bridge and enters the IP stack on the bridge device (its
// generic XDP hook, `-i docker0`), and a routed packet leaves through the
// bridge's egress (`-o docker0`) before the bridge hands it to a port. So
// xfw's XDP program runs on the bridge and not on its ports.
//
// Frames bridged from port to port never reach IP; with br_netfilter's
// bridge-nf-call-iptables (-ip6tables) on, the kernel's iptables sees them
// in FORWARD with -i and -o the bridge and -m physdev's ports. xfw's TC
// egress program runs on every port for them (bpf/bridge.h): a frame
// leaving a port that came in by another port of the same bridge is
// judged there, where both ports are known (the input port is the skb's
// ingress ifindex); the bridge's forwarding database, which picks the
// output port, is not reachable from BPF, so a judgement at the input
// port could not name it. Everything else leaving a port came from the
// bridge device and was judged there. The TC ingress program notes the
// frames a port receives, so that the bridge's XDP program can name the
// port of a frame the bridge passes up to it (bpf/bridge.h). xfw_ifinfo
// tells the programs which devices are ports (XFW_IF_PORT, with the bridge
// as the device netfilter sees) and whether the sysctl is on
// (XFW_IF_BRNF4/6, read from this namespace whenever xfw applies or
// syncs).

// A veth that is down while its peer is a bridge port of the same
// namespace is taken for a container's end of a pair being set up (Docker
// creates both ends here, puts one on docker0, then moves the other into
// the container and renames it eth0): programs attached to it would leave
// with it and judge the container's own traffic with this namespace's
// maps. It is attached once it is up (the next command, or the agent's
// link event; the guard drops its traffic until then).

// isPendingVeth reports whether l is a down veth whose peer is a bridge
// port among links.
func isPendingVeth(l netlink.Link, byIndex map[int]netlink.Link) bool {
	a := l.Attrs()
	if l.Type() != "veth" || a.Flags&net.FlagUp != 0 || a.NetNsID >= 0 || a.ParentIndex == 0 {
		return false
	}
	peer, ok := byIndex[a.ParentIndex]
	return ok && isBridgePort(peer, byIndex)
}

// isBridgePort reports whether l is enslaved to a bridge among links.
func isBridgePort(l netlink.Link, byIndex map[int]netlink.Link) bool {
	master := l.Attrs().MasterIndex
	if master == 0 {
		return false
	}
	m, ok := byIndex[master]
	return ok && m.Type() == "bridge"
}

// linksByIndex indexes links by ifindex.
func linksByIndex(links []netlink.Link) map[int]netlink.Link {
	m := make(map[int]netlink.Link, len(links))
	for _, l := range links {
		m[l.Attrs().Index] = l
	}
	return m
}

// splitPorts removes xfw's programs from the pending veths among ifaces
// and its XDP program from the bridge ports (attached before the port was
// enslaved, or by an older xfw), and returns the other interfaces and the
// ports.
func splitPorts(ifaces []Interface) (rest, ports []Interface, err error) {
	for _, ifc := range ifaces {
		switch {
		case ifc.PendingVeth:
			if err := detachInterface(ifc); err != nil {
				return nil, nil, err
			}
		case ifc.BridgePort:
			if err := detachXDP(ifc); err != nil {
				return nil, nil, err
			}
			ports = append(ports, ifc)
		default:
			rest = append(rest, ifc)
		}
	}
	return rest, ports, nil
}

// Bridge facts of xfw_ifinfo (XFW_IF_* of bpf/common.h).
const (
	ifBrNF4 = 0x02 // IPv4 of this bridge (port) passes iptables
	ifBrNF6 = 0x04 // IPv6 passes ip6tables
	ifPort  = 0x08 // a bridge port; its ifinfo's ifindex is the bridge's
	// ifBrVLAN: VLAN-tagged IP frames pass iptables too (XFW_IF_BRVLAN).
	ifBrVLAN = 0x1000
	// ifBrPPPoE: PPPoE session frames' IP datagrams pass iptables too
	// (XFW_IF_BRPPPOE).
	ifBrPPPoE = 0x2000
)

// Where br_netfilter keeps its switches, per namespace.
const (
	brNFCallIPv4 = "net/bridge/bridge-nf-call-iptables"
	brNFCallIPv6 = "net/bridge/bridge-nf-call-ip6tables"
	brNFVLAN     = "net/bridge/bridge-nf-filter-vlan-tagged"
	brNFPPPoE    = "net/bridge/bridge-nf-filter-pppoe-tagged"
)

// brNFFlags returns the XFW_IF_BRNF*, XFW_IF_BRVLAN and XFW_IF_BRPPPOE bits of this
// namespace's sysctls: none without br_netfilter (the sysctls are
// missing).
func brNFFlags() uint16 {
	var f uint16
	if v, err := readSysctlInt(brNFCallIPv4); err == nil && v != 0 {
		f |= ifBrNF4
	}
	if v, err := readSysctlInt(brNFCallIPv6); err == nil && v != 0 {
		f |= ifBrNF6
	}
	if v, err := readSysctlInt(brNFVLAN); err == nil && v != 0 && f != 0 {
		f |= ifBrVLAN
	}
	if v, err := readSysctlInt(brNFPPPoE); err == nil && v != 0 && f != 0 {
		f |= ifBrPPPoE
	}
	return f
}

// bridgeInfo returns the xfw_ifinfo flags and device of ifc: a bridge's
// br_netfilter bits, a port's with its bridge as the device netfilter
// sees.
func bridgeInfo(ifc Interface, brnf uint16) (flags uint16, ifindex uint32) {
	switch {
	case ifc.BridgePort:
		return ifPort | brnf, uint32(ifc.Master)
	case ifc.IsBridge:
		return brnf, uint32(ifc.Index)
	}
	return 0, uint32(ifc.Index)
}
