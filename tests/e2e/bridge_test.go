package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Bridged traffic against the kernel (br_netfilter): fw's in0 and out0
// become the ports of a bridge br0, gen and sink share a subnet
// (10.X.9.0/24, fd00:X:9::/64) through it, br0 has an address of its own.
// With bridge-nf-call-iptables / -ip6tables on, frames bridged between the
// ports walk FORWARD (-i br0 -o br0, -m physdev's ports, connection
// tracking) and frames for br0's address INPUT; off, they pass unseen.

// bridgeMAC is br0's address, set so that frames can be built for it.
const bridgeMAC = "02:00:00:00:09:fe"

// bridgeAddr returns host h of the bridged subnet in family fam.
func bridgeAddr(_ *nettest.Topology, fam int, h byte) netip.Addr {
	if fam == 6 {
		return netip.MustParseAddr(fmt.Sprintf("fd00:209::%x", h))
	}
	return netip.AddrFrom4([4]byte{192, 168, 209, h})
}

// bridgeSetup turns tp's fw into a bridge between gen and sink, with
// static neighbours; silent: gen and sink drop the UDP they receive (no
// ICMP errors answering the probes).
func bridgeSetup(t *testing.T, tp *nettest.Topology, silent bool) {
	t.Helper()
	for _, ns := range []string{tp.GenNS, tp.SinkNS} {
		for _, cmd := range []string{"iptables-legacy", "ip6tables-legacy"} {
			if silent {
				nettest.MustExec(t, ns, cmd, "-A", "INPUT", "-p", "udp", "-j", "DROP")
			}
		}
	}
	fw := [][]string{
		{"ip", "link", "add", "br0", "type", "bridge"},
		{"ip", "link", "set", "br0", "address", bridgeMAC},
		{"ip", "addr", "flush", "dev", "in0"},
		{"ip", "addr", "flush", "dev", "out0"},
		{"ip", "link", "set", "in0", "master", "br0"},
		{"ip", "link", "set", "out0", "master", "br0"},
		{"ip", "link", "set", "br0", "up"},
		{"sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1"},
	}
	for _, argv := range fw {
		nettest.MustExec(t, tp.FwNS, argv...)
	}
	br, _ := net.ParseMAC(bridgeMAC)
	hosts := []struct {
		ns, ifname string
		mac        net.HardwareAddr
		host       byte
	}{{tp.GenNS, "eth0", tp.Gen.MAC, 1}, {tp.SinkNS, "eth0", tp.Sink.MAC, 2}, {tp.FwNS, "br0", br, 0xfe}}
	for _, h := range hosts {
		for _, fam := range []int{4, 6} {
			a := bridgeAddr(tp, fam, h.host)
			bits := 24
			extra := []string{}
			if fam == 6 {
				bits, extra = 64, []string{"nodad"}
			}
			nettest.MustExec(t, h.ns, append([]string{"ip", "addr", "add", fmt.Sprintf("%s/%d", a, bits), "dev", h.ifname}, extra...)...)
			for _, o := range hosts {
				if o.ns != h.ns {
					if err := nettest.SetNeighbor(h.ns, h.ifname, bridgeAddr(tp, fam, o.host), o.mac); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

// bridgedUDP builds a UDP datagram from gen to sink (back: from sink to
// gen, ports swapped), to br0 instead with toBridge, as a frame the
// bridge forwards (or takes for itself).
func bridgedUDP(fam int, port uint16, back, toBridge bool) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		eth := nettest.Ethernet{Src: tp.Gen.MAC, Dst: tp.Sink.MAC}
		src, dst := bridgeAddr(tp, fam, 1), bridgeAddr(tp, fam, 2)
		udp := nettest.UDP{SrcPort: 4000, DstPort: port, Payload: []byte("xfw-bridge-probe")}
		if back {
			eth = nettest.Ethernet{Src: tp.Sink.MAC, Dst: tp.Gen.MAC}
			src, dst = dst, src
			udp.SrcPort, udp.DstPort = port, 4000
		}
		if toBridge {
			eth.Dst, _ = net.ParseMAC(bridgeMAC)
			dst = bridgeAddr(tp, fam, 0xfe)
		}
		return eth.Frame(nettest.IPPacket(src, dst, udp))
	}
}

// bridgeRuleset counts bridged and delivered UDP by physdev's options
// (the input port of a datagram for br0 included), by the bridge as -i
// and -o, by connection state, and drops some by source, by input and by
// output port.
const bridgeRuleset = `*filter
-A INPUT -p udp -m physdev --physdev-is-in
-A INPUT -p udp -m physdev ! --physdev-is-in
-A INPUT -p udp -m physdev ! --physdev-is-bridged
-A INPUT -p udp -m physdev --physdev-in in0
-A INPUT -p udp -m physdev ! --physdev-in out+ -m physdev --physdev-in in+
-A INPUT -p udp -m physdev --physdev-in out0
-A INPUT -p udp -i br0 -m conntrack --ctstate NEW
-A FORWARD -p udp -i br0 -o br0
-A FORWARD -p udp -m physdev --physdev-is-bridged
-A FORWARD -p udp -m physdev --physdev-in in0 --physdev-out out0
-A FORWARD -p udp -m physdev --physdev-in out+ --physdev-out in0
-A FORWARD -p udp -m physdev ! --physdev-in in0 ! --physdev-is-out
-A FORWARD -p udp -m physdev --physdev-is-in --physdev-is-out ! --physdev-out out+
-A FORWARD -p udp -m conntrack --ctstate NEW
-A FORWARD -p udp -m conntrack --ctstate ESTABLISHED
-A FORWARD -p udp -s 192.168.209.1 --dport 9701 -j DROP
-A FORWARD -p udp -m physdev --physdev-in in0 --dport 9702 -j DROP
-A FORWARD -p udp -m physdev --physdev-out in0 --physdev-is-bridged --sport 9703 -j DROP
-A FORWARD -p udp --dport 9700 -j ACCEPT
-A FORWARD -p udp
COMMIT
`

// bridgeRules returns the ruleset for family fam: gen's address in its
// spelling.
func bridgeRules(fam int, rules string) string {
	if fam == 6 {
		return strings.ReplaceAll(rules, "192.168.209.1", "fd00:209::1")
	}
	return rules
}

// zeroCounters zeroes fw's filter counters in both families: what the
// setup sent is not compared.
func zeroCounters(t *testing.T, tp *nettest.Topology, fw firewall) {
	t.Helper()
	for _, fam := range []int{4, 6} {
		nettest.MustExec(t, tp.FwNS, append(fw.cmd(fam, ""), "-w", lockWait, "-Z")...)
	}
}

// TestBridgedAgainstKernel sends bridged datagrams both ways and datagrams
// for the bridge's own address through xfw and iptables-legacy, every
// table's counters compared after each, in both families.
func TestBridgedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		fw.restore(t, tp, 4, bridgeRules(4, bridgeRuleset))
		fw.restore(t, tp, 6, bridgeRules(6, bridgeRuleset))
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		for _, pr := range []typeProbe{
			{name: "gen to sink, new", frame: bridgedUDP(fam, 9700, false, false)},
			{name: "sink to gen, reply", frame: bridgedUDP(fam, 9700, true, false), fromSink: true},
			{name: "gen to sink, again", frame: bridgedUDP(fam, 9700, false, false)},
			{name: "dropped by source", frame: bridgedUDP(fam, 9701, false, false)},
			{name: "dropped by input port", frame: bridgedUDP(fam, 9702, false, false)},
			{name: "dropped by output port", frame: bridgedUDP(fam, 9703, true, false), fromSink: true},
			{name: "sink to gen, new", frame: bridgedUDP(fam, 9704, true, false), fromSink: true},
			{name: "gen to br0", frame: bridgedUDP(fam, 9705, false, true)},
			{name: "sink to br0", frame: bridgedUDP(fam, 9706, true, true), fromSink: true},
		} {
			pr.fam = fam
			compareTableCounters(t, tw, pr, false)
		}
	}
}

// bridgePing pings host h of the bridged subnet from gen and reports
// whether it answered.
func bridgePing(t *testing.T, tp *nettest.Topology, fam int, h byte) bool {
	t.Helper()
	argv := []string{"ping", "-n", "-c", "1", "-W", "1", bridgeAddr(tp, fam, h).String()}
	res, err := nettest.Exec(tp.GenNS, argv...)
	if res == nil {
		t.Errorf("%v: %v", argv, err)
		return false
	}
	return res.ExitCode == 0
}

// iccRuleset is Docker's --icc=false rule, with counters of the echo
// requests bridged (FORWARD) and sent to br0 (INPUT); iccRuleset6 the
// IPv6 one.
const iccRuleset = `*filter
-A INPUT -i br0 -p icmp -m icmp --icmp-type 8 -m physdev --physdev-is-in
-A FORWARD -i br0 -o br0 -p icmp -m icmp --icmp-type 8
-A FORWARD -i br0 -o br0 -j DROP
COMMIT
`

var iccRuleset6 = strings.ReplaceAll(iccRuleset, "-p icmp -m icmp --icmp-type 8", "-p ipv6-icmp -m icmp6 --icmpv6-type 128")

// TestBridgeInterContainer is Docker's --icc=false (FORWARD -i docker0 -o
// docker0 -j DROP) against the kernel: gen cannot reach sink through the
// bridge, both reach the bridge's address; with the sysctls off (and xfw
// synced, as the agent does on its next event), bridged traffic passes
// unjudged and the rule counts nothing more.
func TestBridgeInterContainer(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl", "ping")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, false)
		fw.restore(t, tp, 4, iccRuleset)
		fw.restore(t, tp, 6, iccRuleset6)
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	check := func(round string, wantSink bool) {
		for _, fam := range []int{4, 6} {
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				if got := bridgePing(t, tp, fam, 2); got != wantSink {
					t.Errorf("%s: %s IPv%d: gen reached sink %v, want %v", round, kind, fam, got, wantSink)
				}
				if !bridgePing(t, tp, fam, 0xfe) {
					t.Errorf("%s: %s IPv%d: gen did not reach br0", round, kind, fam)
				}
			})
			k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], fam))
			x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], fam))
			// Only the echo requests' counters: neighbour discovery
			// and MLD leave when the kernel decides.
			echoes := 0
			for key, kv := range k {
				if strings.Contains(key, "-type 8") || strings.Contains(key, "-type 128") {
					echoes += int(kv.packets)
					if x[key] != kv {
						t.Errorf("%s: IPv%d %s: kernel %v, xfw %v", round, fam, key, kv, x[key])
					}
				}
			}
			if echoes == 0 {
				t.Errorf("%s: IPv%d: the kernel counted no echo request (fix the test)", round, fam)
			}
		}
	}
	check("sysctls on", false)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=0", "net.bridge.bridge-nf-call-ip6tables=0")
		if kind == "xfw" {
			nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
		}
	})
	check("sysctls off", true)
}
