package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// DNAT and REDIRECT in nat OUTPUT of packets without TCP or UDP ports
// against the kernel: fw's own ICMP echo requests DNATed by a rule
// restricted to -p icmp and by one without -p, to gen's address, to fw's
// own and to an address no host holds, an echo REDIRECTed to loopback, a
// protocol without ports (253) and SCTP (its ports kept, its CRC32c
// checked at both ends) by the address alone, through xfw and
// iptables-legacy in twin topologies; what sink saw, what fw's sockets
// got back and from where, the counters (filter OUTPUT with the first
// route's device and --ctstate DNAT, INPUT the reply before its source is
// translated back) and `conntrack -L` (ICMP and unknown-protocol
// connections) compared.

// natOutPortlessRuleset is TestNatOutputPortlessAgainstKernel's ruleset:
// X the topology's subnet, FWOUT and FWIN fw's interfaces facing sink and
// gen. 10.X.9.9 and 10.X.9.8 are addresses on sink's link no host holds.
const natOutPortlessRuleset = natTableStart + `-A OUTPUT -d 10.X.1.2/32 -p icmp -m icmp --icmp-type 8 -j DNAT --to-destination 10.X.2.2
-A OUTPUT -d 10.X.1.1/32 -p icmp -j DNAT --to-destination 10.X.2.2
-A OUTPUT -d 10.X.9.9/32 -j DNAT --to-destination 10.X.2.2
-A OUTPUT -d 10.X.9.8/32 -p icmp -j REDIRECT
-A OUTPUT -d 10.X.1.1/32 -p sctp -j DNAT --to-destination 10.X.2.2
-A POSTROUTING -o FWOUT -p icmp
-A POSTROUTING -o lo -p icmp
-A POSTROUTING -p 253
-A POSTROUTING -p sctp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.X.2.2/32 -p icmp -m icmp --icmp-type 0 -m conntrack --ctstate DNAT
-A INPUT -s 10.X.2.2/32 -p 253 -m conntrack --ctstate DNAT --ctorigdst 10.X.9.9
-A INPUT -s 127.0.0.1/32 -i lo -p icmp -m conntrack --ctstate DNAT
-A OUTPUT -d 10.X.2.2/32 -o FWIN -p icmp -m conntrack --ctstate NEW,DNAT --ctorigdst 10.X.1.2
-A OUTPUT -d 10.X.2.2/32 -o lo -p icmp -m conntrack --ctstate DNAT --ctorigdst 10.X.1.1
-A OUTPUT -d 10.X.2.2/32 -o FWOUT -p icmp -m conntrack --ctstate DNAT --ctorigdst 10.X.9.9
-A OUTPUT -d 10.X.2.2/32 -p 253 -m conntrack --ctstate DNAT --ctorigdst 10.X.9.9
-A OUTPUT -d 127.0.0.1/32 -o FWOUT -p icmp -m conntrack --ctstate NEW,DNAT
-A OUTPUT -d 10.X.2.2/32 -o lo -p sctp -m conntrack --ctstate DNAT
-A OUTPUT -d 10.X.2.2/32 -p icmp -m conntrack ! --ctstate DNAT
COMMIT
`

// natOutPortless6Ruleset is natOutPortlessRuleset for IPv6 (REDIRECT to
// ::1).
const natOutPortless6Ruleset = natTableStart + `-A OUTPUT -d fd00:X:1::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j DNAT --to-destination fd00:X:2::2
-A OUTPUT -d fd00:X:1::1/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j DNAT --to-destination fd00:X:2::2
-A OUTPUT -d fd00:X:9::9/128 -j DNAT --to-destination fd00:X:2::2
-A OUTPUT -d fd00:X:9::8/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j REDIRECT
-A OUTPUT -d fd00:X:1::1/128 -p sctp -j DNAT --to-destination fd00:X:2::2
-A POSTROUTING -o FWOUT -p ipv6-icmp -m icmp6 --icmpv6-type 128
-A POSTROUTING -o lo -p ipv6-icmp -m icmp6 --icmpv6-type 128
-A POSTROUTING -p 253
-A POSTROUTING -p sctp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s fd00:X:2::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 129 -m conntrack --ctstate DNAT
-A INPUT -s fd00:X:2::2/128 -p 253 -m conntrack --ctstate DNAT --ctorigdst fd00:X:9::9
-A INPUT -s ::1/128 -i lo -p ipv6-icmp -m icmp6 --icmpv6-type 129 -m conntrack --ctstate DNAT
-A OUTPUT -d fd00:X:2::2/128 -o FWIN -p ipv6-icmp -m conntrack --ctstate NEW,DNAT --ctorigdst fd00:X:1::2
-A OUTPUT -d fd00:X:2::2/128 -o lo -p ipv6-icmp -m conntrack --ctstate DNAT --ctorigdst fd00:X:1::1
-A OUTPUT -d fd00:X:2::2/128 -o FWOUT -p ipv6-icmp -m conntrack --ctstate DNAT --ctorigdst fd00:X:9::9
-A OUTPUT -d fd00:X:2::2/128 -p 253 -m conntrack --ctstate DNAT --ctorigdst fd00:X:9::9
-A OUTPUT -d ::1/128 -o FWOUT -p ipv6-icmp -m conntrack --ctstate NEW,DNAT
-A OUTPUT -d fd00:X:2::2/128 -o lo -p sctp -m conntrack --ctstate DNAT
COMMIT
`

// natOutNames returns family fam's address namer and sink's echo
// request type.
func natOutNames(fam int) (func(*nettest.Topology, netip.Addr) string, uint8, uint8) {
	if fam == 6 {
		return nat6Name, nettest.ProtoICMPv6, nettest.ICMPv6EchoRequest
	}
	return natName, nettest.ProtoICMP, nettest.ICMPv4EchoRequest
}

// natOutPing pings dst from fw with echo identifier id and says how it
// ended, where the reply came from and what sink saw asked.
func natOutPing(fam int, id uint16, dst func(tp *nettest.Topology) netip.Addr) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, icmp, req := natOutNames(fam)
		echo := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == icmp && c.ICMPType == req }
		at := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, echo)
		defer at.Stop()
		a := nettest.Ping(tp.FwNS, dst(tp), nettest.WithEchoID(id), nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("ping %s", a.Outcome)
		if a.From.IsValid() {
			out += " from " + name(tp, a.From)
		}
		if f, ok := at.WaitFor(echo, time.Second); ok {
			out += fmt.Sprintf("; sink saw %s ask %s id %#x", name(tp, f.Src), name(tp, f.Dst), f.ICMPRest>>16)
		} else {
			out += "; sink saw nothing"
		}
		return out
	}
}

// natOutRaw sends proto's packet (out) from a raw socket of fw to dst,
// then sink's answer (back) to the address it came from, and says what
// sink received (the addresses, what check says of the bytes) and what
// fw's socket got back and from where.
func natOutRaw(fam int, proto uint8, dst func(tp *nettest.Topology) netip.Addr, out, back natBody,
	check func(nettest.Captured) string) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		network, sink := fmt.Sprintf("ip4:%d", proto), tp.Sink.IPv4
		if fam == 6 {
			network, sink = fmt.Sprintf("ip6:%d", proto), tp.Sink.IPv6
		}
		var conn net.PacketConn
		if err := nettest.InNamespace(tp.FwNS, func() (err error) {
			conn, err = net.ListenPacket(network, "")
			return err
		}); err != nil {
			return "raw socket: " + err.Error()
		}
		defer func() { _ = conn.Close() }()
		is := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == proto }
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, is)
		defer atSink.Stop()
		to := dst(tp)
		if _, err := conn.WriteTo(out(netip.Addr{}, to), &net.IPAddr{IP: to.AsSlice()}); err != nil {
			return "send: " + err.Error()
		}
		f, ok := atSink.WaitFor(is, 2*time.Second)
		if !ok {
			return "sink saw nothing"
		}
		seen := fmt.Sprintf("sink saw %s -> %s %s", name(tp, f.Src), name(tp, f.Dst), check(f))
		answer := back(sink, f.Src)
		var packet []byte
		if fam == 6 {
			packet = nettest.IPv6{Src: sink, Dst: f.Src, HopLimit: 64}.Packet(nettest.Raw{Proto: proto, Data: answer})
		} else {
			packet = nettest.IPv4{Src: sink, Dst: f.Src}.Packet(nettest.Raw{Proto: proto, Data: answer})
		}
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(packet)); err != nil {
			return seen + "; inject from sink: " + err.Error()
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return seen + "; fw got nothing back"
			}
			if string(buf[:n]) != string(answer) {
				continue // fw's own packet, seen by its raw socket
			}
			a, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
			return seen + "; fw got the answer from " + name(tp, a.Unmap())
		}
	}
}

// natOutPortlessSteps returns TestNatOutput*PortlessAgainstKernel's
// steps for family fam, in order.
func natOutPortlessSteps(fam int) []natStep {
	at := func(net, host byte) func(tp *nettest.Topology) netip.Addr {
		if fam == 6 {
			return func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, int(net), int(host)) }
		}
		return func(tp *nettest.Topology) netip.Addr { return natAddr(tp, net, host) }
	}
	sctp := natOutRaw(fam, nettest.ProtoSCTP, at(1, 1),
		natBytes(natSCTPPacket(40000, 5000, 0, natSCTPInit, 0x11223344)),
		natBytes(natSCTPPacket(5000, 40000, 0x11223344, natSCTPInitAck, 0x55667788)), natSCTPText)
	steps := []natStep{
		{"ping gen's address DNATed to sink (-p icmp, another device)", natOutPing(fam, 0x1234, at(1, 2))},
		{"ping gen's address again, the same identifier (a later packet)", natOutPing(fam, 0x1234, at(1, 2))},
		{"ping fw's own address DNATed to sink (from loopback to FWOUT)", natOutPing(fam, 0x2345, at(1, 1))},
		{"ping VIP DNATed to sink (no -p)", natOutPing(fam, 0x3456, at(9, 9))},
		{"ping VIP8 redirected to loopback", natOutPing(fam, 0x4567, at(9, 8))},
		{"ping VIP8 again (a later packet through loopback)", natOutPing(fam, 0x4567, at(9, 8))},
		{"protocol 253 to VIP DNATed to sink, sink's answer translated back", natOutRaw(fam, natPortlessProto, at(9, 9),
			natBytes([]byte("raw-out-253")), natBytes([]byte("back-253")), natPayloadText)},
		{"protocol 253 to VIP again (the same connection)", natOutRaw(fam, natPortlessProto, at(9, 9),
			natBytes([]byte("again-253")), natBytes([]byte("back2-253")), natPayloadText)},
		{"sctp INIT to fw's own address DNATed to sink, the INIT ACK translated back", sctp},
		{"ping sink itself (not translated)", natOutPing(fam, 0x5678, at(2, 2))},
	}
	if fam == 6 {
		steps = append(steps,
			natStep{"sink's error about the DNATed echo request: translated back", natOutQuotedError6(
				func(tp *nettest.Topology) []byte {
					return nettest.IPv6{Src: tp.FwOut.IPv6, Dst: tp.Sink.IPv6, HopLimit: 64}.Packet(nettest.ICMPv6{
						Type: nettest.ICMPv6EchoRequest, Rest: 0x3456<<16 | 1, Payload: []byte("quoted-echo")})
				})},
			natStep{"sink's error about the DNATed protocol 253: translated back", natOutQuotedError6(
				func(tp *nettest.Topology) []byte {
					return nettest.IPv6{Src: tp.FwOut.IPv6, Dst: tp.Sink.IPv6, HopLimit: 64}.Packet(nettest.Raw{
						Proto: natPortlessProto, Data: []byte("raw-out-253")})
				})})
	}
	if fam == 4 {
		steps = append(steps,
			natStep{"sink's host unreachable about the DNATed echo request: translated back", natOutQuotedError(
				func(tp *nettest.Topology) []byte {
					return nettest.IPv4{Src: tp.FwOut.IPv4, Dst: tp.Sink.IPv4}.Packet(nettest.ICMPv4{Type: nettest.ICMPv4EchoRequest,
						Rest: 0x3456<<16 | 1, Payload: []byte("quoted-echo")})
				})},
			natStep{"sink's protocol unreachable about the DNATed protocol 253: translated back", natOutQuotedError(
				func(tp *nettest.Topology) []byte {
					return nettest.IPv4{Src: tp.FwOut.IPv4, Dst: tp.Sink.IPv4}.Packet(nettest.Raw{Proto: natPortlessProto, Data: []byte("raw-out-253")})
				})})
	}
	return steps
}

// natOutQuotedError sends from sink to fw a destination unreachable about
// the packet quoted (fw to sink, as the DNAT left it: a connection of the
// earlier steps) and says what fw's raw ICMP socket received: where the
// error came from, the quoted packet's addresses, whether the ICMP
// checksum and the quoted IPv4 header's hold.
func natOutQuotedError(quoted func(tp *nettest.Topology) []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		var conn net.PacketConn
		if err := nettest.InNamespace(tp.FwNS, func() (err error) {
			conn, err = net.ListenPacket("ip4:icmp", "")
			return err
		}); err != nil {
			return "raw socket: " + err.Error()
		}
		defer func() { _ = conn.Close() }()
		msg := nettest.IPv4{Src: tp.Sink.IPv4, Dst: tp.FwOut.IPv4}.Packet(nettest.ICMPv4{Type: 3, Code: 1, Payload: quoted(tp)})
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(msg)); err != nil {
			return "inject from sink: " + err.Error()
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return "fw saw no error"
			}
			b := buf[:n]
			if len(b) < 8+20 || b[0] != 3 {
				continue
			}
			a, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
			src, _ := netip.AddrFromSlice(b[8+12 : 8+16])
			dst, _ := netip.AddrFromSlice(b[8+16 : 8+20])
			return fmt.Sprintf("fw saw an error from %s, checksum ok %v, quoting %s -> %s proto %d%s", natName(tp, a.Unmap()),
				nettest.Checksum(b) == 0, natName(tp, src), natName(tp, dst), b[8+9], ipv4HeaderSum(append(make([]byte, 14), b[8:]...)))
		}
	}
}

// natOutputPortlessCase returns TestNatOutput*PortlessAgainstKernel's
// case for family fam: the ICMP and unknown-protocol connections compared.
func natOutputPortlessCase(fam int, ruleset string, want, conns int) natLocalCase {
	icmp := "icmp"
	if fam == 6 {
		icmp = "icmpv6"
	}
	return natLocalCase{ruleset: ruleset, routes: natOutVIPRoutes, steps: natOutPortlessSteps(fam),
		protos: []string{icmp, "unknown"}, ports: func(string, int) bool { return false }, want: want, conns: conns}
}

// TestNatOutputPortlessAgainstKernel runs the IPv4 steps.
func TestNatOutputPortlessAgainstKernel(t *testing.T) {
	natLocalAgainstKernel(t, 4, natOutputPortlessCase(4, natOutPortlessRuleset, 16, 5))
}

// TestNatOutput6PortlessAgainstKernel runs the IPv6 steps (the ICMPv6
// checksum, which covers the addresses, checked by fw's ping socket and
// sink's kernel).
func TestNatOutput6PortlessAgainstKernel(t *testing.T) {
	natLocalAgainstKernel(t, 6, natOutputPortlessCase(6, natOutPortless6Ruleset, 15, 5))
}

// natOutVIPRoutes routes fw's packets to the VIPs 10.X.9.9 and 10.X.9.8
// (fd00:X:9::9, ::8) through sink.
func natOutVIPRoutes(t *testing.T, tp *nettest.Topology, fam int) {
	t.Helper()
	for _, host := range []byte{9, 8} {
		argv := []string{"ip", "route", "add", natAddr(tp, 9, host).String() + "/32", "via", tp.Sink.IPv4.String()}
		if fam == 6 {
			argv = []string{"ip", "-6", "route", "add", nat6Addr(tp, 9, int(host)).String() + "/128", "via", tp.Sink.IPv6.String()}
		}
		if res, err := nettest.Exec(tp.FwNS, argv...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", argv, err, res)
		}
	}
}

// natOutQuotedError6 is natOutQuotedError for IPv6: sink's destination
// unreachable to fw about the packet quoted, and what fw's raw ICMPv6
// socket received (where from, the quoted addresses, whether the ICMPv6
// checksum and a quoted echo's hold).
func natOutQuotedError6(quoted func(tp *nettest.Topology) []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		var conn net.PacketConn
		if err := nettest.InNamespace(tp.FwNS, func() (err error) {
			conn, err = net.ListenPacket("ip6:ipv6-icmp", "")
			return err
		}); err != nil {
			return "raw socket: " + err.Error()
		}
		defer func() { _ = conn.Close() }()
		msg := nettest.IPv6{Src: tp.Sink.IPv6, Dst: tp.FwOut.IPv6, HopLimit: 64}.
			Packet(nettest.ICMPv6{Type: nettest.ICMPv6DestUnreachable, Code: 1, Payload: quoted(tp)})
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(msg)); err != nil {
			return "inject from sink: " + err.Error()
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return "fw saw no error"
			}
			b := buf[:n]
			if len(b) < 8+40 || b[0] != nettest.ICMPv6DestUnreachable {
				continue
			}
			a, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
			inner := b[8:]
			src, _ := netip.AddrFromSlice(inner[8:24])
			dst, _ := netip.AddrFromSlice(inner[24:40])
			out := fmt.Sprintf("fw saw an error from %s, checksum ok %v, quoting %s -> %s proto %d", nat6Name(tp, a),
				inetSum(a, tp.FwOut.IPv6, nettest.ProtoICMPv6, b) == 0, nat6Name(tp, src), nat6Name(tp, dst), inner[6])
			if inner[6] == nettest.ProtoICMPv6 {
				out += fmt.Sprintf(", quoted echo checksum ok %v", inetSum(src, dst, nettest.ProtoICMPv6, inner[40:]) == 0)
			}
			return out
		}
	}
}
