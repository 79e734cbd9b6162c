package e2e

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// DNAT and REDIRECT of packets without TCP or UDP ports against the
// kernel (IPv4): an ICMP echo DNATed by a rule restricted to -p icmp and
// by one without -p, an echo REDIRECTed to fw, a protocol without ports
// (253) and SCTP (its ports kept, its CRC32c checked at both ends) by the
// address alone, through xfw and iptables-legacy in twin topologies; what
// each end saw, the counters and `conntrack -L` (ICMP, unknown-protocol,
// UDP-Lite and SCTP connections) compared.

// natPortlessProto is the protocol without ports the test sends (RFC
// 3692 experimentation).
const natPortlessProto = 253

// natPortlessRuleset is TestDNATPortlessAgainstKernel's ruleset; X is the
// topology's subnet. 10.X.2.9 and 10.X.2.8 are addresses on sink's link
// no host holds: only the translation brings a packet to sink or fw.
const natPortlessRuleset = natTableStart + `-A PREROUTING -d 10.X.1.1/32 -p icmp -m icmp --icmp-type 8 -j DNAT --to-destination 10.X.2.2
-A PREROUTING -d 10.X.1.1/32 -p sctp -j DNAT --to-destination 10.X.2.2
-A PREROUTING -d 10.X.2.9/32 -j DNAT --to-destination 10.X.2.2
-A PREROUTING -d 10.X.2.8/32 -p icmp -j REDIRECT
-A POSTROUTING -p icmp
-A POSTROUTING -p 253
-A POSTROUTING -p udplite
-A POSTROUTING -p udplite -m conntrack ! --ctstate DNAT -j MASQUERADE
-A POSTROUTING -d 10.X.2.2/32 -p icmp -m conntrack ! --ctstate DNAT -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -d 10.X.1.1/32 -p icmp -m conntrack --ctstate NEW --ctorigdst 10.X.2.8
-A FORWARD -d 10.X.2.2/32 -p icmp -m conntrack --ctstate NEW --ctorigdst 10.X.1.1 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p icmp -m conntrack --ctstate NEW --ctorigdst 10.X.2.9 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p 253 -m conntrack --ctstate NEW --ctorigdst 10.X.2.9 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p sctp -m conntrack --ctstate NEW --ctorigdst 10.X.1.1 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p udplite -m conntrack --ctstate NEW --ctorigdst 10.X.2.9 -j ACCEPT
-A FORWARD -s 10.X.1.2/32 -d 10.X.2.2/32 -p udplite -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -s 10.X.1.2/32 -d 10.X.2.2/32 -p icmp -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// natQuotedError sends from sink a destination unreachable (code) about
// the packet quoted (gen to sink, as the DNAT left it: a connection
// of the earlier steps) and says what gen received: the error's
// addresses, the quoted packet's, whether the ICMP checksum and the quoted
// IPv4 header's hold.
func natQuotedError(code uint8, quoted func(tp *nettest.Topology) []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		isErr := func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMP && c.ICMPType == 3
		}
		at := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, isErr)
		defer at.Stop()
		msg := nettest.IPv4{Src: tp.Sink.IPv4, Dst: tp.Gen.IPv4}.Packet(nettest.ICMPv4{Type: 3, Code: code, Payload: quoted(tp)})
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(msg)); err != nil {
			return "inject from sink: " + err.Error()
		}
		f, ok := at.WaitFor(isErr, 2*time.Second)
		if !ok {
			return "gen saw no error"
		}
		l3 := f.Raw[14:]
		icmp := l3[int(l3[0]&0xf)*4:]
		out := fmt.Sprintf("gen saw an error %s -> %s, checksum ok %v", natName(tp, f.Src), natName(tp, f.Dst),
			nettest.Checksum(icmp) == 0)
		if f.Inner == nil {
			return out + ", no quote"
		}
		return out + fmt.Sprintf(" quoting %s -> %s proto %d%s", natName(tp, f.Inner.Src), natName(tp, f.Inner.Dst),
			f.Inner.Protocol, ipv4HeaderSum(append(make([]byte, 14), icmp[8:]...)))
	}
}

// natPing pings dst from gen with echo identifier id and says whether the
// reply came and what sink saw asked.
func natPing(id uint16, dst func(tp *nettest.Topology) netip.Addr) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		echo := func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMP && c.ICMPType == nettest.ICMPv4EchoRequest
		}
		at := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, echo)
		defer at.Stop()
		a := nettest.Ping(tp.GenNS, dst(tp), nettest.WithEchoID(id), nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("ping %s;", a.Outcome)
		if f, ok := at.WaitFor(echo, time.Second); ok {
			out += fmt.Sprintf(" sink saw %s ask %s id %#x", natName(tp, f.Src), natName(tp, f.Dst),
				f.ICMPRest>>16)
		} else {
			out += " sink saw no echo request"
		}
		return out
	}
}

// natRawExchange sends proto's packet out from gen to dst, then sink's
// answer back to the address it came from, and says what sink and gen
// received of that protocol: the addresses, what check says of the
// packet's bytes (IPv4: and of its header checksum). fam is 4 or 6.
func natRawExchange(fam int, proto uint8, dst func(tp *nettest.Topology) netip.Addr, out, back natBody,
	check func(nettest.Captured) string) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, gen, sink, hdr := natName, tp.Gen.IPv4, tp.Sink.IPv4, ipv4HeaderSum
		if fam == 6 {
			name, gen, sink, hdr = nat6Name, tp.Gen.IPv6, tp.Sink.IPv6, func([]byte) string { return "" }
		}
		packet := func(src, dst netip.Addr, data []byte) []byte {
			if fam == 6 {
				return nettest.IPv6{Src: src, Dst: dst, HopLimit: 64}.Packet(nettest.Raw{Proto: proto, Data: data})
			}
			return nettest.IPv4{Src: src, Dst: dst}.Packet(nettest.Raw{Proto: proto, Data: data})
		}
		is := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == proto }
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, is)
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, is)
		defer atSink.Stop()
		defer atGen.Stop()
		if err := tp.InjectFromGen(tp.GenToFw().Frame(packet(gen, dst(tp), out(gen, dst(tp))))); err != nil {
			return "inject from gen: " + err.Error()
		}
		f, ok := atSink.WaitFor(is, 2*time.Second)
		if !ok {
			return "sink saw nothing"
		}
		seen := fmt.Sprintf("sink saw %s -> %s %s%s", name(tp, f.Src), name(tp, f.Dst), check(f), hdr(f.Raw))
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(packet(sink, f.Src, back(sink, f.Src)))); err != nil {
			return seen + "; inject from sink: " + err.Error()
		}
		if g, ok := atGen.WaitFor(is, 2*time.Second); ok {
			seen += fmt.Sprintf("; gen saw %s -> %s %s%s", name(tp, g.Src), name(tp, g.Dst), check(g), hdr(g.Raw))
		} else {
			seen += "; gen saw nothing"
		}
		return seen
	}
}

// natBody returns the bytes of a packet's IP payload from src to dst.
type natBody func(src, dst netip.Addr) []byte

// natBytes is the natBody of b, whatever the addresses.
func natBytes(b []byte) natBody { return func(netip.Addr, netip.Addr) []byte { return b } }

// natUDPLite is the natBody of a UDP-Lite datagram (natUDPLitePacket).
func natUDPLite(sport, dport uint16, data string) natBody {
	return func(src, dst netip.Addr) []byte { return natUDPLitePacket(src, dst, sport, dport, []byte(data)) }
}

// ipv4HeaderSum says whether an Ethernet frame's IPv4 header checksum is
// wrong ("" when it is right).
func ipv4HeaderSum(frame []byte) string {
	const ethLen = 14
	if len(frame) < ethLen+20 {
		return ", short"
	}
	hl := int(frame[ethLen]&0xf) * 4
	if len(frame) < ethLen+hl {
		return ", short"
	}
	var sum uint32
	for i := 0; i < hl; i += 2 {
		sum += uint32(frame[ethLen+i])<<8 | uint32(frame[ethLen+i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if sum != 0xffff {
		return ", IPv4 header checksum BAD"
	}
	return ""
}

// natPayloadText says what a packet without ports carried.
func natPayloadText(c nettest.Captured) string { return fmt.Sprintf("%q", c.Payload) }

// natUDPLitePacket returns a UDP-Lite datagram from sport to dport
// carrying data, its checksum covering the whole datagram (coverage 0)
// computed for the addresses src and dst (RFC 3828).
func natUDPLitePacket(src, dst netip.Addr, sport, dport uint16, data []byte) []byte {
	b := make([]byte, 8, 8+len(data))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	b = append(b, data...)
	sum := inetSum(src, dst, protoUDPLite, b)
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(b[6:], sum)
	return b
}

// protoUDPLite is UDP-Lite's protocol number.
const protoUDPLite = 136

// natUDPLiteText says what a UDP-Lite datagram carries: its ports, its
// data and whether its checksum is right for its addresses.
func natUDPLiteText(c nettest.Captured) string {
	b := c.Payload
	if len(b) < 8 {
		return "short udplite"
	}
	sum := "checksum valid"
	if inetSum(c.Src, c.Dst, protoUDPLite, b) != 0 {
		sum = "checksum BAD"
	}
	return fmt.Sprintf("udplite %d -> %d %q, %s", binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]), b[8:], sum)
}

// The SCTP chunks the test exchanges (RFC 9260): an INIT and its INIT ACK
// (with a state cookie), whose verification tags the kernel's tracker
// checks.
const (
	natSCTPInit    = 1
	natSCTPInitAck = 2
	natSCTPCookie  = 7 // the State Cookie parameter
)

// natSCTPPacket returns an SCTP packet from sport to dport with verification
// tag vtag and one INIT (or INIT ACK) chunk of initiate tag itag, its
// CRC32c computed.
func natSCTPPacket(sport, dport uint16, vtag uint32, chunk uint8, itag uint32) []byte {
	b := make([]byte, 12, 64)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint32(b[4:], vtag)
	body := make([]byte, 16)
	binary.BigEndian.PutUint32(body[0:], itag)
	binary.BigEndian.PutUint32(body[4:], 65536) // a_rwnd
	binary.BigEndian.PutUint16(body[8:], 1)     // outbound streams
	binary.BigEndian.PutUint16(body[10:], 1)    // inbound streams
	binary.BigEndian.PutUint32(body[12:], itag) // initial TSN
	if chunk == natSCTPInitAck {
		param := []byte{0, natSCTPCookie, 0, 8, 'c', 'k', 'i', 'e'}
		body = append(body, param...)
	}
	b = append(b, chunk, 0, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(4+len(body)))
	b = append(b, body...)
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// natSCTPText says what an SCTP packet carries: its ports, chunk type and
// whether its CRC32c is valid.
func natSCTPText(c nettest.Captured) string {
	b := c.Payload
	if len(b) < 16 {
		return "short sctp"
	}
	zeroed := append([]byte(nil), b...)
	want := binary.LittleEndian.Uint32(zeroed[8:])
	binary.LittleEndian.PutUint32(zeroed[8:], 0)
	crc := "crc32c valid"
	if crc32.Checksum(zeroed, crc32.MakeTable(crc32.Castagnoli)) != want {
		crc = "crc32c BAD"
	}
	return fmt.Sprintf("sctp %d -> %d chunk %d, %s", binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]), b[12], crc)
}

// natPortlessSteps are TestDNATPortlessAgainstKernel's steps, in order.
var natPortlessSteps = []natStep{
	{"ping fw DNATed to sink (-p icmp)", natPing(0x1234, func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 1, 1) })},
	{"ping fw again, the same identifier (the same connection)", natPing(0x1234, func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 1, 1) })},
	{"ping VIP DNATed to sink (no -p)", natPing(0x2345, func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 2, 9) })},
	{"ping VIP8 redirected to fw", natPing(0x3456, func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 2, 8) })},
	{"protocol 253 to VIP DNATed to sink, sink's answer translated back", natRawExchange(4, natPortlessProto,
		func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 2, 9) }, natBytes([]byte("raw-out-253")), natBytes([]byte("raw-back-253")),
		natPayloadText)},
	{"protocol 253 to VIP again (the same connection)", natRawExchange(4, natPortlessProto,
		func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 2, 9) }, natBytes([]byte("raw-again-253")), natBytes([]byte("raw-back2-253")),
		natPayloadText)},
	{"sink's protocol unreachable about the DNATed protocol 253: translated back", natQuotedError(2,
		func(tp *nettest.Topology) []byte {
			return nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4}.Packet(nettest.Raw{Proto: natPortlessProto, Data: []byte("raw-out-253")})
		})},
	{"sink's host unreachable about the DNATed echo request: translated back", natQuotedError(1,
		func(tp *nettest.Topology) []byte {
			return nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4}.Packet(nettest.ICMPv4{Type: nettest.ICMPv4EchoRequest,
				Rest: 0x2345<<16 | 1, Payload: []byte("quoted-echo")})
		})},
	{"sctp INIT to fw DNATed to sink, the INIT ACK translated back", natRawExchange(4, nettest.ProtoSCTP,
		func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 1, 1) },
		natBytes(natSCTPPacket(40000, 5000, 0, natSCTPInit, 0x11223344)), natBytes(natSCTPPacket(5000, 40000, 0x11223344, natSCTPInitAck, 0x55667788)),
		natSCTPText)},
	{"udplite to VIP DNATed to sink (no -p), sink's answer translated back", natRawExchange(4, protoUDPLite,
		func(tp *nettest.Topology) netip.Addr { return natAddr(tp, 2, 9) }, natUDPLite(40070, 70, "lite-out"),
		natUDPLite(70, 40070, "lite-back"), natUDPLiteText)},
	{"udplite straight to sink masqueraded, sink's answer translated back", natRawExchange(4, protoUDPLite,
		func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv4 }, natUDPLite(40071, 71, "lite-masq"),
		natUDPLite(71, 40071, "lite-masq-back"), natUDPLiteText)},
	{"ping sink masqueraded", natPing(0x4567, func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv4 })},
	{"sink pings fw's masquerading address with the same identifier", func(t *testing.T, tp *nettest.Topology) string {
		return string(nettest.Ping(tp.SinkNS, tp.FwOut.IPv4, nettest.WithEchoID(0x4567), nettest.WithTimeout(2*time.Second)).Outcome)
	}},
	{"ping sink masqueraded again (the masquerade's replies still translated)", natPing(0x4567,
		func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv4 })},
}

// natPortlessSinkDrop keeps sink's and gen's kernels from answering what
// the steps send them with ICMP errors (protocol or port unreachable: no
// socket there), which they rate-limit differently in the twins, and
// which xfw does not translate from gen (an error travelling in a
// connection's original direction: docs/differences.md).
func natPortlessSinkDrop(t *testing.T, tp *nettest.Topology, cmd string) {
	t.Helper()
	for _, ns := range []string{tp.SinkNS, tp.GenNS} {
		for _, p := range []string{"253", "sctp", "udplite"} {
			if res, err := nettest.Exec(ns, cmd, "-A", "INPUT", "-p", p, "-j", "DROP"); err != nil || res.ExitCode != 0 {
				t.Fatalf("%s's iptables: %v %v", ns, err, res)
			}
		}
	}
}

// natPortlessTwinsSetup readies tp for the portless tests: sink drops
// what the steps send it (natPortlessSinkDrop, with cmd), and fw's
// connection tracker does not verify checksums (net.netfilter.
// nf_conntrack_checksum 0; xfw verifies none): the kernel verifies a
// UDP-Lite checksum against UDP's pseudo-header (protocol 17, not 136),
// so that an RFC 3828 datagram is INVALID there and never translated
// (docs/differences.md).
func natPortlessTwinsSetup(t *testing.T, tp *nettest.Topology, cmd string) {
	t.Helper()
	natPortlessSinkDrop(t, tp, cmd)
	if res, err := nettest.Exec(tp.FwNS, "sysctl", "-qw", "net.netfilter.nf_conntrack_checksum=0"); err != nil || res.ExitCode != 0 {
		t.Fatalf("fw's nf_conntrack_checksum: %v %v", err, res)
	}
}

// TestDNATPortlessAgainstKernel runs natPortlessSteps through both twins
// and compares the outcomes, the counters and the ICMP, unknown, UDP-Lite
// and SCTP connections (SCTP's with its ports and state: the DNAT
// without a port keeps them).
func TestDNATPortlessAgainstKernel(t *testing.T) {
	natPortlessAgainstKernel(t, natPortlessCase{fam: 4, ruleset: natPortlessRuleset, steps: natPortlessSteps,
		counters: 14, icmp: "icmp", conns: 8})
}

// natPortlessCase is one family's TestDNAT*PortlessAgainstKernel: its
// ruleset (10.X. / fd00:X: for the twin's subnet), steps, the counters
// and connections of the protocols without ports the kernel must have
// made at least (compareNatCountersFam, compareNatConntrackProtos).
type natPortlessCase struct {
	fam      int
	ruleset  string
	steps    []natStep
	counters int
	icmp     string
	conns    int
}

// natPortlessAgainstKernel runs c's steps through both twins and compares
// the outcomes, the counters and the ICMP, unknown, UDP-Lite and SCTP
// connections.
func natPortlessAgainstKernel(t *testing.T, c natPortlessCase) {
	nettest.RequireRoot(t)
	tool := "iptables-legacy"
	if c.fam == 6 {
		tool = "ip6tables-legacy"
	}
	requireTools(t, tool, "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		natPortlessTwinsSetup(t, tp, tool)
		subnet, placeholder := natSubnetText(tp, c.fam)
		fw.restore(t, tp, c.fam, strings.ReplaceAll(c.ruleset, placeholder, subnet))
	})
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, c.steps)
	compareNatCountersFam(t, tw, c.fam, c.counters)
	compareNatConntrackProtos(t, tw, c.fam, []string{c.icmp, "unknown", "udplite", "sctp"}, func(string, int) bool { return false }, c.conns)
}

// natPortless6Ruleset is TestDNAT6PortlessAgainstKernel's ruleset,
// natPortlessRuleset's for IPv6: fd00:X:2::9 and fd00:X:2::8 are
// addresses on sink's link no host holds.
const natPortless6Ruleset = natTableStart + `-A PREROUTING -d fd00:X:1::1/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j DNAT --to-destination fd00:X:2::2
-A PREROUTING -d fd00:X:1::1/128 -p sctp -j DNAT --to-destination fd00:X:2::2
-A PREROUTING -d fd00:X:2::9/128 -j DNAT --to-destination fd00:X:2::2
-A PREROUTING -d fd00:X:2::8/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j REDIRECT
-A POSTROUTING -p ipv6-icmp -m icmp6 --icmpv6-type 128
-A POSTROUTING -p 253
-A POSTROUTING -p udplite
-A POSTROUTING -p udplite -m conntrack ! --ctstate DNAT -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -d fd00:X:1::1/128 -p ipv6-icmp -m conntrack --ctstate NEW --ctorigdst fd00:X:2::8
-A FORWARD -d fd00:X:2::2/128 -p ipv6-icmp -m conntrack --ctstate NEW --ctorigdst fd00:X:1::1 -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p ipv6-icmp -m conntrack --ctstate NEW --ctorigdst fd00:X:2::9 -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p 253 -m conntrack --ctstate NEW --ctorigdst fd00:X:2::9 -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p sctp -m conntrack --ctstate NEW --ctorigdst fd00:X:1::1 -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p udplite -m conntrack --ctstate NEW --ctorigdst fd00:X:2::9 -j ACCEPT
-A FORWARD -s fd00:X:1::2/128 -d fd00:X:2::2/128 -p udplite -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p ipv6-icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// natPortless6Steps are TestDNAT6PortlessAgainstKernel's steps, in order.
var natPortless6Steps = []natStep{
	{"ping6 fw DNATed to sink (-p ipv6-icmp)", nat6Ping(0x1234, func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 1, 1) })},
	{"ping6 fw again, the same identifier (the same connection)", nat6Ping(0x1234, func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 1, 1) })},
	{"ping6 fd00:X:2::9 DNATed to sink (no -p)", nat6Ping(0x2345, func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 2, 9) })},
	{"ping6 fd00:X:2::8 redirected to fw", nat6Ping(0x3456, func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 2, 8) })},
	{"protocol 253 to fd00:X:2::9 DNATed to sink, sink's answer translated back", natRawExchange(6, natPortlessProto,
		func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 2, 9) }, natBytes([]byte("raw-out-253")), natBytes([]byte("raw-back-253")),
		natPayloadText)},
	{"sink's error about the DNATed protocol 253: translated back", nat6QuotedError(func(tp *nettest.Topology) []byte {
		return nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.Sink.IPv6, HopLimit: 63}.
			Packet(nettest.Raw{Proto: natPortlessProto, Data: []byte("raw-out-253")})
	})},
	{"sink's error about the DNATed echo request: translated back", nat6QuotedError(func(tp *nettest.Topology) []byte {
		return nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.Sink.IPv6, HopLimit: 63}.
			Packet(nettest.ICMPv6{Type: nettest.ICMPv6EchoRequest, Rest: 0x2345<<16 | 1, Payload: []byte("quoted-echo")})
	})},
	{"sctp INIT to fw DNATed to sink, the INIT ACK translated back", natRawExchange(6, nettest.ProtoSCTP,
		func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 1, 1) },
		natBytes(natSCTPPacket(40000, 5000, 0, natSCTPInit, 0x11223344)), natBytes(natSCTPPacket(5000, 40000, 0x11223344, natSCTPInitAck, 0x55667788)),
		natSCTPText)},
	{"udplite to fd00:X:2::9 DNATed to sink (no -p), sink's answer translated back", natRawExchange(6, protoUDPLite,
		func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 2, 9) }, natUDPLite(40070, 70, "lite-out"),
		natUDPLite(70, 40070, "lite-back"), natUDPLiteText)},
	{"udplite straight to sink masqueraded, sink's answer translated back", natRawExchange(6, protoUDPLite,
		func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv6 }, natUDPLite(40071, 71, "lite-masq"),
		natUDPLite(71, 40071, "lite-masq-back"), natUDPLiteText)},
}

// TestDNAT6PortlessAgainstKernel is TestDNATPortlessAgainstKernel for
// IPv6 (the ICMPv6 checksum, which covers the addresses, checked by the
// receiving ping sockets).
func TestDNAT6PortlessAgainstKernel(t *testing.T) {
	natPortlessAgainstKernel(t, natPortlessCase{fam: 6, ruleset: natPortless6Ruleset, steps: natPortless6Steps,
		counters: 12, icmp: "icmpv6", conns: 6})
}

// nat6QuotedError sends from sink a destination unreachable about the
// packet quoted (gen to sink, as the DNAT left it: a connection of the
// earlier steps) and says what gen received: the error's addresses, the
// quoted packet's, and whether the ICMPv6 checksum (and a quoted echo's)
// holds.
func nat6QuotedError(quoted func(tp *nettest.Topology) []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		isErr := func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMPv6 && c.ICMPType == nettest.ICMPv6DestUnreachable
		}
		at := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, isErr)
		defer at.Stop()
		msg := nettest.IPv6{Src: tp.Sink.IPv6, Dst: tp.Gen.IPv6, HopLimit: 64}.
			Packet(nettest.ICMPv6{Type: nettest.ICMPv6DestUnreachable, Code: 1, Payload: quoted(tp)})
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(msg)); err != nil {
			return "inject from sink: " + err.Error()
		}
		f, ok := at.WaitFor(isErr, 2*time.Second)
		if !ok {
			return "gen saw no error"
		}
		out := fmt.Sprintf("gen saw an error %s -> %s, checksum ok %v", nat6Name(tp, f.Src), nat6Name(tp, f.Dst),
			inetSum(f.Src, f.Dst, nettest.ProtoICMPv6, f.Raw[14+40:]) == 0)
		if f.Inner == nil {
			return out + ", no quote"
		}
		out += fmt.Sprintf(" quoting %s -> %s proto %d", nat6Name(tp, f.Inner.Src), nat6Name(tp, f.Inner.Dst), f.Inner.Protocol)
		if f.Inner.Protocol == nettest.ProtoICMPv6 {
			out += "; checksums " + icmp6ErrorChecksums(f.Raw)
		}
		return out
	}
}
