package ir

// The string (xt_string revision 1), u32 (xt_u32) and time (xt_time)
// matches: predicates over the packet's bytes and the wall clock, with
// what the kernel's structures keep of them.

// StringMaxPattern is XT_STRING_MAX_PATTERN_SIZE: a pattern's longest
// length in bytes.
const StringMaxPattern = 128

// StringNoTo is the --to offset of a string match without --to
// (UINT16_MAX, which iptables does not print).
const StringNoTo = 0xFFFF

// StringMatch is -m string --algo ALGO (--string S | --hex-string H)
// [--from N] [--to M] [--icase]: whether Pattern occurs within bytes
// [From, To) of the packet from its network header.
type StringMatch struct {
	// Algo is the textsearch algorithm's name ("bm", "kmp"), as given
	// (truncated to 15 bytes as the kernel's field holds it).
	Algo string
	// Pattern is the bytes searched for (at most StringMaxPattern).
	Pattern []byte
	// From and To bound the search: offsets from the network header.
	From, To uint16
	Invert   bool
	// ICase compares with the kernel's toupper (XT_STRING_FLAG_IGNORECASE).
	ICase bool
}

// ModuleName implements Match.
func (*StringMatch) ModuleName() string { return "string" }

// CloneMatch implements Match.
func (m *StringMatch) CloneMatch() Match {
	c := *m
	c.Pattern = append([]byte(nil), m.Pattern...)
	return &c
}

// U32MaxSize is XT_U32_MAXSIZE: the most tests of a u32 match, numbers of
// a location and ranges of a test.
const U32MaxSize = 10

// U32Op is an operator of a u32 location (enum xt_u32_ops).
type U32Op uint8

// The u32 location operators, as the kernel numbers them.
const (
	U32And U32Op = iota
	U32LeftShift
	U32RightShift
	U32At
)

// U32Loc is one number of a location and the operator before it (the
// first number's operator is unused).
type U32Loc struct {
	Op  U32Op
	Num uint32
}

// U32Range is an inclusive range of values.
type U32Range struct {
	Min, Max uint32
}

// U32Test is one "location = values" test.
type U32Test struct {
	Loc    []U32Loc
	Values []U32Range
}

// U32Match is -m u32 [!] --u32 TESTS: every test's value lies in one of
// its ranges.
type U32Match struct {
	Tests  []U32Test
	Invert bool
}

// ModuleName implements Match.
func (*U32Match) ModuleName() string { return "u32" }

// CloneMatch implements Match.
func (m *U32Match) CloneMatch() Match {
	c := &U32Match{Invert: m.Invert, Tests: make([]U32Test, len(m.Tests))}
	for i, t := range m.Tests {
		c.Tests[i] = U32Test{Loc: append([]U32Loc(nil), t.Loc...), Values: append([]U32Range(nil), t.Values...)}
	}
	return c
}

// The time match's defaults and bounds (xt_time.h).
const (
	// TimeMaxDaytime is XT_TIME_MAX_DAYTIME: 23:59:59 in seconds.
	TimeMaxDaytime = 24*60*60 - 1
	// TimeAllMonthdays is XT_TIME_ALL_MONTHDAYS: bits 1 to 31.
	TimeAllMonthdays = 0xFFFFFFFE
	// TimeAllWeekdays is XT_TIME_ALL_WEEKDAYS: bits 1 (Monday) to 7.
	TimeAllWeekdays = 0xFE
	// TimeNoDateStop is the --datestop of a time match without one
	// (INT_MAX, 2038-01-19T03:14:07).
	TimeNoDateStop = 0x7FFFFFFF
)

// TimeMatch is -m time: the wall clock at the packet is within
// [DateStart, DateStop] (seconds since the epoch), its time of day within
// the daytime range (wrapping at midnight when DaytimeStart >
// DaytimeStop), its weekday and day of the month in the masks.
type TimeMatch struct {
	DateStart, DateStop       uint32
	DaytimeStart, DaytimeStop uint32
	// Weekdays has bit 1 for Monday … bit 7 for Sunday.
	Weekdays uint8
	// Monthdays has bit N for day N.
	Monthdays uint32
	// KernelTZ shifts the clock by the kernel's timezone
	// (XT_TIME_LOCAL_TZ); otherwise UTC.
	KernelTZ bool
	// Contiguous makes a range past midnight one window from its start
	// day (XT_TIME_CONTIGUOUS).
	Contiguous bool
}

// ModuleName implements Match.
func (*TimeMatch) ModuleName() string { return "time" }

// CloneMatch implements Match.
func (m *TimeMatch) CloneMatch() Match { c := *m; return &c }

// Tags of these matches in the binary form (codec.go), away from the tags
// numbered in a row there.
const (
	tagString = 96 + iota
	tagU32
	tagTime
)

// predMatch encodes a string, u32 or time match; false for other matches.
func (e *encoder) predMatch(m Match) bool {
	switch m := m.(type) {
	case *StringMatch:
		e.u8(tagString)
		e.flags(m.Invert, m.ICase)
		e.str(m.Algo)
		e.str(string(m.Pattern))
		e.u16(m.From)
		e.u16(m.To)
	case *U32Match:
		e.u8(tagU32)
		e.flags(m.Invert)
		e.uv(uint64(len(m.Tests)))
		for _, t := range m.Tests {
			e.uv(uint64(len(t.Loc)))
			for _, l := range t.Loc {
				e.u8(uint8(l.Op))
				e.uv(uint64(l.Num))
			}
			e.uv(uint64(len(t.Values)))
			for _, v := range t.Values {
				e.uv(uint64(v.Min))
				e.uv(uint64(v.Max))
			}
		}
	case *TimeMatch:
		e.u8(tagTime)
		e.flags(m.KernelTZ, m.Contiguous)
		for _, v := range []uint32{m.DateStart, m.DateStop, m.DaytimeStart, m.DaytimeStop, m.Monthdays} {
			e.uv(uint64(v))
		}
		e.u8(m.Weekdays)
	default:
		return false
	}
	return true
}

// predMatch decodes what encoder.predMatch wrote after tag; nil for other
// tags.
func (d *decoder) predMatch(tag uint8) Match {
	switch tag {
	case tagString:
		m := &StringMatch{}
		d.flags(&m.Invert, &m.ICase)
		m.Algo = d.str()
		m.Pattern = []byte(d.str())
		m.From = d.u16()
		m.To = d.u16()
		return m
	case tagU32:
		m := &U32Match{}
		d.flags(&m.Invert)
		m.Tests = make([]U32Test, d.bounded(U32MaxSize))
		for i := range m.Tests {
			t := &m.Tests[i]
			t.Loc = make([]U32Loc, d.bounded(U32MaxSize))
			for j := range t.Loc {
				t.Loc[j] = U32Loc{Op: U32Op(d.u8()), Num: d.u32()}
			}
			t.Values = make([]U32Range, d.bounded(U32MaxSize))
			for j := range t.Values {
				t.Values[j] = U32Range{Min: d.u32(), Max: d.u32()}
			}
		}
		return m
	case tagTime:
		m := &TimeMatch{}
		d.flags(&m.KernelTZ, &m.Contiguous)
		for _, p := range []*uint32{&m.DateStart, &m.DateStop, &m.DaytimeStart, &m.DaytimeStop, &m.Monthdays} {
			*p = d.u32()
		}
		m.Weekdays = d.u8()
		return m
	}
	return nil
}

// bounded reads a count of at most max elements (more fails the decoder).
func (d *decoder) bounded(max int) int {
	n := d.uv()
	if n > uint64(max) {
		d.fail(errTruncated)
		return 0
	}
	return int(n)
}
