package ir

import (
	"runtime"
	"sync"
	"weak"
)

// chainIndex maps the names of a ruleset's chains to their positions in
// Ruleset.Chains, as the slice was when last synced: its length and its
// first and last elements identify that slice. Chains are added and
// removed by reassigning Chains (append, or a new slice), which changes
// the length or the last element; names change only through RenameChain,
// which drops the index; a copy `*rs = *other` brings other's slice, which
// the next lookup finds changed. Appended chains are added to the index, any
// other change rebuilds it. A mutex orders the lookups of concurrent
// readers.
type chainIndex struct {
	mu          sync.Mutex
	n           int
	first, last *Chain
	byName      map[string]int
}

// lookup returns the chain of chains (rs.Chains) called name, or nil.
func (idx *chainIndex) lookup(chains []*Chain, name string) *Chain {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	idx.sync(chains)
	i, ok := idx.byName[name]
	if !ok {
		return nil
	}
	if c := chains[i]; c.Name == name {
		return c
	}
	// Moved within the slice: index it again.
	idx.rebuild(chains)
	if i, ok := idx.byName[name]; ok {
		return chains[i]
	}
	return nil
}

// sync brings the index up to date with chains.
func (idx *chainIndex) sync(chains []*Chain) {
	n := len(chains)
	switch {
	case idx.byName == nil:
		idx.rebuild(chains)
	case n == idx.n && (n == 0 || (idx.first == chains[0] && idx.last == chains[n-1])):
	case idx.n > 0 && n > idx.n && idx.first == chains[0] && idx.last == chains[idx.n-1]:
		idx.add(chains, idx.n)
	default:
		idx.rebuild(chains)
	}
}

// rebuild indexes chains from scratch.
func (idx *chainIndex) rebuild(chains []*Chain) {
	idx.byName = make(map[string]int, len(chains))
	idx.add(chains, 0)
}

// add indexes chains[from:]; the first of equal names keeps its place, as
// a scan of the slice would find it.
func (idx *chainIndex) add(chains []*Chain, from int) {
	for i := from; i < len(chains); i++ {
		if _, dup := idx.byName[chains[i].Name]; !dup {
			idx.byName[chains[i].Name] = i
		}
	}
	idx.n = len(chains)
	idx.first, idx.last = nil, nil
	if idx.n > 0 {
		idx.first, idx.last = chains[0], chains[idx.n-1]
	}
}

// reset drops the index; the next lookup builds it again.
func (idx *chainIndex) reset() {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	idx.byName = nil
}

// chainIndexes holds the rulesets' indexes outside the Ruleset, which
// stays a plain value (compared with reflect.DeepEqual, copied with *rs =
// *other): weak keys, each dropped when its ruleset is collected.
var chainIndexes sync.Map // weak.Pointer[Ruleset] → *chainIndex

// indexOf returns rs's chain index, a new one on first use.
func indexOf(rs *Ruleset) *chainIndex {
	key := weak.Make(rs)
	if v, ok := chainIndexes.Load(key); ok {
		return v.(*chainIndex)
	}
	v, loaded := chainIndexes.LoadOrStore(key, &chainIndex{})
	if !loaded {
		runtime.AddCleanup(rs, func(k weak.Pointer[Ruleset]) { chainIndexes.Delete(k) }, key)
	}
	return v.(*chainIndex)
}
