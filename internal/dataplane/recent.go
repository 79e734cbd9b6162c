package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The recent match's lists (bpf/recent.h). A list lives in the namespace,
// not in a generation: it is created when a committed ruleset first names
// it (recent_mt_check: with the mask of the rule that names it first and
// a timestamp ring as large as its rules need, flushed when a later rule
// needs a larger one), shared by every rule naming it in either family,
// and destroyed with its entries once no running ruleset of either family
// names it (recent_mt_destroy of the last rule). Each list records which
// families' running rules name it. New lists and rings are set up before
// the new generation runs, lists no longer named are freed after the old
// generation's last packet.

// Map names and sizes of bpf/recent.h.
const (
	recentEntMap    = "xfw_rc_ent"
	recentListMap   = "xfw_rc_list"
	recentRuleMap   = "xfw_rc_rule"
	recentLists     = 64  // XFW_RECENT_LISTS
	recentRulesSlot = 256 // XFW_RECENT_RULES
	recentStamps    = 256 // XFW_RECENT_STAMPS
	recentNameLen   = 200 // XFW_RECENT_NAME
)

// bpfRecentList mirrors struct xfw_rc_list.
type bpfRecentList struct {
	Clock          uint64
	MaskHi, MaskLo uint64
	Mask4          uint32
	Entries        uint32
	Ring           uint32
	Used           [2]uint8
	Pad            [2]uint8
	Name           [recentNameLen]byte
}

// bpfRecentKey mirrors struct xfw_rc_key.
type bpfRecentKey struct {
	List, Fam uint32
	Hi, Lo    uint64
}

// bpfRecentEnt mirrors struct xfw_rc_ent.
type bpfRecentEnt struct {
	Lock    bpfSpinLock
	TTL     uint8
	Pad     uint8
	Index   uint16
	NStamps uint16
	Pad2    uint16
	Pad3    uint32 // the C struct's hole before lru
	LRU     uint64
	Stamps  [recentStamps]uint64
}

// bpfRecentRule mirrors struct xfw_rc_rule.
type bpfRecentRule struct {
	List, Window, Hits           uint32
	Flags, Invert, Dest, Seconds uint8
}

// recentTable is the namespace's list table, mapped.
type recentTable struct {
	lists []bpfRecentList
	ents  *ebpf.Map
}

// openRecent maps cur's list table (nil, nil: a build without lists).
func openRecent(cur *state) (*recentTable, error) {
	lm, em := cur.maps[recentListMap], cur.maps[recentEntMap]
	if lm == nil || em == nil {
		return nil, nil
	}
	mem, _, stride, err := mappedArray[bpfRecentList](lm, recentLists)
	if err != nil {
		return nil, fmt.Errorf("recent lists: %w", err)
	}
	if stride != int(unsafe.Sizeof(bpfRecentList{})) {
		return nil, fmt.Errorf("recent lists: stride %d", stride)
	}
	lists := unsafe.Slice((*bpfRecentList)(unsafe.Pointer(&mem[0])), recentLists)
	return &recentTable{lists: lists, ents: em}, nil
}

// find returns the id of the list called name, -1 when there is none.
func (t *recentTable) find(name string) int {
	for i := range t.lists {
		if t.lists[i].Name[0] != 0 && listName(&t.lists[i]) == name {
			return i
		}
	}
	return -1
}

// listName is a list's name.
func listName(l *bpfRecentList) string {
	n := bytes.IndexByte(l.Name[:], 0)
	if n < 0 {
		n = len(l.Name)
	}
	return string(l.Name[:n])
}

// recentMaskWords packs a 16-byte mask as struct xfw_rc_list holds it.
func recentMaskWords(m [16]byte) (hi, lo uint64, m4 uint32) {
	return binary.BigEndian.Uint64(m[:8]), binary.BigEndian.Uint64(m[8:]), binary.BigEndian.Uint32(m[:4])
}

// flush removes list id's entries (recent_table_flush).
func (t *recentTable) flush(id int) error {
	var keys []bpfRecentKey
	var k bpfRecentKey
	var v []byte
	it := t.ents.Iterate()
	for it.Next(&k, &v) {
		if int(k.List) == id {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("recent list %d: %w", id, err)
	}
	for _, k := range keys {
		if err := t.ents.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("recent list %d: %w", id, err)
		}
		atomic.AddUint32(&t.lists[id].Entries, ^uint32(0))
	}
	return nil
}

// prepareRecent makes the lists g's recent matches name (for family fam)
// and writes the matches into slot's part of the rule table, before g
// runs.
func prepareRecent(cur *state, fam ir.Family, slot uint32, g *compiler.Generation) error {
	if len(g.Recents) == 0 {
		return nil
	}
	t, err := openRecent(cur)
	if err != nil {
		return err
	}
	if t == nil {
		return errors.New("recent: the loaded BPF object has no recent lists")
	}
	hz, err := kernelHZ()
	if err != nil {
		return err
	}
	fi := familyIndex(fam)
	rules := make([]bpfRecentRule, len(g.Recents))
	for k := range g.Recents {
		m := &g.Recents[k].RecentMatch
		id, err := t.listFor(m, fi)
		if err != nil {
			return err
		}
		rules[k] = bpfRecentRule{List: uint32(id), Window: m.Seconds * uint32(hz), Hits: m.HitCount, Flags: m.Flags,
			Invert: b2u8(m.Invert), Dest: b2u8(m.Dest), Seconds: b2u8(m.Seconds != 0)}
	}
	rm := cur.maps[recentRuleMap]
	for k, r := range rules {
		if err := rm.Put(slot*recentRulesSlot+uint32(k), r); err != nil {
			return fmt.Errorf("recent match %d: %w", k, err)
		}
	}
	return nil
}

// listFor returns the list m names, marked as named by family fi:
// created when new (recent_mt_check), flushed when m needs a larger
// timestamp ring than it has.
func (t *recentTable) listFor(m *ir.RecentMatch, fi int) (int, error) {
	ring := m.StampsMask()
	id := t.find(m.Name)
	if id < 0 {
		for i := range t.lists {
			if t.lists[i].Name[0] == 0 {
				id = i
				break
			}
		}
		if id < 0 {
			return 0, fmt.Errorf("recent: more than %d lists are not supported by xfw", recentLists)
		}
		l := &t.lists[id]
		if err := t.flush(id); err != nil {
			return 0, err
		}
		l.MaskHi, l.MaskLo, l.Mask4 = recentMaskWords(m.Mask)
		atomic.StoreUint32(&l.Entries, 0)
		atomic.StoreUint32(&l.Ring, ring)
		l.Used = [2]uint8{}
		copy(l.Name[:], m.Name)
	}
	l := &t.lists[id]
	if ring > atomic.LoadUint32(&l.Ring) {
		if err := t.flush(id); err != nil {
			return 0, err
		}
		atomic.StoreUint32(&l.Ring, ring)
	}
	l.Used[fi] = 1
	return id, nil
}

// releaseRecent frees the lists family fam's rules named before and g no
// longer names, unless the other family's do (recent_mt_destroy), once
// the old generation's packets are gone.
func releaseRecent(cur *state, fam ir.Family, g *compiler.Generation) error {
	t, err := openRecent(cur)
	if err != nil || t == nil {
		return err
	}
	named := map[string]bool{}
	for k := range g.Recents {
		named[g.Recents[k].Name] = true
	}
	fi := familyIndex(fam)
	for id := range t.lists {
		l := &t.lists[id]
		if l.Name[0] == 0 || l.Used[fi] == 0 || named[listName(l)] {
			continue
		}
		l.Used[fi] = 0
		if l.Used[1-fi] != 0 {
			continue
		}
		l.Name = [recentNameLen]byte{}
		if err := t.flush(id); err != nil {
			return err
		}
		atomic.StoreUint32(&l.Entries, 0)
	}
	return nil
}

// b2u8 is 1 for true.
func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// bpfSpinLock mirrors struct bpf_spin_lock.
type bpfSpinLock struct{ Val uint32 }
