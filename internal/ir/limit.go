package ir

// The limit match (xt_limit, revision 0) and the kernel's token bucket
// arithmetic (net/netfilter/xt_limit.c), which the front end needs for the
// kernel's overflow check and the data plane for the bucket's parameters.

// LimitScale is XT_LIMIT_SCALE: LimitMatch.Avg is the average time between
// packets in 1/LimitScale seconds.
const LimitScale = 10000

// LimitDefaultBurst is the burst iptables gives a limit match without
// --limit-burst (XT_LIMIT_BURST), which iptables-save leaves out.
const LimitDefaultBurst = 5

// LimitMatch is -m limit [--limit RATE] [--limit-burst N]: a token bucket
// per rule, shared by all CPUs, that lets Burst packets through at once and
// one more every Avg/LimitScale seconds on average. Only the two values the
// kernel compares (the match's userspacesize) are kept.
type LimitMatch struct {
	// Avg is the average period between packets in 1/LimitScale seconds
	// (iptables' LimitScale * unit / rate, truncated).
	Avg uint32
	// Burst is the bucket's depth in packets.
	Burst uint32
}

// ModuleName implements Match.
func (*LimitMatch) ModuleName() string { return "limit" }

// CloneMatch implements Match.
func (m *LimitMatch) CloneMatch() Match { c := *m; return &c }

// secondsPerDay bounds the slowest rate the kernel's credits must
// represent (1/day): CreditsPerJiffy * hz * secondsPerDay < 2^32.
const secondsPerDay = 24 * 60 * 60

// CreditsPerJiffy is the kernel's CREDITS_PER_JIFFY for a kernel of hz
// jiffies per second: the largest power of two not above
// 0xFFFFFFFF / (hz * seconds per day), the credits a bucket gains per
// jiffy.
func CreditsPerJiffy(hz uint32) uint32 {
	if hz == 0 {
		return 0
	}
	max := uint32(0xFFFFFFFF / (uint64(hz) * secondsPerDay))
	p := uint32(1)
	for p*2 <= max && p*2 != 0 {
		p *= 2
	}
	return p
}

// UserToCredits is the kernel's user2credits: a period in 1/LimitScale
// seconds as credits, computed in 32 bits exactly as the kernel does
// (dividing first when multiplying would overflow, and wrapping where the
// kernel's product wraps).
func UserToCredits(user, hz uint32) uint32 {
	k := hz * CreditsPerJiffy(hz)
	if k == 0 {
		return 0
	}
	if user > 0xFFFFFFFF/k {
		return (user / LimitScale) * hz * CreditsPerJiffy(hz)
	}
	return user * k / LimitScale
}

// LimitBucket is a limit match's token bucket as the kernel sets it up
// (limit_mt_check): a packet passes when the bucket holds Cost credits and
// takes them; the bucket starts full, at Capacity, and gains
// CreditsPerJiffy credits a jiffy up to Capacity.
type LimitBucket struct {
	Cost, Capacity, CreditsPerJiffy uint32
}

// Bucket returns the match's bucket on a kernel of hz jiffies per second,
// and false where the kernel refuses the match with ERANGE: a zero burst,
// or Avg * Burst wrapping in 32 bits to fewer credits than Avg alone.
func (m *LimitMatch) Bucket(hz uint32) (LimitBucket, bool) {
	cost := UserToCredits(m.Avg, hz)
	capacity := UserToCredits(m.Avg*m.Burst, hz)
	if m.Burst == 0 || capacity < cost {
		return LimitBucket{}, false
	}
	return LimitBucket{Cost: cost, Capacity: capacity, CreditsPerJiffy: CreditsPerJiffy(hz)}, true
}

// tagLimit is the limit match's tag in the binary form (codec.go), away
// from the tags numbered in a row there.
const tagLimit = 64

// limit encodes a limit match.
func (e *encoder) limit(m *LimitMatch) {
	e.u8(tagLimit)
	e.uv(uint64(m.Avg))
	e.uv(uint64(m.Burst))
}

// limit decodes what encoder.limit wrote after the tag.
func (d *decoder) limit() *LimitMatch {
	return &LimitMatch{Avg: d.u32(), Burst: d.u32()}
}
