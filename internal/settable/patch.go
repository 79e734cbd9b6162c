package settable

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/lpm"
)

// maxPatchedMembers bounds the member changes a command patches into the
// set tables of the running rulesets (Patch): each changed direct entry
// costs a search of the set's members changed since its snapshot, so
// beyond, building the tables afresh costs less.
const maxPatchedMembers = 1024

// Patch makes the lookup tables of the running rulesets follow the member
// changes from old to new (new a Clone of old, as ipset.Run commits) in
// place: each direct entry of a table that a changed member falls in gets
// a new block built from the members that decide it
// (dataplane.LiveSetTable.Plan), switched by one 8-byte store
// (dataplane.SetTablePatch.Apply), so that packets see each member change
// at once and the rules keep their generation and counters. It reports false, having changed nothing, when
// the changes are not all of that kind (sets created, destroyed, renamed,
// swapped or flushed; a member covering more than one direct entry; more
// than maxPatchedMembers changes; a table without room): the caller then
// loads the rulesets again. Every block is built before any is written,
// so an error, too, leaves the tables as they were.
func Patch(old, new *ipset.Sets) (bool, error) {
	if old == nil || new == nil {
		return false, nil
	}
	d := ipset.ComputeDiff(old, new)
	if len(d.Created) > 0 || len(d.Destroyed) > 0 || len(d.Renamed) > 0 {
		return false, nil
	}
	p := &patchPlan{sets: new}
	defer p.close()
	// The running generations' set lookups, read once for every table
	// the patch opens.
	rsets, err := dataplane.OpenRunningSets()
	if err != nil {
		return false, err
	}
	defer rsets.Close()
	p.rsets, p.running, p.matched = rsets, runningLookups(rsets), runningMatches(rsets)
	if p.clk, err = nowClock(); err != nil {
		return false, err
	}
	for _, ch := range d.Changed {
		if ok, err := p.add(ch); !ok || err != nil {
			return false, err
		}
	}
	// Build every block first, so that nothing is written unless every
	// table has room for its blocks.
	patches, ok, err := p.buildBlocks()
	if !ok || err != nil {
		return false, err
	}
	for _, tp := range patches {
		tp.Apply()
	}
	if err := applyHashPatches(rsets, p.hashWork); err != nil {
		// The reload the caller then makes builds every table afresh.
		return false, err
	}
	return true, nil
}

// patchPlan is what a Patch changes in the running tables.
type patchPlan struct {
	// sets are the sets after the changes; rsets and running the
	// running generations' set lookups.
	sets    *ipset.Sets
	rsets   *dataplane.RunningSets
	running []runningLookup
	// matched names the sets the running generations' rules match,
	// whether or not they got lookups.
	matched map[string]bool
	clk     setClock
	// total counts the member changes planned (maxPatchedMembers).
	total int
	// direct are the DXR tables to patch, hashWork the hash tables.
	direct   []directPatch
	hashWork []hashPatch
}

// directPatch is the change of the running DXR tables of one set.
type directPatch struct {
	set     *ipset.Set
	family  lpm.Family
	entries []int // direct entries to rebuild
	tables  []*dataplane.LiveSetTable
}

// close closes the tables the plan opened.
func (p *patchPlan) close() {
	for _, w := range p.direct {
		for _, t := range w.tables {
			t.Close()
		}
	}
}

// runningLookups returns the set lookups of both families' running
// generations.
func runningLookups(rsets *dataplane.RunningSets) []runningLookup {
	var running []runningLookup
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		for _, lk := range rsets.Lookups(fam) {
			running = append(running, runningLookup{fam, lk})
		}
	}
	return running
}

// runningMatches returns the names of the sets the rules of both
// families' running generations match.
func runningMatches(rsets *dataplane.RunningSets) map[string]bool {
	matched := map[string]bool{}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		for _, sc := range rsets.SetConds(fam) {
			matched[sc.Name] = true
		}
	}
	return matched
}

// add plans the changes of the running tables that follow ch, one set's
// member changes, reporting false when they cannot follow it in place.
func (p *patchPlan) add(ch ipset.EntryChanges) (bool, error) {
	s := ch.Set
	if s.Type == ipset.ListSet && p.matched[s.Name] {
		// A list:set rules match: its lookups, one per member that
		// can match, are built afresh. It may have none running (it
		// was empty when the ruleset was loaded, or its members were
		// expired, of the other family or of more dimensions), so the
		// lookups alone cannot tell whether a rule uses it.
		return false, nil
	}
	used, hashed := false, []runningLookup(nil)
	for _, r := range p.running {
		if r.lk.Via == s.Name {
			// A list:set's members changed: its lookups are
			// built afresh.
			return false, nil
		}
		if r.lk.Set == s.Name {
			used = true
			if r.lk.Kind != dataplane.SetKindDXR {
				hashed = append(hashed, r)
			}
		}
	}
	if !used {
		return true, nil // no rule uses it
	}
	if s.Options.Counters {
		// Its entries' counters are numbered per generation
		// (Build): built afresh, the counts carried over.
		return false, nil
	}
	if ch.Flushed || s.Type == ipset.ListSet || s.Type == ipset.HashNetIface {
		// hash:net,iface: a member change moves its network's
		// blocker (ifaceBlocker), built afresh.
		return false, nil
	}
	if p.total += len(ch.Added) + len(ch.Deleted); p.total > maxPatchedMembers {
		return false, nil
	}
	for _, r := range hashed {
		hp, err := planHashPatch(p.sets, r, ch, p.clk)
		if err != nil || hp == nil {
			return false, err // nil: built afresh
		}
		p.hashWork = append(p.hashWork, *hp)
	}
	if s.Options.HasTimeout || (s.Type != ipset.HashIP && s.Type != ipset.HashNet) {
		return true, nil // no DXR table of it
	}
	return p.addDirect(ch)
}

// addDirect plans the direct entries of the running DXR tables of ch's set
// (hash:ip or hash:net without timeouts) to rebuild, reporting false when
// a changed member covers more than one.
func (p *patchPlan) addDirect(ch ipset.EntryChanges) (bool, error) {
	s := ch.Set
	fam, lfam := ir.IPv4, lpm.IPv4
	if s.Options.Family == ipset.Inet6 {
		fam, lfam = ir.IPv6, lpm.IPv6
	}
	tables, err := p.rsets.Tables(fam, s.Name)
	if err != nil {
		return false, err
	}
	if len(tables) == 0 {
		return true, nil
	}
	p.direct = append(p.direct, directPatch{set: s, family: lfam, tables: tables})
	w := &p.direct[len(p.direct)-1]
	seen := map[int]bool{}
	changed := make([]netip.Prefix, 0, len(ch.Added)+len(ch.Deleted))
	for _, e := range ch.Added {
		changed = append(changed, e.Prefix)
	}
	for _, e := range ch.Deleted {
		changed = append(changed, e.Prefix)
	}
	for _, pfx := range changed {
		first, n, err := lpm.DirectSpan(lfam, pfx)
		if err != nil {
			return false, fmt.Errorf("set %s: %w", s.Name, err)
		}
		if n != 1 {
			// Its direct entries would switch one by one.
			return false, nil
		}
		if !seen[first] {
			seen[first] = true
			w.entries = append(w.entries, first)
		}
	}
	return true, nil
}

// buildBlocks builds the new blocks of every DXR table to patch, written
// by nothing yet, reporting false when a table has no room for its blocks.
func (p *patchPlan) buildBlocks() ([]*dataplane.SetTablePatch, bool, error) {
	var patches []*dataplane.SetTablePatch
	for _, w := range p.direct {
		deciding := make(map[int][]lpm.Entry, len(w.entries))
		for _, slot := range w.entries {
			deciding[slot] = decidingEntries(w.set, w.family, slot)
		}
		for _, t := range w.tables {
			tp, err := t.Plan(w.entries, func(slot int, base uint32) (uint64, []uint64, error) {
				return lpm.BuildBlock(w.family, slot, deciding[slot], base)
			})
			if errors.Is(err, dataplane.ErrNoRoom) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, fmt.Errorf("set %s: patch the table of set condition %d: %w", w.set.Name, t.Cond, err)
			}
			patches = append(patches, tp)
		}
	}
	return patches, true, nil
}

// applyHashPatches writes the hash table patches, opening the running
// tables of each (family, set) once however many of its lookups change.
func applyHashPatches(rsets *dataplane.RunningSets, work []hashPatch) error {
	type setKey struct {
		fam  ir.Family
		name string
	}
	open := map[setKey][]*dataplane.LiveSetHash{}
	defer func() {
		for _, tables := range open {
			for _, t := range tables {
				t.Close()
			}
		}
	}()
	for i := range work {
		hp := &work[i]
		k := setKey{hp.fam, hp.lk.Set}
		tables, ok := open[k]
		if !ok {
			var err error
			if tables, err = rsets.Hashes(hp.fam, hp.lk.Set); err != nil {
				return err
			}
			open[k] = tables
		}
		for _, t := range tables {
			if t.Info.Index == hp.lk.Index {
				if err := hp.apply(t); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// runningLookup is a set lookup of the running generation of a family.
type runningLookup struct {
	fam ir.Family
	lk  dataplane.SetLookupInfo
}

// hashPatch is the change of one running hash set table that follows a
// set's member changes.
type hashPatch struct {
	fam     ir.Family
	lk      dataplane.SetLookupInfo
	plens   [129]bool // prefix lengths the added entries use
	put     []dataplane.SetHashEntry
	deleted []dataplane.SetHashKey
}

// planHashPatch computes the entries of lookup r that ch's member changes
// add, replace and delete (nil when the lookup cannot be patched).
func planHashPatch(sets *ipset.Sets, r runningLookup, ch ipset.EntryChanges, clk setClock) (*hashPatch, error) {
	hp := &hashPatch{fam: r.fam, lk: r.lk}
	// A list member's entries expire with its list entry.
	var listExp time.Time
	if r.lk.Via != "" {
		l := sets.Get(r.lk.Via)
		if l == nil {
			return nil, nil
		}
		le, ok := l.Entry(ipset.Elem{SetName: r.lk.Set})
		if !ok {
			return nil, nil
		}
		listExp = le.Expires
	}
	kind := r.lk.Kind
	for _, e := range ch.Added {
		hs := setHashEntries(kind, &e, listExp, nil, clk)
		if len(hs) == 0 {
			// Already expired (or never matching): make sure no
			// previous version of the member answers.
			for _, h := range setHashEntries(kind, &ipset.Entry{Elem: e.Elem}, time.Time{}, nil, clk) {
				hp.deleted = append(hp.deleted, h.Key)
			}
			continue
		}
		for _, h := range hs {
			hp.plens[h.Key.Plen] = true
			hp.put = append(hp.put, h)
		}
	}
	for _, el := range ch.Deleted {
		for _, h := range setHashEntries(kind, &ipset.Entry{Elem: el}, time.Time{}, nil, clk) {
			hp.deleted = append(hp.deleted, h.Key)
		}
	}
	return hp, nil
}

// apply writes the patch into its running table t: the prefix lengths of
// the new entries first (a lookup then tries a length before any entry of
// it exists, which costs a lookup and changes no answer), then each entry
// deleted or put, one atomic map operation each. A deleted member's
// prefix length stays marked until the next reload.
func (hp *hashPatch) apply(t *dataplane.LiveSetHash) error {
	if err := t.MarkPlens(&hp.plens); err != nil {
		return err
	}
	if err := t.Delete(hp.deleted); err != nil {
		return err
	}
	return t.Put(hp.put)
}

// decidingEntries returns the members of s (hash:ip, hash:net) that decide
// the answers of direct entry slot of its lookup table: those within it
// and those covering it, with their table values.
func decidingEntries(s *ipset.Set, fam lpm.Family, slot int) []lpm.Entry {
	var out []lpm.Entry
	add := func(e *ipset.Entry) {
		v := uint32(dataplane.SetMember)
		if e.Nomatch {
			v = dataplane.SetNomatch
		}
		out = append(out, lpm.Entry{Prefix: e.Prefix, Value: v})
	}
	first, last := lpm.DirectRange(fam, slot)
	for bits := 0; bits <= fam.DirectBits(); bits++ {
		p, err := first.Prefix(bits)
		if err != nil {
			continue
		}
		if e, ok := s.Entry(ipset.Elem{Prefix: p}); ok {
			add(&e)
		}
	}
	s.Within(first, last, func(e *ipset.Entry) bool {
		if e.Prefix.Bits() > fam.DirectBits() {
			add(e)
		}
		return true
	})
	return out
}
