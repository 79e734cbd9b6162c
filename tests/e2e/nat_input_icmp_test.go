package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// ICMP errors about connections nat INPUT's SNAT translated, and the
// host's loopback traffic, steps of TestNatInput*AgainstKernel
// (nat_input_test.go):
//
//   - fw's own error about a packet whose source nat INPUT changed (a port
//     unreachable, a protocol unreachable or ICMPv6 unknown next header):
//     the kernel's nat OUTPUT hook translates the quoted packet back and
//     sends the error to the original source (routed again), where it
//     was first routed to the new source, through sink;
//   - gen's error about fw's reply (translated back, as gen saw it):
//     fw's socket sees it from the new source, quoting its reply as it
//     sent it (nat INPUT's translation of the related packet);
//   - loopback traffic nat INPUT's SNAT rules would match: the kernel's
//     POSTROUTING already bound the connection's source (a null
//     binding), so nat INPUT's rules are not consulted and the traffic
//     is not translated.

// natInIsError reports whether c is an ICMP or ICMPv6 error the capturing
// namespace received.
func natInIsError(c nettest.Captured) bool {
	return !c.Outgoing && (c.Protocol == nettest.ProtoICMP && (c.ICMPType == 3 || c.ICMPType == 11) ||
		c.Protocol == nettest.ProtoICMPv6 && c.ICMPType < 128)
}

// natInErrorBack injects from gen a packet (l4) to fw's gen-side address
// that no socket of fw takes, and says what error came back to gen: its
// type and code, its addresses, whether its checksum holds, the quoted
// packet's addresses, protocol and ports, whether the quoted UDP checksum
// holds; and whether sink saw an error (the one routed to the new source
// before its translation).
func natInErrorBack(fam int, l4 nettest.Transport) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		pkt := nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.FwIn.IPv4, TTL: 64}.Packet(l4)
		if fam == 6 {
			pkt = nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.FwIn.IPv6, HopLimit: 64}.Packet(l4)
		}
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, natInIsError)
		defer atSink.Stop()
		at := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, natInIsError)
		defer at.Stop()
		if err := tp.InjectFromGen(tp.GenToFw().Frame(pkt)); err != nil {
			return "inject from gen: " + err.Error()
		}
		out := ""
		if f, ok := at.WaitFor(natInIsError, 2*time.Second); ok {
			out = fmt.Sprintf("gen got type %d code %d %s -> %s%s", f.ICMPType, f.ICMPCode, name(tp, f.Src),
				name(tp, f.Dst), natInQuoteText(tp, fam, f.Src, f.Dst, f.Raw[14:]))
		} else {
			out = "gen got no error"
		}
		if f, ok := atSink.WaitFor(natInIsError, 200*time.Millisecond); ok {
			out += fmt.Sprintf("; sink saw an error %s -> %s", name(tp, f.Src), name(tp, f.Dst))
		}
		return out
	}
}

// natInQuoteText describes the ICMP or ICMPv6 error l3 (its IP packet,
// from src to dst): whether its checksum holds, the quoted packet's
// addresses, protocol, ports and (UDP, quoted whole) whether its checksum
// holds.
func natInQuoteText(tp *nettest.Topology, fam int, src, dst netip.Addr, l3 []byte) string {
	name, _, _ := natOutNames(fam)
	hlen := 40
	if fam == 4 {
		hlen = int(l3[0]&0xf) * 4
	}
	msg := l3[hlen:]
	sum := nettest.Checksum(msg)
	if fam == 6 {
		sum = inetSum(src, dst, nettest.ProtoICMPv6, msg)
	}
	return fmt.Sprintf(", checksum ok %v,", sum == 0) + natInQuoted(tp, fam, name, msg)
}

// natInQuoted describes the quote of ICMP message msg: the quoted
// packet's addresses, protocol, its UDP ports and checksum.
func natInQuoted(tp *nettest.Topology, fam int, name func(*nettest.Topology, netip.Addr) string, msg []byte) string {
	q := msg[8:]
	var qsrc, qdst netip.Addr
	var proto uint8
	qh := 40
	switch {
	case fam == 4 && len(q) >= 20:
		qh = int(q[0]&0xf) * 4
		qsrc, _ = netip.AddrFromSlice(q[12:16])
		qdst, _ = netip.AddrFromSlice(q[16:20])
		proto = q[9]
	case fam == 6 && len(q) >= 40:
		qsrc, _ = netip.AddrFromSlice(q[8:24])
		qdst, _ = netip.AddrFromSlice(q[24:40])
		proto = q[6]
	default:
		return ", a short quote"
	}
	out := fmt.Sprintf(" quoting %s -> %s proto %d", name(tp, qsrc), name(tp, qdst), proto)
	if proto == nettest.ProtoUDP && len(q) >= qh+8 {
		u := q[qh:]
		out += fmt.Sprintf(" ports %d -> %d, quoted checksum ok %v", int(u[0])<<8|int(u[1]), int(u[2])<<8|int(u[3]),
			inetSum(qsrc, qdst, nettest.ProtoUDP, u) == 0)
	}
	return out
}

// natInErrorIn injects from gen an ICMP error (typ, code, rest) about fw's
// reply as gen received it (quoted: from fw's gen-side address to gen)
// and says what fw's raw ICMP socket got: where the error came from,
// whether its checksum holds and what it quotes.
func natInErrorIn(fam int, typ, code uint8, rest uint32, quoted nettest.Transport) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		network, msg := "ip4:icmp", nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.FwIn.IPv4, TTL: 64}.Packet(nettest.ICMPv4{
			Type: typ, Code: code, Rest: rest, Payload: nettest.IPv4{Src: tp.FwIn.IPv4, Dst: tp.Gen.IPv4, TTL: 64}.Packet(quoted)})
		if fam == 6 {
			network, msg = "ip6:ipv6-icmp", nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.FwIn.IPv6, HopLimit: 64}.Packet(nettest.ICMPv6{
				Type: typ, Code: code, Rest: rest, Payload: nettest.IPv6{Src: tp.FwIn.IPv6, Dst: tp.Gen.IPv6, HopLimit: 64}.Packet(quoted)})
		}
		var conn net.PacketConn
		if err := nettest.InNamespace(tp.FwNS, func() (err error) {
			conn, err = net.ListenPacket(network, "")
			return err
		}); err != nil {
			return "raw socket: " + err.Error()
		}
		defer func() { _ = conn.Close() }()
		if err := tp.InjectFromGen(tp.GenToFw().Frame(msg)); err != nil {
			return "inject from gen: " + err.Error()
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return "fw saw no error"
			}
			b := buf[:n]
			if len(b) < 8 || b[0] != typ {
				continue
			}
			a, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
			a = a.Unmap()
			// An ICMPv6 raw socket takes only messages whose checksum
			// holds (the kernel verifies it); IPv4's verifies none.
			ok := fam == 6 || nettest.Checksum(b) == 0
			return fmt.Sprintf("fw saw an error from %s, checksum ok %v,", name(tp, a), ok) + natInQuoted(tp, fam, name, b)
		}
	}
}

// natInErrorSteps returns the ICMP error steps for family fam, run after
// natInUDP (first) and natInRaw (second) in natInputSteps.
func natInErrorSteps(fam int) (udp, raw []natStep) {
	unreach, portCode, protoCode, protoRest := nettest.ICMPv4DestUnreachable, uint8(3), uint8(2), uint32(0)
	if fam == 6 {
		// IPv6: an unknown next header is a parameter problem pointing
		// at the header's Next Header field (offset 6).
		unreach, portCode, protoCode, protoRest = nettest.ICMPv6DestUnreachable, 4, 1, 6
	}
	protoType := unreach
	if fam == 6 {
		protoType = nettest.ICMPv6ParamProblem
	}
	udp = []natStep{
		{"gen's port unreachable about fw's udp reply: fw's socket sees it from the new source",
			natInErrorIn(fam, unreach, portCode, 0, nettest.UDP{SrcPort: 5353, DstPort: 40095, Payload: []byte("q")})},
		{"udp from gen SNATed to a port no socket has: fw's port unreachable goes back to gen translated",
			natInErrorBack(fam, nettest.UDP{SrcPort: 40097, DstPort: 5354, Payload: []byte("nobody listens")})},
	}
	raw = []natStep{
		{"gen's error about fw's protocol 253 answer: fw's socket sees it from the new source",
			natInErrorIn(fam, protoType, protoCode, protoRest, nettest.Raw{Proto: natPortlessProto, Data: []byte("answer-253")})},
		{"protocol 253 from gen SNATed, no socket at fw: fw's error goes back to gen translated",
			natInErrorBack(fam, nettest.Raw{Proto: natPortlessProto, Data: []byte("nobody-253")})},
	}
	return udp, raw
}

// natInLoopSteps returns the loopback steps for family fam: fw's own
// traffic that nat INPUT's SNAT rules match (-i lo, and fw's address).
func natInLoopSteps(fam int) []natStep {
	lo := netip.MustParseAddr("127.0.0.1")
	if fam == 6 {
		lo = netip.IPv6Loopback()
	}
	return []natStep{
		{"udp from fw to itself over loopback, twice: nat INPUT's SNAT not consulted", natInLoopUDP(lo)},
		{"ping from fw to its loopback address: not translated", func(t *testing.T, tp *nettest.Topology) string {
			a := nettest.Ping(tp.FwNS, lo, nettest.WithEchoID(0x2468), nettest.WithTimeout(2*time.Second))
			return fmt.Sprintf("ping %s from %v", a.Outcome, a.From)
		}},
		{"tcp from fw to its own gen-side address: not translated", natInLoopTCP(fam)},
	}
}

// natInLoopUDP sends two datagrams from lo's port 40096 to lo's port
// 5355, echoed by fw's server, and says what both ends saw.
func natInLoopUDP(lo netip.Addr) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(lo, 5355), nettest.Echo())
		defer srv.Close()
		out := ""
		for i := 0; i < 2; i++ {
			a := nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(lo, 5355), []byte("self"), nettest.ExpectReply(),
				nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(lo, 40096)))
			out += fmt.Sprintf("datagram %d: %s reply %q; ", i, a.Outcome, a.Reply)
		}
		for _, d := range srv.Wait(2, 2*time.Second) {
			out += fmt.Sprintf("the server saw %s; ", d.From)
		}
		return out
	}
}

// natInLoopTCP connects from fw to its own gen-side address port 8083 and
// says what both ends saw.
func natInLoopTCP(fam int) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		dst := tp.FwIn.IPv4
		if fam == 6 {
			dst = tp.FwIn.IPv6
		}
		srv := nettest.StartTCPServer(t, tp.FwNS, netip.AddrPortFrom(dst, 8083), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(dst, 8083), nettest.WithPayload([]byte("self")),
			nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		if a.Outcome == nettest.OK {
			for _, c := range srv.WaitFinished(1, 2*time.Second) {
				out += fmt.Sprintf("; the server saw %s data %q", name(tp, c.From.Addr()), c.Data)
			}
		}
		return out
	}
}
