package compiler

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatReachChecksAgreesWithWalk compares the one-pass check of the NAT
// rules the nat chains reach (natReachChecks) with the context-by-context
// walk (checkNatWalk) on random nat tables: user chains jumping and going
// to one another (and to chains no built-in chain reaches), NAT targets
// each context accepts or refuses, in both families.
func TestNatReachChecksAgreesWithWalk(t *testing.T) {
	rng := rand.New(rand.NewSource(19))
	builtins := []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}
	targets := []string{
		"-p tcp -j DNAT --to-destination 10.0.0.1",
		"-j MASQUERADE",
		"-p udp -j REDIRECT",
		"-o eth0 -j SNAT --to-source 10.0.0.2",
		"-p dccp -j DNAT --to-destination 10.0.0.3",
		"-j ACCEPT",
		"-p tcp -j ACCEPT",
	}
	const chains = 6
	failed, passed := 0, 0
	for round := 0; round < 400; round++ {
		fam := ir.IPv4
		if round%5 == 4 {
			fam = ir.IPv6
		}
		var cmds []string
		for i := 0; i < chains; i++ {
			cmds = append(cmds, fmt.Sprintf("-t nat -N C%d", i))
		}
		// Built-in chains jump anywhere; C_i only to C_j with j > i (no loops).
		for n := rng.Intn(14); n > 0; n-- {
			from := rng.Intn(len(builtins) + chains)
			var chain string
			lowest := 0
			if from < len(builtins) {
				chain = builtins[from]
			} else {
				lowest = from - len(builtins) + 1
				chain = fmt.Sprintf("C%d", lowest-1)
			}
			rule := targets[rng.Intn(len(targets))]
			if fam == ir.IPv6 && rng.Intn(2) == 0 {
				rule = "-j ACCEPT"
			}
			if lowest < chains && rng.Intn(2) == 0 {
				verb := []string{"-j", "-g"}[rng.Intn(2)]
				rule = fmt.Sprintf("%s C%d", verb, lowest+rng.Intn(chains-lowest))
			}
			cmds = append(cmds, fmt.Sprintf("-t nat -A %s %s", chain, rule))
		}
		rs := applyAccepted(fam, cmds)
		nat := rs.TableByName(ir.TableNat)
		if nat == nil {
			t.Fatalf("round %d: no nat table", round)
		}
		walkErr := checkNatWalk(nat, fam)
		if got := natReachChecks(nat, fam); got != (walkErr == nil) {
			t.Fatalf("round %d: one pass says %v, the walk %v\n%q", round, got, walkErr, cmds)
		}
		if walkErr != nil {
			failed++
		} else {
			passed++
		}
	}
	if failed == 0 || passed == 0 {
		t.Fatalf("random tables did not cover both outcomes: %d refused, %d passed", failed, passed)
	}
}

// applyAccepted applies the commands iptables accepts to a new ruleset and
// skips the others (a target the built-in chain's hook refuses).
func applyAccepted(fam ir.Family, cmds []string) *ir.Ruleset {
	rs := ir.NewRuleset(fam)
	for _, c := range cmds {
		words, err := iptables.Tokenize(c)
		if err != nil {
			continue
		}
		cmd, err := iptables.ParseCommand(fam, words)
		if err != nil {
			continue
		}
		_, _ = cmd.Apply(rs) // refused: the ruleset stays as it was
	}
	return rs
}
