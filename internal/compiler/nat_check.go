package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// natChainContexts are the nat table's built-in chains and the context a
// NAT rule they reach is evaluated in (nat INPUT: none the data plane
// translates in).
var natChainContexts = []struct {
	chain string
	at    natContext
}{
	{ir.ChainPrerouting, natContext{prerouting: true}},
	{ir.ChainInput, natContext{}},
	{ir.ChainOutput, natContext{output: true}},
	{ir.ChainPostrouting, natContext{postrouting: true}},
}

// checkNatReach refuses, before flattening, every NAT rule the data
// plane cannot translate in a chain one of the nat table's built-in
// chains reaches by its jumps and gotos, whatever their conditions. The
// flattener meets a rule only through a term that can match: a rule
// behind `-o eth0` before eth0 exists (or in a chain only such a rule
// jumps to) would load, and the compile eth0's appearance triggers would
// refuse it after the command had succeeded.
func checkNatReach(rs *ir.Ruleset) error {
	nat := rs.TableByName(ir.TableNat)
	if nat == nil {
		return nil
	}
	for _, cc := range natChainContexts {
		seen := map[string]bool{}
		if err := checkNatChain(nat, rs.Family, cc.at, cc.chain, seen); err != nil {
			return fmt.Errorf("table %s: %w", ir.TableNat, err)
		}
	}
	return nil
}

// checkNatChain checks the NAT rules of chain name and of the chains it
// reaches (seen: the chains checked already; the kernel refuses loops).
func checkNatChain(nat *ir.Ruleset, fam ir.Family, at natContext, name string, seen map[string]bool) error {
	c := nat.Chain(name)
	if c == nil || seen[name] {
		return nil
	}
	seen[name] = true
	for i, r := range c.Rules {
		switch r.Target.Kind {
		case ir.TargetJump, ir.TargetGoto:
			if err := checkNatChain(nat, fam, at, r.Target.Chain, seen); err != nil {
				return err
			}
		default:
			if _, ok := natTargetNames[r.Target.Kind]; !ok {
				continue
			}
			if err := checkNatRule(fam, at, r); err != nil {
				return fmt.Errorf("chain %s rule %d: %w", name, i+1, err)
			}
		}
	}
	return nil
}
