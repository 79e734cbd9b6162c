package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// restoreNoopRules has a burst-1 limit (no token comes back within the
// test) and an nth match counting datagrams to 5701.
const restoreNoopRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp -m udp --dport 5701 -m limit --limit 1/hour --limit-burst 1
-A INPUT -p udp -m udp --dport 5701 -m statistic --mode nth --every 3 --packet 0
COMMIT
`

// TestRestoreNoflushNoopAgainstKernel checks an iptables-restore
// --noflush whose table section holds no line: libiptc commits nothing,
// so the limit bucket stays empty, the nth counter goes on and the INPUT
// policy's counters are not restarted. Two datagrams, the empty restore,
// two more; every counter of the filter table must be the kernel's.
func TestRestoreNoflushNoopAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy")
	tw := newTwins(t, xfwPath(t))
	send := func(tp *nettest.Topology) {
		t.Helper()
		for i := 0; i < 2; i++ {
			if a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.FwIn.IPv4, 5701), []byte("noop")); a.Outcome != nettest.OK {
				t.Errorf("send to fw:5701: %v", a)
			}
		}
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, restoreNoopRules)
		send(tp)
		fw.restore(t, tp, 4, "# nothing to change\n*filter\nCOMMIT\n", "--noflush")
		send(tp)
	})
	k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], 4))
	x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], 4))
	for rule, want := range map[string]uint64{
		"INPUT -p udp -m udp --dport 5701 -m limit --limit 1/hour --limit-burst 1":      1,
		"INPUT -p udp -m udp --dport 5701 -m statistic --mode nth --every 3 --packet 0": 2,
	} {
		if k[rule].packets != want {
			t.Errorf("kernel: %s counted %d, want %d (premise)", rule, k[rule].packets, want)
		}
	}
	if k[":INPUT"].packets < 4 {
		t.Errorf("kernel: the INPUT policy counted %d, want at least the 4 datagrams (premise)", k[":INPUT"].packets)
	}
	for key, kc := range k {
		if !strings.HasPrefix(key, "INPUT") && key != ":INPUT" {
			continue
		}
		if x[key] != kc {
			t.Errorf("xfw: %s counted %+v, the kernel %+v", key, x[key], kc)
		}
	}
}
