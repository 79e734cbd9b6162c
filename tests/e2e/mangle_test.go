package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The packet-rewriting targets (TCPMSS, DSCP, TOS, TTL, HL) and the
// notrack targets (CT --notrack, NOTRACK) against the kernel: the same
// packets through xfw and through iptables-legacy in twin topologies,
// every rule's counters of every table compared after each packet (later
// rules match the rewritten values), the rewritten header fields of what
// arrives at sink (or at gen, for fw's own pings) compared between the
// twins and with what the rules ask for, their checksums valid; notrack:
// --ctstate UNTRACKED counts and conntrack -L lists no connection.

// mangleRuleset is the ruleset of TestMangleAgainstKernel (IPv4 spelling;
// mangleRuleset6 makes the IPv6 one). fw's interface towards sink has an
// MTU of 1400: --clamp-mss-to-pmtu lowers a SYN's MSS to 1360 (IPv6:
// 1340), the larger MTU of the input interface not mattering.
const mangleRuleset = `*raw
-A PREROUTING -p udp -m udp --dport 9020 -j NOTRACK
-A PREROUTING -p udp -m udp --dport 9021 -j CT --notrack
-A PREROUTING -p udp -m udp --dport 9020 -m conntrack --ctstate INVALID
-A OUTPUT -p icmp -m icmp --icmp-type 8 -j CT --notrack
COMMIT
*mangle
-A PREROUTING -p udp -m udp --dport 9010 -j DSCP --set-dscp-class AF41
-A PREROUTING -p udp -m udp --dport 9010 -m dscp --dscp 0x22
-A PREROUTING -p udp -m udp --dport 9011 -j TOS --set-tos 0x10/0x3f
-A PREROUTING -p udp -m udp --dport 9012 -j TTL --ttl-set 33
-A PREROUTING -p udp -m udp --dport 9012 -m ttl --ttl-eq 33
-A INPUT -p udp -m udp --dport 9015 -j TOS --xor-tos 0x04
-A INPUT -p udp -m udp --dport 9015 -j TTL --ttl-dec 3
-A FORWARD -p udp -m udp --dport 9013 -j TTL --ttl-inc 5
-A FORWARD -p udp -m udp --dport 9014 -j TOS --and-tos 0xf0
-A FORWARD -p tcp -m tcp --dport 8001 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1300
-A FORWARD -p tcp -m tcp --dport 8001 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1400
-A FORWARD -p tcp -m tcpmss --mss 1300
-A OUTPUT -p icmp -m icmp --icmp-type 8 -j DSCP --set-dscp 0x0a
-A OUTPUT -p tcp -m tcp --dport 8003 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1200
-A OUTPUT -p tcp -m tcp --dport 8004 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1200
-A POSTROUTING -p udp -m udp --dport 9014 -j TTL --ttl-dec 60
-A POSTROUTING -p udp -m udp --dport 9014 -m ttl --ttl-eq 3
-A POSTROUTING -p icmp -m icmp --icmp-type 8 -m dscp --dscp 0x0a
-A POSTROUTING -p tcp -m tcp --dport 8002 --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu
-A POSTROUTING -p tcp -m tcp --dport 8002 -m tcpmss --mss CLAMPED
-A POSTROUTING -p tcp -m tcp --dport 8003 -m tcpmss --mss 1200
-A POSTROUTING -p tcp -m tcp --dport 8001 -m length --length GROWN
-A POSTROUTING -p tcp -m tcp --dport 8001 -m tcpmss --mss ADDED
-A POSTROUTING -p tcp -m tcp --dport 8004 -m length --length GROWN
-A POSTROUTING -p tcp -m tcp --dport 8004 -m tcpmss --mss ADDED_OUT
-A OUTPUT -p tcp -m tcp --dport 8009 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1200
-A POSTROUTING -p tcp -m tcp --dport 8009 -m length --length OPTS_GROWN
-A POSTROUTING -p tcp -m tcp --dport 8009 -m tcpmss --mss ADDED_OUT
-A FORWARD -p tcp -m tcp --dport 8005 --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1300
-A FORWARD -p tcp -m tcp --dport 8005 -m length --length OPTS_GROWN
-A FORWARD -p tcp -m tcp --dport 8005 -m tcpmss --mss ADDED
-A POSTROUTING -p tcp -m tcp --dport 8006 --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu
-A POSTROUTING -p tcp -m tcp --dport 8006 -m length --length GROWN
-A POSTROUTING -p tcp -m tcp --dport 8006 -m length --length OPTS_GROWN
-A POSTROUTING -p tcp -m tcp --dport 8006 -m tcpmss --mss ADDED
COMMIT
*nat
-A PREROUTING -p udp
COMMIT
*filter
-A INPUT -p udp -m conntrack --ctstate UNTRACKED
-A INPUT -p udp -m conntrack --ctstate NEW
-A INPUT -p udp -m tos --tos 0x04/0x0c
-A INPUT -p udp -m ttl --ttl-eq 61
-A FORWARD -p udp -m conntrack --ctstate UNTRACKED
-A FORWARD -p udp -m conntrack --ctstate NEW
-A FORWARD -p udp -m dscp --dscp 0x22
-A FORWARD -p udp -m tos --tos 0x10/0x3f
-A FORWARD -p udp -m ttl --ttl-eq 32
-A FORWARD -p udp -m ttl --ttl-eq 68
-A OUTPUT -p icmp -m conntrack --ctstate UNTRACKED
COMMIT
`

// mangleOutMTU is the MTU of fw's interface towards sink.
const mangleOutMTU = 1400

// mangleRulesetFor returns the ruleset for family fam (4 or 6): a SYN
// without options grown by an MSS option is 44 bytes long (IPv6: 64), one
// with 8 bytes of other options 52 (IPv6: 72), the
// option added to it 536 (IPv6: 1220, and 1200 from OUTPUT's rule).
func mangleRulesetFor(fam int) string {
	if fam == 4 {
		return strings.NewReplacer("CLAMPED", fmt.Sprint(mangleOutMTU-40), "OPTS_GROWN", "52", "GROWN", "44",
			"ADDED_OUT", "536", "ADDED", "536").Replace(mangleRuleset)
	}
	return strings.NewReplacer("-j TTL --ttl-", "-j HL --hl-", "-m ttl --ttl-eq", "-m hl --hl-eq",
		"-p icmp -m icmp --icmp-type 8", "-p ipv6-icmp -m icmp6 --icmpv6-type 128",
		"CLAMPED", fmt.Sprint(mangleOutMTU-60), "OPTS_GROWN", "72", "GROWN", "64", "ADDED_OUT", "1200", "ADDED", "1220").Replace(mangleRuleset)
}

// mangleTOSIn is the TOS byte (traffic class) of the probes gen sends.
const mangleTOSIn = 0x0f

// mangleUDP builds a UDP datagram from gen to 10.X.net.host (fd00:X:net::host)
// with the TOS byte mangleTOSIn.
func mangleUDP(fam int, net, host byte, port uint16) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		udp := nettest.UDP{SrcPort: 4000, DstPort: port, Payload: []byte("xfw-mangle-probe")}
		if fam == 6 {
			return tp.GenToFw().Frame(nettest.IPv6{Src: tp.Gen.IPv6, Dst: in6(tp, uint16(net), uint16(host)),
				TrafficClass: mangleTOSIn}.Packet(udp))
		}
		return tp.GenToFw().Frame(nettest.IPv4{Src: tp.Gen.IPv4, Dst: in4(tp, net, host), TOS: mangleTOSIn}.Packet(udp))
	}
}

// The MSS options of the raw SYNs gen sends: none, 1460, 1460 after a NOP
// (the value at an odd offset), none but 8 bytes of others (SACK
// permitted, window scale, NOPs: the added option goes first).
const (
	synNoMSS = iota
	synMSS1460
	synMSSOdd
	synOptsNoMSS
)

// mangleSYN builds a TCP SYN from gen to sink's port with the MSS option
// opt and a full checksum.
func mangleSYN(fam int, port uint16, opt int) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		opts := map[int][]byte{synMSS1460: {2, 4, 0x05, 0xb4}, synMSSOdd: {1, 2, 4, 0x05, 0xb4, 1, 1, 1},
			synOptsNoMSS: {4, 2, 1, 3, 3, 7, 1, 1}}[opt]
		syn := nettest.TCP{SrcPort: 41000, DstPort: port, Seq: 7, Flags: nettest.TCPSyn, Window: 1024, Options: opts}
		if fam == 6 {
			return tp.GenToFw().Frame(nettest.IPPacket(tp.Gen.IPv6, in6(tp, 2, 2), syn))
		}
		return tp.GenToFw().Frame(nettest.IPPacket(tp.Gen.IPv4, in4(tp, 2, 2), syn))
	}
}

// rawSYNScript sends a TCP SYN from a raw socket (the kernel adds the IP
// header and OUTPUT sees it): argv destination, source (for the
// checksum's pseudo-header), port, and optionally the value of an MSS
// option or "hex:" and the options' bytes (without it the SYN has no
// options).
const rawSYNScript = `
import socket, struct, sys
dst, src, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
opts = b""
if len(sys.argv) > 4:
    opts = bytes.fromhex(sys.argv[4][4:]) if sys.argv[4].startswith("hex:") else struct.pack("!BBH", 2, 4, int(sys.argv[4]))
fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
seg = struct.pack("!HHIIBBHHH", 41003, port, 7, 0, (5 + len(opts) // 4) << 4, 2, 1024, 0, 0) + opts
ps = socket.inet_pton(fam, src) + socket.inet_pton(fam, dst)
ps += struct.pack("!HH", 6, len(seg)) if fam == socket.AF_INET else struct.pack("!IxxxB", len(seg), 6)
seg = seg[:16] + struct.pack("!H", csum(ps + seg)) + seg[18:]
s = socket.socket(fam, socket.SOCK_RAW, socket.IPPROTO_TCP)
s.sendto(seg, (dst, 0))
`

// rawSYNFromFw is the command that sends rawSYNScript's SYN from fw to
// sink's port, with rawSYNScript's option argument if given.
func rawSYNFromFw(fam int, port uint16, opt ...string) func(tp *nettest.Topology) []string {
	return func(tp *nettest.Topology) []string {
		dst, src := in4(tp, 2, 2).String(), in4(tp, 2, 1).String()
		if fam == 6 {
			dst, src = in6(tp, 2, 2).String(), in6(tp, 2, 1).String()
		}
		return append([]string{"python3", "-c", rawSYNScript, dst, src, fmt.Sprint(port)}, opt...)
	}
}

// mangleSinkAddr is sink's address in family fam.
func mangleSinkAddr(tp *nettest.Topology, fam int) netip.Addr {
	if fam == 6 {
		return in6(tp, 2, 2)
	}
	return in4(tp, 2, 2)
}

// mangleProbe is one probe of TestMangleAgainstKernel: what it sends,
// where its rewritten packet is seen (sink or gen; "" for none) and
// what that packet must carry.
type mangleProbe struct {
	typeProbe
	at   string
	port uint16 // the captured packet's destination port (0: an ICMP echo request)
	want string // mangleFields of the captured packet
	// kernelBad: the kernel's packet carries a wrong checksum, xfw's
	// the right one (docs/differences.md: an MSS option at an odd
	// offset).
	kernelBad bool
}

// mangleProbes are the probes of TestMangleAgainstKernel for family fam.
func mangleProbes(fam int) []mangleProbe {
	tos := func(v int) string { return fmt.Sprintf("tos 0x%02x", v) }
	pr := func(name string, frame func(*nettest.Topology) []byte, at string, port uint16, want string) mangleProbe {
		return mangleProbe{typeProbe: typeProbe{name: name, fam: fam, frame: frame}, at: at, port: port, want: want}
	}
	connect := func(name string, ns func(*nettest.Topology) string, port uint16, want string) mangleProbe {
		return mangleProbe{typeProbe: typeProbe{name: name, fam: fam, run: func(t *testing.T, tp *nettest.Topology) {
			if a := nettest.TCPConnect(ns(tp), netip.AddrPortFrom(mangleSinkAddr(tp, fam), port)); a.Outcome != nettest.OK {
				t.Errorf("IPv%d %s: connect: %v", fam, name, a)
			}
		}}, at: "sink", port: port, want: want}
	}
	gen := func(tp *nettest.Topology) string { return tp.GenNS }
	fw := func(tp *nettest.Topology) string { return tp.FwNS }
	// An added MSS option is at most the default MSS (RFC 1122's 536;
	// IPv6: 1280 - 60) and the rule's 1300.
	clamped, defaultMSS := mangleOutMTU-40, 536
	if fam == 6 {
		clamped, defaultMSS = mangleOutMTU-60, 1220
	}
	return []mangleProbe{
		pr("DSCP AF41 in PREROUTING, seen by -m dscp", mangleUDP(fam, 2, 2, 9010), "sink", 9010, tos(0x22<<2|3)+" ttl 63"),
		pr("TOS set 0x10/0x3f keeps the precedence bits", mangleUDP(fam, 2, 2, 9011), "sink", 9011, tos(0x10)+" ttl 63"),
		pr("TTL set 33 in PREROUTING, forwarded", mangleUDP(fam, 2, 2, 9012), "sink", 9012, tos(0x0f)+" ttl 32"),
		pr("TTL inc 5 in FORWARD", mangleUDP(fam, 2, 2, 9013), "sink", 9013, tos(0x0f)+" ttl 68"),
		pr("TOS and, TTL dec in POSTROUTING", mangleUDP(fam, 2, 2, 9014), "sink", 9014, tos(0x00)+" ttl 3"),
		pr("TOS xor, TTL dec in INPUT", mangleUDP(fam, 1, 1, 9015), "", 0, ""),
		pr("NOTRACK to fw", mangleUDP(fam, 1, 1, 9020), "", 0, ""),
		pr("NOTRACK forwarded", mangleUDP(fam, 2, 2, 9020), "sink", 9020, tos(0x0f)+" ttl 63"),
		pr("CT --notrack forwarded", mangleUDP(fam, 2, 2, 9021), "sink", 9021, tos(0x0f)+" ttl 63"),
		pr("a raw SYN's MSS lowered to 1300", mangleSYN(fam, 8001, synMSS1460), "sink", 8001, "mss 1300"),
		pr("a raw SYN without MSS gets one (at XDP)", mangleSYN(fam, 8001, synNoMSS), "sink", 8001,
			fmt.Sprintf("mss %d", defaultMSS)),
		{typeProbe: typeProbe{name: "fw's raw SYN without MSS gets one (at TC)", fam: fam, cmd: rawSYNFromFw(fam, 8004)},
			at: "sink", port: 8004, want: fmt.Sprintf("mss %d", min(defaultMSS, 1200))},
		{typeProbe: typeProbe{name: "a raw SYN's MSS at an odd offset lowered", fam: fam, frame: mangleSYN(fam, 8001, synMSSOdd)},
			at: "sink", port: 8001, want: "mss 1300", kernelBad: true},
		pr("a raw SYN with other options gets one first, later rules see it", mangleSYN(fam, 8005, synOptsNoMSS), "sink", 8005,
			fmt.Sprintf("mss %d options 0204%04x0402010303070101", defaultMSS, defaultMSS)),
		{typeProbe: typeProbe{name: "fw's raw SYN with other options gets one first (at TC)", fam: fam,
			cmd: rawSYNFromFw(fam, 8009, "hex:0402010303070101")},
			at: "sink", port: 8009, want: fmt.Sprintf("mss %d options 0204%04x0402010303070101", min(defaultMSS, 1200), min(defaultMSS, 1200))},
		pr("clamped: a bare SYN gets one, later rules see it", mangleSYN(fam, 8006, synNoMSS), "sink", 8006,
			fmt.Sprintf("mss %d", defaultMSS)),
		pr("clamped: a SYN with other options gets one first", mangleSYN(fam, 8006, synOptsNoMSS), "sink", 8006,
			fmt.Sprintf("mss %d options 0204%04x0402010303070101", defaultMSS, defaultMSS)),
		connect("gen's connection clamped to the path MTU", gen, 8002, fmt.Sprintf("mss %d", clamped)),
		connect("fw's own connection, MSS set in OUTPUT", fw, 8003, "mss 1200"),
		{typeProbe: typeProbe{name: "fw pings gen: DSCP and notrack in OUTPUT", fam: fam, cmd: pingGen(fam)},
			at: "gen", want: tos(0x0a << 2)},
	}
}

// mangleFields describes what a probe's rules rewrote in a captured frame:
// the TOS byte and TTL of a datagram, the MSS option of a SYN; "bad
// checksum" when an IPv4 header or transport checksum is wrong (a full
// one that does not add up; a partial one is a sum offload completes).
func mangleFields(f nettest.Captured) string {
	const ethLen = 14
	ip := f.Raw[ethLen:]
	var tos int
	if f.IPVersion == 4 {
		tos = int(ip[1])
	} else {
		tos = int(ip[0]&0xf)<<4 | int(ip[1]>>4)
	}
	if !mangleChecksumsOK(f) {
		return "bad checksum"
	}
	if f.Protocol == nettest.ProtoTCP {
		return fmt.Sprintf("mss %d", synMSS(f.Raw)) + synOtherOptions(f.Raw)
	}
	if f.Protocol == nettest.ProtoUDP {
		return fmt.Sprintf("tos 0x%02x ttl %d", tos, f.TTL)
	}
	return fmt.Sprintf("tos 0x%02x", tos)
}

// synMSS returns the MSS option's value of the TCP segment in frame (0:
// none).
func synMSS(frame []byte) int {
	seg := mangleSegment(frame)
	if len(seg) < 20 {
		return 0
	}
	hl := int(seg[12]>>4) * 4
	for i := 20; i+4 <= hl && i+4 <= len(seg); {
		switch seg[i] {
		case 0, 1:
			i++
			continue
		case 2:
			if seg[i+1] == 4 {
				return int(binary.BigEndian.Uint16(seg[i+2:]))
			}
		}
		if seg[i+1] == 0 {
			break
		}
		i += int(seg[i+1])
	}
	return 0
}

// synOtherOptions returns " options HEX" when the SYN in frame carries
// options besides a leading MSS option (a raw probe's, whose order the
// rewrite keeps), "" when it has no other or is a connection's (its
// timestamps differ between the twins: their first option is an MSS
// option followed by SACK permitted and a timestamp, or by NOPs).
func synOtherOptions(frame []byte) string {
	seg := mangleSegment(frame)
	if len(seg) < 20 {
		return ""
	}
	hl := int(seg[12]>>4) * 4
	if hl <= 24 || hl > len(seg) || seg[20] != 2 || slices.Contains(seg[20:hl], 8) {
		return ""
	}
	return fmt.Sprintf(" options %x", seg[20:hl])
}

// mangleSegment returns the transport segment of an Ethernet frame
// holding an IPv4 or IPv6 packet (no extension headers).
func mangleSegment(frame []byte) []byte {
	const ethLen, ip6Len = 14, 40
	ip := frame[ethLen:]
	if ip[0]>>4 == 4 {
		ihl := int(ip[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if total > len(ip) || total < ihl {
			return nil
		}
		return ip[ihl:total]
	}
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if ip6Len+plen > len(ip) {
		return nil
	}
	return ip[ip6Len : ip6Len+plen]
}

// mangleChecksumsOK reports whether the frame's IPv4 header checksum and
// its TCP, UDP or ICMPv6 checksum add up (the transport checksum in full,
// or the pseudo-header sum of a partial checksum).
func mangleChecksumsOK(f nettest.Captured) bool {
	const ethLen = 14
	ip := f.Raw[ethLen:]
	seg := mangleSegment(f.Raw)
	if seg == nil {
		return false
	}
	var pseudo []byte
	if f.IPVersion == 4 {
		if nettest.Checksum(ip[:int(ip[0]&0xf)*4]) != 0 {
			return false
		}
		if f.Protocol == nettest.ProtoICMP {
			return nettest.Checksum(seg) == 0
		}
		pseudo = append(append(pseudo, ip[12:20]...), 0, f.Protocol, byte(len(seg)>>8), byte(len(seg)))
	} else {
		pseudo = append(append(pseudo, ip[8:40]...), 0, 0, byte(len(seg)>>8), byte(len(seg)), 0, 0, 0, f.Protocol)
	}
	if nettest.Checksum(append(append([]byte(nil), pseudo...), seg...)) == 0 {
		return true
	}
	csoff := map[uint8]int{nettest.ProtoTCP: 16, nettest.ProtoUDP: 6, nettest.ProtoICMPv6: 2}[f.Protocol]
	if csoff == 0 || len(seg) < csoff+2 {
		return false
	}
	return binary.BigEndian.Uint16(seg[csoff:]) == ^nettest.Checksum(pseudo)
}

// mangleSinkSetup prepares one twin: fw's MTU towards sink, sink dropping
// the UDP probes (no port unreachable comes back through fw) and serving
// TCP on the connections' ports.
func mangleSinkSetup(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", nettest.FwOutIfname, "mtu", fmt.Sprint(mangleOutMTU))
	for _, cmd := range []string{"iptables-legacy", "ip6tables-legacy"} {
		nettest.MustExec(t, tp.SinkNS, cmd, "-A", "INPUT", "-p", "udp", "-j", "DROP")
	}
	for _, fam := range []int{4, 6} {
		for _, port := range []uint16{8002, 8003} {
			srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(mangleSinkAddr(tp, fam), port))
			t.Cleanup(func() { srv.Close() })
		}
	}
}

// TestMangleAgainstKernel checks TCPMSS, DSCP, TOS, TTL, HL, CT --notrack
// and NOTRACK against the kernel, packet by packet, in both families.
func TestMangleAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "ping", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		mangleSinkSetup(t, tp)
		fw.restore(t, tp, 4, mangleRulesetFor(4))
		fw.restore(t, tp, 6, mangleRulesetFor(6))
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		for _, pr := range mangleProbes(fam) {
			caps := map[string]*nettest.Capture{}
			var mu sync.Mutex
			tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
				if pr.at == "" {
					return
				}
				ns, ifname := tp.SinkNS, nettest.SinkIfname
				if pr.at == "gen" {
					ns, ifname = tp.GenNS, nettest.GenIfname
				}
				c := nettest.StartCapture(t, ns, ifname, func(c nettest.Captured) bool {
					return mangleCaptured(c, fam, pr.port)
				})
				mu.Lock()
				caps[kind] = c
				mu.Unlock()
			})
			compareTableCounters(t, tw, pr.typeProbe, false)
			if pr.at != "" {
				compareMangled(t, caps, pr)
			}
		}
		compareUntracked(t, tw, fam)
	}
}

// mangleCaptured selects a probe's packet from a capture: incoming, of
// family fam, to port (a SYN), or an ICMP echo request for port 0.
func mangleCaptured(c nettest.Captured, fam int, port uint16) bool {
	if c.Outgoing || c.IPVersion != fam {
		return false
	}
	if port == 0 {
		return (c.Protocol == nettest.ProtoICMP && c.ICMPType == 8) ||
			(c.Protocol == nettest.ProtoICMPv6 && c.ICMPType == 128)
	}
	if c.DstPort != port {
		return false
	}
	return c.Protocol == nettest.ProtoUDP || (c.Protocol == nettest.ProtoTCP && c.TCPFlags&nettest.TCPSyn != 0)
}

// compareMangled compares the rewritten fields of the probe's packet as
// each twin's capture saw it with each other and with what the rules ask
// for.
func compareMangled(t *testing.T, caps map[string]*nettest.Capture, pr mangleProbe) {
	t.Helper()
	got := map[string]string{}
	for kind, c := range caps {
		frames := c.Wait(1, 2*time.Second)
		c.Stop()
		if len(frames) == 0 {
			got[kind] = "nothing arrived"
			continue
		}
		got[kind] = mangleFields(frames[0])
	}
	want := pr.want
	if pr.kernelBad {
		want = "bad checksum"
	}
	if got["kernel"] != want {
		t.Errorf("IPv%d %s: the kernel's packet at %s: %s, want %s (fix the test)", pr.fam, pr.name, pr.at, got["kernel"], want)
	}
	if pr.kernelBad {
		if got["xfw"] != pr.want {
			t.Errorf("IPv%d %s: at %s: xfw %s, want %s", pr.fam, pr.name, pr.at, got["xfw"], pr.want)
		}
		return
	}
	if got["xfw"] != got["kernel"] {
		t.Errorf("IPv%d %s: at %s: xfw %s, kernel %s", pr.fam, pr.name, pr.at, got["xfw"], got["kernel"])
	}
}

// twinUDPConnections lists the UDP connections of family fam each twin
// tracks (xfw conntrack -L, conntrack-tools' conntrack -L), as pick
// describes their lines ("" leaves a line out), sorted.
func twinUDPConnections(t *testing.T, tw *twins, fam int, pick func(line string) string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		argv := []string{"conntrack", "-L", "-p", "udp", "-f", map[int]string{4: "ipv4", 6: "ipv6"}[fam]}
		if kind == "xfw" {
			argv = append([]string{fw.bin}, argv...)
		}
		res, err := nettest.Exec(tp.FwNS, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: %v: %v %v", kind, argv, err, res)
			return
		}
		var lines []string
		for _, l := range strings.Split(res.Stdout, "\n") {
			if s := pick(l); s != "" {
				lines = append(lines, s)
			}
		}
		sort.Strings(lines)
		mu.Lock()
		got[kind] = lines
		mu.Unlock()
	})
	return got
}

// ctDportLine picks the original destination port of a conntrack -L line.
var ctDportLine = regexp.MustCompile(`dport=(\d+) `)

// compareUntracked checks that the twins track the same UDP connections:
// those of the probes to ports 9010-9015, none of the notrack ports 9020
// and 9021.
func compareUntracked(t *testing.T, tw *twins, fam int) {
	t.Helper()
	lists := twinUDPConnections(t, tw, fam, func(l string) string {
		if m := ctDportLine.FindStringSubmatch(l); m != nil {
			return m[1]
		}
		return ""
	})
	if t.Failed() {
		return
	}
	got := map[string]string{}
	for kind, ports := range lists {
		got[kind] = strings.Join(slices.Compact(ports), " ")
	}
	if want := "9010 9011 9012 9013 9014 9015"; got["kernel"] != want {
		t.Fatalf("IPv%d: the kernel tracks UDP to %q, want %q: fix the test", fam, got["kernel"], want)
	}
	if got["xfw"] != got["kernel"] {
		t.Errorf("IPv%d tracked UDP connections: xfw %q, kernel %q", fam, got["xfw"], got["kernel"])
	}
}
