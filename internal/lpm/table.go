package lpm

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"unsafe"
)

// Family is the address family of a Table.
type Family uint8

// The two families; the values are the IP version numbers.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// String names the family as ipset does ("inet", "inet6").
func (f Family) String() string {
	switch f {
	case IPv4:
		return "inet"
	case IPv6:
		return "inet6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// addrBits is the address length of the family in bits.
func (f Family) addrBits() int {
	if f == IPv6 {
		return 128
	}
	return 32
}

// rangeWords is how many uint64 words one range occupies in the range table.
func (f Family) rangeWords() int {
	if f == IPv6 {
		return 2
	}
	return 1
}

// Entry is one prefix of a set and the value a lookup returns for the
// addresses it covers (when no longer prefix covers them).
type Entry struct {
	Prefix netip.Prefix
	Value  uint32
}

// Options tunes a Table.
type Options struct {
	// Capacity is the range table's size in ranges (the BPF map holds
	// Capacity × RangeWords words). 0 picks the built size + 25% + 4096, room
	// for updates before a compaction.
	Capacity int
}

// Region is a run of words of one of the flat arrays: [Start, Start+Len).
type Region struct {
	Start, Len int
}

// Patch says which words of the flat arrays an update changed. Apply it in
// order: every Ranges region first, then every Direct entry (each one aligned
// 8-byte store). When Full is set the update compacted the range table:
// every word of both arrays may have changed (and Ranges may have grown), so
// the caller fills new maps and swaps them in instead.
type Patch struct {
	Ranges []Region
	Direct []int
	Full   bool
}

// Empty reports whether the update changed nothing.
func (p Patch) Empty() bool { return !p.Full && len(p.Ranges) == 0 && len(p.Direct) == 0 }

// ErrZeroValue rejects the value 0, which lookups return for "no match".
var ErrZeroValue = errors.New("lpm: value 0 is reserved for no match")

// errFull is the allocator's "no room" inside an update (handled by
// compaction, never returned).
var errFull = errors.New("lpm: range table full")

// pfx4 is an IPv4 prefix longer than /16 (bits > 16), with its value.
type pfx4 struct {
	addr  uint32
	bits  uint8
	value uint32
}

// pfx6 is an IPv6 prefix longer than /16 as two 64-bit halves.
type pfx6 struct {
	hi, lo uint64
	bits   uint8
	value  uint32
}

// Table is a longest-prefix-match table of one family, kept both as the set
// of its prefixes and as the flat arrays of the package comment.
type Table struct {
	family Family
	words  int // words per range
	dbits  int // direct-table index bits

	direct []uint64
	ranges []uint64
	alloc  allocator
	blocks []block // per direct entry, the block it owns (size 0: none)

	// Prefixes no longer than the direct index (dbits), by length, keyed by
	// their top dbits bits; and per direct entry the longest of them
	// covering it (-1: none) and its value, the answer wherever no longer
	// prefix applies.
	short    [maxDirectBits + 1]map[uint32]uint32
	shortLen []int8
	shortVal []uint32

	// Prefixes longer than dbits, per direct entry, sorted by address then
	// length.
	long4 [][]pfx4
	long6 [][]pfx6
	count int

	// Scratch space of block building.
	spans   []span
	sw, mg  sweeper
	level1  []boundary
	level2  []uint64
	content []uint64
}

// New returns an empty table of the family.
func New(family Family, opts Options) (*Table, error) {
	return Build(family, nil, opts)
}

// Build returns a table holding the entries (host bits of each prefix are
// cleared; of two entries with the same prefix the later wins).
func Build(family Family, entries []Entry, opts Options) (*Table, error) {
	if family != IPv4 && family != IPv6 {
		return nil, fmt.Errorf("lpm: build: unknown family %d", family)
	}
	n := family.DirectEntries()
	t := &Table{
		family:   family,
		words:    family.rangeWords(),
		dbits:    family.DirectBits(),
		direct:   make([]uint64, n),
		blocks:   make([]block, n),
		shortLen: make([]int8, n),
		shortVal: make([]uint32, n),
	}
	for i := range t.short {
		t.short[i] = map[uint32]uint32{}
	}
	for i := range t.shortLen {
		t.shortLen[i] = -1
	}
	var err error
	if family == IPv4 {
		err = t.load4(entries)
	} else {
		err = t.load6(entries)
	}
	if err != nil {
		return nil, fmt.Errorf("lpm: build %s table: %w", family, err)
	}
	if err := t.layout(opts.Capacity); err != nil {
		return nil, fmt.Errorf("lpm: build %s table: %w", family, err)
	}
	return t, nil
}

// checkEntry validates an entry of the table's family and returns its prefix
// with the host bits cleared.
func (t *Table) checkEntry(e Entry) (netip.Prefix, error) {
	if !e.Prefix.IsValid() {
		return netip.Prefix{}, fmt.Errorf("invalid prefix %v", e.Prefix)
	}
	if e.Value == 0 {
		return netip.Prefix{}, fmt.Errorf("prefix %v: %w", e.Prefix, ErrZeroValue)
	}
	if err := t.checkFamily(e.Prefix); err != nil {
		return netip.Prefix{}, err
	}
	return e.Prefix.Masked(), nil
}

// checkFamily rejects a prefix of the other family (IPv4-mapped IPv6
// addresses count as IPv6).
func (t *Table) checkFamily(p netip.Prefix) error {
	if p.Addr().Is4() != (t.family == IPv4) {
		return fmt.Errorf("prefix %v is not %s", p, t.family)
	}
	return nil
}

// addShort records a prefix no longer than the direct index (top: its top
// dbits bits); it returns the direct entries whose default answer changed.
func (t *Table) addShort(top uint32, bits int, value uint32) (first, n int, changed bool) {
	if old, ok := t.short[bits][top]; ok && old == value {
		return 0, 0, false
	}
	if _, ok := t.short[bits][top]; !ok {
		t.count++
	}
	t.short[bits][top] = value
	first, n = int(top), 1<<(t.dbits-bits)
	for s := first; s < first+n; s++ {
		if int(t.shortLen[s]) <= bits {
			t.shortLen[s] = int8(bits)
			t.shortVal[s] = value
		}
	}
	return first, n, true
}

// deleteShort removes a prefix no longer than the direct index; it returns
// the direct entries whose default answer may have changed.
func (t *Table) deleteShort(top uint32, bits int) (first, n int, found bool) {
	if _, ok := t.short[bits][top]; !ok {
		return 0, 0, false
	}
	delete(t.short[bits], top)
	t.count--
	// The direct entries that lose their default all share the covering
	// prefixes shorter than bits: find the longest once.
	fallbackLen, fallbackVal := -1, uint32(0)
	for l := bits - 1; l >= 0; l-- {
		if v, ok := t.short[l][top&^uint32(1<<(t.dbits-l)-1)]; ok {
			fallbackLen, fallbackVal = l, v
			break
		}
	}
	first, n = int(top), 1<<(t.dbits-bits)
	for s := first; s < first+n; s++ {
		if int(t.shortLen[s]) == bits {
			t.shortLen[s] = int8(fallbackLen)
			t.shortVal[s] = fallbackVal
		}
	}
	return first, n, true
}

// layout places every direct entry's block into a fresh range table of the
// given capacity (0: default headroom).
func (t *Table) layout(capacity int) error {
	t.alloc = allocator{capacity: ^uint32(0)}
	if t.family == IPv4 {
		// A small chunk (index word and runs) within one cache line.
		t.alloc.line = cacheLine / 8
		t.alloc.holes = make([][]uint32, t.alloc.line)
	}
	t.ranges = t.ranges[:0]
	for s := range t.blocks {
		t.blocks[s] = block{}
		if _, err := t.place(s, nil); err != nil {
			return err
		}
	}
	used := int(t.alloc.top)
	if capacity == 0 {
		capacity = used + used/4 + 4096
	}
	if capacity < used {
		return fmt.Errorf("capacity %d ranges, the table needs %d", capacity, used)
	}
	if uint64(capacity) >= 1<<32 {
		return fmt.Errorf("capacity %d ranges exceeds 2^32-1", capacity)
	}
	t.alloc.capacity = uint32(capacity)
	t.ranges = slices.Grow(t.ranges, capacity*t.words-len(t.ranges))[:capacity*t.words]
	return nil
}

// place rebuilds the block of direct entry s and writes it to free space
// (or, during layout, to the end of the range table). The builders return
// the direct word with chunk indexes relative to the block's start. It records the changes
// in p (nil during layout) and reports whether the direct entry changed.
func (t *Table) place(s int, p *Patch) (bool, error) {
	var word uint64
	var content []uint64
	if t.family == IPv4 {
		word, content = t.build4(s)
	} else {
		var err error
		if word, content, err = t.build6(s); err != nil {
			return false, err
		}
	}
	old := t.blocks[s]
	if content == nil {
		t.blocks[s] = block{}
	} else {
		units := uint32(len(content) / t.words)
		if old.size == units {
			// Unchanged content needs no new block.
			relocate(content, t.words, int64(old.base))
			w := int(old.base) * t.words
			if t.direct[s] == relocateWord(word, int64(old.base)) && slices.Equal(content, t.ranges[w:w+len(content)]) {
				return false, nil
			}
			relocate(content, t.words, -int64(old.base))
		}
		base, ok := t.alloc.alloc(units)
		if !ok {
			return false, errFull
		}
		relocate(content, t.words, int64(base))
		w := int(base) * t.words
		if p == nil {
			// Layout: at the end of the ranges so far (after padding)
			// or in a hole.
			if end := w + len(content); end > len(t.ranges) {
				old := len(t.ranges)
				t.ranges = slices.Grow(t.ranges, end-old)[:end]
				clear(t.ranges[old:])
			}
			copy(t.ranges[w:], content)
		} else {
			copy(t.ranges[w:], content)
			p.Ranges = append(p.Ranges, Region{Start: w, Len: len(content)})
		}
		t.blocks[s] = block{base, units}
		word = relocateWord(word, int64(base))
	}
	if p != nil {
		t.alloc.release(old)
	}
	if t.direct[s] == word {
		return false, nil
	}
	t.direct[s] = word
	if p != nil {
		p.Direct = append(p.Direct, s)
	}
	return true, nil
}

// relocateWord adds delta to the range index of a chunk result word.
func relocateWord(r uint64, delta int64) uint64 {
	if !isChunk(r) {
		return r
	}
	return r&^0xffffffff | uint64(uint32(int64(chunkBase(r))+delta))
}

// relocate adds delta to the range index of every chunk result of a block
// (IPv6 index and level-1 results point into the same block; level-2
// results are leaves; IPv4 blocks hold no pointers).
func relocate(content []uint64, words int, delta int64) {
	if words != 2 {
		return
	}
	for i := 1; i < len(content); i += 2 {
		content[i] = relocateWord(content[i], delta)
	}
}

// rebuild re-places the blocks of direct entries [first, first+n) after an
// update; when the range table is full it compacts instead.
func (t *Table) rebuild(first, n int) (Patch, error) {
	var p Patch
	for s := first; s < first+n; s++ {
		if _, err := t.place(s, &p); err != nil {
			if !errors.Is(err, errFull) {
				return Patch{}, err
			}
			return t.compact()
		}
	}
	return p, nil
}

// compact lays the whole range table out afresh.
func (t *Table) compact() (Patch, error) {
	capacity := int(t.alloc.capacity)
	if err := t.layout(0); err != nil {
		return Patch{}, fmt.Errorf("compact: %w", err)
	}
	if len(t.ranges) < capacity*t.words {
		// Keep the caller's map size when it still fits.
		if err := t.layout(capacity); err != nil {
			return Patch{}, fmt.Errorf("compact: %w", err)
		}
	}
	return Patch{Full: true}, nil
}

// Insert adds the prefix with its value, or changes the value of a prefix
// already in the table, and returns the changes to the flat arrays.
func (t *Table) Insert(prefix netip.Prefix, value uint32) (Patch, error) {
	p, err := t.checkEntry(Entry{prefix, value})
	if err != nil {
		return Patch{}, fmt.Errorf("lpm: insert: %w", err)
	}
	var first, n int
	if t.family == IPv4 {
		first, n = t.insert4(p, value)
	} else {
		first, n = t.insert6(p, value)
	}
	patch, err := t.rebuild(first, n)
	if err != nil {
		return Patch{}, fmt.Errorf("lpm: insert %v: %w", prefix, err)
	}
	return patch, nil
}

// Delete removes the prefix (host bits cleared) and returns the changes to
// the flat arrays; found is false (and the patch empty) when it was absent.
func (t *Table) Delete(prefix netip.Prefix) (patch Patch, found bool, err error) {
	if !prefix.IsValid() {
		return Patch{}, false, fmt.Errorf("lpm: delete: invalid prefix %v", prefix)
	}
	if err := t.checkFamily(prefix); err != nil {
		return Patch{}, false, fmt.Errorf("lpm: delete: %w", err)
	}
	p := prefix.Masked()
	var first, n int
	if t.family == IPv4 {
		first, n, found = t.delete4(p)
	} else {
		first, n, found = t.delete6(p)
	}
	if !found {
		return Patch{}, false, nil
	}
	patch, err = t.rebuild(first, n)
	if err != nil {
		return Patch{}, true, fmt.Errorf("lpm: delete %v: %w", prefix, err)
	}
	return patch, true, nil
}

// Reclaim makes the space of blocks replaced by earlier updates reusable.
// Call it only when no reader can still be searching them: after an RCU
// grace period since the last patch was written (BPF programs run under
// rcu_read_lock; for example after swapping an ARRAY_OF_MAPS slot, which
// waits for one, or after waiting well beyond a program's run time).
func (t *Table) Reclaim() { t.alloc.reclaim() }

// Family returns the table's address family.
func (t *Table) Family() Family { return t.family }

// Len returns the number of prefixes in the table.
func (t *Table) Len() int { return t.count }

// Direct returns the direct table: Family().DirectEntries() words. The slice aliases
// the table; it stays valid until the next update.
func (t *Table) Direct() []uint64 { return t.direct }

// Ranges returns the range table, Capacity() × RangeWords() words (unused
// space is zero). The slice aliases the table; it stays valid until the next
// update (a Full patch may replace it).
func (t *Table) Ranges() []uint64 { return t.ranges }

// RangeWords returns the number of words per range: 1 (IPv4) or 2 (IPv6).
func (t *Table) RangeWords() int { return t.words }

// Used returns how many words of the range table are in use or were used
// since the last layout (the high-water mark of its allocations): words
// from there on are free for blocks built by BuildBlock.
func (t *Table) Used() int { return int(t.alloc.top) * t.words }

// Capacity returns the range table's size in ranges.
func (t *Table) Capacity() int { return int(t.alloc.capacity) }

// UsedBytes returns the bytes of the flat arrays in use: the direct table and
// the ranges of live blocks (not free space nor headroom).
func (t *Table) UsedBytes() int {
	return 8 * (len(t.direct) + int(t.alloc.used())*t.words)
}

// Words returns a word slice as bytes in host order, the layout of a
// BPF_F_MMAPABLE array map of u64 values, for a single copy into the map.
func Words(words []uint64) []byte {
	if len(words) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*len(words))
}

// Lookup returns the value of the longest prefix containing addr (0: none),
// running the BPF lookup over the flat arrays. An address of the other family
// matches nothing.
func (t *Table) Lookup(addr netip.Addr) uint32 {
	if t.family == IPv4 {
		if !addr.Is4() {
			return 0
		}
		a := addr.As4()
		return Lookup4Flat(t.direct, t.ranges, uint32(a[0])<<24|uint32(a[1])<<16|uint32(a[2])<<8|uint32(a[3]))
	}
	if !addr.Is6() {
		return 0
	}
	hi, lo := halves(addr)
	return Lookup6Flat(t.direct, t.ranges, hi, lo)
}

// halves returns an IPv6 address as its high and low 64 bits.
func halves(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return hi, lo
}

// addr4 returns an IPv4 address as a number.
func addr4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// cmpPfx4 orders IPv4 prefixes by address, then length.
func cmpPfx4(a, b pfx4) int {
	if c := cmp.Compare(a.addr, b.addr); c != 0 {
		return c
	}
	return cmp.Compare(a.bits, b.bits)
}

// cmpPfx6 orders IPv6 prefixes by address, then length.
func cmpPfx6(a, b pfx6) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	if c := cmp.Compare(a.lo, b.lo); c != 0 {
		return c
	}
	return cmp.Compare(a.bits, b.bits)
}

// groupByDirect drops all but the last of each run of equal prefixes of the
// sorted long (cmp == 0) and splits the rest by direct entry (slot), into a
// table of entries lists. It returns the lists and the prefixes kept.
func groupByDirect[P any](long []P, cmp func(a, b P) int, entries int, slot func(P) uint32) ([][]P, int) {
	kept := long[:0]
	for i, p := range long {
		if i+1 < len(long) && cmp(p, long[i+1]) == 0 {
			continue
		}
		kept = append(kept, p)
	}
	groups := make([][]P, entries)
	for i := 0; i < len(kept); {
		s := slot(kept[i])
		j := i + 1
		for j < len(kept) && slot(kept[j]) == s {
			j++
		}
		groups[s] = kept[i:j:j]
		i = j
	}
	return groups, len(kept)
}
