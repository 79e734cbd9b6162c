package ir

// The hashlimit match (xt_hashlimit revision 3, iptables 1.8.9's default)
// and the kernel's arithmetic of its token buckets
// (net/netfilter/xt_hashlimit.c), which the front end needs for the
// kernel's checks and the data plane for the buckets' parameters.

// Hashlimit mode bits (XT_HASHLIMIT_*, struct hashlimit_cfg3 .mode).
const (
	HashLimitDstIP     = 1 << 0
	HashLimitDstPort   = 1 << 1
	HashLimitSrcIP     = 1 << 2
	HashLimitSrcPort   = 1 << 3
	HashLimitInvert    = 1 << 4
	HashLimitBytes     = 1 << 5
	HashLimitRateMatch = 1 << 6
	// HashLimitKeyBits are the bits that say what the key holds.
	HashLimitKeyBits = HashLimitDstIP | HashLimitDstPort | HashLimitSrcIP | HashLimitSrcPort
)

// HashLimitScale is XT_HASHLIMIT_SCALE_v2: a packet rate's Avg is the
// average time between packets in 1/HashLimitScale seconds.
const HashLimitScale = 1000000

// HashLimitByteShift is XT_HASHLIMIT_BYTE_SHIFT: byte rates count the
// packet length in chunks of 1 << HashLimitByteShift bytes.
const HashLimitByteShift = 4

// HashLimitMaxSize is HASHLIMIT_MAX_SIZE: the kernel lowers a larger
// --hashlimit-htable-size or -max to it.
const HashLimitMaxSize = 1048576

// HashLimitMatch is -m hashlimit: struct hashlimit_cfg3 and the table's
// name, as the kernel keeps them (its userspacesize).
type HashLimitMatch struct {
	// Name names the table; rules with the same name and family share it.
	Name string
	// Mode holds the HashLimit* bits.
	Mode uint32
	// Avg is the average period between packets in 1/HashLimitScale
	// seconds, or for byte rates the cost of a chunk (bytes_to_cost).
	Avg uint64
	// Burst is the bucket's depth in packets, or for byte rates the
	// number of times an empty bucket is refilled (0: never).
	Burst uint64
	// Size, Max, GCInterval (ms) and Expire (ms) are the table's
	// --hashlimit-htable-* options (Size and Max 0: the kernel's default).
	Size, Max, GCInterval, Expire uint32
	// Interval is --hashlimit-rate-interval in seconds.
	Interval uint32
	// SrcMask and DstMask are the prefix lengths of the addresses in the
	// key.
	SrcMask, DstMask uint8
}

// ModuleName implements Match.
func (*HashLimitMatch) ModuleName() string { return "hashlimit" }

// CloneMatch implements Match.
func (m *HashLimitMatch) CloneMatch() Match { c := *m; return &c }

// HashLimitCreditsPerJiffy is the kernel's CREDITS_PER_JIFFY of revisions
// 2 and 3 for a kernel of hz jiffies per second: the largest power of two
// not above 2^64-1 / (hz * seconds per day).
func HashLimitCreditsPerJiffy(hz uint32) uint64 {
	if hz == 0 {
		return 0
	}
	max := ^uint64(0) / (uint64(hz) * secondsPerDay)
	p := uint64(1)
	for p*2 <= max && p*2 != 0 {
		p *= 2
	}
	return p
}

// HashLimitCreditsPerJiffyBytes is CREDITS_PER_JIFFY_BYTES: the largest
// power of two not above 2^32-1 / hz.
func HashLimitCreditsPerJiffyBytes(hz uint32) uint32 {
	if hz == 0 {
		return 0
	}
	max := uint32(0xFFFFFFFF / hz)
	p := uint32(1)
	for p*2 <= max && p*2 != 0 {
		p *= 2
	}
	return p
}

// HashLimitUserToCredits is user2credits of revision 3, in 64 bits,
// wrapping where the kernel's product wraps.
func HashLimitUserToCredits(user uint64, hz uint32) uint64 {
	k := uint64(hz) * HashLimitCreditsPerJiffy(hz)
	if k == 0 {
		return 0
	}
	if HashLimitScale >= k {
		return user / (HashLimitScale / k)
	}
	return user * (k / HashLimitScale)
}

// HashLimitUserToCreditsBytes is user2credits_byte: the credits of one
// chunk of a byte rate.
func HashLimitUserToCreditsBytes(user uint32, hz uint32) uint32 {
	us := uint64(user) * uint64(hz) * uint64(HashLimitCreditsPerJiffyBytes(hz))
	return uint32(us >> 32)
}

// HashLimitBucket is how the kernel sets up a new entry of the table
// (rateinfo_init) and charges packets (hashlimit_mt_common) on a kernel of
// HZ jiffies per second.
type HashLimitBucket struct {
	// Credit is a new entry's credit; Cap the most it may hold (for byte
	// rates, Cap is CreditsPerJiffy * HZ and Refills the number of times
	// an empty bucket is filled again).
	Credit, Cap, Cost uint64
	// CreditsPerJiffy are the credits a jiffy brings.
	CreditsPerJiffy uint64
	// Refills is a byte-rate entry's initial credit_cap (Burst).
	Refills uint64
}

// Bucket returns the buckets of the table this match creates on a kernel
// of hz jiffies per second.
func (m *HashLimitMatch) Bucket(hz uint32) HashLimitBucket {
	if m.Mode&HashLimitBytes != 0 {
		cpj := uint64(HashLimitCreditsPerJiffyBytes(hz))
		full := cpj * uint64(hz)
		return HashLimitBucket{
			Credit: full, Cap: full, CreditsPerJiffy: cpj, Refills: m.Burst,
			Cost: uint64(HashLimitUserToCreditsBytes(uint32(m.Avg), hz)),
		}
	}
	credit := HashLimitUserToCredits(m.Avg*m.Burst, hz)
	return HashLimitBucket{
		Credit: credit, Cap: credit, CreditsPerJiffy: HashLimitCreditsPerJiffy(hz),
		Cost: HashLimitUserToCredits(m.Avg, hz),
	}
}

// RateWindow returns the rate and the burst of a --hashlimit-rate-match
// entry (rateinfo_init): user2rate of the average for packets
// (HashLimitScale / Avg) and the burst added to it; for bytes
// user2rate_bytes ((2^32-1) / Avg - 1, in chunks) and the burst times it
// (the rate when 0). Arithmetic in 64 bits, wrapping as the kernel's.
func (m *HashLimitMatch) RateWindow() (rate, burst uint64) {
	if m.Mode&HashLimitBytes != 0 {
		r := uint64(0xFFFFFFFF)
		if avg := uint32(m.Avg); avg != 0 {
			r = uint64(0xFFFFFFFF / avg)
		}
		rate = (r - 1) << HashLimitByteShift
		if m.Burst != 0 {
			return rate, m.Burst * rate
		}
		return rate, rate
	}
	if m.Avg != 0 {
		rate = HashLimitScale / m.Avg
	}
	return rate, m.Burst + rate
}

// HashLimitCheck is what hashlimit_mt_check_common says of a match on a
// kernel of hz jiffies per second.
type HashLimitCheck uint8

// The outcomes of the kernel's check.
const (
	HashLimitOK HashLimitCheck = iota
	// HashLimitEINVAL: a zero expiry or garbage collection interval, a
	// mask longer than the family's addresses, a byte rate whose chunk
	// costs no credit, a rate-match interval of 0, a bad table name.
	HashLimitEINVAL
	// HashLimitERANGE: a zero burst or a packet rate whose credits
	// overflow, a rate-match rate out of range.
	HashLimitERANGE
)

// Check applies the kernel's checks (xt_check_proc_name and
// hashlimit_mt_check_common) for family fam.
func (m *HashLimitMatch) Check(fam Family, hz uint32) HashLimitCheck {
	if m.Name == "" || m.Name == "." || m.Name == ".." || containsByte(m.Name, '/') {
		return HashLimitEINVAL
	}
	if m.GCInterval == 0 || m.Expire == 0 {
		return HashLimitEINVAL
	}
	maxBits := uint8(32)
	if fam == IPv6 {
		maxBits = 128
	}
	if m.SrcMask > maxBits || m.DstMask > maxBits {
		return HashLimitEINVAL
	}
	switch {
	case m.Mode&HashLimitRateMatch != 0:
		if m.Avg == 0 || m.Avg > 0xFFFFFFFF {
			return HashLimitERANGE
		}
		if m.Interval == 0 {
			return HashLimitEINVAL
		}
	case m.Mode&HashLimitBytes != 0:
		if HashLimitUserToCreditsBytes(uint32(m.Avg), hz) == 0 {
			return HashLimitEINVAL
		}
	case m.Burst == 0 || HashLimitUserToCredits(m.Avg*m.Burst, hz) < HashLimitUserToCredits(m.Avg, hz):
		return HashLimitERANGE
	}
	return HashLimitOK
}

// containsByte reports whether s holds c.
func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// tagHashLimit is the hashlimit match's tag in the binary form (codec.go),
// away from the tags numbered in a row there.
const tagHashLimit = 65

// hashLimit encodes a hashlimit match.
func (e *encoder) hashLimit(m *HashLimitMatch) {
	e.u8(tagHashLimit)
	e.str(m.Name)
	for _, v := range []uint64{uint64(m.Mode), m.Avg, m.Burst, uint64(m.Size), uint64(m.Max),
		uint64(m.GCInterval), uint64(m.Expire), uint64(m.Interval)} {
		e.uv(v)
	}
	e.u8(m.SrcMask)
	e.u8(m.DstMask)
}

// hashLimit decodes what encoder.hashLimit wrote after the tag.
func (d *decoder) hashLimit() *HashLimitMatch {
	m := &HashLimitMatch{Name: d.str(), Mode: d.u32(), Avg: d.uv(), Burst: d.uv()}
	m.Size, m.Max, m.GCInterval, m.Expire, m.Interval = d.u32(), d.u32(), d.u32(), d.u32(), d.u32()
	m.SrcMask, m.DstMask = d.u8(), d.u8()
	return m
}
