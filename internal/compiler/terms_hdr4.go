package compiler

import (
	"fmt"
	"reflect"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Transport header matches beyond tcp and udp: -m sctp, -m dccp, -m esp,
// IPv4's -m ah, and tcp's --tcp-option. FieldHdr4 carries what the data
// plane computes for them (bpf/hdr4.h), only for generations using them:
//
//   - bits 0 to MaxHdr4Conds-1: the answers of the generation's distinct
//     conditions, each evaluated as the kernel's match function does
//     (sctp_mt with --chunk-types, dccp_mt with --dccp-types or
//     --dccp-option, esp_mt, ah_mt, the option part of tcp_mt);
//   - bits Hdr4HotShift+k: condition k hotdrops the packet;
//   - Hdr4ShortSCTP, Hdr4ShortDCCP: a first fragment of that protocol
//     whose 12-byte header is cut short (sctp_mt and dccp_mt hotdrop it
//     whatever their options).
//
// An sctp or dccp match with ports alone tests the ports as tcp and udp
// do (FieldSport, FieldDport) and its protocol's short bit; other
// matches are conditions. A hotdropped packet is dropped, uncounted,
// where the rule reaches the match, except where an inverted
// --chunk-types or --dccp-option hotdrops: the kernel's match then returns
// true (SCCHECK, DCCHECK), so the rule's later matches are evaluated and,
// when they hold, the rule is counted and its target runs before the
// packet is dropped (ipt_do_table ends the walk on the hotdrop after the
// target). The data plane sets both the answer and the hotdrop bit there.

// MaxHdr4Conds is how many distinct conditions one ruleset may use
// (XFW_MAX_HDR4CONDS).
const MaxHdr4Conds = 7

// FieldHdr4 bits.
const (
	Hdr4HotShift  = MaxHdr4Conds
	Hdr4ShortSCTP = 2 * MaxHdr4Conds
	Hdr4ShortDCCP = Hdr4ShortSCTP + 1
	hdr4Domain    = 1 << (Hdr4ShortDCCP + 1)
)

// Condition kinds (XFW_H4_*).
const (
	Hdr4KindSCTP   = 0
	Hdr4KindDCCP   = 1
	Hdr4KindESP    = 2
	Hdr4KindAH     = 3
	Hdr4KindTCPOpt = 4
)

// Hdr4Cond is one condition of FieldHdr4.
type Hdr4Cond struct {
	// Kind is Hdr4Kind*.
	Kind int
	// Match is the sctp, dccp, esp or ah match (nil for Hdr4KindTCPOpt).
	Match ir.Match
	// Option and Invert are tcp's --tcp-option.
	Option uint8
	Invert bool
}

// hdr4Conds allocates the conditions of one compilation in the order the
// flattener first meets them.
type hdr4Conds struct {
	conds []Hdr4Cond
}

// index returns the condition of c, allocating one not seen before.
func (hc *hdr4Conds) index(c Hdr4Cond) (int, error) {
	for k, have := range hc.conds {
		if reflect.DeepEqual(have, c) {
			return k, nil
		}
	}
	if len(hc.conds) == MaxHdr4Conds {
		return 0, fmt.Errorf("xfw supports at most %d distinct sctp --chunk-types, dccp --dccp-types/--dccp-option, esp, ah and tcp --tcp-option matches per ruleset, and this ruleset uses more", MaxHdr4Conds)
	}
	if c.Match != nil {
		c.Match = c.Match.CloneMatch()
	}
	hc.conds = append(hc.conds, c)
	return len(hc.conds) - 1, nil
}

// usesHdr4 reports whether m is numbered by hdr4Conds.
func usesHdr4(m ir.Match) bool {
	switch m := m.(type) {
	case *ir.SCTPMatch, *ir.DCCPMatch, *ir.ESPMatch, *ir.AH4Match:
		return true
	case *ir.TCPMatch:
		return m.Option.Set
	}
	return false
}

// hdr4Values returns the FieldHdr4 values with bit b set (want) or clear.
func hdr4Values(b int, want bool) *Set { return bitValues(b, want, hdr4Domain) }

// bitValues returns the values below domain (a power of two) with bit b
// set (want) or clear.
func bitValues(b int, want bool, domain uint64) *Set {
	var ivs []Interval
	run := uint64(1) << b
	for v := uint64(0); v < domain; v += run {
		if (v>>b&1 == 1) == want {
			ivs = append(ivs, Interval{U64(v), U64(v + run - 1)})
		}
	}
	return NewSet(ivs...)
}

// hdr4Hot adds the hotdrop term "everything so far and FieldHdr4's bit
// b", split as the rule's own term is under an earlier --ports match.
func (b *termBuilder) hdr4Hot(bit int) {
	h := b.c
	h[FieldHdr4] = Intersect(h[FieldHdr4], hdr4Values(bit, true))
	if !h[FieldHdr4].Empty() {
		b.hotdropTerms(h)
	}
	// The hotdrop terms cannot be merged into the rule's own entry: no
	// entry flag stands for them.
	b.dirty = true
	b.and(FieldHdr4, hdr4Values(bit, false))
}

// hotTrue is a hotdrop point whose match returns true: the hotdrop bit
// and the terms that drop, uncounted, a packet the rule's later matches
// refuse.
type hotTrue struct {
	bit   int
	after []term
}

// hdr4HotTrue records the hotdrop point of a condition whose match
// returns true when it hotdrops: a packet with FieldHdr4's bit b goes on
// through the rule's later matches and is dropped after the rule, counted
// and its target run when they hold (hotTrueTerms).
func (b *termBuilder) hdr4HotTrue(bit int) {
	h := b.c
	h[FieldHdr4] = Intersect(h[FieldHdr4], hdr4Values(bit, true))
	b.dirty = true
	if h[FieldHdr4].Empty() {
		return
	}
	after := b.hotdropSplit(h)
	for i := range after {
		after[i].after = true
	}
	b.hotTrue = append(b.hotTrue, hotTrue{bit: bit, after: after})
}

// hotTrueTerms returns the terms of the hotdrop points whose match returns
// true: the rule's own condition with each one's bit (counted: the target
// runs, then the packet is dropped), then each one's uncounted drop of
// the packets the rule's later matches refuse. They come before the rule's
// own terms, which they shadow for these packets.
func (b *termBuilder) hotTrueTerms() []term {
	var counted, after []term
	for _, ht := range b.hotTrue {
		c := b.c
		c[FieldHdr4] = Intersect(c[FieldHdr4], hdr4Values(ht.bit, true))
		if !c[FieldHdr4].Empty() {
			for _, t := range b.splitEither(c) {
				t.counted = true
				counted = append(counted, t)
			}
		}
		after = append(after, ht.after...)
	}
	return append(counted, after...)
}

// splitEither returns the terms of condition c, split as the rule's own
// term is under an earlier --ports match (eitherPortTerms), or c's alone.
func (b *termBuilder) splitEither(c Cond) []term {
	if b.either != nil {
		return eitherPortTerms(c, b.either)
	}
	return []term{{cond: c}}
}

// hotdropSplit returns the hotdrop terms of condition h, split as the
// rule's own term is under an earlier --ports match (hotdropTerms).
func (b *termBuilder) hotdropSplit(h Cond) []term {
	hot := b.splitEither(h)
	for i := range hot {
		hot[i].hotdrop = true
	}
	return hot
}

// hotdropTerms records the hotdrop terms of condition h, split as the
// rule's own term is under an earlier --ports match: a match after it is
// evaluated, and hotdrops, only when either port is in its list (found by
// xfw difftest, IPv6 conntrack seed 232: `-m multiport --ports 5000 -m tcp
// --tcp-option 8` dropped TCP headers cut short after their ports whatever
// the ports). Every hotdrop point records its terms here.
func (b *termBuilder) hotdropTerms(h Cond) {
	if b.either == nil {
		// One term, appended in place: splitEither's array of one
		// (a Cond of 29 pointers) was garbage at once, 34 MB of a
		// compile of 100K -p udp rules.
		b.hot = append(b.hot, term{cond: h, hotdrop: true})
		return
	}
	b.hot = append(b.hot, b.hotdropSplit(h)...)
}

// hdr4Cond adds condition c: its hotdrops, then its answer.
func (b *termBuilder) hdr4Cond(c Hdr4Cond) error {
	if b.sets == nil {
		return fmt.Errorf("%s match: its conditions are numbered in flattening order", c.name())
	}
	if b.sets.hdr4 == nil {
		b.sets.hdr4 = &hdr4Conds{}
	}
	k, err := b.sets.hdr4.index(c)
	if err != nil {
		return fmt.Errorf("%s match: %w", c.name(), err)
	}
	if c.hotTrue() {
		b.hdr4HotTrue(Hdr4HotShift + k)
	} else {
		b.hdr4Hot(Hdr4HotShift + k)
	}
	b.and(FieldHdr4, hdr4Values(k, true))
	return nil
}

// hotTrue reports whether the condition's match returns true where it
// hotdrops: an inverted sctp --chunk-types (match_packet) or dccp
// --dccp-option (dccp_find_option). Its header read failing first
// hotdrops with false, which the data plane does not answer true.
func (c Hdr4Cond) hotTrue() bool {
	switch m := c.Match.(type) {
	case *ir.SCTPMatch:
		return m.HasChunks && m.InvChunks
	case *ir.DCCPMatch:
		return m.HasOption && m.InvOption
	}
	return false
}

// name is the module of the condition.
func (c Hdr4Cond) name() string {
	if c.Match == nil {
		return "tcp"
	}
	return c.Match.ModuleName()
}

// hdr4 adds an sctp, dccp, esp or IPv4 ah match.
func (b *termBuilder) hdr4(m ir.Match) error {
	switch m := m.(type) {
	case *ir.SCTPMatch:
		if !m.HasChunks {
			b.hdr4Hot(Hdr4ShortSCTP)
			b.and(FieldSport, portSet(m.SrcPort))
			b.and(FieldDport, portSet(m.DstPort))
			return nil
		}
		return b.hdr4Cond(Hdr4Cond{Kind: Hdr4KindSCTP, Match: m})
	case *ir.DCCPMatch:
		if !m.HasTypes && !m.HasOption {
			b.hdr4Hot(Hdr4ShortDCCP)
			b.and(FieldSport, portSet(m.SrcPort))
			b.and(FieldDport, portSet(m.DstPort))
			return nil
		}
		return b.hdr4Cond(Hdr4Cond{Kind: Hdr4KindDCCP, Match: m})
	case *ir.ESPMatch:
		return b.hdr4Cond(Hdr4Cond{Kind: Hdr4KindESP, Match: m})
	case *ir.AH4Match:
		return b.hdr4Cond(Hdr4Cond{Kind: Hdr4KindAH, Match: m})
	}
	return fmt.Errorf("match %q is not supported by xfw's data plane", m.ModuleName())
}

// tcpOption adds tcp's --tcp-option (after the ports and flags, as
// tcp_mt tests it last).
func (b *termBuilder) tcpOption(o ir.TCPOptionMatch) error {
	return b.hdr4Cond(Hdr4Cond{Kind: Hdr4KindTCPOpt, Option: o.Kind, Invert: o.Invert})
}

// Hdr4Conds returns the generation's FieldHdr4 conditions: bit k is the
// packet's answer for Hdr4Conds()[k].
func (g *Generation) Hdr4Conds() []Hdr4Cond { return g.hdr4 }

// SetHeaderConds gives a generation read back from the data plane its
// IPv6 extension header (Ext6Conds) and transport header (Hdr4Conds)
// conditions, which its maps do not say: an in-place change renders the
// slot's configuration from them again.
func (g *Generation) SetHeaderConds(ext6 []ir.Match, hdr4 []Hdr4Cond) {
	g.ext6, g.hdr4 = ext6, hdr4
}
