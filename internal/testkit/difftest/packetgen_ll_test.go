package difftest

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNoResetToLinkLocal checks that an IPv6 ruleset that may REJECT with a
// TCP reset gets no TCP probe from a link-local source (the kernel's reset
// to one goes by whichever fe80::/64 route it picks: docs/difftest.md),
// and that other rulesets still get some.
func TestNoResetToLinkLocal(t *testing.T) {
	plan := NewPlan(ir.IPv6, DefaultSubnet)
	const head = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	count := func(ruleset string) int {
		c, err := GenerateCorpus(139, plan, ruleset, 4000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range c.Probes {
			pkt := p.decode(p.Frames[0])
			if p.From != FromFw && pkt != nil && pkt.Src.IsLinkLocalUnicast() && pkt.Protocol == 6 {
				n++
			}
		}
		return n
	}
	if n := count(head + "-A INPUT -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n"); n != 0 {
		t.Errorf("with tcp-reset: %d TCP probes from a link-local source", n)
	}
	if n := count(head + "-A INPUT -p tcp -j REJECT\nCOMMIT\n"); n == 0 {
		t.Error("without tcp-reset: no TCP probe from a link-local source (the test sees none)")
	}
}
