package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// snapshot is what one scrape read: the metrics are rendered from it
// (families.go) once the reading is done.
type snapshot struct {
	// rulesets are the running rulesets with their counters, IPv4 then
	// IPv6: an empty filter table (policies ACCEPT, counters zero) for a
	// family without one, as `iptables -L` shows it.
	rulesets []*ir.Ruleset
	// status is what xfw has loaded and attached.
	status *dataplane.NamespaceStatus
	// conntrack counts the live connections by family; nil when the data
	// plane has no connection tables (xfw not loaded, or a build without
	// them).
	conntrack map[ir.Family]int
	// ctStats are the connection tracker's counters; nil without them.
	ctStats *dataplane.CTStats
	// sets are the namespace's sets, by name.
	sets []setInfo
	// events are the agent's attach events.
	events []eventCount
	// guard is what the agent's guard dropped; nil without a guard.
	guard *guardDrops
}

// guardDrops are the guard's drop counts at each of its hooks.
type guardDrops struct{ in, out uint64 }

// setInfo is what the metrics say of one set.
type setInfo struct {
	name, typ string
	// entries is the number of members; references, the rules and
	// list:set sets using the set (ipset list's "References").
	entries, references int
}

// addressFamilies are the address families xfw filters, in the order the
// metrics list them.
var addressFamilies = []ir.Family{ir.IPv4, ir.IPv6}

// readDataPlane reads the current network namespace's data plane, under
// c.Lock when set.
func (c *Collector) readDataPlane() (*snapshot, error) {
	if c.Lock != nil {
		unlock, err := c.Lock()
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	st, err := dataplane.Status()
	if err != nil {
		return nil, fmt.Errorf("read what xfw has loaded: %w", err)
	}
	snap := &snapshot{status: st}
	for _, fam := range addressFamilies {
		rs, _, err := dataplane.RunningRuleset(fam)
		if err != nil {
			return nil, fmt.Errorf("read the %s ruleset: %w", fam, err)
		}
		snap.rulesets = append(snap.rulesets, rs)
	}
	if st.Loaded {
		if snap.conntrack, snap.ctStats, err = readConnections(); err != nil {
			return nil, err
		}
	}
	if snap.sets, err = readSets(snap.rulesets); err != nil {
		return nil, err
	}
	return snap, nil
}

// readConnections counts the live connections of the data plane's
// connection tables by family (as `xfw conntrack -C` counts them all) and
// reads the tracker's counters; nil when the running build has no tables
// (or no counters).
func readConnections() (map[ir.Family]int, *dataplane.CTStats, error) {
	t, err := dataplane.OpenCT()
	if errors.Is(err, dataplane.ErrNoConntrack) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open the connection tables: %w", err)
	}
	defer t.Close()
	var stats *dataplane.CTStats
	switch st, err := t.Stats(); {
	case err == nil:
		stats = &st
	case !errors.Is(err, dataplane.ErrNoConntrack):
		return nil, nil, fmt.Errorf("read the connection tracker's counters: %w", err)
	}
	entries, err := t.LiveEntries()
	if err != nil {
		return nil, nil, fmt.Errorf("read the connection tables: %w", err)
	}
	counts := map[ir.Family]int{ir.IPv4: 0, ir.IPv6: 0}
	for _, e := range entries {
		if e.Conn.IPv6 {
			counts[ir.IPv6]++
		} else {
			counts[ir.IPv4]++
		}
	}
	return counts, stats, nil
}

// readSets describes the namespace's sets, by name; rulesets are the
// running rulesets, whose set matches count as references.
func readSets(rulesets []*ir.Ruleset) ([]setInfo, error) {
	ss, release, err := loadSets()
	if err != nil {
		return nil, err
	}
	defer release()
	var out []setInfo
	for _, s := range ss.All() {
		refs := ss.ListReferences(s.Name)
		for _, rs := range rulesets {
			refs += rs.SetUses(s.Name)
		}
		out = append(out, setInfo{name: s.Name, typ: s.Type.String(), entries: s.Len(), references: refs})
	}
	slices.SortFunc(out, func(a, b setInfo) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

// loadSets returns the sets `xfw ipset` works on (the namespace's, or the
// file $XFW_IPSET_FILE names) and what releases them once read: the
// namespace's are read in place, in memory mapped for the occasion.
func loadSets() (*ipset.Sets, func(), error) {
	nothing := func() {}
	if os.Getenv(ipset.FileEnv) != "" {
		store, err := ipset.NewFileStore()
		if err != nil {
			return nil, nil, err
		}
		ss, err := store.Load()
		return ss, nothing, err
	}
	im, err := dataplane.LoadIpsetImage()
	if err != nil {
		return nil, nil, fmt.Errorf("read the network namespace's sets: %w", err)
	}
	if im == nil {
		return ipset.NewSets(), nothing, nil
	}
	ss, err := ipset.DecodeImage(im.SnapshotPages(), im.Journal)
	if err != nil {
		im.Close()
		return nil, nil, err
	}
	return ss, func() { im.Close() }, nil
}
