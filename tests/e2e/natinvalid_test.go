package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// INVALID packets of translated connections against the kernel. The
// kernel's conntrack attaches no connection to a packet it finds INVALID
// (nf_conntrack_in clears skb->_nfct after a TCP segment out of the
// window), and its nat hooks leave a packet without a connection as it
// came (nf_nat_inet_fn): neither translated nor counted to the
// connection, routed and judged by its own addresses. Two connections
// from gen, one DNAT'ed (fw's address port 8080 to sink port 80), one
// SNAT'ed (to sink port 81, its source fw's out0 address port 40001);
// then a segment far outside the window in each direction of each,
// injected on the wire: what gen and sink saw, the chains' counters (a
// DNAT's INVALID packet to fw's address is INPUT's, not FORWARD's), and
// that both connections still carry data. A third connection, fw's own
// to gen port 8080, which nat OUTPUT sends to sink port 82, then gets a
// segment out of its window from a raw socket in fw: the kernel sends it
// to gen, untranslated. Last, sink's segment in the DNAT connection
// that raw PREROUTING exempts from tracking (UNTRACKED: no connection
// either) reaches gen untranslated.

// natInvalidRuleset is the ruleset of family fam for tp.
func natInvalidRuleset(tp *nettest.Topology, fam int) string {
	gen, fwin, fwout, sink := tp.Gen.IPv4, tp.FwIn.IPv4, tp.FwOut.IPv4, tp.Sink.IPv4
	if fam == 6 {
		gen, fwin, fwout, sink = tp.Gen.IPv6, tp.FwIn.IPv6, tp.FwOut.IPv6, tp.Sink.IPv6
	}
	to := func(a netip.Addr, port int) string {
		return netip.AddrPortFrom(a, uint16(port)).String()
	}
	return fmt.Sprintf(`*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -s %[4]s -p tcp -m tcp --tcp-flags URG URG -j CT --notrack
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d %[2]s -p tcp -m tcp --dport 8080 -j DNAT --to-destination %[5]s
-A OUTPUT -d %[1]s -p tcp -m tcp --dport 8080 -j DNAT --to-destination %[8]s
-A POSTROUTING -o %[7]s -d %[4]s -p tcp -m tcp --dport 81 -j SNAT --to-source %[6]s
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s %[1]s -p tcp -m conntrack --ctstate INVALID -j DROP
-A INPUT -s %[4]s -p tcp -m conntrack --ctstate INVALID -j DROP
-A INPUT -p tcp -m conntrack --ctstate DNAT
-A FORWARD -s %[1]s -p tcp -m conntrack --ctstate INVALID
-A FORWARD -s %[4]s -p tcp -m conntrack --ctstate INVALID
-A FORWARD -p tcp -m conntrack --ctstate INVALID -m tcp --tcp-flags RST NONE
-A FORWARD -d %[3]s -p tcp -m conntrack --ctstate ESTABLISHED
-A FORWARD -p tcp -m conntrack --ctstate UNTRACKED
-A OUTPUT -d %[1]s -p tcp -m conntrack --ctstate INVALID
-A OUTPUT -d %[4]s -p tcp -m conntrack --ctstate INVALID
COMMIT
`, gen, fwin, fwout, sink, to(sink, 80), to(fwout, 40001), tp.FwOut.Ifname, to(sink, 82))
}

// natInvalidFlow is one of the connections: its client socket and
// the next sequence numbers of both ends.
type natInvalidFlow struct {
	conn     *net.TCPConn
	port     uint16
	cli, srv uint32
}

// TestNatInvalidAgainstKernel runs the scenario above in both families.
func TestNatInvalidAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			tw := newTwins(t, xfwPath(t))
			outs := map[string][]string{}
			var mu sync.Mutex
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				// The kernel's default, which xfw reads: out-of-window
				// segments are INVALID.
				if _, err := nettest.Exec(tp.FwNS, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_be_liberal=0"); err != nil {
					t.Errorf("%s: sysctl: %v", kind, err)
				}
				fw.restore(t, tp, fam, natInvalidRuleset(tp, fam))
				out := natInvalidRun(t, kind, tp, fam)
				mu.Lock()
				outs[kind] = out
				mu.Unlock()
			})
			if t.Failed() {
				return
			}
			k, x := outs["kernel"], outs["xfw"]
			for i := range k {
				xi := "(missing)"
				if i < len(x) {
					xi = x[i]
				}
				compareTwinText(t, fmt.Sprintf("step %d", i), k[i], xi)
			}
			compareNatCountersFam(t, tw, fam, 6)
		})
	}
}

// natInvalidRun opens the two connections in tp, injects the four
// segments and returns what each step saw.
func natInvalidRun(t *testing.T, kind string, tp *nettest.Topology, fam int) []string {
	gen, fwin, fwout, sink := tp.Gen.IPv4, tp.FwIn.IPv4, tp.FwOut.IPv4, tp.Sink.IPv4
	name := func(a netip.Addr) string { return natName(tp, a) }
	if fam == 6 {
		gen, fwin, fwout, sink = tp.Gen.IPv6, tp.FwIn.IPv6, tp.FwOut.IPv6, tp.Sink.IPv6
		name = func(a netip.Addr) string { return nat6Name(tp, a) }
	}
	var out []string
	for _, port := range []uint16{80, 81, 82} {
		ln := listenTCP(t, tp.SinkNS, netip.AddrPortFrom(sink, port))
		acceptOne(ln, echoOnce)
	}
	tcpOnly := func(c nettest.Captured) bool { return c.Packet != nil && c.Protocol == nettest.ProtoTCP }
	capture := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, tcpOnly)
	capOut := nettest.StartCapture(t, tp.FwNS, tp.FwOut.Ifname, tcpOnly)
	flows := map[string]*natInvalidFlow{}
	for _, f := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"dnat", tp.GenNS, netip.AddrPortFrom(fwin, 8080)},
		{"snat", tp.GenNS, netip.AddrPortFrom(sink, 81)},
		{"output dnat", tp.FwNS, netip.AddrPortFrom(gen, 8080)},
	} {
		c, err := dialTCP(f.ns, f.dst, 2*time.Second)
		if err != nil {
			t.Errorf("%s: dial %s: %v", kind, f.name, err)
			return nil
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = c.Write([]byte("hello"))
		out = append(out, fmt.Sprintf("%s echo %s", f.name, readN(c, 5)))
		flows[f.name] = &natInvalidFlow{conn: c, port: c.LocalAddr().(*net.TCPAddr).AddrPort().Port()}
	}
	time.Sleep(ctSettle)
	frames, framesOut := capture.Stop(), capOut.Stop()
	for n, f := range flows {
		if n == "output dnat" {
			f.cli, f.srv = nextSeqs(framesOut, f.port)
		} else {
			f.cli, f.srv = nextSeqs(frames, f.port)
		}
	}
	ports := map[uint16]string{flows["dnat"].port: "C1", flows["snat"].port: "C2", flows["output dnat"].port: "C3"}
	describe := func(c nettest.Captured) string {
		p := func(v uint16) string {
			if s, ok := ports[v]; ok {
				return s
			}
			return fmt.Sprint(v)
		}
		dir := "in"
		if c.Outgoing {
			dir = "out"
		}
		return fmt.Sprintf("%s %s:%s>%s:%s %s", dir, name(c.Src), p(c.SrcPort), name(c.Dst), p(c.DstPort),
			tcpFlagsText(c.TCPFlags))
	}
	const far = 1 << 30
	d, s, o := flows["dnat"], flows["snat"], flows["output dnat"]
	seg := func(src, dst netip.Addr, sport, dport uint16, seq, ack uint32) []byte {
		return nettest.IPPacket(src, dst, nettest.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ack,
			Flags: nettest.TCPAck, Window: 512})
	}
	const fromGen, fromSink, fromFw = 0, 1, 2
	steps := []struct {
		name string
		from int
		pkt  []byte
	}{
		{"dnat original direction", fromGen, seg(gen, fwin, d.port, 8080, d.cli+far, d.srv+far)},
		{"dnat reply direction", fromSink, seg(sink, gen, 80, d.port, d.srv+far, d.cli+far)},
		{"snat original direction", fromGen, seg(gen, sink, s.port, 81, s.cli+far, s.srv+far)},
		{"snat reply direction", fromSink, seg(sink, fwout, 81, 40001, s.srv+far, s.cli+far)},
		{"dnat reply direction untracked", fromSink, nettest.IPPacket(sink, gen, nettest.TCP{SrcPort: 80,
			DstPort: d.port, Seq: d.srv, Ack: d.cli + far, Flags: nettest.TCPAck | nettest.TCPUrg, Window: 512})},
		{"output dnat original direction", fromFw, seg(fwin, gen, o.port, 8080, o.cli+far, o.srv+far)},
	}
	for _, st := range steps {
		cg := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, tcpOnly)
		cs := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, tcpOnly)
		var err error
		switch st.from {
		case fromSink:
			err = tp.InjectFromSink(tp.SinkToFw().Frame(st.pkt))
		case fromGen:
			err = tp.InjectFromGen(tp.GenToFw().Frame(st.pkt))
		default:
			err = sendRawFrom(tp.FwNS, gen, st.pkt)
		}
		if err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
		time.Sleep(400 * time.Millisecond)
		var seen []string
		for _, c := range cg.Stop() {
			seen = append(seen, "gen "+describe(c))
		}
		for _, c := range cs.Stop() {
			seen = append(seen, "sink "+describe(c))
		}
		out = append(out, st.name+": "+strings.Join(seen, "; "))
	}
	for _, n := range []string{"dnat", "snat", "output dnat"} {
		c := flows[n].conn
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("after"))
		out = append(out, fmt.Sprintf("%s still echoes %s", n, readN(c, 5)))
	}
	return out
}

// sendRawFrom sends IP packet pkt to dst from namespace ns through an
// IPPROTO_RAW socket (the header is ours; OUTPUT judges it).
func sendRawFrom(ns string, dst netip.Addr, pkt []byte) error {
	return nettest.InNamespace(ns, func() error {
		domain := unix.AF_INET
		var sa unix.Sockaddr
		if dst.Is6() {
			domain, sa = unix.AF_INET6, &unix.SockaddrInet6{Addr: dst.As16()}
		} else {
			sa = &unix.SockaddrInet4{Addr: dst.As4()}
		}
		fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		return unix.Sendto(fd, pkt, 0, sa)
	})
}

// tcpFlagsText names TCP flags f, as tcpdump's letters.
func tcpFlagsText(f uint16) string {
	var b strings.Builder
	for _, x := range []struct {
		bit uint16
		s   string
	}{{nettest.TCPSyn, "S"}, {nettest.TCPFin, "F"}, {nettest.TCPRst, "R"}, {nettest.TCPPsh, "P"}, {nettest.TCPUrg, "U"},
		{nettest.TCPAck, "."}} {
		if f&x.bit != 0 {
			b.WriteString(x.s)
		}
	}
	return b.String()
}

// TestNatInvalidBridgedAgainstKernel is the scenario above on a bridge
// (br_netfilter, TestBridgeHairpinDNAT's setup): gen's connection to the
// service address, which nat PREROUTING sends to sink, its frames bridged
// port to port; a segment far outside the window each way, neither
// translated: sink gets gen's with the service's address, gen sink's with
// sink's own.
func TestNatInvalidBridgedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeNATSetup(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		got := tw.collect(func(kind string, tp *nettest.Topology, _ firewall) string {
			return natInvalidBridgedRound(t, kind, tp, fam)
		})
		compareTwinText(t, fmt.Sprintf("IPv%d", fam), got["kernel"], got["xfw"])
		k := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], fam))
		x := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], fam))
		// The rules' counters (not the chains' policies: the kernel's
		// IPv4 OUTPUT counts a packet of its own xfw does not see,
		// with or without the segments).
		for key, kv := range k {
			if !strings.HasPrefix(key, ":") && x[key] != kv {
				t.Errorf("IPv%d %s: kernel %v, xfw %v", fam, key, kv, x[key])
			}
		}
	}
}

// natInvalidBridgedRound opens gen's connection to the service of family
// fam, bridged to sink, injects the two segments and says what gen and
// sink saw.
func natInvalidBridgedRound(t *testing.T, kind string, tp *nettest.Topology, fam int) string {
	sink, gen, vip := bridgeAddr(tp, fam, 2), bridgeAddr(tp, fam, 1), bridgeVIP(fam)
	bridgeVia(t, tp, fam, 2)
	defer bridgeVia(t, tp, fam, 0xfe)
	ln := listenTCP(t, tp.SinkNS, netip.AddrPortFrom(sink, 8080))
	acceptOne(ln, echoOnce)
	tcpOnly := func(c nettest.Captured) bool { return c.Packet != nil && c.Protocol == nettest.ProtoTCP }
	capture := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, tcpOnly)
	var c *net.TCPConn
	err := nettest.InNamespace(tp.GenNS, func() error {
		d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: nettest.NoKeepAlive,
			LocalAddr: &net.TCPAddr{IP: gen.AsSlice()}}
		nc, err := d.Dial("tcp", netip.AddrPortFrom(vip, 80).String())
		if err == nil {
			c = nc.(*net.TCPConn)
		}
		return err
	})
	if err != nil {
		capture.Stop()
		return "dial: " + errText(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = c.Write([]byte("hello"))
	out := []string{"echo " + readN(c, 5)}
	time.Sleep(ctSettle)
	port := c.LocalAddr().(*net.TCPAddr).AddrPort().Port()
	cli, srv := nextSeqs(capture.Stop(), port)
	describe := func(f nettest.Captured) string {
		p := func(v uint16) string {
			if v == port {
				return "C"
			}
			return fmt.Sprint(v)
		}
		dir := "in"
		if f.Outgoing {
			dir = "out"
		}
		return fmt.Sprintf("%s %s:%s>%s:%s %s", dir, bridgeName(tp, f.Src), p(f.SrcPort), bridgeName(tp, f.Dst),
			p(f.DstPort), tcpFlagsText(f.TCPFlags))
	}
	const far = 1 << 30
	seg := func(src, dst netip.Addr, sport, dport uint16, seq, ack uint32) []byte {
		return nettest.IPPacket(src, dst, nettest.TCP{SrcPort: sport, DstPort: dport, Seq: seq, Ack: ack,
			Flags: nettest.TCPAck, Window: 512})
	}
	for _, st := range []struct {
		name     string
		fromSink bool
		frame    []byte
	}{
		{"original direction", false, nettest.Ethernet{Dst: tp.Sink.MAC, Src: tp.Gen.MAC}.Frame(
			seg(gen, vip, port, 80, cli+far, srv+far))},
		{"reply direction", true, nettest.Ethernet{Dst: tp.Gen.MAC, Src: tp.Sink.MAC}.Frame(
			seg(sink, gen, 8080, port, srv+far, cli+far))},
	} {
		cg := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, tcpOnly)
		cs := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, tcpOnly)
		if st.fromSink {
			err = tp.InjectFromSink(st.frame)
		} else {
			err = tp.InjectFromGen(st.frame)
		}
		if err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
		time.Sleep(400 * time.Millisecond)
		var seen []string
		for _, f := range cg.Stop() {
			seen = append(seen, "gen "+describe(f))
		}
		for _, f := range cs.Stop() {
			seen = append(seen, "sink "+describe(f))
		}
		out = append(out, st.name+": "+strings.Join(seen, "; "))
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("after"))
	out = append(out, "still echoes "+readN(c, 5))
	return strings.Join(out, "\n")
}
