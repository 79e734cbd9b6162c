package e2e

import (
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT of a bridged frame against the kernel (br_netfilter): gen's
// frames bridged to sink are REJECTed in FORWARD. The kernel's TCP reset
// goes straight back out of gen's port, from sink's MAC and address, past
// OUTPUT and POSTROUTING; its ICMP errors are the host's, from br0's MAC
// and address, judged in OUTPUT and POSTROUTING (-o br0, RELATED) and
// bridged to gen.

// bridgeRejectRuleset rejects bridged TCP and UDP by port, each way the
// kernel answers: a reset (9721), ICMP port unreachable about UDP (9722)
// and about TCP (9724), an administratively prohibited error that OUTPUT
// drops (9723); OUTPUT and POSTROUTING count the replies.
const bridgeRejectRuleset = `*filter
-A FORWARD -i br0 -o br0 -p tcp -m tcp --dport 9721 -j REJECT --reject-with tcp-reset
-A FORWARD -i br0 -o br0 -p udp -m udp --dport 9722 -j REJECT
-A FORWARD -i br0 -o br0 -p udp -m udp --dport 9723 -j REJECT --reject-with icmp-admin-prohibited
-A FORWARD -m physdev --physdev-in in0 -p tcp -m tcp --dport 9724 -j REJECT
-A OUTPUT -p tcp
-A OUTPUT -o br0 -p icmp -m conntrack --ctstate RELATED
-A OUTPUT -p icmp -m icmp --icmp-type 3/13 -j DROP
-A OUTPUT -o br0 -p icmp -m icmp --icmp-type 3
COMMIT
*mangle
-A OUTPUT -p icmp -m icmp --icmp-type 3
-A POSTROUTING -o br0 -p icmp -m icmp --icmp-type 3
-A POSTROUTING -p tcp
COMMIT
`

// bridgeRejectRules returns the ruleset in family fam's spelling; without
// tracked, it has no conntrack match (the generation tracks nothing).
func bridgeRejectRules(fam int, tracked bool) string {
	rules := bridgeRejectRuleset
	if !tracked {
		rules = strings.ReplaceAll(rules, " -m conntrack --ctstate RELATED", "")
	}
	if fam == 4 {
		return rules
	}
	return strings.NewReplacer("icmp-admin-prohibited", "icmp6-adm-prohibited",
		"-p icmp -m icmp --icmp-type 3/13", "-p ipv6-icmp -m icmp6 --icmpv6-type 1/1",
		"-p icmp -m icmp --icmp-type 3", "-p ipv6-icmp -m icmp6 --icmpv6-type 1",
		"-p icmp -m conntrack", "-p ipv6-icmp -m conntrack").Replace(rules)
}

// bridgedTCP builds a TCP SYN from gen to sink's port, bridged.
func bridgedTCP(fam int, port uint16) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		eth := nettest.Ethernet{Src: tp.Gen.MAC, Dst: tp.Sink.MAC}
		tcp := nettest.TCP{SrcPort: 4100, DstPort: port, Seq: 0x1000, Flags: nettest.TCPSyn, Window: 1000}
		return eth.Frame(nettest.IPPacket(bridgeAddr(tp, fam, 1), bridgeAddr(tp, fam, 2), tcp))
	}
}

// bridgeRejectReply selects gen's received replies of family fam: a TCP
// segment from a probed port, an ICMP destination unreachable.
func bridgeRejectReply(c nettest.Captured, fam int) bool {
	if c.Outgoing || c.IPVersion != fam {
		return false
	}
	switch c.Protocol {
	case nettest.ProtoTCP:
		return c.SrcPort >= 9721 && c.SrcPort <= 9726
	case nettest.ProtoICMP:
		return c.ICMPType == 3
	case nettest.ProtoICMPv6:
		return c.ICMPType == 1
	}
	return false
}

// describeBridgeReject describes a reply gen received: its VLAN tags, its Ethernet and IP
// addresses by name, its IP header and message as hex, without what
// differs by nature: the IPv4 identification and header checksum (the
// kernel's counter), an IPv4 reset's TCP checksum (the kernel's is left to
// the device, CHECKSUM_PARTIAL, which a veth never completes), an IPv6
// flow label's value (the kernel's hashes the flow with a boot-time key:
// only whether there is one is compared, docs/differences.md).
func describeBridgeReject(tp *nettest.Topology, c nettest.Captured) string {
	macs := map[string]string{tp.Gen.MAC.String(): "GEN", tp.Sink.MAC.String(): "SINK", bridgeMAC: "BR0"}
	tags := ""
	if len(c.VLANs) > 0 {
		tags = fmt.Sprintf("tags %v ", c.VLANs)
	}
	ip := append([]byte(nil), c.Raw[14+4*len(c.VLANs):]...)
	hl := 40
	if c.IPVersion == 6 && (ip[1]&0xf != 0 || ip[2] != 0 || ip[3] != 0) {
		ip[1], ip[2], ip[3] = ip[1]&0xf0|1, 0, 0
	}
	if c.IPVersion == 4 {
		hl = int(ip[0]&0xf) * 4
		copy(ip[4:6], []byte{0, 0})
		copy(ip[10:12], []byte{0, 0})
		if c.Protocol == nettest.ProtoTCP && len(ip) >= hl+18 {
			copy(ip[hl+16:hl+18], []byte{0, 0})
		}
	}
	return fmt.Sprintf("%s%s>%s %s>%s ttl %d ip %s msg %s", tags, macs[c.SrcMAC.String()], macs[c.DstMAC.String()],
		bridgeName(tp, c.Src), bridgeName(tp, c.Dst), c.TTL, hex.EncodeToString(ip[:hl]), hex.EncodeToString(ip[hl:]))
}

// TestBridgedRejectAgainstKernel REJECTs frames bridged from gen to sink
// through xfw and through iptables-legacy (both families, tracked and not,
// every table's counters compared after each probe) and compares what gen
// receives: the reset from sink's MAC and address, the ICMP errors from
// br0's, counted in OUTPUT and POSTROUTING (as RELATED when tracked), one
// dropped there. fw's default TTL and br0's hop limit are not 64: the
// replies' are the kernel's.
func TestBridgedRejectAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.ip_default_ttl=50", "net.ipv6.conf.br0.hop_limit=40")
	})
	if t.Failed() {
		return
	}
	for _, tracked := range []bool{true, false} {
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			fw.restore(t, tp, 4, bridgeRejectRules(4, tracked))
			fw.restore(t, tp, 6, bridgeRejectRules(6, tracked))
			zeroCounters(t, tp, fw)
		})
		if t.Failed() {
			return
		}
		suffix := ""
		if !tracked {
			suffix = ", untracked"
		}
		bridgeRejectRound(t, tw, bridgeRejectProbes, suffix)
	}
}

// bridgeRejectProbe is a frame gen sends and how many replies the kernel
// sends it.
type bridgeRejectProbe struct {
	typeProbe
	replies int
}

// bridgeRejectProbes are TestBridgedRejectAgainstKernel's probes.
func bridgeRejectProbes(fam int) []bridgeRejectProbe {
	probes := []bridgeRejectProbe{
		{typeProbe{name: "tcp-reset", frame: bridgedTCP(fam, 9721)}, 1},
		{typeProbe{name: "port unreachable", frame: bridgedUDP(fam, 9722, false, false)}, 1},
		{typeProbe{name: "prohibited, dropped in OUTPUT", frame: bridgedUDP(fam, 9723, false, false)}, 0},
		{typeProbe{name: "port unreachable about TCP", frame: bridgedTCP(fam, 9724)}, 1},
	}
	if fam == 4 {
		// The kernel echoes no option: the bridge's control block
		// holds what ip_options_compile filled in (bridged frames).
		probes = append(probes,
			bridgeRejectProbe{typeProbe{name: "port unreachable, record route", frame: bridgedUDPOpts(9722, []byte{7, 7, 4, 0, 0, 0, 0, 0})}, 1},
			bridgeRejectProbe{typeProbe{name: "port unreachable, timestamps", frame: bridgedUDPOpts(9722, []byte{68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0})}, 1})
	}
	return probes
}

// bridgedUDPOpts builds an IPv4 UDP datagram from gen to sink's port with
// IP options opts, bridged.
func bridgedUDPOpts(port uint16, opts []byte) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		eth := nettest.Ethernet{Src: tp.Gen.MAC, Dst: tp.Sink.MAC}
		udp := nettest.UDP{SrcPort: 4000, DstPort: port, Payload: []byte("xfw-bridge-options")}
		return eth.Frame(nettest.IPv4{Src: bridgeAddr(tp, 4, 1), Dst: bridgeAddr(tp, 4, 2), ID: 77, Options: opts}.Packet(udp))
	}
}

// bridgeRejectRound sends each family's probes through both twins and
// compares counters and replies (suffix names the round).
func bridgeRejectRound(t *testing.T, tw *twins, probes func(fam int) []bridgeRejectProbe, suffix string) {
	for _, fam := range []int{4, 6} {
		for _, pr := range probes(fam) {
			pr.fam = fam
			pr.name += suffix
			caps := map[string]*nettest.Capture{}
			var mu sync.Mutex
			tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
				c := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(c nettest.Captured) bool {
					return bridgeRejectReply(c, fam)
				})
				mu.Lock()
				caps[kind] = c
				mu.Unlock()
			})
			compareTableCounters(t, tw, pr.typeProbe, false)
			got := map[string][]string{}
			for kind, c := range caps {
				// compareTableCounters drained fw: a reply fw's kernel
				// or xfw sent is queued at gen already; the wait only
				// covers a reply that should come and did not.
				if pr.replies > 0 {
					c.Wait(pr.replies, 2*time.Second)
				}
				frames := c.StopQueued()
				for _, f := range frames {
					got[kind] = append(got[kind], describeBridgeReject(tw.tps[kind], f))
				}
			}
			if len(got["kernel"]) != pr.replies {
				t.Errorf("IPv%d %s: the kernel sent gen %d replies, want %d (fix the test): %q", fam, pr.name,
					len(got["kernel"]), pr.replies, got["kernel"])
			}
			k, x := strings.Join(got["kernel"], "\n"), strings.Join(got["xfw"], "\n")
			if k != x {
				t.Errorf("IPv%d %s: gen received\nkernel: %s\nxfw:    %s", fam, pr.name, k, x)
			} else {
				t.Logf("IPv%d %s: %s", fam, pr.name, k)
			}
		}
	}
}

// bridgeRejectDNATRules adds to the tracked ruleset of family fam a DNAT
// of bridged frames to sink's ports 9725 and 9726 to sink's rejected
// ports 9721 and 9722.
func bridgeRejectDNATRules(fam int) string {
	sink := bridgeAddr(nil, fam, 2).String()
	if fam == 6 {
		sink = "[" + sink + "]"
	}
	return bridgeRejectRules(fam, true) + fmt.Sprintf(`*nat
-A PREROUTING -p tcp -m tcp --dport 9725 -j DNAT --to-destination %[1]s:9721
-A PREROUTING -p udp -m udp --dport 9726 -j DNAT --to-destination %[1]s:9722
COMMIT
`, sink)
}

// TestBridgedRejectAfterDNATAgainstKernel REJECTs bridged frames that nat
// PREROUTING translated (br_netfilter's bridged DNAT) through xfw and
// through iptables-legacy: what gen receives and every counter.
func TestBridgedRejectAfterDNATAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		fw.restore(t, tp, 4, bridgeRejectDNATRules(4))
		fw.restore(t, tp, 6, bridgeRejectDNATRules(6))
		zeroCounters(t, tp, fw)
	})
	if t.Failed() {
		return
	}
	bridgeRejectRound(t, tw, func(fam int) []bridgeRejectProbe {
		return []bridgeRejectProbe{
			{typeProbe{name: "tcp-reset after DNAT", frame: bridgedTCP(fam, 9725)}, 1},
			{typeProbe{name: "port unreachable after DNAT", frame: bridgedUDP(fam, 9726, false, false)}, 1},
		}
	}, "")
}
