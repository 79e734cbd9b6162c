package lpm

import (
	"fmt"
	"net/netip"
	"slices"
)

// hostMask64 is the mask of the low (64 - bits) bits of a 64-bit half, for
// 0 <= bits <= 64.
func hostMask64(bits uint8) uint64 {
	if bits >= 64 {
		return 0
	}
	return ^uint64(0) >> bits
}

// load6 fills the prefix sets of an empty IPv6 table.
func (t *Table) load6(entries []Entry) error {
	long := make([]pfx6, 0, len(entries))
	for _, e := range entries {
		p, err := t.checkEntry(e)
		if err != nil {
			return err
		}
		hi, lo := halves(p.Addr())
		bits := p.Bits()
		if bits <= Direct6Bits {
			t.addShort(uint32(hi>>(64-Direct6Bits)), bits, e.Value)
			continue
		}
		long = append(long, pfx6{hi: hi, lo: lo, bits: uint8(bits), value: e.Value})
	}
	sortPfx6(long)
	var n int
	t.long6, n = groupByDirect(long, cmpPfx6, IPv6.DirectEntries(),
		func(p pfx6) uint32 { return uint32(p.hi >> (64 - Direct6Bits)) })
	t.count += n
	return nil
}

// insert6 adds or changes an IPv6 prefix (masked) and returns the direct
// entries to rebuild.
func (t *Table) insert6(p netip.Prefix, value uint32) (first, n int) {
	hi, lo := halves(p.Addr())
	bits := p.Bits()
	if bits <= Direct6Bits {
		first, n, _ = t.addShort(uint32(hi>>(64-Direct6Bits)), bits, value)
		return first, n
	}
	s := int(hi >> (64 - Direct6Bits))
	e := pfx6{hi: hi, lo: lo, bits: uint8(bits), value: value}
	list := t.long6[s]
	i, found := slices.BinarySearchFunc(list, e, cmpPfx6)
	if found {
		if list[i].value == value {
			return 0, 0
		}
		list[i].value = value
	} else {
		t.long6[s] = slices.Insert(list, i, e)
		t.count++
	}
	return s, 1
}

// delete6 removes an IPv6 prefix (masked) and returns the direct entries to
// rebuild.
func (t *Table) delete6(p netip.Prefix) (first, n int, found bool) {
	hi, lo := halves(p.Addr())
	bits := p.Bits()
	if bits <= Direct6Bits {
		return t.deleteShort(uint32(hi>>(64-Direct6Bits)), bits)
	}
	s := int(hi >> (64 - Direct6Bits))
	list := t.long6[s]
	i, ok := slices.BinarySearchFunc(list, pfx6{hi: hi, lo: lo, bits: uint8(bits)}, cmpPfx6)
	if !ok {
		return 0, 0, false
	}
	t.long6[s] = slices.Delete(list, i, i+1)
	t.count--
	return s, 1, true
}

// build6 computes the block of IPv6 direct entry s: a leaf word when one
// value answers for the whole /16 (content nil), else the block (level-2
// chunks, then the level-1 structure) and the direct word, with chunk
// indexes relative to the block's first range.
func (t *Table) build6(s int) (word uint64, content []uint64, err error) {
	return t.block6(s, t.shortVal[s], t.long6[s])
}

// block6 is build6 with the default answer and the prefixes longer than
// the direct index given (sorted by cmpPfx6, no duplicates).
func (t *Table) block6(s int, defVal uint32, list []pfx6) (word uint64, content []uint64, err error) {
	def := leaf(defVal)
	if len(list) == 0 {
		return def, nil, nil
	}
	// Level 1: the prefixes up to /64, as intervals of the high half.
	t.spans = t.spans[:0]
	for _, p := range list {
		if p.bits <= 64 {
			t.spans = append(t.spans, span{first: p.hi, last: p.hi | hostMask64(p.bits), result: leaf(p.value)})
		}
	}
	first := uint64(s) << (64 - Direct6Bits)
	last := first | hostMask64(Direct6Bits)
	t.level1 = append(t.level1[:0], t.sw.sweep(first, last, def, t.spans)...)

	// Each high half holding longer prefixes becomes a range of its own,
	// pointing at a level-2 chunk over the low half; level-2 chunk bases are
	// counted from the first level-2 range for now.
	t.mg.out = t.mg.out[:0]
	t.level2 = t.level2[:0]
	h1 := 0 // next level-1 boundary to merge
	under := def
	for i := 0; i < len(list); {
		if list[i].bits <= 64 {
			i++
			continue
		}
		hi := list[i].hi
		j := i
		t.spans = t.spans[:0]
		for ; j < len(list) && list[j].hi == hi; j++ {
			if p := list[j]; p.bits > 64 {
				t.spans = append(t.spans, span{first: p.lo, last: p.lo | hostMask64(p.bits-64), result: leaf(p.value)})
			}
		}
		i = j
		for h1 < len(t.level1) && t.level1[h1].start <= hi {
			under = t.level1[h1].result
			t.mg.emit(t.level1[h1].start, under)
			h1++
		}
		out := t.sw.sweep(0, ^uint64(0), under, t.spans)
		if len(out) == 1 {
			continue // the longer prefixes repeat the answer around them
		}
		if len(out) > maxChunkRanges || len(t.level2)/2+len(out) > maxChunkRanges {
			return 0, nil, fmt.Errorf("direct entry %#04x: %d level-2 ranges", s, len(out))
		}
		t.mg.emit(hi, chunk(uint32(len(t.level2)/2), uint32(len(out))))
		for _, b := range out {
			t.level2 = append(t.level2, b.start, b.result)
		}
		if hi != last {
			t.mg.emit(hi+1, under)
		}
	}
	for ; h1 < len(t.level1); h1++ {
		t.mg.emit(t.level1[h1].start, t.level1[h1].result)
	}
	merged := t.mg.out
	if len(merged) == 1 && !isChunk(merged[0].result) {
		return merged[0].result, nil, nil
	}
	// The block: the level-2 chunks (their bases, counted from the block's
	// start, are final), then the level-1 structure.
	t.content = append(t.content[:0], t.level2...)
	word = t.level1Chunk(merged, first, 64-Direct6Bits)
	return word, t.content, nil
}

// level1Chunk appends to the block the level-1 structure of the ranges bs of
// the high-half interval [first, first + 2^width): a chunk of them, or, when
// there are more than indexThreshold6 and the parts would still span at
// least 2^Index6Bits values (so a single high half, which a level-2 chunk
// covers, never fills a part), an index of 2^Index6Bits parts each holding
// the structure of the ranges within it. It returns the result word that
// designates the structure (indexes relative to the block's start).
func (t *Table) level1Chunk(bs []boundary, first uint64, width int) uint64 {
	if len(bs) == 1 {
		return bs[0].result
	}
	if len(bs) <= indexThreshold6 || width < 2*Index6Bits {
		off := len(t.content) / 2
		for _, b := range bs {
			t.content = append(t.content, b.start, b.result)
		}
		return chunk(uint32(off), uint32(len(bs)))
	}
	const parts = 1 << Index6Bits
	partWidth := width - Index6Bits
	off := len(t.content) / 2
	for j := 0; j < parts; j++ {
		t.content = append(t.content, first+uint64(j)<<partWidth, 0)
	}
	var part []boundary
	k, cur := 0, bs[0].result
	for j := 0; j < parts; j++ {
		partFirst := first + uint64(j)<<partWidth
		partLast := partFirst | (1<<partWidth - 1)
		for k < len(bs) && bs[k].start <= partFirst {
			cur = bs[k].result
			k++
		}
		part = append(part[:0], boundary{partFirst, cur})
		for k < len(bs) && bs[k].start <= partLast {
			cur = bs[k].result
			part = append(part, bs[k])
			k++
		}
		t.content[2*(off+j)+1] = t.level1Chunk(part, partFirst, partWidth)
	}
	return chunk(uint32(off), parts) | indexedFlag
}

// sortPfx6 sorts prefixes by address, then length, then input order.
func sortPfx6(ps []pfx6) {
	idx := make([]int32, len(ps))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		if c := cmpPfx6(ps[a], ps[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	sorted := make([]pfx6, len(ps))
	for i, j := range idx {
		sorted[i] = ps[j]
	}
	copy(ps, sorted)
}
