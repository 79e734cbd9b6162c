package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m statistic, -m mark and -j MARK against the kernel: counting rules in
// every table through xfw and through iptables-legacy in twin topologies,
// the same packets, every rule's counters of every table compared after
// each packet. The marks set in mangle and nat PREROUTING are seen by
// later chains (a kube-proxy style KUBE-MARK-MASQ and the POSTROUTING
// check that clears the bit); nth counters step packet by packet as the
// kernel's, and start again with every command, as the kernel's do when
// iptables replaces the table.

// markRuleset is the ruleset of TestMarkStatisticAgainstKernel (IPv4
// spelling; markRuleset6 the IPv6 one). The conntrack match turns the
// kernel's connection tracking on (nat chains see only tracked packets),
// as kube-proxy's NAT targets do.
const markRuleset = `*mangle
-A PREROUTING -p udp -m udp --dport 9001 -j MARK --set-mark 0x11
-A PREROUTING -p udp -m mark --mark 0x11
-A PREROUTING -p udp -m mark --mark 0x10/0x10 -j MARK --or-mark 0x100
-A INPUT -p udp -m mark --mark 0x111
-A INPUT -p udp -m mark ! --mark 0x111 -j MARK --xor-mark 0x3
-A INPUT -p udp -m mark --mark 0x3
-A FORWARD -p udp -m mark --mark 0x4000/0x4000
-A FORWARD -p udp -m mark --mark 0x0
-A OUTPUT -p icmp -m icmp --icmp-type 8 -j MARK --set-xmark 0x7/0xf
-A POSTROUTING -p udp -m mark --mark 0x4000/0x4000
-A POSTROUTING -p icmp -m icmp --icmp-type 8 -m mark --mark 0x7
COMMIT
*nat
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A PREROUTING -p udp -m udp --dport 9003 -j KUBE-MARK-MASQ
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -p udp
COMMIT
*filter
-A INPUT -p udp -m mark --mark 0x11
-A INPUT -p udp -m statistic --mode nth --every 3 --packet 1
-A INPUT -p udp -m statistic --mode nth ! --every 2 --packet 0
-A INPUT -p udp -m statistic --mode nth --every 1 --packet 0
-A INPUT -p udp -m statistic --mode random --probability 1
-A INPUT -p udp -m statistic --mode random --probability 0
-A INPUT -p udp -m statistic --mode random ! --probability 0
-A FORWARD -p udp -m mark --mark 0x4000/0x4000
-A FORWARD -p udp -m statistic --mode nth --every 4 --packet 3
-A FORWARD -p udp -m mark --mark 0x0 -m statistic --mode nth --every 2 --packet 1
-A FORWARD -p tcp -m conntrack --ctstate INVALID
COMMIT
`

// markRuleset6 is markRuleset for ip6tables (ICMPv6 echo requests).
var markRuleset6 = strings.NewReplacer("-p icmp -m icmp --icmp-type 8",
	"-p ipv6-icmp -m icmp6 --icmpv6-type 128").Replace(markRuleset)

// TestMarkStatisticAgainstKernel checks the marks and statistic matches
// of every table against the kernel, packet by packet, in both families.
func TestMarkStatisticAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "ping")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		fw.restore(t, tp, 4, markRuleset)
		fw.restore(t, tp, 6, markRuleset6)
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		var probes []typeProbe
		for i := 1; i <= 7; i++ {
			probes = append(probes, typeProbe{name: fmt.Sprintf("udp to fw 9999, packet %d", i), fam: fam,
				frame: udpTo(fam, 1, 1, 9999)})
		}
		probes = append(probes,
			typeProbe{name: "udp to fw 9001 (MARK in PREROUTING)", fam: fam, frame: udpTo(fam, 1, 1, 9001)},
			typeProbe{name: "udp to fw 9001 again", fam: fam, frame: udpTo(fam, 1, 1, 9001)},
			typeProbe{name: "udp forwarded 9003 (KUBE-MARK-MASQ)", fam: fam, frame: udpTo(fam, 2, 2, 9003)},
			typeProbe{name: "udp forwarded 9003 again (nat not walked)", fam: fam, frame: udpTo(fam, 2, 2, 9003)},
			typeProbe{name: "udp forwarded 9004", fam: fam, frame: udpTo(fam, 2, 2, 9004)},
			typeProbe{name: "udp forwarded 9005", fam: fam, frame: udpTo(fam, 2, 2, 9005)},
			typeProbe{name: "fw pings gen (MARK in OUTPUT)", fam: fam, cmd: pingGen(fam)},
		)
		for _, pr := range probes {
			compareTableCounters(t, tw, pr, false)
		}
		// A command replaces the table: nth counters start again.
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			argv := append(append(fw.cmd(fam, ""), "-w", lockWait), "-A", "OUTPUT", "-p", "udp")
			if res, err := nettest.Exec(tp.FwNS, argv...); err != nil || res.ExitCode != 0 {
				t.Errorf("%s -A OUTPUT: %v", kind, err)
			}
		})
		for i := 1; i <= 4; i++ {
			compareTableCounters(t, tw, typeProbe{name: fmt.Sprintf("after -A, udp to fw 9999, packet %d", i), fam: fam,
				frame: udpTo(fam, 1, 1, 9999)}, false)
		}
	}
}

// markReceiver sends a datagram to itself over lo and prints the mark
// the receiving socket sees (SO_RCVMARK, 75 in Linux 5.19 and later,
// delivers it as an SO_MARK message, 36).
const markReceiver = `
import socket
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
r.setsockopt(socket.SOL_SOCKET, 75, 1)
r.bind(("127.0.0.1", 9100))
r.settimeout(2)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"x", ("127.0.0.1", 9100))
data, anc, flags, addr = r.recvmsg(16, socket.CMSG_SPACE(4))
print([int.from_bytes(d[:4], "little") for lvl, typ, d in anc if lvl == socket.SOL_SOCKET and typ == 36])
`

// TestMarkReachesSocket checks that a mark set in OUTPUT goes on with the
// packet as the kernel's does: written into the skb at TC egress, it is
// the mark a socket receiving the datagram over lo sees, in xfw as with
// iptables-legacy; and a packet the rules do not mark keeps the mark its
// socket gave it (SO_MARK is 0 here: none).
func TestMarkReachesSocket(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "python3")
	tw := newTwins(t, xfwPath(t))
	rules := "*mangle\n-A OUTPUT -p udp -m udp --dport 9100 -j MARK --set-mark 0x2a\n" +
		"-A OUTPUT -p udp -m udp --dport 9100 -j MARK --or-mark 0x100\nCOMMIT\n"
	got := map[string]string{}
	var out = make(chan [2]string, 2)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		fw.restore(t, tp, 4, rules)
		res, err := nettest.Exec(tp.FwNS, "python3", "-c", markReceiver)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s: receiver: %v %v", kind, err, res)
			return
		}
		out <- [2]string{kind, strings.TrimSpace(res.Stdout)}
	})
	close(out)
	for r := range out {
		got[r[0]] = r[1]
	}
	if t.Failed() {
		return
	}
	if got["kernel"] != "[298]" {
		t.Fatalf("the kernel's receiver saw marks %s, want [298] (0x12a): fix the test", got["kernel"])
	}
	if got["xfw"] != got["kernel"] {
		t.Errorf("xfw's receiver saw marks %s, the kernel's %s", got["xfw"], got["kernel"])
	}
}

// TestStatisticRandomRate sends 2000 datagrams through xfw to a rule of
// probability 0.25 (and one inverted) and checks the counts lie within a
// wide bound of 500 (about 8 standard deviations): the random mode
// compares 31 random bits with lround(P * 2^31) as the kernel does.
func TestStatisticRandomRate(t *testing.T) {
	nettest.RequireRoot(t)
	const packets, low, high = 2000, 350, 650
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: xfwPath(t)}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n-A INPUT -p udp -m statistic --mode random --probability 0.25\n"+
		"-A INPUT -p udp -m statistic --mode random ! --probability 0.75\n-A INPUT -p udp\nCOMMIT\n")
	frames := make([][]byte, packets)
	for i := range frames {
		frames[i] = udpTo(4, 1, 1, uint16(10000+i))(tp)
	}
	if err := tp.InjectFromGen(frames...); err != nil {
		t.Fatal(err)
	}
	drainFw(t, tp)
	c := ruleCountersOf(t, fw.save(t, tp, 4))
	total := c["INPUT -p udp"].packets
	if total != packets {
		t.Fatalf("the counting rule saw %d datagrams, want %d", total, packets)
	}
	for _, rule := range []string{"INPUT -p udp -m statistic --mode random --probability 0.25000000000",
		"INPUT -p udp -m statistic --mode random ! --probability 0.75000000000"} {
		if n := c[rule].packets; n < low || n > high {
			t.Errorf("%s: %d of %d packets, want %d..%d", rule, n, packets, low, high)
		} else {
			t.Logf("%s: %d of %d packets", rule, n, packets)
		}
	}
}

// pingGen is fw's ping of gen in family fam.
func pingGen(fam int) func(tp *nettest.Topology) []string {
	if fam == 6 {
		return ping("-6", "fd00:X:1::2")
	}
	return ping("10.X.1.2")
}
