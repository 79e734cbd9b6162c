package difftest_test

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRejectResetAfterTCPMSS compares REJECT's reset to a bare SYN (no
// options, no data) that a TCPMSS rule before it gave an MSS option: the
// kernel's reset acknowledges the SYN alone (nf_reject_ip*_tcphdr_put
// reads the grown length and the grown header), xfw's acknowledged 4
// bytes more (bpf/reject_plan.h xfw_rj_plan_rst; found by xfw difftest,
// the conformance dump ipt-save-filter.txt with seed 4). In INPUT
// (--set-mss) and FORWARD (--clamp-mss-to-pmtu), both families: each
// firewall must send gen both resets, byte for byte as the kernel's.
func TestRejectResetAfterTCPMSS(t *testing.T) {
	eachFamily(t, rejectResetAfterTCPMSS)
}

func rejectResetAfterTCPMSS(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A INPUT -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1000\n" +
		"-A INPUT -p tcp --dport 4168 -j REJECT --reject-with tcp-reset\n" +
		"-A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu\n" +
		"-A FORWARD -p tcp --dport 4166 -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	eth := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}
	syn := func(to netip.Addr, dport uint16, flags uint16) []byte {
		return eth.Frame(nettest.IPPacket(p.Gen, to, nettest.TCP{SrcPort: 53, DstPort: dport, Flags: flags, Window: 512}))
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		{From: difftest.FromGen, Path: difftest.PathInput, Note: "bare SYN to fw",
			Frames: [][]byte{syn(p.FwIn, 4168, nettest.TCPSyn)}},
		{From: difftest.FromGen, Path: difftest.PathForward, Note: "bare SYN,PSH,URG,ECE through fw",
			Frames: [][]byte{syn(p.Sink, 4166, nettest.TCPSyn|nettest.TCPPsh|nettest.TCPUrg|nettest.TCPEce)}},
	}}
	checkObserved(t, s, difftest.Case{Name: "REJECT's reset after TCPMSS", Ruleset: rules, Corpus: corpus},
		[2]int{2, 2}, "each reset at gen")
}
