package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// A probe is one frame injected at gen toward sink through fw.
type probe struct {
	name  string
	build func(tp *nettest.Topology) []byte
}

// matchCase is a FORWARD rule (ending in -j DROP) with frames it must match
// (so they are dropped and counted), frames it must not match (they arrive
// at sink) and frames netfilter "hotdrops" while evaluating it (dropped, not
// counted).
type matchCase struct {
	name    string
	fam     int
	rule    string
	match   []probe
	nomatch []probe
	hotdrop []probe
}

// arrivalWait bounds how long a frame may take through fw.
const arrivalWait = 400 * time.Millisecond

func v4(tp *nettest.Topology, host byte) netip.Addr {
	a := tp.GenNet4.Addr().As4()
	a[3] = host
	return netip.AddrFrom4(a)
}

func v6(tp *nettest.Topology, host byte) netip.Addr {
	a := tp.GenNet6.Addr().As16()
	a[15] = host
	return netip.AddrFrom16(a)
}

func frame(tp *nettest.Topology, ip []byte) []byte { return tp.GenToFw().Frame(ip) }

// udp4 builds a UDP datagram gen(host) → sink.
func udp4(src byte, sport, dport uint16, h nettest.IPv4) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h.Src, h.Dst = v4(tp, src), tp.Sink.IPv4
		return frame(tp, h.Packet(nettest.UDP{SrcPort: sport, DstPort: dport, Payload: []byte("xfw-probe")}))
	}
}

func tcp4(src byte, sport, dport uint16, flags uint16, h nettest.IPv4) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h.Src, h.Dst = v4(tp, src), tp.Sink.IPv4
		return frame(tp, h.Packet(nettest.TCP{SrcPort: sport, DstPort: dport, Flags: flags, Seq: 1000, Window: 512}))
	}
}

func icmp4(src byte, typ, code uint8) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h := nettest.IPv4{Src: v4(tp, src), Dst: tp.Sink.IPv4}
		return frame(tp, h.Packet(nettest.ICMPv4{Type: typ, Code: code, Payload: []byte("xfw-probe")}))
	}
}

func udp6(src byte, sport, dport uint16, h nettest.IPv6) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h.Src, h.Dst = v6(tp, src), tp.Sink.IPv6
		return frame(tp, h.Packet(nettest.UDP{SrcPort: sport, DstPort: dport, Payload: []byte("xfw-probe")}))
	}
}

func tcp6(src byte, sport, dport uint16, flags uint16, h nettest.IPv6) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h.Src, h.Dst = v6(tp, src), tp.Sink.IPv6
		return frame(tp, h.Packet(nettest.TCP{SrcPort: sport, DstPort: dport, Flags: flags, Seq: 1000, Window: 512}))
	}
}

func icmp6(src byte, typ, code uint8) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h := nettest.IPv6{Src: v6(tp, src), Dst: tp.Sink.IPv6}
		return frame(tp, h.Packet(nettest.ICMPv6{Type: typ, Code: code, Payload: []byte("xfw-probe")}))
	}
}

// raw4 builds an IPv4 packet with an arbitrary transport payload (to cut
// headers short or use other protocols).
func raw4(src byte, proto uint8, l4 []byte, h nettest.IPv4) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h.Src, h.Dst, h.Protocol = v4(tp, src), tp.Sink.IPv4, proto
		return frame(tp, h.Packet(nettest.Raw{Proto: proto, Data: l4}))
	}
}

func raw6(src byte, proto uint8, l4 []byte, h nettest.IPv6) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h.Src, h.Dst, h.NextHeader = v6(tp, src), tp.Sink.IPv6, proto
		return frame(tp, h.Packet(nettest.Raw{Proto: proto, Data: l4}))
	}
}

// withSrcMAC rewrites the frame's Ethernet source.
func withSrcMAC(mac string, b func(*nettest.Topology) []byte) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		f := b(tp)
		hw, _ := net.ParseMAC(mac)
		copy(f[6:12], hw)
		return f
	}
}

func p(name string, b func(*nettest.Topology) []byte) probe { return probe{name, b} }

var tcpHdr10 = []byte{0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0} // 10 bytes: ports 12345→80

func matchCases() []matchCase {
	syn := nettest.TCPSyn
	ack := nettest.TCPAck
	frag1 := nettest.IPv4{FragOffset: 1}
	fragMore := nettest.IPv4{MoreFragments: true}
	hbh := nettest.IPv6{Ext: []nettest.ExtHeader{nettest.HopByHop(nettest.PadNOption(4)), nettest.DestOpts(nettest.PadNOption(4))}}
	frag6first := nettest.IPv6{Ext: []nettest.ExtHeader{nettest.FragmentHeader(0, true, 7)}}
	frag6later := nettest.IPv6{Ext: []nettest.ExtHeader{nettest.FragmentHeader(100, false, 7)}}
	return []matchCase{
		{name: "src prefix", fam: 4, rule: "-s %GEN4%.0/25",
			match: []probe{p("from .10", udp4(10, 1000, 53, nettest.IPv4{}))}, nomatch: []probe{p("from .200", udp4(200, 1000, 53, nettest.IPv4{}))}},
		{name: "not src host", fam: 4, rule: "! -s %GEN4%.10/32",
			match: []probe{p("from .11", udp4(11, 1000, 53, nettest.IPv4{}))}, nomatch: []probe{p("from .10", udp4(10, 1000, 53, nettest.IPv4{}))}},
		{name: "src netmask non-contiguous", fam: 4, rule: "-s %GEN4%.3/255.255.255.131",
			match:   []probe{p("from .7 (bits 0,1 set)", udp4(7, 1, 2, nettest.IPv4{})), p("from .3", udp4(3, 1, 2, nettest.IPv4{}))},
			nomatch: []probe{p("from .131", udp4(131, 1, 2, nettest.IPv4{})), p("from .2", udp4(2, 1, 2, nettest.IPv4{}))}},
		{name: "dst prefix", fam: 4, rule: "-d %SINK4%.0/24",
			match: []probe{p("to sink", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "proto tcp", fam: 4, rule: "-p tcp",
			match: []probe{p("tcp", tcp4(10, 1, 80, syn, nettest.IPv4{}))}, nomatch: []probe{p("udp", udp4(10, 1, 80, nettest.IPv4{}))}},
		{name: "proto not udp", fam: 4, rule: "! -p udp",
			match: []probe{p("icmp", icmp4(10, 8, 0)), p("gre", raw4(10, 47, []byte{0, 0, 8, 0}, nettest.IPv4{}))}, nomatch: []probe{p("udp", udp4(10, 1, 80, nettest.IPv4{}))}},
		{name: "proto number", fam: 4, rule: "-p 47",
			match: []probe{p("gre", raw4(10, 47, []byte{0, 0, 8, 0}, nettest.IPv4{}))}, nomatch: []probe{p("udp", udp4(10, 1, 80, nettest.IPv4{}))}},
		{name: "in interface", fam: 4, rule: "-i in0",
			match: []probe{p("via in0", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "in wildcard", fam: 4, rule: "-i in+",
			match: []probe{p("via in0", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "not in interface", fam: 4, rule: "! -i in0",
			nomatch: []probe{p("via in0", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "out wildcard", fam: 4, rule: "-o out+",
			match: []probe{p("to out0", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "not out interface", fam: 4, rule: "! -o out0",
			nomatch: []probe{p("to out0", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "fragment", fam: 4, rule: "-f",
			match:   []probe{p("later fragment", raw4(10, 17, []byte("0123456789abcdef"), nettest.IPv4{FragOffset: 4}))},
			nomatch: []probe{p("first fragment", udp4(10, 1, 2, fragMore)), p("whole", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "not fragment", fam: 4, rule: "! -f",
			match:   []probe{p("first fragment", udp4(10, 1, 2, fragMore))},
			nomatch: []probe{p("later fragment", raw4(10, 17, []byte("0123456789abcdef"), nettest.IPv4{FragOffset: 4}))}},
		{name: "tcp dport", fam: 4, rule: "-p tcp -m tcp --dport 80",
			match:   []probe{p("80", tcp4(10, 1234, 80, syn, nettest.IPv4{}))},
			nomatch: []probe{p("81", tcp4(10, 1234, 81, syn, nettest.IPv4{})), p("later fragment", raw4(10, 6, []byte("0123456789abcdef"), nettest.IPv4{FragOffset: 4}))}},
		{name: "tcp sport range inverted", fam: 4, rule: "-p tcp -m tcp ! --sport 1000:2000",
			match: []probe{p("999", tcp4(10, 999, 80, syn, nettest.IPv4{})), p("2001", tcp4(10, 2001, 80, syn, nettest.IPv4{}))}, nomatch: []probe{p("1000", tcp4(10, 1000, 80, syn, nettest.IPv4{})), p("2000", tcp4(10, 2000, 80, syn, nettest.IPv4{}))}},
		{name: "tcp syn", fam: 4, rule: "-p tcp -m tcp --syn",
			match: []probe{p("SYN", tcp4(10, 1, 80, syn, nettest.IPv4{}))}, nomatch: []probe{p("SYN|ACK", tcp4(10, 1, 80, syn|ack, nettest.IPv4{})), p("ACK", tcp4(10, 1, 80, ack, nettest.IPv4{}))}},
		{name: "tcp flags inverted", fam: 4, rule: "-p tcp -m tcp ! --tcp-flags FIN,SYN,RST,ACK ACK",
			match: []probe{p("SYN", tcp4(10, 1, 80, syn, nettest.IPv4{}))}, nomatch: []probe{p("ACK", tcp4(10, 1, 80, ack, nettest.IPv4{}))}},
		{name: "udp dport range", fam: 4, rule: "-p udp -m udp --dport 53:60",
			match: []probe{p("53", udp4(10, 1, 53, nettest.IPv4{})), p("60", udp4(10, 1, 60, nettest.IPv4{}))}, nomatch: []probe{p("52", udp4(10, 1, 52, nettest.IPv4{})), p("61", udp4(10, 1, 61, nettest.IPv4{}))}},
		{name: "udp with IPv4 options", fam: 4, rule: "-p udp -m udp --dport 53",
			match: []probe{p("53 + RR option", udp4(10, 1, 53, nettest.IPv4{Options: []byte{7, 7, 4, 0, 0, 0, 0}}))}},
		{name: "multiport dports", fam: 4, rule: "-p tcp -m multiport --dports 22,80:90",
			match: []probe{p("22", tcp4(10, 1, 22, syn, nettest.IPv4{})), p("85", tcp4(10, 1, 85, syn, nettest.IPv4{}))}, nomatch: []probe{p("91", tcp4(10, 1, 91, syn, nettest.IPv4{}))}},
		{name: "multiport ports either", fam: 4, rule: "-p udp -m multiport --ports 5000",
			match: []probe{p("sport", udp4(10, 5000, 9, nettest.IPv4{})), p("dport", udp4(10, 9, 5000, nettest.IPv4{}))}, nomatch: []probe{p("neither", udp4(10, 9, 9, nettest.IPv4{}))}},
		{name: "multiport not ports", fam: 4, rule: "-p udp -m multiport ! --ports 5000",
			match: []probe{p("neither", udp4(10, 9, 9, nettest.IPv4{}))}, nomatch: []probe{p("sport", udp4(10, 5000, 9, nettest.IPv4{}))}},
		{name: "icmp type", fam: 4, rule: "-p icmp -m icmp --icmp-type 8",
			match: []probe{p("echo", icmp4(10, 8, 0))}, nomatch: []probe{p("timestamp", icmp4(10, 13, 0))}},
		{name: "icmp type code", fam: 4, rule: "-p icmp -m icmp --icmp-type 3/4",
			match: []probe{p("3/4", icmp4(10, 3, 4))}, nomatch: []probe{p("3/3", icmp4(10, 3, 3))}},
		{name: "icmp not type", fam: 4, rule: "-p icmp -m icmp ! --icmp-type 8",
			match: []probe{p("timestamp", icmp4(10, 13, 0))}, nomatch: []probe{p("echo", icmp4(10, 8, 0))}},
		{name: "iprange src", fam: 4, rule: "-m iprange --src-range %GEN4%.20-%GEN4%.30",
			match: []probe{p(".20", udp4(20, 1, 2, nettest.IPv4{})), p(".30", udp4(30, 1, 2, nettest.IPv4{}))}, nomatch: []probe{p(".19", udp4(19, 1, 2, nettest.IPv4{})), p(".31", udp4(31, 1, 2, nettest.IPv4{}))}},
		{name: "iprange not dst", fam: 4, rule: "-m iprange ! --dst-range %SINK4%.1-%SINK4%.9",
			nomatch: []probe{p("to sink .2", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "length", fam: 4, rule: "-m length --length 30:40",
			match: []probe{p("37 bytes", udp4(10, 1, 2, nettest.IPv4{}))}, nomatch: []probe{p("TCP 40+ bytes", tcp4(10, 1, 80, syn, nettest.IPv4{Options: []byte{1, 1, 1, 1}}))}},
		// FORWARD sees the TTL already decremented by ip_forward.
		{name: "ttl lt", fam: 4, rule: "-m ttl --ttl-lt 10",
			match: []probe{p("ttl 10 (9 in FORWARD)", udp4(10, 1, 2, nettest.IPv4{TTL: 10}))}, nomatch: []probe{p("ttl 11", udp4(10, 1, 2, nettest.IPv4{TTL: 11}))}},
		{name: "ttl not eq", fam: 4, rule: "-m ttl ! --ttl-eq 64",
			match: []probe{p("ttl 64 (63 in FORWARD)", udp4(10, 1, 2, nettest.IPv4{TTL: 64}))}, nomatch: []probe{p("ttl 65", udp4(10, 1, 2, nettest.IPv4{TTL: 65}))}},
		{name: "mac source", fam: 4, rule: "-m mac --mac-source 02:00:00:00:00:99",
			match: []probe{p("that mac", withSrcMAC("02:00:00:00:00:99", udp4(10, 1, 2, nettest.IPv4{})))}, nomatch: []probe{p("gen's mac", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "comment", fam: 4, rule: `-p udp -m comment --comment "say hi"`,
			match: []probe{p("udp", udp4(10, 1, 2, nettest.IPv4{}))}},
		{name: "tcp truncated header", fam: 4, rule: "-p tcp -m tcp --dport 80",
			hotdrop: []probe{p("10-byte TCP header", raw4(10, 6, tcpHdr10, nettest.IPv4{}))},
			nomatch: []probe{p("81", tcp4(10, 1, 81, syn, nettest.IPv4{}))}},
		{name: "tcp fragment offset 1", fam: 4, rule: "-p tcp -m tcp --dport 9",
			hotdrop: []probe{p("offset-1 fragment", raw4(10, 6, []byte("0123456789abcdef"), frag1))}},
		{name: "udp truncated header, rule order", fam: 4, rule: "-p udp -m udp --dport 7 -m ttl --ttl-eq 5",
			hotdrop: []probe{p("4-byte UDP header, ttl 64", raw4(10, 17, []byte{0, 1, 0, 7}, nettest.IPv4{TTL: 64}))}},
		{name: "truncated header before the match that fails", fam: 4, rule: "-p udp -m ttl --ttl-eq 5 -m udp --dport 7",
			nomatch: []probe{p("4-byte UDP header, ttl 64", raw4(10, 17, []byte{0, 1, 0, 7}, nettest.IPv4{TTL: 64}))}},
		// IPv6
		{name: "v6 src prefix", fam: 6, rule: "-s %GEN6%:0/124",
			match: []probe{p("::5", udp6(0x05, 1, 2, nettest.IPv6{}))}, nomatch: []probe{p("::10", udp6(0x10, 1, 2, nettest.IPv6{}))}},
		{name: "v6 not dst", fam: 6, rule: "! -d %SINK6%:2/128",
			nomatch: []probe{p("to sink", udp6(0x10, 1, 2, nettest.IPv6{}))}},
		{name: "v6 tcp dport after ext headers", fam: 6, rule: "-p tcp -m tcp --dport 80",
			match: []probe{p("hbh+dstopts", tcp6(0x10, 1, 80, syn, hbh)), p("first fragment", tcp6(0x10, 1, 80, syn, frag6first))}, nomatch: []probe{p("later fragment", raw6(0x10, 6, []byte("0123456789abcdef"), frag6later)), p("81", tcp6(0x10, 1, 81, syn, hbh))}},
		{name: "v6 proto udp", fam: 6, rule: "-p udp",
			match: []probe{p("udp", udp6(0x10, 1, 2, hbh))}, nomatch: []probe{p("tcp", tcp6(0x10, 1, 2, syn, nettest.IPv6{}))}},
		{name: "v6 icmp6 type", fam: 6, rule: "-p ipv6-icmp -m icmp6 --icmpv6-type 128",
			match: []probe{p("echo request", icmp6(0x10, 128, 0))}, nomatch: []probe{p("echo reply", icmp6(0x10, 129, 0))}},
		{name: "v6 hl", fam: 6, rule: "-m hl --hl-gt 100",
			match: []probe{p("hl 102", udp6(0x10, 1, 2, nettest.IPv6{HopLimit: 102}))}, nomatch: []probe{p("hl 101 (100 in FORWARD)", udp6(0x10, 1, 2, nettest.IPv6{HopLimit: 101}))}},
		{name: "v6 proto all, malformed extension header", fam: 6, rule: "-p all",
			match: []probe{p("udp", udp6(0x10, 1, 2, nettest.IPv6{})), p("destination options cut short", raw6(0x10, 60, []byte{17, 4, 1, 2}, nettest.IPv6{}))}},
		{name: "v6 proto, malformed extension header", fam: 6, rule: "-p udp",
			match: []probe{p("udp", udp6(0x10, 1, 2, nettest.IPv6{})),
				p("destination options longer than the packet (ipv6_find_hdr reads two bytes)", raw6(0x10, 60, []byte{17, 4, 1, 2}, nettest.IPv6{}))},
			hotdrop: []probe{p("destination options cut to one byte", raw6(0x10, 60, []byte{17}, nettest.IPv6{}))}},
		{name: "v6 udp match, transport header past the end", fam: 6, rule: "-p udp -m udp --dport 2",
			hotdrop: []probe{p("destination options longer than the packet", raw6(0x10, 60, []byte{17, 4, 1, 2}, nettest.IPv6{}))}},
		{name: "v6 multiport sports", fam: 6, rule: "-p udp -m multiport --sports 7,9",
			match: []probe{p("sport 9", udp6(0x10, 9, 2, nettest.IPv6{}))}, nomatch: []probe{p("sport 8", udp6(0x10, 8, 2, nettest.IPv6{}))}},
		{name: "v6 length", fam: 6, rule: "-m length --length 0:60",
			match: []probe{p("57 bytes", udp6(0x10, 1, 2, nettest.IPv6{}))}, nomatch: []probe{p("longer", udp6(0x10, 1, 2, hbh))}},
	}
}

// expand replaces %GEN4% etc. with the topology's address prefixes.
func expand(tp *nettest.Topology, s string) string {
	g4 := tp.GenNet4.Addr().As4()
	s4 := tp.SinkNet4.Addr().As4()
	r := strings.NewReplacer(
		"%GEN4%", fmt.Sprintf("%d.%d.%d", g4[0], g4[1], g4[2]),
		"%SINK4%", fmt.Sprintf("%d.%d.%d", s4[0], s4[1], s4[2]),
		"%GEN6%", strings.TrimSuffix(tp.GenNet6.Addr().String(), ":"),
		"%SINK6%", strings.TrimSuffix(tp.SinkNet6.Addr().String(), ":"),
	)
	return r.Replace(s)
}

// outcome of one probe in one firewall.
type outcome struct {
	arrived bool
}

// runProbes injects each probe at gen and reports which arrived at sink.
func runProbes(t *testing.T, tp *nettest.Topology, probes []probe) []outcome {
	t.Helper()
	out := make([]outcome, len(probes))
	for i, pr := range probes {
		out[i].arrived = sendProbe(t, tp, pr, 0)
	}
	return out
}

// sendProbe injects one probe at gen and reports whether it reached sink:
// with wait 0, whether it had once fw took in everything sent so far
// (Drain; the frame fw forwarded is then on the capture's queue), without
// waiting for one that does not come; else whether it did within wait.
func sendProbe(t *testing.T, tp *nettest.Topology, pr probe, wait time.Duration) bool {
	t.Helper()
	fr := pr.build(tp)
	sent, err := nettest.Parse(fr)
	if sent == nil || sent.IPVersion == 0 {
		t.Fatalf("probe %s: %v", pr.name, err)
	}
	capt := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, func(c nettest.Captured) bool {
		return !c.Outgoing && c.Src == sent.Src && c.Dst == sent.Dst && c.Protocol == sent.Protocol
	})
	defer capt.Stop()
	if err := tp.InjectFromGen(fr); err != nil {
		t.Fatalf("inject %s: %v", pr.name, err)
	}
	if wait == 0 {
		drainFw(t, tp)
		return len(capt.StopQueued()) > 0
	}
	return len(capt.Wait(1, wait)) > 0
}

// arrivalRecheckWait is how long a probe sent again may take: a probe
// that should have arrived (the other firewall passed it, or the case
// expects it) but had not once fw was drained is sent once more, and
// waited for. Sending a probe that matched
// nothing again changes no rule counter; one that matched shows in the
// counters compared afterwards.
const arrivalRecheckWait = 3 * time.Second

// TestMatchesAgainstKernel runs every match case through xfw and through
// the kernel's iptables (legacy) in twin topologies, and requires the same
// deliveries and counters from both, and the deliveries the case expects.
func TestMatchesAgainstKernel(t *testing.T) {
	runMatchCases(t, matchCases())
}

// runMatchCases runs each case in twin topologies, one with
// iptables-legacy and one with xfw, and compares arrivals and counters.
func runMatchCases(t *testing.T, cases []matchCase) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tps, fws := tw.tps, tw.fws
	for _, tp := range tps {
		quietSink(t, tp)
	}

	for _, mc := range cases {
		mc := mc
		t.Run(mc.name, func(t *testing.T) {
			probes := append(append(append([]probe{}, mc.match...), mc.hotdrop...), mc.nomatch...)
			results := map[string][]outcome{}
			saves := map[string]string{}
			var mu sync.Mutex
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				rules := fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD %s -j DROP\nCOMMIT\n", expand(tp, mc.rule))
				fw.restore(t, tp, mc.fam, rules)
				res := runProbes(t, tp, probes)
				mu.Lock()
				results[kind] = res
				mu.Unlock()
			})
			if t.Failed() {
				return
			}
			for i, pr := range probes {
				want := i >= len(mc.match)+len(mc.hotdrop) // only nomatch probes arrive
				k, x := results["kernel"][i].arrived, results["xfw"][i].arrived
				if !k && (x || want) {
					results["kernel"][i].arrived = sendProbe(t, tps["kernel"], pr, arrivalRecheckWait)
				}
				if !x && (k || want) {
					results["xfw"][i].arrived = sendProbe(t, tps["xfw"], pr, arrivalRecheckWait)
				}
			}
			for _, kind := range []string{"kernel", "xfw"} {
				saves[kind] = fws[kind].save(t, tps[kind], mc.fam)
			}
			for i, pr := range probes {
				k, x := results["kernel"][i].arrived, results["xfw"][i].arrived
				want := i >= len(mc.match)+len(mc.hotdrop) // only nomatch probes arrive
				if k != x {
					t.Errorf("%s: kernel arrived=%v, xfw arrived=%v", pr.name, k, x)
				}
				if k != want {
					t.Errorf("%s: kernel arrived=%v, the case expects %v (fix the case)", pr.name, k, want)
				}
			}
			kc, xc := ruleCounters(t, saves["kernel"]), ruleCounters(t, saves["xfw"])
			if kc != xc {
				t.Errorf("rule counters: kernel %v, xfw %v\nkernel:\n%s\nxfw:\n%s", kc, xc, saves["kernel"], saves["xfw"])
			}
			if want := uint64(len(mc.match)); xc.packets != want {
				t.Errorf("xfw counted %d packets, the case expects %d", xc.packets, want)
			}
		})
	}
}

// ruleCounters returns the counters of the only FORWARD rule.
func ruleCounters(t *testing.T, save string) counter {
	t.Helper()
	for k, v := range counters(t, save) {
		if strings.HasPrefix(k, "FORWARD ") {
			return v
		}
	}
	t.Fatalf("no FORWARD rule in\n%s", save)
	return counter{}
}

// quietSink makes sink drop everything it receives (with the kernel's
// iptables, inside sink's own namespace), so that its replies (ICMP errors,
// RSTs) do not cross fw and add to fw's counters. Captures at sink still
// see every frame: AF_PACKET runs before netfilter.
func quietSink(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-P", "INPUT", "DROP")
	nettest.MustExec(t, tp.SinkNS, "ip6tables-legacy", "-P", "INPUT", "DROP")
}
