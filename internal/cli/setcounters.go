package cli

import (
	"fmt"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// Set entry counters (sets created with "counters"). The data plane counts
// in each generation from zero (dataplane.SetCounterID); the stored sets
// hold everything counted before. The running counts reach the stored sets
// when an `xfw ipset` command loads them (namespaceStore.Load takes them,
// dataplane.TakeSetCounters, so the command lists, saves and changes the
// true counts), and when a new generation no longer counts an entry
// (dataplane.Update.SetLeftover). A new generation takes over the counts of
// the one it replaces (dataplane.Apply).

// setCounts returns the compiler's Options.SetCounts for the sets sets
// serves: a set match updates set entry counters when "! --update-counters"
// is absent and its set has counters, or is a list:set with members that
// have counters (unless "! --update-subcounters").
func setCounts(sets *ipsetLookup) func(m *ir.SetMatch) bool {
	return func(m *ir.SetMatch) bool {
		if m.SkipCounterUpdate {
			return false
		}
		s, err := sets.set(m.Name)
		if err != nil {
			return false
		}
		if s.Options.Counters {
			return true
		}
		if s.Type != ipset.ListSet || m.SkipSubcounterUpdate {
			return false
		}
		for _, e := range s.Entries() {
			if ms, err := sets.set(e.SetName); err == nil && ms.Options.Counters {
				return true
			}
		}
		return false
	}
}

// addSetCounts adds counts the data plane kept to the members of ss they
// belong to (members since deleted are skipped), reporting whether any
// changed.
func addSetCounts(ss *ipset.Sets, vals []dataplane.SetCounterValue) (bool, error) {
	if len(vals) == 0 {
		return false, nil
	}
	clk, err := nowClock()
	if err != nil {
		return false, err
	}
	// The namespace's interfaces resolve hash:net,iface entries' keys.
	ifaces, err := dataplane.CompilerInterfaces()
	if err != nil {
		return false, err
	}
	changed := false
	elems := map[string]map[dataplane.SetHashKey]ipset.Elem{}
	for _, v := range vals {
		s := ss.Get(v.ID.Set)
		if s == nil || !s.Options.Counters {
			continue
		}
		if v.ID.Member != "" {
			changed = s.AddCounters(ipset.Elem{SetName: v.ID.Member}, v.Packets, v.Bytes) || changed
			continue
		}
		byKey, ok := elems[s.Name]
		if !ok {
			byKey = setEntryKeys(s, ifaces, clk)
			elems[s.Name] = byKey
		}
		if e, ok := byKey[v.ID.Key]; ok {
			changed = s.AddCounters(e, v.Packets, v.Bytes) || changed
		}
	}
	return changed, nil
}

// setEntryKeys maps the hash table keys of s's entries (as buildSetTable
// makes them) to the entries.
func setEntryKeys(s *ipset.Set, ifaces []compiler.Interface, clk setClock) map[dataplane.SetHashKey]ipset.Elem {
	out := make(map[dataplane.SetHashKey]ipset.Elem, s.Len())
	kind := setHashKind(s.Type)
	s.All(func(e *ipset.Entry) bool {
		for _, h := range setHashEntries(kind, e, time.Time{}, ifaces, clk) {
			out[h.Key] = e.Elem
		}
		return true
	})
	return out
}

// takeSetCounts moves the running generations' set counts into ss (a
// Clone of the loaded sets, as Commit wants it), reporting whether any
// member changed.
func takeSetCounts(ss *ipset.Sets) (bool, error) {
	var vals []dataplane.SetCounterValue
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		v, err := dataplane.TakeSetCounters(fam)
		if err != nil {
			return false, fmt.Errorf("read the %s set counters: %w", fam, err)
		}
		vals = append(vals, v...)
	}
	return addSetCounts(ss, vals)
}

// foldSetCounters keeps counts a replaced generation handed back
// (dataplane.Update.SetLeftover) in the stored sets.
func foldSetCounters(vals []dataplane.SetCounterValue, sets *ipsetLookup) error {
	if len(vals) == 0 {
		return nil
	}
	store, err := newIpsetStore()
	if err != nil {
		return err
	}
	old, err := store.Load()
	if err != nil {
		return fmt.Errorf("keep set counters: %w", err)
	}
	nw := old.Clone()
	changed, err := addSetCounts(nw, vals)
	if err != nil || !changed {
		return err
	}
	if err := store.Commit(old, nw); err != nil {
		return fmt.Errorf("keep set counters: %w", err)
	}
	if sets != nil && sets.loaded {
		sets.sets = nw
	}
	return nil
}
