package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// ceRules is TestCtExpireAgainstKernel's ruleset: counting rules whose
// --ctexpire ranges tell the seconds a connection has left apart, on UDP
// datagrams (30 s unreplied, the first one's connection unconfirmed) and
// on each packet of a TCP connection (SYN unconfirmed, SYN_RECV 60 s,
// ESTABLISHED 432000 s, the closing states). The last four rules count
// every TCP packet and every FIN of each direction: how many packets a
// connection's close takes depends on the TCP stacks' timing (an ACK sent
// on its own or merged with the next segment), so the twins are compared
// only when they saw the same packets (ceSameExchange). The counters are
// read once sink's server closed its end (a server slow to close sent its
// FIN in one twin only: the kernel's third reply counted at 431999, xfw's
// at LAST_ACK's 30 s, 1 run in 36 here at load 9).
//
// A packet that refreshes an established connection leaves it exactly
// 432000 s only when the jiffies do not tick between the refresh (the
// tracking, before the chains) and the rule: nf_ct_expires is the 32-bit
// difference between the timeout (jiffies at the refresh + 432000 * HZ)
// and the jiffies when the rule runs, divided by HZ, so one tick between
// the two makes it 431999 — in the kernel as in xfw, whose probe reads the
// same clock (bpf_jiffies64) the same way (bpf/ctexpire.h). Each side has
// a rule for both values, and the two are compared as one sum (a tick is
// a matter of microseconds at HZ=250, on either side at random); the same
// for the 60 s of SYN_RECV and CLOSE_WAIT (tickPairs).
const ceRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp --dport 7200 -m conntrack --ctexpire 30
-A FORWARD -p udp --dport 7200 -m conntrack --ctexpire 0:29
-A FORWARD -p udp --dport 7200 -m conntrack ! --ctexpire 30
-A FORWARD -p udp --dport 7200 -m conntrack --ctexpire 31:4294967295
-A FORWARD -p tcp --dport 7201 -m conntrack --ctexpire 432000
-A FORWARD -p tcp --dport 7201 -m conntrack --ctstate ESTABLISHED --ctexpire 431999
-A FORWARD -p tcp --dport 7201 -m conntrack --ctexpire 100:200
-A FORWARD -p tcp --dport 7201 -m conntrack --ctexpire 0:10
-A FORWARD -p tcp --sport 7201 -m conntrack --ctexpire 60
-A FORWARD -p tcp --sport 7201 -m conntrack --ctexpire 59
-A FORWARD -p tcp --sport 7201 -m conntrack --ctexpire 432000
-A FORWARD -p tcp --sport 7201 -m conntrack --ctexpire 431999
-A FORWARD -p tcp --sport 7201 -m conntrack --ctexpire 100:200
-A FORWARD -p tcp --sport 7201 -m conntrack ! --ctexpire 0:1000000
-A FORWARD -p tcp --dport 7201
-A FORWARD -p tcp --sport 7201
-A FORWARD -p tcp --dport 7201 --tcp-flags FIN FIN
-A FORWARD -p tcp --sport 7201 --tcp-flags FIN FIN
COMMIT
`

// TestCtExpireAgainstKernel compares --ctexpire with the kernel's
// conntrack match in twin topologies: UDP datagrams and a TCP connection
// (handshake, data, close) through fw, every rule's counters equal to the
// kernel's, both families; and the kernel's own counts show the ranges
// are exercised.
func TestCtExpireAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) { ctExpireAgainstKernel(t, bin, fam) })
	}
}

// ceAttempts bounds how often TestCtExpireAgainstKernel runs its twins
// again when their TCP stacks sent different numbers of packets.
const ceAttempts = 3

func ctExpireAgainstKernel(t *testing.T, bin string, fam int) {
	var got map[string]map[string]counter
	for attempt := 1; ; attempt++ {
		got = ctExpireRound(t, bin, fam)
		if diff := ceSameExchange(got["kernel"], got["xfw"]); diff == "" {
			break
		} else if attempt == ceAttempts {
			t.Fatalf("the twins' TCP exchanges differed in all %d attempts, last: %s", ceAttempts, diff)
		} else {
			t.Logf("attempt %d: the twins' TCP exchanges differed (%s); again", attempt, diff)
		}
	}
	ctExpireCompare(t, got["kernel"], got["xfw"])
}

// ceSameExchange returns "" when the kernel's and xfw's catch-all rules
// (every TCP packet, every FIN of a direction) counted the same packets,
// else what differed.
func ceSameExchange(k, x map[string]counter) string {
	var diffs []string
	for key, kc := range k {
		if strings.Contains(key, "-p tcp") && !strings.Contains(key, "--ctexpire") {
			if x[key].packets != kc.packets {
				diffs = append(diffs, fmt.Sprintf("%s: xfw %d packets, kernel %d", key, x[key].packets, kc.packets))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

// ctExpireRound runs the traffic through new twins and returns each
// side's counters.
func ctExpireRound(t *testing.T, bin string, fam int) map[string]map[string]counter {
	return collectTwins(newTwins(t, bin), func(kind string, tp *nettest.Topology, fw firewall) map[string]counter {
		gen, sink := tp.Gen.IPv4, tp.Sink.IPv4
		if fam == 6 {
			gen, sink = tp.Gen.IPv6, tp.Sink.IPv6
		}
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, 7201))
		fw.restore(t, tp, fam, ceRules)
		// Each datagram from a port of its own: a random ephemeral port
		// repeating the one before would refresh its connection (30 s
		// left, not the first packet's 0).
		for i := 0; i < 3; i++ {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, 7200), []byte("x"),
				nettest.WithSource(netip.AddrPortFrom(gen, freshSourcePort())))
			time.Sleep(50 * time.Millisecond)
		}
		c, err := clDial(tp.GenNS, gen, netip.AddrPortFrom(sink, 7201))
		if err != nil {
			t.Errorf("%s: connect: %v", kind, err)
		} else {
			if _, err := c.Write([]byte("hello")); err != nil {
				t.Errorf("%s: write: %v", kind, err)
			}
			time.Sleep(100 * time.Millisecond)
			c.Close()
			if len(srv.WaitFinished(1, 2*time.Second)) != 1 {
				t.Errorf("%s: sink's server did not see the connection end", kind)
			}
		}
		// The server closed (its FIN sent) before it counted the
		// connection finished; Drain covers the FIN through fw and
		// gen's kernel acknowledging it.
		drainFw(t, tp)
		return counters(t, fw.save(t, tp, fam))
	})
}

// ctExpireCompare checks xfw's counters x against the kernel's k.
func ctExpireCompare(t *testing.T, k, x map[string]counter) {
	tickSum := map[string][2]uint64{} // per direction: kernel, xfw
	for key, kc := range k {
		if strings.HasPrefix(key, ":") {
			continue // the policies: fw's own neighbour discovery, no --ctexpire
		}
		t.Logf("kernel %d, xfw %d: %s", kc.packets, x[key].packets, key)
		if dir, ok := tickPair(key); ok {
			s := tickSum[dir]
			tickSum[dir] = [2]uint64{s[0] + kc.packets, s[1] + x[key].packets}
			continue
		}
		if xc := x[key]; xc.packets != kc.packets {
			t.Errorf("%s: xfw %d packets, kernel %d", key, xc.packets, kc.packets)
		}
	}
	for dir, s := range tickSum {
		if s[0] != s[1] {
			t.Errorf("%s, --ctexpire N and N-1 together: xfw %d packets, kernel %d", dir, s[1], s[0])
		}
	}
	// Ticks are rare: both sides must see packets at exactly 432000 (an
	// xfw off by one would count them all at 431999). Summed over both
	// directions: one direction may have a single packet, which a tick
	// moves to 431999 on either side.
	var at432000 [2]uint64 // kernel, xfw
	for key, kc := range k {
		if strings.Contains(key, "--ctexpire 432000") {
			at432000[0] += kc.packets
			at432000[1] += x[key].packets
		}
	}
	if at432000[0] == 0 {
		t.Errorf("kernel: no --ctexpire 432000 rule matched (the test's premise)")
	}
	if at432000[1] == 0 {
		t.Errorf("xfw: no --ctexpire 432000 rule matched")
	}
}

// tickPairs maps the --ctexpire values a tick between a refresh and the
// rule moves a packet between (N s, N-1 after a tick) to the pair's N:
// ESTABLISHED's 432000 and SYN_RECV's and CLOSE_WAIT's 60 (sink's SYN+ACK
// and its ACK of gen's FIN). The 60 alone had the same odds of a tick
// (some microseconds in 4 ms, per packet and twin) without a rule to
// catch it: 1 in a few hundred runs at a guess.
var tickPairs = map[string]string{"432000": "432000", "431999": "432000", "60": "60", "59": "60"}

// tickPair reports whether the rule key is one of a direction's tick
// pairs (tickPairs), and which: the direction and the pair's N.
func tickPair(key string) (string, bool) {
	_, v, ok := strings.Cut(key, "--ctexpire ")
	if !ok || strings.Contains(key, "! --ctexpire") {
		return "", false
	}
	n, ok := tickPairs[v]
	if !ok {
		return "", false
	}
	if strings.Contains(key, "--sport 7201") {
		return "replies at " + n, true
	}
	return "requests at " + n, true
}
