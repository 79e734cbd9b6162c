package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The mh match (libip6t_mh.c): the Mobility Header's type.

// mhOptType is the mh guided option id (O_MH_TYPE).
const mhOptType = 0

// mhExt is the mh match module.
var mhExt = registerMatch(&extension{
	name:   "mh",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "mh-type", id: mhOptType, typ: xtString, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &mhState{m: ir.MHMatch{Types: [2]uint8{0, maxUint8}}} },
})

// mhState is one mh match being parsed.
type mhState struct {
	m     ir.MHMatch
	flags x6flags
}

// mhNames is mh_names: each type's name, then its alias.
var mhNames = []struct {
	name string
	typ  uint8
}{
	{"binding-refresh-request", 0}, {"brr", 0},
	{"home-test-init", 1}, {"hoti", 1},
	{"careof-test-init", 2}, {"coti", 2},
	{"home-test", 3}, {"hot", 3},
	{"careof-test", 4}, {"cot", 4},
	{"binding-update", 5}, {"bu", 5},
	{"binding-acknowledgement", 6}, {"ba", 6},
	{"binding-error", 7}, {"be", 7},
}

// mhNameToType is name_to_type: the first name name abbreviates (case
// apart) unless a later one is spelled out whole, else a number 0-255.
func mhNameToType(name string) (uint8, *failure) {
	match := -1
	for i, n := range mhNames {
		if len(name) <= len(n.name) && strings.EqualFold(n.name[:len(name)], name) {
			if match < 0 || len(n.name) == len(name) {
				match = i
			}
		}
	}
	if match >= 0 {
		return mhNames[match].typ, nil
	}
	v, ok := xtStrtoui(name, 0, maxUint8)
	if !ok {
		return 0, paramErr("Invalid MH type `%s'", name)
	}
	return uint8(v), nil
}

// parseMHTypes is parse_mh_types: TYPE or [TYPE]:[TYPE].
func parseMHTypes(arg string) ([2]uint8, *failure) {
	lo, hi, isRange := strings.Cut(arg, ":")
	if !isRange {
		t, f := mhNameToType(arg)
		return [2]uint8{t, t}, f
	}
	r := [2]uint8{0, maxUint8}
	var f *failure
	if lo != "" {
		if r[0], f = mhNameToType(lo); f != nil {
			return r, f
		}
	}
	if hi != "" {
		if r[1], f = mhNameToType(hi); f != nil {
			return r, f
		}
	}
	if r[0] > r[1] {
		return r, paramErr("Invalid MH type range (min > max)")
	}
	return r, nil
}

// parse implements matchState (mh_parse).
func (s *mhState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	_, f := s.flags.begin(mhExt, o.id, invert)
	if f != nil {
		return f
	}
	if s.m.Types, f = parseMHTypes(arg); f != nil {
		return f
	}
	s.m.Invert = s.m.Invert || invert
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *mhState) final(*parseCtx) *failure { return s.flags.fcheck(mhExt) }

// build implements matchState.
func (s *mhState) build() ir.Match { m := s.m; return &m }

// mhTypesAll is the whole range, not inverted: save and print omit it.
func mhTypesAll(m *ir.MHMatch) bool {
	return m.Types[0] == 0 && m.Types[1] == maxUint8 && !m.Invert
}

// writeMH prints the match as mh_save does. Deviation from 1.8.9: an
// inverted 0:255 range is saved, as later releases and the conformance
// suite do.
func writeMH(b *strings.Builder, m *ir.MHMatch) {
	if mhTypesAll(m) {
		return
	}
	if m.Types[0] == m.Types[1] {
		fmt.Fprintf(b, "%s --mh-type %d", bangIf(m.Invert), m.Types[0])
	} else {
		fmt.Fprintf(b, "%s --mh-type %d:%d", bangIf(m.Invert), m.Types[0], m.Types[1])
	}
}

// mhTypeText is print_type.
func mhTypeText(t uint8, numeric bool) string {
	if !numeric {
		for _, n := range mhNames {
			if n.typ == t {
				return n.name
			}
		}
	}
	return fmt.Sprintf("%d", t)
}

// listMH prints the match as mh_print does (-L).
func listMH(b *strings.Builder, m *ir.MHMatch, numeric bool) {
	b.WriteString(" mh")
	if mhTypesAll(m) {
		return
	}
	fmt.Fprintf(b, " %s%s", invString(m.Invert), mhTypeText(m.Types[0], numeric))
	if m.Types[0] != m.Types[1] {
		b.WriteString(":" + mhTypeText(m.Types[1], numeric))
	}
}

// writeIP6Hdr2 prints an hbh, dst, ipv6header or mh match as its save
// function does; false when m is none.
func writeIP6Hdr2(b *strings.Builder, m ir.Match) bool {
	switch m := m.(type) {
	case *ir.OptsMatch:
		writeOpts(b, m)
	case *ir.IPv6HeaderMatch:
		writeIP6Hdr(b, m)
	case *ir.MHMatch:
		writeMH(b, m)
	default:
		return false
	}
	return true
}

// listIP6Hdr2 prints an hbh, dst, ipv6header or mh match as its print
// function does (-L); false when m is none.
func listIP6Hdr2(b *strings.Builder, m ir.Match, numeric bool) bool {
	switch m := m.(type) {
	case *ir.OptsMatch:
		listOpts(b, m)
	case *ir.IPv6HeaderMatch:
		listIP6Hdr(b, m, numeric)
	case *ir.MHMatch:
		listMH(b, m, numeric)
	default:
		return false
	}
	return true
}
