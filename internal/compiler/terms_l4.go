package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Transport matches: tcp, udp, multiport and icmp.

// isL4 reports whether f is read by the transport matches (tcp, udp, icmp,
// multiport), whose sets may take the cut-short sentinels.
func isL4(f Field) bool {
	return f == FieldSport || f == FieldDport || f == FieldTCPFlags || f == FieldICMP
}

// portSet returns the ports a tcp/udp --sport/--dport option accepts: all
// of 0–65535 when the option is absent (the match still needs a readable
// header of a first fragment, so the sentinels stay out).
func portSet(pm ir.PortMatch) *Set {
	if !pm.Set {
		return portsAll
	}
	return invertIf(Range(U64(uint64(pm.Range.First)), U64(uint64(pm.Range.Last))), pm.Invert, U64(0), portMax)
}

// portsAll is every port value, the port field of a tcp or udp match
// without the option; made once (sets are never changed in place), and
// mergeHotdrop finds it by its pointer (portsAllHot).
var portsAll = Range(U64(0), portMax)

// shortPortsAll is every port value of a TCP or UDP header cut short
// after its ports (ValShort + port).
var shortPortsAll = Range(U64(ValShort), U64(ValShort+65535))

// truncOrShortPorts are the port values of a header cut short before or
// after its ports (ValTrunc, shortPortsAll), made once for l4Hotdrop.
var truncOrShortPorts = Union(Point(U64(ValTrunc)), shortPortsAll)

// withShort returns the port values s and their cut-short twins (ValShort
// + port): the values multiport (which reads four bytes) sees as s.
func withShort(s *Set) *Set {
	ivs := append([]Interval(nil), s.Ivs...)
	for _, iv := range s.Ivs {
		ivs = append(ivs, Interval{U64(iv.Lo.Lo + ValShort), U64(iv.Hi.Lo + ValShort)})
	}
	return NewSet(ivs...)
}

// portListSet returns the port values a multiport list accepts, full and
// cut-short headers alike.
func portListSet(ports []ir.PortRange) *Set {
	var ivs []Interval
	for _, p := range ports {
		ivs = append(ivs, Interval{U64(uint64(p.First)), U64(uint64(p.Last))})
	}
	return withShort(NewSet(ivs...))
}

// notPortListSet returns the port values a multiport list does not
// accept, full and cut-short headers alike (not the sentinels).
func notPortListSet(ports []ir.PortRange) *Set {
	var ivs []Interval
	for _, p := range ports {
		ivs = append(ivs, Interval{U64(uint64(p.First)), U64(uint64(p.Last))})
	}
	return withShort(Complement(NewSet(ivs...), U64(0), portMax))
}

// l4Hotdrop records where the tcp or udp match hotdrops: a header cut
// short, before or after its ports.
func (b *termBuilder) l4Hotdrop() {
	h := b.c
	h[FieldSport] = Intersect(h[FieldSport], truncOrShortPorts)
	if !h[FieldSport].Empty() {
		b.hotdropTerms(h)
		b.hotFlags |= EFHotdropL4
		b.hotShort = true
	}
}

// tcp adds a tcp match.
func (b *termBuilder) tcp(m *ir.TCPMatch) error {
	b.l4Hotdrop()
	b.and(FieldSport, b.portSet(FieldSport, m.SrcPort))
	b.and(FieldDport, b.portSet(FieldDport, m.DstPort))
	if m.Flags.Set {
		var ivs []Interval
		for f := 0; f < 256; f++ {
			if (uint8(f)&m.Flags.Mask == m.Flags.Comp) != m.Flags.Invert {
				ivs = append(ivs, Interval{U64(uint64(f)), U64(uint64(f))})
			}
		}
		b.and(FieldTCPFlags, NewSet(ivs...))
	}
	if m.Option.Set {
		return b.tcpOption(m.Option)
	}
	return nil
}

// udp adds a udp match.
func (b *termBuilder) udp(m *ir.UDPMatch) {
	b.l4Hotdrop()
	b.and(FieldSport, b.portSet(FieldSport, m.SrcPort))
	b.and(FieldDport, b.portSet(FieldDport, m.DstPort))
}

// multiport adds a multiport match (multiport_mt): it reads the first
// four bytes of the header, however short the rest (the ValShort values),
// and hotdrops a first fragment without them (an entry of its own: the
// EFHotdropL4 flag of a merged entry would also drop the cut-short headers
// it reads). --ports (either port in the list) is a disjunction: it is
// kept in b.either for terms to split.
func (b *termBuilder) multiport(m *ir.MultiportMatch) error {
	h := b.c
	h[FieldSport] = Intersect(h[FieldSport], Point(U64(ValTrunc)))
	h[FieldFrag] = Intersect(h[FieldFrag], Point(U64(0)))
	if !h[FieldSport].Empty() && !h[FieldFrag].Empty() {
		b.hotdropTerms(h)
		b.dirty = true
	}
	ports, notPorts := portListSet(m.Ports), notPortListSet(m.Ports)
	pick := func(inv bool) *Set {
		if inv {
			return notPorts
		}
		return ports
	}
	switch {
	case m.Dir == ir.MultiportSource:
		b.and(FieldSport, pick(m.Invert))
	case m.Dir == ir.MultiportDestination:
		b.and(FieldDport, pick(m.Invert))
	case m.Invert: // neither port in the list
		b.and(FieldSport, notPorts)
		b.and(FieldDport, notPorts)
	default:
		if b.either != nil {
			return fmt.Errorf("multiport: only one --ports match per rule is supported")
		}
		b.either = m
	}
	return nil
}

// eitherPortTerms splits c under --ports P, (sport ∈ P) ∨ (dport ∈ P), into
// disjoint terms so a packet matching both is counted and acted on once.
func eitherPortTerms(c Cond, either *ir.MultiportMatch) []term {
	ports := portListSet(either.Ports)
	t1, t2 := c, c
	t1[FieldSport] = Intersect(c[FieldSport], ports)
	t2[FieldSport] = Intersect(c[FieldSport], notPortListSet(either.Ports))
	t2[FieldDport] = Intersect(c[FieldDport], ports)
	return []term{{cond: t1}, {cond: t2}}
}

// icmp adds an icmp or icmp6 match.
func (b *termBuilder) icmp(m *ir.ICMPMatch) {
	b.hotdropAt(FieldICMP, ValTrunc, EFHotdropL4)
	var s *Set
	if m.Any {
		s = Range(U64(0), icmpMax)
	} else {
		t := uint64(m.Type) << 8
		s = Range(U64(t|uint64(m.CodeMin)), U64(t|uint64(m.CodeMax)))
	}
	b.and(FieldICMP, invertIf(s, m.Invert, U64(0), icmpMax))
}
