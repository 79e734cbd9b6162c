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

// tableJumps are one table's resolved jumps: the target of rule j of
// chains[i] is targets[start[i]+j], the index in chains of the chain the
// rule jumps or goes to, noJump when the rule is neither or names no
// chain of the table (the first of equal names, as chainIndexOf finds
// it). chains are the table's chains when resolved (a copy): a table
// whose chains changed since is not covered (of), and a rule changed
// since is found by target's check. index maps the chains' names to
// their indexes (the first of equal names).
type tableJumps struct {
	chains  []*ir.Chain
	start   []int32
	targets []int32
	index   map[string]int32
}

// noJump is a tableJumps target of a rule that names no chain.
const noJump = -1

// resolveJumps resolves the jumps of rs's tables, on every CPU when
// they are many.
func resolveJumps(rs *ir.Ruleset) *jumpIndex {
	ji := &jumpIndex{tables: map[*ir.Ruleset]*tableJumps{}}
	// A part is chains [lo, hi) of a table, resolved by one worker.
	type part struct {
		tj     *tableJumps
		lo, hi int
	}
	var tables []*tableJumps
	total := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		if _, done := ji.tables[t]; done {
			continue
		}
		tj := &tableJumps{
			chains: slices.Clone(t.Chains),
			start:  make([]int32, len(t.Chains)+1),
			index:  make(map[string]int32, len(t.Chains)),
		}
		ji.tables[t] = tj
		n := 0
		for i, c := range t.Chains {
			if _, dup := tj.index[c.Name]; !dup {
				tj.index[c.Name] = int32(i)
			}
			tj.start[i] = int32(n)
			n += len(c.Rules)
		}
		tj.start[len(t.Chains)] = int32(n)
		tj.targets = make([]int32, n)
		total += n
		tables = append(tables, tj)
	}
	resolve := func(p part) {
		for i := p.lo; i < p.hi; i++ {
			out := p.tj.targets[p.tj.start[i]:p.tj.start[i+1]]
			for j, r := range p.tj.chains[i].Rules[:len(out)] {
				out[j] = noJump
				if !r.Target.Jumps() {
					continue
				}
				if t, ok := p.tj.index[r.Target.Chain]; ok {
					out[j] = t
				}
			}
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || total < minParallelRules {
		for _, tj := range tables {
			resolve(part{tj, 0, len(tj.chains)})
		}
		return ji
	}
	// Each table cut into runs of chains of about total/workers rules.
	per := int32((total + workers - 1) / workers)
	var wg sync.WaitGroup
	for _, tj := range tables {
		lo := 0
		for i := range tj.chains {
			if tj.start[i+1]-tj.start[lo] < per && i < len(tj.chains)-1 {
				continue
			}
			wg.Add(1)
			go func(p part) {
				defer wg.Done()
				resolve(p)
			}(part{tj, lo, i + 1})
			lo = i + 1
		}
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
	if i >= len(tj.chains) || j >= int(tj.start[i+1]-tj.start[i]) {
		return noJump, false
	}
	jump := r.Target.Jumps()
	k = tj.targets[int(tj.start[i])+j]
	if k == noJump {
		return noJump, !jump
	}
	if !jump || tj.chains[k].Name != r.Target.Chain {
		return noJump, false
	}
	return k, true
}
