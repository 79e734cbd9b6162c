package e2e

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestInterfaceFactsRefreshAgainstKernel changes fw's in0 MAC address
// under a loaded ruleset: once xfw has synced, frames to the new address
// are judged and counted as the kernel counts them, whatever the XDP hook
// cached of the old facts on each CPU (bpf/ifinfo_cache.h: the refill
// renews the facts' generation). Datagrams before the change warm the
// caches. The MAC change flushes fw's neighbour entries, the topology's
// permanent ones included (neigh_changeaddr): the test puts them back, so
// that fw's replies never wait for address resolution (an ARP request or
// reply lost under load is repeated only a second later) and a missing
// reply means a lost datagram.
func TestInterfaceFactsRefreshAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	const datagrams = 20
	const newMAC = "02:00:5e:10:20:77"
	tw := newTwins(t, xfwPath(t))
	rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p udp --dport 9\nCOMMIT\n"
	send := func(kind string, tp *nettest.Topology) {
		for i := 0; i < datagrams; i++ {
			dst := netip.AddrPortFrom(tp.FwIn.IPv4, 9)
			if a := nettest.UDPSend(tp.GenNS, dst, []byte("facts"), nettest.ExpectReply()); a.Outcome != nettest.Refused {
				t.Errorf("%s: UDP #%d to %s: %v\n%s", kind, i, dst, a, tp.ExplainLoss())
			}
		}
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, rules)
		send(kind, tp)
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", nettest.FwInIfname, "address", newMAC)
		for _, ip := range []netip.Addr{tp.Gen.IPv4, tp.Gen.IPv6} {
			if err := nettest.SetNeighbor(tp.FwNS, nettest.FwInIfname, ip, tp.Gen.MAC); err != nil {
				t.Errorf("%s: %v", kind, err) // not Fatal: each runs fn in its own goroutine
				return
			}
		}
		nettest.MustExec(t, tp.GenNS, "ip", "neigh", "replace", tp.FwIn.IPv4.String(), "lladdr", newMAC,
			"dev", nettest.GenIfname, "nud", "permanent")
		if kind == "xfw" {
			nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
		}
		send(kind, tp)
		drainFw(t, tp)
	})
	k := counters(t, saveTable(t, tw.fws["kernel"], tw.tps["kernel"], "filter"))
	x := counters(t, saveTable(t, tw.fws["xfw"], tw.tps["xfw"], "filter"))
	const rule = "INPUT -p udp -m udp --dport 9"
	if k[rule].packets != 2*datagrams {
		t.Fatalf("the kernel counted %d datagrams, %d were sent (test premise): %v", k[rule].packets, 2*datagrams, k)
	}
	if x[rule] != k[rule] {
		t.Errorf("xfw counted %+v, the kernel %+v", x[rule], k[rule])
	}
}
