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

// TestLogAfterRewrite compares the LOG lines of rules after rewriting
// ones: the kernel's LOG prints the packet as the rules before it left
// it (the TTL or hop limit a TTL or HL rule set, the TOS byte or traffic
// class a DSCP rule set, the length with the MSS option TCPMSS added);
// xfw's printed the packet as it came (found by xfw difftest: a ruleset
// file with `-j TTL --ttl-set 9`, `-j TOS --set-tos 0x10` and `-j LOG` in
// mangle FORWARD; TestTCPMSSCutHeaderDrops's whole SYNs without an MSS
// option). In PREROUTING of packets to fw and through it (whose walk
// holds the TTL after the forwarding's decrement), mangle FORWARD,
// mangle OUTPUT and filter INPUT, both families: each firewall must show
// the same lines, packets and counters.
func TestLogAfterRewrite(t *testing.T) {
	eachFamily(t, logAfterRewrite)
}

func logAfterRewrite(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	ttl := "TTL --ttl"
	if fam == ir.IPv6 {
		ttl = "HL --hl"
	}
	rules := fmt.Sprintf("*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A PREROUTING -p udp --dport 4301 -j %[1]s-set 20\n"+
		"-A PREROUTING -p udp --dport 4301 -j DSCP --set-dscp 4\n"+
		"-A PREROUTING -p udp --dport 4301 -j LOG --log-prefix \"pre \"\n"+
		"-A FORWARD -p udp -j %[1]s-dec 2\n"+
		"-A FORWARD -p udp -j LOG --log-prefix \"fwd \"\n"+
		"-A OUTPUT -p udp -j %[1]s-set 7\n"+
		"-A OUTPUT -p udp -j DSCP --set-dscp 10\n"+
		"-A OUTPUT -p udp -j LOG --log-prefix \"out \"\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A INPUT -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1000\n"+
		"-A INPUT -p tcp -j LOG --log-prefix \"in \"\nCOMMIT\n", ttl)
	eth := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}
	udp := func(src, dst netip.Addr, dport uint16) []byte {
		return nettest.IPPacket(src, dst, nettest.UDP{SrcPort: 4300, DstPort: dport, Payload: []byte("rewritten")})
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		{From: difftest.FromGen, Path: difftest.PathInput, Note: "udp to fw",
			Frames: [][]byte{eth.Frame(udp(p.Gen, p.FwIn, 4301))}},
		{From: difftest.FromGen, Path: difftest.PathForward, Note: "udp through fw",
			Frames: [][]byte{eth.Frame(udp(p.Gen, p.Sink, 4301))}},
		{From: difftest.FromGen, Path: difftest.PathForward, Note: "udp through fw, other port",
			Frames: [][]byte{eth.Frame(udp(p.Gen, p.Sink, 4302))}},
		{From: difftest.FromFw, Path: difftest.PathOutput, Note: "fw's udp",
			Frames: [][]byte{udp(p.FwOut, p.Sink, 4303)}},
		{From: difftest.FromGen, Path: difftest.PathInput, Note: "bare SYN to fw",
			Frames: [][]byte{eth.Frame(nettest.IPPacket(p.Gen, p.FwIn, nettest.TCP{SrcPort: 4300, DstPort: 4304, Flags: nettest.TCPSyn, Window: 512}))}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	o, err := s.Check(ctx, difftest.Case{Name: "LOG after rewrites", Ruleset: rules, Corpus: corpus}, difftest.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Failed() || o.Result.Lossy != "" || o.Result.Rejected != "" {
		t.Fatalf("%s\nlossy: %q rejected: %q", o.Report(), o.Result.Lossy, o.Result.Rejected)
	}
	t.Log(o.Report())
}
