package e2e

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// cpuRules counts forwarded datagrams by the CPU that processes them.
const cpuRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 7300 -m cpu --cpu 0
-A FORWARD -p udp -m udp --dport 7300 -m cpu --cpu 1
-A FORWARD -p udp -m udp --dport 7300 -m cpu ! --cpu 0
-A FORWARD -p udp -m udp --dport 7300 -m cpu --cpu 4294967295
COMMIT
`

// TestCPUAgainstKernel compares -m cpu with the kernel's xt_cpu in twin
// topologies: datagrams sent into fw from a thread pinned to CPU 0, then
// from one pinned to CPU 1 (a veth delivers a frame on the sending CPU),
// counted by the CPU that processed them, as the kernel counts them.
func TestCPUAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	if runtime.NumCPU() < 2 {
		t.Fatalf("needs 2 CPUs, the machine has %d", runtime.NumCPU())
	}
	const on0, on1 = 40, 25
	got := collectTwins(newTwins(t, xfwPath(t)), func(kind string, tp *nettest.Topology, fw firewall) map[string]counter {
		fw.restore(t, tp, 4, cpuRules)
		frame := tp.GenToFw().Frame(nettest.UDPPacket(netip.AddrPortFrom(tp.Gen.IPv4, 5000), netip.AddrPortFrom(tp.Sink.IPv4, 7300), []byte("x")))
		// Each send ends once its marker is forwarded, after every
		// frame of its queue was judged: the counters are final.
		sendJudged(t, tp, []pinnedSender{{tp.GenNS, tp.Gen.Ifname, 0, frame, nil, nil}}, on0)
		sendJudged(t, tp, []pinnedSender{{tp.GenNS, tp.Gen.Ifname, 1, frame, nil, nil}}, on1)
		return counters(t, fw.save(t, tp, 4))
	})
	want := map[string]uint64{
		"FORWARD -p udp -m udp --dport 7300 -m cpu --cpu 0":          on0,
		"FORWARD -p udp -m udp --dport 7300 -m cpu --cpu 1":          on1,
		"FORWARD -p udp -m udp --dport 7300 -m cpu ! --cpu 0":        on1,
		"FORWARD -p udp -m udp --dport 7300 -m cpu --cpu 4294967295": 0,
	}
	for key, n := range want {
		k, x := got["kernel"][key].packets, got["xfw"][key].packets
		if k != n {
			t.Errorf("kernel: %s: %d packets, want %d (the test's premise)", key, k, n)
		}
		if x != k {
			t.Errorf("%s: xfw %d packets, kernel %d", key, x, k)
		}
	}
}
