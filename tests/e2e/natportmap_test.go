package e2e

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// DNAT's shifted port maps (`--to-destination ADDR:PORT-PORT/BASE`)
// against the kernel: the new port is the range's first plus the original
// port less the base, modulo the range's size (nf_nat_l4proto_unique_tuple
// with NF_NAT_RANGE_PROTO_OFFSET), the next one when that tuple is taken;
// in nat PREROUTING and nat OUTPUT (without an address), through xfw and
// iptables-legacy in twin topologies; the ports sink saw and the counters
// compared.

// natPortMapRuleset is TestNatPortMapAgainstKernel's ruleset (X: the
// topology's subnet).
const natPortMapRuleset = natTableStart + `-A PREROUTING -d 10.X.1.1/32 -p udp -m udp --dport 6990:7020 -j DNAT --to-destination 10.X.2.2:7040-7049/7000
-A OUTPUT -d 10.X.2.2/32 -p udp -m udp --dport 7100:7110 -j DNAT --to-destination :7140-7149/7100
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m conntrack --ctstate DNAT --ctreplsrcport 7040:7049 -j ACCEPT
-A OUTPUT -p udp -m conntrack --ctstate DNAT --ctreplsrcport 7140:7149
COMMIT
`

// portMapSend sends one datagram per destination port of dports from
// ns's address src (ports sports, in order) to dst's address and says
// which port sink saw each arrive on.
func portMapSend(t *testing.T, tp *nettest.Topology, ns string, src, dst netip.Addr, sports, dports []uint16) string {
	frames := sinkUDP(t, tp, len(dports), func() {
		for i, port := range dports {
			nettest.UDPSend(ns, netip.AddrPortFrom(dst, port), []byte{byte(i)},
				nettest.WithSource(netip.AddrPortFrom(src, sports[i])))
		}
	})
	var got []string
	for _, f := range frames {
		if i := int(f.Payload[0]); i < len(dports) {
			got = append(got, fmt.Sprintf("%d→%d", dports[i], f.DstPort))
		}
	}
	sort.Strings(got)
	return strings.Join(got, " ")
}

// natPortMapSteps are TestNatPortMapAgainstKernel's steps, in order.
var natPortMapSteps = []natStep{
	{"forwarded: ports below, in and above the base", func(t *testing.T, tp *nettest.Topology) string {
		return portMapSend(t, tp, tp.GenNS, tp.Gen.IPv4, natAddr(tp, 1, 1),
			[]uint16{48000, 48001, 48002, 48003}, []uint16{6998, 7003, 7009, 7017})
	}},
	{"forwarded: one client port to two ports mapped to the same one (the next port)", func(t *testing.T, tp *nettest.Topology) string {
		return portMapSend(t, tp, tp.GenNS, tp.Gen.IPv4, natAddr(tp, 1, 1),
			[]uint16{48010, 48010}, []uint16{7005, 7015})
	}},
	{"nat OUTPUT: fw's own, without an address", func(t *testing.T, tp *nettest.Topology) string {
		return portMapSend(t, tp, tp.FwNS, tp.FwOut.IPv4, tp.Sink.IPv4,
			[]uint16{48100, 48101}, []uint16{7100, 7107})
	}},
}

// TestNatPortMapAgainstKernel runs natPortMapSteps through both twins and
// compares the ports and the counters.
func TestNatPortMapAgainstKernel(t *testing.T) {
	tw := natTwins(t, natPortMapRuleset, func(t *testing.T, tp *nettest.Topology) {
		// sink stays silent on the mapped ports.
		nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-A", "INPUT", "-p", "udp", "--dport", "7040:7149", "-j", "DROP")
	})
	if tw == nil {
		return
	}
	runNatSteps(t, tw, natPortMapSteps)
	compareNatCounters(t, tw, 4)
}
