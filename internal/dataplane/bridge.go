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
// bridge's egress (`-o docker0`) before the bridge hands it to a port. So xfw
// runs on the bridge and not on its ports: a port's own hooks would see the
// same packets a second time under the port's name, which no rule names.
// Frames bridged from port to port never reach IP; the kernel's iptables
// sees them only with br_netfilter's bridge-nf-call-iptables, which xfw
// does not reproduce (docs/differences.md).

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

// detachPorts removes xfw's programs from the bridge ports and pending
// veths among ifaces (attached before the port was enslaved, or by an
// older xfw) and returns the other interfaces.
func detachPorts(ifaces []Interface) ([]Interface, error) {
	var rest []Interface
	for _, ifc := range ifaces {
		if !ifc.BridgePort && !ifc.PendingVeth {
			rest = append(rest, ifc)
			continue
		}
		if err := detachInterface(ifc); err != nil {
			return nil, err
		}
	}
	return rest, nil
}
