package e2e

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m devgroup against the kernel: fw's interfaces in device groups (in0 5,
// out0 0x12), counting rules of --src-group and --dst-group with masks and
// ! in every chain they are allowed in, through xfw and through
// iptables-legacy in twin topologies, every rule's counters compared after
// each packet; then in0 moves to another group (ip link set in0 group 7),
// xfw compiles again (xfw sync, as xfw watch and the agent do on the
// change) and the same packets are compared again.

// devGroupRuleset is the ruleset of TestDevGroupAgainstKernel (IPv4
// spelling; devGroupRuleset6 the IPv6 one).
const devGroupRuleset = `*filter
-A INPUT -p udp -m devgroup --src-group 5
-A INPUT -p udp -m devgroup ! --src-group 5
-A INPUT -p udp -m devgroup --src-group 0x4/0x4
-A FORWARD -p udp -m devgroup --src-group 5 --dst-group 0x12
-A FORWARD -p udp -m devgroup --dst-group 0x10/0xf0
-A FORWARD -p udp -m devgroup ! --src-group 5 ! --dst-group 0x12
-A OUTPUT -p icmp -m icmp --icmp-type 8 -m devgroup --dst-group 5
-A OUTPUT -p icmp -m icmp --icmp-type 8 -m devgroup ! --dst-group 5
COMMIT
*mangle
-A PREROUTING -p udp -m devgroup --src-group 5
-A PREROUTING -p udp -m devgroup --src-group 7
-A POSTROUTING -p udp -m devgroup --dst-group 0x12
-A POSTROUTING -p icmp -m icmp --icmp-type 8 -m devgroup --dst-group 0x7
COMMIT
`

// devGroupRuleset6 is devGroupRuleset for ip6tables (ICMPv6 echoes).
var devGroupRuleset6 = strings.NewReplacer("-p icmp -m icmp --icmp-type 8",
	"-p ipv6-icmp -m icmp6 --icmpv6-type 128").Replace(devGroupRuleset)

// TestDevGroupAgainstKernel checks -m devgroup against the kernel, packet
// by packet, in both families, before and after a device changes group.
func TestDevGroupAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "ping")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "in0", "group", "5")
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "out0", "group", "0x12")
		fw.restore(t, tp, 4, devGroupRuleset)
		fw.restore(t, tp, 6, devGroupRuleset6)
	})
	if t.Failed() {
		return
	}
	probes := func(round string) []typeProbe {
		var out []typeProbe
		for _, fam := range []int{4, 6} {
			out = append(out,
				typeProbe{name: round + "udp to fw", fam: fam, frame: udpTo(fam, 1, 1, 9500)},
				typeProbe{name: round + "udp forwarded", fam: fam, frame: udpTo(fam, 2, 2, 9501)},
				typeProbe{name: round + "fw pings gen", fam: fam, cmd: pingGen(fam)},
			)
		}
		return out
	}
	for _, pr := range probes("") {
		compareTableCounters(t, tw, pr, false)
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "in0", "group", "7")
		if kind == "xfw" {
			nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
		}
	})
	for _, pr := range probes("in0 in group 7: ") {
		compareTableCounters(t, tw, pr, false)
	}
}
