package cli

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/settable"
)

// Set entry counters (sets created with "counters"): how counts move
// between the data plane and the stored sets is told in settable's package
// comment. Here, the compiler learns which set matches count (setCounts),
// an `xfw ipset` command takes the running counts when it loads the sets
// (namespaceStore.Load, settable.TakeCounts), and the counts a replaced
// generation hands back are kept in the stored sets (foldSetCounters).

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
	changed, err := settable.AddCounts(nw, vals)
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
