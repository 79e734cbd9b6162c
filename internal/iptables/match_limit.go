package iptables

import (
	"fmt"
	"math"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The limit match (libxt_limit, revision 0): --limit RATE[/second|/minute|
// /hour|/day] and --limit-burst N, neither invertible, and its output.

// limit guided option ids.
const (
	limitOptRate = iota
	limitOptBurst
)

// limitMaxBurst is the largest --limit-burst iptables takes.
const limitMaxBurst = 10000

// limitExt is the limit match module.
var limitExt = registerMatch(&extension{
	name: "limit",
	x6: []x6opt{
		{name: "limit", id: limitOptRate, typ: xtString},
		{name: "limit-burst", id: limitOptBurst, typ: xtUint32, max: limitMaxBurst},
	},
	newMatch: func(*parseCtx) matchState {
		// limit_init: 3/hour, burst 5.
		avg, _ := parseLimitRate(limitDefaultRate)
		return &limitState{m: ir.LimitMatch{Avg: avg, Burst: ir.LimitDefaultBurst}}
	},
})

// limitDefaultRate is the rate of a limit match without --limit.
const limitDefaultRate = "3/hour"

// limitState is one limit match being parsed.
type limitState struct {
	m     ir.LimitMatch
	flags x6flags
}

// parse implements matchState.
func (s *limitState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(limitExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case limitOptRate:
		avg, ok := parseLimitRate(arg)
		if !ok {
			return paramErr("bad rate \"%s\"'", arg)
		}
		if avg == 0 {
			// The rate maps to infinity.
			return paramErr("Rate too fast \"%s\"", arg)
		}
		s.m.Avg = avg
	case limitOptBurst:
		v, ok := xtStrtoui(arg, x.min, x.max)
		if !ok {
			return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", limitExt.name, x.name, x.min, x.max)
		}
		s.m.Burst = uint32(v)
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *limitState) final(*parseCtx) *failure { return s.flags.fcheck(limitExt) }

// build implements matchState.
func (s *limitState) build() ir.Match { m := s.m; return &m }

// limitUnits are the units of a rate, as parse_rate tries them: a unit is
// any case-insensitive prefix of its name ("/s", "/Min", "/hou").
var limitUnits = []struct {
	name    string
	seconds uint32
}{{"second", 1}, {"minute", 60}, {"hour", 60 * 60}, {"day", 24 * 60 * 60}}

// parseLimitRate is libxt_limit's parse_rate: the average period of a rate
// "N[/unit]" in 1/LimitScale seconds (0: the rate is too fast for the
// scale), false for a rate it does not take. N is read with atoi, so
// leading blanks, a sign and trailing junk before the '/' pass, as with
// iptables.
func parseLimitRate(rate string) (uint32, bool) {
	mult := uint32(1) // seconds by default
	if i := strings.IndexByte(rate, '/'); i >= 0 {
		unit := rate[i+1:]
		if unit == "" {
			return 0, false
		}
		found := false
		for _, u := range limitUnits {
			if len(unit) <= len(u.name) && strings.EqualFold(unit, u.name[:len(unit)]) {
				mult, found = u.seconds, true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	r := cAtoi(rate)
	if r == 0 {
		return 0, false
	}
	return ir.LimitScale * mult / r, true
}

// cAtoi is glibc's atoi as parse_rate stores it in a uint32_t: strtol in
// base 10 (clamped to the 64-bit long's range), cut to 32 bits.
func cAtoi(s string) uint32 {
	v, n, overflow := cStrtoul(s, decimal)
	if n == 0 {
		return 0
	}
	neg := strings.HasPrefix(strings.TrimLeft(s, " \t\n\v\f\r"), "-")
	switch {
	case neg && (overflow || -v > 1<<63):
		return 0 // LONG_MIN
	case !neg && (overflow || v > math.MaxInt64):
		return math.MaxUint32 // LONG_MAX
	}
	return uint32(v)
}

// limitRates are print_rate's units, longest first, with their period in
// 1/LimitScale seconds.
var limitRates = []struct {
	name string
	mult uint32
}{
	{"day", ir.LimitScale * 24 * 60 * 60},
	{"hour", ir.LimitScale * 60 * 60},
	{"min", ir.LimitScale * 60},
	{"sec", ir.LimitScale},
}

// limitRateString is print_rate: the period as "N/unit" in the shortest
// unit that still divides it well (iptables' rounding: 3/hour stays
// 3/hour, 1000/hour stays 1000/hour, 7/min prints 7/min).
func limitRateString(period uint32) string {
	if period == 0 {
		return fmt.Sprintf("%f", math.Inf(1))
	}
	i := 1
	for ; i < len(limitRates); i++ {
		m := limitRates[i].mult
		if period > m || m/period < m%period {
			break
		}
	}
	u := limitRates[i-1]
	return fmt.Sprintf("%d/%s", u.mult/period, u.name)
}

// writeLimit prints a limit match's options as iptables-save does (the
// default burst is left out).
func writeLimit(b *strings.Builder, m *ir.LimitMatch) {
	b.WriteString(" --limit " + limitRateString(m.Avg))
	if m.Burst != ir.LimitDefaultBurst {
		fmt.Fprintf(b, " --limit-burst %d", m.Burst)
	}
}

// limitListing is a limit match in iptables -L's listing.
func limitListing(m *ir.LimitMatch) string {
	return fmt.Sprintf(" limit: avg %s burst %d", limitRateString(m.Avg), m.Burst)
}

// KernelHZ returns the running kernel's CONFIG_HZ, on which the kernel's
// check of a limit match depends (Validate: a burst whose credits
// overflow is refused with ERANGE). The command line sets it to the data
// plane's reading; by default it is Debian's CONFIG_HZ.
var KernelHZ = func() uint32 { return defaultKernelHZ }

// defaultKernelHZ is CONFIG_HZ of Debian's kernels.
const defaultKernelHZ = 250

// kernelERANGE is what iptables prints when the kernel refuses a table
// with ERANGE (limit_mt_check's overflow check).
func kernelERANGE() *failure {
	return iptcErr("Numerical result out of range")
}

// checkLimit is limit_mt_check's refusal of a burst of 0 and of credits
// that overflow.
func checkLimit(m *ir.LimitMatch) *failure {
	if _, ok := m.Bucket(KernelHZ()); !ok {
		return kernelERANGE()
	}
	return nil
}
