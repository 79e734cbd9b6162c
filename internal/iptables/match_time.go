package iptables

import (
	"fmt"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The time match (libxt_time): dates, daytimes, weekdays, monthdays,
// --kerneltz/--utc and --contiguous, parsed, checked and printed as
// iptables 1.8.9 does.

// time guided option ids (libxt_time's enum).
const (
	timeOptDateStart = iota
	timeOptDateStop
	timeOptTimeStart
	timeOptTimeStop
	timeOptContiguous
	timeOptMonthdays
	timeOptWeekdays
	timeOptLocalTZ
	timeOptUTC
	timeOptKernelTZ
)

// timeExt is the time match module.
var timeExt = registerMatch(&extension{
	name: "time",
	x6: []x6opt{
		{name: "datestart", id: timeOptDateStart, typ: xtString},
		{name: "datestop", id: timeOptDateStop, typ: xtString},
		{name: "timestart", id: timeOptTimeStart, typ: xtString},
		{name: "timestop", id: timeOptTimeStop, typ: xtString},
		{name: "contiguous", id: timeOptContiguous, typ: xtNone},
		{name: "weekdays", id: timeOptWeekdays, typ: xtString, flags: xtInvert},
		{name: "monthdays", id: timeOptMonthdays, typ: xtString, flags: xtInvert},
		{name: "localtz", id: timeOptLocalTZ, typ: xtNone, excl: 1 << timeOptUTC},
		{name: "utc", id: timeOptUTC, typ: xtNone, excl: 1<<timeOptLocalTZ | 1<<timeOptKernelTZ},
		{name: "kerneltz", id: timeOptKernelTZ, typ: xtNone, excl: 1 << timeOptUTC},
	},
	newMatch: func(*parseCtx) matchState {
		// time_init: every day, every daytime, no date bounds.
		return &timeState{m: ir.TimeMatch{
			Monthdays: ir.TimeAllMonthdays, Weekdays: ir.TimeAllWeekdays,
			DaytimeStop: ir.TimeMaxDaytime, DateStop: ir.TimeNoDateStop,
		}}
	},
})

// timeState is one time match being parsed.
type timeState struct {
	m     ir.TimeMatch
	flags x6flags
}

// The years time_parse_date takes.
const (
	timeFirstYear = 1970
	timeLastYear  = 2038
)

// parse implements matchState.
func (s *timeState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(timeExt, o.id, invert); f != nil {
		return f
	}
	var f *failure
	switch o.id {
	case timeOptDateStart:
		s.m.DateStart, f = parseTimeDate(arg)
	case timeOptDateStop:
		s.m.DateStop, f = parseTimeDate(arg)
	case timeOptTimeStart:
		s.m.DaytimeStart, f = parseDaytime(arg)
	case timeOptTimeStop:
		s.m.DaytimeStop, f = parseDaytime(arg)
	case timeOptContiguous:
		s.m.Contiguous = true
	case timeOptLocalTZ:
		c.notice("WARNING: --localtz is being replaced by --kerneltz, since \"local\" is ambiguous. Note the kernel timezone has caveats - see manpage for details.")
		s.m.KernelTZ = true
	case timeOptKernelTZ:
		s.m.KernelTZ = true
	case timeOptMonthdays:
		s.m.Monthdays, f = parseMonthdays(arg)
		if invert {
			s.m.Monthdays ^= ir.TimeAllMonthdays
		}
	case timeOptWeekdays:
		var w uint32
		w, f = parseWeekdays(arg)
		s.m.Weekdays = uint8(w) // weekdays_match is 8 bits wide
		if invert {
			s.m.Weekdays ^= ir.TimeAllWeekdays
		}
	}
	if f != nil {
		return f
	}
	s.flags.done(o.id)
	return nil
}

// cNumber is strtoul(s, &e, base) on the C string s: the value and the
// rest after the number (all of s when it has none).
func cNumber(s string, base int) (uint64, string) {
	v, n, _ := cStrtoul(s, base)
	return v, s[n:]
}

// first is the C string's first character (NUL when empty).
func first(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

// parseTimeDate is time_parse_date: YYYY[-MM[-DD[Thh[:mm[:ss]]]]] in UTC,
// normalised as mktime normalises (2001-02-30 is March 2nd).
func parseTimeDate(arg string) (uint32, *failure) {
	bad := paramErr("Invalid date \"%s\" specified. Should be YYYY[-MM[-DD[Thh[:mm[:ss]]]]]", arg)
	fields := [6]uint64{0, 1, 1, 0, 0, 0} // year, month, day, hour, minute, second
	seps := [6]byte{'-', '-', 'T', ':', ':', 0}
	limits := [6]uint64{timeLastYear, 12, 31, 23, 59, 59}
	rest := arg
	for i := range fields {
		v, after := cNumber(rest, decimal)
		fields[i] = v
		end := first(after)
		if (end != seps[i] && end != 0) || v > limits[i] || (i == 0 && v < timeFirstYear) {
			return 0, bad
		}
		if end == 0 {
			break
		}
		rest = after[1:]
	}
	t := time.Date(int(fields[0]), time.Month(fields[1]), int(fields[2]),
		int(fields[3]), int(fields[4]), int(fields[5]), 0, time.UTC)
	return uint32(t.Unix()), nil
}

// parseDaytime is time_parse_minutes: hh:mm[:ss] as seconds of the day;
// the message names the part that failed.
func parseDaytime(arg string) (uint32, *failure) {
	bad := func(s string) *failure {
		return paramErr("invalid time \"%s\" specified, should be hh:mm[:ss] format and within the boundaries", s)
	}
	const hourMax, minMax = 23, 59
	hour, rest := cNumber(arg, decimal)
	if first(rest) != ':' || hour > hourMax {
		return 0, bad(arg)
	}
	s := rest[1:]
	minute, rest := cNumber(s, decimal)
	if (first(rest) != ':' && rest != "") || minute > minMax {
		return 0, bad(s)
	}
	var second uint64
	if rest != "" {
		s = rest[1:]
		second, rest = cNumber(s, decimal)
		if rest != "" || second > minMax {
			return 0, bad(s)
		}
	}
	return uint32(60*60*hour + 60*minute + second), nil
}

// timeSegments is my_strseg over a comma list: each segment cut to fit a
// buffer of size bytes (NUL included).
func timeSegments(arg string, size int) []string {
	var segs []string
	for arg != "" {
		seg, rest, found := strings.Cut(arg, ",")
		if len(seg) > size-1 {
			seg = seg[:size-1]
		}
		segs = append(segs, seg)
		if !found {
			break
		}
		arg = rest
	}
	return segs
}

// timeMaxMonthday is the last day of a month --monthdays takes.
const timeMaxMonthday = 31

// parseMonthdays is time_parse_monthdays: numbers (base 0) up to 31, each
// read from its first two characters.
func parseMonthdays(arg string) (uint32, *failure) {
	var mask uint32
	for _, day := range timeSegments(arg, 3) {
		v, rest := cNumber(day, 0)
		if rest != "" || v > timeMaxMonthday {
			return 0, paramErr("%s is not a valid day for --monthdays", day)
		}
		mask |= 1 << v
	}
	return mask, nil
}

// weekDays are the weekday names, Monday first (bit 1).
var weekDays = [...]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// parseWeekdays is time_parse_weekdays: numbers 1 (Monday) to 7, or names
// by their first two letters, each read from its first three characters.
func parseWeekdays(arg string) (uint32, *failure) {
	var mask uint32
	for _, day := range timeSegments(arg, 4) {
		if v, rest := cNumber(day, 0); rest == "" {
			if v == 0 {
				return 0, paramErr("No, the week does NOT begin with Sunday.")
			}
			mask |= 1 << (v & 31) // the shift of a 32-bit int, as x86 does it
			continue
		}
		valid := false
		for i, name := range weekDays {
			if len(day) >= 2 && day[:2] == name[:2] {
				mask |= 1 << (i + 1)
				valid = true
			}
		}
		if !valid {
			return 0, paramErr("%s is not a valid day specifier", day)
		}
	}
	return mask, nil
}

// final implements matchState: time_check, then the guided options' checks.
func (s *timeState) final(*parseCtx) *failure {
	if s.flags.has(timeOptContiguous) && s.m.DaytimeStart < s.m.DaytimeStop {
		return paramErr("time: --contiguous only makes sense when stoptime is smaller than starttime")
	}
	return s.flags.fcheck(timeExt)
}

// build implements matchState.
func (s *timeState) build() ir.Match { m := s.m; return &m }

// daytimeText is a daytime as hh:mm:ss.
func daytimeText(t uint32) string {
	return fmt.Sprintf("%02d:%02d:%02d", t/3600, t/60%60, t%60)
}

// timeDateText is time_print_date: "" for the dates it leaves out (0),
// else the date in UTC with sep between the day and the time.
func timeDateText(date uint32, sep string) string {
	if date == 0 {
		return ""
	}
	return time.Unix(int64(date), 0).UTC().Format("2006-01-02" + sep + "15:04:05")
}

// monthdaysText is time_print_monthdays.
func monthdaysText(mask uint32, ordinal bool) string {
	var days []string
	for i := 1; i <= timeMaxMonthday; i++ {
		if mask&(1<<i) == 0 {
			continue
		}
		d := fmt.Sprint(i)
		if ordinal {
			d += [...]string{"th", "st", "nd", "rd", "th", "th", "th", "th", "th", "th"}[i%10]
		}
		days = append(days, d)
	}
	return " " + strings.Join(days, ",")
}

// weekdaysText is time_print_weekdays.
func weekdaysText(mask uint8) string {
	var days []string
	for i, name := range weekDays {
		if mask&(1<<(i+1)) != 0 {
			days = append(days, name)
		}
	}
	return " " + strings.Join(days, ",")
}

// hasDaytime reports whether the daytime range is not the default one.
func hasDaytime(m *ir.TimeMatch) bool {
	return m.DaytimeStart != 0 || m.DaytimeStop != ir.TimeMaxDaytime
}

// writeTime prints a time match as time_save does.
func writeTime(b *strings.Builder, m *ir.TimeMatch) {
	if hasDaytime(m) {
		b.WriteString(" --timestart " + daytimeText(m.DaytimeStart) + " --timestop " + daytimeText(m.DaytimeStop))
	}
	if m.Monthdays != ir.TimeAllMonthdays {
		b.WriteString(" --monthdays" + monthdaysText(m.Monthdays, false))
	}
	if m.Weekdays != ir.TimeAllWeekdays {
		b.WriteString(" --weekdays" + weekdaysText(m.Weekdays))
	}
	if d := timeDateText(m.DateStart, "T"); d != "" {
		b.WriteString(" --datestart " + d)
	}
	if d := timeDateText(m.DateStop, "T"); d != "" {
		b.WriteString(" --datestop " + d)
	}
	if m.KernelTZ {
		b.WriteString(" --kerneltz")
	}
	if m.Contiguous {
		b.WriteString(" --contiguous")
	}
}

// timeListing is a time match in iptables -L's listing (time_print).
func timeListing(m *ir.TimeMatch) string {
	var b strings.Builder
	b.WriteString(" TIME")
	if hasDaytime(m) {
		b.WriteString(" from " + daytimeText(m.DaytimeStart) + " to " + daytimeText(m.DaytimeStop))
	}
	if m.Weekdays != ir.TimeAllWeekdays {
		b.WriteString(" on" + weekdaysText(m.Weekdays))
	}
	if m.Monthdays != ir.TimeAllMonthdays {
		b.WriteString(" on" + monthdaysText(m.Monthdays, true))
	}
	if m.DateStart != 0 {
		b.WriteString(" starting from")
		if d := timeDateText(m.DateStart, " "); d != "" {
			b.WriteString(" " + d)
		}
	}
	if m.DateStop != ir.TimeNoDateStop {
		b.WriteString(" until date")
		if d := timeDateText(m.DateStop, " "); d != "" {
			b.WriteString(" " + d)
		}
	}
	if !m.KernelTZ {
		b.WriteString(" UTC")
	}
	if m.Contiguous {
		b.WriteString(" contiguous")
	}
	return b.String()
}

// checkTime is time_mt_check: daytimes within a day, --contiguous only
// for a range past midnight.
func checkTime(m *ir.TimeMatch) *failure {
	if m.DaytimeStart > ir.TimeMaxDaytime || m.DaytimeStop > ir.TimeMaxDaytime {
		return iptcErr("Numerical argument out of domain")
	}
	if m.Contiguous && m.DaytimeStart < m.DaytimeStop {
		return kernelEINVAL()
	}
	return nil
}
