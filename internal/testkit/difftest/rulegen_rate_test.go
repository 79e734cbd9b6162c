package difftest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestRateRulesAndBursts checks that the random rulesets carry rate rules
// (limit and hashlimit, first in INPUT, FORWARD and OUTPUT) and that the
// corpora aim bursts at each: more packets than the rule's burst, per key,
// through fw for FORWARD's, from fw for OUTPUT's.
func TestRateRulesAndBursts(t *testing.T) {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		plan := NewPlan(fam, DefaultSubnet)
		seen := map[string]bool{}
		for seed := int64(1); seed <= 20; seed++ {
			text := GenerateRuleset(seed, plan, GenOptions{})
			targets := rateTargets(text)
			for _, tg := range targets {
				seen[string(tg.path)] = true
			}
			for _, m := range []string{"-m limit", "-m hashlimit", "--hashlimit-above", "--hashlimit-srcmask"} {
				if strings.Contains(text, m) {
					seen[m] = true
				}
			}
			c, err := GenerateCorpus(seed, plan, text, 50)
			if err != nil {
				t.Fatalf("%s seed %d: %v", fam, seed, err)
			}
			bursts := map[string]int{}
			paths := map[string]Path{}     // by "port N"
			origins := map[string]Origin{} // by "port N"
			for _, p := range c.Probes {
				if strings.HasPrefix(p.Note, "rate burst") {
					f := strings.Fields(p.Note)
					bursts[strings.Join(f[3:], " ")]++
					paths[strings.Join(f[5:], " ")] = p.Path
					origins[strings.Join(f[5:], " ")] = p.From
				}
			}
			for _, tg := range targets {
				n := 0
				for key, k := range bursts {
					if strings.HasSuffix(key, fmt.Sprintf(" port %d", tg.port)) {
						if k <= tg.burst {
							t.Errorf("%s seed %d: burst %q of %d packets, rule's burst %d", fam, seed, key, k, tg.burst)
						}
						n++
					}
				}
				if n < 2 {
					t.Errorf("%s seed %d: port %d gets %d keys' bursts, want 2 or more", fam, seed, tg.port, n)
				}
				if got := paths[fmt.Sprintf("port %d", tg.port)]; got != tg.path {
					t.Errorf("%s seed %d: bursts to port %d take path %q, want %q", fam, seed, tg.port, got, tg.path)
				}
				wantFrom := FromGen
				if tg.path == PathOutput {
					wantFrom = FromFw
				}
				if got := origins[fmt.Sprintf("port %d", tg.port)]; got != wantFrom {
					t.Errorf("%s seed %d: bursts to port %d come from %q, want %q", fam, seed, tg.port, got, wantFrom)
				}
			}
		}
		for _, m := range []string{"-m limit", "-m hashlimit", "--hashlimit-above", "--hashlimit-srcmask", "input", "forward", "output"} {
			if !seen[m] {
				t.Errorf("%s: no ruleset of seeds 1-20 has %s", fam, m)
			}
		}
	}
}
