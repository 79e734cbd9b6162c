package dataplane

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestNetWatch: with the watch on, the link dump is kept while nothing
// changes and dumped again after a link, address or route change made
// before the next call (the notification is queued by then); a fill of
// a state's addresses and routes counts as current until such a change,
// and one recorded after a change it did not see does not count.
func TestNetWatch(t *testing.T) {
	inFreshNetns(t, func() {
		stop, err := WatchNetwork()
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		kept := func() bool {
			t.Helper()
			_, kept, err := netFacts.linkList()
			if err != nil {
				t.Fatal(err)
			}
			return kept
		}
		if kept() {
			t.Fatal("the first link list was kept, not dumped")
		}
		if !kept() {
			t.Fatal("the link list was dumped again with no change")
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "xw0"}, PeerName: "xw1"}
		changes := []struct {
			what string
			do   func() error
		}{
			{"link added", func() error { return netlink.LinkAdd(veth) }},
			{"link up", func() error { return netlink.LinkSetUp(veth) }},
			{"address added", func() error {
				return netlink.AddrAdd(veth, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 9, 0, 1), Mask: net.CIDRMask(24, 32)}})
			}},
			{"local route added", func() error {
				return netlink.RouteAdd(&netlink.Route{LinkIndex: veth.Attrs().Index, Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST,
					Dst: &net.IPNet{IP: net.IPv4(10, 9, 9, 9), Mask: net.CIDRMask(32, 32)}})
			}},
		}
		st := &state{}
		for _, c := range changes {
			current, epoch := netFacts.filledFor(st)
			netFacts.markFilled(st, epoch)
			if current, _ = netFacts.filledFor(st); !current {
				t.Fatalf("before %s: a fill with no change since is not current", c.what)
			}
			kept()
			if err := c.do(); err != nil {
				t.Fatalf("%s: %v", c.what, err)
			}
			if kept() {
				t.Errorf("%s: the link list was kept", c.what)
			}
			if current, _ = netFacts.filledFor(st); current {
				t.Errorf("%s: the fill before it is still current", c.what)
			}
		}
		// A fill whose dump began before a change: recorded after it,
		// it is not current.
		_, epoch := netFacts.filledFor(st)
		if err := netlink.LinkSetDown(veth); err != nil {
			t.Fatal(err)
		}
		kept() // another user reads the change first
		netFacts.markFilled(st, epoch)
		if current, _ := netFacts.filledFor(st); current {
			t.Error("a fill that began before a change counts as current")
		}
	})
}
