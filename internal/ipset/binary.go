package ipset

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// binaryMagic starts MarshalBinary's encoding (and names its version).
const binaryMagic = "xfw-ipset-2\n"

// Entry flag bits of the encoding.
const (
	flagNomatch = 1 << iota
	flagPhysdev
	flagExpires
	flagCounters
	flagComment
	flagIPv6
)

// MarshalBinary encodes the collection: sets in slot order (free slots
// kept), varint-coded, about 8 bytes per IPv4 member without extensions
// plus a 4-byte offset. Members of a list:set follow in list order; those
// of other sets are sorted (compareElem) and followed by the offset of
// each, so that UnmarshalBinary can leave them encoded and find one by
// binary search (encodedMembers).
func (ss *Sets) MarshalBinary() ([]byte, error) {
	b := []byte(binaryMagic)
	b = binary.AppendUvarint(b, ss.nextID)
	b = binary.AppendUvarint(b, uint64(len(ss.slots)))
	for _, s := range ss.slots {
		if s == nil {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = appendString(b, s.Name)
		b = append(b, byte(s.Type))
		b = binary.AppendUvarint(b, s.ID)
		o := s.Options
		b = append(b, byte(o.Family), o.BucketSize, o.Netmask, boolByte(o.ForceAdd), boolByte(o.HasTimeout), boolByte(o.Counters), boolByte(o.Comment))
		for _, v := range []uint64{uint64(o.HashSize), uint64(o.MaxElem), uint64(o.InitVal), uint64(o.PortFrom), uint64(o.PortTo), uint64(o.Size), uint64(o.Timeout)} {
			b = binary.AppendUvarint(b, v)
		}
		b = binary.AppendUvarint(b, uint64(s.Len()))
		if s.Type == ListSet {
			s.All(func(e *Entry) bool {
				b = appendEntry(b, e)
				return true
			})
			continue
		}
		entries := s.sortedEntries()
		offsets := make([]byte, 0, 4*len(entries))
		var area []byte
		for _, e := range entries {
			if uint64(len(area)) > 1<<32-1 {
				return nil, fmt.Errorf("set %s: more than 4 GiB of members", s.Name)
			}
			offsets = binary.LittleEndian.AppendUint32(offsets, uint32(len(area)))
			area = appendEntry(area, e)
		}
		b = binary.AppendUvarint(b, uint64(len(area)))
		b = append(b, area...)
		b = append(b, offsets...)
	}
	return b, nil
}

// sortedEntries returns the members in compareElem order: the encoded
// members (already in order) merged with the sorted overlay, or all of
// them sorted.
func (s *Set) sortedEntries() []*Entry {
	if s.enc == nil {
		out := make([]*Entry, 0, s.Len())
		s.All(func(p *Entry) bool {
			out = append(out, p)
			return true
		})
		return sortEntries(out)
	}
	out := make([]*Entry, 0, s.Len())
	added := make([]*Entry, 0, len(s.overlay))
	for _, p := range s.overlay {
		if p != nil {
			added = append(added, p)
		}
	}
	added = sortEntries(added)
	s.enc.all(0, func(p *Entry) bool {
		if _, changed := s.overlay[p.Elem]; changed {
			return true
		}
		for len(added) > 0 && compareElem(added[0].Elem, p.Elem) < 0 {
			out = append(out, added[0])
			added = added[1:]
		}
		out = append(out, p)
		return true
	})
	return append(out, added...)
}

// sortEntries sorts es by compareElem, comparing the addresses as two
// 64-bit halves computed once (a million members sort several times
// faster than by netip.Addr.Compare).
func sortEntries(es []*Entry) []*Entry {
	type keyed struct {
		hi, lo uint64
		bits   int
		e      *Entry
	}
	ks := make([]keyed, len(es))
	for i, e := range es {
		a := e.Prefix.Addr().As16()
		ks[i] = keyed{binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]), e.Prefix.Bits(), e}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		switch {
		case a.hi != b.hi:
			return cmp.Compare(a.hi, b.hi)
		case a.lo != b.lo:
			return cmp.Compare(a.lo, b.lo)
		}
		return compareElem(a.e.Elem, b.e.Elem)
	})
	for i := range ks {
		es[i] = ks[i].e
	}
	return es
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendEntry(b []byte, e *Entry) []byte {
	var flags byte
	if e.Nomatch {
		flags |= flagNomatch
	}
	if e.Physdev {
		flags |= flagPhysdev
	}
	if !e.Expires.IsZero() {
		flags |= flagExpires
	}
	if e.Packets != 0 || e.Bytes != 0 {
		flags |= flagCounters
	}
	if e.Comment != "" {
		flags |= flagComment
	}
	if e.Prefix.Addr().Is6() {
		flags |= flagIPv6
	}
	b = append(b, flags)
	if e.Prefix.IsValid() {
		b = append(b, byte(e.Prefix.Bits()+1))
		raw := e.Prefix.Addr().AsSlice()
		b = append(b, raw...)
	} else {
		b = append(b, 0)
	}
	b = append(b, e.Proto)
	b = binary.AppendUvarint(b, uint64(e.Port))
	b = appendString(b, e.Iface)
	b = appendString(b, e.SetName)
	if flags&flagExpires != 0 {
		b = binary.AppendVarint(b, e.Expires.UnixNano())
	}
	if flags&flagCounters != 0 {
		b = binary.AppendUvarint(b, e.Packets)
		b = binary.AppendUvarint(b, e.Bytes)
	}
	if flags&flagComment != 0 {
		b = appendString(b, e.Comment)
	}
	return b
}

// decoder reads MarshalBinary's encoding.
type decoder struct {
	b   []byte
	err error
	// rest is the number of bytes of the encoding after b (decodeAt's
	// window).
	rest int
}

// left is the number of bytes of the encoding not decoded yet.
func (d *decoder) left() int { return len(d.b) + d.rest }

var errTruncated = errors.New("truncated")

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errTruncated
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errTruncated
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errTruncated
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errTruncated
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errTruncated
		return ""
	}
	return string(d.bytes(int(n)))
}

// UnmarshalBinary decodes MarshalBinary's encoding into ss. The members
// of sets other than list:set stay encoded in data (decoded when used), so
// data must not change while ss is in use.
func (ss *Sets) UnmarshalBinary(data []byte) error {
	return ss.UnmarshalPages(bytePages(data))
}

// Pages is an encoding read in place piece by piece, such as the
// namespace's sets map mapped page by page when used (the kernel maps
// every page of a mapping when it is made: a million members are
// thousands of pages, of which a command uses a few).
type Pages interface {
	// Len is the encoding's length in bytes.
	Len() int
	// Slice returns bytes off … off+n-1 (off ≥ 0, n ≥ 1, off+n ≤ Len)
	// in place; they must not change while sets decoded from them are in
	// use.
	Slice(off, n int) ([]byte, error)
}

// bytePages is an encoding held in one slice.
type bytePages []byte

func (b bytePages) Len() int { return len(b) }

func (b bytePages) Slice(off, n int) ([]byte, error) { return b[off : off+n : off+n], nil }

// decodeWindow is the first window a piece of an encoding read through
// Pages is decoded from (decodeAt): a set's header, a member.
const decodeWindow = 256

// decodeAt runs fn on a decoder over p from off, over a window of at least
// min bytes that grows while fn runs out of bytes before the encoding's
// end (fn may run several times: it must start afresh each time), and
// returns where the decoding stopped. The decoder's rest says how many
// bytes of the encoding follow the window.
func decodeAt(p Pages, off, min int, fn func(d *decoder)) (int, error) {
	total := p.Len()
	win := max(min, decodeWindow)
	for {
		win = minInt(win, total-off)
		d := &decoder{}
		if win > 0 {
			b, err := p.Slice(off, win)
			if err != nil {
				return off, err
			}
			d.b = b
		}
		d.rest = total - off - win
		fn(d)
		if d.err == errTruncated && d.rest > 0 {
			win *= 4
			continue
		}
		return off + win - len(d.b), d.err
	}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// UnmarshalPages decodes MarshalBinary's encoding held by p into ss,
// reading only the sets' headers: the members of sets other than list:set
// stay encoded in p (decoded when used), so p must not change while ss is
// in use.
func (ss *Sets) UnmarshalPages(p Pages) error {
	total := p.Len()
	if total < len(binaryMagic) {
		return errors.New("not an xfw ipset state (bad magic)")
	}
	if b, err := p.Slice(0, len(binaryMagic)); err != nil {
		return err
	} else if string(b) != binaryMagic {
		return errors.New("not an xfw ipset state (bad magic)")
	}
	var n uint64
	off, err := decodeAt(p, len(binaryMagic), 0, func(d *decoder) {
		ss.nextID = d.uvarint()
		n = d.uvarint()
	})
	if err != nil {
		return err
	}
	if n > uint64(total-off) {
		return fmt.Errorf("set count %d: %w", n, errTruncated)
	}
	ss.slots = make([]*Set, n)
	for i := range ss.slots {
		var s *Set
		var fail error // a failure fn found, final
		var count, areaLen uint64
		next, err := decodeAt(p, off, 0, func(d *decoder) {
			s, fail, count, areaLen = nil, nil, 0, 0
			if d.byte() == 0 {
				return
			}
			s = &Set{Name: d.string(), Type: Type(d.byte()), ID: d.uvarint()}
			o := &s.Options
			o.Family, o.BucketSize, o.Netmask = Family(d.byte()), d.byte(), d.byte()
			o.ForceAdd, o.HasTimeout, o.Counters, o.Comment = d.byte() == 1, d.byte() == 1, d.byte() == 1, d.byte() == 1
			o.HashSize, o.MaxElem, o.InitVal = uint32(d.uvarint()), uint32(d.uvarint()), uint32(d.uvarint())
			o.PortFrom, o.PortTo, o.Size, o.Timeout = uint16(d.uvarint()), uint16(d.uvarint()), uint32(d.uvarint()), uint32(d.uvarint())
			count = d.uvarint()
			if count > uint64(d.left()) {
				if d.err == nil {
					fail = fmt.Errorf("set %s: entry count %d: %w", s.Name, count, errTruncated)
				}
				return
			}
			if s.Type == ListSet {
				s.base = make(map[Elem]*Entry, count)
				slab := make([]Entry, count) // one allocation for all entries
				for j := range slab {
					e := &slab[j]
					d.entry(e)
					if d.err != nil {
						return
					}
					s.base[e.Elem] = e
					s.count++
					s.order = append(s.order, e.Elem)
				}
				return
			}
			areaLen = d.uvarint()
			if d.err == nil && (areaLen > uint64(d.left()) || count > uint64(d.left())/4) {
				fail = fmt.Errorf("set %s: %d entries in %d bytes: %w", s.Name, count, areaLen, errTruncated)
			}
		})
		if fail != nil {
			return fail
		}
		if err != nil {
			if s != nil && s.Name != "" {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			return fmt.Errorf("set %d: %w", i, err)
		}
		off = next
		if s == nil {
			continue
		}
		if s.Type != ListSet {
			area, offsets := off, off+int(areaLen)
			if offsets+4*int(count) > total {
				return fmt.Errorf("set %s: %w", s.Name, errTruncated)
			}
			enc, err := newEncodedMembers(p, area, int(areaLen), offsets, int(count))
			if err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			s.enc, s.count = enc, int(count)
			off = offsets + 4*int(count)
		}
		if _, ok := types[s.Type]; !ok {
			return fmt.Errorf("set %s: unknown type %d", s.Name, s.Type)
		}
		ss.slots[i] = s
	}
	if off != total {
		return fmt.Errorf("%d trailing bytes", total-off)
	}
	return nil
}

func (d *decoder) entry(e *Entry) {
	flags := d.byte()
	if bits := d.byte(); bits != 0 {
		size := 4
		if flags&flagIPv6 != 0 {
			size = 16
		}
		addr, ok := netip.AddrFromSlice(d.bytes(size))
		if !ok && d.err == nil {
			d.err = errors.New("bad address")
		}
		e.Prefix = netip.PrefixFrom(addr, int(bits)-1)
	}
	e.Proto = d.byte()
	e.Port = uint16(d.uvarint())
	e.Iface = d.string()
	e.SetName = d.string()
	e.Nomatch = flags&flagNomatch != 0
	e.Physdev = flags&flagPhysdev != 0
	if flags&flagExpires != 0 {
		e.Expires = time.Unix(0, d.varint())
	}
	if flags&flagCounters != 0 {
		e.Packets, e.Bytes = d.uvarint(), d.uvarint()
	}
	if flags&flagComment != 0 {
		e.Comment = d.string()
	}
}
