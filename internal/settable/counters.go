package settable

import (
	"fmt"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// AddCounts adds counts the data plane kept to the members of ss they
// belong to (members since deleted are skipped), reporting whether any
// changed.
func AddCounts(ss *ipset.Sets, vals []dataplane.SetCounterValue) (bool, error) {
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

// TakeCounts moves the running generations' set counts into ss (a Clone
// of the loaded sets, as ipset.Store.Commit wants it), reporting whether
// any member changed.
func TakeCounts(ss *ipset.Sets) (bool, error) {
	var vals []dataplane.SetCounterValue
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		v, err := dataplane.TakeSetCounters(fam)
		if err != nil {
			return false, fmt.Errorf("read the %s set counters: %w", fam, err)
		}
		vals = append(vals, v...)
	}
	return AddCounts(ss, vals)
}
