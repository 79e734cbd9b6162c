package compiler

import (
	"runtime"
	"slices"
	"sync"

	"github.com/xfw-dev/xfw/internal/ir"
)

// jumpIndex holds the chain each jump and goto of a ruleset names,
// resolved once by name (resolveJumps) and shared by the nat check
// (natReachChecks) and flattening (precomputeTerms), which looked every
// target up by name each (kube-proxy's 10K services: about 230,000 jumps,
// each name hashed in both). Read only once made.
type jumpIndex struct {
	tables map[*ir.Ruleset]*tableJumps
}

// tableJumps are one table's resolved jumps: targets[i][j] is the index
// in chains of the chain rule j of chains[i] jumps or goes to, noJump when
// the rule is neither or names no chain of the table (the first of equal
// names, as chainIndexOf finds it). chains are the table's chains when
// resolved (a copy): a table whose chains changed since is not covered
// (of), and a rule changed since is found by target's check.
type tableJumps struct {
	chains  []*ir.Chain
	targets [][]int32
}

// noJump is a tableJumps target of a rule that names no chain.
const noJump = -1

// resolveJumps resolves the jumps of rs's tables, on every CPU when
// they are many.
func resolveJumps(rs *ir.Ruleset) *jumpIndex {
	ji := &jumpIndex{tables: map[*ir.Ruleset]*tableJumps{}}
	type job struct {
		tj    *tableJumps
		index map[string]int32
		chain int
		rules []*ir.Rule
	}
	var jobs []job
	total := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		if _, done := ji.tables[t]; done {
			continue
		}
		tj := &tableJumps{
			chains:  slices.Clone(t.Chains),
			targets: make([][]int32, len(t.Chains)),
		}
		ji.tables[t] = tj
		index := make(map[string]int32, len(t.Chains))
		for i, c := range t.Chains {
			if _, dup := index[c.Name]; !dup {
				index[c.Name] = int32(i)
			}
			total += len(c.Rules)
		}
		// One allocation for the table's targets, cut per chain.
		n := 0
		for _, c := range t.Chains {
			n += len(c.Rules)
		}
		flat := make([]int32, n)
		for i, c := range t.Chains {
			tj.targets[i], flat = flat[:len(c.Rules):len(c.Rules)], flat[len(c.Rules):]
			jobs = append(jobs, job{tj, index, i, c.Rules})
		}
	}
	resolve := func(jobs []job) {
		for _, jb := range jobs {
			out := jb.tj.targets[jb.chain]
			for j, r := range jb.rules {
				out[j] = noJump
				if r.Target.Kind != ir.TargetJump && r.Target.Kind != ir.TargetGoto {
					continue
				}
				if t, ok := jb.index[r.Target.Chain]; ok {
					out[j] = t
				}
			}
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || total < minParallelRules {
		resolve(jobs)
		return ji
	}
	// Split the chains into runs of about equal rule counts.
	per := (total + workers - 1) / workers
	var wg sync.WaitGroup
	lo, rules := 0, 0
	for k, jb := range jobs {
		rules += len(jb.rules)
		if rules < per && k < len(jobs)-1 {
			continue
		}
		part := jobs[lo : k+1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			resolve(part)
		}()
		lo, rules = k+1, 0
	}
	wg.Wait()
	return ji
}

// of returns table t's resolved jumps, nil if ji has none or t's chains
// changed since they were resolved.
func (ji *jumpIndex) of(t *ir.Ruleset) *tableJumps {
	if ji == nil {
		return nil
	}
	tj := ji.tables[t]
	if tj == nil || !slices.Equal(tj.chains, t.Chains) {
		return nil
	}
	return tj
}

// target returns the index in the table's chains of the chain rule j (r)
// of chain i jumps or goes to, noJump when r does neither; ok false when
// not known (r changed since, or its chain named no chain then): the
// caller looks the name up.
func (tj *tableJumps) target(i, j int, r *ir.Rule) (k int32, ok bool) {
	if i >= len(tj.targets) || j >= len(tj.targets[i]) {
		return noJump, false
	}
	jump := r.Target.Kind == ir.TargetJump || r.Target.Kind == ir.TargetGoto
	k = tj.targets[i][j]
	if k == noJump {
		return noJump, !jump
	}
	if !jump || tj.chains[k].Name != r.Target.Chain {
		return noJump, false
	}
	return k, true
}
