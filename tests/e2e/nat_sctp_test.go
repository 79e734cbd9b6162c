package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// SCTP tracked by its ports, with the kernel's states, and NAT with SCTP
// ports (DNAT to another port, MASQUERADE to a port, both directions
// translated, the CRC32c updated) against the kernel (nf_conntrack_proto_
// sctp, iptables-legacy), both families: an association's handshake
// (INIT, INIT ACK, COOKIE ECHO, COOKIE ACK), DATA with a wrong
// verification tag (INVALID), a second association between the same
// hosts (its own connection: ports in the key), an out-of-the-blue ABORT
// (INVALID) and shut down (SHUTDOWN, SHUTDOWN ACK, SHUTDOWN COMPLETE:
// CLOSED), a masqueraded INIT and its INIT ACK and another to the taken
// port, fw's own INIT DNATed in nat OUTPUT (sent and answered through a
// raw socket), and sink's error about
// a DNATed packet translated back. What each end saw (ports, chunk, a
// valid CRC32c), the counters and `conntrack -L` (the sctp entries with
// their states) are compared. The DATA with a wrong tag reaches nobody:
// INVALID, it has no connection and is not translated, so INPUT (fw's own
// address, no SCTP socket) counts it.

// natSCTPRuleset is TestSCTPNatAgainstKernel's IPv4 ruleset; X is the
// topology's subnet.
const natSCTPRuleset = natTableStart + `-A PREROUTING -d 10.X.1.1/32 -p sctp -m sctp --dport 5000 -j DNAT --to-destination 10.X.2.2:6000
-A OUTPUT -d 10.X.9.7/32 -p sctp -m sctp --dport 5002 -j DNAT --to-destination 10.X.2.2:6002
-A POSTROUTING -d 10.X.2.2/32 -p sctp -m sctp --dport 7000 -j MASQUERADE --to-ports 30000
-A POSTROUTING -p sctp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p sctp -m sctp --chunk-types any ABORT -m conntrack --ctstate INVALID
-A INPUT -p sctp -m sctp --chunk-types any DATA -m conntrack --ctstate INVALID
-A FORWARD -d 10.X.2.2/32 -p sctp -m conntrack --ctstate NEW --ctorigdst 10.X.1.1 --ctorigdstport 5000 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p sctp -m sctp --dport 7000 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -p sctp -m conntrack --ctstate ESTABLISHED -m conntrack --ctreplsrcport 6000 -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// natSCTP6Ruleset is natSCTPRuleset for IPv6.
const natSCTP6Ruleset = natTableStart + `-A PREROUTING -d fd00:X:1::1/128 -p sctp -m sctp --dport 5000 -j DNAT --to-destination [fd00:X:2::2]:6000
-A OUTPUT -d fd00:X:9::7/128 -p sctp -m sctp --dport 5002 -j DNAT --to-destination [fd00:X:2::2]:6002
-A POSTROUTING -d fd00:X:2::2/128 -p sctp -m sctp --dport 7000 -j MASQUERADE --to-ports 30000
-A POSTROUTING -p sctp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p sctp -m sctp --chunk-types any ABORT -m conntrack --ctstate INVALID
-A INPUT -p sctp -m sctp --chunk-types any DATA -m conntrack --ctstate INVALID
-A FORWARD -d fd00:X:2::2/128 -p sctp -m conntrack --ctstate NEW --ctorigdst fd00:X:1::1 --ctorigdstport 5000 -j ACCEPT
-A FORWARD -d fd00:X:2::2/128 -p sctp -m sctp --dport 7000 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -p sctp -m conntrack --ctstate ESTABLISHED -m conntrack --ctreplsrcport 6000 -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p ipv6-icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// SCTP chunk types the steps send (RFC 9260 3.2), beyond INIT and INIT
// ACK (natSCTPInit, natSCTPInitAck).
const (
	sctpData         = 0
	sctpAbort        = 6
	sctpShutdown     = 7
	sctpShutdownAck  = 8
	sctpCookieEcho   = 10
	sctpCookieAck    = 11
	sctpShutdownDone = 14
)

// sctpWire returns an SCTP packet from sport to dport with verification
// tag vtag carrying chunks, its CRC32c computed.
func sctpWire(sport, dport uint16, vtag uint32, chunks ...[]byte) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint32(b[4:], vtag)
	for _, c := range chunks {
		b = append(b, c...)
	}
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// sctpDataChunk is a DATA chunk (TSN 1, stream 0) carrying text.
func sctpDataChunk(text string) []byte {
	v := make([]byte, 12, 12+len(text))
	binary.BigEndian.PutUint32(v[0:], 1)
	v = append(v, text...)
	return sctpChunk(sctpData, 0x03, v)
}

// natSCTPSteps returns the steps for family fam (4 or 6): the client's
// association (ports 40000 to fw:5000, DNATed to sink:6000) with tags
// 0x11223344 (gen's) and 0x55667788 (sink's), a second association from
// port 40001, a masqueraded one to sink:7000.
func natSCTPSteps(fam int) []natStep {
	fw := func(tp *nettest.Topology) netip.Addr {
		if fam == 6 {
			return nat6Addr(tp, 1, 1)
		}
		return natAddr(tp, 1, 1)
	}
	sink := func(tp *nettest.Topology) netip.Addr {
		if fam == 6 {
			return tp.Sink.IPv6
		}
		return tp.Sink.IPv4
	}
	const genTag, sinkTag, gen2Tag, sink2Tag = 0x11223344, 0x55667788, 0x0a0b0c0d, 0x01020304
	cookie := sctpChunk(sctpCookieEcho, 0, []byte("cookie-of-sink"))
	exch := func(dst func(*nettest.Topology) netip.Addr, out, back []byte) func(*testing.T, *nettest.Topology) string {
		return natRawExchange(fam, nettest.ProtoSCTP, dst, natBytes(out), natBytes(back), natSCTPText)
	}
	steps := []natStep{
		{"INIT to fw:5000 DNATed to sink:6000, the INIT ACK translated back", exch(fw,
			natSCTPPacket(40000, 5000, 0, natSCTPInit, genTag), natSCTPPacket(6000, 40000, genTag, natSCTPInitAck, sinkTag))},
		{"COOKIE ECHO and COOKIE ACK (ESTABLISHED)", exch(fw,
			sctpWire(40000, 5000, sinkTag, cookie), sctpWire(6000, 40000, genTag, sctpChunk(sctpCookieAck, 0, nil)))},
		{"DATA with a wrong verification tag (INVALID), answered by nothing", exch(fw,
			sctpWire(40000, 5000, 0xdeadbeef, sctpDataChunk("wrong-tag")), sctpWire(6000, 40000, genTag, sctpDataChunk("none")))},
		{"DATA both ways in the association", exch(fw,
			sctpWire(40000, 5000, sinkTag, sctpDataChunk("data-out")), sctpWire(6000, 40000, genTag, sctpDataChunk("data-back")))},
		{"DATA of 1,401 and 777 bytes (the CRC32c updated over longer packets)", exch(fw,
			sctpWire(40000, 5000, sinkTag, sctpDataChunk(strings.Repeat("o", 1401))),
			sctpWire(6000, 40000, genTag, sctpDataChunk(strings.Repeat("b", 777))))},
		{"a second association from port 40001 (its own connection)", exch(fw,
			natSCTPPacket(40001, 5000, 0, natSCTPInit, gen2Tag), natSCTPPacket(6000, 40001, gen2Tag, natSCTPInitAck, sink2Tag))},
		{"its COOKIE ECHO and COOKIE ACK", exch(fw,
			sctpWire(40001, 5000, sink2Tag, cookie), sctpWire(6000, 40001, gen2Tag, sctpChunk(sctpCookieAck, 0, nil)))},
		{"its SHUTDOWN and SHUTDOWN ACK (SHUTDOWN_ACK_SENT)", exch(fw,
			sctpWire(40001, 5000, sink2Tag, sctpChunk(sctpShutdown, 0, []byte{0, 0, 0, 1})),
			sctpWire(6000, 40001, gen2Tag, sctpChunk(sctpShutdownAck, 0, nil)))},
		{"its SHUTDOWN COMPLETE (CLOSED), then DATA back", exch(fw,
			sctpWire(40001, 5000, sink2Tag, sctpChunk(sctpShutdownDone, 0, nil)),
			sctpWire(6000, 40001, gen2Tag, sctpDataChunk("after-close")))},
		{"an out-of-the-blue ABORT from port 40002 (INVALID)", exch(fw,
			sctpWire(40002, 5000, 0x12345678, sctpChunk(sctpAbort, 0, nil)), sctpWire(6000, 40002, 0x12345678, sctpChunk(sctpAbort, 0, nil)))},
		{"INIT to sink:7000 masqueraded to port 30000, the INIT ACK translated back", exch(sink,
			natSCTPPacket(40003, 7000, 0, natSCTPInit, genTag), natSCTPPacket(7000, 30000, genTag, natSCTPInitAck, sinkTag))},
		{"another INIT to sink:7000 from port 40004: port 30000 taken", exch(sink,
			natSCTPPacket(40004, 7000, 0, natSCTPInit, gen2Tag), natSCTPPacket(7000, 30000, gen2Tag, natSCTPInitAck, sink2Tag))},
		{"fw's own INIT to X.9.7:5002 DNATed in nat OUTPUT to sink:6002, the INIT ACK translated back",
			natSCTPFromHost(fam, natSCTPPacket(40010, 5002, 0, natSCTPInit, genTag), natSCTPPacket(6002, 40010, genTag, natSCTPInitAck, sinkTag))},
	}
	if fam == 6 {
		return append(steps, natStep{"sink's error about the DNATed INIT: translated back", nat6QuotedError(func(tp *nettest.Topology) []byte {
			return nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.Sink.IPv6, HopLimit: 63}.
				Packet(nettest.Raw{Proto: nettest.ProtoSCTP, Data: sctpWire(40000, 6000, sinkTag, sctpDataChunk("data-out"))})
		})})
	}
	return append(steps, natStep{"sink's error about the DNATed DATA: translated back", natQuotedError(3,
		func(tp *nettest.Topology) []byte {
			return nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4}.
				Packet(nettest.Raw{Proto: nettest.ProtoSCTP, Data: sctpWire(40000, 6000, sinkTag, sctpDataChunk("data-out"))})
		})})
}

// TestSCTPNatAgainstKernel runs natSCTPSteps through both twins, IPv4 and
// IPv6, and compares the outcomes, the counters and the sctp connections
// (`conntrack -L`: ports, states, the translated reply tuples).
func TestSCTPNatAgainstKernel(t *testing.T) {
	for _, c := range []struct {
		fam     int
		ruleset string
	}{{4, natSCTPRuleset}, {6, natSCTP6Ruleset}} {
		t.Run(fmt.Sprintf("ipv%d", c.fam), func(t *testing.T) {
			nettest.RequireRoot(t)
			tool := "iptables-legacy"
			if c.fam == 6 {
				tool = "ip6tables-legacy"
			}
			requireTools(t, tool, "conntrack")
			tw := newTwins(t, xfwPath(t))
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
				natPortlessSinkDrop(t, tp, tool)
				natSCTPVIPRoute(t, tp, c.fam)
				subnet, placeholder := natSubnetText(tp, c.fam)
				fw.restore(t, tp, c.fam, strings.ReplaceAll(c.ruleset, placeholder, subnet))
			})
			if t.Failed() {
				return
			}
			runNatSteps(t, tw, natSCTPSteps(c.fam))
			compareNatCountersFam(t, tw, c.fam, 7)
			compareNatConntrackProtos(t, tw, c.fam, []string{"sctp"}, func(string, int) bool { return false }, 3)
		})
	}
}

// natSCTPRecv is the program fw runs to send its own SCTP packet (a raw
// socket: the kernels here have no SCTP stack) to argv[2] and print what
// SCTP packet it receives next: the sender's address and the packet (for
// IPv4 with its IP header, as a raw socket gives it), in hex.
const natSCTPRecv = `import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET
s = socket.socket(fam, socket.SOCK_RAW, 132)
s.settimeout(4)
s.sendto(bytes.fromhex(sys.argv[1]), (sys.argv[2], 0))
try:
    data, addr = s.recvfrom(4096)
    print(addr[0], data.hex())
except socket.timeout:
    print("nothing")
`

// natSCTPFromHost sends out from fw's own raw socket to X.9.7 port 5002
// (routed through sink, natSCTPVIPRoute; nat OUTPUT's DNAT to sink:6002),
// answers with back from sink to
// where the packet arrived, and says what sink saw and what fw's socket
// received (natSCTPText, the source address by name).
func natSCTPFromHost(fam int, out, back []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, vip, sink := natName, natAddr(tp, 9, 7), tp.Sink.IPv4
		if fam == 6 {
			name, vip, sink = nat6Name, nat6Addr(tp, 9, 7), tp.Sink.IPv6
		}
		is := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == nettest.ProtoSCTP }
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, is)
		defer atSink.Stop()
		var stdout bytes.Buffer
		cmd := exec.Command("ip", "netns", "exec", tp.FwNS, "python3", "-c", natSCTPRecv, hex.EncodeToString(out), vip.String())
		cmd.Stdout = &stdout
		if err := cmd.Start(); err != nil {
			return "fw's sender: " + err.Error()
		}
		defer func() { _ = cmd.Wait() }()
		f, ok := atSink.WaitFor(is, 3*time.Second)
		if !ok {
			_ = cmd.Wait()
			return "sink saw nothing"
		}
		seen := fmt.Sprintf("sink saw %s -> %s %s", name(tp, f.Src), name(tp, f.Dst), natSCTPText(f))
		var pkt []byte
		if fam == 6 {
			pkt = nettest.IPv6{Src: sink, Dst: f.Src, HopLimit: 64}.Packet(nettest.Raw{Proto: nettest.ProtoSCTP, Data: back})
		} else {
			pkt = nettest.IPv4{Src: sink, Dst: f.Src}.Packet(nettest.Raw{Proto: nettest.ProtoSCTP, Data: back})
		}
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(pkt)); err != nil {
			return seen + "; inject from sink: " + err.Error()
		}
		if err := cmd.Wait(); err != nil {
			return seen + "; fw's receiver: " + err.Error()
		}
		from, data, ok := strings.Cut(strings.TrimSpace(stdout.String()), " ")
		b, err := hex.DecodeString(data)
		a, aerr := netip.ParseAddr(from)
		if !ok || err != nil || aerr != nil {
			return seen + "; fw received " + stdout.String()
		}
		if fam == 4 && len(b) > 0 {
			b = b[int(b[0]&0xf)*4:]
		}
		return seen + fmt.Sprintf("; fw received from %s %s", name(tp, a), natSCTPText(nettest.Captured{Packet: &nettest.Packet{Payload: b}}))
	}
}

// natSCTPVIPRoute routes fw's X.9.7 (no host's) through sink, as a
// ClusterIP goes by a node's default route: xfw's nat OUTPUT translates
// a packet at the TC egress of the device its first route picked, after
// the neighbour resolution, which an address of a link's own subnet that
// no host holds never passes.
func natSCTPVIPRoute(t *testing.T, tp *nettest.Topology, fam int) {
	t.Helper()
	if fam == 6 {
		nettest.MustExec(t, tp.FwNS, "ip", "-6", "route", "add", nat6Addr(tp, 9, 7).String()+"/128", "via", tp.Sink.IPv6.String())
		return
	}
	nettest.MustExec(t, tp.FwNS, "ip", "route", "add", natAddr(tp, 9, 7).String()+"/32", "via", tp.Sink.IPv4.String())
}
