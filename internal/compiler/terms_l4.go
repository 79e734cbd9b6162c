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
		return Range(U64(0), portMax)
	}
	return invertIf(Range(U64(uint64(pm.Range.First)), U64(uint64(pm.Range.Last))), pm.Invert, U64(0), portMax)
}

// portListSet returns the ports of a multiport list.
func portListSet(ports []ir.PortRange) *Set {
	var ivs []Interval
	for _, p := range ports {
		ivs = append(ivs, Interval{U64(uint64(p.First)), U64(uint64(p.Last))})
	}
	return NewSet(ivs...)
}

// tcp adds a tcp match.
func (b *termBuilder) tcp(m *ir.TCPMatch) error {
	b.hotdropAt(FieldSport, ValTrunc, EFHotdropL4)
	b.and(FieldSport, portSet(m.SrcPort))
	b.and(FieldDport, portSet(m.DstPort))
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
	b.hotdropAt(FieldSport, ValTrunc, EFHotdropL4)
	b.and(FieldSport, portSet(m.SrcPort))
	b.and(FieldDport, portSet(m.DstPort))
}

// multiport adds a multiport match. --ports (either port in the list) is
// a disjunction: it is kept in b.either for terms to split.
func (b *termBuilder) multiport(m *ir.MultiportMatch) error {
	ports := portListSet(m.Ports)
	notPorts := Complement(ports, U64(0), portMax)
	switch {
	case m.Dir == ir.MultiportSource:
		b.and(FieldSport, invertIf(ports, m.Invert, U64(0), portMax))
	case m.Dir == ir.MultiportDestination:
		b.and(FieldDport, invertIf(ports, m.Invert, U64(0), portMax))
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
	t2[FieldSport] = Intersect(c[FieldSport], Complement(ports, U64(0), portMax))
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
