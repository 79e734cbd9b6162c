package ir

// The connlimit match (xt_connlimit, revision 1): the number of tracked
// connections whose packets met the match, grouped by the packet's source
// (or destination) address under a prefix mask.

// ConnlimitMatch is -m connlimit --connlimit-above N | --connlimit-upto N
// [--connlimit-mask BITS] [--connlimit-saddr | --connlimit-daddr]. Only
// what the kernel's match compares (its userspacesize) is kept: the limit,
// the flags and the mask, as a prefix length (iptables stores a netmask
// that is no prefix as the full one).
type ConnlimitMatch struct {
	// Limit is N.
	Limit uint32
	// Upto is XT_CONNLIMIT_INVERT: the match holds when the count is at
	// most Limit (--connlimit-upto, or ! --connlimit-above); otherwise
	// when it is above Limit.
	Upto bool
	// Daddr is XT_CONNLIMIT_DADDR: connections are grouped by the
	// packet's destination address instead of its source.
	Daddr bool
	// MaskBits is the prefix length of the grouping mask (0-32, 0-128).
	MaskBits uint8
}

// ModuleName implements Match.
func (*ConnlimitMatch) ModuleName() string { return "connlimit" }

// CloneMatch implements Match.
func (m *ConnlimitMatch) CloneMatch() Match { c := *m; return &c }

// tagConnlimit is the connlimit match's tag in the binary form (codec.go),
// away from the tags numbered in a row there.
const tagConnlimit = 84

// connlimit encodes a connlimit match.
func (e *encoder) connlimit(m *ConnlimitMatch) {
	e.u8(tagConnlimit)
	e.uv(uint64(m.Limit))
	e.flags(m.Upto, m.Daddr)
	e.u8(m.MaskBits)
}

// connlimit decodes what encoder.connlimit wrote after the tag.
func (d *decoder) connlimit() *ConnlimitMatch {
	m := &ConnlimitMatch{Limit: d.u32()}
	d.flags(&m.Upto, &m.Daddr)
	m.MaskBits = d.u8()
	return m
}
