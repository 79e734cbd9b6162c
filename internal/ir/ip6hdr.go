package ir

import "fmt"

// More IPv6 extension header matches of ip6tables: -m hbh and -m dst
// (ip6t_hbh, struct ip6t_opts), -m ipv6header (ip6t_ipv6header) and -m mh
// (ip6t_mh). Their fields mirror the kernel's match structures.

// OptsMaxOpts is the most options --hbh-opts / --dst-opts take
// (IP6T_OPTS_OPTSNR).
const OptsMaxOpts = 16

// OptsAnyLen is the length byte of an option given without one: any
// length (0x00FF in ip6t_opts.opts).
const OptsAnyLen = 0xff

// OptsMatch is -m hbh (Dst false) or -m dst (Dst true): the hop-by-hop or
// destination options header's length and its options in order.
type OptsMatch struct {
	Dst bool
	// Len is --hbh-len / --dst-len, the header's whole length in bytes,
	// tested when HasLen.
	Len            uint32
	HasLen, InvLen bool
	// Opts is --hbh-opts / --dst-opts (HasOpts: IP6T_OPTS_OPTS): each
	// type << 8 | length, length OptsAnyLen for any.
	Opts    []uint16
	HasOpts bool
}

// ModuleName implements Match.
func (m *OptsMatch) ModuleName() string {
	if m.Dst {
		return "dst"
	}
	return "hbh"
}

// CloneMatch implements Match.
func (m *OptsMatch) CloneMatch() Match {
	c := *m
	c.Opts = append([]uint16(nil), m.Opts...)
	return &c
}

// The header bits of -m ipv6header (ip6t_ipv6header.h MASK_*).
const (
	IP6HdrHop   = 0x80
	IP6HdrDst   = 0x40
	IP6HdrRoute = 0x20
	IP6HdrFrag  = 0x10
	IP6HdrAuth  = 0x08
	IP6HdrESP   = 0x04
	IP6HdrNone  = 0x02
	IP6HdrProto = 0x01
)

// IPv6HeaderMatch is -m ipv6header: which extension headers the packet's
// chain holds (Flags, MASK_* bits), all of them exactly or, Soft, at least
// those; Invert is "! --header" (invflags 0xFF).
type IPv6HeaderMatch struct {
	Flags        uint8
	Invert, Soft bool
}

// ModuleName implements Match.
func (*IPv6HeaderMatch) ModuleName() string { return "ipv6header" }

// CloneMatch implements Match.
func (m *IPv6HeaderMatch) CloneMatch() Match { c := *m; return &c }

// MHMatch is -m mh: the Mobility Header's type within Types (inclusive).
type MHMatch struct {
	Types  [2]uint8
	Invert bool
}

// ModuleName implements Match.
func (*MHMatch) ModuleName() string { return "mh" }

// CloneMatch implements Match.
func (m *MHMatch) CloneMatch() Match { c := *m; return &c }

// Match tags of these matches (codec.go), after ip6ext.go's.
const (
	tagOpts = iota + 90
	tagIPv6Header
	tagMH
)

// ip6hdr encodes one of these matches; false when m is none.
func (e *encoder) ip6hdr(m Match) bool {
	switch m := m.(type) {
	case *OptsMatch:
		e.u8(tagOpts)
		e.flags(m.Dst, m.HasLen, m.InvLen, m.HasOpts)
		e.uv(uint64(m.Len))
		e.uv(uint64(len(m.Opts)))
		for _, o := range m.Opts {
			e.uv(uint64(o))
		}
	case *IPv6HeaderMatch:
		e.u8(tagIPv6Header)
		e.flags(m.Invert, m.Soft)
		e.u8(m.Flags)
	case *MHMatch:
		e.u8(tagMH)
		e.flags(m.Invert)
		e.u8(m.Types[0])
		e.u8(m.Types[1])
	default:
		return false
	}
	return true
}

// ip6hdr decodes the match of tag; nil when the tag is none of these.
func (d *decoder) ip6hdr(tag uint8) Match {
	switch tag {
	case tagOpts:
		m := &OptsMatch{}
		d.flags(&m.Dst, &m.HasLen, &m.InvLen, &m.HasOpts)
		m.Len = d.u32()
		n := d.uv()
		if n > OptsMaxOpts {
			d.fail(fmt.Errorf("%s match with %d options", m.ModuleName(), n))
			return m
		}
		for i := uint64(0); i < n; i++ {
			m.Opts = append(m.Opts, uint16(d.uv()))
		}
		return m
	case tagIPv6Header:
		m := &IPv6HeaderMatch{}
		d.flags(&m.Invert, &m.Soft)
		m.Flags = d.u8()
		return m
	case tagMH:
		m := &MHMatch{}
		d.flags(&m.Invert)
		m.Types[0], m.Types[1] = d.u8(), d.u8()
		return m
	}
	return nil
}
