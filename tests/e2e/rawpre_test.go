package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// raw PREROUTING judged before the route lookup (compiler/rawpre.go,
// bpf/xfw.c xfw_xdp_rawpre): the kernel runs raw PREROUTING before its
// routing, so it counts (and drops) packets its routing then drops: no
// route, IPv4 martians, IPv4 options it refuses, a TTL ending, forwarding
// refused. The same raw ruleset (counting rules, a user chain with RETURN,
// a MARK, a LOG, DROP rules) goes through xfw and iptables-legacy in twin
// topologies; every table's counters are compared after each packet.

// rawPreRuleset is the ruleset of TestRawPreroutingUnroutedAgainstKernel:
// raw PREROUTING that decides on the packet alone, and a filter table
// whose INPUT and FORWARD show what went on past it.
const rawPreRuleset = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:RAWPRE - [0:0]
-A PREROUTING -p udp -m udp --dport 7777 -j DROP
-A PREROUTING -p udp -j RAWPRE
-A PREROUTING -p udp -m ttl --ttl-eq 1
-A PREROUTING -p udp -m mark --mark 0x5
-A PREROUTING -p udp
-A RAWPRE -p udp -m udp --dport 7776 -j LOG --log-prefix "xfw-rawpre "
-A RAWPRE -p udp -m udp --dport 7776 -j MARK --set-mark 0x5
-A RAWPRE -p udp -m udp --dport 9998 -j RETURN
-A RAWPRE -p udp -d 10.0.0.0/8 -m udp --dport 7778 -j DROP
-A RAWPRE -p udp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp
-A INPUT -p udp -m mark --mark 0x5
-A FORWARD -p udp
-A FORWARD -p udp -m ttl --ttl-eq 63
COMMIT
`

// rawPreRuleset6 is rawPreRuleset for ip6tables (the hop limit, fd00::/8).
var rawPreRuleset6 = strings.NewReplacer("-m ttl --ttl-eq", "-m hl --hl-eq",
	"-d 10.0.0.0/8", "-d fd00::/8").Replace(rawPreRuleset)

// udpFromTo builds a UDP datagram of family fam src → dst:port from gen
// with TTL (hop limit) ttl (0: 64) and IPv4 options opts.
func udpFromTo(fam int, src, dst func(tp *nettest.Topology) netip.Addr, port uint16, ttl uint8,
	opts []byte) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		udp := nettest.UDP{SrcPort: 4000, DstPort: port, Payload: []byte("xfw-rawpre-probe")}
		var ip []byte
		if fam == 6 {
			ip = nettest.IPv6{Src: src(tp), Dst: dst(tp), HopLimit: ttl}.Packet(udp)
		} else {
			ip = nettest.IPv4{Src: src(tp), Dst: dst(tp), TTL: ttl, Options: opts}.Packet(udp)
		}
		return tp.GenToFw().Frame(ip)
	}
}

// TestRawPreroutingUnroutedAgainstKernel checks raw PREROUTING's counters
// and drops against the kernel for packets its routing delivers, forwards
// and drops, in both families. In IPv6 only the rules' counters are
// compared: the policies count the neighbour discovery and MLD the stacks
// send on their own.
func TestRawPreroutingUnroutedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, rawPreRuleset)
		fw.restore(t, tp, 6, rawPreRuleset6)
	})
	if t.Failed() {
		return
	}
	gen := func(fam int) func(tp *nettest.Topology) netip.Addr {
		return func(tp *nettest.Topology) netip.Addr {
			if fam == 6 {
				return tp.Gen.IPv6
			}
			return tp.Gen.IPv4
		}
	}
	at := func(fam int, net, host byte) func(tp *nettest.Topology) netip.Addr {
		return func(tp *nettest.Topology) netip.Addr {
			if fam == 6 {
				return in6(tp, uint16(net), uint16(host))
			}
			return in4(tp, net, host)
		}
	}
	fixed := func(a string) func(tp *nettest.Topology) netip.Addr {
		return func(*nettest.Topology) netip.Addr { return netip.MustParseAddr(a) }
	}
	for _, fam := range []int{4, 6} {
		loop := "127.0.0.1"
		if fam == 6 {
			loop = "::1"
		}
		probes := []typeProbe{
			{name: "udp to fw", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 1, 1), 9999, 0, nil)},
			{name: "udp forwarded to sink", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 2, 2), 9999, 0, nil)},
			{name: "udp without a route", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 9, 9), 9999, 0, nil)},
			{name: "udp without a route, RETURN", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 9, 9), 9998, 0, nil)},
			{name: "udp without a route, raw DROP", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 9, 9), 7777, 0, nil)},
			{name: "udp without a route, user chain DROP", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 9, 9), 7778, 0, nil)},
			{name: "udp forwarded, raw DROP", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 2, 2), 7777, 0, nil)},
			{name: "udp forwarded, LOG and MARK", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 2, 2), 7776, 0, nil)},
			{name: "udp to fw, LOG and MARK", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 1, 1), 7776, 0, nil)},
			{name: "udp forwarded with TTL 1", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 2, 2), 9999, 1, nil)},
			{name: "udp to a loopback address (martian)", fam: fam, frame: udpFromTo(fam, gen(fam), fixed(loop), 9999, 0, nil)},
			{name: "udp from a loopback address (martian)", fam: fam, frame: udpFromTo(fam, fixed(loop), at(fam, 1, 1), 9999, 0, nil)},
		}
		if fam == 4 {
			const recordRoute = 7 // too short: ip_rcv_options drops it after PREROUTING
			probes = append(probes, typeProbe{name: "udp to fw with a bad option", fam: fam,
				frame: udpFromTo(fam, gen(fam), at(fam, 1, 1), 9999, 0, []byte{recordRoute, 2})})
		}
		for _, pr := range probes {
			compareTableCounters(t, tw, pr, fam == 4)
		}
	}
}
