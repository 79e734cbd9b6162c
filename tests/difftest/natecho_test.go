package difftest_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestNATSnatRangeKeepsEchoSource compares an SNAT to an address range
// holding the source of fw's own echo request: the kernel keeps the
// source (get_unique_tuple: the original tuple in the range and free is
// kept, an echo's identifier standing for its port) where xfw gave the
// echo the range's hashed address (difftest, the rate-aware campaign's
// nat rulesets). Each firewall must show each request at sink, from
// fw's own address.
func TestNATSnatRangeKeepsEchoSource(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	last := p.FwOut.As4()
	last[3] += 2
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A POSTROUTING -s %s -p icmp -j SNAT --to-source %s-%s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT\nCOMMIT\n", p.FwOut, p.FwOut, netip.AddrFrom4(last))
	var probes []difftest.Probe
	// Echoes to sink from fw's address (the range's hash picks the same
	// address for each: it reads the addresses only).
	for id := uint16(1); id <= 4; id++ {
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput, KeepL4: true,
			Frames: [][]byte{nettest.EchoRequest(p.FwOut, p.Sink, id, 1, []byte("fw's own echo"))},
			Note:   fmt.Sprintf("fw's echo %d", id)})
	}
	checkObserved(t, s, difftest.Case{Name: "SNAT range keeps the echo's source", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{4, 4}, "each echo at sink from fw's own address")
}
