package ir

import "fmt"

// IPv6 extension header matches of ip6tables: -m rt (ip6t_rt), -m frag
// (ip6t_frag) and -m ah in IPv6 (ip6t_ah). Their fields mirror the
// kernel's match structures, so a rule prints, saves and compares as
// iptables would.

// RTMaxAddrs is the most type-0 addresses -m rt takes (IP6T_RT_HOPS).
const RTMaxAddrs = 16

// RTMatch is -m rt: the routing header's type, segments left, length,
// and for type 0 its reserved field and addresses.
type RTMatch struct {
	// Type is --rt-type, tested when HasType.
	Type             uint32
	HasType, InvType bool
	// SegsLeft is --rt-segsleft's inclusive range (0 to 0xffffffff when
	// not given; the kernel tests it always). HasSegs is IP6T_RT_SGS.
	SegsLeft         [2]uint32
	HasSegs, InvSegs bool
	// Len is --rt-len, the header's whole length in bytes, tested when
	// HasLen.
	Len            uint32
	HasLen, InvLen bool
	// Res is --rt-0-res: the type-0 reserved field must be 0.
	Res bool
	// Addrs is --rt-0-addrs (HasAddrs: IP6T_RT_FST), each 16 bytes;
	// NotStrict is --rt-0-not-strict.
	Addrs     [][16]byte
	HasAddrs  bool
	NotStrict bool
}

// ModuleName implements Match.
func (*RTMatch) ModuleName() string { return "rt" }

// CloneMatch implements Match.
func (m *RTMatch) CloneMatch() Match {
	c := *m
	c.Addrs = append([][16]byte(nil), m.Addrs...)
	return &c
}

// FragMatch is -m frag: the fragment header's identification, reserved
// bits, offset and "more fragments" flag.
type FragMatch struct {
	// IDs is --fragid's inclusive range (0 to 0xffffffff when not given;
	// the kernel tests it always). HasIDs is IP6T_FRAG_IDS.
	IDs            [2]uint32
	HasIDs, InvIDs bool
	// Len is --fraglen (IP6T_FRAG_LEN), which the kernel never tests.
	Len            uint32
	HasLen, InvLen bool
	// Res, First, More and Last are --fragres, --fragfirst, --fragmore
	// and --fraglast.
	Res, First, More, Last bool
}

// ModuleName implements Match.
func (*FragMatch) ModuleName() string { return "frag" }

// CloneMatch implements Match.
func (m *FragMatch) CloneMatch() Match { c := *m; return &c }

// AH6Match is -m ah in IPv6 (ip6t_ah): the authentication header's SPI,
// length and reserved field.
type AH6Match struct {
	// SPIs is --ahspi's inclusive range (0 to 0xffffffff when not given).
	SPIs    [2]uint32
	InvSPIs bool
	// Len is --ahlen (0: not tested unless InvLen).
	Len    uint32
	InvLen bool
	// Res is --ahres: the reserved field must be 0.
	Res bool
}

// ModuleName implements Match.
func (*AH6Match) ModuleName() string { return "ah" }

// CloneMatch implements Match.
func (m *AH6Match) CloneMatch() Match { c := *m; return &c }

// Match tags of the IPv6 extension header matches (codec.go), apart from
// the others' so that new tags there never collide.
const (
	tagRT = iota + 80
	tagFrag
	tagAH6
)

// ip6ext encodes an IPv6 extension header match; false when m is none.
func (e *encoder) ip6ext(m Match) bool {
	switch m := m.(type) {
	case *RTMatch:
		e.u8(tagRT)
		e.flags(m.HasType, m.InvType, m.HasSegs, m.InvSegs, m.HasLen, m.InvLen, m.Res, m.HasAddrs)
		e.flags(m.NotStrict)
		e.uv(uint64(m.Type))
		e.uv(uint64(m.SegsLeft[0]))
		e.uv(uint64(m.SegsLeft[1]))
		e.uv(uint64(m.Len))
		e.uv(uint64(len(m.Addrs)))
		for _, a := range m.Addrs {
			e.buf = append(e.buf, a[:]...)
		}
	case *FragMatch:
		e.u8(tagFrag)
		e.flags(m.HasIDs, m.InvIDs, m.HasLen, m.InvLen, m.Res, m.First, m.More, m.Last)
		e.uv(uint64(m.IDs[0]))
		e.uv(uint64(m.IDs[1]))
		e.uv(uint64(m.Len))
	case *AH6Match:
		e.u8(tagAH6)
		e.flags(m.InvSPIs, m.InvLen, m.Res)
		e.uv(uint64(m.SPIs[0]))
		e.uv(uint64(m.SPIs[1]))
		e.uv(uint64(m.Len))
	default:
		return e.ip6hdr(m)
	}
	return true
}

// ip6ext decodes the match of tag; nil when the tag is none of these.
func (d *decoder) ip6ext(tag uint8) Match {
	switch tag {
	case tagRT:
		m := &RTMatch{}
		d.flags(&m.HasType, &m.InvType, &m.HasSegs, &m.InvSegs, &m.HasLen, &m.InvLen, &m.Res, &m.HasAddrs)
		d.flags(&m.NotStrict)
		m.Type = d.u32()
		m.SegsLeft[0], m.SegsLeft[1] = d.u32(), d.u32()
		m.Len = d.u32()
		n := d.uv()
		if n > RTMaxAddrs {
			d.fail(fmt.Errorf("rt match with %d addresses", n))
			return m
		}
		for i := uint64(0); i < n; i++ {
			var a [16]byte
			copy(a[:], d.bytes(16))
			m.Addrs = append(m.Addrs, a)
		}
		return m
	case tagFrag:
		m := &FragMatch{}
		d.flags(&m.HasIDs, &m.InvIDs, &m.HasLen, &m.InvLen, &m.Res, &m.First, &m.More, &m.Last)
		m.IDs[0], m.IDs[1] = d.u32(), d.u32()
		m.Len = d.u32()
		return m
	case tagAH6:
		m := &AH6Match{}
		d.flags(&m.InvSPIs, &m.InvLen, &m.Res)
		m.SPIs[0], m.SPIs[1] = d.u32(), d.u32()
		m.Len = d.u32()
		return m
	}
	return d.ip6hdr(tag)
}
