package iptables

import (
	"math"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The hashlimit match (libxt_hashlimit, revision 3): per-key token buckets
// in a table named by --hashlimit-name. Parsing and the final check as
// iptables 1.8.9 does them (its quirks included: 32-bit truncations of
// byte bursts, "--hashlimit-rate-match" dividing the rate), the kernel's
// checks in checkHashLimit; printing in hashlimit_print.go.

// hashlimit guided option ids (libxt_hashlimit's O_*).
const (
	hlOptUpto = iota
	hlOptAbove
	hlOptLimit // unused: the old name --hashlimit has hlOptUpto's id
	hlOptMode
	hlOptSrcMask
	hlOptDstMask
	hlOptName
	hlOptBurst
	hlOptSize
	hlOptMax
	hlOptGCInterval
	hlOptExpire
	hlOptRateMatch
	hlOptInterval
)

// hashlimit's defaults and bounds (libxt_hashlimit.c).
const (
	hlDefaultBurst      = 5       // XT_HASHLIMIT_BURST
	hlMaxBurst          = 1000000 // XT_HASHLIMIT_BURST_MAX
	hlDefaultGCInterval = 1000    // XT_HASHLIMIT_GCINTERVAL, ms
	hlByteExpire        = 15      // XT_HASHLIMIT_BYTE_EXPIRE, s
	hlByteExpireBurst   = 60      // XT_HASHLIMIT_BYTE_EXPIRE_BURST, s
	hlNameSize          = 255     // sizeof(name): NAME_MAX
	msPerSecond         = 1000
)

// hashLimitExt is the hashlimit match module.
var hashLimitExt = registerMatch(&extension{
	name: "hashlimit",
	x6: []x6opt{
		{name: "hashlimit-upto", id: hlOptUpto, typ: xtString, flags: xtInvert, excl: 1 << hlOptAbove},
		{name: "hashlimit-above", id: hlOptAbove, typ: xtString, flags: xtInvert, excl: 1 << hlOptUpto},
		{name: "hashlimit", id: hlOptUpto, typ: xtString, flags: xtInvert, excl: 1 << hlOptAbove},
		{name: "hashlimit-srcmask", id: hlOptSrcMask, typ: xtString},
		{name: "hashlimit-dstmask", id: hlOptDstMask, typ: xtString},
		{name: "hashlimit-burst", id: hlOptBurst, typ: xtString},
		{name: "hashlimit-htable-size", id: hlOptSize, typ: xtUint32, max: math.MaxUint32},
		{name: "hashlimit-htable-max", id: hlOptMax, typ: xtUint32, max: math.MaxUint32},
		{name: "hashlimit-htable-gcinterval", id: hlOptGCInterval, typ: xtUint32, max: math.MaxUint32},
		{name: "hashlimit-htable-expire", id: hlOptExpire, typ: xtUint32, max: math.MaxUint32},
		{name: "hashlimit-mode", id: hlOptMode, typ: xtString},
		{name: "hashlimit-name", id: hlOptName, typ: xtString, flags: xtMand, min: 1, size: hlNameSize},
		{name: "hashlimit-rate-match", id: hlOptRateMatch, typ: xtNone},
		{name: "hashlimit-rate-interval", id: hlOptInterval, typ: xtString},
	},
	newMatch: func(c *parseCtx) matchState {
		bits := uint8(c.fam.AddrBits())
		return &hashLimitState{m: ir.HashLimitMatch{
			Burst: hlDefaultBurst, GCInterval: hlDefaultGCInterval, SrcMask: bits, DstMask: bits,
		}}
	},
})

// hashLimitState is one hashlimit match being parsed.
type hashLimitState struct {
	m     ir.HashLimitMatch
	flags x6flags
	// mult is the udata's mult: the rate's unit in seconds (15 for byte
	// rates), the default expiry.
	mult uint32
}

// parse implements matchState.
func (s *hashLimitState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(hashLimitExt, o.id, invert)
	if f != nil {
		return f
	}
	switch o.id {
	case hlOptUpto, hlOptAbove:
		f = s.parseRate(o.id, arg, invert)
	case hlOptMode:
		f = s.parseMode(arg)
	case hlOptSrcMask, hlOptDstMask:
		var n int
		n, f = parsePlen(c.fam, hashLimitExt.name, x.name, arg)
		if o.id == hlOptSrcMask {
			s.m.SrcMask = uint8(n)
		} else {
			s.m.DstMask = uint8(n)
		}
	case hlOptName:
		s.m.Name, f = x.parseString(arg)
	case hlOptBurst:
		s.m.Burst, f = parseHashLimitBurst(arg)
	case hlOptSize, hlOptMax, hlOptGCInterval, hlOptExpire:
		f = s.parseTable(o.id, x, arg)
	case hlOptRateMatch:
		s.m.Mode |= ir.HashLimitRateMatch
	case hlOptInterval:
		// parse_interval: atoi, positive.
		if r := int32(cAtoi(arg)); r > 0 {
			s.m.Interval = uint32(r)
		} else {
			f = paramErr("hashlimit: Bad value for \"--hashlimit-rate-interval\" option: \"%s\"", arg)
		}
	}
	if f != nil {
		return f
	}
	s.flags.done(o.id)
	return nil
}

// parseTable parses a --hashlimit-htable-* option (XTTYPE_UINT32).
func (s *hashLimitState) parseTable(id int, x *x6opt, arg string) *failure {
	v, ok := xtStrtoui(arg, x.min, x.max)
	if !ok {
		return paramErr("%s: bad value for option \"--%s\", or out of range (%d-%d).\n", hashLimitExt.name, x.name, x.min, x.max)
	}
	switch id {
	case hlOptSize:
		s.m.Size = uint32(v)
	case hlOptMax:
		s.m.Max = uint32(v)
	case hlOptGCInterval:
		s.m.GCInterval = uint32(v)
	default:
		s.m.Expire = uint32(v)
	}
	return nil
}

// parseRate is --hashlimit-upto / --hashlimit-above: a byte rate
// (parse_bytes) or a packet rate (parse_rate).
func (s *hashLimitState) parseRate(id int, arg string, invert bool) *failure {
	if (id == hlOptUpto) == invert {
		s.m.Mode |= ir.HashLimitInvert
	}
	if avg, ok, f := parseHashLimitBytes(arg); f != nil {
		return f
	} else if ok {
		s.m.Avg, s.mult = avg, hlByteExpire
		s.m.Mode |= ir.HashLimitBytes
		return nil
	}
	avg, mult, ok := parseHashLimitRate(arg)
	if !ok {
		name := "--hashlimit-upto"
		if id == hlOptAbove {
			name = "--hashlimit-above"
		}
		return paramErr("hashlimit: Bad value for \"%s\" option: \"%s\"", name, arg)
	}
	if avg == 0 {
		// The rate maps to infinity.
		return paramErr("Rate too fast \"%s\"", arg)
	}
	s.m.Avg, s.mult = avg, mult
	return nil
}

// parseMode is parse_mode: names separated by ',' or '|' (empty ones
// skipped).
func (s *hashLimitState) parseMode(arg string) *failure {
	names := map[string]uint32{
		"dstip": ir.HashLimitDstIP, "srcip": ir.HashLimitSrcIP,
		"srcport": ir.HashLimitSrcPort, "dstport": ir.HashLimitDstPort,
	}
	for _, tok := range strings.FieldsFunc(arg, func(r rune) bool { return r == ',' || r == '|' }) {
		bit, ok := names[tok]
		if !ok {
			return paramErr("hashlimit: Bad value for \"--hashlimit-mode\" option: \"%s\"", arg)
		}
		s.m.Mode |= bit
	}
	return nil
}

// final implements matchState: hashlimit_mt_check, then the guided checks.
func (s *hashLimitState) final(*parseCtx) *failure {
	if !s.flags.has(hlOptUpto) && !s.flags.has(hlOptAbove) {
		return paramErr("You have to specify --hashlimit")
	}
	if !s.flags.has(hlOptExpire) {
		s.m.Expire = s.mult * msPerSecond
	}
	if s.m.Mode&ir.HashLimitBytes != 0 {
		if f := s.byteBurst(); f != nil {
			return f
		}
	} else if s.m.Burst > hlMaxBurst {
		return hashLimitBurstError()
	}
	if s.flags.has(hlOptRateMatch) {
		if s.m.Mode&ir.HashLimitBytes == 0 {
			s.m.Avg /= uint64(s.mult)
		}
		if s.m.Interval == 0 {
			s.m.Interval = s.mult
			if s.m.Mode&ir.HashLimitBytes != 0 {
				s.m.Interval = 1
			}
		}
	}
	return s.flags.fcheck(hashLimitExt)
}

// byteBurst turns a byte rate's burst in bytes into the number of refills
// (hashlimit_mt_check, with its 32-bit truncation).
func (s *hashLimitState) byteBurst() *failure {
	var burst uint32
	if s.flags.has(hlOptBurst) {
		unit := hashLimitCostToBytes(s.m.Avg)
		if s.m.Burst < unit {
			return paramErr("burst cannot be smaller than %db", unit)
		}
		if unit == 0 {
			// iptables divides by zero here.
			return paramErr("burst: the rate's chunk is 0 bytes")
		}
		burst = uint32(uint64(uint32(s.m.Burst)) / unit)
		if s.m.Burst%unit != 0 {
			burst++
		}
		if !s.flags.has(hlOptExpire) {
			s.m.Expire = hlByteExpireBurst * msPerSecond
		}
	}
	s.m.Burst = uint64(burst)
	return nil
}

// build implements matchState. The kernel lowers a table size or maximum
// above HASHLIMIT_MAX_SIZE to it, in the rule it keeps.
func (s *hashLimitState) build() ir.Match {
	m := s.m
	m.Size = min(m.Size, ir.HashLimitMaxSize)
	m.Max = min(m.Max, ir.HashLimitMaxSize)
	return &m
}

// hashLimitBurstError is burst_error.
func hashLimitBurstError() *failure {
	return paramErr("bad value for option \"--hashlimit-burst\", or out of range (1-%d).", hlMaxBurst)
}

// hashLimitFactor is get_factor: 'm' and 'k' multiply by 2^20 and 2^10.
func hashLimitFactor(c byte) uint64 {
	switch c {
	case 'm':
		return 1 << 20
	case 'k':
		return 1 << 10
	}
	return 1
}

// parseHashLimitBurst is parse_burst: a number (base 0) optionally
// followed by a unit ("kb", "mb", anything else counting once); a plain
// number above the packet maximum is refused.
func parseHashLimitBurst(arg string) (uint64, *failure) {
	v, end, ok := xtStrtoul(arg, 0, 1, 0, false)
	if !ok || (end == len(arg) && v > hlMaxBurst) {
		return 0, hashLimitBurstError()
	}
	var unit byte
	if end < len(arg) {
		unit = arg[end]
	}
	return v * hashLimitFactor(unit), nil
}

// parseHashLimitBytes is parse_bytes: "N[k|m]b/s" as the cost of a chunk
// (bytes_to_cost); ok false when arg is no byte rate.
func parseHashLimitBytes(arg string) (uint64, bool, *failure) {
	i := strings.Index(arg, "b/s")
	if i <= 0 {
		return 0, false, nil
	}
	r := cAtoll(arg)
	if r == 0 {
		return 0, false, nil
	}
	bytes := r * hashLimitFactor(arg[i-1])
	chunks := uint32(bytes>>ir.HashLimitByteShift) + 1
	if chunks == 0 {
		// iptables divides by zero here.
		return 0, false, paramErr("Rate too high \"%s\"", arg)
	}
	return uint64(math.MaxUint32 / chunks), true, nil
}

// hashLimitCostToBytes is cost_to_bytes: the bytes per second of a cost.
func hashLimitCostToBytes(cost uint64) uint64 {
	r := uint64(math.MaxUint32)
	if cost != 0 {
		r = math.MaxUint32 / cost
	}
	return (r - 1) << ir.HashLimitByteShift
}

// hashLimitBytesToCost is bytes_to_cost.
func hashLimitBytesToCost(bytes uint64) uint64 {
	r := uint32(bytes >> ir.HashLimitByteShift)
	return uint64(math.MaxUint32 / (uint64(r) + 1))
}

// parseHashLimitRate is parse_rate of revision 3: "N[/unit]" as the
// average period in 1/HashLimitScale seconds (0: too fast) and the unit in
// seconds; false for a rate it does not take. N is read with atoll.
func parseHashLimitRate(rate string) (avg uint64, mult uint32, ok bool) {
	mult = 1
	if i := strings.IndexByte(rate, '/'); i >= 0 {
		unit := rate[i+1:]
		if unit == "" {
			return 0, 0, false
		}
		found := false
		for _, u := range limitUnits {
			if len(unit) <= len(u.name) && strings.EqualFold(unit, u.name[:len(unit)]) {
				mult, found = u.seconds, true
				break
			}
		}
		if !found {
			return 0, 0, false
		}
	}
	r := cAtoll(rate)
	if r == 0 {
		return 0, 0, false
	}
	return ir.HashLimitScale * uint64(mult) / r, mult, true
}

// cAtoll is glibc's atoll as parse_rate stores it in a uint64_t: strtol in
// base 10 clamped to the 64-bit long's range, negative values wrapping.
func cAtoll(s string) uint64 {
	v, n, overflow := cStrtoul(s, decimal)
	if n == 0 {
		return 0
	}
	neg := strings.HasPrefix(strings.TrimLeft(s, " \t\n\v\f\r"), "-")
	switch {
	case neg && (overflow || -v > 1<<63):
		return 1 << 63 // LONG_MIN
	case !neg && (overflow || v > math.MaxInt64):
		return math.MaxInt64 // LONG_MAX
	}
	return v
}

// checkHashLimit is the kernel's check of a hashlimit match
// (hashlimit_mt_check) at the running CONFIG_HZ.
func checkHashLimit(fam ir.Family, m *ir.HashLimitMatch) *failure {
	switch m.Check(fam, KernelHZ()) {
	case ir.HashLimitEINVAL:
		return kernelEINVAL()
	case ir.HashLimitERANGE:
		return kernelERANGE()
	}
	return nil
}

// parsePlen is xtopt_parse_plen (and the mask half of
// xtopt_parse_hostmask) for option optName of module ext: a prefix length
// or a netmask, which stands for its prefix length (-1 for a non-prefix
// netmask: xtables_ipmask_to_cidr's answer, which hashlimit keeps as 255).
func parsePlen(fam ir.Family, ext, optName, text string) (int, *failure) {
	maxBits := ipv4Bits
	if fam == ir.IPv6 {
		maxBits = ipv6Bits
	}
	if v, ok := xtStrtoui(text, 0, uint64(maxBits)); ok {
		return int(v), nil
	}
	var mask netip.Addr
	if fam == ir.IPv4 {
		if m, ok := inetAton4(text); ok {
			mask = netip.AddrFrom4(m)
		}
	} else if m, ok := inetPton6(text); ok {
		mask = netip.AddrFrom16(m)
	}
	if !mask.IsValid() {
		return 0, paramErr("%s: bad value for option \"--%s\", neither a valid network mask nor valid CIDR (0-%d).\n", ext, optName, maxBits)
	}
	return maskBits(mask), nil
}
