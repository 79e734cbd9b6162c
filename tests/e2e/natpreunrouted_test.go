package e2e

// PREROUTING's chains walked after xfw's route lookup (nat PREROUTING,
// and mangle PREROUTING with a rewriting target), for the packets that
// lookup finds the kernel's routing drops (bpf/xfw.c
// xfw_xdp_unrouted_walk): the kernel runs them before its routing
// decision, so they count such packets (nat PREROUTING every packet of a
// flow no packet confirmed), and a DNAT there picks the route: a datagram
// to an address without a route that nat PREROUTING translates to a
// routed one is forwarded or delivered. Twin topologies, every table's
// counters compared with iptables-legacy's after each datagram, and
// where the datagrams to sink arrived.

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Addresses of TestNatPreroutingUnroutedAgainstKernel, the same in both
// twins (their subnets differ, and the counters are compared by rule):
// one without a route, one of fw's (on lo), one of sink's (routed there).
const (
	prenatNone4, prenatFw4, prenatSink4 = "203.0.113.9", "192.0.2.1", "192.0.2.2"
	prenatNone6, prenatFw6, prenatSink6 = "2001:db8:9::9", "2001:db8:1::1", "2001:db8:2::2"
)

// natPreUnroutedRules is TestNatPreroutingUnroutedAgainstKernel's IPv4
// ruleset: nat PREROUTING counts UDP, translates datagrams to the
// unrouted address (ports 7775: to sink, 7774: to fw) and a TTL 1
// datagram to port 7773 (to fw); filter counts what reached INPUT and
// FORWARD.
var natPreUnroutedRules = fmt.Sprintf(`*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p udp
-A PREROUTING -p udp -m ttl --ttl-eq 1
-A PREROUTING -p udp -d %[1]s -m udp --dport 7775 -j DNAT --to-destination %[2]s
-A PREROUTING -p udp -d %[1]s -m udp --dport 7774 -j DNAT --to-destination %[3]s
-A PREROUTING -p udp -m ttl --ttl-eq 1 -m udp --dport 7773 -j DNAT --to-destination %[3]s
-A PREROUTING -p udp -m udp --dport 7775
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp
-A INPUT -p udp -m conntrack --ctstate NEW
-A INPUT -p udp -m conntrack --ctstate DNAT
-A FORWARD -p udp
-A FORWARD -p udp -m conntrack --ctstate NEW
-A FORWARD -p udp -m conntrack --ctstate DNAT
COMMIT
`, prenatNone4, prenatSink4, prenatFw4)

// natPreUnroutedRules6 is natPreUnroutedRules for ip6tables.
var natPreUnroutedRules6 = strings.NewReplacer("-m ttl --ttl-eq", "-m hl --hl-eq", prenatNone4, prenatNone6,
	prenatSink4, prenatSink6, prenatFw4, prenatFw6).Replace(natPreUnroutedRules)

// prenatAddrs gives fw and sink of tp the addresses of both families
// (prenatFw*, prenatSink*) and fw routes to sink's.
func prenatAddrs(t *testing.T, tp *nettest.Topology) {
	nettest.MustExec(t, tp.FwNS, "ip", "addr", "add", prenatFw4+"/32", "dev", "lo")
	nettest.MustExec(t, tp.FwNS, "ip", "-6", "addr", "add", prenatFw6+"/128", "dev", "lo")
	nettest.MustExec(t, tp.SinkNS, "ip", "addr", "add", prenatSink4+"/32", "dev", nettest.SinkIfname)
	nettest.MustExec(t, tp.SinkNS, "ip", "-6", "addr", "add", prenatSink6+"/128", "dev", nettest.SinkIfname, "nodad")
	nettest.MustExec(t, tp.FwNS, "ip", "route", "add", prenatSink4+"/32", "via", in4(tp, 2, 2).String())
	nettest.MustExec(t, tp.FwNS, "ip", "-6", "route", "add", prenatSink6+"/128", "via", in6(tp, 2, 2).String())
}

// udpProbe builds a UDP datagram gen:sport → dst:dport of family fam
// with TTL (hop limit) ttl (0: 64).
func udpProbe(fam int, dst func(tp *nettest.Topology) netip.Addr, sport, dport uint16, ttl uint8) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		udp := nettest.UDP{SrcPort: sport, DstPort: dport, Payload: []byte("xfw-prenat-probe")}
		var ip []byte
		if fam == 6 {
			ip = nettest.IPv6{Src: tp.Gen.IPv6, Dst: dst(tp), HopLimit: ttl}.Packet(udp)
		} else {
			ip = nettest.IPv4{Src: tp.Gen.IPv4, Dst: dst(tp), TTL: ttl}.Packet(udp)
		}
		return tp.GenToFw().Frame(ip)
	}
}

// fixedAddr returns address a, whatever the topology.
func fixedAddr(a string) func(tp *nettest.Topology) netip.Addr {
	return func(*nettest.Topology) netip.Addr { return netip.MustParseAddr(a) }
}

// unroutedProbe is a datagram of an unrouted-packet test and the sink
// arrivals it makes in the kernel (1: it reaches sink).
type unroutedProbe struct {
	typeProbe
	port   uint16
	atSink bool
}

// TestNatPreroutingUnroutedAgainstKernel: nat PREROUTING counts every
// datagram of a new flow the routing drops (no route, TTL ending), each
// one, as none confirms the flow; its DNAT of a datagram to an address
// without a route sends it to sink (forwarded, FORWARD counts it) or to
// fw (INPUT), and a TTL 1 datagram the routing would drop to fw; a flow
// DNAT confirmed is translated before the route lookup for its next
// datagram. Both families.
func TestNatPreroutingUnroutedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		prenatAddrs(t, tp)
		silenceSink(t, tp)
		fw.restore(t, tp, 4, natPreUnroutedRules)
		fw.restore(t, tp, 6, natPreUnroutedRules6)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		fw, sink, none := fixedAddr(prenatFw4), fixedAddr(prenatSink4), fixedAddr(prenatNone4)
		if fam == 6 {
			fw, sink, none = fixedAddr(prenatFw6), fixedAddr(prenatSink6), fixedAddr(prenatNone6)
		}
		probe := func(name string, dst func(*nettest.Topology) netip.Addr, sport, dport uint16, ttl uint8, atSink bool) unroutedProbe {
			return unroutedProbe{typeProbe: typeProbe{name: name, fam: fam, frame: udpProbe(fam, dst, sport, dport, ttl)},
				port: dport, atSink: atSink}
		}
		probes := []unroutedProbe{
			probe("udp to fw", fw, 4100, 9999, 0, false),
			probe("udp forwarded to sink", sink, 4101, 9999, 0, true),
			probe("udp without a route", none, 4102, 9999, 0, false),
			probe("the same flow's second datagram without a route", none, 4102, 9999, 0, false),
			probe("udp forwarded with TTL 1", sink, 4103, 9999, 1, false),
			probe("udp without a route, DNAT to sink", none, 4104, 7775, 0, true),
			probe("that flow's second datagram (translated before routing)", none, 4104, 7775, 0, true),
			probe("udp without a route, DNAT to fw", none, 4105, 7774, 0, false),
			probe("udp with TTL 1 to sink, DNAT to fw", sink, 4106, 7773, 1, false),
			probe("udp with TTL 1 without a route, DNAT to sink", none, 4107, 7775, 1, false),
		}
		for _, pr := range probes {
			compareSinkArrival(t, tw, pr)
		}
	}
}

// compareSinkArrival sends pr through both twins, compares every table's
// counters with the kernel's (policies in IPv4 only: IPv6's count the
// stacks' own neighbour discovery) and checks whether the datagram
// arrived at sink.
func compareSinkArrival(t *testing.T, tw *twins, pr unroutedProbe) {
	t.Helper()
	isProbe := func(c nettest.Captured) bool {
		return !c.Outgoing && c.Protocol == nettest.ProtoUDP && c.DstPort == pr.port
	}
	caps := map[string]*nettest.Capture{}
	for kind, tp := range tw.tps {
		caps[kind] = nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, isProbe)
	}
	compareTableCounters(t, tw, pr.typeProbe, pr.fam == 4)
	time.Sleep(50 * time.Millisecond)
	for kind, c := range caps {
		if got := len(c.Stop()) > 0; got != pr.atSink {
			t.Errorf("IPv%d %s: %s: arrived at sink %v, want %v", pr.fam, pr.name, kind, got, pr.atSink)
		}
	}
}

// mangleRewriteRules is TestMangleRewritePreroutingUnroutedAgainstKernel's
// mangle PREROUTING: rawPreRuleset's rules with a TOS rewrite, which xfw
// judges after its route lookup; a TTL 1 datagram to port 7772 gets its
// TTL raised (kept in IPv4: a forward with TTL 1 in both is the same
// probe); every UDP datagram counted.
var mangleRewriteRules = strings.Replace(strings.Replace(rawPreRuleset, "*raw", "*mangle", 1),
	"-A PREROUTING -p udp\n", "-A PREROUTING -p udp\n-A PREROUTING -p udp -m udp --dport 7771 -j TOS --set-tos 0x10\n", 1)

// TestMangleRewritePreroutingUnroutedAgainstKernel is
// TestManglePreroutingUnroutedAgainstKernel with a TOS target in mangle
// PREROUTING: xfw walks that chain after its route lookup, and for the
// packets the routing drops up to its end (counted as the kernel counts
// them, its DROP rules dropping them).
func TestMangleRewritePreroutingUnroutedAgainstKernel(t *testing.T) {
	rules6 := strings.NewReplacer("-m ttl --ttl-eq", "-m hl --hl-eq", "-d 10.0.0.0/8", "-d fd00::/8").Replace(mangleRewriteRules)
	preroutingUnrouted(t, mangleRewriteRules, rules6)
}

// mangleTTLPreRules is TestMangleTTLPreroutingAgainstKernel's IPv4
// ruleset: mangle PREROUTING raises (7781), sets to 1 (7782) and lowers
// (7784) the TTL of UDP datagrams; the chains count by TTL where the
// route decided.
const mangleTTLPreRules = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p udp -m udp --dport 7781 -j TTL --ttl-inc 1
-A PREROUTING -p udp -m udp --dport 7782 -j TTL --ttl-set 1
-A PREROUTING -p udp -m udp --dport 7784 -j TTL --ttl-dec 1
-A PREROUTING -p udp -m ttl --ttl-eq 1
-A PREROUTING -p udp
-A INPUT -p udp -m ttl --ttl-eq 1
-A FORWARD -p udp -m ttl --ttl-eq 1
-A FORWARD -p udp
-A POSTROUTING -p udp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp
-A FORWARD -p udp
COMMIT
`

// mangleTTLPreRules6 is mangleTTLPreRules for ip6tables (HL).
var mangleTTLPreRules6 = strings.NewReplacer("-j TTL --ttl-", "-j HL --hl-", "-m ttl --ttl-eq", "-m hl --hl-eq").
	Replace(mangleTTLPreRules)

// TestMangleTTLPreroutingAgainstKernel: the kernel's routing decides on
// the TTL mangle PREROUTING left: a datagram with TTL 1 whose TTL it
// raises is forwarded, one whose TTL it sets to 1 or lowers to 1 gets
// "time exceeded" before FORWARD. xfw routes such a packet again with
// its new TTL (the reroute probe, compiler/mark_route.go). Counters of
// every table (policies, which count the time exceeded errors in OUTPUT,
// in IPv4) and the arrivals at sink, in both families.
func TestMangleTTLPreroutingAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		prenatAddrs(t, tp)
		silenceSink(t, tp)
		fw.restore(t, tp, 4, mangleTTLPreRules)
		fw.restore(t, tp, 6, mangleTTLPreRules6)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		fw, sink := fixedAddr(prenatFw4), fixedAddr(prenatSink4)
		if fam == 6 {
			fw, sink = fixedAddr(prenatFw6), fixedAddr(prenatSink6)
		}
		probe := func(name string, dst func(*nettest.Topology) netip.Addr, sport, dport uint16, ttl uint8, atSink bool) unroutedProbe {
			return unroutedProbe{typeProbe: typeProbe{name: name, fam: fam, frame: udpProbe(fam, dst, sport, dport, ttl)},
				port: dport, atSink: atSink}
		}
		probes := []unroutedProbe{
			probe("TTL 1 raised to 2: forwarded", sink, 4200, 7781, 1, true),
			probe("TTL 64 raised: forwarded", sink, 4201, 7781, 0, true),
			probe("TTL 1 raised, to fw", fw, 4202, 7781, 1, false),
			probe("TTL 64 set to 1: time exceeded", sink, 4203, 7782, 0, false),
			probe("TTL 2 lowered to 1: time exceeded", sink, 4204, 7784, 2, false),
			probe("TTL 3 lowered to 2: forwarded", sink, 4205, 7784, 3, true),
			probe("TTL 1 unchanged: time exceeded", sink, 4206, 9999, 1, false),
		}
		for _, pr := range probes {
			compareSinkArrival(t, tw, pr)
		}
	}
}

// TestConnmarkRoutesUnroutedAgainstKernel is TestMarkRoutesUnroutedAgainstKernel
// with the mark restored from the connection (CONNMARK in mangle
// PREROUTING, which xfw walks after its route lookup): datagrams to a
// destination only table 100 routes (fwmark 1) arrive on the second link
// when their connection's mark is 1, the first datagram of each flow and
// the next; the others have no route (counted in PREROUTING all the
// same).
func TestConnmarkRoutesUnroutedAgainstKernel(t *testing.T) {
	const rules = `*mangle
-A PREROUTING -i in0 -p udp -m udp --dport 7001 -j CONNMARK --set-mark 0x1
-A PREROUTING -i in0 -p udp -m udp --dport 7003 -j CONNMARK --set-mark 0x2
-A PREROUTING -i in0 -p udp -j CONNMARK --restore-mark
-A PREROUTING -p udp -m mark --mark 0x1
-A PREROUTING -p udp
-A FORWARD -p udp -m mark --mark 0x1
COMMIT
*filter
-A FORWARD -o alt0 -p udp
-A FORWARD -o out0 -p udp
-A FORWARD -p udp -m conntrack --ctstate NEW
COMMIT
`
	tw := altTwins(t, rules)
	if t.Failed() {
		return
	}
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", in4(tp, 9, 9).String()+"/32", "via", altPeer4,
			"dev", altFwIf, "table", altTable)
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "route", "add", in6(tp, 9, 9).String()+"/128", "via", altPeer6,
			"dev", altFwIf, "table", altTable)
	})
	want := map[uint16]string{7001: altPeerIf, 7002: "nowhere", 7003: "nowhere"}
	for _, fam := range []int{4, 6} {
		for _, port := range []uint16{7001, 7002, 7003} {
			for _, which := range []string{"first", "second"} {
				pr := typeProbe{name: fmt.Sprintf("udp to a table-100 destination, port %d, %s datagram", port, which),
					fam: fam, frame: udpTo(fam, 9, 9, port)}
				compareArrivals(t, tw, pr, port, want[port])
			}
		}
	}
}

// TestTOSRoutesAgainstKernel: the kernel's route lookup takes the TOS
// mangle PREROUTING left (`ip rule tos 0x10 lookup 100`): datagrams whose
// TOS a TOS or DSCP rule sets to 0x10 reach a destination only table 100
// routes, out of the second link, and sink's address by table 100's
// route, out of that link too; the others have no route, or keep their
// main-table route. xfw routes a
// packet whose TOS PREROUTING changed again (the reroute probe); IPv6's
// route lookups take the traffic class (ip -6 rule tos), as the kernel's
// flow does. Both families.
func TestTOSRoutesAgainstKernel(t *testing.T) {
	const rules = `*mangle
-A PREROUTING -i in0 -p udp -m udp --dport 7001 -j TOS --set-tos 0x10
-A PREROUTING -i in0 -p udp -m udp --dport 7003 -j DSCP --set-dscp 0x04
-A PREROUTING -p udp -m tos --tos 0x10
-A PREROUTING -p udp
COMMIT
*filter
-A FORWARD -o alt0 -p udp
-A FORWARD -o out0 -p udp
COMMIT
`
	tw := altTwins(t, rules)
	if t.Failed() {
		return
	}
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "rule", "add", "tos", "0x10", "lookup", altTable)
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "rule", "add", "tos", "0x10", "lookup", altTable)
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "route", "add", in6(tp, 9, 9).String()+"/128", "via", altPeer6,
			"dev", altFwIf, "table", altTable)
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", in4(tp, 9, 9).String()+"/32", "via", altPeer4,
			"dev", altFwIf, "table", altTable)
	})
	for _, c := range []struct {
		host byte
		port uint16
		want string
	}{
		{9, 7001, altPeerIf}, {9, 7002, "nowhere"}, {9, 7003, altPeerIf},
		{2, 7001, altPeerIf}, {2, 7002, nettest.SinkIfname},
	} {
		pr := typeProbe{name: fmt.Sprintf("udp to 10.x.%d.%d, port %d", c.host, c.host, c.port), fam: 4,
			frame: udpTo(4, c.host, c.host, c.port)}
		compareArrivals(t, tw, pr, c.port, c.want)
		pr = typeProbe{name: fmt.Sprintf("udp to fd00:x:%d::%d, port %d", c.host, c.host, c.port), fam: 6,
			frame: udpTo(6, c.host, c.host, c.port)}
		compareArrivals(t, tw, pr, c.port, c.want)
	}
}
