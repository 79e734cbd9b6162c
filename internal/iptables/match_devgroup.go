package iptables

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The devgroup match (libxt_devgroup, xt_devgroup.c): options, checks and
// printing as iptables 1.8.9, with group names from iproute2's table. The
// kernel allows --src-group from PREROUTING, INPUT and FORWARD and
// --dst-group from FORWARD, OUTPUT and POSTROUTING (checkEntry).

// Devgroup option ids (libxt_devgroup's enum).
const (
	devGroupOptSrc = iota
	devGroupOptDst
)

// devGroupNames is the file libxt_devgroup maps group names from.
const devGroupNames = "/etc/iproute2/group"

// devGroupExt is the devgroup match module.
var devGroupExt = registerMatch(&extension{
	name: "devgroup",
	x6: []x6opt{
		{name: "src-group", id: devGroupOptSrc, typ: xtString, flags: xtInvert},
		{name: "dst-group", id: devGroupOptDst, typ: xtString, flags: xtInvert},
	},
	newMatch: func(*parseCtx) matchState { return &devGroupState{} },
})

// devGroupState is one devgroup match being parsed.
type devGroupState struct {
	m     ir.DevGroupMatch
	flags x6flags
}

// lmapEntry is one line of an iproute2 name table (struct xtables_lmap).
type lmapEntry struct {
	id   uint32
	name string
}

// readLmap is xtables_lmap_init: "ID NAME" lines, '#' comments; nil when
// the file cannot be read.
func readLmap(path string) []lmapEntry {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []lmapEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		id, err := strconv.ParseUint(fields[0], 0, 32)
		if err != nil {
			continue
		}
		out = append(out, lmapEntry{uint32(id), fields[1]})
	}
	return out
}

// parseValMask is xtables_parse_val_mask: VALUE[/MASK] or a name of lmap.
func parseValMask(ext, opt, arg string, lmap []lmapEntry) (value, mask uint32, f *failure) {
	mask = math.MaxUint32
	byName := func() (uint32, uint32, *failure) {
		for _, e := range lmap {
			if e.name == arg {
				return e.id, math.MaxUint32, nil
			}
		}
		return 0, 0, paramErr("%s: could not map name %s to an integer value for option \"--%s\".\n", ext, arg, opt)
	}
	bad := paramErr("%s: bad integer value for option \"--%s\", or out of range.\n", ext, opt)
	garbage := paramErr("%s: trailing garbage after value for option \"--%s\".\n", ext, opt)
	v, end, ok := xtStrtouiPrefix(arg, 0, math.MaxUint32)
	switch {
	case !ok && lmap != nil:
		return byName()
	case !ok:
		return 0, 0, bad
	case end == len(arg):
		return uint32(v), mask, nil
	case arg[end] != '/' && lmap != nil:
		return byName()
	case arg[end] != '/':
		return 0, 0, garbage
	}
	m, n, ok := xtStrtouiPrefix(arg[end+1:], 0, math.MaxUint32)
	if !ok {
		return 0, 0, bad
	}
	if end+1+n != len(arg) {
		return 0, 0, garbage
	}
	return uint32(v), uint32(m), nil
}

// parse implements matchState (devgroup_parse).
func (s *devGroupState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(devGroupExt, o.id, invert); f != nil {
		return f
	}
	g, m, f := parseValMask(devGroupExt.name, o.name, arg, readLmap(devGroupNames))
	if f != nil {
		return f
	}
	if o.id == devGroupOptSrc {
		s.m.SrcGroup, s.m.SrcMask = g, m
		s.m.Flags |= ir.DevGroupMatchSrc
		if invert {
			s.m.Flags |= ir.DevGroupInvertSrc
		}
	} else {
		s.m.DstGroup, s.m.DstMask = g, m
		s.m.Flags |= ir.DevGroupMatchDst
		if invert {
			s.m.Flags |= ir.DevGroupInvertDst
		}
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState (devgroup_check).
func (s *devGroupState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("devgroup match: You must specify either '--src-group' or '--dst-group'")
	}
	return s.flags.fcheck(devGroupExt)
}

// build implements matchState.
func (s *devGroupState) build() ir.Match { m := s.m; return &m }

// valMaskText is xtables_print_val_mask: the mask when not all ones,
// else a name of lmap, else the value.
func valMaskText(value, mask uint32, lmap []lmapEntry) string {
	if mask != math.MaxUint32 {
		return fmt.Sprintf(" 0x%x/0x%x", value, mask)
	}
	for _, e := range lmap {
		if e.id == value {
			return " " + e.name
		}
	}
	return fmt.Sprintf(" 0x%x", value)
}

// devGroupText is devgroup_show: prefix "--" for save, "" for -L; names
// unless numeric (save always uses them).
func devGroupText(m *ir.DevGroupMatch, prefix string, numeric bool) string {
	var lmap []lmapEntry
	if !numeric {
		lmap = readLmap(devGroupNames)
	}
	var b strings.Builder
	if m.Flags&ir.DevGroupMatchSrc != 0 {
		if m.Flags&ir.DevGroupInvertSrc != 0 {
			b.WriteString(" !")
		}
		b.WriteString(" " + prefix + "src-group" + valMaskText(m.SrcGroup, m.SrcMask, lmap))
	}
	if m.Flags&ir.DevGroupMatchDst != 0 {
		if m.Flags&ir.DevGroupInvertDst != 0 {
			b.WriteString(" !")
		}
		b.WriteString(" " + prefix + "dst-group" + valMaskText(m.DstGroup, m.DstMask, lmap))
	}
	return b.String()
}

// devGroupOK is devgroup_mt_checkentry's hook check.
func devGroupOK(m *ir.DevGroupMatch, hooks hookMask) bool {
	if m.Flags&ir.DevGroupMatchSrc != 0 && hooks&^(hookPreRouting|hookLocalIn|hookForward) != 0 {
		return false
	}
	return m.Flags&ir.DevGroupMatchDst == 0 || hooks&^(hookForward|hookLocalOut|hookPostRouting) == 0
}
