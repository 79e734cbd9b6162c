package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ir"
)

// ErrNoRoom is LiveSetTable.Place's answer when the range table has no
// room left for a new block: the caller loads the ruleset again, which
// builds the tables afresh (with new headroom).
var ErrNoRoom = errors.New("the set's lookup table has no room for the change")

// LiveSetTable is the lookup table of one set condition of a running
// generation (internal/lpm's flat arrays in two BPF array maps), mapped so
// that a change of the set's members patches it in place: each new block
// is written after the ranges map's high-water mark (its last word, which
// no lookup reads), the mark is raised, and then the direct entry is
// switched by one aligned 8-byte store. A packet's lookup reads the direct
// entry once, then the block it designates, so it sees the old block or
// the new one, never a mix; old blocks are never overwritten (the space
// they take is reclaimed when the ruleset is next loaded, which builds the
// tables afresh).
type LiveSetTable struct {
	// Cond is the index of the set lookup in its generation.
	Cond int

	family          ir.Family
	direct, ranges  []uint64 // mapped; ranges without the mark
	mark            *uint64  // words of ranges in use
	directMem, rMem []byte
}

// RunningSetLookups returns the set lookups of fam's running generation
// (none when fam has no ruleset).
func RunningSetLookups(fam ir.Family) ([]SetLookupInfo, error) {
	var lookups []SetLookupInfo
	err := withRunningMeta(fam, func(_ *state, meta *genMeta, _ uint32) error {
		lookups = meta.SetLookups
		return nil
	})
	return lookups, err
}

// withRunningMeta calls fn with xfw's loaded state and the metadata and
// slot of fam's running generation; it does nothing when xfw is not loaded
// or fam has no ruleset. The state is closed when fn returns.
func withRunningMeta(fam ir.Family, fn func(cur *state, meta *genMeta, slot uint32) error) error {
	cur, err := Current()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	meta, slot, err := runningMeta(cur, fam)
	if err != nil || meta == nil {
		return err
	}
	return fn(cur, meta, slot)
}

// runningMeta reads the metadata of fam's running generation (nil when fam
// has no ruleset) and its slot.
func runningMeta(cur *state, fam ir.Family) (*genMeta, uint32, error) {
	if !cur.hasFamily(fam) {
		return nil, 0, nil
	}
	slot := cur.slot(fam)
	metaBytes, err := cur.savedMeta(slot)
	if err != nil {
		return nil, 0, err
	}
	var meta genMeta
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		return nil, 0, fmt.Errorf("decode generation metadata: %w", err)
	}
	return &meta, slot, nil
}

// LiveSetTables maps the DXR lookup tables of fam's running generation
// that look up the set called name (none when fam has no ruleset, or none
// of its lookups is of the set). Close each after use; the caller holds
// xfw's lock, so no ruleset change replaces them meanwhile.
func LiveSetTables(fam ir.Family, name string) ([]*LiveSetTable, error) {
	var out []*LiveSetTable
	err := withRunningMeta(fam, func(cur *state, meta *genMeta, slot uint32) error {
		for _, lk := range meta.SetLookups {
			if lk.Set != name || lk.Kind != SetKindDXR {
				continue
			}
			t, err := mapSetTable(cur, fam, slot, lk.Index)
			if err != nil {
				for _, o := range out {
					o.Close()
				}
				out = nil
				return fmt.Errorf("set lookup %d (%s): %w", lk.Index, name, err)
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// mapSetTable maps the tables of set lookup k of slot.
func mapSetTable(cur *state, fam ir.Family, slot uint32, k int) (*LiveSetTable, error) {
	t := &LiveSetTable{Cond: k, family: fam}
	var err error
	if t.directMem, t.direct, err = mapWords(cur, setOuters[0], setKey(slot, k)); err != nil {
		return nil, err
	}
	if t.rMem, t.ranges, err = mapWords(cur, setOuters[1], setKey(slot, k)); err != nil {
		t.Close()
		return nil, err
	}
	if len(t.ranges) == 0 {
		t.Close()
		return nil, errors.New("empty ranges map")
	}
	t.mark = &t.ranges[len(t.ranges)-1]
	t.ranges = t.ranges[:len(t.ranges)-1]
	if m := atomic.LoadUint64(t.mark); m > uint64(len(t.ranges)) {
		t.Close()
		return nil, fmt.Errorf("high-water mark %d beyond the %d words of ranges", m, len(t.ranges))
	}
	return t, nil
}

// mapWords maps the array of 64-bit words that is element key of the
// outer map called outer.
func mapWords(cur *state, outer string, key uint32) ([]byte, []uint64, error) {
	var id uint32
	if err := cur.maps[outer].Lookup(key, &id); err != nil {
		return nil, nil, fmt.Errorf("find %s[%d]: %w", outer, key, err)
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return nil, nil, fmt.Errorf("open %s[%d]: %w", outer, key, err)
	}
	defer m.Close()
	if m.ValueSize() != 8 || m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		return nil, nil, fmt.Errorf("%s[%d] is not a mappable array of 8-byte words", outer, key)
	}
	n := int(m.MaxEntries())
	page := os.Getpagesize()
	mem, err := unix.Mmap(m.FD(), 0, (n*8+page-1)/page*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %s[%d]: %w", outer, key, err)
	}
	return mem, unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), n), nil
}

// Close unmaps the table.
func (t *LiveSetTable) Close() {
	for _, mem := range [][]byte{t.directMem, t.rMem} {
		if mem != nil {
			unix.Munmap(mem)
		}
	}
	t.directMem, t.rMem, t.direct, t.ranges, t.mark = nil, nil, nil, nil, nil
}

// SetTablePatch is new blocks for direct entries of one LiveSetTable,
// built for its free space (Plan) and not written yet (Apply).
type SetTablePatch struct {
	table   *LiveSetTable
	entries []int    // direct entries, in order
	words   []uint64 // their new direct words
	content []uint64 // the blocks, one after the other, from the mark on
}

// Plan builds the new blocks of the direct entries (build returns the
// word and block of entry s for a block placed at range index base; nil
// content for a leaf word), one after the other in the table's free space,
// without writing anything. It returns ErrNoRoom when they do not fit.
func (t *LiveSetTable) Plan(entries []int, build func(s int, base uint32) (word uint64, content []uint64, err error)) (*SetTablePatch, error) {
	words := uint64(1)
	if t.family == ir.IPv6 {
		words = 2
	}
	top := atomic.LoadUint64(t.mark)
	p := &SetTablePatch{table: t}
	for _, s := range entries {
		if s < 0 || s >= len(t.direct) {
			return nil, fmt.Errorf("direct entry %d of %d", s, len(t.direct))
		}
		at := top + uint64(len(p.content))
		word, content, err := build(s, uint32(at/words))
		if err != nil {
			return nil, err
		}
		if at+uint64(len(content)) > uint64(len(t.ranges)) {
			return nil, ErrNoRoom
		}
		p.entries = append(p.entries, s)
		p.words = append(p.words, word)
		p.content = append(p.content, content...)
	}
	return p, nil
}

// Apply writes the patch: the blocks into the free space, the raised
// high-water mark, then each direct entry by one aligned 8-byte store. It
// cannot fail; nothing else may change the table since Plan (the caller
// holds xfw's lock).
func (p *SetTablePatch) Apply() {
	t := p.table
	top := atomic.LoadUint64(t.mark)
	copy(t.ranges[top:], p.content)
	atomic.StoreUint64(t.mark, top+uint64(len(p.content)))
	// The blocks are in the map before a direct entry designates them (an
	// atomic store orders the copy before it).
	for i, s := range p.entries {
		atomic.StoreUint64(&t.direct[s], p.words[i])
	}
}

// LiveSetHash is the hash table of one set lookup of a running generation,
// open for a patch in place: each update or delete of an element is
// atomic for the packet path (an update replaces the element as a whole).
type LiveSetHash struct {
	// Info describes the lookup.
	Info SetLookupInfo
	m    *ebpf.Map
}

// LiveSetHashes opens the hash tables of fam's running generation that
// look up the set called name. Close each after use.
func LiveSetHashes(fam ir.Family, name string) ([]*LiveSetHash, error) {
	var out []*LiveSetHash
	err := withRunningMeta(fam, func(cur *state, meta *genMeta, slot uint32) error {
		for _, lk := range meta.SetLookups {
			if lk.Set != name || lk.Kind == SetKindDXR {
				continue
			}
			var id uint32
			if err := cur.maps[setHashOuter].Lookup(setKey(slot, lk.Index), &id); err != nil {
				closeAll(out)
				out = nil
				return fmt.Errorf("find the hash table of set lookup %d (%s): %w", lk.Index, name, err)
			}
			m, err := ebpf.NewMapFromID(ebpf.MapID(id))
			if err != nil {
				closeAll(out)
				out = nil
				return fmt.Errorf("open the hash table of set lookup %d (%s): %w", lk.Index, name, err)
			}
			out = append(out, &LiveSetHash{Info: lk, m: m})
		}
		return nil
	})
	return out, err
}

// closeAll closes hash tables.
func closeAll(hs []*LiveSetHash) {
	for _, h := range hs {
		h.Close()
	}
}

// Close closes the table.
func (h *LiveSetHash) Close() {
	if h.m != nil {
		h.m.Close()
		h.m = nil
	}
}

// Room reports whether n more entries fit in the table.
func (h *LiveSetHash) Room(n int) bool {
	var k bpfSetKey
	var v bpfSetVal
	held := 0
	it := h.m.Iterate()
	for it.Next(&k, &v) {
		held++
	}
	return it.Err() == nil && held+n <= int(h.m.MaxEntries())
}

// MarkPlens adds the prefix lengths plens[l] to the table's meta keys
// (SetMetaEntries), each word written only when it gains a length.
func (h *LiveSetHash) MarkPlens(plens *[129]bool) error {
	for _, e := range SetMetaEntries(plens) {
		if e.Expires == 0 {
			continue
		}
		var cur bpfSetVal
		err := h.m.Lookup(bpfSetKey(e.Key), &cur)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set lookup %d (%s): read its prefix lengths: %w", h.Info.Index, h.Info.Set, err)
		}
		if cur.Expires|e.Expires == cur.Expires {
			continue
		}
		if err := h.m.Put(bpfSetKey(e.Key), bpfSetVal{Expires: cur.Expires | e.Expires}); err != nil {
			return fmt.Errorf("set lookup %d (%s): mark its prefix lengths: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return nil
}

// Put adds or replaces entries, in order.
func (h *LiveSetHash) Put(entries []SetHashEntry) error {
	for _, e := range entries {
		if err := h.m.Put(bpfSetKey(e.Key), bpfSetVal{Expires: e.Expires, Answer: e.Answer, Aux: e.Aux, Ctr: e.Ctr}); err != nil {
			return fmt.Errorf("set lookup %d (%s): put an entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return nil
}

// Delete removes entries (absent ones are no error).
func (h *LiveSetHash) Delete(keys []SetHashKey) error {
	for _, k := range keys {
		if err := h.m.Delete(bpfSetKey(k)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("set lookup %d (%s): delete an entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return nil
}
