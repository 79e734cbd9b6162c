package dataplane

import (
	"os"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
)

// TestReadRPFilterOn: off in a new namespace (every rp_filter 0), on when
// any of "all", "default" or one device's own is strict or loose.
func TestReadRPFilterOn(t *testing.T) {
	cases := []struct {
		name   string
		sysctl string // set to value in a fresh namespace ("": none)
		value  string
		want   uint32
	}{
		{name: "new namespace", want: 0},
		{name: "all strict", sysctl: "net/ipv4/conf/all/rp_filter", value: "1", want: 1},
		{name: "default loose", sysctl: "net/ipv4/conf/default/rp_filter", value: "2", want: 1},
		{name: "one device strict", sysctl: "net/ipv4/conf/lo/rp_filter", value: "1", want: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inFreshNetns(t, func() {
				if c.sysctl != "" {
					if err := os.WriteFile(sysctlProcPrefix+c.sysctl, []byte(c.value), 0o644); err != nil {
						t.Errorf("set %s: %v", c.sysctl, err)
						return
					}
				}
				got, err := readRPFilterOn()
				if err != nil {
					t.Errorf("readRPFilterOn: %v", err)
					return
				}
				if got != c.want {
					t.Errorf("readRPFilterOn() = %d, want %d", got, c.want)
				}
			})
		})
	}
}

// TestRPFilterListingKept: with the links followed (WatchNetwork), the
// rp_filter sysctls' listing is kept while no link changes, taken again
// after a device is added (its rp_filter then counts), and a device
// removed since the kept listing (its notification not read yet) costs
// no error: the sysctls are listed afresh.
func TestRPFilterListingKept(t *testing.T) {
	inFreshNetns(t, func() {
		stop, err := WatchNetwork()
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		list := func(wantKept bool) []string {
			t.Helper()
			names, kept, err := rpFilterSysctls()
			if err != nil {
				t.Fatal(err)
			}
			if kept != wantKept {
				t.Errorf("listing kept %v, want %v: %v", kept, wantKept, names)
			}
			return names
		}
		list(false)
		if names := list(true); !slices.Contains(names, "net/ipv4/conf/lo/rp_filter") {
			t.Errorf("kept listing lacks lo: %v", names)
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "xwrp0"}, PeerName: "xwrp1"}
		if err := netlink.LinkAdd(veth); err != nil {
			t.Fatal(err)
		}
		if names := list(false); !slices.Contains(names, "net/ipv4/conf/xwrp0/rp_filter") {
			t.Errorf("listing after the device was added lacks it: %v", names)
		}
		list(true)
		if err := os.WriteFile(sysctlProcPrefix+"net/ipv4/conf/xwrp0/rp_filter", []byte("2"), 0o644); err != nil {
			t.Fatal(err)
		}
		if on, err := readRPFilterOn(); err != nil || on != 1 {
			t.Errorf("the added device's loose rp_filter: readRPFilterOn() = %d, %v; want 1", on, err)
		}
		// The kept listing names a device now gone, whose removal's
		// notification nothing read yet.
		kept := rpFilterKept.names
		if err := netlink.LinkDel(veth); err != nil {
			t.Fatal(err)
		}
		rpFilterKept.mu.Lock()
		epoch, _ := netFacts.currentEpoch()
		rpFilterKept.names, rpFilterKept.epoch, rpFilterKept.valid = kept, epoch, true
		rpFilterKept.mu.Unlock()
		if on, err := readRPFilterOn(); err != nil || on != 0 {
			t.Errorf("after the device's removal: readRPFilterOn() = %d, %v; want 0", on, err)
		}
		if names := list(true); slices.Contains(names, "net/ipv4/conf/xwrp0/rp_filter") {
			t.Errorf("listing after the device was removed still has it: %v", names)
		}
	})
}
