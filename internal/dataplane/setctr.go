package dataplane

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Set entry counters (ipset's "counters" extension). A generation has one
// array of them (map kind "setctr", bpf/classify.h xfw_o_setctr), shared by
// the CPUs and updated by the data plane with atomic adds; each entry of a
// counted set's hash tables names its counter (SetHashEntry.Ctr), and each
// lookup of a list:set member the counter of the list's entry
// (SetTable.ListCtr). A generation counts from zero: the stored sets hold
// the counts up to its installation (the control plane folds the running
// counts into them, TakeSetCounters), Apply carries the counts of the
// generation it replaces over to the entries both have, and hands back
// those of entries the new one lacks.

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

// setCounterIDs names the set counters of the generation in slot, by index:
// the entries of its hash tables that have one (the tables of one set share
// their counters, so one table per set is read) and its list entries'.
func setCounterIDs(cur *state, fam ir.Family, slot uint32) ([]SetCounterID, error) {
	n := int(cur.cfgs[slot].NSetCtr)
	if n == 0 {
		return nil, nil
	}
	meta, err := slotMeta(cur, slot)
	if err != nil {
		return nil, err
	}
	ids := make([]SetCounterID, n)
	read := map[string]bool{}
	for _, lk := range meta.SetLookups {
		if lc := cur.cfgs[slot].SetLkLCtr[lk.Index%maxSetLookups]; lc > 0 && int(lc) <= n {
			ids[lc-1] = SetCounterID{Set: lk.Via, Member: lk.Set}
		}
		if lk.Kind == SetKindDXR || read[lk.Set] {
			continue
		}
		read[lk.Set] = true
		var id uint32
		if err := cur.maps[setHashOuter].Lookup(setKey(slot, lk.Index), &id); err != nil {
			return nil, fmt.Errorf("find the %s table of set %s: %w", fam, lk.Set, err)
		}
		m, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			return nil, fmt.Errorf("open the %s table of set %s: %w", fam, lk.Set, err)
		}
		var k bpfSetKey
		var v bpfSetVal
		it := m.Iterate()
		for it.Next(&k, &v) {
			if v.Ctr > 0 && int(v.Ctr) <= n {
				ids[v.Ctr-1] = SetCounterID{Set: lk.Set, Key: SetHashKey(k)}
			}
		}
		err = it.Err()
		m.Close()
		if err != nil {
			return nil, fmt.Errorf("read the %s table of set %s: %w", fam, lk.Set, err)
		}
	}
	return ids, nil
}

// mapSetCounters maps the first n set counters of slot; each is two
// uint64 (packets, bytes) the data plane adds to atomically.
func mapSetCounters(cur *state, slot uint32, n int) ([]uint64, error) {
	m, err := cur.inner("setctr", slot)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if int(m.MaxEntries()) < n {
		return nil, fmt.Errorf("set counters of slot %d: %d of %d", slot, m.MaxEntries(), n)
	}
	mem, _, stride, err := mappedArray[bpfCounter](m, n)
	if err != nil {
		return nil, err
	}
	if stride != counterStride {
		return nil, fmt.Errorf("set counters: stride %d", stride)
	}
	if n == 0 {
		return nil, nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), 2*n), nil
}

// carrySetCounters adds the final counts of the old generation's set
// counters (named oldIDs) to the new generation's counters of the same
// entries, atomically (the new generation's packets are counting); u's
// SetLeftover gets the counts of entries the new generation lacks.
func carrySetCounters(cur *state, oldSlot, newSlot uint32, oldIDs []SetCounterID, u *Update) error {
	old, err := mapSetCounters(cur, oldSlot, len(oldIDs))
	if err != nil {
		return fmt.Errorf("carry set counters: %w", err)
	}
	nw, err := mapSetCounters(cur, newSlot, len(u.SetCounters))
	if err != nil {
		return fmt.Errorf("carry set counters: %w", err)
	}
	index := make(map[SetCounterID]int, len(u.SetCounters))
	for i, id := range u.SetCounters {
		index[id] = i
	}
	for i, id := range oldIDs {
		p, b := atomic.LoadUint64(&old[2*i]), atomic.LoadUint64(&old[2*i+1])
		if p == 0 && b == 0 {
			continue
		}
		if j, ok := index[id]; ok {
			atomic.AddUint64(&nw[2*j], p)
			atomic.AddUint64(&nw[2*j+1], b)
			continue
		}
		u.SetLeftover = append(u.SetLeftover, SetCounterValue{ID: id, Packets: p, Bytes: b})
	}
	return nil
}

// TakeSetCounters returns the counts of fam's running set counters that
// are not zero and sets them to zero, each in one atomic exchange (a packet
// counted meanwhile is taken now or stays for the next time): the caller
// adds them to the stored sets. None when fam has no ruleset.
func TakeSetCounters(fam ir.Family) ([]SetCounterValue, error) {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil
	}
	// The generation's metadata is read only when it has set counters
	// (setCounterIDs): most have none.
	slot := cur.slot(fam)
	ids, err := setCounterIDs(cur, fam, slot)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	ctrs, err := mapSetCounters(cur, slot, len(ids))
	if err != nil {
		return nil, err
	}
	var out []SetCounterValue
	for i, id := range ids {
		if atomic.LoadUint64(&ctrs[2*i]) == 0 && atomic.LoadUint64(&ctrs[2*i+1]) == 0 {
			continue
		}
		p, b := atomic.SwapUint64(&ctrs[2*i], 0), atomic.SwapUint64(&ctrs[2*i+1], 0)
		out = append(out, SetCounterValue{ID: id, Packets: p, Bytes: b})
	}
	return out, nil
}
