package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Hairpin DNAT on a bridge against the kernel (br_netfilter): gen reaches
// a service address (a Kubernetes ClusterIP, Docker's published port)
// that fw's nat PREROUTING translates to sink, on the same bridge, without
// SNAT. Sink answers gen straight through the bridge, port to port; the
// kernel's conntrack gives the reply the service's address back in the
// bridge's hooks, so gen's socket takes it, and an ICMP error sink sends
// about it quotes it translated back. Gen routes the service address
// through br0's address; a later packet of a connection that gen sends
// straight to sink (its route changed) is bridged, and the kernel
// translates its destination there too; a new connection's first frame
// bridged to sink is DNATed there (br_netfilter's bridged DNAT).

// bridgeVIP returns the service address of family fam.
func bridgeVIP(fam int) netip.Addr {
	if fam == 6 {
		return netip.MustParseAddr("fd00:96::10")
	}
	return netip.MustParseAddr("10.96.0.10")
}

// bridgeNATRuleset is the hairpin ruleset of family fam: TCP port 80 and
// UDP ports 53 and 54 of the service to sink's 8080, 5353 and 5354 (no
// server: sink's ICMP error quotes the translated datagram), ICMP to
// sink; FORWARD counts the translated connections' packets.
func bridgeNATRuleset(fam int) string {
	vip, sink, icmp := bridgeVIP(fam).String(), bridgeAddr(nil, fam, 2).String(), "icmp"
	if fam == 6 {
		sink, icmp = "["+sink+"]", "ipv6-icmp"
	}
	return fmt.Sprintf(`*nat
-A PREROUTING -d %[1]s -p tcp -m tcp --dport 80 -j DNAT --to-destination %[2]s:8080
-A PREROUTING -d %[1]s -p udp -m udp --dport 53 -j DNAT --to-destination %[2]s:5353
-A PREROUTING -d %[1]s -p udp -m udp --dport 54 -j DNAT --to-destination %[2]s:5354
-A PREROUTING -d %[1]s -p %[3]s -j DNAT --to-destination %[4]s
COMMIT
*filter
-A FORWARD -i br0 -o br0 -m conntrack --ctstate DNAT --ctorigdst %[1]s
COMMIT
`, vip, sink, icmp, bridgeAddr(nil, fam, 2))
}

// bridgeNATSetup bridges gen and sink through fw (bridgeSetup), routes the
// service addresses from gen through br0 and loads the hairpin rules.
func bridgeNATSetup(t *testing.T, tp *nettest.Topology, fw firewall) {
	bridgeSetup(t, tp, false)
	for _, fam := range []int{4, 6} {
		bits := 32
		if fam == 6 {
			bits = 128
		}
		nettest.MustExec(t, tp.GenNS, "ip", fmt.Sprintf("-%d", fam), "route", "add",
			fmt.Sprintf("%s/%d", bridgeVIP(fam), bits), "via", bridgeAddr(tp, fam, 0xfe).String())
		fw.restore(t, tp, fam, bridgeNATRuleset(fam))
	}
}

// bridgeNATRound connects from gen's bridged address to the service of
// family fam (TCP with an echoed payload; a UDP query echoed, and a ping,
// through br0 and then straight to sink; a new TCP connection straight to
// sink; UDP to a closed port) and says what gen and sink saw.
func bridgeNATRound(t *testing.T, tp *nettest.Topology, fam int) string {
	sink, gen := bridgeAddr(tp, fam, 2), netip.AddrPortFrom(bridgeAddr(tp, fam, 1), 0)
	tsrv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 8080), nettest.Echo())
	defer tsrv.Close()
	usrv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 5353), nettest.Echo())
	defer usrv.Close()
	var out []string
	for i := 0; i < 2; i++ {
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 80),
			nettest.WithPayload([]byte("hairpin-tcp")), nettest.WithTimeout(2*time.Second), nettest.WithSource(gen))
		out = append(out, fmt.Sprintf("tcp %d: %s reply %q", i, a.Outcome, a.Reply))
	}
	// The same UDP connection twice: through br0, then (gen's route to
	// the service now via sink, as after an ICMP redirect) bridged port to
	// port, where the kernel translates it in the bridge's hooks.
	ugen := netip.AddrPortFrom(gen.Addr(), 40053)
	for _, via := range []byte{0xfe, 2} {
		bridgeVia(t, tp, fam, via)
		u := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 53), []byte("hairpin-udp"),
			nettest.ExpectReply(), nettest.WithTimeout(2*time.Second), nettest.WithSource(ugen))
		out = append(out, fmt.Sprintf("udp via %s: %s reply %q", bridgeName(tp, bridgeAddr(tp, fam, via)), u.Outcome, u.Reply))
	}
	// A new connection straight to sink: the bridged first frame's DNAT.
	a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 80),
		nettest.WithPayload([]byte("hairpin-new")), nettest.WithTimeout(2*time.Second), nettest.WithSource(gen))
	out = append(out, fmt.Sprintf("new tcp via SINK: %s reply %q", a.Outcome, a.Reply))
	bridgeVia(t, tp, fam, 0xfe)
	u := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(bridgeVIP(fam), 54), []byte("hairpin-closed"),
		nettest.ExpectReply(), nettest.WithTimeout(2*time.Second), nettest.WithSource(gen))
	out = append(out, fmt.Sprintf("udp to a closed port: %s", u.Outcome))
	// A ping, as the UDP connection: one echo connection, its identifier
	// fixed.
	for _, via := range []byte{0xfe, 2} {
		bridgeVia(t, tp, fam, via)
		a := nettest.Ping(tp.GenNS, bridgeVIP(fam), nettest.WithEchoID(0x1234), nettest.WithTimeout(2*time.Second),
			nettest.WithSource(gen))
		out = append(out, fmt.Sprintf("ping via %s: %s from %s (icmp %d/%d)", bridgeName(tp, bridgeAddr(tp, fam, via)), a.Outcome, bridgeName(tp, a.From), a.ICMPType, a.ICMPCode))
	}
	bridgeVia(t, tp, fam, 0xfe)
	for _, c := range tsrv.WaitFinished(3, 2*time.Second) {
		out = append(out, fmt.Sprintf("sink's tcp peer %s data %q", bridgeName(tp, c.From.Addr()), c.Data))
	}
	for _, d := range usrv.Received() {
		out = append(out, fmt.Sprintf("sink's udp peer %s", bridgeName(tp, d.From.Addr())))
	}
	return strings.Join(out, "; ")
}

// bridgeVia routes gen's service address of family fam via host h of
// the bridged subnet.
func bridgeVia(t *testing.T, tp *nettest.Topology, fam int, h byte) {
	nettest.MustExec(t, tp.GenNS, "ip", fmt.Sprintf("-%d", fam), "route", "replace",
		bridgeVIP(fam).String(), "via", bridgeAddr(tp, fam, h).String())
}

// bridgeName names an address of the bridged subnet for comparisons.
func bridgeName(tp *nettest.Topology, a netip.Addr) string {
	for _, fam := range []int{4, 6} {
		for h, name := range map[byte]string{1: "GEN", 2: "SINK", 0xfe: "BR0"} {
			if bridgeAddr(tp, fam, h) == a.Unmap() {
				return name
			}
		}
	}
	return a.String()
}

// TestBridgeHairpinDNAT connects gen to a service address DNATed to sink
// on the same bridge (TCP, UDP, ping, both families) through xfw and
// through iptables-legacy: gen gets its answers (and an ICMP error) from
// the service address, sink sees gen's own, and FORWARD counts the
// translated connections' packets as the kernel does.
func TestBridgeHairpinDNAT(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeNATSetup(t, tp, fw)
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		got := tw.collect(func(_ string, tp *nettest.Topology, _ firewall) string {
			return bridgeNATRound(t, tp, fam)
		})
		t.Logf("IPv%d kernel: %s", fam, got["kernel"])
		if !strings.Contains(got["kernel"], `tcp 1: ok reply "hairpin-tcp"`) ||
			!strings.Contains(got["kernel"], `udp via SINK: ok reply "hairpin-udp"`) ||
			!strings.Contains(got["kernel"], "closed port: refused") ||
			!strings.Contains(got["kernel"], `new tcp via SINK: ok reply "hairpin-new"`) ||
			!strings.Contains(got["kernel"], "ping via SINK: ok from "+bridgeVIP(fam).String()) {
			t.Errorf("IPv%d: the kernel did not answer through the service (fix the test): %s", fam, got["kernel"])
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
