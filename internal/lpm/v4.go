package lpm

import (
	"math/bits"
	"net/netip"
	"slices"
)

// hostMask4 is the mask of the host bits of an IPv4 prefix of the length.
func hostMask4(bits uint8) uint32 { return uint32(uint64(1)<<(32-bits) - 1) }

// load4 fills the prefix sets of an empty IPv4 table.
func (t *Table) load4(entries []Entry) error {
	long := make([]pfx4, 0, len(entries))
	for _, e := range entries {
		p, err := t.checkEntry(e)
		if err != nil {
			return err
		}
		a, bits := addr4(p.Addr()), p.Bits()
		if bits <= Direct4Bits {
			t.addShort(a>>(32-Direct4Bits), bits, e.Value)
			continue
		}
		long = append(long, pfx4{addr: a, bits: uint8(bits), value: e.Value})
	}
	// Of equal prefixes the later entry wins: the sort keeps input order
	// among them, and the last of each run is kept.
	sortPfx4(long)
	var n int
	t.long4, n = groupByDirect(long, cmpPfx4, IPv4.DirectEntries(),
		func(p pfx4) uint32 { return p.addr >> (32 - Direct4Bits) })
	t.count += n
	return nil
}

// insert4 adds or changes an IPv4 prefix (masked) and returns the direct
// entries to rebuild.
func (t *Table) insert4(p netip.Prefix, value uint32) (first, n int) {
	a, bits := addr4(p.Addr()), p.Bits()
	if bits <= Direct4Bits {
		first, n, _ = t.addShort(a>>(32-Direct4Bits), bits, value)
		return first, n
	}
	s := int(a >> (32 - Direct4Bits))
	e := pfx4{addr: a, bits: uint8(bits), value: value}
	list := t.long4[s]
	i, found := slices.BinarySearchFunc(list, e, cmpPfx4)
	if found {
		if list[i].value == value {
			return 0, 0
		}
		list[i].value = value
	} else {
		t.long4[s] = slices.Insert(list, i, e)
		t.count++
	}
	return s, 1
}

// delete4 removes an IPv4 prefix (masked) and returns the direct entries to
// rebuild.
func (t *Table) delete4(p netip.Prefix) (first, n int, found bool) {
	a, bits := addr4(p.Addr()), p.Bits()
	if bits <= Direct4Bits {
		return t.deleteShort(a>>(32-Direct4Bits), bits)
	}
	s := int(a >> (32 - Direct4Bits))
	list := t.long4[s]
	i, ok := slices.BinarySearchFunc(list, pfx4{addr: a, bits: uint8(bits)}, cmpPfx4)
	if !ok {
		return 0, 0, false
	}
	t.long4[s] = slices.Delete(list, i, i+1)
	t.count--
	return s, 1, true
}

// build4 computes the block of IPv4 direct entry s: a leaf word when one
// value answers for the whole direct entry (content nil), else the chunk's
// index and ranges and its direct word (block at index 0). See block4.
func (t *Table) build4(s int) (word uint64, content []uint64) {
	return t.block4(s, t.shortVal[s], t.long4[s])
}

// block4 is build4 with the default answer (that of the longest prefix
// no longer than the direct index covering the direct entry) and the
// prefixes longer than the direct index given (sorted by cmpPfx4, no
// duplicates). The chunk's ranges are the runs of addresses whose answer
// differs from the default (gaps between them answer the default); an index
// of 2^k words (k from index4Bits) precedes them, each word covering one
// 2^(14-k)-address part of the /18: the part's answer when it has one, else
// the ranges overlapping it (see the package comment).
func (t *Table) block4(s int, defVal uint32, list []pfx4) (word uint64, content []uint64) {
	def := leaf(defVal)
	if len(list) == 0 {
		return def, nil
	}
	t.spans = t.spans[:0]
	for _, p := range list {
		t.spans = append(t.spans, span{first: uint64(p.addr), last: uint64(p.addr | hostMask4(p.bits)), result: leaf(p.value)})
	}
	first := uint64(s) << (32 - Direct4Bits)
	last := first | uint64(hostMask4(Direct4Bits))
	out := t.sw.sweep(first, last, def, t.spans)
	if len(out) == 1 {
		return out[0].result, nil
	}
	// The runs answering other than the default, into level2 (scratch).
	t.level2 = t.level2[:0]
	for i, b := range out {
		if b.result == def {
			continue
		}
		end := last
		if i+1 < len(out) {
			end = out[i+1].start - 1
		}
		t.level2 = append(t.level2, range4(uint32(b.start), uint32(end), uint32(b.result)))
	}
	runs := t.level2
	k := index4Bits(runs, uint32(first))
	t.content, _ = appendIndex4(t.content[:0], true, runs, uint32(first), k, defVal)
	t.content = append(t.content, runs...)
	return chunk4(0, uint32(len(t.content)), part4Bits-k), t.content
}

// appendIndex4 appends the 2^k index words of a chunk of the runs, whose
// /18 begins at address first, with the default answer defVal (runs are
// placed right after the index), unless emit is false; it returns dst and
// the number of parts that need a search of their runs.
func appendIndex4(dst []uint64, emit bool, runs []uint64, first uint32, k int, defVal uint32) ([]uint64, int) {
	parts := 1 << k
	partSize := uint32(1) << (part4Bits - k)
	searched := 0
	// Two cursors over the sorted, disjoint runs: i0 the first ending at
	// or after the part's start, i1 one past the last starting at or
	// before its end.
	i0, i1 := 0, 0
	for j := 0; j < parts; j++ {
		ps := first&0xffff + uint32(j)*partSize
		pe := ps + partSize - 1
		for i0 < len(runs) && uint32(runs[i0])>>16&0xffff < ps {
			i0++
		}
		for i1 < len(runs) && uint32(runs[i1])&0xffff <= pe {
			i1++
		}
		var w uint64
		switch {
		case i0 >= i1: // no run overlaps the part
			w = index4(defVal, 0, 0)
		case i1-i0 == 1 && uint32(runs[i0])&0xffff <= ps && uint32(runs[i0])>>16&0xffff >= pe:
			// One run covers the whole part.
			w = index4(uint32(runs[i0]>>32), 0, 0)
		default:
			w = index4(defVal, uint32(i1-i0), uint32(parts+i0))
			searched++
		}
		if emit {
			dst = append(dst, w)
		}
	}
	return dst, searched
}

// index4Bits returns k, the address bits (below the direct index) the index
// of a chunk of the runs consumes (its /18 beginning at address first): 0
// (one index word) up to ranges4PerLine runs, whose search stays within a
// cache line; else about ranges4PerPart runs per part to begin with, and
// twice as many parts while that does not make more parts need a search
// (the addresses that need one at least halve) and the index stays within
// maxIndex4PerRun words per run.
func index4Bits(runs []uint64, first uint32) int {
	n := len(runs)
	if n <= ranges4PerLine {
		return 0
	}
	k := min(max(bits.Len(uint(n-1))-bits.Len(uint(ranges4PerPart-1)), 1), part4Bits)
	_, searched := appendIndex4(nil, false, runs, first, k, 0)
	for k < part4Bits && 1<<(k+1) <= maxIndex4PerRun*n {
		_, more := appendIndex4(nil, false, runs, first, k+1, 0)
		if more > searched {
			break
		}
		k, searched = k+1, more
	}
	return k
}

// sortPfx4 sorts prefixes by address, then length, then input order: on
// packed keys (address, length, index) when the index fits in 24 bits, which
// is several times faster than a stable sort of the structs.
func sortPfx4(ps []pfx4) {
	if len(ps) >= 1<<24 {
		slices.SortStableFunc(ps, cmpPfx4)
		return
	}
	keys := make([]uint64, len(ps))
	for i, p := range ps {
		keys[i] = uint64(p.addr)<<32 | uint64(p.bits)<<24 | uint64(i)
	}
	slices.Sort(keys)
	sorted := make([]pfx4, len(ps))
	for i, k := range keys {
		sorted[i] = ps[k&(1<<24-1)]
	}
	copy(ps, sorted)
}
