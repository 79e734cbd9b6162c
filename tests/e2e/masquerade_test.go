package e2e

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// SNAT and MASQUERADE against the kernel: gen's connections to sink
// masqueraded behind fw's sink-side address (TCP and UDP, the port kept,
// a clash with fw's own datagram resolved with another port, an ICMP
// error coming back), fw's own
// connection SNATed to a given port, through xfw and iptables-legacy in
// twin topologies; what clients and servers saw, the counters (FORWARD
// sees the original source) and `conntrack -L` with both tuples.

// masqRuleset is TestMasqueradeAgainstKernel's ruleset; X is the
// topology's subnet, OUT fw's sink-side interface.
const masqRuleset = natTableStart + `-A POSTROUTING -d 10.X.2.2/32 -p tcp -m tcp --dport 9100 -j SNAT --to-source 10.X.2.1:9101
-A POSTROUTING -o OUT -p tcp -j MASQUERADE
-A POSTROUTING -o OUT -p udp -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.X.2.2/32 -p tcp -m tcp --sport 9100 -m conntrack --ctstate ESTABLISHED
-A FORWARD -s 10.X.1.2/32 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// masqPorts are the ports the steps choose (others are ephemeral or
// picked at random, and named P in comparisons); the clients' fixed ports
// lie below the ephemeral range, which a TCP client's port may take.
var masqPorts = map[int]bool{80: true, 53: true, 9100: true, 9101: true, 31053: true, 31060: true}

// masqSteps are TestMasqueradeAgainstKernel's steps, in order.
var masqSteps = []natStep{
	{"tcp from gen masqueraded", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 80), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 80),
			nettest.WithPayload([]byte("masq")), nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		for _, c := range srv.WaitFinished(1, 2*time.Second) {
			out += fmt.Sprintf("; server saw %s, port kept %v", natName(tp, c.From.Addr()), c.From.Port() == a.Local.Port())
		}
		return out
	}},
	{"udp from gen masqueraded, the port kept, then a clash", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 53), nettest.Echo())
		defer srv.Close()
		dst := netip.AddrPortFrom(tp.Sink.IPv4, 53)
		a := nettest.UDPSend(tp.GenNS, dst, []byte("g"), nettest.ExpectReply(), nettest.WithTimeout(2*time.Second),
			nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, 31053)))
		out := fmt.Sprintf("gen 31053: %s %q; ", a.Outcome, a.Reply)
		// fw's own datagram from 31060 takes the tuple gen's next one
		// would be masqueraded to.
		b := nettest.UDPSend(tp.FwNS, dst, []byte("f"), nettest.WithSource(netip.AddrPortFrom(tp.FwOut.IPv4, 31060)))
		out += fmt.Sprintf("fw 31060: %s; ", b.Outcome)
		srv.Wait(2, 2*time.Second)
		c := nettest.UDPSend(tp.GenNS, dst, []byte("h"), nettest.ExpectReply(), nettest.WithTimeout(2*time.Second),
			nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, 31060)))
		out += fmt.Sprintf("gen 31060: %s %q; ", c.Outcome, c.Reply)
		// The sender's own port by number, another (the clash's, at
		// random in 1024-65535, which may equal a fixed one) as P.
		own := map[string]uint16{"g": 31053, "f": 31060, "h": 31060}
		for _, d := range srv.Wait(3, 2*time.Second) {
			port := strconv.Itoa(int(d.From.Port()))
			if d.From.Port() != own[string(d.Payload)] {
				port = "P"
			}
			out += fmt.Sprintf("server saw %s:%s %q; ", natName(tp, d.From.Addr()), port, d.Payload)
		}
		return out
	}},
	{"udp from gen masqueraded to a closed port: the ICMP error translated back", func(t *testing.T, tp *nettest.Topology) string {
		capture := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMP
		})
		a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 54), []byte("closed"), nettest.ExpectReply(),
			nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, 31053)))
		out := string(a.Outcome)
		capture.WaitFor(func(nettest.Captured) bool { return true }, time.Second)
		for _, f := range capture.Stop() {
			out += fmt.Sprintf("; icmp from %s to %s %s", natName(tp, f.Src), natName(tp, f.Dst), icmpErrorKind(tp, f.Raw))
		}
		return out
	}},
	{"fw's own tcp SNATed to a port", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 9100), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(tp.Sink.IPv4, 9100),
			nettest.WithPayload([]byte("own")), nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		for _, c := range srv.WaitFinished(1, 2*time.Second) {
			out += fmt.Sprintf("; server saw %s:%d", natName(tp, c.From.Addr()), c.From.Port())
		}
		return out
	}},
}

// TestMasqueradeAgainstKernel runs masqSteps through both twins and
// compares the outcomes, the counters and the connection tables.
func TestMasqueradeAgainstKernel(t *testing.T) {
	tw := masqTwins(t, masqRuleset)
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, masqSteps)
	compareNatCounters(t, tw, 4)
	// A translated source port (the reply tuple's dport that is not the
	// client's) is the clash's random one: P even when it equals a fixed
	// port (4 of them in 1024-65535, odds 4 in 64,512 per twin).
	compareNatConntrackMapped(t, tw, 4, nil, func(key string, port int, translated bool) bool {
		return (key == "sport" || key == "dport") && !masqPorts[port] || key == "dport" && translated
	}, 4)
}

// masqTwins builds the twins and loads ruleset into both (10.X. the
// topology's subnet, OUT fw's sink-side interface).
func masqTwins(t *testing.T, ruleset string) *twins {
	t.Helper()
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		rules := strings.ReplaceAll(ruleset, "10.X.", fmt.Sprintf("10.%d.", tp.Subnet))
		fw.restore(t, tp, 4, strings.ReplaceAll(rules, "-o OUT", "-o "+tp.FwOut.Ifname))
	})
	return tw
}
