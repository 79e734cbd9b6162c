package lpm

import (
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
		if bits <= directBits {
			t.addShort(uint16(a>>16), bits, e.Value)
			continue
		}
		long = append(long, pfx4{addr: a, bits: uint8(bits), value: e.Value})
	}
	// Of equal prefixes the later entry wins: a stable sort keeps input
	// order among them, and the last of each run is kept.
	slices.SortStableFunc(long, cmpPfx4)
	kept := long[:0]
	for i, p := range long {
		if i+1 < len(long) && cmpPfx4(p, long[i+1]) == 0 {
			continue
		}
		kept = append(kept, p)
	}
	t.count += len(kept)
	t.long4 = make([][]pfx4, DirectEntries)
	for i := 0; i < len(kept); {
		s := kept[i].addr >> 16
		j := i + 1
		for j < len(kept) && kept[j].addr>>16 == s {
			j++
		}
		t.long4[s] = kept[i:j:j]
		i = j
	}
	return nil
}

// insert4 adds or changes an IPv4 prefix (masked) and returns the direct
// entries to rebuild.
func (t *Table) insert4(p netip.Prefix, value uint32) (first, n int) {
	a, bits := addr4(p.Addr()), p.Bits()
	if bits <= directBits {
		first, n, _ = t.addShort(uint16(a>>16), bits, value)
		return first, n
	}
	s := int(a >> 16)
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
	if bits <= directBits {
		return t.deleteShort(uint16(a>>16), bits)
	}
	s := int(a >> 16)
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
// value answers for the whole /16 (content nil), else the chunk's ranges.
func (t *Table) build4(s int) (word uint64, content []uint64) {
	def := leaf(t.shortVal[s])
	list := t.long4[s]
	if len(list) == 0 {
		return def, nil
	}
	t.spans = t.spans[:0]
	for _, p := range list {
		t.spans = append(t.spans, span{first: uint64(p.addr), last: uint64(p.addr | hostMask4(p.bits)), result: leaf(p.value)})
	}
	first := uint64(s) << 16
	out := t.sw.sweep(first, first|0xffff, def, t.spans)
	if len(out) == 1 {
		return out[0].result, nil
	}
	t.content = t.content[:0]
	for _, b := range out {
		t.content = append(t.content, range4(uint32(b.start), uint32(b.result)))
	}
	return 0, t.content
}
