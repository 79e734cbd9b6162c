package compiler

import "sort"

// The port fields' cut-short part. A TCP or UDP header cut short after
// its ports is classified as ValShort + port (multiport reads the port,
// bpf/classify.h xfw_ports_view), which doubles the port fields' direct
// arrays (65,538 values to 131,074). Only a ruleset whose conditions tell
// those values from ValTrunc (multiport's) needs the part: without, every
// condition holds for all of ValTrunc and the ValShort values or for none
// of them, so they share ValTrunc's class and the data plane classifies
// them as ValTrunc (Generation.NoShortPorts), arrays ending at ValShort.

// cutShortPorts is ValTrunc and the ValShort values: the port values of a
// TCP or UDP header cut short.
var cutShortPorts = Range(U64(ValTrunc), U64(ValShort+65535))

// shortUniform reports whether port condition s holds for every value of
// cutShortPorts or for none (nil, any value: every). It allocates nothing:
// a compile asks it of every entry's port conditions.
func shortUniform(s *Set) bool {
	if s == nil {
		return true
	}
	lo, hi := cutShortPorts.Ivs[0].Lo, cutShortPorts.Ivs[0].Hi
	// The first interval not below lo; the intervals are disjoint and
	// not adjacent, so one holds all of lo–hi or none does.
	i := sort.Search(len(s.Ivs), func(i int) bool { return !s.Ivs[i].Hi.Less(lo) })
	if i == len(s.Ivs) || hi.Less(s.Ivs[i].Lo) {
		return true // none
	}
	return !lo.Less(s.Ivs[i].Lo) && !s.Ivs[i].Hi.Less(hi)
}

// needsShortPorts reports whether some entry's port condition tells
// values of cutShortPorts apart: the port fields then need their
// cut-short part.
func needsShortPorts(entries []Entry) bool {
	for i := range entries {
		for _, fs := range entries[i].Cond {
			if (fs.Field == FieldSport || fs.Field == FieldDport) && !shortUniform(fs.Set) {
				return true
			}
		}
	}
	return false
}

// SmallDomain is the length of small field f's direct array in g: the
// field's domain (Field.SmallDomain), the port fields' without the
// cut-short part when g has none.
func (g *Generation) SmallDomain(f Field) int {
	if g.NoShortPorts && (f == FieldSport || f == FieldDport) {
		return ValShort
	}
	return f.SmallDomain()
}

// portView is the value of small field f the data plane looks up for a
// packet's value v: a cut-short port (ValShort + port) is ValTrunc when g
// has no cut-short part.
func (g *Generation) portView(f Field, v U128) U128 {
	if g.NoShortPorts && (f == FieldSport || f == FieldDport) && v.Hi == 0 && v.Lo >= ValShort {
		return U64(ValTrunc)
	}
	return v
}
