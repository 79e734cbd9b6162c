package compiler

import (
	"fmt"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Address and interface matches: -s, -d, -i, -o, iprange and mac.

func addrMax(f ir.Family) U128 {
	if f == ir.IPv6 {
		return maxU128
	}
	return U64(1<<32 - 1)
}

// addrMask adds -s or -d (a on field f).
func (b *termBuilder) addrMask(f Field, a ir.AddrMatch) error {
	if !a.Set {
		return nil
	}
	s, err := maskSet(b.fam, a.Addr, a.Mask)
	if err != nil {
		return err
	}
	if s != nil || a.Invert {
		b.and(f, invertIf(orAll(s, b.fam), a.Invert, U64(0), addrMax(b.fam)))
	}
	return nil
}

// ipRange adds an iprange match.
func (b *termBuilder) ipRange(m *ir.IPRangeMatch) {
	if m.Src.Set {
		s := Range(AddrU128(m.Src.From), AddrU128(m.Src.To))
		b.and(FieldSrc, invertIf(s, m.Src.Invert, U64(0), addrMax(b.fam)))
	}
	if m.Dst.Set {
		s := Range(AddrU128(m.Dst.From), AddrU128(m.Dst.To))
		b.and(FieldDst, invertIf(s, m.Dst.Invert, U64(0), addrMax(b.fam)))
	}
}

// mac adds a mac match (--mac-source).
func (b *termBuilder) mac(m *ir.MACMatch) {
	var v uint64
	for _, octet := range m.Addr {
		v = v<<8 | uint64(octet)
	}
	b.and(FieldMAC, invertIf(Point(U64(v)), m.Invert, U64(0), macMax))
}

// maskSet returns {a : a & mask == addr & mask} as intervals. A prefix mask
// gives one interval; a non-contiguous mask gives one interval per value of
// the free bits above its lowest set bit, refused beyond maxMaskIntervals.
func maskSet(fam ir.Family, addr, mask netip.Addr) (*Set, error) {
	a, m := AddrU128(addr), AddrU128(mask)
	nbits := fam.AddrBits()
	bit := func(v U128, i int) bool { // i counts from the least significant bit
		if i >= 64 {
			return v.Hi>>(uint(i-64))&1 == 1
		}
		return v.Lo>>uint(i)&1 == 1
	}
	// Lowest set bit of the mask; below it every bit is free.
	low := nbits
	for i := 0; i < nbits; i++ {
		if bit(m, i) {
			low = i
			break
		}
	}
	if low == nbits { // mask 0: any address
		return nil, nil
	}
	var free []int
	for i := low + 1; i < nbits; i++ {
		if !bit(m, i) {
			free = append(free, i)
		}
	}
	if len(free) > maxMaskFreeBits {
		return nil, fmt.Errorf("netmask %s has %d non-contiguous bits: at most %d are supported", mask, len(free), maxMaskFreeBits)
	}
	base := and128(a, m)
	span := U128{} // 2^low - 1
	if low >= 64 {
		span = U128{Hi: 1<<uint(low-64) - 1, Lo: ^uint64(0)}
	} else {
		span = U128{Lo: 1<<uint(low) - 1}
	}
	if len(free) == 0 {
		// A prefix: the set and its one interval in one allocation.
		one := &oneIntervalSet{iv: [1]Interval{{base, or128(base, span)}}}
		one.set.Ivs = one.iv[:]
		return &one.set, nil
	}
	// The set takes ivs as it is (NewSet would copy it).
	ivs := make([]Interval, 0, 1<<len(free))
	for combo := 0; combo < 1<<len(free); combo++ {
		v := base
		for k, b := range free {
			if combo>>k&1 == 1 {
				v = setBit(v, b)
			}
		}
		ivs = append(ivs, Interval{v, or128(v, span)})
	}
	set := &Set{Ivs: ivs}
	set.normalise()
	return set, nil
}

// oneIntervalSet is a Set of one interval allocated with its interval
// (the set of an address and a prefix: -s and -d of every rule). The
// slice's capacity is one, so nothing appends into it in place (sets are
// never changed in place anyway).
type oneIntervalSet struct {
	set Set
	iv  [1]Interval
}

// maxMaskFreeBits bounds non-contiguous netmasks: 2^16 intervals.
const maxMaskFreeBits = 16

func and128(a, b U128) U128 { return U128{a.Hi & b.Hi, a.Lo & b.Lo} }
func or128(a, b U128) U128  { return U128{a.Hi | b.Hi, a.Lo | b.Lo} }
func setBit(v U128, i int) U128 {
	if i >= 64 {
		v.Hi |= 1 << uint(i-64)
	} else {
		v.Lo |= 1 << uint(i)
	}
	return v
}

// orAll turns "nil = any address" from maskSet into an explicit full set
// so it can be inverted.
func orAll(s *Set, fam ir.Family) *Set {
	if s == nil {
		return Range(U64(0), addrMax(fam))
	}
	return s
}

// ifaceSet returns the interface indexes whose names satisfy m, plus the
// "unknown interface" sentinel when any unknown name would.
// Index 0 stands for "no interface" (name ""), as iptables compares an empty
// name on hooks without that device.
func ifaceSet(m ir.IfaceMatch, ifaces []Interface) *Set {
	var ivs []Interval
	if m.Matches("") {
		ivs = append(ivs, Interval{U64(0), U64(0)})
	}
	for _, i := range ifaces {
		if i.Index != 0 && m.Matches(i.Name) {
			ivs = append(ivs, Interval{U64(uint64(i.Index)), U64(uint64(i.Index))})
		}
	}
	// A device the compiler was not told about (created later) matches
	// "+" and negated names; its real name is unknown until the ruleset is
	// compiled again (xfw re-applies on interface changes).
	if (m.Name == "+") != m.Invert {
		ivs = append(ivs, Interval{U64(ifaceUnknown), U64(ifaceUnknown)})
	}
	return NewSet(ivs...)
}
