package ir

// The recent match (xt_recent revision 1, which iptables 1.8.9 uses for
// both families, net/netfilter/xt_recent.c): lists of recently seen
// addresses, per network namespace and per name, shared by every rule
// naming the list in either family.

// Recent operations and modifiers: the kernel's check_set bits
// (XT_RECENT_*), of which exactly one of RecentCheck, RecentSet,
// RecentUpdate and RecentRemove is set.
const (
	RecentCheck  = 1 << 0 // --rcheck
	RecentSet    = 1 << 1 // --set
	RecentUpdate = 1 << 2 // --update
	RecentRemove = 1 << 3 // --remove
	RecentTTL    = 1 << 4 // --rttl
	RecentReap   = 1 << 5 // --reap

	// RecentOps are the four operations.
	RecentOps = RecentCheck | RecentSet | RecentUpdate | RecentRemove
	// RecentModifiers are the bits --set and --remove may not carry.
	RecentModifiers = RecentTTL | RecentReap
)

// RecentNameLen is XT_RECENT_NAME_LEN: a list's name has at most
// RecentNameLen-1 bytes.
const RecentNameLen = 200

// RecentMaxHitCount is the largest --hitcount the kernel takes
// (XT_RECENT_MAX_NSTAMPS - 1 since Linux 6.11; 255 before).
const RecentMaxHitCount = 65535

// RecentListTot is xt_recent's ip_list_tot default: the entries a list
// keeps before it evicts its least recently used one.
const RecentListTot = 100

// RecentMatch is -m recent: Flags are the kernel's check_set bits, Name
// the list, Mask the list's address mask (16 bytes as the kernel keeps
// it: an IPv4 rule's mask is its first 4 bytes, the rest zero when
// --mask was given and ones when not), Dest the side (--rdest).
type RecentMatch struct {
	Flags    uint8
	Invert   bool
	Seconds  uint32
	HitCount uint32
	Name     string
	Mask     [16]byte
	Dest     bool
}

// ModuleName implements Match.
func (*RecentMatch) ModuleName() string { return "recent" }

// CloneMatch implements Match.
func (m *RecentMatch) CloneMatch() Match { c := *m; return &c }

// StampsMask is the ring size minus one of the timestamps a list needs for
// this match (recent_mt_check's nstamp_mask with ip_pkt_list_tot 0): 31
// without --hitcount, else --hitcount rounded up to a power of two, less
// one. A list's ring is the largest of its rules'.
func (m *RecentMatch) StampsMask() uint32 {
	if m.HitCount == 0 {
		const defaultStamps = 32
		return defaultStamps - 1
	}
	p := uint32(1)
	for p < m.HitCount {
		p <<= 1
	}
	return p - 1
}

// tagRecent is the recent match's tag in the binary form (codec.go), away
// from the tags numbered in a row there.
const tagRecent = 72

// recent encodes a recent match.
func (e *encoder) recent(m *RecentMatch) {
	e.u8(tagRecent)
	e.u8(m.Flags)
	e.flags(m.Invert, m.Dest)
	e.uv(uint64(m.Seconds))
	e.uv(uint64(m.HitCount))
	e.str(m.Name)
	e.buf = append(e.buf, m.Mask[:]...)
}

// recent decodes what encoder.recent wrote after the tag.
func (d *decoder) recent() *RecentMatch {
	m := &RecentMatch{Flags: d.u8()}
	d.flags(&m.Invert, &m.Dest)
	m.Seconds = d.u32()
	m.HitCount = d.u32()
	m.Name = d.str()
	copy(m.Mask[:], d.bytes(len(m.Mask)))
	return m
}
