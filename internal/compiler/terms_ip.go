package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// IP header matches: -p, -f, length and ttl.

// proto adds -p.
func (b *termBuilder) proto(p ir.ProtoMatch) {
	// ip6tables sets IP6T_F_PROTO for every -p, "-p all" (protocol 0)
	// included, and ip6_packet_match then walks the extension headers:
	// it hotdrops a packet whose chain cannot be walked (ipv6_find_hdr
	// fails with the fragment offset at 0), "-p all" too (found by the
	// differential test, internal/testkit/difftest; a header running past the
	// packet's end is walkable: ipv6_find_hdr does not read beyond it).
	if b.fam == ir.IPv6 && p.Set {
		b.hotdropAt(FieldProto, ProtoErr, EFHotdropProto)
	}
	// "-p all" (protocol 0, not inverted) otherwise constrains nothing.
	if p.Set && (p.Num != 0 || p.Invert) {
		b.and(FieldProto, invertIf(protoPoints[p.Num], p.Invert, U64(0), byteMax))
	}
}

// protoPoints[p] is the protocol field's set of protocol p alone, made
// once (sets are never changed in place): a -p of every rule of
// kube-proxy's (120,000 at 10K services) made its own.
var protoPoints = func() (pts [256]*Set) {
	for p := range pts {
		pts[p] = Point(U64(uint64(p)))
	}
	return pts
}()

// fragment adds -f.
func (b *termBuilder) fragment(f ir.FlagMatch) {
	if f.Set {
		if f.Invert {
			b.and(FieldFrag, Point(U64(0)))
		} else {
			b.and(FieldFrag, Point(U64(1)))
		}
	}
}

// length adds a length match.
func (b *termBuilder) length(m *ir.LengthMatch) {
	s := Range(U64(uint64(m.Min)), U64(uint64(m.Max)))
	b.and(FieldLen, invertIf(s, m.Invert, U64(0), lenMax))
}

// ttl adds a ttl match.
func (b *termBuilder) ttl(m *ir.TTLMatch) {
	v := uint64(m.Value)
	var s *Set
	switch m.Op {
	case ir.CmpEq:
		s = Point(U64(v))
	case ir.CmpNe:
		s = Complement(Point(U64(v)), U64(0), byteMax)
	case ir.CmpLt:
		if v == 0 {
			s = &Set{}
		} else {
			s = Range(U64(0), U64(v-1))
		}
	case ir.CmpGt:
		s = Range(U64(v+1), byteMax)
	}
	b.and(FieldTTL, s)
}
