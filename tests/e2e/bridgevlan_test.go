package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// bridgeVLANRules counts bridged UDP by the devices and ports iptables
// sees, and drops datagrams to 9841 in FORWARD and to 9842 by their
// ports.
const bridgeVLANRules = `*mangle
-A PREROUTING -p udp -i br0
-A PREROUTING -p udp -m physdev --physdev-in in0
COMMIT
*filter
-A INPUT -p udp -i br0
-A FORWARD -p udp -i br0 -o br0
-A FORWARD -p udp -m physdev --physdev-in in0 --physdev-out out0 --physdev-is-bridged
-A FORWARD -p udp --dport 9841 -j DROP
-A FORWARD -p udp -m physdev --physdev-in in0 --dport 9842 -j DROP
-A FORWARD -p udp
COMMIT
`

// taggedUDP is bridgedUDP's datagram from gen to sink's port in a frame
// with VLAN tag tag (802.1Q unless its TPID says otherwise).
func taggedUDP(fam int, port uint16, tag nettest.VLANTag) func(tp *nettest.Topology) []byte {
	return withTag(bridgedUDP(fam, port, false, false), tag)
}

// withTag returns frame's builder with tag inserted after the addresses.
func withTag(frame func(tp *nettest.Topology) []byte, tag nettest.VLANTag) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		f := frame(tp)
		tpid := tag.TPID
		if tpid == 0 {
			tpid = 0x8100
		}
		tci := uint16(tag.PCP)<<13 | tag.ID&0x0fff
		if tag.DEI {
			tci |= 1 << 12
		}
		hdr := []byte{byte(tpid >> 8), byte(tpid), byte(tci >> 8), byte(tci)}
		return append(append(append([]byte(nil), f[:12]...), hdr...), f[12:]...)
	}
}

// TestBridgedVLANRejectAgainstKernel REJECTs VLAN-tagged bridged frames
// with bridge-nf-filter-vlan-tagged on through xfw and iptables-legacy
// (TestBridgedRejectAgainstKernel's rules and probes, tracked) and
// compares the counters and what gen receives back, tags included.
func TestBridgedVLANRejectAgainstKernel(t *testing.T) {
	tw := bridgeRejectTwins(t, "bridge-nf-filter-vlan-tagged")
	if tw == nil {
		return
	}
	bridgeRejectRound(t, tw, func(fam int) []bridgeRejectProbe {
		var probes []bridgeRejectProbe
		for _, pr := range bridgeRejectProbes(fam)[:4] {
			pr.name += ", VLAN 10"
			pr.frame = withTag(pr.frame, nettest.VLANTag{ID: 10})
			probes = append(probes, pr)
		}
		return probes
	}, "")
}

// TestBridgedVLANAgainstKernel injects VLAN-tagged bridged datagrams
// through xfw and iptables-legacy with bridge-nf-filter-vlan-tagged off
// (they pass unjudged) and on (the kernel judges the datagram inside the
// tag, -i and -o the bridge, the ports for -m physdev, and the frame
// leaves tagged): counters and what reaches sink are compared, both
// families.
func TestBridgedVLANAgainstKernel(t *testing.T) {
	runBridgeSysctlRounds(t, "bridge-nf-filter-vlan-tagged", func(fam int) []bridgeFrameCase {
		return []bridgeFrameCase{
			{"untagged", bridgedUDP(fam, 9840, false, false)},
			{"VLAN 10", taggedUDP(fam, 9840, nettest.VLANTag{ID: 10})},
			{"VLAN 10, dropped by port", taggedUDP(fam, 9841, nettest.VLANTag{ID: 10})},
			{"VLAN 10, dropped by physdev", taggedUDP(fam, 9842, nettest.VLANTag{ID: 10})},
			{"VLAN 0, priority 5", taggedUDP(fam, 9840, nettest.VLANTag{ID: 0, PCP: 5})},
			{"802.1ad VLAN 20", taggedUDP(fam, 9840, nettest.VLANTag{TPID: 0x88a8, ID: 20})},
			{"VLAN 10, to br0", withTag(bridgedUDP(fam, 9840, false, true), nettest.VLANTag{ID: 10})},
		}
	})
}

// bridgeFrameCase is one frame a round of runBridgeSysctlRounds sends.
type bridgeFrameCase struct {
	name  string
	frame func(tp *nettest.Topology) []byte
}

// runBridgeSysctlRounds makes both twins' fw a bridge (bridgeSetup), then,
// with net.bridge.SYSCTL off and then on, loads bridgeVLANRules again
// (loading reads the sysctls; xfw: at each load or sync) and sends each
// family's cases through both twins, comparing the counters and what
// reached sink (bridgeCheckRound).
func runBridgeSysctlRounds(t *testing.T, sysctl string, cases func(fam int) []bridgeFrameCase) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
	})
	if t.Failed() {
		return
	}
	for _, on := range []string{"0", "1"} {
		failed := t.Failed() // an earlier round's differences
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.bridge."+sysctl+"="+on)
			fw.restore(t, tp, 4, bridgeVLANRules)
			fw.restore(t, tp, 6, bridgeVLANRules)
			zeroCounters(t, tp, fw)
		})
		if t.Failed() && !failed {
			return
		}
		for _, fam := range []int{4, 6} {
			for _, pr := range cases(fam) {
				name := fmt.Sprintf("%s %s, IPv%d %s", strings.TrimPrefix(sysctl, "bridge-nf-"), on, fam, pr.name)
				res := map[string]string{}
				var mu sync.Mutex
				tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
					r := bridgeCheckRound(t, tp, fw, name, fam, pr.frame(tp))
					mu.Lock()
					res[kind] = r
					mu.Unlock()
				})
				if res["kernel"] != res["xfw"] {
					t.Errorf("%s:\nkernel: %s\nxfw:    %s", name, res["kernel"], res["xfw"])
				} else {
					t.Logf("%s: %s", name, res["kernel"])
				}
			}
		}
	}
}

// bridgeRejectTwins makes both twins' fw a bridge (bridgeSetup) with
// net.bridge.SYSCTL on, a default TTL of 50 and br0's hop limit 40 (which
// tell whose replies gen gets), and bridgeRejectRules loaded in both
// families; nil when that failed.
func bridgeRejectTwins(t *testing.T, sysctl string) *twins {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.ip_default_ttl=50", "net.ipv6.conf.br0.hop_limit=40",
			"net.bridge."+sysctl+"=1")
		fw.restore(t, tp, 4, bridgeRejectRules(4, true))
		fw.restore(t, tp, 6, bridgeRejectRules(6, true))
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return nil
	}
	return tw
}
