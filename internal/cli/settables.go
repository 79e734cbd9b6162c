package cli

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/lpm"
)

// Set lookups. Each set condition of a generation (compiler.SetCond: set,
// directions, --return-nomatch) becomes data plane lookups whose answers
// are OR-ed into its bit, as the kernel's ip_set_test answers it:
//
//   - a set of the other family, or of more dimensions than the match has
//     directions, never matches (ip_set_test returns 0): no lookup;
//   - hash:ip and hash:net without timeouts: one longest-prefix-match DXR
//     table (internal/lpm), the fast path;
//   - every other type, and hash:ip/hash:net with timeouts: one hash table
//     keyed by the parts of the type (address masked to each prefix length
//     present, protocol and port, interface), each entry with its expiry
//     in CLOCK_MONOTONIC ns (bpf/classify.h xfw_set_hlookup);
//   - list:set: one lookup per member, in list order (list_set_ktest tests
//     the members in turn, the first match answers; without counters the
//     OR is the same). Members of the other family or of more dimensions
//     than the match has directions never match; a member entry with a
//     timeout caps the expiry of every entry of the member's lookup, since
//     the kernel skips an expired list entry.
//
// Hash tables are shared: the lookups of one set in a generation share one
// table (SetTable.SameAs), and a generation takes the running one's table
// of a set over (SetTable.Reuse) when the set has not changed since it was
// built (the running tables follow every member change: patched in place,
// or rebuilt by the reload that follows it), so a ruleset change does not
// rebuild a million-entry table. hash:net,iface tables, which hold
// interface indexes, are rebuilt.
//
// Set entry counters: every entry of a set with counters gets a counter of
// its table (SetHashEntry.Ctr, 1…SetTable.Counters), and every entry of a
// list:set with counters one of the generation for the member it names
// (SetTable.ListCtr). The lookups of a set with counters, and of every
// member of a list:set with counters, are hash lookups: the data plane
// records which entry answered, which a DXR table does not say.

// setClock converts the sets' wall-clock expiry times to the data plane's
// CLOCK_MONOTONIC (bpf_ktime_get_ns) at one instant.
type setClock struct {
	wall time.Time
	mono uint64 // ns
}

// nowClock reads both clocks.
func nowClock() (setClock, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return setClock{}, fmt.Errorf("read the monotonic clock: %w", err)
	}
	return setClock{wall: time.Now(), mono: uint64(ts.Nano())}, nil
}

// expiry returns the monotonic time of wall-clock time t (0 for the zero
// time: never), and whether t is still ahead.
func (c setClock) expiry(t time.Time) (uint64, bool) {
	if t.IsZero() {
		return 0, true
	}
	d := t.Sub(c.wall)
	if d <= 0 {
		return 0, false
	}
	return c.mono + uint64(d), true
}

// setTables builds the set lookups of gen's set conditions from the sets'
// current members, for the namespace's interfaces ifaces.
func setTables(gen *compiler.Generation, sets *ipsetLookup, ifaces []compiler.Interface) ([]dataplane.SetTable, []dataplane.SetCounterID, error) {
	clk, err := nowClock()
	if err != nil {
		return nil, nil, err
	}
	ctrs := &setCounterAlloc{}
	if len(gen.SetConds) > 0 {
		running, err := dataplane.OpenRunningSets()
		if err != nil {
			return nil, nil, err
		}
		ctrs.running, ctrs.fresh = running.Lookups(gen.Family), sets.fresh
		running.Close()
	}
	tables, err := buildSetTables(gen.SetConds, sets.set, ifaces, clk, ctrs)
	return tables, ctrs.ids, err
}

// setCounterAlloc numbers the list:set entry counters of one generation,
// and finds the hash tables its lookups may share or take over.
type setCounterAlloc struct {
	ids   []dataplane.SetCounterID
	index map[dataplane.SetCounterID]uint32
	// running are the running generation's lookups (tables to take
	// over); fresh the sets changed since they were built.
	running []dataplane.SetLookupInfo
	fresh   map[string]bool
	// tables are this generation's hash tables, by what they are built
	// from: the index of the lookup that has them.
	tables map[tableOrigin]int
}

// tableOrigin is what a hash table is built from.
type tableOrigin struct {
	set, via string
	listExp  int64
}

// share sets st to share the table of an earlier lookup of the generation
// (SameAs) or take the running generation's over (Reuse), reporting
// whether it did; otherwise it records st, lookup k, as the table's owner.
func (a *setCounterAlloc) share(k int, st *dataplane.SetTable) bool {
	o := tableOrigin{st.Set, st.Via, st.ListExp}
	if j, ok := a.tables[o]; ok {
		st.SameAs = j + 1
		return true
	}
	if a.tables == nil {
		a.tables = map[tableOrigin]int{}
	}
	a.tables[o] = k
	if st.Kind&dataplane.SetKindIface != 0 || a.fresh[st.Set] {
		return false
	}
	for _, lk := range a.running {
		if lk.Set == st.Set && lk.Via == st.Via && lk.ID == st.ID && lk.ListExp == st.ListExp &&
			lk.Kind == st.Kind && lk.MaxPlen == st.MaxPlen {
			st.Reuse, st.Counters = lk.Index+1, lk.Counters
			return true
		}
	}
	return false
}

// ctr returns 1 + the index of id's counter, allocating it the first time.
func (a *setCounterAlloc) ctr(id dataplane.SetCounterID) uint32 {
	if c, ok := a.index[id]; ok {
		return c
	}
	if a.index == nil {
		a.index = map[dataplane.SetCounterID]uint32{}
	}
	a.ids = append(a.ids, id)
	c := uint32(len(a.ids))
	a.index[id] = c
	return c
}

// buildSetTables builds the set lookups of conds (see above), numbering
// their set entry counters in ctrs (nil: a throwaway numbering); get
// returns a set by name.
func buildSetTables(conds []compiler.SetCond, get func(string) (*ipset.Set, error), ifaces []compiler.Interface, clk setClock, ctrs *setCounterAlloc) ([]dataplane.SetTable, error) {
	if ctrs == nil {
		ctrs = &setCounterAlloc{}
	}
	var out []dataplane.SetTable
	for k, sc := range conds {
		s, err := get(sc.Name)
		if err == nil {
			err = setUsable(s)
		}
		if err != nil {
			return nil, fmt.Errorf("--match-set %s: %w", sc.Name, err)
		}
		type member struct {
			set     *ipset.Set
			expires time.Time // the list entry's, zero when none
		}
		var members []member
		via := ""
		listCounted := false
		if s.Type == ipset.ListSet {
			listCounted = s.Options.Counters
			via = s.Name
			for _, e := range s.Entries() {
				if !e.Expires.IsZero() && !e.Expires.After(clk.wall) {
					continue // an expired list entry
				}
				m, err := get(e.SetName)
				if err != nil {
					return nil, fmt.Errorf("--match-set %s: member %s: %w", sc.Name, e.SetName, err)
				}
				members = append(members, member{m, e.Expires})
			}
		} else {
			members = []member{{set: s}}
		}
		for _, m := range members {
			if !setTestable(m.set, sc) {
				continue
			}
			st, err := buildSetTable(len(out), k, sc, m.set, via, m.expires, ifaces, clk, listCounted, ctrs)
			if err != nil {
				return nil, fmt.Errorf("--match-set %s: %w", sc.Name, err)
			}
			if listCounted {
				st.ListCtr = ctrs.ctr(dataplane.SetCounterID{Set: via, Member: m.set.Name})
			}
			out = append(out, st)
		}
	}
	if len(out) > dataplane.MaxSetLookups {
		return nil, fmt.Errorf("the set matches need %d set lookups (one per set condition, one per member of a list:set), xfw supports at most %d per family", len(out), dataplane.MaxSetLookups)
	}
	return out, nil
}

// setDims is the number of dimensions of a set type (list:set: 1).
func setDims(t ipset.Type) int {
	_, parts, _ := strings.Cut(t.String(), ":")
	return strings.Count(parts, ",") + 1
}

// setTestable reports whether ip_set_test can match a packet of sc's
// family against s with sc's directions: s is of the family (or of none:
// bitmap:port) and sc has at least as many directions as s dimensions.
func setTestable(s *ipset.Set, sc compiler.SetCond) bool {
	switch s.Options.Family {
	case ipset.Inet:
		if sc.Family != ir.IPv4 {
			return false
		}
	case ipset.Inet6:
		if sc.Family != ir.IPv6 {
			return false
		}
	}
	return int(sc.Dirs.Dim) >= setDims(s.Type)
}

// setHashKind returns the hash lookup kind of a set type.
func setHashKind(t ipset.Type) uint8 {
	switch t {
	case ipset.HashIPPort, ipset.HashNetPort:
		return dataplane.SetKindAddr | dataplane.SetKindPort
	case ipset.HashNetIface:
		return dataplane.SetKindAddr | dataplane.SetKindIface
	case ipset.BitmapPort:
		return dataplane.SetKindTCPUDP
	}
	return dataplane.SetKindAddr
}

// buildSetTable builds lookup n, of set s (a member of list via, whose
// entry expires at listExp, when via is not "") for set condition k; a
// hash table is shared or taken over when ctrs allows (setCounterAlloc.
// share), and listCounted (via has counters) asks for a hash lookup.
func buildSetTable(n, k int, sc compiler.SetCond, s *ipset.Set, via string, listExp time.Time, ifaces []compiler.Interface, clk setClock, listCounted bool, ctrs *setCounterAlloc) (dataplane.SetTable, error) {
	st := dataplane.SetTable{
		Cond: k, Set: s.Name, Via: via,
		Dst1:          sc.Dirs.Src&1 == 0,
		Dst2:          sc.Dirs.Src&2 == 0,
		ReturnNomatch: sc.ReturnNomatch,
		Nomatch:       s.Type.IsNet(),
		ID:            s.ID,
	}
	if !listExp.IsZero() {
		st.ListExp = listExp.UnixNano()
	}
	if (s.Type == ipset.HashIP || s.Type == ipset.HashNet) && !s.Options.HasTimeout && listExp.IsZero() &&
		!s.Options.Counters && !listCounted {
		fam := lpm.IPv4
		if sc.Family == ir.IPv6 {
			fam = lpm.IPv6
		}
		var entries []lpm.Entry
		s.All(func(e *ipset.Entry) bool {
			v := uint32(dataplane.SetMember)
			if e.Nomatch {
				v = dataplane.SetNomatch
			}
			entries = append(entries, lpm.Entry{Prefix: e.Elem.Prefix, Value: v})
			return true
		})
		t, err := lpm.Build(fam, entries, lpm.Options{})
		if err != nil {
			return st, fmt.Errorf("build the lookup table of %s: %w", s.Name, err)
		}
		st.Kind, st.Direct, st.Ranges, st.Used = dataplane.SetKindDXR, t.Direct(), t.Ranges(), t.Used()
		return st, nil
	}
	st.Kind = setHashKind(s.Type)
	if st.Kind&dataplane.SetKindAddr != 0 {
		st.MaxPlen = 32
		if s.Options.Family == ipset.Inet6 {
			st.MaxPlen = 128
		}
	}
	if ctrs.share(n, &st) {
		return st, nil
	}
	var plens [129]bool
	if st.Kind&dataplane.SetKindAddr == 0 {
		plens[0] = true
	}
	blockers := map[netip.Prefix]*ifaceBlocker{}
	s.All(func(e *ipset.Entry) bool {
		for _, h := range setHashEntries(st.Kind, e, listExp, ifaces, clk) {
			plens[h.Key.Plen] = true
			if s.Options.Counters {
				st.Counters++
				h.Ctr = uint32(st.Counters)
			}
			st.Hash = append(st.Hash, h)
		}
		if st.Kind&dataplane.SetKindIface != 0 && !e.Physdev {
			b := blockers[e.Prefix]
			if b == nil {
				b = &ifaceBlocker{}
				blockers[e.Prefix] = b
			}
			b.add(e, listExp, ifaces, clk)
		}
		return true
	})
	for p, b := range blockers {
		if h, ok := b.entry(p); ok {
			plens[h.Key.Plen] = true
			st.Hash = append(st.Hash, h)
		}
	}
	st.Hash = append(st.Hash, dataplane.SetMetaEntries(&plens)...)
	st.Capacity = setCapacity(s)
	return st, nil
}

// ifaceBlocker collects the entries of one network of a hash:net,iface set
// (physdev ones aside: they hash elsewhere in the kernel) for its blocker
// entry: the kernel's test stops at the longest prefix length where an
// entry of the packet's network exists, whatever its interface
// (IP_SET_HASH_WITH_MULTI; checked against the kernel: 10.0.0.0/30,out0
// keeps 10.0.0.1 arriving on in0 from matching 10.0.0.0/28,in0).
type ifaceBlocker struct {
	n       int
	ifindex uint32 // the only entry's interface (0: unresolved)
	expires uint64 // the latest expiry (0: never)
	never   bool   // some entry never expires
	live    bool   // some entry has not expired
}

// add counts entry e.
func (b *ifaceBlocker) add(e *ipset.Entry, listExp time.Time, ifaces []compiler.Interface, clk setClock) {
	exp := e.Expires
	if !listExp.IsZero() && (exp.IsZero() || listExp.Before(exp)) {
		exp = listExp
	}
	mono, live := clk.expiry(exp)
	if !live {
		return
	}
	b.n++
	b.live = true
	if mono == 0 {
		b.never = true
	} else if mono > b.expires {
		b.expires = mono
	}
	b.ifindex = 0
	for _, ifc := range ifaces {
		if ifc.Name == e.Iface {
			b.ifindex = ifc.Index
		}
	}
}

// entry returns the blocker of network p, if it has live entries.
func (b *ifaceBlocker) entry(p netip.Prefix) (dataplane.SetHashEntry, bool) {
	if !b.live {
		return dataplane.SetHashEntry{}, false
	}
	h := dataplane.SetHashEntry{Expires: b.expires}
	if b.never {
		h.Expires = 0
	}
	if b.n == 1 {
		h.Aux = b.ifindex
	}
	h.Key.Hi, h.Key.Lo = addrWords(p.Addr())
	h.Key.Plen = uint8(p.Bits())
	return h, true
}

// setCapacity is the number of entries a hash lookup of s is created for:
// every member s may hold (the kernel refuses more) and the meta keys.
func setCapacity(s *ipset.Set) int {
	n := int(s.Options.MaxElem)
	if s.Type == ipset.BitmapPort {
		n = int(s.Options.PortTo) - int(s.Options.PortFrom) + 1
	}
	if s.Type == ipset.HashNetIface {
		n *= 2 // and a blocker per network
	}
	return n + dataplane.SetMetaWords
}

// setHashEntries returns the hash table entries of set entry e (none when
// it cannot match: expired, a physdev interface, an interface the
// namespace lacks), its expiry capped by listExp.
func setHashEntries(kind uint8, e *ipset.Entry, listExp time.Time, ifaces []compiler.Interface, clk setClock) []dataplane.SetHashEntry {
	exp := e.Expires
	if !listExp.IsZero() && (exp.IsZero() || listExp.Before(exp)) {
		exp = listExp
	}
	mono, live := clk.expiry(exp)
	if !live {
		return nil
	}
	h := dataplane.SetHashEntry{Expires: mono, Answer: dataplane.SetMember}
	if e.Nomatch {
		h.Answer = dataplane.SetNomatch
	}
	if kind&dataplane.SetKindAddr != 0 {
		h.Key.Hi, h.Key.Lo = addrWords(e.Prefix.Addr())
		h.Key.Plen = uint8(e.Prefix.Bits())
	}
	if kind&(dataplane.SetKindPort|dataplane.SetKindTCPUDP) != 0 {
		h.Key.Port = e.Port
	}
	if kind&dataplane.SetKindPort != 0 {
		h.Key.Proto = e.Proto
	}
	if kind&dataplane.SetKindIface == 0 {
		return []dataplane.SetHashEntry{h}
	}
	// The kernel's match never fills a physdev name (it would need the
	// match's IPSET_FLAG_PHYSDEV, which iptables never sets): such
	// entries never match.
	if e.Physdev {
		return nil
	}
	// Nor do wildcard entries ("eth+"): the kernel's test looks the
	// packet's exact interface name up (checked against the kernel:
	// 127.0.0.0/8,l+ does not match packets from lo).
	if strings.HasSuffix(e.Iface, "+") {
		return nil
	}
	for _, ifc := range ifaces {
		if ifc.Name == e.Iface {
			h.Key.Ifindex = ifc.Index
			return []dataplane.SetHashEntry{h}
		}
	}
	return nil
}

// addrWords splits an address as the data plane holds it: IPv4 in the low
// word (host order), IPv6 in two big-endian halves.
func addrWords(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	for i := 0; i < 8; i++ {
		hi = hi<<8 | uint64(b[i])
		lo = lo<<8 | uint64(b[8+i])
	}
	if a.Is4() {
		return 0, lo & 0xffffffff
	}
	return hi, lo
}
