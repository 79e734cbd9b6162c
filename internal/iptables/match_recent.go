package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The recent match (libxt_recent, revision 1 in both families, as
// iptables 1.8.9 uses it on kernels that have it): one of [!] --set,
// --rcheck, --update, --remove; --seconds, --reap, --hitcount, --rttl,
// --name, --rsource/--rdest, --mask; and its output.

// recent guided option ids (libxt_recent's O_*).
const (
	recentOptSet = iota
	recentOptCheck
	recentOptUpdate
	recentOptRemove
	recentOptSeconds
	recentOptReap
	recentOptHitCount
	recentOptTTL
	recentOptName
	recentOptSource
	recentOptDest
	recentOptMask
)

// recentAnyOp is F_ANY_OP: the four operations exclude each other.
const recentAnyOp = 1<<recentOptSet | 1<<recentOptCheck | 1<<recentOptUpdate | 1<<recentOptRemove

// recentDefaultName is the list of a match without --name.
const recentDefaultName = "DEFAULT"

// recentExt is the recent match module.
var recentExt = registerMatch(&extension{
	name: "recent",
	x6: []x6opt{
		{name: "set", id: recentOptSet, typ: xtNone, excl: recentAnyOp, flags: xtInvert},
		{name: "rcheck", id: recentOptCheck, typ: xtNone, excl: recentAnyOp, flags: xtInvert},
		{name: "update", id: recentOptUpdate, typ: xtNone, excl: recentAnyOp, flags: xtInvert},
		{name: "remove", id: recentOptRemove, typ: xtNone, excl: recentAnyOp, flags: xtInvert},
		{name: "seconds", id: recentOptSeconds, typ: xtUint32, min: 1, max: math.MaxUint32},
		{name: "reap", id: recentOptReap, typ: xtNone, also: 1 << recentOptSeconds},
		{name: "hitcount", id: recentOptHitCount, typ: xtUint32, max: math.MaxUint32},
		{name: "rttl", id: recentOptTTL, typ: xtNone, excl: 1<<recentOptSet | 1<<recentOptRemove},
		{name: "name", id: recentOptName, typ: xtString, size: ir.RecentNameLen},
		{name: "rsource", id: recentOptSource, typ: xtNone},
		{name: "rdest", id: recentOptDest, typ: xtNone},
		{name: "mask", id: recentOptMask, typ: xtString},
	},
	newMatch: func(*parseCtx) matchState {
		// recent_init: the DEFAULT list, the source side, a full mask.
		m := ir.RecentMatch{Name: recentDefaultName}
		for i := range m.Mask {
			m.Mask[i] = 0xff
		}
		return &recentState{m: m}
	},
})

// recentState is one recent match being parsed.
type recentState struct {
	m     ir.RecentMatch
	flags x6flags
}

// recentOpBits are the check_set bits of the options that set one.
var recentOpBits = map[int]uint8{
	recentOptSet: ir.RecentSet, recentOptCheck: ir.RecentCheck, recentOptUpdate: ir.RecentUpdate,
	recentOptRemove: ir.RecentRemove, recentOptTTL: ir.RecentTTL, recentOptReap: ir.RecentReap,
}

// parse implements matchState.
func (s *recentState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(recentExt, o.id, invert)
	if f != nil {
		return f
	}
	if bit, ok := recentOpBits[o.id]; ok {
		s.m.Flags |= bit
		if invert {
			s.m.Invert = true
		}
	}
	switch o.id {
	case recentOptSeconds, recentOptHitCount:
		v, ok := xtStrtoui(arg, x.min, x.max)
		if !ok {
			return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", recentExt.name, x.name, x.min, x.max)
		}
		if o.id == recentOptSeconds {
			s.m.Seconds = uint32(v)
		} else {
			s.m.HitCount = uint32(v)
		}
	case recentOptName:
		name, f := x.parseString(arg)
		if f != nil {
			return f
		}
		s.m.Name = name
	case recentOptSource:
		s.m.Dest = false
	case recentOptDest:
		s.m.Dest = true
	case recentOptMask:
		a, f := parseCtHost(c.fam, arg)
		if f != nil {
			return f
		}
		s.m.Mask = [16]byte{}
		copy(s.m.Mask[:], a.AsSlice())
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState: the guided checks, then recent_check.
func (s *recentState) final(*parseCtx) *failure {
	if f := s.flags.fcheck(recentExt); f != nil {
		return f
	}
	if uint32(s.flags)&recentAnyOp == 0 {
		return paramErr("recent: you must specify one of `--set', `--rcheck' `--update' or `--remove'")
	}
	return nil
}

// build implements matchState.
func (s *recentState) build() ir.Match { m := s.m; return &m }

// recentOpNames are the operations and modifiers in the order
// recent_save and recent_print print them, with both spellings.
var recentOpNames = []struct {
	bit        uint8
	save, list string
}{
	{ir.RecentSet, "--set", "SET"},
	{ir.RecentCheck, "--rcheck", "CHECK"},
	{ir.RecentUpdate, "--update", "UPDATE"},
	{ir.RecentRemove, "--remove", "REMOVE"},
}

// recentMaskString is the mask as recent_print prints it for the family.
func recentMaskString(fam ir.Family, mask [16]byte) string {
	if fam == ir.IPv6 {
		return inetNtop6(mask)
	}
	return fmt.Sprintf("%d.%d.%d.%d", mask[0], mask[1], mask[2], mask[3])
}

// writeRecent prints a recent match's options as iptables-save does
// (recent_save; numbers with %d, so --seconds 4294967295 prints -1).
func writeRecent(b *strings.Builder, fam ir.Family, m *ir.RecentMatch) {
	if m.Invert {
		b.WriteString(" !")
	}
	for _, op := range recentOpNames {
		if m.Flags&op.bit != 0 {
			b.WriteString(" " + op.save)
		}
	}
	if m.Seconds != 0 {
		fmt.Fprintf(b, " --seconds %d", int32(m.Seconds))
	}
	if m.Flags&ir.RecentReap != 0 {
		b.WriteString(" --reap")
	}
	if m.HitCount != 0 {
		fmt.Fprintf(b, " --hitcount %d", int32(m.HitCount))
	}
	if m.Flags&ir.RecentTTL != 0 {
		b.WriteString(" --rttl")
	}
	b.WriteString(" --name " + m.Name)
	b.WriteString(" --mask " + recentMaskString(fam, m.Mask))
	if m.Dest {
		b.WriteString(" --rdest")
	} else {
		b.WriteString(" --rsource")
	}
}

// recentListing is a recent match in iptables -L's listing (recent_print).
func recentListing(fam ir.Family, m *ir.RecentMatch) string {
	var b strings.Builder
	if m.Invert {
		b.WriteString(" !")
	}
	b.WriteString(" recent:")
	for _, op := range recentOpNames {
		if m.Flags&op.bit != 0 {
			b.WriteString(" " + op.list)
		}
	}
	if m.Seconds != 0 {
		fmt.Fprintf(&b, " seconds: %d", int32(m.Seconds))
	}
	if m.Flags&ir.RecentReap != 0 {
		b.WriteString(" reap")
	}
	if m.HitCount != 0 {
		fmt.Fprintf(&b, " hit_count: %d", int32(m.HitCount))
	}
	if m.Flags&ir.RecentTTL != 0 {
		b.WriteString(" TTL-Match")
	}
	b.WriteString(" name: " + m.Name)
	if m.Dest {
		b.WriteString(" side: dest")
	} else {
		b.WriteString(" side: source")
	}
	b.WriteString(" mask: " + recentMaskString(fam, m.Mask))
	return b.String()
}

// checkRecent is recent_mt_check's refusals (EINVAL): not exactly one
// operation; --set or --remove with --seconds, --hitcount, --rttl or
// --reap; --reap without --seconds; a hit count above the kernel's
// maximum; a name /proc cannot hold (empty, ".", "..", or with a '/').
func checkRecent(m *ir.RecentMatch) *failure {
	ops := m.Flags & ir.RecentOps
	switch {
	case ops == 0 || ops&(ops-1) != 0:
		return kernelEINVAL()
	case ops&(ir.RecentSet|ir.RecentRemove) != 0 && (m.Seconds != 0 || m.HitCount != 0 || m.Flags&ir.RecentModifiers != 0):
		return kernelEINVAL()
	case m.Flags&ir.RecentReap != 0 && m.Seconds == 0:
		return kernelEINVAL()
	case m.HitCount > ir.RecentMaxHitCount:
		return kernelEINVAL()
	case m.Name == "" || m.Name == "." || m.Name == ".." || strings.Contains(m.Name, "/") || len(m.Name) >= ir.RecentNameLen:
		return kernelEINVAL()
	}
	return nil
}
