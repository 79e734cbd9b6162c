package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// IPv6 NAT against the kernel: port forwards from gen to sink (TCP and
// UDP, later packets and replies), to fw's other address (locally
// delivered), into a port range, and gen's connections masqueraded
// (the source the kernel picks among two addresses of the out device) or
// SNATed into a port range, through xfw and ip6tables-legacy in twin
// topologies; what clients and servers saw, the nat table's counters
// and filter's rules that see translated packets (`--ctreplsrc`,
// `--ctrepldst` among them), and `conntrack -L -f ipv6` with both tuples,
// compared.

// nat6Ruleset is TestNat6AgainstKernel's ruleset; X is the topology's
// index, OUT fw's sink-side interface. FORWARD drops what it does not
// accept: gen reaches sink only through a translation or as an
// established reply.
const nat6Ruleset = natTableStart + `-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 8080 -j DNAT --to-destination [fd00:X:2::2]:80
-A PREROUTING -d fd00:X:1::1/128 -p udp -m udp --dport 5353 -j DNAT --to-destination [fd00:X:2::2]:53
-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 2222 -j DNAT --to-destination [fd00:X:2::1]:7022
-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 8091 -j DNAT --to-destination [fd00:X:2::2]:9000-9009
-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 7777 -j DNAT --to-destination :7023
-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 8083 -j DNAT --to-destination [fd00:X:2::2]:83
-A PREROUTING -d fd00:X:1::1/128 -p udp -m udp --dport 5355 -j DNAT --to-destination [fd00:X:2::2]:55
-A PREROUTING -d fd00:X:1::1/128 -p udp -m udp --dport 5356 -j DNAT --to-destination [fd00:X:2::2]:56
-A POSTROUTING -o OUT -p tcp -m tcp --dport 82 -j SNAT --to-source [fd00:X:2::1]:4000-4010
-A POSTROUTING -o OUT -p tcp -m tcp --dport 81 -j MASQUERADE
-A POSTROUTING -o OUT -p udp -m udp --dport 54 -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -d fd00:X:2::2/128 -m conntrack --ctstate NEW --ctreplsrc fd00:X:2::2 --ctrepldst fd00:X:1::2
-A FORWARD -m conntrack --ctstate NEW ! --ctreplsrc fd00:X:2::/64
-A FORWARD -p udp -m conntrack --ctstate SNAT --ctrepldst fd00:X:2::1
-A INPUT -d fd00:X:2::1/128 -p tcp -m tcp --dport 7022 -m conntrack --ctstate NEW,DNAT --ctorigdst fd00:X:1::1 --ctorigdstport 2222
-A INPUT -d fd00:X:1::1/128 -p tcp -m tcp --dport 7023 -m conntrack --ctstate DNAT --ctorigdstport 7777
-A FORWARD -d fd00:X:2::2/128 -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst fd00:X:1::1 --ctorigdstport 8080 -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p udp -m udp --dport 53 -m conntrack --ctstate NEW,DNAT -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p tcp -m tcp --dport 9000:9009 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p tcp -m tcp --dport 83 -j REJECT --reject-with tcp-reset
-A FORWARD -d fd00:X:2::2/128 -p udp -m udp --dport 55 -j REJECT --reject-with icmp6-port-unreachable
-A FORWARD -d fd00:X:2::2/128 -p udp -m udp --dport 56 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -p ipv6-icmp -m conntrack --ctstate RELATED -j ACCEPT
-A FORWARD -s fd00:X:1::2/128 -p tcp -m tcp --dport 81:82 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -s fd00:X:1::2/128 -p udp -m udp --dport 54 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED,SNAT -j ACCEPT
COMMIT
`

// nat6Addr is the address fd00:X:net::host of tp.
func nat6Addr(tp *nettest.Topology, net, host int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:%d:%d::%d", tp.Subnet, net, host))
}

// nat6Far is sink's address outside the topology's subnets (fd09:X::9),
// routed by fw through sink.
func nat6Far(tp *nettest.Topology) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd09:%d::9", tp.Subnet))
}

// nat6Name names an address of tp for comparisons between the twins.
func nat6Name(tp *nettest.Topology, a netip.Addr) string {
	switch a {
	case tp.Gen.IPv6:
		return "GEN"
	case tp.FwIn.IPv6:
		return "FWIN"
	case tp.FwOut.IPv6:
		return "FWOUT"
	case tp.Sink.IPv6:
		return "SINK"
	case nat6Addr(tp, 3, 1):
		return "FWOUT3"
	case nat6Addr(tp, 3, 2):
		return "SINK3"
	case nat6Addr(tp, 4, 1):
		return "FWIN4"
	case nat6Far(tp):
		return "FAR"
	}
	// Another address of the topology's subnet: the same in both twins.
	if subnet := fmt.Sprintf("fd00:%d:", tp.Subnet); strings.HasPrefix(a.String(), subnet) {
		return "fd00:X:" + strings.TrimPrefix(a.String(), subnet)
	}
	return a.String()
}

// nat6Setup gives fw's sink-side interface a second address, after its
// first (fd00:X:3::1/64), sink the matching fd00:X:3::2/64 and the far
// address fd09:X::9, and the routes to them: MASQUERADE picks among fw's
// two addresses.
func nat6Setup(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	far := nat6Far(tp).String()
	for _, c := range []struct {
		ns   string
		argv []string
	}{
		{tp.FwNS, []string{"ip", "-6", "addr", "add", nat6Addr(tp, 3, 1).String() + "/64", "dev", tp.FwOut.Ifname, "nodad"}},
		{tp.SinkNS, []string{"ip", "-6", "addr", "add", nat6Addr(tp, 3, 2).String() + "/64", "dev", tp.Sink.Ifname, "nodad"}},
		{tp.SinkNS, []string{"ip", "-6", "addr", "add", far + "/128", "dev", "lo"}},
		{tp.FwNS, []string{"ip", "-6", "route", "add", far + "/128", "via", tp.Sink.IPv6.String()}},
		{tp.GenNS, []string{"ip", "-6", "route", "add", nat6Addr(tp, 3, 0).String() + "/64", "via", tp.FwIn.IPv6.String()}},
		{tp.GenNS, []string{"ip", "-6", "route", "add", far + "/128", "via", tp.FwIn.IPv6.String()}},
	} {
		if res, err := nettest.Exec(c.ns, c.argv...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", c.argv, err, res)
		}
	}
}

// nat6Load sets tp up (nat6Setup) and loads nat6Ruleset into fw.
func nat6Load(t *testing.T, tp *nettest.Topology, fw firewall) {
	t.Helper()
	nat6Setup(t, tp)
	fw.restore(t, tp, 6, strings.NewReplacer("fd00:X:", fmt.Sprintf("fd00:%d:", tp.Subnet),
		" OUT ", " "+tp.FwOut.Ifname+" ").Replace(nat6Ruleset))
}

// nat6TCP connects from gen to dst with a payload echoed by a server at
// srv (in srvNS: "sink" or "fw") and says what both ends saw, the
// server's view of the client's port shown when keep says it is not
// ephemeral (else whether it was kept, or in 4000-4010).
func nat6TCP(srvNS string, srv, dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		ns := tp.SinkNS
		if srvNS == "fw" {
			ns = tp.FwNS
		}
		s := nettest.StartTCPServer(t, ns, srv(tp), nettest.Echo())
		defer s.Close()
		a := nettest.TCPConnect(tp.GenNS, dst(tp), nettest.WithPayload([]byte("through-nat6")),
			nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		if a.Outcome == nettest.OK {
			for _, c := range s.WaitFinished(1, 2*time.Second) {
				p := c.From.Port()
				out += fmt.Sprintf("; server saw %s data %q port kept %v in 4000-4010 %v", nat6Name(tp, c.From.Addr()),
					c.Data, p == a.Local.Port(), p >= 4000 && p <= 4010)
			}
		}
		return out
	}
}

// nat6At returns fd00:X:net::host port.
func nat6At(net, host int, port uint16) func(tp *nettest.Topology) netip.AddrPort {
	return func(tp *nettest.Topology) netip.AddrPort { return netip.AddrPortFrom(nat6Addr(tp, net, host), port) }
}

// nat6Any returns [::]:port.
func nat6Any(port uint16) func(tp *nettest.Topology) netip.AddrPort {
	return func(*nettest.Topology) netip.AddrPort { return netip.AddrPortFrom(netip.IPv6Unspecified(), port) }
}

// nat6UDP sends two datagrams from gen's port sport to dst, echoed by a
// server on sink's first address and port, and says what both ends saw.
func nat6UDP(sport, port uint16, dst func(tp *nettest.Topology) netip.AddrPort) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		// Bound to sink's first address: its replies must come from
		// it (an unbound socket's source would be sink's newest address).
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv6, port), nettest.Echo())
		defer srv.Close()
		out := ""
		for i := 0; i < 2; i++ {
			a := nettest.UDPSend(tp.GenNS, dst(tp), []byte("q"), nettest.ExpectReply(), nettest.WithTimeout(2*time.Second),
				nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv6, sport)))
			// A connected socket: a reply came from dst.
			out += fmt.Sprintf("datagram %d: %s reply %q; ", i, a.Outcome, a.Reply)
		}
		for _, d := range srv.Wait(2, 2*time.Second) {
			out += fmt.Sprintf("server saw %s:%d; ", nat6Name(tp, d.From.Addr()), d.From.Port())
		}
		return out
	}
}

// nat6Steps are TestNat6AgainstKernel's steps, in order.
var nat6Steps = []natStep{
	{"tcp port forward to sink", nat6TCP("sink", nat6At(2, 2, 80), nat6At(1, 1, 8080))},
	{"udp port forward, a later datagram, the replies from the original address", nat6UDP(31053, 53, nat6At(1, 1, 5353))},
	{"tcp to fw's other address (delivered locally)", nat6TCP("fw", nat6At(2, 1, 7022), nat6At(1, 1, 2222))},
	{"tcp to fw keeping the address, another port", nat6TCP("fw", nat6At(1, 1, 7023), nat6At(1, 1, 7777))},
	{"tcp forwarded into a port range", nat6TCP("sink", nat6At(2, 2, 9000), nat6At(1, 1, 8091))},
	{"tcp masqueraded to sink's first address", nat6TCP("sink", nat6Any(81), nat6At(2, 2, 81))},
	{"tcp masqueraded to sink's second address (fw's second address)", nat6TCP("sink", nat6Any(81), nat6At(3, 2, 81))},
	{"tcp masqueraded to a far address (fw's newest address)", nat6TCP("sink", nat6Any(81), func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(nat6Far(tp), 81)
	})},
	{"udp masqueraded, the port kept, a later datagram", nat6UDP(31054, 54, nat6At(2, 2, 54))},
	{"tcp SNAT into a port range", nat6TCP("sink", nat6Any(82), nat6At(2, 2, 82))},
	{"tcp forwarded, then rejected with a reset: the reset from the original destination", func(t *testing.T, tp *nettest.Topology) string {
		return string(nettest.TCPConnect(tp.GenNS, nat6At(1, 1, 8083)(tp), nettest.WithTimeout(2*time.Second)).Outcome)
	}},
	{"udp forwarded, then rejected: the error about the original destination", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.UDPSend(tp.GenNS, nat6At(1, 1, 5355)(tp), []byte("q"), nettest.ExpectReply(),
			nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"tcp straight to sink: not translated, dropped", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartTCPServer(t, tp.SinkNS, nat6At(2, 2, 80)(tp))
		defer srv.Close()
		// One SYN in both twins (oneSYNTimeout).
		a := nettest.TCPConnect(tp.GenNS, nat6At(2, 2, 80)(tp), nettest.WithTimeout(oneSYNTimeout))
		return string(a.Outcome)
	}},
}

// TestNat6AgainstKernel runs nat6Steps through both twins and compares
// the outcomes, the counters and the connection tables.
func TestNat6AgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) { nat6Load(t, tp, fw) })
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, nat6Steps)
	checkNat6ICMPErrorTranslated(t, tw)
	compareNatCountersFam(t, tw, 6, 17)
	// Ephemeral ports and the ports chosen in 4000-4010 vary; the UDP
	// clients bind 31053 and 31054, below the ephemeral range, so a TCP
	// client's ephemeral port cannot equal one of them.
	compareNatConntrackFam(t, tw, 6, func(key string, p int) bool {
		return (key == "sport" || key == "dport") && (p >= 32768 || p >= 4000 && p <= 4010)
	}, 9)
}

// checkNat6ICMPErrorTranslated sends a datagram DNATed to a closed port
// of sink: the kernel translates sink's port unreachable back (gen's
// socket sees the refusal, from the original destination), and so does
// xfw (bpf/nat6_icmp.h; it dropped the error before): gen's socket is
// refused and gen sees no ICMPv6 from sink's address.
func checkNat6ICMPErrorTranslated(t *testing.T, tw *twins) {
	t.Helper()
	want := map[string]nettest.Outcome{"kernel": nettest.Refused, "xfw": nettest.Refused}
	tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
		fromSink := func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMPv6 && c.Src == tp.Sink.IPv6
		}
		at := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, fromSink)
		a := nettest.UDPSend(tp.GenNS, nat6At(1, 1, 5356)(tp), []byte("q"), nettest.ExpectReply(),
			nettest.WithTimeout(2*time.Second))
		frames := at.Stop()
		if a.Outcome != want[kind] || len(frames) != 0 {
			t.Errorf("%s: a datagram to sink's closed port: %s, %d ICMPv6 frames from sink's address; want %s, none",
				kind, a.Outcome, len(frames), want[kind])
		}
	})
}

// TestNat6Checksums checks the transport checksums of translated IPv6
// packets through both twins: a socket's segments from gen (a partial
// checksum on veth: the field holds the pseudo-header sum), raw frames
// with full checksums (translated at XDP; one with a destination options
// header before its UDP header), sink's replies with full checksums
// (sink's transmit checksumming off; translated back at TC egress) and a
// masqueraded connection's. Every TCP and UDP frame gen and sink receive
// must carry a consistent checksum, full or partial, and the kinds must
// be the kernel's.
func TestNat6Checksums(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy", "ethtool")
	tw := newTwins(t, xfwPath(t))
	kinds := map[string][]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nat6Load(t, tp, fw)
		if res, err := nettest.Exec(tp.SinkNS, "ethtool", "-K", tp.Sink.Ifname, "tx", "off"); err != nil || res.ExitCode != 0 {
			t.Errorf("%s: ethtool: %v %v", kind, err, res)
			return
		}
		l4 := func(c nettest.Captured) bool {
			return !c.Outgoing && (c.Protocol == nettest.ProtoTCP || c.Protocol == nettest.ProtoUDP)
		}
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, l4)
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, l4)
		nat6TCP("sink", nat6At(2, 2, 80), nat6At(1, 1, 8080))(t, tp)
		nat6TCP("sink", nat6Any(81), nat6At(2, 2, 81))(t, tp)
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv6, 53), nettest.Echo())
		defer srv.Close()
		fwin := nat6Addr(tp, 1, 1)
		udp := nettest.UDPPacket(netip.AddrPortFrom(tp.Gen.IPv6, 31001), netip.AddrPortFrom(fwin, 5353),
			[]byte("full-checksum"))
		ext := nettest.IPv6{Src: tp.Gen.IPv6, Dst: fwin, HopLimit: 64, Ext: []nettest.ExtHeader{nettest.DestOpts(nettest.PadNOption(4))}}.
			Packet(nettest.UDP{SrcPort: 31003, DstPort: 5353, Payload: []byte("after-dstopts")})
		if err := tp.InjectFromGen(tp.GenToFw().Frame(udp), tp.GenToFw().Frame(ext)); err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
		for _, port := range []uint16{31001, 31003} {
			if _, ok := atGen.WaitFor(func(c nettest.Captured) bool { return c.DstPort == port }, 2*time.Second); !ok {
				t.Errorf("%s: no echo of the raw datagram from port %d", kind, port)
			}
		}
		got := frameKinds(map[string]*nettest.Capture{"sink": atSink, "gen": atGen}, func(f nettest.Captured) string {
			return nat6FrameName(tp, f) + " " + checksumKind6(f.Raw)
		})
		mu.Lock()
		kinds[kind] = got
		mu.Unlock()
	})
	compareChecksumKinds(t, kinds)
}

// nat6FrameName names a captured frame's protocol and endpoints for
// comparisons between the twins (ephemeral ports dropped).
func nat6FrameName(tp *nettest.Topology, f nettest.Captured) string {
	return frameName(f, func(a netip.Addr) string { return nat6Name(tp, a) })
}

// checksumKind6 says whether an Ethernet frame's IPv6 TCP or UDP checksum
// is a valid full checksum ("full"), a partial one (the field holds the
// pseudo-header sum: "partial"), or neither ("bad"); extension headers
// before the transport header are skipped.
func checksumKind6(frame []byte) string {
	const ethLen, ipLen = 14, 40
	if len(frame) < ethLen+ipLen {
		return "bad"
	}
	ip := frame[ethLen:]
	end := ipLen + (int(ip[4])<<8 | int(ip[5]))
	if end > len(ip) {
		return "bad"
	}
	next, off := ip[6], ipLen
	for next == 0 || next == 43 || next == 60 { // hop-by-hop, routing, destination options
		if off+2 > end {
			return "bad"
		}
		next, off = ip[off], off+(int(ip[off+1])+1)*8
	}
	if off > end {
		return "bad"
	}
	seg := ip[off:end]
	csoff := 16
	if next == nettest.ProtoUDP {
		csoff = 6
	}
	if len(seg) < csoff+2 {
		return "bad"
	}
	pseudo := append([]byte(nil), ip[8:40]...)
	pseudo = append(pseudo, byte(len(seg)>>24), byte(len(seg)>>16), byte(len(seg)>>8), byte(len(seg)), 0, 0, 0, next)
	return l4ChecksumKind(pseudo, seg, csoff)
}
