package lpm

import (
	"fmt"
	"net/netip"
)

// Patching tables that live elsewhere. A Table patches its own arrays; a
// table kept only as its flat arrays (BPF maps that outlive the process
// that built them) is patched one direct entry at a time instead: the
// caller finds the direct entries a changed prefix touches (DirectSpan),
// gathers the prefixes that decide each (those covering it, and those
// within it: DirectRange), builds the entry's new block at free space of
// its range table (BuildBlock), writes the block, then switches the direct
// entry with one aligned 8-byte store, as a Patch is applied.

// DirectSpan returns the direct entries the prefix covers: first and
// their number (one for a prefix longer than the direct index).
func DirectSpan(family Family, prefix netip.Prefix) (first, n int, err error) {
	t := &Table{family: family, dbits: family.DirectBits()}
	p, err := t.checkEntry(Entry{Prefix: prefix, Value: 1})
	if err != nil {
		return 0, 0, fmt.Errorf("lpm: direct span: %w", err)
	}
	top, bits := directTop(family, p.Addr()), p.Bits()
	if bits >= t.dbits {
		return int(top), 1, nil
	}
	shift := t.dbits - bits
	return int(top >> shift << shift), 1 << shift, nil
}

// DirectRange returns the first and last addresses direct entry s covers.
func DirectRange(family Family, s int) (first, last netip.Addr) {
	if family == IPv4 {
		a := uint32(s) << (32 - Direct4Bits)
		return addrFrom4(a), addrFrom4(a | hostMask4(Direct4Bits))
	}
	hi := uint64(s) << (64 - Direct6Bits)
	return fromHalves(hi, 0), fromHalves(hi|hostMask64(Direct6Bits), ^uint64(0))
}

// BuildBlock returns the direct word of direct entry s and its block (nil
// when the word is a leaf), placed at range index base of the range table,
// from entries: every prefix of the table that covers or lies within the
// direct entry (others are ignored; of equal prefixes the later wins).
// The block is what a Table holding the same prefixes would build.
func BuildBlock(family Family, s int, entries []Entry, base uint32) (word uint64, content []uint64, err error) {
	if family != IPv4 && family != IPv6 {
		return 0, nil, fmt.Errorf("lpm: build block: unknown family %d", family)
	}
	if s < 0 || s >= family.DirectEntries() {
		return 0, nil, fmt.Errorf("lpm: build block: direct entry %d of %d", s, family.DirectEntries())
	}
	t := &Table{family: family, words: family.rangeWords(), dbits: family.DirectBits()}
	defLen, defVal := -1, uint32(0)
	var long4 []pfx4
	var long6 []pfx6
	for _, e := range entries {
		p, err := t.checkEntry(e)
		if err != nil {
			return 0, nil, fmt.Errorf("lpm: build block: %w", err)
		}
		top, bits := directTop(family, p.Addr()), p.Bits()
		if bits <= t.dbits {
			if top>>(t.dbits-bits) == uint32(s)>>(t.dbits-bits) && bits >= defLen {
				defLen, defVal = bits, e.Value
			}
			continue
		}
		if int(top) != s {
			continue
		}
		if family == IPv4 {
			long4 = append(long4, pfx4{addr: addr4(p.Addr()), bits: uint8(bits), value: e.Value})
		} else {
			hi, lo := halves(p.Addr())
			long6 = append(long6, pfx6{hi: hi, lo: lo, bits: uint8(bits), value: e.Value})
		}
	}
	if family == IPv4 {
		sortPfx4(long4)
		lists, _ := groupByDirect(long4, cmpPfx4, 1, func(pfx4) uint32 { return 0 })
		word, content = t.block4(s, defVal, lists[0])
	} else {
		sortPfx6(long6)
		lists, _ := groupByDirect(long6, cmpPfx6, 1, func(pfx6) uint32 { return 0 })
		if word, content, err = t.block6(s, defVal, lists[0]); err != nil {
			return 0, nil, fmt.Errorf("lpm: build block: %w", err)
		}
	}
	if content == nil {
		return word, nil, nil
	}
	content = append([]uint64(nil), content...)
	relocate(content, t.words, int64(base))
	return relocateWord(word, int64(base)), content, nil
}

// directTop returns the direct entry of an address of the family.
func directTop(family Family, a netip.Addr) uint32 {
	if family == IPv4 {
		return addr4(a) >> (32 - Direct4Bits)
	}
	hi, _ := halves(a)
	return uint32(hi >> (64 - Direct6Bits))
}

// addrFrom4 returns the IPv4 address a.
func addrFrom4(a uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
}
