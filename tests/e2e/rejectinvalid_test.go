package e2e

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// A REJECT reply to a packet without a connection (INVALID) carries none
// (nf_ct_attach attaches nothing), so its ICMP error is tracked at OUTPUT
// on its own: INVALID, as it quotes a packet of no known connection, not
// RELATED to a connection the offending packet would have opened (what a
// stack's error about a packet it did not deliver is: bpf/ct_related.h
// xfw_ct_attached; bpf/ct_hook.h xfw_ct_reply). The offending packets:
// UDP-Lite datagrams whose checksum coverage (3) is shorter than their
// header, which conntrack calls INVALID, from gen to fw (INPUT) and
// through fw to sink (FORWARD). OUTPUT counts the errors RELATED and drops
// them INVALID: what gen receives and every rule's counters are compared.

// rejectInvalidRules is the ruleset; GEN stands for gen's address, ICMPP
// for the family's ICMP protocol.
const rejectInvalidRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p 136 -m conntrack --ctstate INVALID -j REJECT
-A FORWARD -p 136 -m conntrack --ctstate INVALID -j REJECT
-A OUTPUT -d GEN -p ICMPP -m conntrack --ctstate RELATED
-A OUTPUT -d GEN -p ICMPP -m conntrack --ctstate INVALID -j DROP
-A OUTPUT -d GEN
COMMIT
`

// udpliteShortCoverage returns a UDP-Lite datagram from port sport to
// dport whose checksum coverage (3) is shorter than its header.
func udpliteShortCoverage(sport, dport uint16) nettest.Raw {
	const protoUDPLite, coverage = 136, 3
	b := make([]byte, 8, 8+16)
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], coverage)
	return nettest.Raw{Proto: protoUDPLite, Data: append(b, "short coverage.."...)}
}

// rejectInvalidRound sends gen's two datagrams and counts the ICMP
// errors gen receives.
func rejectInvalidRound(t *testing.T, tp *nettest.Topology, fam, _ int) int {
	t.Helper()
	gen, fw, sink := familyAddrs(tp, fam)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	frames := [][]byte{
		eth.Frame(nettest.IPPacket(gen, fw, udpliteShortCoverage(5321, 7321))),
		eth.Frame(nettest.IPPacket(gen, sink, udpliteShortCoverage(5322, 7322))),
	}
	errs := 0
	for _, f := range genReceives(t, tp, fam, frames) {
		if f.IsICMPUnreachable() {
			errs++
		}
	}
	return errs
}

// TestRejectInvalidErrorAgainstKernel compares the state of REJECT's ICMP
// errors about INVALID packets in OUTPUT (bpf/ct_hook.h xfw_ct_reply).
func TestRejectInvalidErrorAgainstKernel(t *testing.T) {
	twinsPerFamily(t, func(t *testing.T, tw *twins, fam int) {
		icmp := "icmp"
		if fam == 6 {
			icmp = "icmpv6"
		}
		rules := strings.ReplaceAll(rejectInvalidRules, "ICMPP", icmp)
		seen, saves := twinRejectRounds(t, tw, fam, []string{rules}, rejectInvalidRound)
		if t.Failed() {
			return
		}
		kc := compareRejectRound(t, "INVALID offending packets", seen["kernel"][0], seen["xfw"][0], saves["kernel"][0], saves["xfw"][0])
		// Meaningful only if the kernel's errors were sent and
		// dropped as INVALID in OUTPUT.
		for key, c := range kc {
			if strings.Contains(key, "INVALID -j DROP") && strings.HasPrefix(key, "OUTPUT") && c.packets != 2 {
				t.Errorf("the kernel's OUTPUT dropped %d INVALID errors, want 2", c.packets)
			}
		}
	})
}
