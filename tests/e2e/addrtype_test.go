package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m addrtype and -m pkttype against the kernel: the same counting rules in
// INPUT, FORWARD and OUTPUT through xfw and through iptables-legacy in twin
// topologies, the same packets (injected at gen, or sent by fw itself),
// and every rule's counters compared after each packet.

// typeProbe is one packet (or ping) of the addrtype/pkttype test.
type typeProbe struct {
	name string
	fam  int
	// frame builds a frame injected at gen (at sink with fromSink); nil
	// for a command run in fw.
	frame    func(tp *nettest.Topology) []byte
	fromSink bool
	// cmd is the command run in fw (a ping: OUTPUT traffic).
	cmd func(tp *nettest.Topology) []string
	// run, when set, sends the probe itself (a socket's connection).
	run func(t *testing.T, tp *nettest.Topology)
}

// addrTypesOf are the address types each family's rules name (ip6tables
// refuses the others; xfw refuses UNREACHABLE in IPv6).
var addrTypesOf = map[int][]string{
	4: {"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST", "BLACKHOLE", "UNREACHABLE",
		"PROHIBIT", "THROW", "NAT", "XRESOLVE"},
	6: {"UNSPEC", "UNICAST", "LOCAL", "ANYCAST", "MULTICAST"},
}

// typeRuleset returns the counting rules: every type as source and as
// destination type in each chain, inverted and combined types, the device
// limits the kernel allows in each chain (IPv4), and every packet type.
// INPUT and FORWARD count UDP only, OUTPUT echo requests only, so that no
// other traffic (neighbour discovery, MLD, ICMP errors) disturbs the counts.
func typeRuleset(fam int) string {
	sel := map[string]string{"INPUT": "-p udp", "FORWARD": "-p udp", "OUTPUT": "-p icmp -m icmp --icmp-type 8"}
	combos := []string{"! --src-type LOCAL ! --dst-type UNICAST", "--src-type UNICAST,LOCAL --dst-type LOCAL,BROADCAST,MULTICAST"}
	limits := map[string][]string{"INPUT": {"--limit-iface-in"}, "FORWARD": {"--limit-iface-in", "--limit-iface-out"},
		"OUTPUT": {"--limit-iface-out"}}
	if fam == 6 {
		sel["OUTPUT"] = "-p ipv6-icmp -m icmp6 --icmpv6-type 128"
		combos = []string{"! --src-type LOCAL ! --dst-type UNICAST", "--dst-type LOCAL,ANYCAST", "--dst-type MULTICAST,UNICAST",
			"! --src-type UNSPEC --dst-type UNICAST,LOCAL"}
		limits = nil
	}
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, chain := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		add := func(spec string) { fmt.Fprintf(&b, "-A %s %s %s\n", chain, sel[chain], spec) }
		for _, typ := range addrTypesOf[fam] {
			add("-m addrtype --src-type " + typ)
			add("-m addrtype --dst-type " + typ)
		}
		for _, c := range combos {
			add("-m addrtype " + c)
		}
		for _, l := range limits[chain] {
			for _, typ := range []string{"UNICAST", "LOCAL", "BROADCAST", "MULTICAST"} {
				add("-m addrtype --src-type " + typ + " " + l)
				add("-m addrtype --dst-type " + typ + " " + l)
			}
			add("-m addrtype ! --dst-type LOCAL " + l)
		}
		for _, pt := range []string{"unicast", "broadcast", "multicast", "otherhost"} {
			add("-m pkttype --pkt-type " + pt)
		}
		add("-m pkttype ! --pkt-type unicast")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// In fw, besides the topology's addresses: a local route covering a whole
// prefix (through lo) and a blackhole route, in both families.
func typeRoutes(tp *nettest.Topology) [][]string {
	x := tp.Subnet
	return [][]string{
		{"ip", "route", "add", "local", fmt.Sprintf("10.%d.9.0/24", x), "dev", "lo", "table", "local"},
		{"ip", "route", "add", "blackhole", fmt.Sprintf("10.%d.8.0/24", x)},
		{"ip", "-6", "route", "add", "local", fmt.Sprintf("fd00:%d:9::/64", x), "dev", "lo", "table", "local"},
		{"ip", "-6", "route", "add", "blackhole", fmt.Sprintf("fd00:%d:8::/64", x)},
	}
}

// in4 and in6 name an address of the topology's numbering plan
// (10.X.net.host, fd00:X:net::host).
func in4(tp *nettest.Topology, net, host byte) netip.Addr {
	return netip.AddrFrom4([4]byte{10, tp.Subnet, net, host})
}

func in6(tp *nettest.Topology, net, host uint16) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:%d:%x::%x", tp.Subnet, net, host))
}

// udpFrame builds a UDP datagram src → dst from gen, with the destination
// MAC dmac ("" for fw's).
func udpFrame(src, dst func(*nettest.Topology) netip.Addr, dmac string) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		eth := tp.GenToFw()
		if dmac != "" {
			eth.Dst, _ = net.ParseMAC(dmac)
		}
		ip := nettest.IPPacket(src(tp), dst(tp), nettest.UDP{SrcPort: 4000, DstPort: 9999, Payload: []byte("xfw-type-probe")})
		return eth.Frame(ip)
	}
}

// addr returns a constant address builder.
func addr(s string) func(*nettest.Topology) netip.Addr {
	a := netip.MustParseAddr(s)
	return func(*nettest.Topology) netip.Addr { return a }
}

// ping returns a ping command from fw.
func ping(args ...string) func(tp *nettest.Topology) []string {
	return func(tp *nettest.Topology) []string {
		out := []string{"ping", "-n", "-c", "1", "-W", "1"}
		for _, a := range args {
			a = strings.ReplaceAll(a, "X", fmt.Sprint(tp.Subnet))
			out = append(out, a)
		}
		return out
	}
}

func typeProbes() []typeProbe {
	gen4 := func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv4 }
	gen6 := func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv6 }
	a4 := func(n, h byte) func(*nettest.Topology) netip.Addr {
		return func(tp *nettest.Topology) netip.Addr { return in4(tp, n, h) }
	}
	a6 := func(n, h uint16) func(*nettest.Topology) netip.Addr {
		return func(tp *nettest.Topology) netip.Addr { return in6(tp, n, h) }
	}
	const bcast, mcast4, mcast6 = "ff:ff:ff:ff:ff:ff", "01:00:5e:00:00:01", "33:33:00:00:00:01"
	return []typeProbe{
		{name: "v4 to fw's in0 address", fam: 4, frame: udpFrame(gen4, a4(1, 1), "")},
		{name: "v4 to fw's out0 address", fam: 4, frame: udpFrame(gen4, a4(2, 1), "")},
		{name: "v4 forwarded to sink", fam: 4, frame: udpFrame(gen4, a4(2, 2), "")},
		{name: "v4 to in0's subnet broadcast", fam: 4, frame: udpFrame(gen4, a4(1, 255), bcast)},
		{name: "v4 to out0's subnet broadcast, unicast MAC", fam: 4, frame: udpFrame(gen4, a4(2, 255), "")},
		{name: "v4 limited broadcast", fam: 4, frame: udpFrame(gen4, addr("255.255.255.255"), bcast)},
		{name: "v4 from 0.0.0.0 to the limited broadcast", fam: 4, frame: udpFrame(addr("0.0.0.0"), addr("255.255.255.255"), bcast)},
		{name: "v4 from 0.1.2.3 to the limited broadcast", fam: 4, frame: udpFrame(addr("0.1.2.3"), addr("255.255.255.255"), bcast)},
		{name: "v4 multicast", fam: 4, frame: udpFrame(gen4, addr("224.0.0.1"), mcast4)},
		{name: "v4 to a local /24 through lo", fam: 4, frame: udpFrame(gen4, a4(9, 5), "")},
		{name: "v4 from a blackholed source", fam: 4, frame: udpFrame(a4(8, 5), a4(1, 1), "")},
		{name: "v4 to fw, broadcast MAC", fam: 4, frame: udpFrame(gen4, a4(1, 1), bcast)},
		{name: "v4 to fw, multicast MAC", fam: 4, frame: udpFrame(gen4, a4(1, 1), mcast4)},
		{name: "v4 fw pings gen", fam: 4, cmd: ping("10.X.1.2")},
		{name: "v4 fw pings itself", fam: 4, cmd: ping("10.X.2.1")},
		{name: "v4 fw pings 127.0.0.1", fam: 4, cmd: ping("127.0.0.1")},
		{name: "v4 fw pings from its local /24", fam: 4, cmd: ping("-I", "10.X.9.5", "10.X.1.2")},
		{name: "v4 fw pings a subnet broadcast", fam: 4, cmd: ping("-b", "10.X.1.255")},
		{name: "v4 fw pings a multicast group", fam: 4, cmd: ping("-I", "in0", "224.0.0.1")},
		{name: "v6 to fw's in0 address", fam: 6, frame: udpFrame(gen6, a6(1, 1), "")},
		{name: "v6 to fw's out0 address", fam: 6, frame: udpFrame(gen6, a6(2, 1), "")},
		{name: "v6 forwarded to sink", fam: 6, frame: udpFrame(gen6, a6(2, 2), "")},
		{name: "v6 to in0's subnet-router anycast", fam: 6, frame: udpFrame(gen6, a6(1, 0), "")},
		{name: "v6 to out0's subnet-router anycast", fam: 6, frame: udpFrame(gen6, a6(2, 0), "")},
		{name: "v6 multicast", fam: 6, frame: udpFrame(gen6, addr("ff02::1"), mcast6)},
		{name: "v6 from ::", fam: 6, frame: udpFrame(addr("::"), a6(1, 1), "")},
		{name: "v6 from an IPv4-mapped address", fam: 6, frame: udpFrame(addr("::ffff:10.0.0.1"), a6(1, 1), "")},
		{name: "v6 from a blackholed source", fam: 6, frame: udpFrame(a6(8, 5), a6(1, 1), "")},
		{name: "v6 to a local /64 through lo", fam: 6, frame: udpFrame(gen6, a6(9, 5), "")},
		{name: "v6 to fw, broadcast MAC", fam: 6, frame: udpFrame(gen6, a6(1, 1), bcast)},
		{name: "v6 fw pings gen", fam: 6, cmd: ping("-6", "fd00:X:1::2")},
		{name: "v6 fw pings itself", fam: 6, cmd: ping("-6", "fd00:X:2::1")},
		{name: "v6 fw pings ::1", fam: 6, cmd: ping("-6", "::1")},
		{name: "v6 fw pings all nodes", fam: 6, cmd: ping("-6", "-I", "in0", "ff02::1")},
	}
}

// ruleCountersOf returns the counters of every rule (policies left out).
func ruleCountersOf(t *testing.T, save string) map[string]counter {
	out := map[string]counter{}
	for k, v := range counters(t, save) {
		if !strings.HasPrefix(k, ":") {
			out[k] = v
		}
	}
	return out
}

// sendTypeProbe sends one probe in a topology.
func sendTypeProbe(t *testing.T, tp *nettest.Topology, pr typeProbe) {
	if pr.run != nil {
		pr.run(t, tp)
		return
	}
	if pr.frame != nil {
		inject := tp.InjectFromGen
		if pr.fromSink {
			inject = tp.InjectFromSink
		}
		if err := inject(pr.frame(tp)); err != nil {
			t.Errorf("%s: inject: %v", pr.name, err)
		}
		return
	}
	// A ping to a group gets no answer from gen: its exit status says
	// nothing; what counts is that the request left.
	if res, err := nettest.Exec(tp.FwNS, pr.cmd(tp)...); res.ExitCode < 0 {
		t.Errorf("%s: %v", pr.name, err)
	}
}

// TestAddrTypePktTypeAgainstKernel checks -m addrtype and -m pkttype in
// every chain of both families against the kernel, packet by packet.
func TestAddrTypePktTypeAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "ping")
	tw := newTwins(t, xfwPath(t))
	tps, fws := tw.tps, tw.fws
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		for _, argv := range typeRoutes(tp) {
			nettest.MustExec(t, tp.FwNS, argv...)
		}
		fw.restore(t, tp, 4, typeRuleset(4))
		fw.restore(t, tp, 6, typeRuleset(6))
	})
	if t.Failed() {
		return
	}
	// What xfw's data plane cannot decide in IPv6 is refused, with exit 1
	// and the running ruleset kept (iptables-legacy accepts both).
	for _, spec := range []string{"--src-type UNREACHABLE", "--dst-type LOCAL --limit-iface-in"} {
		rules := "*filter\n-A INPUT -m addrtype " + spec + "\nCOMMIT\n"
		res, _ := fws["xfw"].try(tps["xfw"], 6, "-restore", rules)
		if res == nil || res.ExitCode != 1 || !strings.Contains(res.Stderr, "not supported by xfw's data plane in IPv6") {
			t.Errorf("ip6tables-restore of %q: want exit 1 saying it is not supported, got %v", spec, res)
		}
		if res, _ := fws["kernel"].try(tps["kernel"], 6, "-restore", rules, "--test"); res == nil || res.ExitCode != 0 {
			t.Errorf("iptables-legacy refused %q: %v", spec, res)
		}
	}
	for _, pr := range typeProbes() {
		t.Run(pr.name, func(t *testing.T) { compareProbeCounters(t, tw, pr) })
	}
}

// compareProbeCounters zeroes the counters of both twins, sends probe pr
// through each and compares every rule's counters; the kernel must have
// counted the packet somewhere.
func compareProbeCounters(t *testing.T, tw *twins, pr typeProbe) {
	k := compareAfterProbe(t, tw, pr.fam, func(t *testing.T, tp *nettest.Topology) { sendTypeProbe(t, tp, pr) })
	if t.Failed() {
		return
	}
	if countedRules(k) == 0 {
		t.Errorf("the kernel counted the packet in no rule (fix the probe)")
	}
	t.Logf("%d rules counted the packet", countedRules(k))
}

// typeSettle is how long a probe may take through fw (its counters are
// read afterwards).
const typeSettle = 300 * time.Millisecond

// countedRules returns how many rules counted a packet.
func countedRules(c map[string]counter) int {
	n := 0
	for _, v := range c {
		if v.packets > 0 {
			n++
		}
	}
	return n
}

// compareTypeCounters reports the rules whose counters differ.
func compareTypeCounters(t *testing.T, kernel, xfw map[string]counter) {
	t.Helper()
	var keys []string
	for k := range kernel {
		keys = append(keys, k)
	}
	for k := range xfw {
		if _, ok := kernel[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if kernel[k].packets != xfw[k].packets {
			t.Errorf("%s: kernel counted %d, xfw %d", k, kernel[k].packets, xfw[k].packets)
		}
	}
}

// mainTableCase is one namespace set-up of TestAddrTypeMainTableAgainstKernel:
// commands run in fw before the rules load, and the probes sent after.
type mainTableCase struct {
	name   string
	setup  func(tp *nettest.Topology) [][]string
	probes []typeProbe
	// agent: xfw's agent runs from before the set-up, which then comes
	// after the rules, and must copy the routes it adds.
	agent bool
	// unmerge: then (under the agent) a policy rule is added and deleted,
	// which splits the kernel's IPv4 tables.
	unmerge bool
}

// unmergeRules add and delete a policy rule: the kernel's IPv4 local and
// main tables are split from then on.
var unmergeRules = [][]string{
	{"ip", "rule", "add", "pref", "100", "from", "192.0.2.1", "lookup", "main"},
	{"ip", "rule", "del", "pref", "100"},
}

// mainTableRoutes4 are IPv4 routes whose type depends on whether the kernel
// merged its local and main tables: a local /24 in the local table with a
// more specific route in main, and a local /24 in main.
func mainTableRoutes4(tp *nettest.Topology) [][]string {
	x := tp.Subnet
	return [][]string{
		{"ip", "route", "add", "local", fmt.Sprintf("10.%d.6.0/24", x), "dev", "lo", "table", "local"},
		{"ip", "route", "add", fmt.Sprintf("10.%d.6.128/25", x), "via", tp.Sink.IPv4.String()},
		{"ip", "route", "add", "local", fmt.Sprintf("10.%d.7.0/24", x), "dev", "lo", "table", "main"},
	}
}

// mainTableCases returns the set-ups: IPv4 with merged tables (no policy
// rule ever), IPv4 unmerged (a rule added and deleted), and IPv6 on a host
// that does not forward (no subnet-router anycast routes), with a local
// prefix in main, a more specific route inside it and connected prefixes.
func mainTableCases() []mainTableCase {
	a4 := func(n, h byte) func(*nettest.Topology) netip.Addr {
		return func(tp *nettest.Topology) netip.Addr { return in4(tp, n, h) }
	}
	a6 := func(n, h uint16) func(*nettest.Topology) netip.Addr {
		return func(tp *nettest.Topology) netip.Addr { return in6(tp, n, h) }
	}
	gen4 := func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv4 }
	gen6 := func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv6 }
	probes4 := []typeProbe{
		{name: "to main's route inside the local /24", fam: 4, frame: udpFrame(gen4, a4(6, 200), "")},
		{name: "to the local /24 elsewhere", fam: 4, frame: udpFrame(gen4, a4(6, 10), "")},
		{name: "to main's local /24", fam: 4, frame: udpFrame(gen4, a4(7, 5), "")},
		{name: "fw pings inside main's route", fam: 4, cmd: ping("10.X.6.200")},
		{name: "fw pings the local /24", fam: 4, cmd: ping("10.X.6.10")},
	}
	return []mainTableCase{
		{name: "v4 merged", setup: mainTableRoutes4, probes: probes4},
		{name: "v4 merged, routes added under the agent", setup: mainTableRoutes4, probes: probes4, agent: true},
		{name: "v4 unmerged", setup: func(tp *nettest.Topology) [][]string {
			return append(append([][]string(nil), unmergeRules...), mainTableRoutes4(tp)...)
		}, probes: probes4},
		{name: "v4 unmerged under the agent", setup: mainTableRoutes4, probes: probes4, agent: true, unmerge: true},
		{name: "v6 not forwarding", setup: func(tp *nettest.Topology) [][]string {
			x := tp.Subnet
			return [][]string{
				{"sysctl", "-qw", "net.ipv6.conf.all.forwarding=0"},
				{"ip", "-6", "route", "add", "local", fmt.Sprintf("fd00:%d:7::/48", x), "dev", "lo", "table", "main"},
				{"ip", "-6", "route", "add", fmt.Sprintf("fd00:%d:7:1::/64", x), "via", tp.Sink.IPv6.String()},
				{"ip", "-6", "route", "add", fmt.Sprintf("fd00:%d:5::/64", x), "dev", tp.FwOut.Ifname},
				{"ip", "-6", "neigh", "replace", fmt.Sprintf("fd00:%d:1::", x), "lladdr", tp.Gen.MAC.String(), "dev", tp.FwIn.Ifname, "nud", "permanent"},
				{"ip", "-6", "neigh", "replace", fmt.Sprintf("fd00:%d:5::", x), "lladdr", tp.Sink.MAC.String(), "dev", tp.FwOut.Ifname, "nud", "permanent"},
				{"ip", "-6", "neigh", "replace", fmt.Sprintf("fd00:%d:5::1", x), "lladdr", tp.Sink.MAC.String(), "dev", tp.FwOut.Ifname, "nud", "permanent"},
				// An anycast route added by hand: no RTF_ANYCAST.
				{"ip", "-6", "route", "add", "anycast", fmt.Sprintf("fd00:%d:6::/64", x), "dev", tp.FwOut.Ifname, "table", "main"},
				{"ip", "-6", "neigh", "replace", fmt.Sprintf("fd00:%d:6::1", x), "lladdr", tp.Sink.MAC.String(), "dev", tp.FwOut.Ifname, "nud", "permanent"},
			}
		}, probes: []typeProbe{
			{name: "fw pings in0's network address", fam: 6, cmd: ping("-6", "fd00:X:1::")},
			{name: "fw pings a connected prefix's network address", fam: 6, cmd: ping("-6", "fd00:X:5::")},
			{name: "fw pings a connected prefix's host", fam: 6, cmd: ping("-6", "fd00:X:5::1")},
			{name: "fw pings main's local prefix", fam: 6, cmd: ping("-6", "fd00:X:7::5")},
			{name: "fw pings main's route inside it", fam: 6, cmd: ping("-6", "fd00:X:7:1::5")},
			{name: "to main's local prefix", fam: 6, frame: udpFrame(gen6, a6(7, 5), "")},
			{name: "fw pings inside an anycast route added by hand", fam: 6, cmd: ping("-6", "fd00:X:6::1")},
		}},
	}
}

// TestAddrTypeMainTableAgainstKernel checks -m addrtype against the kernel
// where the main table decides an address's type: IPv4 with merged and
// unmerged tables, IPv6 network addresses of connected prefixes on a host
// that does not forward, and local routes put in main.
func TestAddrTypeMainTableAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "ping")
	for _, c := range mainTableCases() {
		t.Run(c.name, func(t *testing.T) {
			tw := newTwins(t, xfwPath(t))
			fam := c.probes[0].fam
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				if c.agent {
					fw.restore(t, tp, fam, typeRuleset(fam))
					if kind == "xfw" {
						startAgent(t, fw.bin, tp)
					}
				}
				for _, argv := range c.setup(tp) {
					nettest.MustExec(t, tp.FwNS, argv...)
				}
				if !c.agent {
					fw.restore(t, tp, fam, typeRuleset(fam))
				}
			})
			if t.Failed() {
				return
			}
			if c.agent {
				// The last route added: the copy that saw it saw the
				// routes added before it.
				waitForAgentLocal(t, tw, 7, 5, "the agent to copy main's local route")
			}
			if c.unmerge {
				tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
					for _, argv := range unmergeRules {
						nettest.MustExec(t, tp.FwNS, argv...)
					}
				})
				// Unmerged, the local /24 takes 10.X.6.200 back from
				// main's /25.
				waitForAgentLocal(t, tw, 6, 200, "the agent to see the tables split")
			}
			for _, pr := range c.probes {
				t.Run(pr.name, func(t *testing.T) { compareProbeCounters(t, tw, pr) })
			}
		})
	}
}

// waitForAgentLocal waits until xfw's agent has made 10.X.net.host one of
// this host's addresses in its copy of the routes: a datagram to it is
// judged by INPUT as LOCAL (before, xfw forwards it or takes it for
// nobody's). The counters start from zero.
func waitForAgentLocal(t *testing.T, tw *twins, net, host byte, what string) {
	tp, fw := tw.tps["xfw"], tw.fws["xfw"]
	gen4 := func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv4 }
	to := func(tp *nettest.Topology) netip.Addr { return in4(tp, net, host) }
	const rule = "INPUT -p udp -m addrtype --dst-type LOCAL"
	nettest.MustExec(t, tp.FwNS, append(fw.cmd(4, ""), "-w", lockWait, "-Z")...)
	waitFor(t, what, func() bool {
		if err := tp.InjectFromGen(udpFrame(gen4, to, "")(tp)); err != nil {
			t.Fatalf("inject: %v", err)
		}
		drainFw(t, tp)
		return counters(t, fw.save(t, tp, 4))[rule].packets > 0
	})
}
