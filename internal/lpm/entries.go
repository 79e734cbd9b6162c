package lpm

import (
	"net/netip"
	"slices"
)

// Get returns the value of the prefix (host bits cleared) and whether the
// table holds it (exact prefix, not longest match: ipset's "test" of a net).
func (t *Table) Get(prefix netip.Prefix) (uint32, bool) {
	if !prefix.IsValid() || t.checkFamily(prefix) != nil {
		return 0, false
	}
	p := prefix.Masked()
	bits := p.Bits()
	if t.family == IPv4 {
		a := addr4(p.Addr())
		if bits <= Direct4Bits {
			v, ok := t.short[bits][a>>(32-Direct4Bits)]
			return v, ok
		}
		list := t.long4[a>>(32-Direct4Bits)]
		i, ok := slices.BinarySearchFunc(list, pfx4{addr: a, bits: uint8(bits)}, cmpPfx4)
		if !ok {
			return 0, false
		}
		return list[i].value, true
	}
	hi, lo := halves(p.Addr())
	if bits <= Direct6Bits {
		v, ok := t.short[bits][uint32(hi>>(64-Direct6Bits))]
		return v, ok
	}
	list := t.long6[hi>>(64-Direct6Bits)]
	i, ok := slices.BinarySearchFunc(list, pfx6{hi: hi, lo: lo, bits: uint8(bits)}, cmpPfx6)
	if !ok {
		return 0, false
	}
	return list[i].value, true
}

// Entries returns every prefix of the table with its value, ordered by
// address, then length (what `ipset save` lists).
func (t *Table) Entries() []Entry {
	out := make([]Entry, 0, t.count)
	for bits, m := range t.short {
		for top, v := range m {
			out = append(out, Entry{t.shortPrefix(top, bits), v})
		}
	}
	for _, list := range t.long4 {
		for _, p := range list {
			a := addrFrom4(p.addr)
			out = append(out, Entry{netip.PrefixFrom(a, int(p.bits)), p.value})
		}
	}
	for _, list := range t.long6 {
		for _, p := range list {
			out = append(out, Entry{netip.PrefixFrom(fromHalves(p.hi, p.lo), int(p.bits)), p.value})
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		return a.Prefix.Bits() - b.Prefix.Bits()
	})
	return out
}

// shortPrefix rebuilds a short prefix from its top bits (the direct index).
func (t *Table) shortPrefix(top uint32, bits int) netip.Prefix {
	if t.family == IPv4 {
		a := top << (32 - Direct4Bits)
		return netip.PrefixFrom(addrFrom4(a), bits)
	}
	return netip.PrefixFrom(fromHalves(uint64(top)<<(64-Direct6Bits), 0), bits)
}

// fromHalves is the IPv6 address of two 64-bit halves.
func fromHalves(hi, lo uint64) netip.Addr {
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}
