package e2e

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
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
// whose INPUT and FORWARD show what went on past it (connection tracking
// on: it runs after raw PREROUTING).
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
-A INPUT -p udp -m conntrack --ctstate NEW
-A FORWARD -p udp
-A FORWARD -p udp -m ttl --ttl-eq 63
-A FORWARD -p udp -m conntrack --ctstate NEW
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
	preroutingUnrouted(t, rawPreRuleset, rawPreRuleset6)
}

// TestManglePreroutingUnroutedAgainstKernel is
// TestRawPreroutingUnroutedAgainstKernel with the rules in mangle
// PREROUTING, which xfw judges before its route lookup too (after conntrack
// in the kernel, which changes none of these rules).
func TestManglePreroutingUnroutedAgainstKernel(t *testing.T) {
	preroutingUnrouted(t, strings.Replace(rawPreRuleset, "*raw", "*mangle", 1),
		strings.Replace(rawPreRuleset6, "*raw", "*mangle", 1))
}

// TestRawManglePreroutingUnroutedAgainstKernel: raw PREROUTING with a
// notrack rule and a state match (judged before routing: the packets it
// exempts are tracked by neither), then rawPreRuleset's rules in mangle
// PREROUTING.
func TestRawManglePreroutingUnroutedAgainstKernel(t *testing.T) {
	const raw = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A PREROUTING -p udp -m state --state INVALID\n" +
		"-A PREROUTING -p udp -m udp --dport 9998 -j CT --notrack\n" +
		"-A PREROUTING -p udp -m udp --dport 7776 -j NOTRACK\n" +
		"-A PREROUTING -p udp -m conntrack --ctstate UNTRACKED\nCOMMIT\n"
	filter := "-A INPUT -p udp -m conntrack --ctstate NEW\n"
	untracked := filter + "-A INPUT -p udp -m conntrack --ctstate UNTRACKED\n"
	mangle := func(rules string) string {
		rules = strings.Replace(rules, "*raw", "*mangle", 1)
		rules = strings.Replace(rules, filter, untracked, 1)
		return raw + strings.Replace(rules, "--ctstate NEW\nCOMMIT", "--ctstate NEW\n-A FORWARD -p udp -m conntrack --ctstate UNTRACKED\nCOMMIT", 1)
	}
	preroutingUnrouted(t, mangle(rawPreRuleset), mangle(rawPreRuleset6))
}

// TestEmptyPreroutingUnroutedAgainstKernel: empty raw and mangle
// PREROUTING chains, policy ACCEPT, and an empty filter table: their
// policies count every packet in the kernel, routed or not (xfw walks
// them for the packets its routing drops alone; the other walks stay
// trivial). IPv4 only: IPv6's policies also count the neighbour
// discovery and MLD the stacks send on their own, and are not compared.
func TestEmptyPreroutingUnroutedAgainstKernel(t *testing.T) {
	const rules = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n" +
		"*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n" +
		":OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n" +
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	preroutingUnrouted(t, rules, "")
}

// preroutingUnrouted loads rules4 and rules6 into the twins and compares
// every table's counters after each probe: to fw, forwarded, without a
// route, TTL ending, martians, a refused IPv4 option, to the ports the
// rulesets single out (7776-7778, 9998). rules6 "": IPv4 alone.
func preroutingUnrouted(t *testing.T, rules4, rules6 string) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, rules4)
		if rules6 != "" {
			fw.restore(t, tp, 6, rules6)
		}
	})
	if t.Failed() {
		return
	}
	gen, at, fixed := probeGen, probeAt, probeFixed
	for _, fam := range []int{4, 6} {
		if fam == 6 && rules6 == "" {
			continue
		}
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

// rawPreNFLogRules is TestRawPreroutingLogsAgainstKernel's ruleset: raw
// PREROUTING logs every datagram to 7100 (group 5, prefix raw), INPUT and
// FORWARD log it again (prefixes in, fwd).
const rawPreNFLogRules = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p udp --dport 7100 -j NFLOG --nflog-group 5 --nflog-prefix raw
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 7100 -j NFLOG --nflog-group 5 --nflog-prefix in
-A FORWARD -p udp --dport 7100 -j NFLOG --nflog-group 5 --nflog-prefix fwd
COMMIT
`

// TestRawPreroutingLogsAgainstKernel checks the log lines of a raw
// PREROUTING xfw judges before its route lookup against the kernel's
// NFLOG listener: a datagram to fw, one forwarded to sink and one without
// a route are logged by the same rules, in the same order (raw first),
// raw's lines without an output device.
func TestRawPreroutingLogsAgainstKernel(t *testing.T) {
	requireTools(t, "tcpdump", "iptables-legacy")
	bin := xfwPath(t)
	tw := newTwins(t, bin)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, rawPreNFLogRules)
	})
	if t.Failed() {
		return
	}
	send := func(tp *nettest.Topology) {
		for _, net := range []byte{1, 2, 9} { // fw, sink, no route
			host := net
			if err := tp.InjectFromGen(udpFromTo(4, func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv4 },
				func(tp *nettest.Topology) netip.Addr { return in4(tp, net, host) }, 7100, 0, nil)(tp)); err != nil {
				t.Fatalf("inject: %v", err)
			}
			drainFw(t, tp)
		}
	}
	dir := t.TempDir()
	kernelPcap := filepath.Join(dir, "kernel.pcap")
	ktp := tw.tps["kernel"]
	td := startListener(t, ktp.FwNS, regexp.MustCompile(`^tcpdump: listening on nflog:5,`),
		"tcpdump", "-i", "nflog:5", "-U", "-w", kernelPcap)
	send(ktp)
	const want = 5 // raw, in; raw, fwd; raw
	waitUntil(func() bool { return pcapRecords(kernelPcap) >= want })
	td.stop()
	var kernel []string
	for _, p := range readNFLogPcap(t, kernelPcap) {
		kernel = append(kernel, fmt.Sprintf("%s %d", p.prefix, p.dport))
	}
	if len(kernel) != want {
		t.Fatalf("the kernel's NFLOG listener saw %v, want %d records (premise)", kernel, want)
	}

	xtp := tw.tps["xfw"]
	text := startListener(t, xtp.FwNS, regexp.MustCompile(`^xfw nflog: listening on NFLOG group 5$`), bin, "nflog", "5")
	send(xtp)
	waitUntil(func() bool { return strings.Count(text.stdout.String(), "\n") >= len(kernel) })
	text.stop()
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(text.stdout.String()), "\n") {
		m := nflogLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("unexpected xfw nflog line %q", line)
			continue
		}
		got = append(got, m[1]+" "+m[7])
		wantOut := ""
		if m[1] == "fwd" {
			wantOut = xtp.FwOut.Ifname
		}
		if m[2] != xtp.FwIn.Ifname || m[3] != wantOut {
			t.Errorf("xfw nflog line %q: want IN=%s OUT=%s", line, xtp.FwIn.Ifname, wantOut)
		}
	}
	if !slices.Equal(got, kernel) {
		t.Errorf("xfw nflog 5 printed %v, the kernel's listener saw %v:\n%s", got, kernel, text.stdout.String())
	}
}

// probeGen returns gen's address of family fam, for a typeProbe.
func probeGen(fam int) func(tp *nettest.Topology) netip.Addr {
	return func(tp *nettest.Topology) netip.Addr {
		if fam == 6 {
			return tp.Gen.IPv6
		}
		return tp.Gen.IPv4
	}
}

// probeAt returns the address in4/in6 make of net and host in family fam.
func probeAt(fam int, net, host byte) func(tp *nettest.Topology) netip.Addr {
	return func(tp *nettest.Topology) netip.Addr {
		if fam == 6 {
			return in6(tp, uint16(net), uint16(host))
		}
		return in4(tp, net, host)
	}
}

// probeFixed returns the address a, whatever the topology.
func probeFixed(a string) func(tp *nettest.Topology) netip.Addr {
	return func(*nettest.Topology) netip.Addr { return netip.MustParseAddr(a) }
}
