package e2e

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The leading address drops of raw PREROUTING (compiler/predrop.go,
// bpf/predrop.h): a flood's `-s NET -j DROP` rules first in a PREROUTING
// chain judged before routing are compared with the packet's address
// without classifying it. The same ruleset goes through xfw and
// iptables-legacy in twin topologies and every table's counters are
// compared after each probe: drops by each leading rule (source,
// destination; routed to fw, forwarded, without a route), packets none
// holds (walked as before), and the same probes after an in-place insert
// before the drops (it must take them over) and its delete.

// preDropRuleset4 starts raw PREROUTING with three leading drops (two
// sources, a destination) and goes on with rules the short path leaves to
// the walk.
const preDropRuleset4 = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -s 198.51.100.0/24 -j DROP
-A PREROUTING -s 192.0.2.7 -j DROP
-A PREROUTING -d 203.0.113.0/24 -j DROP
-A PREROUTING -p udp -m udp --dport 7777 -j DROP
-A PREROUTING -p udp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp
-A FORWARD -p udp
COMMIT
`

// preDropRuleset6 is preDropRuleset4 in IPv6 documentation prefixes.
const preDropRuleset6 = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -s 2001:db8:51::/48 -j DROP
-A PREROUTING -s 2001:db8:192::7 -j DROP
-A PREROUTING -d 2001:db8:203::/48 -j DROP
-A PREROUTING -p udp -m udp --dport 7777 -j DROP
-A PREROUTING -p udp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp
-A FORWARD -p udp
COMMIT
`

// TestRawLeadingDropsAgainstKernel checks the leading drops' verdicts and
// counters against the kernel, in both families, before and after an
// in-place insert before them and its delete.
func TestRawLeadingDropsAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, preDropRuleset4)
		fw.restore(t, tp, 6, preDropRuleset6)
	})
	if t.Failed() {
		return
	}
	addr, gen, at := probeFixed, probeGen, probeAt
	probes := func(fam int) []typeProbe {
		src1, src1b, src2, dst3 := "198.51.100.7", "198.51.100.200", "192.0.2.7", "203.0.113.9"
		near := "192.0.2.8" // next to the second rule's host: not dropped there
		if fam == 6 {
			src1, src1b, src2, dst3 = "2001:db8:51::7", "2001:db8:51:ffff::1", "2001:db8:192::7", "2001:db8:203::9"
			near = "2001:db8:192::8"
		}
		return []typeProbe{
			{name: "first rule's source, to fw", fam: fam, frame: udpFromTo(fam, addr(src1), at(fam, 1, 1), 9999, 0, nil)},
			{name: "first rule's source, forwarded", fam: fam, frame: udpFromTo(fam, addr(src1b), at(fam, 2, 2), 9999, 0, nil)},
			{name: "first rule's source, no route", fam: fam, frame: udpFromTo(fam, addr(src1), at(fam, 9, 9), 9999, 0, nil)},
			{name: "second rule's source", fam: fam, frame: udpFromTo(fam, addr(src2), at(fam, 1, 1), 9999, 0, nil)},
			{name: "next to the second rule's source", fam: fam, frame: udpFromTo(fam, addr(near), at(fam, 1, 1), 9999, 0, nil)},
			{name: "third rule's destination", fam: fam, frame: udpFromTo(fam, gen(fam), addr(dst3), 9999, 0, nil)},
			{name: "no leading rule, to fw", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 1, 1), 9999, 0, nil)},
			{name: "no leading rule, forwarded", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 2, 2), 9999, 0, nil)},
			{name: "no leading rule, later DROP", fam: fam, frame: udpFromTo(fam, gen(fam), at(fam, 1, 1), 7777, 0, nil)},
		}
	}
	run := func(fam int, args ...string) {
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			nettest.MustExec(t, tp.FwNS, append(append(fw.cmd(fam, ""), "-w", lockWait), args...)...)
		})
	}
	for _, fam := range []int{4, 6} {
		for _, pr := range probes(fam) {
			compareTableCounters(t, tw, pr, fam == 4)
		}
		// In place: an ACCEPT before the drops for part of the first
		// rule's network, then its delete.
		part := "198.51.100.0/25"
		if fam == 6 {
			part = "2001:db8:51::/64"
		}
		run(fam, "-t", "raw", "-I", "PREROUTING", "1", "-s", part, "-j", "ACCEPT")
		for _, pr := range probes(fam)[:4] {
			pr.name += ", after an insert before"
			compareTableCounters(t, tw, pr, fam == 4)
		}
		run(fam, "-t", "raw", "-D", "PREROUTING", "1")
		for _, pr := range probes(fam)[:4] {
			pr.name += ", after the insert's delete"
			compareTableCounters(t, tw, pr, fam == 4)
		}
	}
}
