package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The frag match (libip6t_frag.c): IPv6 fragment header fields.

// frag guided option ids (O_FRAGID …).
const (
	fragOptID = iota
	fragOptLen
	fragOptRes
	fragOptFirst
	fragOptMore
	fragOptLast
)

// fragExt is the frag match module.
var fragExt = registerMatch(&extension{
	name:   "frag",
	family: ir.IPv6,
	x6: []x6opt{
		{name: "fragid", id: fragOptID, typ: xtUint32RC, flags: xtInvert},
		{name: "fraglen", id: fragOptLen, typ: xtUint32, flags: xtInvert},
		{name: "fragres", id: fragOptRes, typ: xtNone},
		{name: "fragfirst", id: fragOptFirst, typ: xtNone},
		{name: "fragmore", id: fragOptMore, typ: xtNone, excl: 1 << fragOptLast},
		{name: "fraglast", id: fragOptLast, typ: xtNone, excl: 1 << fragOptMore},
	},
	newMatch: func(*parseCtx) matchState {
		return &fragState{m: ir.FragMatch{IDs: [2]uint32{0, math.MaxUint32}}}
	},
})

// fragState is one frag match being parsed.
type fragState struct {
	m     ir.FragMatch
	flags x6flags
}

// parse implements matchState (frag_parse).
func (s *fragState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(fragExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case fragOptID:
		if s.m.IDs, f = parseXTUint32Range(fragExt.name, x, arg); f != nil {
			return f
		}
		s.m.HasIDs, s.m.InvIDs = true, s.m.InvIDs || invert
	case fragOptLen:
		if s.m.Len, f = parseXTUint32(fragExt.name, x, arg); f != nil {
			return f
		}
		s.m.HasLen, s.m.InvLen = true, s.m.InvLen || invert
	case fragOptRes:
		s.m.Res = true
	case fragOptFirst:
		s.m.First = true
	case fragOptMore:
		s.m.More = true
	case fragOptLast:
		s.m.Last = true
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *fragState) final(*parseCtx) *failure { return s.flags.fcheck(fragExt) }

// build implements matchState.
func (s *fragState) build() ir.Match { m := s.m; return &m }

// fragIDsAll is skip_ids_match: the whole range, not inverted.
func fragIDsAll(m *ir.FragMatch) bool {
	return m.IDs[0] == 0 && m.IDs[1] == math.MaxUint32 && !m.InvIDs
}

// writeFrag prints the match as frag_save does. Deviation from 1.8.9: an
// inverted 0:4294967295 range is saved, as later releases and the
// conformance suite do.
func writeFrag(b *strings.Builder, m *ir.FragMatch) {
	if !fragIDsAll(m) {
		fmt.Fprintf(b, "%s --fragid %s", bangIf(m.InvIDs), rangeText(m.IDs))
	}
	if m.HasLen {
		fmt.Fprintf(b, "%s --fraglen %d", bangIf(m.InvLen), m.Len)
	}
	writeFlagWords(b, []bool{m.Res, m.First, m.More, m.Last},
		[]string{" --fragres", " --fragfirst", " --fragmore", " --fraglast"})
}

// listFrag prints the match as frag_print does (-L): print_ids has no
// space before its name.
func listFrag(b *strings.Builder, m *ir.FragMatch) {
	b.WriteString(" frag ")
	if !fragIDsAll(m) {
		var ids strings.Builder
		listNums(&ids, "id", m.IDs, m.InvIDs)
		b.WriteString(strings.TrimPrefix(ids.String(), " "))
	}
	if m.HasLen {
		fmt.Fprintf(b, " length:%s%d", invString(m.InvLen), m.Len)
	}
	writeFlagWords(b, []bool{m.Res, m.First, m.More, m.Last},
		[]string{" reserved", " first", " more", " last"})
}

// writeFlagWords writes words[i] for every set on[i].
func writeFlagWords(b *strings.Builder, on []bool, words []string) {
	for i, set := range on {
		if set {
			b.WriteString(words[i])
		}
	}
}
