package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The mark xfw's XDP walk sets, seen where the kernel's is: policy routing
// (ip rule fwmark) routes the packet with the mark PREROUTING left it
// (MARK, CONNMARK --restore-mark), and the mark the walk ends with reaches
// the kernel's skb (a receiving socket's SO_RCVMARK), in xfw as with
// iptables-legacy, in twin topologies that have a second link from fw.

// The second link: fw's altFwIf to the peer's altPeerIf, both families,
// the peer's addresses static neighbours of fw.
const (
	altFwIf    = "alt0"
	altPeerIf  = "alt1"
	altPeerMAC = "02:00:00:00:0a:02"
	altFw4     = "192.0.2.1/24"
	altPeer4   = "192.0.2.2"
	altFw6     = "fd00:a17::1/64"
	altPeer6   = "fd00:a17::2"
	altTable   = "100"
	altMark    = "0x1" // ip rule fwmark altMark lookup altTable
	deniedMark = "0x2" // ip rule fwmark deniedMark prohibit
)

// addAltLink joins tp's fw namespace to peerNS by a second veth pair
// (altFwIf, altPeerIf) and routes dst4 and dst6 through it in table
// altTable, which packets of mark altMark use (and packets of mark
// deniedMark are prohibited). It runs before the firewall starts, so that
// xfw attaches to the new device too.
func addAltLink(t *testing.T, tp *nettest.Topology, peerNS string, dst4, dst6 netip.Addr) {
	t.Helper()
	fw := func(argv ...string) { nettest.MustExec(t, tp.FwNS, argv...) }
	peer := func(argv ...string) { nettest.MustExec(t, peerNS, argv...) }
	fw("ip", "link", "add", altFwIf, "type", "veth", "peer", "name", altPeerIf, "address", altPeerMAC, "netns", peerNS)
	fw("ip", "addr", "add", altFw4, "dev", altFwIf)
	fw("ip", "-6", "addr", "add", altFw6, "dev", altFwIf, "nodad")
	fw("ip", "link", "set", altFwIf, "up")
	peer("ip", "addr", "add", altPeer4+"/24", "dev", altPeerIf)
	peer("ip", "-6", "addr", "add", altPeer6+"/64", "dev", altPeerIf, "nodad")
	peer("ip", "link", "set", altPeerIf, "up")
	fw("ip", "neigh", "replace", altPeer4, "lladdr", altPeerMAC, "dev", altFwIf, "nud", "permanent")
	fw("ip", "-6", "neigh", "replace", altPeer6, "lladdr", altPeerMAC, "dev", altFwIf, "nud", "permanent")
	fw("ip", "route", "add", dst4.String()+"/32", "via", altPeer4, "dev", altFwIf, "table", altTable)
	fw("ip", "-6", "route", "add", dst6.String()+"/128", "via", altPeer6, "dev", altFwIf, "table", altTable)
	for _, fam := range []string{"-4", "-6"} {
		fw("ip", fam, "rule", "add", "fwmark", altMark, "lookup", altTable)
		fw("ip", fam, "rule", "add", "fwmark", deniedMark, "prohibit")
	}
}

// markRouteRuleset is TestMarkPolicyRoutingAgainstKernel's ruleset:
// datagrams from gen to port 7001 are marked for table 100,
// those to 7003 for "prohibit", 7002 keep mark 0; the FORWARD rules count
// the output device xfw judged them with.
const markRouteRuleset = `*mangle
-A PREROUTING -i in0 -p udp -m udp --dport 7001 -j MARK --set-mark 0x1
-A PREROUTING -i in0 -p udp -m udp --dport 7003 -j MARK --set-mark 0x2
-A FORWARD -p udp -m mark --mark 0x1
COMMIT
*filter
-A FORWARD -o alt0 -p udp
-A FORWARD -o out0 -p udp
COMMIT
`

// TestMarkPolicyRoutingAgainstKernel checks that a mark set in mangle
// PREROUTING routes the packet as the kernel's policy routing does: to
// the device table 100 names, or nowhere ("prohibit"), with FORWARD's
// output device and counters as the kernel's, in both families.
func TestMarkPolicyRoutingAgainstKernel(t *testing.T) {
	markPolicyRouting(t, markRouteRuleset)
}

// TestRawMarkPolicyRoutingAgainstKernel is TestMarkPolicyRoutingAgainstKernel
// with the marks set in raw PREROUTING, which xfw judges before its route
// lookup (bpf/xfw.c xfw_xdp_rawpre): the lookup takes raw's mark.
func TestRawMarkPolicyRoutingAgainstKernel(t *testing.T) {
	rules := strings.Replace(markRouteRuleset, "*mangle", "*raw", 1)
	rules = strings.Replace(rules, "-A FORWARD -p udp -m mark --mark 0x1\n", "", 1)
	markPolicyRouting(t, rules)
}

// TestMarkRoutesUnroutedAgainstKernel: a destination only table 100
// routes (none in the main table), reached by the datagrams mangle
// PREROUTING marks for it: the kernel routes with the mark PREROUTING
// left, so they arrive on the second link; unmarked ones have no route
// (counted in PREROUTING all the same). xfw judges mangle PREROUTING
// before its route lookup, which takes its mark (bpf_fib_lookup's mark).
func TestMarkRoutesUnroutedAgainstKernel(t *testing.T) {
	const rules = `*mangle
-A PREROUTING -i in0 -p udp -m udp --dport 7001 -j MARK --set-mark 0x1
-A PREROUTING -i in0 -p udp -m udp --dport 7003 -j MARK --set-mark 0x2
-A PREROUTING -p udp -m mark --mark 0x1
-A PREROUTING -p udp
-A FORWARD -p udp -m mark --mark 0x1
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
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", in4(tp, 9, 9).String()+"/32", "via", altPeer4,
			"dev", altFwIf, "table", altTable)
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "route", "add", in6(tp, 9, 9).String()+"/128", "via", altPeer6,
			"dev", altFwIf, "table", altTable)
	})
	want := map[uint16]string{7001: altPeerIf, 7002: "nowhere", 7003: "nowhere"}
	for _, fam := range []int{4, 6} {
		for _, port := range []uint16{7001, 7002, 7003} {
			pr := typeProbe{name: fmt.Sprintf("udp to a table-100 destination, port %d", port), fam: fam,
				frame: udpTo(fam, 9, 9, port)}
			compareArrivals(t, tw, pr, port, want[port])
		}
	}
}

// markPolicyRouting sends datagrams to ports 7001-7003 through twins
// with rules (markRouteRuleset's marks) and compares where they arrive
// and every counter with the kernel's, in both families.
func markPolicyRouting(t *testing.T, rules string) {
	tw := altTwins(t, rules)
	if t.Failed() {
		return
	}
	want := map[uint16]string{7001: altPeerIf, 7002: nettest.SinkIfname, 7003: "nowhere"}
	for _, fam := range []int{4, 6} {
		for _, port := range []uint16{7001, 7002, 7003} {
			pr := typeProbe{name: fmt.Sprintf("udp forwarded to %d", port), fam: fam, frame: udpTo(fam, 2, 2, port)}
			compareArrivals(t, tw, pr, port, want[port])
		}
	}
}

// altTwins builds twins whose fw has the second link to the sink
// (addAltLink), the sink silent, rules loaded in both families (ICMP
// spelt for ip6tables in IPv6: icmpTo6).
func altTwins(t *testing.T, rules string) *twins {
	t.Helper()
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "python3")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		addAltLink(t, tp, tp.SinkNS, in4(tp, 2, 2), in6(tp, 2, 2))
		silenceSink(t, tp)
		fw.restore(t, tp, 4, rules)
		fw.restore(t, tp, 6, icmpTo6.Replace(rules))
	})
	return tw
}

// icmpTo6 spells the IPv4 ICMP matches of the rulesets for ip6tables.
var icmpTo6 = strings.NewReplacer("-p icmp -m icmp --icmp-type 3", "-p ipv6-icmp -m icmp6 --icmpv6-type 1")

// compareArrivals sends probe pr through both twins, compares every
// table's counters with the kernel's, and checks that the datagram to
// port arrived on the sink's interface want ("nowhere": none) in both.
func compareArrivals(t *testing.T, tw *twins, pr typeProbe, port uint16, want string) {
	t.Helper()
	got := arrivals(t, tw, port, func() { compareTableCounters(t, tw, pr, false) })
	for kind, where := range got {
		if where != want {
			t.Errorf("IPv%d %s: %s: arrived %s, want %s", pr.fam, pr.name, kind, where, want)
		}
	}
}

// arrivals runs send and returns, per twin, the interface of the sink
// where a UDP datagram to port arrived ("nowhere" when none did, "both"
// when both did).
func arrivals(t *testing.T, tw *twins, port uint16, send func()) map[string]string {
	t.Helper()
	isProbe := func(c nettest.Captured) bool {
		return !c.Outgoing && c.Protocol == nettest.ProtoUDP && c.DstPort == port
	}
	caps := map[string][2]*nettest.Capture{}
	for kind, tp := range tw.tps {
		caps[kind] = [2]*nettest.Capture{
			nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, isProbe),
			nettest.StartCapture(t, tp.SinkNS, altPeerIf, isProbe),
		}
	}
	send()
	got := map[string]string{}
	for kind, c := range caps {
		main, alt := len(c[0].Stop()), len(c[1].Stop())
		switch {
		case main > 0 && alt > 0:
			got[kind] = "both"
		case main > 0:
			got[kind] = nettest.SinkIfname
		case alt > 0:
			got[kind] = altPeerIf
		default:
			got[kind] = "nowhere"
		}
	}
	return got
}

// connmarkRouteRuleset is TestConnmarkRestoreRoutesReplies's ruleset: a
// connection gen opens is marked 1 (CONNMARK), its replies get the mark
// back in PREROUTING (the multi-WAN pattern), which routes them by table
// 100: through the second link to gen.
const connmarkRouteRuleset = `*mangle
-A PREROUTING -i in0 -m conntrack --ctstate NEW -j CONNMARK --set-mark 0x1
-A PREROUTING -i out0 -j CONNMARK --restore-mark
COMMIT
*filter
-A FORWARD -o alt0 -p udp
-A FORWARD -o in0 -p udp
-A FORWARD -o out0 -p udp
COMMIT
`

// TestConnmarkRestoreRoutesReplies checks the multi-WAN pattern against
// the kernel: the replies of a connection whose mark CONNMARK
// --restore-mark gives back in PREROUTING are routed by that mark (ip
// rule fwmark), out of the second link, in xfw as with iptables-legacy.
func TestConnmarkRestoreRoutesReplies(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	const port = 7005
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		addAltLink(t, tp, tp.GenNS, tp.Gen.IPv4, tp.Gen.IPv6)
		fw.restore(t, tp, 4, connmarkRouteRuleset)
		nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port), nettest.Echo())
	})
	if t.Failed() {
		return
	}
	isReply := func(c nettest.Captured) bool {
		return !c.Outgoing && c.Protocol == nettest.ProtoUDP && c.SrcPort == port
	}
	got := map[string]string{}
	var mu sync.Mutex
	for i := 0; i < 2; i++ {
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			main := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, isReply)
			alt := nettest.StartCapture(t, tp.GenNS, altPeerIf, isReply)
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, port), []byte("multi-wan"),
				nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, 40000)))
			alt.WaitFor(func(nettest.Captured) bool { return true }, 2*time.Second)
			n, a := len(main.Stop()), len(alt.Stop())
			mu.Lock()
			got[kind] += fmt.Sprintf("[%s: %d, %s: %d]", nettest.GenIfname, n, altPeerIf, a)
			mu.Unlock()
		})
	}
	want := fmt.Sprintf("[%s: 0, %s: 1]", nettest.GenIfname, altPeerIf)
	want += want
	if got["kernel"] != want {
		t.Fatalf("the kernel's replies arrived %s, want %s: fix the test", got["kernel"], want)
	}
	if got["xfw"] != got["kernel"] {
		t.Errorf("xfw's replies arrived %s, the kernel's %s", got["xfw"], got["kernel"])
	}
	compareTableCounters(t, tw, typeProbe{name: "one more reply", fam: 4, cmd: func(tp *nettest.Topology) []string {
		return []string{"true"}
	}}, false)
}

// markRxReceiver binds UDP port 9100 with SO_RCVMARK (75, Linux 5.19),
// has gen (its namespace the first argument) send one datagram to the
// second argument, and prints the mark the socket saw (an SO_MARK
// message, 36).
const markRxReceiver = `
import socket, subprocess, sys
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.setsockopt(socket.SOL_SOCKET, 75, 1)
r.bind(("0.0.0.0", 9100))
r.settimeout(3)
send = "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', (%r, 9100))" % sys.argv[2]
subprocess.run(["ip", "netns", "exec", sys.argv[1], "python3", "-c", send], check=True)
data, anc, flags, addr = r.recvmsg(16, socket.CMSG_SPACE(4))
print([int.from_bytes(d[:4], "little") for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == 36])
`

// TestMarkReachesReceiver checks that the mark the INPUT walk at XDP ends
// with (set in mangle PREROUTING, changed in mangle INPUT) is the one the
// receiving socket sees, as with iptables-legacy: with the veth driver's
// native XDP (mode auto) and with generic XDP (both keep the metadata
// that carries the mark).
func TestMarkReachesReceiver(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "python3")
	rules := "*mangle\n-A PREROUTING -p udp -m udp --dport 9100 -j MARK --set-mark 0x10\n" +
		"-A INPUT -p udp -m udp --dport 9100 -j MARK --or-mark 0x2\nCOMMIT\n" +
		"*filter\n-A INPUT -p udp -m mark --mark 0x12\nCOMMIT\n"
	for _, mode := range []string{"auto", "generic"} {
		t.Run(mode, func(t *testing.T) {
			tw := newTwins(t, xfwPath(t))
			got := collectTwins(tw, func(kind string, tp *nettest.Topology, fw firewall) string {
				if kind == "kernel" {
					fw.restore(t, tp, 4, rules)
				} else if res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, tp.FwNS, rules,
					fw.bin, "--xdp-mode", mode, "iptables-restore", "-w", lockWait); err != nil || res.ExitCode != 0 {
					t.Errorf("xfw --xdp-mode %s iptables-restore: %v %v", mode, err, res)
					return ""
				}
				res, err := nettest.Exec(tp.FwNS, "python3", "-c", markRxReceiver, tp.GenNS, tp.FwIn.IPv4.String())
				if err != nil || res.ExitCode != 0 {
					t.Errorf("%s: receiver: %v %v", kind, err, res)
					return ""
				}
				return strings.TrimSpace(res.Stdout)
			})
			if t.Failed() {
				return
			}
			if got["kernel"] != "[18]" {
				t.Fatalf("the kernel's receiver saw marks %s, want [18] (0x12): fix the test", got["kernel"])
			}
			if got["xfw"] != got["kernel"] {
				t.Errorf("xfw's receiver saw marks %s, the kernel's %s", got["xfw"], got["kernel"])
			}
		})
	}
}

// markLateRuleset is TestMarkAfterRoutingAgainstKernel's ruleset: marks
// set after routing, in mangle FORWARD (0x3, which no ip rule names) and
// mangle POSTROUTING (altMark, which routes by table 100 but comes too
// late to route the packet).
const markLateRuleset = `*mangle
-A FORWARD -p udp -m udp --dport 7007 -j MARK --set-mark 0x3
-A POSTROUTING -p udp -m udp --dport 7008 -j MARK --set-mark 0x1
COMMIT
*filter
-A FORWARD -o out0 -p udp
COMMIT
`

// markLateNft counts, in nftables' postrouting hook after iptables', the
// packets of each mark.
const markLateNft = `table ip xfwmark {
	chain post {
		type filter hook postrouting priority 300;
		meta mark 0x3 counter
		meta mark 0x1 counter
	}
}
`

var nftMarkCounter = regexp.MustCompile(`meta mark (0x[0-9a-f]+) counter packets (\d+)`)

// TestMarkAfterRoutingAgainstKernel checks marks set after the route
// lookup: they do not route the packet (it leaves by the route of mark 0,
// as with the kernel), and a mark that would not route it elsewhere
// reaches the kernel's skb (nftables' postrouting sees it). A mark that
// would route it elsewhere (0x1 here) is not handed over
// (docs/differences.md): the packet keeps the route the kernel gives it.
func TestMarkAfterRoutingAgainstKernel(t *testing.T) {
	requireTools(t, "nft")
	tw := altTwins(t, markLateRuleset)
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		if res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, tp.FwNS, markLateNft, "nft", "-f", "-"); err != nil || res.ExitCode != 0 {
			t.Errorf("nft -f: %v %v", err, res)
		}
	})
	if t.Failed() {
		return
	}
	for _, port := range []uint16{7007, 7008} {
		pr := typeProbe{name: fmt.Sprintf("udp forwarded to %d", port), fam: 4, frame: udpTo(4, 2, 2, port)}
		compareArrivals(t, tw, pr, port, nettest.SinkIfname)
	}
	marks := collectTwins(tw, func(kind string, tp *nettest.Topology, _ firewall) map[string]string {
		res, err := nettest.Exec(tp.FwNS, "nft", "list", "chain", "ip", "xfwmark", "post")
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: nft list: %v %v", kind, err, res)
			return nil
		}
		out := map[string]string{}
		for _, m := range nftMarkCounter.FindAllStringSubmatch(res.Stdout, -1) {
			out[m[1]] = m[2]
		}
		return out
	})
	want := map[string]map[string]string{
		"kernel": {"0x00000003": "1", "0x00000001": "1"},
		"xfw":    {"0x00000003": "1", "0x00000001": "0"},
	}
	for kind, w := range want {
		if fmt.Sprint(marks[kind]) != fmt.Sprint(w) {
			t.Errorf("%s: nftables' postrouting counted marks %v, want %v", kind, marks[kind], w)
		}
	}
}

// markOutputRuleset is TestMarkOutputReroutesAgainstKernel's ruleset:
// fw's datagrams to port 7010 are marked for table 100 in mangle OUTPUT,
// those to 7011 for "prohibit", 7012 keep mark 0, those to 7013 are
// rejected, and the error the kernel sends fw's own socket is marked 0x3
// (routed again, to the host itself); the counting rules show the devices
// each chain saw (filter OUTPUT the first route's, POSTROUTING the new
// one).
const markOutputRuleset = `*mangle
-A OUTPUT -p udp -m udp --dport 7010 -j MARK --set-mark 0x1
-A OUTPUT -p udp -m udp --dport 7011 -j MARK --set-mark 0x2
-A OUTPUT -p icmp -m icmp --icmp-type 3 -j MARK --set-mark 0x3
-A POSTROUTING -o alt0 -p udp
-A POSTROUTING -o out0 -p udp
-A POSTROUTING -o lo -p icmp -m icmp --icmp-type 3 -m mark --mark 0x3
COMMIT
*filter
-A OUTPUT -o alt0 -p udp
-A OUTPUT -o out0 -p udp
-A OUTPUT -p udp -m udp --dport 7013 -j REJECT
-A OUTPUT -o lo -p icmp -m icmp --icmp-type 3 -m mark --mark 0x3
COMMIT
`

// udpFromFw is a command fw runs to send one datagram to the sink's port.
func udpFromFw(fam int, port uint16) func(tp *nettest.Topology) []string {
	return func(tp *nettest.Topology) []string {
		af, dst := "AF_INET", in4(tp, 2, 2).String()
		if fam == 6 {
			af, dst = "AF_INET6", in6(tp, 2, 2).String()
		}
		return []string{"python3", "-c", fmt.Sprintf(
			"import socket; socket.socket(socket.%s, socket.SOCK_DGRAM).sendto(b'x', (%q, %d))", af, dst, port)}
	}
}

// TestMarkOutputReroutesAgainstKernel checks that a mark mangle OUTPUT
// gives the host's own packet routes it again, as ip_route_me_harder
// does: out of the device table 100 names (POSTROUTING sees it, filter
// OUTPUT the first route's), or nowhere ("prohibit"); a REJECT's error to
// fw's own socket, marked there, stays on loopback; in both families, in
// xfw as with iptables-legacy.
func TestMarkOutputReroutesAgainstKernel(t *testing.T) {
	tw := altTwins(t, markOutputRuleset)
	if t.Failed() {
		return
	}
	want := map[uint16]string{7010: altPeerIf, 7011: "nowhere", 7012: nettest.SinkIfname, 7013: "nowhere"}
	for _, fam := range []int{4, 6} {
		for _, port := range []uint16{7010, 7011, 7012, 7013} {
			pr := typeProbe{name: fmt.Sprintf("fw's udp to %d", port), fam: fam, cmd: udpFromFw(fam, port)}
			compareArrivals(t, tw, pr, port, want[port])
		}
	}
}

// natOutputMarkRuleset is TestNatOutputRoutesByMarkAgainstKernel's
// ruleset: fw's datagrams to port 7014 are marked for table 100 in mangle
// OUTPUT and sent to port 7015 by nat OUTPUT's DNAT; those to 7016 are
// translated the same way unmarked. 192.0.2.77 is routed to the sink by
// both tables: through out0 by the main one, alt0 by table 100.
const natOutputMarkRuleset = `*mangle
-A OUTPUT -p udp -m udp --dport 7014 -j MARK --set-mark 0x1
-A POSTROUTING -o alt0 -p udp
-A POSTROUTING -o out0 -p udp
COMMIT
*nat
-A OUTPUT -p udp -m udp --dport 7014 -j DNAT --to-destination 192.0.2.77:7015
-A OUTPUT -p udp -m udp --dport 7016 -j DNAT --to-destination 192.0.2.77:7017
COMMIT
*filter
-A OUTPUT -o alt0 -p udp
-A OUTPUT -o out0 -p udp
COMMIT
`

// TestNatOutputRoutesByMarkAgainstKernel checks that nat OUTPUT's DNAT
// routes the host's translated packet with the mark mangle OUTPUT gave it
// (ip_route_me_harder with the skb's mark): out of the device table 100
// names, and the unmarked one by the main table, every rule and policy
// counted as by the kernel; IPv4 (xfw refuses IPv6 NAT), in xfw as with
// iptables-legacy.
func TestNatOutputRoutesByMarkAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "python3")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		addAltLink(t, tp, tp.SinkNS, in4(tp, 2, 2), in6(tp, 2, 2))
		silenceSink(t, tp)
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", "192.0.2.77/32", "via", tp.Sink.IPv4.String(), "dev", nettest.FwOutIfname)
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", "192.0.2.77/32", "via", altPeer4, "dev", altFwIf, "table", altTable)
		fw.restore(t, tp, 4, natOutputMarkRuleset)
	})
	if t.Failed() {
		return
	}
	for _, c := range []struct {
		port, to uint16
		want     string
	}{{7014, 7015, altPeerIf}, {7016, 7017, nettest.SinkIfname}} {
		pr := typeProbe{name: fmt.Sprintf("fw's udp to %d", c.port), fam: 4, cmd: udpFromFw(4, c.port)}
		// Policies too: filter OUTPUT's policy counts a translated
		// packet once (it was counted twice, the walk stopping before
		// POSTROUTING counting it again at its stop).
		got := arrivals(t, tw, c.to, func() { compareTableCounters(t, tw, pr, true) })
		for kind, where := range got {
			if where != c.want {
				t.Errorf("IPv4 %s: %s: arrived %s, want %s", pr.name, kind, where, c.want)
			}
		}
	}
}
