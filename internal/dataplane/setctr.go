package dataplane

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// Set entry counters (ipset's "counters" extension), updated by the data
// plane with atomic adds (bpf/set_lookup.h xfw_set_count):
//
//   - a hash table of a set with counters has an array of element counters
//     beside it (map kind "xfw_o_setectr/k"), its entries naming theirs
//     (SetHashEntry.Ctr); a generation that takes the table over unchanged
//     (SetTable.Reuse) takes the counters with it;
//   - the entries of a list:set with counters have the generation's
//     counters (map kind "setctr", SetTable.ListCtr, Update.SetCounters).
//
// Counters start at zero: the stored sets hold the counts up to then (the
// control plane moves running counts into them, TakeSetCounters). Apply
// carries the replaced generation's counts over to the new one's rebuilt
// tables and list entries, and hands back those of entries the new one
// lacks (Update.SetLeftover).

// SetCounterID names one set entry counter: the entry of set Set whose
// hash table key is Key, or, when Member is not "", the entry of list:set
// Set naming the set Member.
type SetCounterID struct {
	Set    string
	Key    SetHashKey
	Member string
}

// SetCounterValue is a set entry counter's count.
type SetCounterValue struct {
	ID             SetCounterID
	Packets, Bytes uint64
}

// counterStride is the size of struct xfw_counter in an array map.
const counterStride = int(unsafe.Sizeof(bpfCounter{}))

// setCounting reports whether g has set counting probes.
func setCounting(g *compiler.Generation) bool {
	for i := range g.Entries {
		if g.Entries[i].Flags&compiler.EFSetCount != 0 {
			return true
		}
	}
	return false
}

// sameMap reports whether a and b are the same kernel map.
func sameMap(a, b *ebpf.Map) bool {
	_, ia, err1 := mapFacts(a)
	_, ib, err2 := mapFacts(b)
	return err1 == nil && err2 == nil && ia == ib
}

// slotMeta reads the metadata of the generation in slot.
func slotMeta(cur *state, slot uint32) (*genMeta, error) {
	b, err := cur.savedMeta(slot)
	if err != nil {
		return nil, err
	}
	var meta genMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("decode generation metadata: %w", err)
	}
	return &meta, nil
}

// mapCounters maps the first n counters of array m (nil m: none); each is
// two uint64 (packets, bytes) the data plane adds to atomically.
func mapCounters(m *ebpf.Map, n int) ([]uint64, error) {
	if m == nil || n == 0 {
		return nil, nil
	}
	if int(m.MaxEntries()) < n {
		return nil, fmt.Errorf("counters %s: %d of %d", m, m.MaxEntries(), n)
	}
	mem, _, stride, err := mappedArray[bpfCounter](m, n)
	if err != nil {
		return nil, err
	}
	if stride != counterStride {
		return nil, fmt.Errorf("counters %s: stride %d", m, stride)
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), 2*n), nil
}

// mapListCounters maps the first n list:set entry counters of the
// generation in slot (the mapping outlives the map's descriptor).
func mapListCounters(cur *state, slot uint32, n int) ([]uint64, error) {
	m, err := cur.inner("setctr", slot)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return mapCounters(m, n)
}

// setCounterTable is the element counters of one hash table of a
// generation: entry keys by counter index, and the counters.
type setCounterTable struct {
	set  string
	keys map[uint32]SetHashKey // by Ctr
	ctrs []uint64              // mapped, two words per counter
	m    *ebpf.Map
}

// openSetCounterTables opens the element counters of the counted hash
// tables of the generation in slot (one per set: its lookups share them),
// except those of the lookups skip names.
func openSetCounterTables(cur *state, fam ir.Family, slot uint32, meta *genMeta, skip map[int]bool) ([]*setCounterTable, error) {
	var out []*setCounterTable
	seen := map[string]bool{}
	for _, lk := range meta.SetLookups {
		if lk.Kind == SetKindDXR || lk.Counters == 0 || skip[lk.Index] || seen[lk.Set] {
			continue
		}
		seen[lk.Set] = true
		t := &setCounterTable{set: lk.Set, keys: make(map[uint32]SetHashKey, lk.Counters)}
		h, err := cur.innerAt(setHashOuter, setKey(slot, lk.Index))
		if err != nil {
			return out, fmt.Errorf("the %s table of set %s: %w", fam, lk.Set, err)
		}
		err = eachBatch(h, false, func(keys []bpfSetKey, vals []bpfSetVal) {
			for i, v := range vals {
				if v.Ctr > 0 {
					t.keys[v.Ctr] = SetHashKey(keys[i])
				}
			}
		})
		h.Close()
		if err != nil {
			return out, fmt.Errorf("read the %s table of set %s: %w", fam, lk.Set, err)
		}
		if t.m, err = cur.innerAt(setElemCtrOuter, setKey(slot, lk.Index)); err != nil {
			return out, fmt.Errorf("the %s counters of set %s: %w", fam, lk.Set, err)
		}
		out = append(out, t)
		if t.ctrs, err = mapCounters(t.m, lk.Counters); err != nil {
			return out, err
		}
	}
	return out, nil
}

// closeSetCounterTables closes what openSetCounterTables opened.
func closeSetCounterTables(ts []*setCounterTable) {
	for _, t := range ts {
		if t.m != nil {
			t.m.Close()
		}
	}
}

// listCounterIDs names the list:set entry counters of the generation in
// slot, by index.
func listCounterIDs(cfg *bpfFamilyCfg, meta *genMeta) []SetCounterID {
	ids := make([]SetCounterID, cfg.NSetCtr)
	for _, lk := range meta.SetLookups {
		if lc := cfg.SetLkLCtr[lk.Index%maxSetLookups]; lc > 0 && lc <= cfg.NSetCtr {
			ids[lc-1] = SetCounterID{Set: lk.Via, Member: lk.Set}
		}
	}
	return ids
}

// carrySetCounters adds the final counts of the old generation (in
// oldSlot, configuration oldCfg, metadata oldMeta) to the new generation's
// counters of the same entries, atomically (the new generation's packets
// are counting): its list entries, and its hash tables built afresh (a
// table taken over kept its counters). u's SetLeftover gets the counts of
// entries the new generation lacks.
func carrySetCounters(cur *state, fam ir.Family, oldSlot, newSlot uint32, oldCfg *bpfFamilyCfg, oldMeta *genMeta, u *Update) error {
	// Where each entry counts in the new generation.
	type place struct {
		ctrs []uint64
		i    int
	}
	index := map[SetCounterID]place{}
	nl, err := mapListCounters(cur, newSlot, len(u.SetCounters))
	if err != nil {
		return fmt.Errorf("carry set counters: %w", err)
	}
	for i, id := range u.SetCounters {
		index[id] = place{nl, i}
	}
	taken := map[int]bool{} // old lookups a new one took over
	for k, st := range u.Sets {
		if st.Reuse > 0 {
			taken[st.Reuse-1] = true
		}
		if st.Kind == SetKindDXR || st.Reuse > 0 || st.SameAs > 0 || st.Counters == 0 {
			continue
		}
		m, err := cur.innerAt(setElemCtrOuter, setKey(newSlot, k))
		if err != nil {
			return err
		}
		ctrs, err := mapCounters(m, st.Counters)
		m.Close()
		if err != nil {
			return fmt.Errorf("carry set counters: %w", err)
		}
		for _, h := range st.Hash {
			if h.Ctr > 0 {
				index[SetCounterID{Set: st.Set, Key: h.Key}] = place{ctrs, int(h.Ctr) - 1}
			}
		}
	}
	add := func(id SetCounterID, p, b uint64) {
		if p == 0 && b == 0 {
			return
		}
		if pl, ok := index[id]; ok {
			atomic.AddUint64(&pl.ctrs[2*pl.i], p)
			atomic.AddUint64(&pl.ctrs[2*pl.i+1], b)
			return
		}
		u.SetLeftover = append(u.SetLeftover, SetCounterValue{ID: id, Packets: p, Bytes: b})
	}
	ol, err := mapListCounters(cur, oldSlot, int(oldCfg.NSetCtr))
	if err != nil {
		return fmt.Errorf("carry set counters: %w", err)
	}
	for i, id := range listCounterIDs(oldCfg, oldMeta) {
		add(id, atomic.LoadUint64(&ol[2*i]), atomic.LoadUint64(&ol[2*i+1]))
	}
	tables, err := openSetCounterTables(cur, fam, oldSlot, oldMeta, taken)
	defer closeSetCounterTables(tables)
	if err != nil {
		return fmt.Errorf("carry set counters: %w", err)
	}
	for _, t := range tables {
		for c, key := range t.keys {
			i := int(c) - 1
			if 2*i+1 < len(t.ctrs) {
				add(SetCounterID{Set: t.set, Key: key}, atomic.LoadUint64(&t.ctrs[2*i]), atomic.LoadUint64(&t.ctrs[2*i+1]))
			}
		}
	}
	return nil
}

// TakeSetCounters returns the counts of fam's running set entry counters
// that are not zero and sets them to zero, each word in one atomic
// exchange (a packet counted meanwhile is taken now or stays for the next
// time): the caller adds them to the stored sets. None when fam has no
// ruleset.
func TakeSetCounters(fam ir.Family) ([]SetCounterValue, error) {
	defer unmapOutsideSession()
	var out []SetCounterValue
	err := withFamily(fam, func(cur *state, slot uint32) (err error) {
		out, err = takeSetCounters(cur, fam, slot)
		return err
	})
	return out, err
}

// takeSetCounters is TakeSetCounters on the generation in slot.
func takeSetCounters(cur *state, fam ir.Family, slot uint32) ([]SetCounterValue, error) {
	// The generation's metadata is read only when it counts: most
	// generations do not.
	cfg := cur.cfgs[slot]
	if cfg.NSetCtr == 0 {
		return nil, nil
	}
	meta, err := slotMeta(cur, slot)
	if err != nil {
		return nil, err
	}
	var out []SetCounterValue
	take := func(id SetCounterID, ctrs []uint64, i int) {
		if atomic.LoadUint64(&ctrs[2*i]) == 0 && atomic.LoadUint64(&ctrs[2*i+1]) == 0 {
			return
		}
		p, b := atomic.SwapUint64(&ctrs[2*i], 0), atomic.SwapUint64(&ctrs[2*i+1], 0)
		out = append(out, SetCounterValue{ID: id, Packets: p, Bytes: b})
	}
	l, err := mapListCounters(cur, slot, int(cfg.NSetCtr))
	if err != nil {
		return nil, err
	}
	for i, id := range listCounterIDs(&cfg, meta) {
		if id.Set != "" {
			take(id, l, i)
		}
	}
	tables, err := openSetCounterTables(cur, fam, slot, meta, nil)
	defer closeSetCounterTables(tables)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		for c, key := range t.keys {
			if i := int(c) - 1; 2*i+1 < len(t.ctrs) {
				take(SetCounterID{Set: t.set, Key: key}, t.ctrs, i)
			}
		}
	}
	return out, nil
}
