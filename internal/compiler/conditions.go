package compiler

import (
	"fmt"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Cond is a conjunction: for each field the set of values a packet may have
// (nil: any value). FieldCt's set holds keys (ctKey), not values.
type Cond [NumFields]*Set

// and returns c ∧ d, and false when the result can match no packet.
func (c Cond) and(d Cond) (Cond, bool) {
	var out Cond
	for f := range c {
		out[f] = Intersect(c[f], d[f])
		if out[f].Empty() {
			return out, false
		}
	}
	return out, true
}

// term is one disjunct of a rule's condition. A hotdrop term is where
// netfilter drops the packet while evaluating the rule (a tcp/udp/icmp match
// that cannot read its header, ip6tables' -p on an unwalkable extension
// chain): it comes before the rule's other terms and drops, uncounted.
type term struct {
	cond    Cond
	hotdrop bool
	// flags are EFHotdrop* of a merged term: the rule's own entry drops a
	// packet with those defects instead of a separate hotdrop entry.
	flags uint8
}

// isL4 reports whether f is read by the transport matches (tcp, udp, icmp,
// multiport), whose sets may take the cut-short sentinels.
func isL4(f Field) bool {
	return f == FieldSport || f == FieldDport || f == FieldTCPFlags || f == FieldICMP
}

// Interface is a network device the compiler resolves -i/-o names against.
type Interface struct {
	Index uint32
	Name  string
}

// Numeric domains of the fields (sentinels excluded).
var (
	portMax  = U64(65535)
	byteMax  = U64(255)
	macMax   = U64(1<<48 - 1)
	lenMax   = U64(65535)
	icmpMax  = U64(65535)
	ifaceMax = U64(ifaceUnknown)
)

func addrMax(f ir.Family) U128 {
	if f == ir.IPv6 {
		return maxU128
	}
	return U64(1<<32 - 1)
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
	var ivs []Interval
	for combo := 0; combo < 1<<len(free); combo++ {
		v := base
		for k, b := range free {
			if combo>>k&1 == 1 {
				v = setBit(v, b)
			}
		}
		ivs = append(ivs, Interval{v, or128(v, span)})
	}
	return NewSet(ivs...), nil
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

func invertIf(s *Set, inv bool, lo, hi U128) *Set {
	if !inv {
		return s
	}
	return Complement(s, lo, hi)
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

// ruleTerms translates a rule's matches into disjoint conjunctions.
// Set matches take their FieldSets bit from sets.
func ruleTerms(fam ir.Family, r *ir.Rule, ifaces []Interface, sets *setConds) ([]term, error) {
	var c Cond
	var hot []term
	// dirty: a constraint on a non-transport field follows a hotdrop
	// point, so the hotdrop terms cannot be merged into the rule's term.
	dirty := false
	var hotFlags uint8
	and := func(f Field, s *Set) {
		c[f] = Intersect(c[f], s)
		if len(hot) > 0 && !isL4(f) {
			dirty = true
		}
	}
	// hotdropAt records the condition under which evaluation reaches a
	// match that hotdrops: everything before it, plus the sentinel value of
	// a cut-short header. Later hotdrop terms exclude earlier ones, since
	// the conditions before them exclude the sentinel.
	hotdropAt := func(f Field, sentinel uint64, flag uint8) {
		h := c
		h[f] = Intersect(h[f], Point(U64(sentinel)))
		if !h[f].Empty() {
			hot = append(hot, term{cond: h, hotdrop: true})
			hotFlags |= flag
		}
	}

	if r.Src.Set {
		s, err := maskSet(fam, r.Src.Addr, r.Src.Mask)
		if err != nil {
			return nil, err
		}
		if s != nil || r.Src.Invert {
			and(FieldSrc, invertIf(orAll(s, fam), r.Src.Invert, U64(0), addrMax(fam)))
		}
	}
	if r.Dst.Set {
		s, err := maskSet(fam, r.Dst.Addr, r.Dst.Mask)
		if err != nil {
			return nil, err
		}
		if s != nil || r.Dst.Invert {
			and(FieldDst, invertIf(orAll(s, fam), r.Dst.Invert, U64(0), addrMax(fam)))
		}
	}
	if r.InIface.Set {
		and(FieldIIF, ifaceSet(r.InIface, ifaces))
	}
	if r.OutIface.Set {
		and(FieldOIF, ifaceSet(r.OutIface, ifaces))
	}
	// ip6tables sets IP6T_F_PROTO for every -p, "-p all" (protocol 0)
	// included, and ip6_packet_match then walks the extension headers:
	// it hotdrops a packet whose chain cannot be walked (ipv6_find_hdr
	// fails with the fragment offset at 0), "-p all" too (found by the
	// differential test, internal/difftest; a header running past the
	// packet's end is walkable: ipv6_find_hdr does not read beyond it).
	if fam == ir.IPv6 && r.Proto.Set {
		hotdropAt(FieldProto, ProtoErr, EFHotdropProto)
	}
	// "-p all" (protocol 0, not inverted) otherwise constrains nothing.
	if r.Proto.Set && (r.Proto.Num != 0 || r.Proto.Invert) {
		and(FieldProto, invertIf(Point(U64(uint64(r.Proto.Num))), r.Proto.Invert, U64(0), byteMax))
	}
	if r.Fragment.Set {
		if r.Fragment.Invert {
			and(FieldFrag, Point(U64(0)))
		} else {
			and(FieldFrag, Point(U64(1)))
		}
	}
	var either *ir.MultiportMatch
	var alt *ctAlt
	var ctOther *Set // FieldCt conditions of conntrack matches without tuple options
	for _, m := range r.Matches {
		switch m := m.(type) {
		case *ir.TCPMatch:
			if m.Option.Set {
				return nil, fmt.Errorf("tcp match: --tcp-option is not supported by xfw's data plane")
			}
			hotdropAt(FieldSport, ValTrunc, EFHotdropL4)
			and(FieldSport, portSet(m.SrcPort))
			and(FieldDport, portSet(m.DstPort))
			if m.Flags.Set {
				var ivs []Interval
				for b := 0; b < 256; b++ {
					if (uint8(b)&m.Flags.Mask == m.Flags.Comp) != m.Flags.Invert {
						ivs = append(ivs, Interval{U64(uint64(b)), U64(uint64(b))})
					}
				}
				and(FieldTCPFlags, NewSet(ivs...))
			}
		case *ir.UDPMatch:
			hotdropAt(FieldSport, ValTrunc, EFHotdropL4)
			and(FieldSport, portSet(m.SrcPort))
			and(FieldDport, portSet(m.DstPort))
		case *ir.MultiportMatch:
			var ivs []Interval
			for _, p := range m.Ports {
				ivs = append(ivs, Interval{U64(uint64(p.First)), U64(uint64(p.Last))})
			}
			ports := NewSet(ivs...)
			notPorts := Complement(ports, U64(0), portMax)
			switch {
			case m.Dir == ir.MultiportSource:
				and(FieldSport, invertIf(ports, m.Invert, U64(0), portMax))
			case m.Dir == ir.MultiportDestination:
				and(FieldDport, invertIf(ports, m.Invert, U64(0), portMax))
			case m.Invert: // neither port in the list
				and(FieldSport, notPorts)
				and(FieldDport, notPorts)
			default:
				if either != nil {
					return nil, fmt.Errorf("multiport: only one --ports match per rule is supported")
				}
				either = m
			}
		case *ir.ICMPMatch:
			hotdropAt(FieldICMP, ValTrunc, EFHotdropL4)
			var s *Set
			if m.Any {
				s = Range(U64(0), icmpMax)
			} else {
				t := uint64(m.Type) << 8
				s = Range(U64(t|uint64(m.CodeMin)), U64(t|uint64(m.CodeMax)))
			}
			and(FieldICMP, invertIf(s, m.Invert, U64(0), icmpMax))
		case *ir.IPRangeMatch:
			if m.Src.Set {
				s := Range(AddrU128(m.Src.From), AddrU128(m.Src.To))
				and(FieldSrc, invertIf(s, m.Src.Invert, U64(0), addrMax(fam)))
			}
			if m.Dst.Set {
				s := Range(AddrU128(m.Dst.From), AddrU128(m.Dst.To))
				and(FieldDst, invertIf(s, m.Dst.Invert, U64(0), addrMax(fam)))
			}
		case *ir.CommentMatch:
			// Always matches.
		case *ir.LengthMatch:
			s := Range(U64(uint64(m.Min)), U64(uint64(m.Max)))
			and(FieldLen, invertIf(s, m.Invert, U64(0), lenMax))
		case *ir.TTLMatch:
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
			and(FieldTTL, s)
		case *ir.MACMatch:
			var v uint64
			for _, b := range m.Addr {
				v = v<<8 | uint64(b)
			}
			and(FieldMAC, invertIf(Point(U64(v)), m.Invert, U64(0), macMax))
		case *ir.ConntrackMatch:
			s, err := ctCondition(m)
			if err != nil {
				return nil, err
			}
			if !ctHasTuple(m) {
				and(FieldCt, s)
				ctOther = Intersect(ctOther, s)
				break
			}
			if alt != nil {
				return nil, fmt.Errorf("conntrack match: one conntrack match per rule may test the connection's addresses or ports")
			}
			// A packet without a connection passes the match on its
			// state alone (conntrack_mt returns before the tuple
			// tests): that part becomes a term of its own (ctAlt).
			alt = &ctAlt{noConn: Intersect(s, ctNoConnKeys), hotFrom: len(hot)}
			and(FieldCt, Intersect(s, ctConnKeys))
			if err := ctTupleConds(fam, m, and); err != nil {
				return nil, err
			}
		case *ir.SetMatch:
			s, err := sets.condition(m)
			if err != nil {
				return nil, err
			}
			and(FieldSets, s)
		default:
			return nil, fmt.Errorf("match %q is not supported by xfw's data plane", m.ModuleName())
		}
	}
	var terms []term
	switch {
	case either == nil && len(hot) > 0 && !dirty:
		terms = []term{mergeHotdrop(c, hotFlags)}
	case either == nil:
		terms = append(hot, term{cond: c})
	default:
		// --ports P: (sport ∈ P) ∨ (dport ∈ P), split into disjoint terms
		// so a packet matching both is counted and acted on once.
		var ivs []Interval
		for _, p := range either.Ports {
			ivs = append(ivs, Interval{U64(uint64(p.First)), U64(uint64(p.Last))})
		}
		ports := NewSet(ivs...)
		t1, t2 := c, c
		t1[FieldSport] = Intersect(c[FieldSport], ports)
		t2[FieldSport] = Intersect(c[FieldSport], Complement(ports, U64(0), portMax))
		t2[FieldDport] = Intersect(c[FieldDport], ports)
		terms = append(hot, term{cond: t1}, term{cond: t2})
	}
	if alt != nil {
		terms = alt.expand(terms, ctOther)
	}
	return terms, nil
}

// ctAlt is the second way through a conntrack match that tests the
// connection's tuple: a packet without a connection (INVALID, UNTRACKED)
// passes on its state alone, whatever the tuple options say.
type ctAlt struct {
	noConn  *Set // FieldCt keys without a connection that pass the match
	hotFrom int  // hotdrop terms before this index came before the match
}

// expand adds, for each term the match's tuple conditions reach, its twin
// for packets without a connection: FieldCt limited to alt.noConn (and the
// rule's other conntrack matches, other), no tuple condition. The twins
// are disjoint from their terms (no connection against a connection).
func (alt *ctAlt) expand(terms []term, other *Set) []term {
	if alt.noConn.Empty() {
		return terms
	}
	out := terms
	for i, t := range terms {
		if t.hotdrop && i < alt.hotFrom {
			continue // reached before the conntrack match
		}
		tw := t
		tw.cond[FieldCt] = Intersect(other, alt.noConn)
		for _, f := range ctTupleFields {
			tw.cond[f] = nil
		}
		out = append(out, tw)
	}
	return out
}

// mergeHotdrop folds a rule's hotdrop terms into its own term: every
// condition before the hotdrop point is the rule's whole condition apart from
// the transport fields, so adding the cut-short sentinels to those fields
// (and "extension chain error" to the protocol) and flagging the entry makes
// it match exactly the defective packets the kernel would hotdrop there. One
// entry per rule instead of two keeps the bit vectors half as wide.
func mergeHotdrop(c Cond, flags uint8) term {
	if flags&EFHotdropProto != 0 {
		c[FieldProto] = Union(c[FieldProto], Point(U64(ProtoErr)))
	}
	for _, f := range []Field{FieldSport, FieldDport, FieldICMP} {
		if c[f] != nil {
			c[f] = Union(c[f], Point(U64(ValTrunc)))
		}
	}
	if c[FieldTCPFlags] != nil {
		c[FieldTCPFlags] = Union(c[FieldTCPFlags], Point(U64(FlagsTrunc)))
	}
	return term{cond: c, flags: flags}
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
