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
// may be the mapped memory of the namespace's sets).
type encodedMembers struct {
	area    []byte // the entries, appendEntry's encoding, one after the other
	offsets []byte // count little-endian uint32s: where each entry begins in area
	count   int
}

// newEncodedMembers returns the count members encoded in area, found
// through offsets. The offsets are checked when used (at), not here: a
// load must not cost the set.
func newEncodedMembers(area, offsets []byte, count int) (*encodedMembers, error) {
	if len(offsets) != 4*count {
		return nil, fmt.Errorf("%d bytes of offsets for %d entries", len(offsets), count)
	}
	if (count == 0) != (len(area) == 0) {
		return nil, fmt.Errorf("%d bytes of entries for %d", len(area), count)
	}
	return &encodedMembers{area: area, offsets: offsets, count: count}, nil
}

// at decodes entry i into e.
func (m *encodedMembers) at(i int, e *Entry) {
	off := binary.LittleEndian.Uint32(m.offsets[4*i:])
	d := decoder{err: errTruncated}
	if int(off) < len(m.area) {
		d = decoder{b: m.area[off:]}
		d.entry(e)
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
