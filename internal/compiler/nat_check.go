package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// natChainContexts are the nat table's built-in chains and the context a
// NAT rule they reach is evaluated in.
var natChainContexts = []struct {
	chain string
	at    natContext
}{
	{ir.ChainPrerouting, natContext{prerouting: true}},
	{ir.ChainInput, natContext{input: true}},
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
// ji, when not nil, holds the jumps' targets resolved ahead.
func checkNatReach(rs *ir.Ruleset, ji *jumpIndex) error {
	nat := rs.TableByName(ir.TableNat)
	if nat == nil {
		return nil
	}
	if natReachChecks(nat, rs.Family, ji.of(nat)) {
		return nil
	}
	// Some rule fails: the walk names the first failure as it always has
	// (context by context, depth first).
	return checkNatWalk(nat, rs.Family)
}

// checkNatWalk walks the chains each of the nat table's built-in chains
// reaches, context by context, and returns the first failing rule's
// refusal.
func checkNatWalk(nat *ir.Ruleset, fam ir.Family) error {
	for _, cc := range natChainContexts {
		seen := map[string]bool{}
		if err := checkNatChain(nat, fam, cc.at, cc.chain, seen); err != nil {
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

// natReachChecks reports whether every NAT rule the nat table's built-in
// chains reach passes checkNatRule in every context reaching it: the same
// (context, rule) pairs as checkNatChain's walks, found in one pass. Each
// jump's target is looked up once (not once per context), and the
// contexts reaching a chain propagate as a bit mask over chain indexes.
// jumps, when not nil, are nat's jumps resolved ahead (resolveJumps): a
// jump they know is not looked up, and their index of the chains' names
// is used.
func natReachChecks(nat *ir.Ruleset, fam ir.Family, jumps *tableJumps) bool {
	var index map[string]int32
	if jumps != nil {
		index = jumps.index
	} else {
		index = make(map[string]int32, len(nat.Chains))
		for i, c := range nat.Chains {
			index[c.Name] = int32(i)
		}
	}
	reached := make([]uint8, len(nat.Chains)) // bit k: natChainContexts[k]
	type visit struct {
		chain int32
		mask  uint8
	}
	var stack []visit
	for k, cc := range natChainContexts {
		if i, ok := index[cc.chain]; ok {
			stack = append(stack, visit{i, 1 << k})
		}
	}
	targets := make([][]int32, len(nat.Chains)) // resolved once per chain
	resolved := make([]bool, len(nat.Chains))
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		fresh := v.mask &^ reached[v.chain]
		if fresh == 0 {
			continue
		}
		reached[v.chain] |= fresh
		if !resolved[v.chain] {
			targets[v.chain], resolved[v.chain] = natJumpTargets(nat.Chains[v.chain], v.chain, index, jumps), true
		}
		for _, t := range targets[v.chain] {
			stack = append(stack, visit{t, fresh})
		}
	}
	for i, c := range nat.Chains {
		if reached[i] == 0 {
			continue
		}
		for _, r := range c.Rules {
			if _, ok := natTargetNames[r.Target.Kind]; !ok {
				continue
			}
			for k, cc := range natChainContexts {
				if reached[i]&(1<<k) != 0 && checkNatRule(fam, cc.at, r) != nil {
					return false
				}
			}
		}
	}
	return true
}

// natJumpTargets returns the indexes of the chains c's jumps and gotos
// name (a missing chain is none: checkNatChain skips it too); c is
// chain i, its jumps found in jumps when they know them (nil: none).
func natJumpTargets(c *ir.Chain, i int32, index map[string]int32, jumps *tableJumps) []int32 {
	var out []int32
	for j, r := range c.Rules {
		if !r.Target.Jumps() {
			continue
		}
		if jumps != nil {
			if t, ok := jumps.target(int(i), j, r); ok {
				if t != noJump {
					out = append(out, t)
				}
				continue
			}
		}
		if t, ok := index[r.Target.Chain]; ok {
			out = append(out, t)
		}
	}
	return out
}
