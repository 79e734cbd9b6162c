package difftest_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRejectOutputErrorSource compares the ICMP error REJECT sends in
// OUTPUT about fw's own echo request, as it passes OUTPUT on its way to
// fw's sockets: the kernel's comes from fw's own address (icmp_send routes
// it to the offending packet's source, the local route's preferred
// source) and carries the echo's connection (RELATED), so rules matching
// fw's address, or its state, meet it: here the first rule takes it out
// of OUTPUT by a goto to an empty chain, and it reaches fw's sockets.
// xfw's came from the echo's destination, outside 0.0.0.0/1, met the
// REJECT rule and was dropped (difftest conntrack seed 2). For an echo
// to fw's own other address the kernel's error comes from that address.
// Each firewall must deliver each error to fw's sockets.
func TestRejectOutputErrorSource(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	far := p.FarGen.Addr().Next() // beyond gen: outside 0.0.0.0/1
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:zone-in - [0:0]\n" +
		"-A OUTPUT -s 0.0.0.0/1 -m state ! --state NEW,UNTRACKED -g zone-in\n" +
		"-A OUTPUT -p icmp -m icmp ! --icmp-type 0/0 -j REJECT --reject-with icmp-host-prohibited\n" +
		"-A INPUT -m state --state INVALID -j DROP\nCOMMIT\n"
	// To a host beyond gen, and to fw's other address (through lo: the
	// error then comes from that address, the echo's destination).
	var probes []difftest.Probe
	for i, to := range []netip.Addr{far, p.FwIn} {
		echo := nettest.EchoRequest(p.FwOut, to, uint16(i), 1, []byte("fw's own echo"))
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{echo}, Note: fmt.Sprintf("fw's echo to %s", to)})
	}
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's error to fw", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2, 2}, "each error at fw's sockets")
}
