package ir

// The statistic match (xt_statistic), the mark match (xt_mark) and the
// MARK target (xt_mark revision 2), with what the kernel's structures keep
// of them.

// StatisticMode is xt_statistic's mode (enum xt_statistic_mode).
type StatisticMode uint8

// The statistic modes, as the kernel numbers them.
const (
	StatisticRandom StatisticMode = iota
	StatisticNth
)

// StatisticMatch is -m statistic --mode random [!] --probability P or
// --mode nth [!] --every N --packet P.
type StatisticMatch struct {
	Mode   StatisticMode
	Invert bool
	// Probability is the random mode's threshold as the kernel keeps it:
	// lround(P * 2^31), compared with 31 random bits (0 ... 2^31).
	Probability uint32
	// Every is the nth mode's period minus one, Packet its offset
	// (0 <= Packet <= Every), as xt_statistic_info keeps them.
	Every, Packet uint32
}

// ModuleName implements Match.
func (*StatisticMatch) ModuleName() string { return "statistic" }

// CloneMatch implements Match.
func (m *StatisticMatch) CloneMatch() Match { c := *m; return &c }

// MarkMatch is -m mark [!] --mark VALUE[/MASK]: (mark & Mask) == Value.
type MarkMatch struct {
	Value, Mask uint32
	Invert      bool
}

// ModuleName implements Match.
func (*MarkMatch) ModuleName() string { return "mark" }

// CloneMatch implements Match.
func (m *MarkMatch) CloneMatch() Match { c := *m; return &c }

// MarkTarget is the MARK target's xt_mark_tginfo2: the new mark is
// (mark & ^Mask) ^ Value (every spelling, --set-mark, --and-mark, ...,
// is one such pair).
type MarkTarget struct {
	Value, Mask uint32
}

// Tags of the binary form (codec.go), away from the tags numbered there.
const (
	tagStatistic = 112 + iota
	tagMark
)

// markMatch encodes a statistic or mark match; false for other matches.
func (e *encoder) markMatch(m Match) bool {
	switch m := m.(type) {
	case *StatisticMatch:
		e.u8(tagStatistic)
		e.flags(m.Invert)
		e.u8(uint8(m.Mode))
		e.uv(uint64(m.Probability))
		e.uv(uint64(m.Every))
		e.uv(uint64(m.Packet))
	case *MarkMatch:
		e.u8(tagMark)
		e.flags(m.Invert)
		e.uv(uint64(m.Value))
		e.uv(uint64(m.Mask))
	default:
		return false
	}
	return true
}

// markMatch decodes what encoder.markMatch wrote after tag; nil for other
// tags.
func (d *decoder) markMatch(tag uint8) Match {
	switch tag {
	case tagStatistic:
		m := &StatisticMatch{}
		d.flags(&m.Invert)
		m.Mode = StatisticMode(d.u8())
		m.Probability = d.u32()
		m.Every = d.u32()
		m.Packet = d.u32()
		return m
	case tagMark:
		m := &MarkMatch{}
		d.flags(&m.Invert)
		m.Value = d.u32()
		m.Mask = d.u32()
		return m
	}
	return nil
}

// markTarget encodes the MARK target's values (zero for other targets).
func (e *encoder) markTarget(t MarkTarget) {
	e.uv(uint64(t.Value))
	e.uv(uint64(t.Mask))
}

// markTarget decodes what encoder.markTarget wrote.
func (d *decoder) markTarget() MarkTarget {
	return MarkTarget{Value: d.u32(), Mask: d.u32()}
}
