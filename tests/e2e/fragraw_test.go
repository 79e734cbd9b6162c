package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// fragRawPort is the port raw PREROUTING's port rule drops.
const fragRawPort = 7303

// fragRawRules drops in raw PREROUTING every packet of src2 (an address
// alone: a later fragment matches it too) and the datagrams to
// fragRawPort (a later fragment has no port); with ct, a FORWARD rule on
// the state makes both kernels reassemble before raw.
func fragRawRules(fam int, src2 netip.Addr, ct bool) string {
	filter := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	if ct {
		filter += "-A FORWARD -m conntrack --ctstate NEW,ESTABLISHED,INVALID\n"
	}
	bits := 32
	if fam == 6 {
		bits = 128
	}
	return fmt.Sprintf("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A PREROUTING -s %s/%d -j DROP\n-A PREROUTING -p udp -m udp --dport %d -j DROP\nCOMMIT\n%sCOMMIT\n",
		src2, bits, fragRawPort, filter)
}

// fragRawOutcome is what one twin did with a probe: every rule's counters,
// the fragments and packets sink received, the ICMP errors gen got back.
type fragRawOutcome struct {
	rules             map[string]counter
	atSink, errsAtGen int
}

// TestFragmentsRawPreroutingAgainstKernel sends the three fragments of a
// UDP datagram from gen, each probe from a source raw PREROUTING drops by
// address or to the port it drops, to sink (routed) or to an address fw
// has no route to, with and without connection tracking, both families.
// Without tracking the kernel's raw PREROUTING judges every fragment (the
// address rule drops all three, the port rule the first); with it, the
// reassembled datagram. Compared with iptables-legacy: every rule's
// counters, the fragments sink receives and the ICMP errors gen receives
// (xfw judged an unroutable datagram's later fragments nowhere and handed
// them to the stack, whose ICMPv6 unreachable errors the kernel never
// sends).
func TestFragmentsRawPreroutingAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	for _, fam := range []int{4, 6} {
		for _, ct := range []bool{false, true} {
			t.Run(fmt.Sprintf("IPv%d/conntrack=%v", fam, ct), func(t *testing.T) {
				tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
					for _, f := range []int{4, 6} {
						fw.restore(t, tp, f, fragRawRules(f, fragRawSrc2(tp, f), ct))
					}
				})
				for _, pr := range []struct {
					name          string
					spoof, routed bool
				}{{"address rule, routed", true, true}, {"address rule, no route", true, false},
					{"port rule, routed", false, true}, {"port rule, no route", false, false}} {
					t.Run(pr.name, func(t *testing.T) {
						got := fragRawProbe(t, tw, fam, pr.spoof, pr.routed)
						k, x := got["kernel"], got["xfw"]
						compareTypeCounters(t, k.rules, x.rules)
						t.Logf("kernel: %d at sink, %d errors at gen; xfw: %d, %d", k.atSink, k.errsAtGen, x.atSink, x.errsAtGen)
						if x.atSink != k.atSink || x.errsAtGen != k.errsAtGen {
							t.Errorf("xfw: %d fragments at sink, %d ICMP errors at gen; kernel: %d, %d",
								x.atSink, x.errsAtGen, k.atSink, k.errsAtGen)
						}
					})
				}
			})
		}
	}
}

// fragRawSrc2 is the address of gen's subnet the address rule drops.
func fragRawSrc2(tp *nettest.Topology, fam int) netip.Addr {
	if fam == 4 {
		b := tp.Gen.IPv4.As4()
		b[3] = 77
		return netip.AddrFrom4(b)
	}
	b := tp.Gen.IPv6.As16()
	b[15] = 0x77
	return netip.AddrFrom16(b)
}

// fragRawProbe zeroes both twins' counters, injects one datagram's
// fragments from gen (from fragRawSrc2 when spoof, else gen's address; to
// sink when routed, else to an address fw has no route to) and returns
// each twin's outcome after settling.
func fragRawProbe(t *testing.T, tw *twins, fam int, spoof, routed bool) map[string]fragRawOutcome {
	t.Helper()
	out := map[string]fragRawOutcome{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		for _, f := range []int{4, 6} {
			nettest.MustExec(t, tp.FwNS, append(fw.cmd(f, ""), "-w", lockWait, "-t", "raw", "-Z")...)
		}
		src, dst := tp.Gen.IPv4, tp.Sink.IPv4
		unrouted := netip.MustParseAddr("198.51.100.9")
		if fam == 6 {
			src, dst, unrouted = tp.Gen.IPv6, tp.Sink.IPv6, netip.MustParseAddr("2001:db8:dead::9")
		}
		if spoof {
			src = fragRawSrc2(tp, fam)
		}
		if !routed {
			dst = unrouted
		}
		pkt := nettest.UDPPacket(netip.AddrPortFrom(src, 7000), netip.AddrPortFrom(dst, fragRawPort),
			[]byte(strings.Repeat("xfw-frag", 8)))
		var frags [][]byte
		var err error
		if fam == 4 {
			frags, err = nettest.FragmentIPv4(pkt, fragSize)
		} else {
			frags, err = nettest.FragmentIPv6(pkt, fragSize, 0x5eed)
		}
		if err != nil || len(frags) != 3 {
			t.Fatalf("fragment: %v (%d fragments)", err, len(frags))
		}
		sink := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, func(f nettest.Captured) bool {
			return !f.Outgoing && f.IPVersion == fam && f.Protocol == 17
		})
		errs := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(f nettest.Captured) bool {
			return !f.Outgoing && f.IPVersion == fam && (f.Protocol == 1 || f.Protocol == 58)
		})
		eth := tp.GenToFw()
		for _, f := range frags {
			if err := tp.InjectFromGen(eth.Frame(f)); err != nil {
				t.Fatalf("inject: %v", err)
			}
		}
		time.Sleep(typeSettle)
		var o fragRawOutcome
		o.atSink = len(sink.Stop())
		for _, e := range errs.Stop() {
			if fam == 4 || e.ICMPType < 128 { // errors, not neighbour discovery
				o.errsAtGen++
			}
		}
		// The twins' subnets differ: the address rule is named alike.
		save := nettest.MustExec(t, tp.FwNS, append(fw.cmd(fam, "-save"), "-c", "-t", "raw")...)
		o.rules = ruleCountersOf(t, strings.ReplaceAll(save, fragRawSrc2(tp, fam).String()+"/", "SRC2/"))
		mu.Lock()
		out[kind] = o
		mu.Unlock()
	})
	return out
}
