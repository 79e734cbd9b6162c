package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m connmark and -j CONNMARK against the kernel: counting rules in every
// table through xfw and through iptables-legacy in twin topologies, the
// same packets, every rule's counters compared after each packet. A
// connection's mark set by one packet is seen by the next packet of the
// connection and by its replies (fw's ping of gen: set in OUTPUT, read
// by the echo reply in INPUT); --save-mark and --restore-mark move marks
// between packet and connection with masks and shifts; a packet without
// a connection (a TCP ACK of none: INVALID) matches no connmark rule,
// inverted or not. conntrack -L shows the marks as the kernel's does.

// connmarkRuleset is the ruleset of TestConnmarkAgainstKernel (IPv4
// spelling; connmarkRuleset6 the IPv6 one).
const connmarkRuleset = `*mangle
-A PREROUTING -p udp -m connmark --mark 0x0
-A PREROUTING -p udp -m connmark --mark 0x33 -j ACCEPT
-A PREROUTING -p udp -m udp --dport 9003 -j CONNMARK --set-mark 0x33
-A PREROUTING -p udp -m udp --dport 9004 -j CONNMARK --set-xmark 0x1/0xffffffff --left-shift-mark 4
-A PREROUTING -p udp -m connmark --mark 0x10
-A PREROUTING -p udp -m udp --dport 9005 -j MARK --set-mark 0x2200
-A PREROUTING -p udp -m udp --dport 9005 -j CONNMARK --save-mark --nfmask 0xff00 --ctmask 0xff00 --right-shift-mark 8
-A PREROUTING -p udp -m connmark --mark 0x22
-A PREROUTING -p udp -m connmark ! --mark 0x22/0xff
-A INPUT -p udp -j CONNMARK --restore-mark --mask 0xff
-A INPUT -p udp -m mark --mark 0x33
-A INPUT -p udp -m mark --mark 0x10
-A INPUT -p udp -m mark --mark 0x2222
-A FORWARD -p udp -m connmark --mark 0x33
-A FORWARD -p udp -j CONNMARK --or-mark 0x100
-A FORWARD -p udp -m connmark --mark 0x100/0x100
-A FORWARD -p udp -j CONNMARK --xor-mark 0x101
-A FORWARD -p udp -j CONNMARK --and-mark 0xff
-A FORWARD -p tcp -m connmark ! --mark 0x1
-A FORWARD -p tcp -j CONNMARK --set-mark 0x1
-A FORWARD -p tcp -m connmark --mark 0x0
-A OUTPUT -p icmp -m icmp --icmp-type 8 -m connmark --mark 0x5
-A OUTPUT -p icmp -m icmp --icmp-type 8 -j CONNMARK --set-mark 0x5
-A OUTPUT -p icmp -m icmp --icmp-type 8 -m connmark --mark 0x5
-A INPUT -p icmp -m icmp --icmp-type 0 -m connmark --mark 0x5
-A POSTROUTING -p icmp -m icmp --icmp-type 8 -m connmark --mark 0x5
-A POSTROUTING -p udp -m connmark --mark 0x33
COMMIT
*filter
-A INPUT -p udp -m connmark --mark 0x33
-A INPUT -p udp -m connmark --mark 0x10/0xf0
-A INPUT -p icmp -m icmp --icmp-type 0 -m connmark --mark 0x5
-A FORWARD -p udp -m connmark --mark 0x32
-A FORWARD -p tcp -m conntrack --ctstate INVALID
COMMIT
`

// connmarkRuleset6 is connmarkRuleset for ip6tables (ICMPv6 echoes).
var connmarkRuleset6 = strings.NewReplacer(
	"-p icmp -m icmp --icmp-type 8", "-p ipv6-icmp -m icmp6 --icmpv6-type 128",
	"-p icmp -m icmp --icmp-type 0", "-p ipv6-icmp -m icmp6 --icmpv6-type 129").Replace(connmarkRuleset)

// tcpAckTo returns a TCP ACK from gen to host net.host port, a segment of
// no connection (INVALID for the tracker, with loose pickup off).
func tcpAckTo(fam int, net, host byte, port uint16) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		src, dst := tp.Gen.IPv4, in4(tp, net, host)
		if fam == 6 {
			src, dst = tp.Gen.IPv6, in6(tp, uint16(net), uint16(host))
		}
		seg := nettest.TCP{SrcPort: 4001, DstPort: port, Seq: 1000, Ack: 2000, Flags: nettest.TCPAck | nettest.TCPRst, Window: 512}
		return tp.GenToFw().Frame(nettest.IPPacket(src, dst, seg))
	}
}

// TestConnmarkAgainstKernel checks the connmark match and the CONNMARK
// target of every table against the kernel, packet by packet, in both
// families, then the marks conntrack -L shows.
func TestConnmarkAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "ping", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		fw.restore(t, tp, 4, connmarkRuleset)
		fw.restore(t, tp, 6, connmarkRuleset6)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		probes := []typeProbe{
			{name: "udp to fw 9003 (CONNMARK --set-mark)", fam: fam, frame: udpTo(fam, 1, 1, 9003)},
			{name: "udp to fw 9003 again (the connection's mark)", fam: fam, frame: udpTo(fam, 1, 1, 9003)},
			{name: "udp to fw 9004 (a shifted mark)", fam: fam, frame: udpTo(fam, 1, 1, 9004)},
			{name: "udp to fw 9004 again", fam: fam, frame: udpTo(fam, 1, 1, 9004)},
			{name: "udp to fw 9005 (--save-mark, --restore-mark)", fam: fam, frame: udpTo(fam, 1, 1, 9005)},
			{name: "udp to fw 9005 again", fam: fam, frame: udpTo(fam, 1, 1, 9005)},
			{name: "udp forwarded 9003", fam: fam, frame: udpTo(fam, 2, 2, 9003)},
			{name: "udp forwarded 9003 again (and, or, xor)", fam: fam, frame: udpTo(fam, 2, 2, 9003)},
			{name: "udp forwarded 9006", fam: fam, frame: udpTo(fam, 2, 2, 9006)},
			{name: "udp forwarded 9006 again", fam: fam, frame: udpTo(fam, 2, 2, 9006)},
			{name: "tcp ACK of no connection forwarded (INVALID)", fam: fam, frame: tcpAckTo(fam, 2, 2, 9007)},
			{name: "fw pings gen (CONNMARK in OUTPUT, the reply's INPUT)", fam: fam, cmd: pingGen(fam)},
			{name: "fw pings gen again", fam: fam, cmd: pingGen(fam)},
		}
		for _, pr := range probes {
			compareTableCounters(t, tw, pr, false)
		}
		compareConnmarks(t, tw, fam)
	}
}

// ctMarkLine finds the fields conntrack -L's lines are compared by: the
// protocol, the original destination port and the mark.
var ctMarkLine = regexp.MustCompile(`^(\S+) .* dport=(\d+) .* mark=(\d+) `)

// compareConnmarks compares the UDP connections' marks conntrack -L shows
// in the twins (xfw conntrack and conntrack-tools).
func compareConnmarks(t *testing.T, tw *twins, fam int) {
	t.Helper()
	got := twinUDPConnections(t, tw, fam, func(l string) string {
		if m := ctMarkLine.FindStringSubmatch(l); m != nil {
			return fmt.Sprintf("%s dport=%s mark=%s", m[1], m[2], m[3])
		}
		return ""
	})
	if t.Failed() {
		return
	}
	want := "udp dport=9003 mark=51" // 0x33, set by the first packet
	if !strings.Contains(strings.Join(got["kernel"], "\n"), want) {
		t.Fatalf("IPv%d: the kernel's connections %q lack %q: fix the test", fam, got["kernel"], want)
	}
	if strings.Join(got["xfw"], "\n") != strings.Join(got["kernel"], "\n") {
		t.Errorf("IPv%d connection marks:\n xfw    %q\n kernel %q", fam, got["xfw"], got["kernel"])
	}
}

// connmarkReceiver sends two datagrams to itself over lo and prints the
// marks the receiving socket sees (SO_RCVMARK, as markReceiver).
const connmarkReceiver = `
import socket
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.setsockopt(socket.SOL_SOCKET, 75, 1)
r.bind(("127.0.0.1", 9100))
r.settimeout(2)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
out = []
for _ in range(2):
    s.sendto(b"x", ("127.0.0.1", 9100))
    data, anc, flags, addr = r.recvmsg(16, socket.CMSG_SPACE(4))
    out += [int.from_bytes(d[:4], "little") for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == 36]
print(out)
`

// TestConnmarkRestoreReachesSocket checks that --restore-mark in OUTPUT
// gives the packet its connection's mark as the kernel does: the first
// datagram's connection is marked after the restore (so it leaves
// unmarked), the second takes the mark with it to the receiving socket.
func TestConnmarkRestoreReachesSocket(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "python3")
	tw := newTwins(t, xfwPath(t))
	rules := "*mangle\n-A OUTPUT -p udp -m udp --dport 9100 -j CONNMARK --restore-mark\n" +
		"-A OUTPUT -p udp -m udp --dport 9100 -j CONNMARK --set-mark 0x2a\nCOMMIT\n"
	got := map[string]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		fw.restore(t, tp, 4, rules)
		res, err := nettest.Exec(tp.FwNS, "python3", "-c", connmarkReceiver)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: receiver: %v %v", kind, err, res)
			return
		}
		mu.Lock()
		got[kind] = strings.TrimSpace(res.Stdout)
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	if got["kernel"] != "[0, 42]" {
		t.Fatalf("the kernel's receiver saw marks %s, want [0, 42]: fix the test", got["kernel"])
	}
	if got["xfw"] != got["kernel"] {
		t.Errorf("xfw's receiver saw marks %s, the kernel's %s", got["xfw"], got["kernel"])
	}
}
