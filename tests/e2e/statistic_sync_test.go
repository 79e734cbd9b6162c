package e2e

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// statisticSyncRules counts every third datagram to 5501 (nth mode).
const statisticSyncRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 5501 -m statistic --mode nth --every 3 --packet 0
COMMIT
`

// TestStatisticNthSyncAgainstKernel checks that an nth counter goes on
// through a recompile of the same rules (`xfw sync`, which the kernel's
// table never sees: it restarts its counters only when iptables replaces
// the table): two datagrams, xfw sync in xfw's twin, four more; the rule
// counts the third and the sixth in both.
func TestStatisticNthSyncAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy")
	tw := newTwins(t, xfwPath(t))
	send := func(tp *nettest.Topology, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.FwIn.IPv4, 5501), []byte("nth")); a.Outcome != nettest.OK {
				t.Fatalf("send to fw:5501: %v", a)
			}
		}
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, statisticSyncRules)
		send(tp, 2)
		if kind == "xfw" {
			nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
		}
		send(tp, 4)
	})
	rule := "INPUT -p udp -m udp --dport 5501 -m statistic --mode nth --every 3 --packet 0"
	k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], 4))[rule]
	x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], 4))[rule]
	if k.packets != 2 {
		t.Errorf("kernel: %s counted %d, want 2 (premise)", rule, k.packets)
	}
	if x != k {
		t.Errorf("xfw: %s counted %+v, the kernel %+v", rule, x, k)
	}
}
