package dataplane

import (
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestFastPathDecisionKept: in a kept session of a process following the
// links and the fast path's facts, the decision is kept while nothing
// changes and made afresh after a tc change (a qdisc added: its
// notification), a link change, ForgetFastPathDecision (the agent's
// periodic check) and a different FastPathEnv; outside a kept session it
// is always made afresh.
func TestFastPathDecisionKept(t *testing.T) {
	setSession := func(active, keep bool) {
		session.mu.Lock()
		session.active, session.keep = active, keep
		session.mu.Unlock()
	}
	t.Cleanup(func() { setSession(false, false) })
	inFreshNetns(t, func() {
		stopLinks, err := WatchNetwork()
		if err != nil {
			t.Fatal(err)
		}
		defer stopLinks()
		stop, err := WatchFastPathFacts([]FastPathGroup{{Name: "tc", Proto: unix.NETLINK_ROUTE, Group: 4}})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "xfp0"}, PeerName: "xfp1"}
		if err := netlink.LinkAdd(veth); err != nil {
			t.Fatal(err)
		}
		var last fastDecision
		decide := func(what string, wantKept bool) {
			t.Helper()
			ifaces, err := listInterfaces()
			if err != nil {
				t.Fatal(err)
			}
			d := decideFastPathKept(ifaces)
			// A kept decision is the very same maps.
			kept := last.tx != nil && reflect.ValueOf(d.tx).Pointer() == reflect.ValueOf(last.tx).Pointer()
			if kept != wantKept {
				t.Errorf("%s: decision kept %v, want %v", what, kept, wantKept)
			}
			last = d
		}
		setSession(true, false)
		decide("a session that keeps nothing", false)
		decide("a session that keeps nothing, again", false)
		setSession(true, true)
		decide("the first decision of a kept session", false)
		decide("no change", true)
		decide("no change, again", true)
		if err := netlink.QdiscAdd(&netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth.Attrs().Index,
			Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}); err != nil {
			t.Fatal(err)
		}
		decide("after a qdisc was added", false)
		decide("no change since the qdisc", true)
		if err := netlink.LinkSetUp(veth); err != nil {
			t.Fatal(err)
		}
		decide("after a link change", false)
		decide("no change since the link change", true)
		ForgetFastPathDecision()
		decide("after ForgetFastPathDecision", false)
		t.Setenv(FastPathEnv, "off")
		decide("with "+FastPathEnv+"=off", false)
		decide("no change since", true)
	})
}
