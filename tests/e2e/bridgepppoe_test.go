package e2e

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// PPPoE's EtherTypes and the PPP protocols br_netfilter looks for
// (RFC 2516, RFC 1332, RFC 5072).
const (
	etherPPPoESession   = 0x8864
	etherPPPoEDiscovery = 0x8863
	pppIPv4             = 0x0021
	pppIPv6             = 0x0057
	pppLCP              = 0xc021
)

// withPPPoE returns frame's builder with the IP datagram after its
// Ethernet header carried in a PPPoE frame of EtherType ether (version 1,
// type 1, code 0, session 0x1234) as PPP protocol proto.
func withPPPoE(frame func(tp *nettest.Topology) []byte, ether, proto uint16) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		f := frame(tp)
		ip := f[14:]
		hdr := make([]byte, 10)
		binary.BigEndian.PutUint16(hdr[0:], ether)
		hdr[2] = 0x11 // version 1, type 1
		hdr[3] = 0    // code: session data
		binary.BigEndian.PutUint16(hdr[4:], 0x1234)
		binary.BigEndian.PutUint16(hdr[6:], uint16(2+len(ip)))
		binary.BigEndian.PutUint16(hdr[8:], proto)
		return append(append(append([]byte(nil), f[:12]...), hdr...), ip...)
	}
}

// pppoeUDP is bridgedUDP's datagram from gen to sink's port in a PPPoE
// session frame of its family's PPP protocol.
func pppoeUDP(fam int, port uint16) func(tp *nettest.Topology) []byte {
	return withPPPoE(bridgedUDP(fam, port, false, false), etherPPPoESession, pppProto(fam))
}

// pppProto returns the PPP protocol of IP family fam.
func pppProto(fam int) uint16 {
	if fam == 6 {
		return pppIPv6
	}
	return pppIPv4
}

// TestBridgedPPPoEAgainstKernel injects bridged PPPoE session frames
// through xfw and iptables-legacy with bridge-nf-filter-pppoe-tagged off
// (they pass unjudged) and on (the kernel judges the IP datagram inside
// them, -i and -o the bridge, the ports for -m physdev, and the frame
// leaves as it came): counters and what reaches sink are compared, both
// families. Frames the kernel leaves alone either way (discovery, PPP's
// LCP) and a datagram of the other family than its PPP protocol says
// (br_netfilter's header check drops it) are sent too, and PPPoE frames
// in a VLAN tag (judged by the PPPoE sysctl alone).
func TestBridgedPPPoEAgainstKernel(t *testing.T) {
	runBridgeSysctlRounds(t, "bridge-nf-filter-pppoe-tagged", func(fam int) []bridgeFrameCase {
		other := pppProto(10 - fam)
		return []bridgeFrameCase{
			{"plain", bridgedUDP(fam, 9840, false, false)},
			{"PPPoE", pppoeUDP(fam, 9840)},
			{"PPPoE, dropped by port", pppoeUDP(fam, 9841)},
			{"PPPoE, dropped by physdev", pppoeUDP(fam, 9842)},
			{"PPPoE, the other family's PPP protocol", withPPPoE(bridgedUDP(fam, 9841, false, false), etherPPPoESession, other)},
			{"PPPoE, LCP", withPPPoE(bridgedUDP(fam, 9841, false, false), etherPPPoESession, pppLCP)},
			{"PPPoE discovery", withPPPoE(bridgedUDP(fam, 9841, false, false), etherPPPoEDiscovery, pppIPv4)},
			{"PPPoE, to br0", withPPPoE(bridgedUDP(fam, 9840, false, true), etherPPPoESession, pppProto(fam))},
			// bridge-nf-filter-vlan-tagged off: br_netfilter's PPPoE
			// test reads the protocol inside the tag.
			{"VLAN 10, PPPoE", withTag(pppoeUDP(fam, 9840), nettest.VLANTag{ID: 10})},
			{"VLAN 10, PPPoE, dropped by port", withTag(pppoeUDP(fam, 9841), nettest.VLANTag{ID: 10})},
			{"VLAN 10, PPPoE, to br0", withTag(withPPPoE(bridgedUDP(fam, 9840, false, true), etherPPPoESession,
				pppProto(fam)), nettest.VLANTag{ID: 10})},
		}
	})
}

// TestBridgedPPPoERejectAgainstKernel REJECTs bridged PPPoE session
// frames with bridge-nf-filter-pppoe-tagged on through xfw and
// iptables-legacy (TestBridgedRejectAgainstKernel's rules and probes,
// tracked) and compares the counters and what gen receives back.
func TestBridgedPPPoERejectAgainstKernel(t *testing.T) {
	tw := bridgeRejectTwins(t, "bridge-nf-filter-pppoe-tagged")
	if tw == nil {
		return
	}
	bridgeRejectRound(t, tw, func(fam int) []bridgeRejectProbe {
		var probes []bridgeRejectProbe
		for _, pr := range bridgeRejectProbes(fam)[:4] {
			pr.name += ", PPPoE"
			pr.frame = withPPPoE(pr.frame, etherPPPoESession, pppProto(fam))
			probes = append(probes, pr)
		}
		return probes
	}, "")
}

// pppoeFrame is the frameWrap that carries a datagram in a PPPoE session
// frame of its family's PPP protocol.
func pppoeFrame(fam int, f func(*nettest.Topology) []byte) func(*nettest.Topology) []byte {
	return withPPPoE(f, etherPPPoESession, pppProto(fam))
}

// bridgePPPoELogWant is the head of each prefix's line (bridgeLogHead)
// for the datagrams of TestBridgedLogAgainstKernel sent in PPPoE session
// frames with bridge-nf-filter-pppoe-tagged on: the kernel's MAC= is the
// frame's Ethernet header (EtherType PPPoE's) wherever it prints one, and
// the datagram for br0 is seen in PREROUTING alone (the stack drops it).
var bridgePPPoELogWant = map[string]string{
	"p": "IN=br0 OUT= PHYSIN=in0 TTL=64 MACTYPE=88:64",
	"f": "IN=br0 OUT=br0 PHYSIN=in0 PHYSOUT=out0 TTL=64 MACTYPE=88:64",
	"o": "IN= OUT=br0 PHYSIN=in0 PHYSOUT=out0 TTL=64",
	"q": "IN=br0 OUT= PHYSIN=in0 TTL=64 MACTYPE=88:64",
}

// TestBridgedPPPoELogAgainstKernel compares the LOG lines of bridged
// PPPoE session frames and of those a bridge passes up with the kernel's
// (bridge-nf-filter-pppoe-tagged on): devices, ports, TTL and the MAC
// header's EtherType, both families.
func TestBridgedPPPoELogAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	bin := xfwPath(t)
	netnsLogging(t)
	pfx := fmt.Sprintf("xfwpppoelog%d", time.Now().UnixNano()%1000000)
	rules := strings.ReplaceAll(bridgeLogRules, "PFX", pfx)
	tw := newTwins(t, bin)
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.bridge.bridge-nf-filter-pppoe-tagged=1")
		fw.restore(t, tp, 4, rules)
		fw.restore(t, tp, 6, strings.ReplaceAll(rules, pfx+"-", pfx+"6-"))
	})
	if t.Failed() {
		return
	}
	want := bothFamilies(bridgePPPoELogWant)
	kmsg, err := openKmsgEnd()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kmsg)
	bridgeLogSend(t, tw.tps["kernel"], pppoeFrame)
	kernel := map[string]string{}
	waitUntil(func() bool {
		readBridgeLogLines(kmsg, pfx, want, kernel)
		return len(kernel) == len(want)
	})
	got := xfwBridgeLogLines(t, tw.tps["xfw"], bin, pfx, want, pppoeFrame)
	for k, w := range want {
		if kernel[k] != w {
			t.Errorf("kernel: %s-%s line %q, want %q (premise)", pfx, k, kernel[k], w)
		}
		if got[k] != kernel[k] {
			t.Errorf("xfw: %s-%s line %q, the kernel's %q", pfx, k, got[k], kernel[k])
		}
	}
}

// bridgePPPoETrackRules counts bridged UDP by connection state and drops
// datagrams to 9851 (their later fragments follow: tracking reassembles).
const bridgePPPoETrackRules = `*mangle
-A PREROUTING -p udp -m conntrack --ctstate NEW
COMMIT
*filter
-A FORWARD -p udp -m conntrack --ctstate NEW
-A FORWARD -p udp -m conntrack --ctstate ESTABLISHED
-A FORWARD -p udp -m conntrack --ctstate INVALID
-A FORWARD -p udp --dport 9851 -j DROP
-A FORWARD -p udp
COMMIT
`

// pppoeFragments is a PPPoE session frame for each fragment (at most 600
// bytes of payload) of a 1000-byte UDP datagram of family fam from gen to
// sink's port.
func pppoeFragments(fam int, port uint16) func(tp *nettest.Topology) [][]byte {
	return func(tp *nettest.Topology) [][]byte {
		udp := nettest.UDP{SrcPort: 4001, DstPort: port, Payload: []byte(strings.Repeat("xfw-pppoe-fragment-", 53)[:1000])}
		pkt := nettest.IPPacket(bridgeAddr(tp, fam, 1), bridgeAddr(tp, fam, 2), udp)
		var frags [][]byte
		var err error
		if fam == 6 {
			frags, err = nettest.FragmentIPv6(pkt, 600, uint32(port))
		} else {
			binary.BigEndian.PutUint16(pkt[4:], port) // the identification
			binary.BigEndian.PutUint16(pkt[10:], 0)
			binary.BigEndian.PutUint16(pkt[10:], nettest.Checksum(pkt[:20]))
			frags, err = nettest.FragmentIPv4(pkt, 600)
		}
		if err != nil {
			panic(err)
		}
		eth := nettest.Ethernet{Src: tp.Gen.MAC, Dst: tp.Sink.MAC}
		var frames [][]byte
		for _, f := range frags {
			frames = append(frames, pppoeFrame(fam, func(*nettest.Topology) []byte { return eth.Frame(f) })(tp))
		}
		return frames
	}
}

// pppoeTrackRound injects frames at gen (back: at sink) and returns how
// many bytes of datagram the PPPoE frames the other side received carry
// and fw's non-zero counters of family fam (zeroed), and how many frames
// they were.
func pppoeTrackRound(t *testing.T, tp *nettest.Topology, fw firewall, name string, fam int, back bool,
	frames [][]byte) (string, int) {
	t.Helper()
	ns, ifname, inject := tp.SinkNS, nettest.SinkIfname, tp.InjectFromGen
	if back {
		ns, ifname, inject = tp.GenNS, nettest.GenIfname, tp.InjectFromSink
	}
	c := nettest.StartCapture(t, ns, ifname, func(c nettest.Captured) bool {
		return !c.Outgoing && len(c.Raw) >= 14 && binary.BigEndian.Uint16(c.Raw[12:]) == etherPPPoESession
	})
	if err := inject(frames...); err != nil {
		t.Errorf("%s: inject: %v", name, err)
	}
	drainFw(t, tp)
	c.Wait(len(frames), 500*time.Millisecond)
	var n, bytes int
	for _, f := range c.StopQueued() {
		n++
		bytes += pppoeDatagramBytes(f.Raw)
	}
	return fmt.Sprintf("received %d bytes of datagram; counted %v", bytes, takeBridgeCounters(t, tp, fw, name, fam)), n
}

// pppoeDatagramBytes returns how many bytes of its datagram (after the IP
// header and an IPv6 fragment header) the PPPoE session frame f carries.
func pppoeDatagramBytes(f []byte) int {
	ip := f[min(len(f), 22):]
	switch {
	case len(ip) >= 20 && ip[0]>>4 == 4:
		return len(ip) - int(ip[0]&0xf)*4
	case len(ip) >= 48 && ip[0]>>4 == 6 && ip[6] == 44:
		return len(ip) - 48
	case len(ip) >= 40 && ip[0]>>4 == 6:
		return len(ip) - 40
	}
	return 0
}

// TestBridgedPPPoETrackedAgainstKernel sends bridged PPPoE session frames
// of a tracked connection (gen's datagram, sink's answer) and fragmented
// datagrams (one accepted, one dropped: the later fragments follow the
// first's verdict) through xfw and iptables-legacy with
// bridge-nf-filter-pppoe-tagged on: the bytes of datagram that arrive and
// the counters by connection state are compared, both families. The
// kernel's frames are not: it reassembles the datagram before PREROUTING
// and sends it whole (br_nf_dev_queue_xmit fragments IP frames only),
// xfw passes the fragments (docs/differences.md).
func TestBridgedPPPoETrackedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.bridge.bridge-nf-filter-pppoe-tagged=1")
		fw.restore(t, tp, 4, bridgePPPoETrackRules)
		fw.restore(t, tp, 6, bridgePPPoETrackRules)
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		for _, pr := range []struct {
			name   string
			back   bool
			frames func(tp *nettest.Topology) [][]byte
		}{
			{"datagram", false, func(tp *nettest.Topology) [][]byte { return [][]byte{pppoeUDP(fam, 9850)(tp)} }},
			{"answer", true, func(tp *nettest.Topology) [][]byte {
				return [][]byte{pppoeFrame(fam, bridgedUDP(fam, 9850, true, false))(tp)}
			}},
			{"fragments", false, pppoeFragments(fam, 9850)},
			{"fragments, dropped", false, pppoeFragments(fam, 9851)},
		} {
			name := fmt.Sprintf("IPv%d PPPoE %s", fam, pr.name)
			res := map[string]string{}
			n := map[string]int{}
			var mu sync.Mutex
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				r, frames := pppoeTrackRound(t, tp, fw, name, fam, pr.back, pr.frames(tp))
				mu.Lock()
				res[kind], n[kind] = r, frames
				mu.Unlock()
			})
			if res["kernel"] != res["xfw"] {
				t.Errorf("%s:\nkernel: %s\nxfw:    %s", name, res["kernel"], res["xfw"])
			} else {
				t.Logf("%s: %s (frames: kernel %d, xfw %d)", name, res["kernel"], n["kernel"], n["xfw"])
			}
		}
	}
}

// TestBridgedPPPoEDNATAgainstKernel sends bridged PPPoE session frames
// that nat PREROUTING translates (br_netfilter's bridged DNAT, to sink's
// REJECTed ports) through xfw and iptables-legacy with
// bridge-nf-filter-pppoe-tagged on: the counters and the replies gen
// receives.
func TestBridgedPPPoEDNATAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.bridge.bridge-nf-filter-pppoe-tagged=1")
		fw.restore(t, tp, 4, bridgeRejectDNATRules(4))
		fw.restore(t, tp, 6, bridgeRejectDNATRules(6))
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	bridgeRejectRound(t, tw, func(fam int) []bridgeRejectProbe {
		return []bridgeRejectProbe{
			{typeProbe{name: "PPPoE tcp-reset after DNAT", frame: pppoeFrame(fam, bridgedTCP(fam, 9725))}, 1},
			{typeProbe{name: "PPPoE port unreachable after DNAT", frame: pppoeFrame(fam, bridgedUDP(fam, 9726, false, false))}, 1},
		}
	}, "")
}

// routedPPPoERules counts UDP in every chain of the routed path.
const routedPPPoERules = `*mangle
-A PREROUTING -p udp
COMMIT
*filter
-A INPUT -p udp
-A FORWARD -p udp
COMMIT
`

// TestRoutedPPPoEAgainstKernel sends PPPoE session frames to fw's own
// MAC on a routed device (no bridge; bridge-nf-filter-pppoe-tagged on):
// the stack has no PPPoE session and drops them, no chain sees them, in
// xfw (whose XDP parser reads PPPoE for bridges) as in the kernel; the
// same datagrams unwrapped are counted, both families.
func TestRoutedPPPoEAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.bridge.bridge-nf-filter-pppoe-tagged=1")
		fw.restore(t, tp, 4, routedPPPoERules)
		fw.restore(t, tp, 6, routedPPPoERules)
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		for _, toFw := range []bool{false, true} {
			fam, toFw := fam, toFw
			routed := func(tp *nettest.Topology) []byte {
				dst, src := tp.Sink.IPv4, tp.Gen.IPv4
				if toFw {
					dst = tp.FwIn.IPv4
				}
				if fam == 6 {
					dst, src = tp.Sink.IPv6, tp.Gen.IPv6
					if toFw {
						dst = tp.FwIn.IPv6
					}
				}
				udp := nettest.UDP{SrcPort: 4000, DstPort: 9860, Payload: []byte("xfw-routed-pppoe")}
				return nettest.Ethernet{Src: tp.Gen.MAC, Dst: tp.FwIn.MAC}.Frame(nettest.IPPacket(src, dst, udp))
			}
			name := fmt.Sprintf("routed (to fw %v)", toFw)
			compareTableCounters(t, tw, typeProbe{name: name, fam: fam, frame: routed}, false)
			compareTableCounters(t, tw, typeProbe{name: name + ", PPPoE", fam: fam, frame: pppoeFrame(fam, routed)}, false)
		}
	}
}
