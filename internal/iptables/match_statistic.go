package iptables

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The statistic match (libxt_statistic, xt_statistic): its options, checks
// and printing as iptables 1.8.9.

// statistic option ids (libxt_statistic's enum).
const (
	statOptMode = iota
	statOptProbability
	statOptEvery
	statOptPacket
)

// statRandomScale is 2^31: a probability P is kept as lround(P * 2^31) and
// compared with 31 random bits.
const statRandomScale = 0x80000000

// statisticExt is the statistic match module.
var statisticExt = registerMatch(&extension{
	name: "statistic",
	x6: []x6opt{
		{name: "mode", id: statOptMode, typ: xtString, flags: xtMand},
		{name: "probability", id: statOptProbability, typ: xtString, flags: xtInvert, max: 1,
			excl: 1<<statOptEvery | 1<<statOptPacket},
		{name: "every", id: statOptEvery, typ: xtUint32, flags: xtInvert, min: 1, max: math.MaxUint32,
			excl: 1 << statOptProbability, also: 1 << statOptPacket},
		{name: "packet", id: statOptPacket, typ: xtUint32, max: math.MaxUint32,
			excl: 1 << statOptProbability, also: 1 << statOptEvery},
	},
	newMatch: func(c *parseCtx) matchState { return c.statisticSlab().next() },
})

// statisticState is one statistic match being parsed. every and packet
// stand for the union of xt_statistic_info: --probability writes the
// word --every does.
type statisticState struct {
	m     ir.StatisticMatch
	flags x6flags
}

// parse implements matchState (statistic_parse).
func (s *statisticState) parse(_ *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(statisticExt, o.id, invert)
	if f != nil {
		return f
	}
	if invert {
		s.m.Invert = true
	}
	switch o.id {
	case statOptMode:
		switch arg {
		case "random":
			s.m.Mode = ir.StatisticRandom
		case "nth":
			s.m.Mode = ir.StatisticNth
		default:
			return paramErr("Bad mode \"%s\"", arg)
		}
	case statOptProbability:
		p, ok := parseCDouble(arg)
		if !ok || p < 0 || p > 1 {
			return paramErr("statistic: bad value for option \"--%s\", or out of range (0-1).\n", x.name)
		}
		s.m.Every = lround32(p * statRandomScale)
	case statOptEvery, statOptPacket:
		v, ok := xtStrtoui(arg, x.min, x.max)
		if !ok {
			return paramErr("statistic: bad value for option \"--%s\", or out of range (%d-%d).\n", x.name, x.min, x.max)
		}
		if o.id == statOptEvery {
			s.m.Every = uint32(v) - 1
		} else {
			s.m.Packet = uint32(v)
		}
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState (statistic_check, then the guided checks).
func (s *statisticState) final(*parseCtx) *failure {
	if s.m.Mode == ir.StatisticRandom && !s.flags.has(statOptProbability) {
		return paramErr("--probability must be specified when using random mode")
	}
	if s.m.Mode == ir.StatisticNth && !s.flags.has(statOptEvery) && !s.flags.has(statOptPacket) {
		return paramErr("--every and --packet must be specified when using nth mode")
	}
	if s.m.Packet > s.m.Every {
		return paramErr("the --packet p must be 0 <= p <= n-1")
	}
	return s.flags.fcheck(statisticExt)
}

// build implements matchState: the union's word is the probability in
// random mode, --every minus one in nth mode.
// The state is built once and dropped: the match is its own.
func (s *statisticState) build() ir.Match {
	if s.m.Mode == ir.StatisticRandom {
		s.m.Probability, s.m.Every = s.m.Every, 0
	}
	return &s.m
}

// parseCDouble is strtod over the whole argument (xtopt_parse_double):
// leading white space, decimal and hexadecimal forms, inf and nan.
func parseCDouble(arg string) (float64, bool) {
	s := strings.TrimLeft(arg, " \t\n\v\f\r")
	if s == "" || strings.Contains(s, "_") {
		return 0, false
	}
	lower := strings.ToLower(strings.TrimLeft(s, "+-"))
	if strings.HasPrefix(lower, "0x") && !strings.Contains(lower, "p") {
		s += "p0" // strtod takes a hexadecimal number without exponent
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errorsIsRange(err) {
		return 0, false
	}
	return v, true
}

// errorsIsRange reports whether err is strconv's out-of-range error
// (strtod returns HUGE_VAL or 0 with ERANGE, which the caller's range
// check judges).
func errorsIsRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// lround32 is lround(v) stored in a 32-bit field: half away from zero; a
// NaN is glibc's LONG_MIN, whose low 32 bits are 0.
func lround32(v float64) uint32 {
	if math.IsNaN(v) {
		return 0
	}
	return uint32(int64(math.Round(v)))
}

// writeStatistic prints the match's options as iptables-save does.
func writeStatistic(b *strings.Builder, m *ir.StatisticMatch) {
	b.WriteString(statisticText(m, "--"))
}

// statisticListing is the match as iptables -L prints it.
func statisticListing(m *ir.StatisticMatch) string {
	return " statistic" + statisticText(m, "")
}

// statisticText is libxt_statistic's print_match with prefix.
func statisticText(m *ir.StatisticMatch, prefix string) string {
	not := ""
	if m.Invert {
		not = " !"
	}
	if m.Mode == ir.StatisticRandom {
		return fmt.Sprintf(" %smode random%s %sprobability %.11f", prefix, not, prefix,
			float64(m.Probability)/statRandomScale)
	}
	s := fmt.Sprintf(" %smode nth%s %severy %d", prefix, not, prefix, uint64(m.Every)+1)
	if m.Packet != 0 || prefix != "" {
		s += fmt.Sprintf(" %spacket %d", prefix, m.Packet)
	}
	return s
}
