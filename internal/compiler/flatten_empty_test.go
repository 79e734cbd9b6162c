package compiler

import (
	"math/rand"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestEmptyChainJumps checks jumps and gotos to chains without rules,
// which compile to counted CONTINUEs (emptyJump), against the reference
// interpreter: the rules each packet meets and counts, and the verdict,
// from base chains and from a user chain.
func TestEmptyChainJumps(t *testing.T) {
	rulesets := [][]string{
		{"-N E", "-A INPUT -p tcp -j E", "-A INPUT -p tcp -j DROP", "-A FORWARD -p udp -g E", "-A FORWARD -j DROP"},
		{"-N E", "-N U", "-A U -p tcp -j E", "-A U -p udp -g E", "-A U -j REJECT", "-A INPUT -j U", "-A INPUT -j DROP",
			"-A OUTPUT -p icmp -g U", "-A OUTPUT -j ACCEPT"},
		{"-N E", "-N F", "-A INPUT -j E", "-A INPUT -j F", "-A F -j E", "-A F -p tcp -j ACCEPT", "-P INPUT DROP"},
	}
	rng := rand.New(rand.NewSource(7))
	for i, rules := range rulesets {
		for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
			rs := parseRuleset(t, fam, rules...)
			g, err := Compile(rs, Options{Interfaces: testIfaces})
			if err != nil {
				t.Fatalf("ruleset %d: %v", i, err)
			}
			for _, e := range g.Entries {
				if e.Action == ActCall && e.Next < uint32(len(g.Entries)) && g.Entries[e.Next].Action == ActReturn {
					t.Errorf("ruleset %d: a CALL of an empty region at %d", i, e.Next)
				}
			}
			checkPackets(t, rng, i, rs, g, 200)
		}
	}
}
