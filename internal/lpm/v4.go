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
// ranges and its direct word (chunk at index 0 of the block). The chunk's first range is the
// default range (the whole direct entry, the answer of the longest short
// prefix covering it); the others are the runs of addresses whose answer
// differs from the default, so gaps between them answer the default.
func (t *Table) build4(s int) (word uint64, content []uint64) {
	return t.block4(s, t.shortVal[s], t.long4[s])
}

// block4 is build4 with the default answer and the prefixes longer than
// the direct index given (sorted by cmpPfx4, no duplicates).
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
	t.content = append(t.content[:0], range4(uint32(first), uint32(last), defVal))
	for i, b := range out {
		if b.result == def {
			continue
		}
		end := last
		if i+1 < len(out) {
			end = out[i+1].start - 1
		}
		t.content = append(t.content, range4(uint32(b.start), uint32(end), uint32(b.result)))
	}
	word = chunk(0, uint32(len(t.content)))
	if defVal == 0 {
		word |= zeroDefaultFlag
	}
	return word, t.content
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
