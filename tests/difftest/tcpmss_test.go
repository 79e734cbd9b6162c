package difftest_test

import (
	"context"
	"fmt"
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

// TestTCPMSSAddedOptionSeen compares what the rules after a TCPMSS rule see
// of a SYN it gives an MSS option, options before it or none, and the
// ICMP error a REJECT then sends: the kernel's rules see the grown SYN
// (-m length, the byte counters) and the added option's value (-m tcpmss,
// also after --clamp-mss-to-pmtu), and its error quotes the grown SYN
// with the option first (tcpmss_mangle_packet moves the others after it).
// xfw counted and matched a SYN with other options as it came, saw no
// value after a clamp, and sent no error (its quote was 4 bytes longer
// than the frame). INPUT (--set-mss) and FORWARD (--clamp-mss-to-pmtu),
// both families: each firewall must send gen three errors and sink the
// SYN it forwards, byte for byte as the kernel's (xfw added the option
// after the others).
func TestTCPMSSAddedOptionSeen(t *testing.T) {
	eachFamily(t, tcpmssAddedOptionSeen)
}

func tcpmssAddedOptionSeen(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	// SACK permitted, NOP, window scale, two NOPs: an 8-byte option list
	// without an MSS option; grown, the 32-byte header's packet is 52
	// bytes long (IPv6: 72).
	opts := []byte{4, 2, 1, 3, 3, 7, 1, 1}
	grown, added := 52, 536
	if fam == ir.IPv6 {
		grown, added = 72, 1220
	}
	rules := fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A INPUT -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1000\n"+
		"-A INPUT -p tcp -m length --length %[1]d\n"+
		"-A INPUT -p tcp -m tcpmss --mss %[2]d\n"+
		"-A INPUT -p tcp --dport 4168 -j REJECT\n"+
		"-A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu\n"+
		"-A FORWARD -p tcp -m length --length %[1]d\n"+
		"-A FORWARD -p tcp -m tcpmss --mss %[2]d\n"+
		"-A FORWARD -p tcp --dport 4166 -j REJECT\nCOMMIT\n", grown, added)
	eth := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}
	syn := func(to netip.Addr, dport uint16, opts []byte) []byte {
		return eth.Frame(nettest.IPPacket(p.Gen, to, nettest.TCP{SrcPort: 53, DstPort: dport, Seq: 7,
			Flags: nettest.TCPSyn, Window: 512, Options: opts}))
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		{From: difftest.FromGen, Path: difftest.PathInput, Note: "SYN with options, no MSS, to fw",
			Frames: [][]byte{syn(p.FwIn, 4168, opts)}},
		{From: difftest.FromGen, Path: difftest.PathForward, Note: "SYN with options, no MSS, through fw",
			Frames: [][]byte{syn(p.Sink, 4166, opts)}},
		{From: difftest.FromGen, Path: difftest.PathForward, Note: "bare SYN through fw",
			Frames: [][]byte{syn(p.Sink, 4166, nil)}},
		{From: difftest.FromGen, Path: difftest.PathForward, Note: "SYN with options, no MSS, to sink",
			Frames: [][]byte{syn(p.Sink, 4167, opts)}},
	}}
	checkObserved(t, s, difftest.Case{Name: "rules and REJECT after TCPMSS added an option", Ruleset: rules, Corpus: corpus},
		[2]int{4, 4}, "each ICMP error at gen, the SYN at sink")
}

// TestTCPMSSCutHeaderDrops compares a TCPMSS rule meeting a SYN whose
// TCP header is cut short (its data offset says 28 bytes, the packet
// holds 20): xt_TCPMSS drops it at the rule (tcpmss_mangle_packet returns
// -1: NF_DROP), so neither the LOG rule after it nor the policy sees it;
// xfw dropped it only after the walk, having counted and logged it in
// the rules after (bpf/mangle.h; found by xfw difftest, a SYN whose first
// fragment cut its options, TestHeldFragmentsKnown's ruleset without
// connection tracking). INPUT (--set-mss), FORWARD
// (--clamp-mss-to-pmtu) and OUTPUT, a whole SYN beside each, both
// families: the firewalls must agree on every probe, LOG line and
// counter.
func TestTCPMSSCutHeaderDrops(t *testing.T) {
	eachFamily(t, tcpmssCutHeaderDrops)
}

func tcpmssCutHeaderDrops(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A INPUT -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1000\n" +
		"-A INPUT -p tcp -j LOG --log-prefix \"after-mss \"\n" +
		"-A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu\n" +
		"-A FORWARD -p tcp -j LOG --log-prefix \"after-clamp \"\n" +
		"-A OUTPUT -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu\n" +
		"-A OUTPUT -p tcp -j LOG --log-prefix \"after-out \"\nCOMMIT\n"
	eth := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}
	seg := func(src, to netip.Addr, dport uint16, cut bool) []byte {
		// The whole SYN has an MSS option (TCPMSS adds none: a LOG
		// line after it prints the packet as it came, docs/differences.md).
		tcp := nettest.TCP{SrcPort: 4000, DstPort: dport, Flags: nettest.TCPSyn, Window: 512, Options: []byte{2, 4, 0x05, 0xb4}}
		if cut {
			tcp.Options, tcp.DataOffset = nil, 7
		}
		return nettest.IPPacket(src, to, tcp)
	}
	var probes []difftest.Probe
	for _, cut := range []bool{true, false} {
		what := fmt.Sprintf("SYN, header cut %v", cut)
		probes = append(probes,
			difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Note: what + " to fw",
				Frames: [][]byte{eth.Frame(seg(p.Gen, p.FwIn, 4170, cut))}},
			difftest.Probe{From: difftest.FromGen, Path: difftest.PathForward, Note: what + " through fw",
				Frames: [][]byte{eth.Frame(seg(p.Gen, p.Sink, 4171, cut))}},
			difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput, Note: what + " from fw",
				Frames: [][]byte{seg(p.FwOut, p.Sink, 4172, cut)}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	o, err := s.Check(ctx, difftest.Case{Name: "TCPMSS on a cut header", Ruleset: rules, Corpus: &difftest.Corpus{Probes: probes}},
		difftest.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Failed() || o.Result.Lossy != "" || o.Result.Rejected != "" {
		t.Fatalf("%s\nlossy: %q rejected: %q", o.Report(), o.Result.Lossy, o.Result.Rejected)
	}
	// The whole SYNs: at fw's sockets (and its RST at gen), at sink
	// twice; their LOG lines; nothing of the cut ones.
	if o.Result.Observed[0] == 0 {
		t.Errorf("nothing observed: %s", o.Report())
	}
	t.Log(o.Report())
}
