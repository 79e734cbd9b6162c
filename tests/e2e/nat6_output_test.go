package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// IPv6 DNAT and REDIRECT in nat OUTPUT against the kernel: fw's own
// connections to its own addresses (directly and through Docker's jump to
// DOCKER for local destinations), to gen's address and to sink,
// translated to sink, to fw's own address or redirected to ::1, through xfw and ip6tables-legacy in twin topologies;
// what the clients and servers saw, the nat table's counters
// (POSTROUTING with the new output device), filter's rules that see the
// translated packet (OUTPUT with the first route's device, INPUT the
// reply before its source is translated back) and `conntrack -L -f
// ipv6`, compared.

// nat6OutputRuleset is TestNat6OutputAgainstKernel's ruleset; X is the
// topology's index, FWOUT and FWIN fw's interfaces facing sink and gen.
const nat6OutputRuleset = natTableStart + `:DOCKER - [0:0]
-A OUTPUT ! -d ::1/128 -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT -d fd00:X:1::1/128 -p tcp -m tcp --dport 8090 -j DNAT --to-destination [fd00:X:2::2]:80
-A OUTPUT -d fd00:X:1::2/128 -p tcp -m tcp --dport 8091 -j DNAT --to-destination [fd00:X:2::2]:80
-A OUTPUT -d fd00:X:2::2/128 -p udp -m udp --dport 5390 -j DNAT --to-destination [fd00:X:2::2]:53
-A OUTPUT -d fd00:X:1::1/128 -p tcp -m tcp --dport 8092 -j DNAT --to-destination [fd00:X:2::2]:83
-A OUTPUT -d fd00:X:2::2/128 -p tcp -m tcp --dport 2290 -j DNAT --to-destination [fd00:X:1::1]:7090
-A OUTPUT -d fd00:X:2::2/128 -p tcp -m tcp --dport 2291 -j REDIRECT --to-ports 7091
-A OUTPUT -d fd00:X:1::1/128 -p udp -m udp --dport 5391 -j DNAT --to-destination [fd00:X:2::2]:54
-A POSTROUTING -o FWOUT -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN
-A POSTROUTING -o lo -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN
-A POSTROUTING -o FWOUT -p udp
-A DOCKER -i docker0 -j RETURN
-A DOCKER ! -i docker0 -p tcp -m tcp --dport 8093 -j DNAT --to-destination [fd00:X:2::2]:80
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s fd00:X:2::2/128 -p tcp -m tcp --sport 80 --tcp-flags SYN,ACK SYN,ACK
-A INPUT -s fd00:X:2::2/128 -p udp -m udp --sport 53
-A INPUT -s fd00:X:2::2/128 -p ipv6-icmp -m conntrack --ctstate RELATED
-A INPUT -s fd00:X:2::2/128 -i lo -p tcp -m tcp --sport 2290 --tcp-flags SYN,ACK SYN,ACK -m conntrack ! --ctstate INVALID
-A INPUT -s fd00:X:2::2/128 -i lo -p tcp -m tcp --sport 2291 --tcp-flags SYN,ACK SYN,ACK -m conntrack ! --ctstate INVALID
-A OUTPUT -d fd00:X:2::2/128 -o FWOUT -p tcp -m tcp --dport 80
-A OUTPUT -d fd00:X:2::2/128 -o lo -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst fd00:X:1::1 --ctorigdstport 8090 -j ACCEPT
-A OUTPUT -d fd00:X:2::2/128 -o lo -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst fd00:X:2::1 --ctorigdstport 8093 -j ACCEPT
-A OUTPUT -d fd00:X:2::2/128 -o FWIN -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst fd00:X:1::2 -j ACCEPT
-A OUTPUT -d fd00:X:2::2/128 -o lo -p tcp -m tcp --dport 80
-A OUTPUT -d fd00:X:2::2/128 -p udp -m udp --dport 53 -m conntrack --ctorigdstport 5390
-A OUTPUT -d fd00:X:2::2/128 -p tcp -m tcp --dport 83 -j REJECT --reject-with tcp-reset
-A OUTPUT -d fd00:X:1::1/128 -o FWOUT -p tcp -m tcp --dport 7090 -m conntrack --ctstate NEW
-A OUTPUT -d ::1/128 -o FWOUT -p tcp -m tcp --dport 7091 -m conntrack --ctstate NEW --ctorigdstport 2291
COMMIT
`

// out6TCP is outTCP over IPv6.
func out6TCP(dst, server func(tp *nettest.Topology) netip.AddrPort, local bool) func(*testing.T, *nettest.Topology) string {
	return outTCPNamed(dst, server, local, nat6Name)
}

// out6UDP sends two datagrams from fw's sink-side address, port 31090, to
// dst, echoed by a server at sink's port 53, and says what both ends saw.
func out6UDP(dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return natUDPEchoAt(nat6At(2, 2, 53), nat6Name, func(tp *nettest.Topology) (string, netip.AddrPort) {
		return tp.FwNS, netip.AddrPortFrom(tp.FwOut.IPv6, 31090)
	}, dst)
}

// nat6OutputSteps are TestNat6OutputAgainstKernel's steps, in order.
var nat6OutputSteps = []natStep{
	{"tcp to fw's own address, translated to sink", out6TCP(nat6At(1, 1, 8090), nat6At(2, 2, 80), false)},
	{"tcp to fw's other address's published port (Docker's jump for local destinations)",
		out6TCP(nat6At(2, 1, 8093), nat6At(2, 2, 80), false)},
	{"tcp to gen, translated to sink (another device)", out6TCP(nat6At(1, 2, 8091), nat6At(2, 2, 80), false)},
	{"udp to sink, another port; the second datagram translated as a later packet", out6UDP(nat6At(2, 2, 5390))},
	{"udp to fw's own address translated to a closed port of sink: the port unreachable translated back",
		func(t *testing.T, tp *nettest.Topology) string {
			a := nettest.UDPSend(tp.FwNS, nat6At(1, 1, 5391)(tp), []byte("q"), nettest.ExpectReply(),
				nettest.WithTimeout(2*time.Second))
			return string(a.Outcome)
		}},
	{"tcp translated, then rejected in filter OUTPUT: the reset from the original destination", outConnect(nat6At(1, 1, 8092))},
	{"tcp to sink translated to fw's own address", out6TCP(nat6At(2, 2, 2290), nat6At(1, 1, 7090), true)},
	{"tcp to sink redirected to fw's loopback (::1)", out6TCP(nat6At(2, 2, 2291), func(*nettest.Topology) netip.AddrPort {
		return netip.MustParseAddrPort("[::1]:7091")
	}, true)},
}

// TestNat6OutputAgainstKernel runs nat6OutputSteps through both twins and
// compares the outcomes, the counters and the connection tables.
func TestNat6OutputAgainstKernel(t *testing.T) {
	tw := natOutputTwins(t, 6, nat6OutputRuleset)
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, nat6OutputSteps)
	compareNatCountersFam(t, tw, 6, 17)
	// fw's UDP client binds 31090, below the ephemeral range: every port
	// from 32768 up is a TCP client's ephemeral one, compared as "P".
	compareNatConntrackFam(t, tw, 6, func(key string, port int) bool {
		return (key == "sport" || key == "dport") && port >= 32768
	}, 6)
}
