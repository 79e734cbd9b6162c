package ipset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// encodedMembers are the members of a set as MarshalBinary wrote them,
// decoded on demand: a load of a million members then costs a few
// offsets checks instead of a million decodings. The entries are sorted
// by compareElem (what `ipset list` prints), and found by binary search
// through their offsets. The bytes are never written once encoded (they
// may be the mapped memory of the namespace's sets, mapped piece by piece
// when read: Pages).
type encodedMembers struct {
	p       Pages
	area    int // where the entries begin in p: appendEntry's encoding, one after the other
	areaLen int
	offsets int // where count little-endian uint32s begin in p: where each entry begins in the area
	count   int
}

// newEncodedMembers returns the count members encoded in the areaLen bytes
// of p at area, found through the offsets at offsets. The offsets are
// checked when used (at), not here: a load must not cost the set.
func newEncodedMembers(p Pages, area, areaLen, offsets, count int) (*encodedMembers, error) {
	if offsets+4*count > p.Len() {
		return nil, fmt.Errorf("%d bytes of offsets for %d entries", p.Len()-offsets, count)
	}
	if (count == 0) != (areaLen == 0) {
		return nil, fmt.Errorf("%d bytes of entries for %d", areaLen, count)
	}
	return &encodedMembers{p: p, area: area, areaLen: areaLen, offsets: offsets, count: count}, nil
}

// entryWindow is the first window of the area a member is decoded from:
// one without a long comment or names fits.
const entryWindow = 128

// at decodes entry i into e.
func (m *encodedMembers) at(i int, e *Entry) {
	ob, err := m.p.Slice(m.offsets+4*i, 4)
	if err != nil {
		panic(&CorruptError{Member: i, Count: m.count, Err: err})
	}
	off := int(binary.LittleEndian.Uint32(ob))
	d := decoder{err: errTruncated}
	if off < m.areaLen {
		avail := m.areaLen - off
		saved := *e
		for win := min(entryWindow, avail); ; win = min(4*win, avail) {
			b, err := m.p.Slice(m.area+off, win)
			if err != nil {
				panic(&CorruptError{Member: i, Count: m.count, Err: err})
			}
			d = decoder{b: b}
			d.entry(e)
			if d.err != errTruncated || win == avail {
				break
			}
			*e = saved // decoded afresh from a larger window
		}
	}
	if d.err != nil {
		// The encoding is xfw's own, in the namespace's map: only a
		// corrupt map gets here. The members are decoded deep inside
		// iterations that cannot return an error; the commands recover
		// the panic (RecoverCorrupt) and fail with its message.
		panic(&CorruptError{Member: i, Count: m.count, Err: d.err})
	}
}

// CorruptError is a member of a set's stored encoding that does not
// decode: the namespace's sets map is damaged. Decoding such a member
// panics with a *CorruptError, which RecoverCorrupt turns into an error.
type CorruptError struct {
	Member, Count int   // the member's index and the set's member count
	Err           error // what the decoder found
}

// Error says which member is corrupt and how to recover.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("the namespace's stored ipsets are corrupt (member %d of %d: %v); `xfw stop` removes them with the rulesets", e.Member, e.Count, e.Err)
}

// Unwrap returns the decoder's error.
func (e *CorruptError) Unwrap() error { return e.Err }

// RecoverCorrupt, deferred, turns a *CorruptError panic into *err (any
// other panic goes on). A command that reads sets defers it so that a
// damaged map gives an error, not a crash.
func RecoverCorrupt(err *error) {
	r := recover()
	if r == nil {
		return
	}
	ce, ok := r.(*CorruptError)
	if !ok {
		panic(r)
	}
	*err = ce
}

// search returns the index of the first entry not ordered before e.
func (m *encodedMembers) search(e Elem) int {
	var probe Entry
	lo, hi := 0, m.count
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		m.at(mid, &probe)
		if compareElem(probe.Elem, e) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// get returns the member e (a fresh copy).
func (m *encodedMembers) get(e Elem) (*Entry, bool) {
	i := m.search(e)
	if i >= m.count {
		return nil, false
	}
	p := new(Entry)
	m.at(i, p)
	if p.Elem != e {
		return nil, false
	}
	return p, true
}

// all calls fn for the entries from index first on, in order, until fn
// returns false; it reports whether fn always returned true.
func (m *encodedMembers) all(first int, fn func(*Entry) bool) bool {
	var slab []Entry
	for i := first; i < m.count; i++ {
		if len(slab) == 0 {
			slab = make([]Entry, min(1024, m.count-i))
		}
		p := &slab[0]
		slab = slab[1:]
		m.at(i, p)
		if !fn(p) {
			return false
		}
	}
	return true
}

// Within calls fn for every member whose address lies in [first, last]
// (address sets: hash:ip, hash:net …), in no particular order, until fn
// returns false. On a set loaded from its encoding it costs a binary
// search and the members found, not the set.
func (s *Set) Within(first, last netip.Addr, fn func(*Entry) bool) {
	inside := func(p *Entry) bool {
		a := p.Prefix.Addr()
		return p.Prefix.IsValid() && a.Compare(first) >= 0 && a.Compare(last) <= 0
	}
	for _, p := range s.overlay {
		if p != nil && inside(p) && !fn(p) {
			return
		}
	}
	if s.enc != nil {
		start := s.enc.search(Elem{Prefix: netip.PrefixFrom(first, first.BitLen())})
		s.enc.all(start, func(p *Entry) bool {
			if p.Prefix.Addr().Compare(last) > 0 {
				return false
			}
			if _, changed := s.overlay[p.Elem]; changed {
				return true
			}
			return fn(p)
		})
		return
	}
	for k, p := range s.base {
		if _, changed := s.overlay[k]; changed || !inside(p) {
			continue
		}
		if !fn(p) {
			return
		}
	}
}
