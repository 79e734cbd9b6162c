package e2e

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// bridgeSNATRuleset masquerades gen's connections to sink's port 8080 and
// its pings, and SNATs those to 8081 to br0's address, all bridged from
// port to port; FORWARD and POSTROUTING count the connections' packets.
func bridgeSNATRuleset(fam int) string {
	br, icmp, echo := bridgeAddr(nil, fam, 0xfe).String(), "icmp", "-m icmp --icmp-type 8"
	if fam == 6 {
		br, icmp, echo = "["+br+"]", "ipv6-icmp", "-m icmp6 --icmpv6-type 128"
	}
	return fmt.Sprintf(`*nat
-A POSTROUTING -o br0 -p tcp -m tcp --dport 8080 -j MASQUERADE
-A POSTROUTING -o br0 -p tcp -m tcp --dport 8081 -j SNAT --to-source %[1]s:20000-20010
-A POSTROUTING -o br0 -p tcp
-A POSTROUTING -o br0 -p %[2]s %[3]s -j MASQUERADE
COMMIT
*filter
-A FORWARD -i br0 -o br0 -p tcp -m conntrack --ctstate SNAT
-A FORWARD -i br0 -o br0 -p tcp -m conntrack --ctstate NEW
-A FORWARD -i br0 -o br0 -p tcp
-A FORWARD -i br0 -o br0 -p %[2]s -m conntrack --ctstate SNAT
COMMIT
`, br, icmp, echo)
}

// bridgeSNATRound connects gen to sink's ports 8080 and 8081 in family
// fam and says what gen and sink saw.
func bridgeSNATRound(t *testing.T, tp *nettest.Topology, fam int) string {
	sink := bridgeAddr(tp, fam, 2)
	// The replies, sent to br0's MAC, come back into the bridge
	// (br_netfilter's bridged DNAT): sink's MAC and TTL kept.
	replies := nettest.StartCapture(t, tp.GenNS, "eth0", func(c nettest.Captured) bool {
		return !c.Outgoing && c.IPVersion == fam && c.Src == sink
	})
	var out []string
	for _, port := range []uint16{8080, 8081} {
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, port), nettest.Echo())
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(sink, port), nettest.WithPayload([]byte("bridged-snat")),
			nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(bridgeAddr(tp, fam, 1), 0)))
		out = append(out, fmt.Sprintf("%d: %s reply %q", port, a.Outcome, a.Reply))
		for _, c := range srv.WaitFinished(1, 2*time.Second) {
			p := c.From.Port()
			out = append(out, fmt.Sprintf("sink's peer %s port in 20000-20010 %v data %q", bridgeName(tp, c.From.Addr()),
				p >= 20000 && p <= 20010, c.Data))
		}
		srv.Close()
	}
	a := nettest.Ping(tp.GenNS, sink, nettest.WithEchoID(0x1234), nettest.WithTimeout(2*time.Second),
		nettest.WithSource(netip.AddrPortFrom(bridgeAddr(tp, fam, 1), 0)))
	out = append(out, fmt.Sprintf("ping: %s from %s", a.Outcome, bridgeName(tp, a.From)))
	seen := map[string]bool{}
	for _, c := range replies.Stop() {
		mac := c.SrcMAC.String()
		if mac == tp.Sink.MAC.String() {
			mac = "SINK"
		}
		seen[fmt.Sprintf("%s ttl %d", mac, c.TTL)] = true
	}
	var frames []string
	for f := range seen {
		frames = append(frames, f)
	}
	sort.Strings(frames)
	out = append(out, "gen received from "+strings.Join(frames, ", "))
	return strings.Join(out, "; ")
}

// TestBridgeSNATAgainstKernel masquerades and SNATs connections bridged
// from gen to sink through xfw and through iptables-legacy (both
// families; TCP and ping): sink sees br0's address, gen its answers with
// sink's MAC and TTL; FORWARD and POSTROUTING count the connections'
// packets as the kernel does.
func TestBridgeSNATAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, false)
		fw.restore(t, tp, 4, bridgeSNATRuleset(4))
		fw.restore(t, tp, 6, bridgeSNATRuleset(6))
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		got := tw.collect(func(_ string, tp *nettest.Topology, _ firewall) string {
			return bridgeSNATRound(t, tp, fam)
		})
		t.Logf("IPv%d kernel: %s", fam, got["kernel"])
		if !strings.Contains(got["kernel"], `8080: ok reply "bridged-snat"; sink's peer BR0 port in 20000-20010 false`) ||
			!strings.Contains(got["kernel"], `8081: ok reply "bridged-snat"; sink's peer BR0 port in 20000-20010 true`) ||
			!strings.Contains(got["kernel"], "gen received from SINK ttl 64") {
			t.Errorf("IPv%d: the kernel did not translate (fix the test): %s", fam, got["kernel"])
		}
		if got["kernel"] != got["xfw"] {
			t.Errorf("IPv%d:\nkernel: %s\nxfw:    %s", fam, got["kernel"], got["xfw"])
		}
		k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], fam))
		x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], fam))
		for key, kv := range k {
			if (strings.Contains(key, "-p tcp") || strings.Contains(key, "icmp")) && x[key] != kv {
				t.Errorf("IPv%d %s: kernel %v, xfw %v", fam, key, kv, x[key])
			}
		}
	}
}
