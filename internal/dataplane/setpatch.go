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

	"github.com/xfw-dev/xfw/internal/compiler"
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
// tables afresh). Only the pages a patch writes are mapped (the mark's,
// the direct entries' and the free space the new blocks take): the kernel
// maps every page of a mapping when it is made, and a table of a million
// members has thousands.
type LiveSetTable struct {
	// Cond is the index of the set lookup in its generation.
	Cond int

	family         ir.Family
	direct, ranges wordSource // ranges without the mark
	nDirect        int        // words of direct
	nRanges        int        // words of ranges, the mark excluded
	mark           *uint64    // words of ranges in use
}

// wordSource gives views of the 64-bit words of an array: a BPF map mapped
// page by page (mappedWords) or, in tests, a slice (sliceWords).
type wordSource interface {
	// words returns words first … first+n-1 (n ≥ 1), in place.
	words(first, n int) ([]uint64, error)
	close()
}

// sliceWords is a wordSource over a slice.
type sliceWords []uint64

func (s sliceWords) words(first, n int) ([]uint64, error) {
	if first < 0 || n < 1 || first+n > len(s) {
		return nil, fmt.Errorf("words %d+%d of %d", first, n, len(s))
	}
	return s[first : first+n : first+n], nil
}

func (sliceWords) close() {}

// mappedWords is a wordSource over an open BPF_F_MMAPABLE array map of
// 8-byte values, mapping only the pages asked for.
type mappedWords struct {
	m     *ebpf.Map
	n     int            // words
	pages map[int][]byte // single pages mapped, by page index
	all   [][]byte       // every mapping made
}

// openWords opens the array of 64-bit words that is element key of the
// outer map called outer, mapping nothing yet.
func openWords(cur *state, outer string, key uint32) (*mappedWords, error) {
	m, err := cur.innerAt(outer, key)
	if err != nil {
		return nil, err
	}
	if m.ValueSize() != 8 || m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		m.Close()
		return nil, fmt.Errorf("%s[%d] is not a mappable array of 8-byte words", outer, key)
	}
	return &mappedWords{m: m, n: int(m.MaxEntries()), pages: map[int][]byte{}}, nil
}

// words maps the pages that hold words first … first+n-1 (a single page
// once) and returns the words.
func (w *mappedWords) words(first, n int) ([]uint64, error) {
	if first < 0 || n < 1 || first+n > w.n {
		return nil, fmt.Errorf("map %s: words %d+%d of %d", w.m, first, n, w.n)
	}
	page := os.Getpagesize()
	lo := first * 8 / page * page
	hi := ((first+n)*8 + page - 1) / page * page
	single := hi-lo == page
	mem, ok := w.pages[lo/page]
	if !single || !ok {
		var err error
		mem, err = unix.Mmap(w.m.FD(), int64(lo), hi-lo, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("map %s: map bytes %d–%d: %w", w.m, lo, hi, err)
		}
		w.all = append(w.all, mem)
		if single {
			w.pages[lo/page] = mem
		}
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[first*8-lo])), n), nil
}

// close unmaps the pages and closes the map.
func (w *mappedWords) close() {
	for _, mem := range w.all {
		unix.Munmap(mem)
	}
	w.all, w.pages = nil, nil
	if w.m != nil {
		w.m.Close()
		w.m = nil
	}
}

// RunningSets is what a patch of the running set tables needs of both
// families' running generations, read once: xfw's opened state (the
// session's, Current) and each generation's slot and metadata (its set
// lookups). The caller holds xfw's lock, so no ruleset change replaces
// them meanwhile; Close after use (the tables opened from it are closed
// on their own).
type RunningSets struct {
	cur  *state
	gens [2]*runningGen // by familyIndex; nil: no ruleset
}

// runningGen is the running generation of a family.
type runningGen struct {
	fam  ir.Family
	slot uint32
	meta *genMeta
}

// OpenRunningSets reads the running generations' set lookups (none when
// xfw is not loaded).
func OpenRunningSets() (*RunningSets, error) {
	cur, err := Current()
	if err != nil {
		return nil, err
	}
	r := &RunningSets{cur: cur}
	if cur == nil {
		return r, nil
	}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		meta, slot, err := runningMeta(cur, fam)
		if err != nil {
			cur.Close()
			return nil, err
		}
		if meta != nil {
			r.gens[familyIndex(fam)] = &runningGen{fam: fam, slot: slot, meta: meta}
		}
	}
	return r, nil
}

// Close releases the state (a session's stays open).
func (r *RunningSets) Close() {
	if r.cur != nil {
		r.cur.Close()
		r.cur = nil
	}
}

// Lookups returns the set lookups of fam's running generation (none when
// fam has no ruleset).
func (r *RunningSets) Lookups(fam ir.Family) []SetLookupInfo {
	if g := r.gens[familyIndex(fam)]; g != nil {
		return g.meta.SetLookups
	}
	return nil
}

// SetConds returns the set conditions of fam's running generation (none
// when fam has no ruleset): every set its rules match, also one that got
// no lookup (a list:set empty when the generation was loaded).
func (r *RunningSets) SetConds(fam ir.Family) []compiler.SetCond {
	if g := r.gens[familyIndex(fam)]; g != nil {
		return g.meta.SetConds
	}
	return nil
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

// Tables opens the DXR lookup tables of fam's running generation that look
// up the set called name (none when fam has no ruleset, or none of its
// lookups is of the set). Close each after use.
func (r *RunningSets) Tables(fam ir.Family, name string) ([]*LiveSetTable, error) {
	g := r.gens[familyIndex(fam)]
	if g == nil {
		return nil, nil
	}
	var out []*LiveSetTable
	for _, lk := range g.meta.SetLookups {
		if lk.Set != name || lk.Kind != SetKindDXR {
			continue
		}
		t, err := openSetTable(r.cur, fam, g.slot, lk.Index)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, fmt.Errorf("set lookup %d (%s): %w", lk.Index, name, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// openSetTable opens the tables of set lookup k of slot and maps the
// high-water mark.
func openSetTable(cur *state, fam ir.Family, slot uint32, k int) (*LiveSetTable, error) {
	t := &LiveSetTable{Cond: k, family: fam}
	direct, err := openWords(cur, setOuters[0], setKey(slot, k))
	if err != nil {
		return nil, err
	}
	t.direct, t.nDirect = direct, direct.n
	ranges, err := openWords(cur, setOuters[1], setKey(slot, k))
	if err != nil {
		t.Close()
		return nil, err
	}
	t.ranges = ranges
	if ranges.n == 0 {
		t.Close()
		return nil, errors.New("empty ranges map")
	}
	t.nRanges = ranges.n - 1
	mark, err := ranges.words(t.nRanges, 1)
	if err != nil {
		t.Close()
		return nil, err
	}
	t.mark = &mark[0]
	if m := atomic.LoadUint64(t.mark); m > uint64(t.nRanges) {
		t.Close()
		return nil, fmt.Errorf("high-water mark %d beyond the %d words of ranges", m, t.nRanges)
	}
	return t, nil
}

// Close unmaps the table.
func (t *LiveSetTable) Close() {
	for _, w := range []wordSource{t.direct, t.ranges} {
		if w != nil {
			w.close()
		}
	}
	t.direct, t.ranges, t.mark = nil, nil, nil
}

// SetTablePatch is new blocks for direct entries of one LiveSetTable,
// built for its free space (Plan) and not written yet (Apply).
type SetTablePatch struct {
	table   *LiveSetTable
	slots   []*uint64 // the direct entries' words, in order
	words   []uint64  // their new values
	content []uint64  // the blocks, one after the other, from the mark on
	free    []uint64  // the free space they go to (mapped)
}

// Plan builds the new blocks of the direct entries (build returns the
// word and block of entry s for a block placed at range index base; nil
// content for a leaf word), one after the other in the table's free space,
// and maps the words the patch will write, without writing anything. It
// returns ErrNoRoom when the blocks do not fit.
func (t *LiveSetTable) Plan(entries []int, build func(s int, base uint32) (word uint64, content []uint64, err error)) (*SetTablePatch, error) {
	words := uint64(1)
	if t.family == ir.IPv6 {
		words = 2
	}
	top := atomic.LoadUint64(t.mark)
	p := &SetTablePatch{table: t}
	for _, s := range entries {
		if s < 0 || s >= t.nDirect {
			return nil, fmt.Errorf("direct entry %d of %d", s, t.nDirect)
		}
		at := top + uint64(len(p.content))
		word, content, err := build(s, uint32(at/words))
		if err != nil {
			return nil, err
		}
		if at+uint64(len(content)) > uint64(t.nRanges) {
			return nil, ErrNoRoom
		}
		d, err := t.direct.words(s, 1)
		if err != nil {
			return nil, err
		}
		p.slots = append(p.slots, &d[0])
		p.words = append(p.words, word)
		p.content = append(p.content, content...)
	}
	if len(p.content) > 0 {
		free, err := t.ranges.words(int(top), len(p.content))
		if err != nil {
			return nil, err
		}
		p.free = free
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
	copy(p.free, p.content)
	atomic.StoreUint64(t.mark, top+uint64(len(p.content)))
	// The blocks are in the map before a direct entry designates them (an
	// atomic store orders the copy before it).
	for i, w := range p.slots {
		atomic.StoreUint64(w, p.words[i])
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

// Hashes opens the hash tables of fam's running generation that look up
// the set called name. Close each after use.
func (r *RunningSets) Hashes(fam ir.Family, name string) ([]*LiveSetHash, error) {
	g := r.gens[familyIndex(fam)]
	if g == nil {
		return nil, nil
	}
	var out []*LiveSetHash
	for _, lk := range g.meta.SetLookups {
		if lk.Set != name || lk.Kind == SetKindDXR {
			continue
		}
		var id uint32
		if err := r.cur.maps[setHashOuter].Lookup(setKey(g.slot, lk.Index), &id); err != nil {
			closeAll(out)
			return nil, fmt.Errorf("find the hash table of set lookup %d (%s): %w", lk.Index, name, err)
		}
		m, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("open the hash table of set lookup %d (%s): %w", lk.Index, name, err)
		}
		out = append(out, &LiveSetHash{Info: lk, m: m})
	}
	return out, nil
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
// (SetMetaEntries), each word written only when it gains a length. These
// words are the control plane's alone (the caller holds xfw's lock): the
// data plane marks a written set's lengths in words of its own
// (SetWriteMarkEntries), so the read and the write below lose nothing.
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
		if markPlensBetween != nil {
			markPlensBetween(h)
		}
		if err := h.m.Put(bpfSetKey(e.Key), bpfSetVal{Expires: cur.Expires | e.Expires}); err != nil {
			return fmt.Errorf("set lookup %d (%s): mark its prefix lengths: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return nil
}

// markPlensBetween, when set (by tests), runs in MarkPlens between the
// read and the write of a word: where a data plane writer may strike.
var markPlensBetween func(h *LiveSetHash)

// Put adds or replaces entries, in order. A table that counts its
// elements per prefix length (a written net type's, SetWriteCountEntries)
// has the new entries counted before they are added, and the count taken
// back for each that was there already: the data plane then never sees a
// length count fewer elements than it has.
func (h *LiveSetHash) Put(entries []SetHashEntry) error {
	if !h.counted() {
		for _, e := range entries {
			if err := h.m.Put(bpfSetKey(e.Key), bpfSetVal{Expires: e.Expires, Answer: e.Answer, Aux: e.Aux, Ctr: e.Ctr}); err != nil {
				return fmt.Errorf("set lookup %d (%s): put an entry: %w", h.Info.Index, h.Info.Set, err)
			}
		}
		return nil
	}
	var add, there [129]int64
	for _, e := range entries {
		countPlen(&add, e.Key.Plen, 1)
	}
	if err := h.addCounts(&add); err != nil {
		return err
	}
	for _, e := range entries {
		created, err := h.putNew(e)
		if err != nil {
			return err
		}
		if !created {
			countPlen(&there, e.Key.Plen, -1)
		}
	}
	return h.addCounts(&there)
}

// putNew adds or replaces entry e and reports whether it was not there
// before (the data plane may add and delete it meanwhile).
func (h *LiveSetHash) putNew(e SetHashEntry) (bool, error) {
	k, v := bpfSetKey(e.Key), bpfSetVal{Expires: e.Expires, Answer: e.Answer, Aux: e.Aux, Ctr: e.Ctr}
	for try := 0; try < 3; try++ {
		err := h.m.Update(k, v, ebpf.UpdateNoExist)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ebpf.ErrKeyExist) {
			return false, fmt.Errorf("set lookup %d (%s): put an entry: %w", h.Info.Index, h.Info.Set, err)
		}
		err = h.m.Update(k, v, ebpf.UpdateExist)
		if err == nil {
			return false, nil
		}
		if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return false, fmt.Errorf("set lookup %d (%s): put an entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return false, fmt.Errorf("set lookup %d (%s): put an entry: added and deleted meanwhile, again and again", h.Info.Index, h.Info.Set)
}

// Delete removes entries (absent ones are no error), and takes each
// removed entry off its prefix length's count (a table with counts).
func (h *LiveSetHash) Delete(keys []SetHashKey) error {
	var gone [129]int64
	for _, k := range keys {
		err := h.m.Delete(bpfSetKey(k))
		if err == nil {
			countPlen(&gone, k.Plen, -1)
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			h.addCounts(&gone)
			return fmt.Errorf("set lookup %d (%s): delete an entry: %w", h.Info.Index, h.Info.Set, err)
		}
	}
	return h.addCounts(&gone)
}
