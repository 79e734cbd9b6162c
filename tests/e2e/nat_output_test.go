package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// DNAT and REDIRECT in nat OUTPUT against the kernel: fw's own
// connections to its own address, to gen's address and to sink,
// translated to sink or to fw's loopback, through xfw and through
// iptables-legacy in twin topologies; what the clients and servers saw,
// the counters of the nat table (POSTROUTING with the new output device)
// and of filter's rules that see the translated packet (OUTPUT with the
// first route's device, as the kernel's hook keeps it; INPUT the reply
// before its source is translated back) and `conntrack -L`, compared.

// natTableStart opens a nat table with its built-in chains, as
// iptables-save prints them.
const natTableStart = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"

// natOutputRuleset is TestNatOutputAgainstKernel's ruleset; X is the
// topology's subnet, FWOUT and FWIN fw's interfaces facing sink and gen.
const natOutputRuleset = natTableStart + `-A OUTPUT -d 10.X.1.1/32 -p tcp -m tcp --dport 8090 -j DNAT --to-destination 10.X.2.2:80
-A OUTPUT -d 10.X.1.2/32 -p tcp -m tcp --dport 8091 -j DNAT --to-destination 10.X.2.2:80
-A OUTPUT -d 10.X.2.2/32 -p udp -m udp --dport 5390 -j DNAT --to-destination 10.X.2.2:53
-A OUTPUT -d 10.X.1.1/32 -p tcp -m tcp --dport 8092 -j DNAT --to-destination 10.X.2.2:83
-A OUTPUT -d 10.X.2.2/32 -p tcp -m tcp --dport 2290 -j REDIRECT --to-ports 7090
-A OUTPUT -d 10.X.1.1/32 -p udp -m udp --dport 5391 -j DNAT --to-destination 10.X.2.2:54
-A POSTROUTING -o FWOUT -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN
-A POSTROUTING -o lo -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN
-A POSTROUTING -o FWOUT -p udp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.X.2.2/32 -p tcp -m tcp --sport 80 --tcp-flags SYN,ACK SYN,ACK
-A INPUT -s 10.X.2.2/32 -p udp -m udp --sport 53
-A INPUT -s 10.X.2.2/32 -p icmp -m conntrack --ctstate RELATED
-A INPUT -s 10.X.2.2/32 -i lo -p tcp -m tcp --sport 2290 --tcp-flags SYN,ACK SYN,ACK -m conntrack ! --ctstate INVALID
-A OUTPUT -d 10.X.2.2/32 -o FWOUT -p tcp -m tcp --dport 80
-A OUTPUT -d 10.X.2.2/32 -o lo -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst 10.X.1.1 --ctorigdstport 8090 -j ACCEPT
-A OUTPUT -d 10.X.2.2/32 -o FWIN -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst 10.X.1.2 -j ACCEPT
-A OUTPUT -d 10.X.2.2/32 -o lo -p tcp -m tcp --dport 80
-A OUTPUT -d 10.X.2.2/32 -p udp -m udp --dport 53 -m conntrack --ctorigdstport 5390
-A OUTPUT -d 10.X.2.2/32 -p tcp -m tcp --dport 83 -j REJECT --reject-with tcp-reset
-A OUTPUT -d 127.0.0.1/32 -o FWOUT -p tcp -m tcp --dport 7090 -m conntrack --ctstate NEW
COMMIT
`

// outTCP connects from fw to dst:port with a payload echoed by a server
// at server (in sink, or fw when local) and says what both ends saw.
func outTCP(dst, server func(tp *nettest.Topology) netip.AddrPort, local bool) func(*testing.T, *nettest.Topology) string {
	return outTCPNamed(dst, server, local, natName)
}

// outTCPNamed is outTCP with the server's view of the client named by
// name (natName, nat6Name).
func outTCPNamed(dst, server func(tp *nettest.Topology) netip.AddrPort, local bool,
	name func(*nettest.Topology, netip.Addr) string) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		srvNS := tp.SinkNS
		if local {
			srvNS = tp.FwNS
		}
		srv := nettest.StartTCPServer(t, srvNS, server(tp), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.FwNS, dst(tp), nettest.WithPayload([]byte("from-fw")),
			nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		if a.Outcome == nettest.OK {
			for _, c := range srv.WaitFinished(1, 2*time.Second) {
				out += fmt.Sprintf("; server saw %s data %q", name(tp, c.From.Addr()), c.Data)
			}
		}
		return out
	}
}

// outConnect connects from fw to dst and says how it ended.
func outConnect(dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		return string(nettest.TCPConnect(tp.FwNS, dst(tp), nettest.WithTimeout(2*time.Second)).Outcome)
	}
}

// natOutputTwins makes the twins of a nat OUTPUT test of family fam (4,
// 6) and loads ruleset into both: X is the topology's index in its
// subnets (natSubnetText), FWOUT and FWIN fw's interfaces facing sink and
// gen.
func natOutputTwins(t *testing.T, fam int, ruleset string) *twins {
	t.Helper()
	nettest.RequireRoot(t)
	tool := "iptables-legacy"
	if fam == 6 {
		tool = "ip6tables-legacy"
	}
	requireTools(t, tool, "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		subnet, named := natSubnetText(tp, fam)
		rules := strings.NewReplacer(named, subnet, "FWOUT", tp.FwOut.Ifname, "FWIN", tp.FwIn.Ifname).Replace(ruleset)
		fw.restore(t, tp, fam, rules)
	})
	return tw
}

// natLocalCase is a test of the host's own translations (nat OUTPUT,
// nat INPUT) against the kernel: the ruleset (natOutputTwins), the routes
// fw adds, the steps, the protocols whose connections `conntrack -L`
// compares and the keys and ports whose values differ by design (a
// client's ephemeral port), the rules the kernel must have counted at
// least (want) and the connections it must have listed (conns).
type natLocalCase struct {
	ruleset     string
	routes      func(t *testing.T, tp *nettest.Topology, fam int)
	steps       []natStep
	protos      []string
	ports       func(key string, port int) bool
	want, conns int
}

// natLocalAgainstKernel runs case c of family fam through both twins
// (sink and gen drop what the steps send them without a socket:
// natPortlessSinkDrop) and compares the outcomes, the counters and the
// connections.
func natLocalAgainstKernel(t *testing.T, fam int, c natLocalCase) {
	tw := natOutputTwins(t, fam, c.ruleset)
	if t.Failed() {
		return
	}
	tool := "iptables-legacy"
	if fam == 6 {
		tool = "ip6tables-legacy"
	}
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
		natPortlessSinkDrop(t, tp, tool)
		c.routes(t, tp, fam)
	})
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, c.steps)
	compareNatCountersFam(t, tw, fam, c.want)
	compareNatConntrackProtos(t, tw, fam, c.protos, c.ports, c.conns)
}

// natAt returns a function giving 10.X.net.host:port of a topology.
func natAt(net, host byte, port uint16) func(tp *nettest.Topology) netip.AddrPort {
	return func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(natAddr(tp, net, host), port)
	}
}

// natUDPEcho sends two datagrams from the client's namespace and source
// (client) to dst, echoed by a server at sink's port 53, and says what
// both ends saw.
func natUDPEcho(client func(tp *nettest.Topology) (string, netip.AddrPort),
	dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return natUDPEchoAt(natAt(2, 2, 53), natName, client, dst)
}

// natUDPEchoAt is natUDPEcho with the server at server and its view of
// the client named by name (natName, nat6Name).
func natUDPEchoAt(server func(tp *nettest.Topology) netip.AddrPort, name func(*nettest.Topology, netip.Addr) string,
	client func(tp *nettest.Topology) (string, netip.AddrPort),
	dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartUDPServer(t, tp.SinkNS, server(tp), nettest.Echo())
		defer srv.Close()
		ns, src := client(tp)
		out := ""
		for i := 0; i < 2; i++ {
			a := nettest.UDPSend(ns, dst(tp), []byte("q"), nettest.ExpectReply(),
				nettest.WithTimeout(2*time.Second), nettest.WithSource(src))
			out += fmt.Sprintf("datagram %d: %s reply %q; ", i, a.Outcome, a.Reply)
		}
		for _, d := range srv.Wait(2, 2*time.Second) {
			out += "server saw " + name(tp, d.From.Addr()) + "; "
		}
		return out
	}
}

// natOutputSteps are TestNatOutputAgainstKernel's steps, in order.
var natOutputSteps = []natStep{
	{"tcp to fw's own address, translated to sink", outTCP(natAt(1, 1, 8090), natAt(2, 2, 80), false)},
	{"tcp to gen, translated to sink (another device)", outTCP(natAt(1, 2, 8091), natAt(2, 2, 80), false)},
	{"udp to sink, another port; the second datagram translated as a later packet", natUDPEcho(
		func(tp *nettest.Topology) (string, netip.AddrPort) {
			return tp.FwNS, netip.AddrPortFrom(tp.FwOut.IPv4, 31090)
		}, natAt(2, 2, 5390))},
	{"udp to fw's own address translated to a closed port of sink: the port unreachable translated back", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.UDPSend(tp.FwNS, natAt(1, 1, 5391)(tp), []byte("q"),
			nettest.ExpectReply(), nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"tcp translated, then rejected in filter OUTPUT: the reset from the original destination", outConnect(natAt(1, 1, 8092))},
	{"tcp to sink redirected to fw's loopback", outTCP(natAt(2, 2, 2290), func(*nettest.Topology) netip.AddrPort {
		return netip.MustParseAddrPort("127.0.0.1:7090")
	}, true)},
}

// TestNatOutputAgainstKernel runs natOutputSteps through both twins and
// compares the outcomes, the counters and the connection tables.
func TestNatOutputAgainstKernel(t *testing.T) {
	tw := natOutputTwins(t, 4, natOutputRuleset)
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, natOutputSteps)
	compareNatCounters(t, tw, 11)
	// fw's UDP client binds 31090, below the ephemeral range: every port
	// from 32768 up is a TCP client's ephemeral one, compared as "P".
	compareNatConntrack(t, tw, func(key string, port int) bool {
		return (key == "sport" || key == "dport") && port >= 32768
	}, 4)
}
