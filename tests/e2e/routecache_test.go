package e2e

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// routeCacheFlow is the one flow TestRouteChangesAgainstKernel sends: the
// same 5-tuple every time, so that xfw answers its route lookups from the
// cache (bpf/route_cache.h) between the routing changes.
const (
	routeCacheSport = 40001
	routeCacheDport = 7777
)

// TestRouteChangesAgainstKernel sends one flow gen → sink through both
// twins while fw's routing changes between bursts (a blackhole route to
// sink, the route removed again, forwarding off and on again, out0's MTU
// lowered under a DF datagram of the flow) and compares
// the INPUT and FORWARD counters with the kernel's and with what the
// kernel's routing makes of the flow after each change: a route lookup
// xfw answered from its cache must never outlive the change.
func TestRouteChangesAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip", "sysctl")
	tw := newTwins(t, xfwPath(t))
	rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A INPUT -p udp -m udp --dport 7777\n-A FORWARD -p udp -m udp --dport 7777\nCOMMIT\n"
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) { fw.restore(t, tp, 4, rules) })
	const burst = 3 // datagrams per step
	steps := []struct {
		name           string
		change         func(tp *nettest.Topology) []string // a command in fw, nil: none
		size           int                                 // the datagrams' payload (0: small)
		n              int                                 // datagrams (0: burst)
		forward, input uint64                              // their counts
	}{
		{"forwarded", nil, 0, 0, burst, 0},
		{"blackhole route", func(tp *nettest.Topology) []string {
			return []string{"ip", "route", "add", "blackhole", tp.Sink.IPv4.String() + "/32"}
		}, 0, 0, 0, 0},
		{"blackhole removed", func(tp *nettest.Topology) []string {
			return []string{"ip", "route", "del", "blackhole", tp.Sink.IPv4.String() + "/32"}
		}, 0, 0, burst, 0},
		{"forwarding off", func(*nettest.Topology) []string {
			return []string{"sysctl", "-qw", "net.ipv4.conf.all.forwarding=0"}
		}, 0, 0, 0, 0},
		{"forwarding on", func(*nettest.Topology) []string {
			return []string{"sysctl", "-qw", "net.ipv4.conf.all.forwarding=1"}
		}, 0, 0, burst, 0},
		// DF is set (path MTU discovery): a datagram over the route's MTU
		// is answered "fragmentation needed" before the FORWARD hook.
		{"out0 MTU lowered", func(tp *nettest.Topology) []string {
			return []string{"ip", "link", "set", tp.FwOut.Ifname, "mtu", "1280"}
		}, 0, 0, burst, 0},
		{"DF datagram over the MTU", nil, 1400, 1, 0, 0},
	}
	want := map[string]uint64{"FORWARD": 0, "INPUT": 0}
	for _, st := range steps {
		tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
			if st.change != nil {
				nettest.MustExec(t, tp.FwNS, st.change(tp)...)
			}
			src := netip.AddrPortFrom(tp.Gen.IPv4, routeCacheSport)
			dst := netip.AddrPortFrom(tp.Sink.IPv4, routeCacheDport)
			payload, n := []byte("route"), burst
			if st.size > 0 {
				payload = make([]byte, st.size)
			}
			if st.n > 0 {
				n = st.n
			}
			for i := 0; i < n; i++ {
				if a := nettest.UDPSend(tp.GenNS, dst, payload, nettest.WithSource(src)); a.Outcome != nettest.OK {
					t.Errorf("%s: %s: send: %v", kind, st.name, a.Outcome)
				}
			}
		})
		want["FORWARD"] += st.forward
		want["INPUT"] += st.input
		for kind, tp := range tw.tps {
			got := counters(t, tw.fws[kind].save(t, tp, 4))
			for chain, n := range want {
				key := chain + " -p udp -m udp --dport 7777"
				if got[key].packets != n {
					t.Errorf("after %s: %s: %s rule counted %d packets, want %d", st.name, kind, chain, got[key].packets, n)
				}
			}
		}
	}
}
