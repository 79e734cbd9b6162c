package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Set matches (-m set --match-set NAME DIRS) become conditions on one small
// field, FieldSets, whose value is a bit mask: bit k tells whether the
// packet matches set condition k of the generation, a distinct (set name,
// directions, --return-nomatch) triple. The data plane computes the bits by
// looking the packet up in the sets (Generation.SetConds says what to look
// up for each bit); the classifier only sees an 8-bit value. A rule with
// "--match-set S src" requires bit k = 1, with "! --match-set S src" bit
// k = 0. "!" is not part of a condition: both spellings share the bit.
//
// Set entry counters (sets created with "counters") are updated by
// counting probes (EFSetCount, flatten.go setProbes) placed before each
// rule whose set match counts (Options.SetCounts; "! --update-counters" and
// "! --update-subcounters" shape it). --packets-* and --bytes-*, which
// compare those counters inside the match (the kernel then goes on to
// shorter prefixes when an element's counters fail), are refused.

// MaxSetConds is how many distinct set conditions one family's ruleset may
// use: the width of FieldSets' value.
const MaxSetConds = 8

// SetCond is one set condition: what the data plane evaluates for one bit
// of FieldSets.
type SetCond struct {
	// Family is the generation's family (the packet's addresses are looked
	// up as such; list:set members of the other family never match).
	Family ir.Family
	// Name is the ipset's name.
	Name string
	// Dirs are the directions of the packet's parts looked up in the set
	// (src,dst,…), one per dimension.
	Dirs ir.SetDirs
	// ReturnNomatch is --return-nomatch: in a set type with nomatch
	// entries, an element matched by a nomatch entry makes the condition
	// true, one matched by a plain entry false (other types ignore it).
	ReturnNomatch bool
}

// setConds allocates the set conditions of one compilation, in the order
// the flattener first meets them.
type setConds struct {
	fam   ir.Family
	conds []SetCond
	// ext6 numbers the IPv6 extension header matches the same way
	// (terms_ip6ext.go).
	ext6 *ext6Conds
	// hdr4 numbers the transport header conditions (terms_hdr4.go).
	hdr4 *hdr4Conds
}

// index returns the bit of the condition m tests, allocating one for a
// condition not seen before.
func (sc *setConds) index(m *ir.SetMatch) (int, error) {
	want := SetCond{Family: sc.fam, Name: m.Name, Dirs: m.Dirs, ReturnNomatch: m.ReturnNomatch}
	for k, c := range sc.conds {
		if c == want {
			return k, nil
		}
	}
	if len(sc.conds) == MaxSetConds {
		return 0, fmt.Errorf("set match %s: xfw supports at most %d distinct set conditions (set, directions, --return-nomatch) per family, and this ruleset uses more: %s", describeSetCond(want), MaxSetConds, sc.describeAll())
	}
	sc.conds = append(sc.conds, want)
	return len(sc.conds) - 1, nil
}

// condition returns the FieldSets values that satisfy m.
func (sc *setConds) condition(m *ir.SetMatch) (*Set, error) {
	if m.Packets.Op != ir.SetCounterNone {
		return nil, fmt.Errorf("set match %s: --packets-eq/-lt/-gt are not supported by xfw: its data plane does not compare set entry counters", m.Name)
	}
	if m.Bytes.Op != ir.SetCounterNone {
		return nil, fmt.Errorf("set match %s: --bytes-eq/-lt/-gt are not supported by xfw: its data plane does not compare set entry counters", m.Name)
	}
	if m.Dirs.Dim == 0 || m.Dirs.Dim > ir.MaxSetDims {
		return nil, fmt.Errorf("set match %s: %d directions (1 to %d allowed)", m.Name, m.Dirs.Dim, ir.MaxSetDims)
	}
	k, err := sc.index(m)
	if err != nil {
		return nil, err
	}
	return setBitValues(k, !m.Invert), nil
}

// set adds a set match to a rule's condition.
func (b *termBuilder) set(m *ir.SetMatch) error {
	s, err := b.sets.condition(m)
	if err != nil {
		return err
	}
	b.and(FieldSets, s)
	return nil
}

// setBitValues returns the FieldSets values whose bit k is set (want) or
// clear.
func setBitValues(k int, want bool) *Set {
	var ivs []Interval
	for v := 0; v < 1<<MaxSetConds; v++ {
		if (v>>k&1 == 1) == want {
			ivs = append(ivs, Interval{U64(uint64(v)), U64(uint64(v))})
		}
	}
	return NewSet(ivs...)
}

// describeSetCond prints a condition as the rule spells it.
func describeSetCond(c SetCond) string {
	s := c.Name + " " + c.Dirs.String()
	if c.ReturnNomatch {
		s += " --return-nomatch"
	}
	return s
}

// describeAll lists the allocated conditions.
func (sc *setConds) describeAll() string {
	s := ""
	for k, c := range sc.conds {
		if k > 0 {
			s += "; "
		}
		s += describeSetCond(c)
	}
	return s
}

// SetBits computes a packet's FieldSets value from a membership test:
// member(c) is the result, before "!", of the set match of condition c.
// Tests and the data plane's user-space twin use it.
func (g *Generation) SetBits(member func(c SetCond) bool) uint32 {
	var bits uint32
	for k, c := range g.SetConds {
		if member(c) {
			bits |= 1 << k
		}
	}
	return bits
}
