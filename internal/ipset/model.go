package ipset

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Version is the ipset release whose behaviour and messages this package
// reproduces.
const Version = "7.17"

// ProtocolVersion is the netlink protocol version ipset reports.
const ProtocolVersion = 7

// Type is a set type.
type Type uint8

// The supported set types.
const (
	HashIP Type = iota + 1
	HashNet
	HashIPPort
	HashNetPort
	HashNetIface
	BitmapPort
	ListSet
)

// typeInfo describes a set type as ipset and the kernel know it.
type typeInfo struct {
	name     string
	revision int
	hasIP    bool // the element starts with an address
	isNet    bool // that address is a network (nomatch allowed)
	hasPort  bool // ,[proto:]port second part
	hasIface bool // ,[physdev:]iface second part
}

var types = map[Type]typeInfo{
	HashIP:       {name: "hash:ip", revision: 6, hasIP: true},
	HashNet:      {name: "hash:net", revision: 7, hasIP: true, isNet: true},
	HashIPPort:   {name: "hash:ip,port", revision: 7, hasIP: true, hasPort: true},
	HashNetPort:  {name: "hash:net,port", revision: 8, hasIP: true, isNet: true, hasPort: true},
	HashNetIface: {name: "hash:net,iface", revision: 8, hasIP: true, isNet: true, hasIface: true},
	BitmapPort:   {name: "bitmap:port", revision: 3},
	ListSet:      {name: "list:set", revision: 3},
}

// knownUnsupported are set types ipset 7.17 knows but xfw does not serve;
// creating one fails as on a kernel without the type's module.
var knownUnsupported = []string{
	"bitmap:ip", "bitmap:ip,mac", "hash:ip,mac", "hash:ip,mark", "hash:ip,port,ip",
	"hash:ip,port,net", "hash:mac", "hash:net,net", "hash:net,port,net",
}

// String returns the type's name as ipset prints it ("hash:ip").
func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Revision is the type revision the kernel of this machine reports.
func (t Type) Revision() int { return types[t].revision }

// IsHash reports whether t is one of the hash types (which have a family).
func (t Type) IsHash() bool { return t >= HashIP && t <= HashNetIface }

// HasAddr reports whether members have an address part (Elem.Prefix).
func (t Type) HasAddr() bool { return types[t].hasIP }

// IsNet reports whether the address part is a network matched by longest
// prefix (nomatch entries exclude); otherwise it is an exact address (or
// hash:ip's netmask block).
func (t Type) IsNet() bool { return types[t].isNet }

// HasPort reports whether members have a protocol and port (Elem.Proto,
// Elem.Port); bitmap:port has a port only.
func (t Type) HasPort() bool { return types[t].hasPort }

// HasIface reports whether members have an interface (Elem.Iface,
// Elem.Physdev).
func (t Type) HasIface() bool { return types[t].hasIface }

// parseType looks a type name up.
func parseType(name string) (Type, bool) {
	for t, ti := range types {
		if ti.name == name {
			return t, true
		}
	}
	return 0, false
}

// Family is the address family of a hash set.
type Family uint8

// Address families.
const (
	FamilyNone Family = iota // bitmap:port, list:set
	Inet
	Inet6
)

// String returns "inet" or "inet6".
func (f Family) String() string {
	switch f {
	case Inet:
		return "inet"
	case Inet6:
		return "inet6"
	}
	return "unspec"
}

// bits is the address length of the family.
func (f Family) bits() int {
	if f == Inet6 {
		return 128
	}
	return 32
}

// Options are a set's create options, as the kernel stores them (hashsize
// rounded, defaults filled in).
type Options struct {
	Family     Family
	HashSize   uint32 // hash types
	MaxElem    uint32 // hash types
	BucketSize uint8  // hash types
	InitVal    uint32 // hash types: the kernel's random hash seed
	Netmask    uint8  // hash:ip; 0 when not given
	PortFrom   uint16 // bitmap:port
	PortTo     uint16 // bitmap:port
	Size       uint32 // list:set
	ForceAdd   bool   // hash types: evict a random entry when full
	HasTimeout bool   // the set has the timeout extension
	Timeout    uint32 // default entry timeout in seconds (0: permanent)
	Counters   bool   // the set has the packet/byte counter extension
	Comment    bool   // the set has the comment extension
}

// Protocol numbers of port elements.
const (
	ProtoICMP    = 1
	ProtoTCP     = 6
	ProtoUDP     = 17
	ProtoICMPv6  = 58
	ProtoSCTP    = 132
	ProtoUDPLite = 136
)

// Elem is the identity of a set member: two entries with equal Elem are the
// same member. Only the fields of the set's type are used.
type Elem struct {
	// Prefix is the address part: a full-length prefix for hash:ip and the
	// ip of hash:ip,port (or the netmask-ed block of hash:ip netmask N), the
	// network for the net types. Always masked.
	Prefix netip.Prefix
	// Proto and Port are the port part (hash:*,port; bitmap:port uses Port
	// only). For ICMP and ICMPv6, Port is type<<8 | code.
	Proto uint8
	Port  uint16
	// Iface is the interface of hash:net,iface; Physdev marks the bridge
	// port form "physdev:NAME".
	Iface   string
	Physdev bool
	// SetName is the member of a list:set.
	SetName string
}

// Entry is a set member with its extensions.
type Entry struct {
	Elem
	// Nomatch excludes the network from matches (net types).
	Nomatch bool
	// Expires is when the entry times out; zero for a permanent entry
	// (a set without timeout, or "timeout 0").
	Expires time.Time
	// Packets and Bytes are the counters (sets with counters).
	Packets, Bytes uint64
	// Comment is the entry's comment (sets with comment).
	Comment string
}

// Set is one set: its name, type, options and members.
//
// Members are kept as a base map shared between collections (never written
// once shared) and a private overlay of changes, so that cloning a
// collection and changing a few members of a large set costs the changes,
// not the set.
type Set struct {
	Name    string
	Type    Type
	Options Options
	// ID identifies the set's contents: it is assigned at create, and
	// follows the contents through rename and swap.
	ID uint64

	base    map[Elem]*Entry // shared, read-only
	enc     *encodedMembers // instead of base: the encoded members, shared, read-only
	overlay map[Elem]*Entry // private changes; a nil value deletes
	count   int
	order   []Elem // list:set members in list order (private)

	journal *journal // changes since the collection was cloned; nil: untracked
}

// journal records a set's entry changes since Clone.
type journal struct {
	flushed bool              // everything was deleted at some point
	touched map[Elem]struct{} // added, updated or deleted since
}

// Len returns the number of members.
func (s *Set) Len() int { return s.count }

// get returns the member e.
func (s *Set) get(e Elem) (*Entry, bool) {
	if p, ok := s.overlay[e]; ok {
		return p, p != nil
	}
	if s.enc != nil {
		return s.enc.get(e)
	}
	p, ok := s.base[e]
	return p, ok
}

// inBase reports whether the shared members (not the overlay) hold e.
func (s *Set) inBase(e Elem) bool {
	if s.enc != nil {
		_, ok := s.enc.get(e)
		return ok
	}
	_, ok := s.base[e]
	return ok
}

// Entry returns the member e, if present.
func (s *Set) Entry(e Elem) (Entry, bool) {
	p, ok := s.get(e)
	if !ok {
		return Entry{}, false
	}
	return *p, true
}

// All calls fn for every member, in no particular order (list order for
// list:set), until fn returns false.
func (s *Set) All(fn func(*Entry) bool) {
	if s.Type == ListSet {
		for _, e := range s.order {
			p, _ := s.get(e)
			if !fn(p) {
				return
			}
		}
		return
	}
	for _, p := range s.overlay {
		if p != nil && !fn(p) {
			return
		}
	}
	if s.enc != nil {
		s.enc.all(0, func(p *Entry) bool {
			if _, changed := s.overlay[p.Elem]; changed {
				return true
			}
			return fn(p)
		})
		return
	}
	for k, p := range s.base {
		if _, changed := s.overlay[k]; changed {
			continue
		}
		if !fn(p) {
			return
		}
	}
}

// Entries returns the members: list order for list:set, sorted otherwise.
func (s *Set) Entries() []Entry {
	out := make([]Entry, 0, s.Len())
	s.All(func(p *Entry) bool {
		out = append(out, *p)
		return true
	})
	if s.Type != ListSet {
		slices.SortFunc(out, func(a, b Entry) int { return compareElem(a.Elem, b.Elem) })
	}
	return out
}

// compareElem orders members: address (as ipset -sorted does), the longer
// prefix first, protocol, port, interface, set name.
func compareElem(a, b Elem) int {
	if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
		return c
	}
	if c := b.Prefix.Bits() - a.Prefix.Bits(); c != 0 {
		return c
	}
	if c := int(a.Proto) - int(b.Proto); c != 0 {
		return c
	}
	if c := int(a.Port) - int(b.Port); c != 0 {
		return c
	}
	if a.Physdev != b.Physdev {
		if a.Physdev {
			return 1
		}
		return -1
	}
	if c := strings.Compare(a.Iface, b.Iface); c != 0 {
		return c
	}
	return strings.Compare(a.SetName, b.SetName)
}

// touch records a change of e in the journal.
func (s *Set) touch(e Elem) {
	if s.journal != nil {
		s.journal.touched[e] = struct{}{}
	}
}

// put adds or replaces an entry (list:set: at position pos, -1 = end).
func (s *Set) put(e Entry, pos int) {
	if s.overlay == nil {
		s.overlay = map[Elem]*Entry{}
	}
	if _, ok := s.get(e.Elem); !ok {
		s.count++
		if s.Type == ListSet {
			if pos < 0 || pos > len(s.order) {
				pos = len(s.order)
			}
			s.order = slices.Insert(s.order, pos, e.Elem)
		}
	}
	c := e
	s.overlay[e.Elem] = &c
	s.touch(e.Elem)
}

// remove deletes a member.
func (s *Set) remove(e Elem) {
	if _, ok := s.get(e); !ok {
		return
	}
	s.count--
	if s.inBase(e) {
		if s.overlay == nil {
			s.overlay = map[Elem]*Entry{}
		}
		s.overlay[e] = nil
	} else {
		delete(s.overlay, e)
	}
	if s.Type == ListSet {
		if i := slices.Index(s.order, e); i >= 0 {
			s.order = slices.Delete(s.order, i, i+1)
		}
	}
	s.touch(e)
}

// flush deletes every member.
func (s *Set) flush() {
	s.base, s.enc, s.overlay, s.order, s.count = nil, nil, nil, nil, 0
	if s.journal != nil {
		s.journal.flushed = true
		s.journal.touched = map[Elem]struct{}{}
	}
}

// expireBefore drops the members that timed out at now.
func (s *Set) expireBefore(now time.Time) {
	if !s.Options.HasTimeout {
		return
	}
	var dead []Elem
	s.All(func(p *Entry) bool {
		if !p.Expires.IsZero() && !p.Expires.After(now) {
			dead = append(dead, p.Elem)
		}
		return true
	})
	for _, k := range dead {
		s.remove(k)
	}
}

// clone returns a copy of s for another collection: the base is shared,
// the overlay copied (or, when it has grown large, merged into a new base).
func (s *Set) clone() *Set {
	n := *s
	n.order = slices.Clone(s.order)
	n.journal = &journal{touched: map[Elem]struct{}{}}
	if len(s.overlay) > s.baseLen()/4+1024 {
		n.base, n.enc = make(map[Elem]*Entry, s.count), nil
		s.All(func(p *Entry) bool {
			n.base[p.Elem] = p
			return true
		})
		n.overlay = nil
		return &n
	}
	n.overlay = make(map[Elem]*Entry, len(s.overlay))
	for k, v := range s.overlay {
		n.overlay[k] = v
	}
	return &n
}

// baseLen is the number of shared members.
func (s *Set) baseLen() int {
	if s.enc != nil {
		return s.enc.count
	}
	return len(s.base)
}

// Sets is the collection of sets of one network namespace, in the kernel's
// index order (a destroyed set's index is reused by the next create).
type Sets struct {
	slots []*Set
	// gen identifies this collection; base is the gen of the collection it
	// was cloned from (Diff uses the journals when new.base == old.gen).
	gen, base uint64
	nextID    uint64
}

var generation atomic.Uint64

// NewSets returns an empty collection.
func NewSets() *Sets {
	return &Sets{gen: generation.Add(1), nextID: 1}
}

// Clone returns a copy that shares the members until either is changed,
// and journals the copy's changes for Diff.
func (ss *Sets) Clone() *Sets {
	c := &Sets{gen: generation.Add(1), base: ss.gen, nextID: ss.nextID}
	c.slots = make([]*Set, len(ss.slots))
	for i, s := range ss.slots {
		if s != nil {
			c.slots[i] = s.clone()
		}
	}
	return c
}

// All returns the sets in index order.
func (ss *Sets) All() []*Set {
	out := make([]*Set, 0, len(ss.slots))
	for _, s := range ss.slots {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// listOrder returns the sets in the order ipset lists them: index order,
// list:set sets last (so a restore creates members before their lists).
func (ss *Sets) listOrder() []*Set {
	var plain, lists []*Set
	for _, s := range ss.All() {
		if s.Type == ListSet {
			lists = append(lists, s)
		} else {
			plain = append(plain, s)
		}
	}
	return append(plain, lists...)
}

// Get returns the set called name, or nil.
func (ss *Sets) Get(name string) *Set {
	for _, s := range ss.slots {
		if s != nil && s.Name == name {
			return s
		}
	}
	return nil
}

// index returns the slot of the set called name, or -1.
func (ss *Sets) index(name string) int {
	for i, s := range ss.slots {
		if s != nil && s.Name == name {
			return i
		}
	}
	return -1
}

// add puts a new set into the first free slot and gives it an ID.
func (ss *Sets) add(s *Set) {
	s.ID = ss.nextID
	ss.nextID++
	if ss.base != 0 {
		s.journal = &journal{touched: map[Elem]struct{}{}}
	}
	for i, o := range ss.slots {
		if o == nil {
			ss.slots[i] = s
			return
		}
	}
	ss.slots = append(ss.slots, s)
}

// ListReferences returns how many list:set sets hold the set called name.
func (ss *Sets) ListReferences(name string) int {
	n := 0
	for _, s := range ss.slots {
		if s != nil && s.Type == ListSet {
			if _, ok := s.get(Elem{SetName: name}); ok {
				n++
			}
		}
	}
	return n
}

// AddCounters adds packets and bytes to the counters of member e (counts
// the data plane kept), reporting whether s has counters and holds e.
func (s *Set) AddCounters(e Elem, packets, bytes uint64) bool {
	p, ok := s.get(e)
	if !ok || !s.Options.Counters {
		return false
	}
	c := *p
	c.Packets += packets
	c.Bytes += bytes
	s.put(c, -1)
	return true
}
