package compiler

import (
	"fmt"
	"reflect"

	"github.com/xfw-dev/xfw/internal/ir"
)

// IPv6 extension header matches: -m rt, -m frag, IPv6's -m ah, -m hbh,
// -m dst, -m mh and -m ipv6header. Each
// distinct match of a generation is a condition the data plane evaluates
// once per packet, as the kernel's match would (bpf/ip6ext.h), and
// FieldExt6 carries the answers: bit k is condition k's result, and bit
// Ext6HotShift+kind is set when a match of that kind hotdrops the packet
// (its header cannot be read: ipv6_find_hdr fails with -EBADMSG, the
// header is cut short, or a routing, options or AH header claims more
// bytes than the packet has; a
// Mobility Header cut short or not followed by "no next header"; for
// ipv6header a chain longer than the data plane walks).
// Whether a match hotdrops depends on the packet and the kind alone, and
// a packet a kind hotdrops has no condition of that kind true.

// MaxExt6Conds is how many distinct IPv6 extension header matches one
// ruleset may use (XFW_MAX_EXT6CONDS), Ext6MaxAddrs how many -m rt
// addresses they may hold together (XFW_EXT6_MAX_ADDRS) and Ext6MaxOpts
// how many --hbh-opts / --dst-opts options (XFW_EXT6_MAX_OPTS).
const (
	MaxExt6Conds = 8
	Ext6MaxAddrs = 16
	Ext6MaxOpts  = 32
)

// Ext6 condition kinds (XFW_EXT6_*), and where FieldExt6's hotdrop bits
// start.
const (
	Ext6KindRT     = 0
	Ext6KindFrag   = 1
	Ext6KindAH     = 2
	Ext6KindHBH    = 3
	Ext6KindDst    = 4
	Ext6KindMH     = 5
	Ext6KindIP6Hdr = 6
	numExt6Kinds   = 7
	Ext6HotShift   = MaxExt6Conds
	ext6Domain     = 1 << (MaxExt6Conds + numExt6Kinds)
)

// Ext6Kind returns the kind of an IPv6 extension header match, false for
// other matches.
func Ext6Kind(m ir.Match) (int, bool) {
	switch m := m.(type) {
	case *ir.RTMatch:
		return Ext6KindRT, true
	case *ir.FragMatch:
		return Ext6KindFrag, true
	case *ir.AH6Match:
		return Ext6KindAH, true
	case *ir.OptsMatch:
		if m.Dst {
			return Ext6KindDst, true
		}
		return Ext6KindHBH, true
	case *ir.MHMatch:
		return Ext6KindMH, true
	case *ir.IPv6HeaderMatch:
		return Ext6KindIP6Hdr, true
	}
	return 0, false
}

// ext6Conds allocates the conditions of one compilation in the order the
// flattener first meets them.
type ext6Conds struct {
	conds []ir.Match
}

// index returns the condition of m, allocating one for a match not seen
// before.
func (ec *ext6Conds) index(m ir.Match) (int, error) {
	for k, c := range ec.conds {
		if reflect.DeepEqual(c, m) {
			return k, nil
		}
	}
	if len(ec.conds) == MaxExt6Conds {
		return 0, fmt.Errorf("%s match: xfw supports at most %d distinct IPv6 extension header matches (rt, frag, ah, hbh, dst, mh, ipv6header; equal ones count once) per ruleset, and this ruleset uses more", m.ModuleName(), MaxExt6Conds)
	}
	if o, ok := m.(*ir.OptsMatch); ok && ec.opts()+len(o.Opts) > Ext6MaxOpts {
		return 0, fmt.Errorf("%s match: xfw supports at most %d --hbh-opts/--dst-opts options in all of a ruleset's distinct hbh and dst matches together", m.ModuleName(), Ext6MaxOpts)
	}
	if rt, ok := m.(*ir.RTMatch); ok && ec.addrs()+len(rt.Addrs) > Ext6MaxAddrs {
		return 0, fmt.Errorf("rt match: xfw supports at most %d --rt-0-addrs addresses in all of a ruleset's distinct rt matches together", Ext6MaxAddrs)
	}
	ec.conds = append(ec.conds, m.CloneMatch())
	return len(ec.conds) - 1, nil
}

// addrs counts the rt addresses of the conditions so far.
func (ec *ext6Conds) addrs() int {
	return ec.count(func(m ir.Match) int {
		if rt, ok := m.(*ir.RTMatch); ok {
			return len(rt.Addrs)
		}
		return 0
	})
}

// opts counts the hbh and dst options of the conditions so far.
func (ec *ext6Conds) opts() int {
	return ec.count(func(m ir.Match) int {
		if o, ok := m.(*ir.OptsMatch); ok {
			return len(o.Opts)
		}
		return 0
	})
}

// count sums n over the conditions so far.
func (ec *ext6Conds) count(n func(ir.Match) int) int {
	sum := 0
	for _, c := range ec.conds {
		sum += n(c)
	}
	return sum
}

// ext6Values returns the FieldExt6 values with bit b set (want) or clear.
func ext6Values(b int, want bool) *Set { return bitValues(b, want, ext6Domain) }

// ip6ext adds an IPv6 extension header match: the packets its kind
// hotdrops are dropped where the rule reaches it, the others must have
// its condition's bit set.
func (b *termBuilder) ip6ext(m ir.Match, kind int) error {
	if b.fam != ir.IPv6 {
		return fmt.Errorf("match %q exists only in IPv6", m.ModuleName())
	}
	if b.sets == nil {
		return fmt.Errorf("IPv6 extension header matches are numbered in flattening order")
	}
	if b.sets.ext6 == nil {
		b.sets.ext6 = &ext6Conds{}
	}
	k, err := b.sets.ext6.index(m)
	if err != nil {
		return err
	}
	hot := b.c
	hot[FieldExt6] = Intersect(hot[FieldExt6], ext6Values(Ext6HotShift+kind, true))
	if !hot[FieldExt6].Empty() {
		b.hotdropTerms(hot)
	}
	// The hotdrop term cannot be merged into the rule's own entry: no
	// entry flag stands for it.
	b.dirty = true
	b.and(FieldExt6, ext6Values(k, true))
	return nil
}

// Ext6Conds returns the generation's IPv6 extension header conditions:
// FieldExt6's bit k is the packet's result for Ext6Conds()[k].
func (g *Generation) Ext6Conds() []ir.Match { return g.ext6 }
