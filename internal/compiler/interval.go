package compiler

import (
	"math/bits"
	"net/netip"
	"slices"
	"sort"
)

// U128 is an unsigned 128-bit number: a field value (an IPv6 address is the
// widest field). Smaller fields use Lo only.
type U128 struct {
	Hi, Lo uint64
}

// Less reports a < b.
func (a U128) Less(b U128) bool {
	return a.Hi < b.Hi || (a.Hi == b.Hi && a.Lo < b.Lo)
}

// Cmp returns -1, 0 or 1.
func (a U128) Cmp(b U128) int {
	switch {
	case a == b:
		return 0
	case a.Less(b):
		return -1
	}
	return 1
}

// Inc returns a+1 (wrapping).
func (a U128) Inc() U128 {
	lo, carry := bits.Add64(a.Lo, 1, 0)
	return U128{a.Hi + carry, lo}
}

// Dec returns a-1 (wrapping).
func (a U128) Dec() U128 {
	lo, borrow := bits.Sub64(a.Lo, 1, 0)
	return U128{a.Hi - borrow, lo}
}

// maxU128 is the largest 128-bit value.
var maxU128 = U128{^uint64(0), ^uint64(0)}

// U64 returns a small value as a U128.
func U64(v uint64) U128 { return U128{Lo: v} }

// AddrU128 converts an address to its numeric value (IPv4 in Lo).
func AddrU128(a netip.Addr) U128 {
	if a.Is4() {
		b := a.As4()
		return U128{Lo: uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
	}
	b := a.As16()
	var hi, lo uint64
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	return U128{hi, lo}
}

// Interval is an inclusive range [Lo, Hi] of field values.
type Interval struct {
	Lo, Hi U128
}

// Set is a set of field values as sorted, disjoint, non-adjacent intervals.
// A nil *Set in a condition means "any value" (the field is a wildcard).
type Set struct {
	Ivs []Interval
}

// NewSet returns the normalised union of the given intervals.
func NewSet(ivs ...Interval) *Set {
	s := &Set{Ivs: append([]Interval(nil), ivs...)}
	s.normalise()
	return s
}

// Point returns the set {v}.
func Point(v U128) *Set { return &Set{Ivs: []Interval{{v, v}}} }

// Range returns the set [lo, hi], empty when lo > hi.
func Range(lo, hi U128) *Set {
	if hi.Less(lo) {
		return &Set{}
	}
	return &Set{Ivs: []Interval{{lo, hi}}}
}

func (s *Set) normalise() {
	if len(s.Ivs) < 2 {
		return
	}
	if !slices.IsSortedFunc(s.Ivs, cmpLo) {
		slices.SortFunc(s.Ivs, cmpLo)
	}
	out := s.Ivs[:1]
	for _, iv := range s.Ivs[1:] {
		last := &out[len(out)-1]
		// Overlapping or adjacent: iv.Lo <= last.Hi+1 (last.Hi may be
		// the largest value, whose +1 wraps).
		if last.Hi == maxU128 || !last.Hi.Inc().Less(iv.Lo) {
			if last.Hi.Less(iv.Hi) {
				last.Hi = iv.Hi
			}
			continue
		}
		out = append(out, iv)
	}
	s.Ivs = out
}

// cmpLo orders intervals by their lower ends.
func cmpLo(a, b Interval) int {
	switch {
	case a.Lo.Less(b.Lo):
		return -1
	case b.Lo.Less(a.Lo):
		return 1
	}
	return 0
}

// Empty reports whether the set has no value.
func (s *Set) Empty() bool { return s != nil && len(s.Ivs) == 0 }

// Contains reports whether v is in the set (nil: everything).
func (s *Set) Contains(v U128) bool {
	if s == nil {
		return true
	}
	i := sort.Search(len(s.Ivs), func(i int) bool { return !s.Ivs[i].Hi.Less(v) })
	return i < len(s.Ivs) && !v.Less(s.Ivs[i].Lo)
}

// Union returns s ∪ t (nil is the universe).
func Union(s, t *Set) *Set {
	if s == nil || t == nil {
		return nil
	}
	u := &Set{Ivs: make([]Interval, 0, len(s.Ivs)+len(t.Ivs))}
	u.Ivs = append(append(u.Ivs, s.Ivs...), t.Ivs...)
	u.normalise()
	return u
}

// Intersect returns s ∩ t (nil is the universe).
func Intersect(s, t *Set) *Set {
	if s == nil {
		return t
	}
	if t == nil {
		return s
	}
	out := &Set{}
	i, j := 0, 0
	for i < len(s.Ivs) && j < len(t.Ivs) {
		a, b := s.Ivs[i], t.Ivs[j]
		lo, hi := a.Lo, a.Hi
		if lo.Less(b.Lo) {
			lo = b.Lo
		}
		if b.Hi.Less(hi) {
			hi = b.Hi
		}
		if !hi.Less(lo) {
			out.Ivs = append(out.Ivs, Interval{lo, hi})
		}
		if a.Hi.Less(b.Hi) {
			i++
		} else {
			j++
		}
	}
	return out
}

// Complement returns [lo, hi] \ s.
func Complement(s *Set, lo, hi U128) *Set {
	if s == nil {
		return &Set{}
	}
	out := &Set{}
	cur := lo
	done := false
	for _, iv := range s.Ivs {
		if iv.Hi.Less(lo) || hi.Less(iv.Lo) {
			continue
		}
		if cur.Less(iv.Lo) {
			out.Ivs = append(out.Ivs, Interval{cur, iv.Lo.Dec()})
		}
		if !iv.Hi.Less(hi) {
			done = true
			break
		}
		cur = iv.Hi.Inc()
	}
	if !done {
		out.Ivs = append(out.Ivs, Interval{cur, hi})
	}
	return out
}
