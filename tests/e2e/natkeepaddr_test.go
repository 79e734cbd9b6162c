package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// NAT without an address against the kernel: DNAT `--to-destination
// :PORT` and `:PORT-PORT` (the destination address kept, the port
// changed) in nat PREROUTING, forwarded and to fw's own address, and in
// nat OUTPUT; SNAT `--to-source :PORT` and `:PORT-PORT` (the source
// address kept), through xfw and iptables-legacy in twin topologies; what
// the clients and servers saw, the counters and `conntrack -L` compared.

// natKeepAddrRuleset is TestNatWithoutAddressAgainstKernel's ruleset (X:
// the topology's subnet).
const natKeepAddrRuleset = natTableStart + `-A PREROUTING -d 10.X.2.2/32 -p tcp -m tcp --dport 8085 -j DNAT --to-destination :80
-A PREROUTING -d 10.X.2.2/32 -p udp -m udp --dport 7030 -j DNAT --to-destination :7031-7032
-A PREROUTING -d 10.X.1.1/32 -p tcp -m tcp --dport 2224 -j DNAT --to-destination :7024
-A OUTPUT -d 10.X.2.2/32 -p udp -m udp --dport 5392 -j DNAT --to-destination :53
-A POSTROUTING -d 10.X.2.2/32 -p udp -m udp --dport 9010 -j SNAT --to-source :21000
-A POSTROUTING -d 10.X.2.2/32 -p udp -m udp --dport 9011 -j SNAT --to-source :21010-21019
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -d 10.X.1.1/32 -p tcp -m tcp --dport 7024 -m conntrack --ctstate NEW,DNAT --ctorigdstport 2224
-A FORWARD -d 10.X.2.2/32 -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst 10.X.2.2 --ctorigdstport 8085 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p udp -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A OUTPUT -d 10.X.2.2/32 -p udp -m udp --dport 53 -m conntrack --ctstate NEW --ctorigdstport 5392
COMMIT
`

// keepAddrUDP sends n datagrams from ns's source src (port base on) to
// dst, each waiting for its echo from servers on sink's ports, and says
// how many came back and which ports and sources the servers saw.
func keepAddrUDP(t *testing.T, tp *nettest.Topology, fromFw bool, dst netip.AddrPort, base uint16, n int, srvPorts ...uint16) string {
	ns, src := tp.GenNS, tp.Gen.IPv4
	if fromFw {
		ns, src = tp.FwNS, tp.FwOut.IPv4
	}
	var srvs []*nettest.UDPServer
	for _, port := range srvPorts {
		srvs = append(srvs, nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port), nettest.Echo()))
	}
	echoed := 0
	for i := 0; i < n; i++ {
		r := nettest.UDPSend(ns, dst, []byte("k"), nettest.ExpectReply(), nettest.WithTimeout(2*time.Second),
			nettest.WithSource(netip.AddrPortFrom(src, base+uint16(i))))
		if r.Outcome == nettest.OK {
			echoed++
		}
	}
	out := fmt.Sprintf("echoed %d of %d;", echoed, n)
	for i, srv := range srvs {
		for _, d := range srv.Received() {
			out += fmt.Sprintf(" server %d saw %s:%d;", srvPorts[i], natName(tp, d.From.Addr()), d.From.Port())
		}
		_ = srv.Close()
	}
	return out
}

// natKeepAddrSteps are TestNatWithoutAddressAgainstKernel's steps, in
// order.
var natKeepAddrSteps = []natStep{
	{"tcp to sink's port 8085, DNAT :80", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 80), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 8085),
			nettest.WithPayload([]byte("keep-addr")), nettest.WithTimeout(2*time.Second))
		return fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
	}},
	{"udp to sink's port 7030, DNAT :7031-7032 (the first port of the range)", func(t *testing.T, tp *nettest.Topology) string {
		return keepAddrUDP(t, tp, false, netip.AddrPortFrom(tp.Sink.IPv4, 7030), 27000, 2, 7031, 7032)
	}},
	{"tcp to fw's port 2224, DNAT :7024 (delivered locally)", natTCP("fw", func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(natAddr(tp, 1, 1), 7024)
	}, 2224)},
	{"nat OUTPUT: fw's own udp to sink's port 5392, DNAT :53", func(t *testing.T, tp *nettest.Topology) string {
		return keepAddrUDP(t, tp, true, netip.AddrPortFrom(tp.Sink.IPv4, 5392), 27100, 1, 53)
	}},
	{"udp to sink's port 9010, SNAT :21000", func(t *testing.T, tp *nettest.Topology) string {
		return keepAddrUDP(t, tp, false, netip.AddrPortFrom(tp.Sink.IPv4, 9010), 27200, 1, 9010)
	}},
	{"udp to sink's port 9011, SNAT :21010-21019 (a port of the range at random)", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 9011), nettest.Echo())
		defer srv.Close()
		r := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 9011), []byte("k"), nettest.ExpectReply(),
			nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, 27300)))
		out := fmt.Sprintf("client %s;", r.Outcome)
		for _, d := range srv.Received() {
			out += fmt.Sprintf(" server saw %s, port in 21010-21019 %v;", natName(tp, d.From.Addr()),
				d.From.Port() >= 21010 && d.From.Port() <= 21019)
		}
		return out
	}},
}

// TestNatWithoutAddressAgainstKernel runs natKeepAddrSteps through both
// twins and compares the outcomes, the counters and the connections.
func TestNatWithoutAddressAgainstKernel(t *testing.T) {
	tw := natTwins(t, natKeepAddrRuleset, nil)
	if tw == nil {
		return
	}
	runNatSteps(t, tw, natKeepAddrSteps)
	compareNatCounters(t, tw, 9)
	// The UDP clients bind ports below the ephemeral range (27000 on):
	// every port from 32768 up is a TCP client's ephemeral one, compared
	// as "P" (fixed ports inside the range once met an ephemeral one
	// equal to one of them, and the twins differed).
	compareNatConntrack(t, tw, func(key string, port int) bool {
		return (key == "sport" || key == "dport") && (port >= 32768 ||
			port >= 21010 && port <= 21019)
	}, 7)
}
