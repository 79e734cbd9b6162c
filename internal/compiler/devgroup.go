package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// The devgroup match (xt_devgroup.c) as interface conditions: the devices
// whose group g satisfies (g ^ G) & M == 0 (inverted: the others) are a
// set of interface indexes of FieldIIF (--src-group) or FieldOIF
// (--dst-group), from the groups the compiler is told (Interface.Group,
// read from the kernel when the ruleset is compiled; xfw compiles again
// when a device's group changes). A device the compiler was not told
// about (ifaceUnknown) is in group 0, a new device's.

// groupMatches is xt_devgroup's test of group g.
func groupMatches(g, group, mask uint32, invert bool) bool {
	return ((g^group)&mask == 0) != invert
}

// groupIfaceSet returns the interface indexes a group condition holds
// for.
func groupIfaceSet(group, mask uint32, invert bool, ifaces []Interface) *Set {
	var ivs []Interval
	for _, i := range ifaces {
		if i.Index != 0 && groupMatches(i.Group, group, mask, invert) {
			ivs = append(ivs, Interval{U64(uint64(i.Index)), U64(uint64(i.Index))})
		}
	}
	if groupMatches(0, group, mask, invert) {
		ivs = append(ivs, Interval{U64(ifaceUnknown), U64(ifaceUnknown)})
	}
	return NewSet(ivs...)
}

// devGroup adds a devgroup match's conditions.
func (b *termBuilder) devGroup(m *ir.DevGroupMatch) {
	if m.Flags&ir.DevGroupMatchSrc != 0 {
		b.and(FieldIIF, groupIfaceSet(m.SrcGroup, m.SrcMask, m.Flags&ir.DevGroupInvertSrc != 0, b.ifaces))
	}
	if m.Flags&ir.DevGroupMatchDst != 0 {
		b.and(FieldOIF, groupIfaceSet(m.DstGroup, m.DstMask, m.Flags&ir.DevGroupInvertDst != 0, b.ifaces))
	}
}
