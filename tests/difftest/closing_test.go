package difftest_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRejectOutputResetCloses compares the connection an OUTPUT REJECT's
// reset closes (nf_send_reset's nf_ct_set_closing; bpf/ct_hook.h
// xfw_ct_rst_close, at TC): fw's SYN to gen, gen's SYN,ACK (dropped in
// INPUT, so that fw's stack sends no reset of its own), fw's ACK, which
// OUTPUT REJECTs with a reset to fw itself, then gen's RST far outside the
// window. In the connection the reset closed, CLOSE's RST transition takes
// it (ESTABLISHED: fw's sockets get it); in one left open it is INVALID
// and INPUT drops it (xfw before the fix, which left the connection
// ESTABLISHED, with its five-day timeout).
func TestRejectOutputResetCloses(t *testing.T) {
	eachFamily(t, rejectOutputResetCloses)
}

func rejectOutputResetCloses(t *testing.T, fam ir.Family) {
	s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	rules := fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A INPUT -p tcp --tcp-flags SYN,ACK SYN,ACK -j DROP\n"+
		"-A INPUT -p tcp -m conntrack --ctstate INVALID -j DROP\n"+
		"-A OUTPUT -d %s -p tcp --tcp-flags SYN,ACK ACK -j REJECT --reject-with tcp-reset\nCOMMIT\n", p.Gen)
	fw, gen := netip.AddrPortFrom(p.FwIn, 40015), netip.AddrPortFrom(p.Gen, 54349)
	const isnFw, isnGen, farAhead = 0x10000000, 0x50000000, 0x40000000
	seg := func(src, dst netip.AddrPort, flags uint16, seq, ack uint32) []byte {
		return nettest.IPPacket(src.Addr(), dst.Addr(), nettest.TCP{SrcPort: src.Port(), DstPort: dst.Port(),
			Seq: seq, Ack: ack, Flags: flags, Window: 512})
	}
	eth := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}
	probes := []difftest.Probe{
		{From: difftest.FromFw, Path: difftest.PathOutput, Step: 1, KeepL4: true, Note: "fw's SYN",
			Frames: [][]byte{seg(fw, gen, nettest.TCPSyn, isnFw, 0)}},
		{From: difftest.FromGen, Path: difftest.PathInput, Step: 2, KeepL4: true, Note: "gen's SYN,ACK",
			Frames: [][]byte{eth.Frame(seg(gen, fw, nettest.TCPSyn|nettest.TCPAck, isnGen, isnFw+1))}},
		{From: difftest.FromFw, Path: difftest.PathOutput, Step: 3, KeepL4: true, Note: "fw's ACK, REJECTed",
			Frames: [][]byte{seg(fw, gen, nettest.TCPAck, isnFw+1, isnGen+1)}},
		{From: difftest.FromGen, Path: difftest.PathInput, Step: 4, KeepL4: true, Note: "gen's RST outside the window",
			Frames: [][]byte{eth.Frame(seg(gen, fw, nettest.TCPRst, isnGen+farAhead, 0))}},
	}
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's reset closes", Ruleset: rules,
		Corpus: &difftest.Corpus{Probes: probes}},
		[2]int{2, 2}, "fw's SYN at gen, gen's RST at fw's sockets")
}
