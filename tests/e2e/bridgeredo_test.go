package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// br_netfilter's bridged DNAT against the kernel: gen sends to a service
// address through br0's MAC (its route to the service goes via br0's
// address), fw's nat PREROUTING translates it to sink on the same bridge,
// and br_nf_pre_routing_finish sends the translated frame back into the
// bridge toward sink's MAC: sink sees gen's source MAC and the TTL (hop
// limit) gen sent, gen gets no ICMP redirect, and FORWARD sees the frame
// bridged (--physdev-in in0, --physdev-out out0), every frame of the
// connection (the first one's DNAT, the later ones' translation).

// bridgeRedoRuleset translates the service's TCP port 80, UDP port 53 and
// pings to sink (8080, 5353) and counts the translated connections'
// packets in FORWARD by their ports.
func bridgeRedoRuleset(fam int) string {
	vip, sink, icmp := bridgeVIP(fam).String(), bridgeAddr(nil, fam, 2).String(), "icmp"
	if fam == 6 {
		sink, icmp = "["+sink+"]", "ipv6-icmp"
	}
	return fmt.Sprintf(`*nat
-A PREROUTING -d %[1]s -p tcp -m tcp --dport 80 -j DNAT --to-destination %[2]s:8080
-A PREROUTING -d %[1]s -p udp -m udp --dport 53 -j DNAT --to-destination %[2]s:5353
-A PREROUTING -d %[1]s -p %[3]s -j DNAT --to-destination %[4]s
COMMIT
*filter
-A FORWARD -i br0 -o br0 -m physdev --physdev-in in0 --physdev-out out0 -m conntrack --ctstate DNAT
-A FORWARD -m physdev --physdev-in out0 --physdev-out in0 -m conntrack --ctstate DNAT
-A FORWARD -m physdev --physdev-is-bridged -m conntrack --ctstate DNAT
-A FORWARD -m physdev ! --physdev-is-out -m conntrack --ctstate DNAT
-A FORWARD -m conntrack --ctstate DNAT
COMMIT
`, vip, sink, icmp, bridgeAddr(nil, fam, 2))
}

// bridgeRedoRound sends gen's UDP (twice on one connection), a TCP
// connection and a ping to the service of family fam through br0's MAC
// and says what gen and sink saw: the answers, the source MACs and TTLs
// of the frames sink received, the redirects gen received.
func bridgeRedoRound(t *testing.T, tp *nettest.Topology, fam int) string {
	sink, gen := bridgeAddr(tp, fam, 2), bridgeAddr(tp, fam, 1)
	tsrv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 8080), nettest.Echo())
	defer tsrv.Close()
	usrv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 5353), nettest.Echo())
	defer usrv.Close()
	toSink := nettest.StartCapture(t, tp.SinkNS, "eth0", func(c nettest.Captured) bool {
		return !c.Outgoing && c.IPVersion == fam && c.Src == gen
	})
	redirect := uint8(5)
	if fam == 6 {
		redirect = 137
	}
	redirects := nettest.StartCapture(t, tp.GenNS, "eth0", func(c nettest.Captured) bool {
		return !c.Outgoing && c.IPVersion == fam && c.ICMPType == redirect &&
			(c.Protocol == nettest.ProtoICMP || c.Protocol == nettest.ProtoICMPv6)
	})
	var out []string
	ugen := netip.AddrPortFrom(gen, 40053)
	for i := 0; i < 2; i++ {
		u := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 53), []byte("redo-udp"),
			nettest.ExpectReply(), nettest.WithTimeout(2*time.Second), nettest.WithSource(ugen))
		out = append(out, fmt.Sprintf("udp %d: %s reply %q", i, u.Outcome, u.Reply))
	}
	a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 80), nettest.WithPayload([]byte("redo-tcp")),
		nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(gen, 0)))
	out = append(out, fmt.Sprintf("tcp: %s reply %q", a.Outcome, a.Reply))
	// Two pings of one echo connection: its first frame, a later one.
	for i := 0; i < 2; i++ {
		p := nettest.Ping(tp.GenNS, bridgeVIP(fam), nettest.WithEchoID(0x1234), nettest.WithTimeout(2*time.Second),
			nettest.WithSource(netip.AddrPortFrom(gen, 0)))
		out = append(out, fmt.Sprintf("ping %d: %s from %s", i, p.Outcome, bridgeName(tp, p.From)))
	}
	tsrv.WaitFinished(1, 2*time.Second)
	// Any redirect comes at once: a moment for the last one.
	time.Sleep(200 * time.Millisecond)
	seen := map[string]bool{}
	for _, c := range toSink.Stop() {
		mac := c.SrcMAC.String()
		switch mac {
		case tp.Gen.MAC.String():
			mac = "GEN"
		case bridgeMAC:
			mac = "BR0"
		}
		seen[fmt.Sprintf("%s to %s proto %d ttl %d", mac, bridgeName(tp, c.Dst), c.Protocol, c.TTL)] = true
	}
	var frames []string
	for s := range seen {
		frames = append(frames, s)
	}
	sort.Strings(frames)
	out = append(out, "sink received from "+strings.Join(frames, ", "))
	out = append(out, fmt.Sprintf("gen's redirects: %d", len(redirects.Stop())))
	return strings.Join(out, "; ")
}

// TestBridgedDNATPassedUpAgainstKernel sends gen's packets to a service
// address through br0's MAC, translated to sink on the same bridge,
// through xfw and through iptables-legacy (both families; UDP, TCP, ping):
// sink gets them with gen's MAC and TTL, gen no redirect and its answers
// from the service, FORWARD's physdev rules count them as the kernel's.
func TestBridgedDNATPassedUpAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, false)
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.conf.all.send_redirects=1",
			"net.ipv4.conf.br0.send_redirects=1")
		for _, fam := range []int{4, 6} {
			bits := 32
			if fam == 6 {
				bits = 128
			}
			nettest.MustExec(t, tp.GenNS, "ip", fmt.Sprintf("-%d", fam), "route", "add",
				fmt.Sprintf("%s/%d", bridgeVIP(fam), bits), "via", bridgeAddr(tp, fam, 0xfe).String())
			fw.restore(t, tp, fam, bridgeRedoRuleset(fam))
		}
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		got := tw.collect(func(_ string, tp *nettest.Topology, _ firewall) string {
			return bridgeRedoRound(t, tp, fam)
		})
		t.Logf("IPv%d kernel: %s", fam, got["kernel"])
		if !strings.Contains(got["kernel"], `udp 1: ok reply "redo-udp"`) ||
			!strings.Contains(got["kernel"], `tcp: ok reply "redo-tcp"`) ||
			!strings.Contains(got["kernel"], "sink received from GEN to SINK proto") ||
			!strings.Contains(got["kernel"], "gen's redirects: 0") {
			t.Errorf("IPv%d: the kernel did not bridge the translated frames (fix the test): %s", fam, got["kernel"])
		}
		if got["kernel"] != got["xfw"] {
			t.Errorf("IPv%d:\nkernel: %s\nxfw:    %s", fam, got["kernel"], got["xfw"])
		}
		k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], fam))
		x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], fam))
		for key, kv := range k {
			if strings.Contains(key, "--ctstate DNAT") && x[key] != kv {
				t.Errorf("IPv%d %s: kernel %v, xfw %v", fam, key, kv, x[key])
			}
		}
	}
}

// bridgeThirdMAC is the MAC of gen's second interface on the bridge (x1,
// host 3 of the bridged subnet), behind fw's port x0.
const bridgeThirdMAC = "02:00:00:00:09:03"

// bridgeThirdSetup gives the bridge a third neighbour: a port x0 whose
// peer x1 is gen's, with host 3's addresses, known to fw's neighbour
// table and to the bridge's forwarding database.
func bridgeThirdSetup(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	for _, argv := range [][]string{
		{"ip", "link", "add", "x0", "type", "veth", "peer", "name", "x1"},
		{"ip", "link", "set", "x0", "master", "br0"},
		{"ip", "link", "set", "x0", "up"},
		{"ip", "link", "set", "x1", "netns", tp.GenNS},
		{"bridge", "fdb", "add", bridgeThirdMAC, "dev", "x0", "master", "static"},
	} {
		nettest.MustExec(t, tp.FwNS, argv...)
	}
	nettest.MustExec(t, tp.GenNS, "ip", "link", "set", "x1", "address", bridgeThirdMAC)
	nettest.MustExec(t, tp.GenNS, "ip", "link", "set", "x1", "up")
	mac, _ := net.ParseMAC(bridgeThirdMAC)
	for _, fam := range []int{4, 6} {
		bits, extra := 32, []string{}
		if fam == 6 {
			bits, extra = 128, []string{"nodad"}
		}
		third := bridgeAddr(tp, fam, 3)
		nettest.MustExec(t, tp.GenNS, append([]string{"ip", "addr", "add", fmt.Sprintf("%s/%d", third, bits), "dev", "x1"}, extra...)...)
		if err := nettest.SetNeighbor(tp.FwNS, "br0", third, mac); err != nil {
			t.Fatal(err)
		}
	}
}

// bridgeThirdRuleset translates the service's UDP port 53 to host 3's
// 5353 and counts in FORWARD by the ports.
func bridgeThirdRuleset(fam int) string {
	third := bridgeAddr(nil, fam, 3).String()
	if fam == 6 {
		third = "[" + third + "]"
	}
	return fmt.Sprintf(`*nat
-A PREROUTING -d %[1]s -p udp -m udp --dport 53 -j DNAT --to-destination %[2]s:5353
COMMIT
*filter
-A FORWARD -p udp -m physdev --physdev-in in0 --physdev-out x0 -m conntrack --ctstate DNAT
-A FORWARD -p udp -m physdev --physdev-in in0 --physdev-out out0
-A FORWARD -p udp -m conntrack --ctstate DNAT
COMMIT
`, bridgeVIP(fam), third)
}

// bridgeThirdRound sends a datagram from gen to the service of family
// fam through sink's MAC and says which of sink and host 3 received it,
// from which MAC, with which TTL.
func bridgeThirdRound(t *testing.T, tp *nettest.Topology, fam int) string {
	gen := bridgeAddr(tp, fam, 1)
	bridgeVia(t, tp, fam, 2)
	defer bridgeVia(t, tp, fam, 0xfe)
	from := func(c nettest.Captured) bool {
		return !c.Outgoing && c.IPVersion == fam && c.Src == gen && c.Protocol == nettest.ProtoUDP
	}
	third := nettest.StartCapture(t, tp.GenNS, "x1", from)
	sink := nettest.StartCapture(t, tp.SinkNS, "eth0", from)
	// Two datagrams of one connection: its first frame's DNAT, a later
	// frame's translation.
	for _, payload := range []string{"redo-third", "redo-third-again"} {
		nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 53), []byte(payload),
			nettest.WithTimeout(time.Second), nettest.WithSource(netip.AddrPortFrom(gen, 40054)))
	}
	time.Sleep(300 * time.Millisecond)
	var out []string
	for name, c := range map[string]*nettest.Capture{"host 3": third, "sink": sink} {
		for _, f := range c.Stop() {
			mac := f.SrcMAC.String()
			if mac == tp.Gen.MAC.String() {
				mac = "GEN"
			}
			out = append(out, fmt.Sprintf("%s received from %s to %s port %d ttl %d: %q", name, mac, f.Dst, f.DstPort, f.TTL, f.Payload))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// TestBridgedDNATToAnotherNeighbourAgainstKernel sends gen's datagram to
// a service address through sink's MAC, bridged from port to port,
// translated to a third neighbour of the bridge (host 3, behind port x0),
// through xfw and through iptables-legacy (both families; the
// connection's first frame and a later one): br_netfilter's bridged DNAT
// gives them that neighbour's MAC and bridges them there, gen's MAC and
// TTL kept, FORWARD's physdev ports those of their new way.
func TestBridgedDNATToAnotherNeighbourAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl", "bridge")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, false)
		bridgeThirdSetup(t, tp)
		for _, fam := range []int{4, 6} {
			fw.restore(t, tp, fam, bridgeThirdRuleset(fam))
		}
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		got := tw.collect(func(_ string, tp *nettest.Topology, _ firewall) string {
			return bridgeThirdRound(t, tp, fam)
		})
		t.Logf("IPv%d kernel: %s", fam, got["kernel"])
		if !strings.Contains(got["kernel"], "host 3 received from GEN to "+bridgeAddr(nil, fam, 3).String()+` port 5353 ttl 64: "redo-third-again"`) {
			t.Errorf("IPv%d: the kernel did not bridge the translated frame to host 3 (fix the test): %s", fam, got["kernel"])
		}
		if got["kernel"] != got["xfw"] {
			t.Errorf("IPv%d:\nkernel: %s\nxfw:    %s", fam, got["kernel"], got["xfw"])
		}
		k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], fam))
		x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], fam))
		for key, kv := range k {
			if strings.Contains(key, "-p udp") && x[key] != kv {
				t.Errorf("IPv%d %s: kernel %v, xfw %v", fam, key, kv, x[key])
			}
		}
	}
}
