package dataplane

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestBridgePortsAndPendingVeths checks which links xfw leaves alone: a
// bridge's ports (not another master's), and a down veth whose peer is a
// bridge port of the namespace (not one that is up, nor one whose peer is
// elsewhere or no port).
func TestBridgePortsAndPendingVeths(t *testing.T) {
	attrs := func(index, master, peer, nsid int, up bool) netlink.LinkAttrs {
		a := netlink.LinkAttrs{Index: index, MasterIndex: master, ParentIndex: peer, NetNsID: nsid}
		if up {
			a.Flags = net.FlagUp
		}
		return a
	}
	const elsewhere = 3 // a peer's namespace id
	bridge := &netlink.Bridge{LinkAttrs: attrs(1, 0, 0, -1, true)}
	bond := &netlink.Bond{LinkAttrs: attrs(2, 0, 0, -1, true)}
	links := []netlink.Link{bridge, bond}
	tests := []struct {
		name          string
		link          netlink.Link
		port, pending bool
	}{
		{"the bridge", bridge, false, false},
		{"a bridge's port, up", &netlink.Veth{LinkAttrs: attrs(10, 1, 11, -1, true)}, true, false},
		{"a bond's slave", &netlink.Device{LinkAttrs: attrs(12, 2, 0, -1, true)}, false, false},
		{"a down veth, peer a bridge port here", &netlink.Veth{LinkAttrs: attrs(11, 0, 10, -1, false)}, false, true},
		{"a down veth, peer here", &netlink.Veth{LinkAttrs: attrs(17, 0, 18, -1, false)}, false, false},
		{"its peer, down", &netlink.Veth{LinkAttrs: attrs(18, 0, 17, -1, false)}, false, false},
		{"a down veth, peer elsewhere", &netlink.Veth{LinkAttrs: attrs(13, 0, 5, elsewhere, false)}, false, false},
		{"an up veth, peer a bridge port here", &netlink.Veth{LinkAttrs: attrs(14, 0, 10, -1, true)}, false, false},
		{"a down veth, peer unknown", &netlink.Veth{LinkAttrs: attrs(15, 0, 99, -1, false)}, false, false},
		{"a down device", &netlink.Device{LinkAttrs: attrs(16, 0, 10, -1, false)}, false, false},
	}
	for _, tc := range tests {
		links = append(links, tc.link)
	}
	byIndex := linksByIndex(links)
	for _, tc := range tests {
		if got := isBridgePort(tc.link, byIndex); got != tc.port {
			t.Errorf("%s: bridge port %v, want %v", tc.name, got, tc.port)
		}
		if got := isPendingVeth(tc.link, byIndex); got != tc.pending {
			t.Errorf("%s: pending veth %v, want %v", tc.name, got, tc.pending)
		}
	}
}
