package settable

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/lpm"
)

// Build builds the set lookups of gen's set conditions from the sets'
// current members, for the namespace's interfaces ifaces, and names the
// generation's list:set entry counters (dataplane.Update.Sets and
// SetCounters). get returns a set by name; fresh names the sets whose
// members changed since the running generation's tables were built: their
// hash tables are built afresh, the others' taken over.
func Build(gen *compiler.Generation, get func(name string) (*ipset.Set, error), fresh map[string]bool, ifaces []compiler.Interface) ([]dataplane.SetTable, []dataplane.SetCounterID, error) {
	clk, err := nowClock()
	if err != nil {
		return nil, nil, err
	}
	ctrs := &setCounterAlloc{written: map[string]bool{}}
	for _, name := range gen.SetWrites {
		ctrs.written[name] = true
	}
	if len(gen.SetConds) > 0 || len(gen.SetWrites) > 0 {
		running, err := dataplane.OpenRunningSets()
		if err != nil {
			return nil, nil, err
		}
		ctrs.running, ctrs.fresh = running.Lookups(gen.Family), fresh
		running.Close()
	}
	tables, err := buildSetTables(gen.SetConds, get, ifaces, clk, ctrs)
	if err != nil {
		return nil, nil, err
	}
	tables, err = addWriteTables(tables, gen, get, ifaces, clk, ctrs)
	return tables, ctrs.ids, err
}

// Usable reports why the data plane cannot look packets up in s for a
// rule (nil when it can): every type `xfw ipset` creates is served, with
// or without timeouts (Build). Never accept and ignore: a rule the data
// plane would skip changes what the firewall does.
func Usable(s *ipset.Set) error {
	switch s.Type {
	case ipset.HashIP, ipset.HashNet, ipset.HashIPPort, ipset.HashNetPort, ipset.HashNetIface, ipset.BitmapPort, ipset.ListSet:
		return nil
	}
	return fmt.Errorf("sets of type %s are not supported in rules yet", s.Type)
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
	// written are the sets the generation's SET targets write: their
	// tables are hash tables with the write parameters.
	written map[string]bool
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
			lk.Kind == st.Kind && lk.MaxPlen == st.MaxPlen && lk.Writable == st.Writable {
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

// buildSetTables builds the set lookups of conds (see the package comment), numbering
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
			err = Usable(s)
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
			if via != "" && ctrs.written[m.set.Name] {
				return nil, fmt.Errorf("--match-set %s: its member %s is written by a SET target: matching a written set through a list:set is not supported by xfw", sc.Name, m.set.Name)
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
	st.Writable = via == "" && ctrs.written[s.Name]
	if (s.Type == ipset.HashIP || s.Type == ipset.HashNet) && !s.Options.HasTimeout && listExp.IsZero() &&
		!s.Options.Counters && !listCounted && !st.Writable {
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
	if st.Writable {
		st.Hash = append(st.Hash, writeMetaEntry(s, st.MaxPlen))
		st.Hash = append(st.Hash, dataplane.SetWriteMarkEntries()...)
		st.Capacity += dataplane.SetWriteMetaKeys
		if s.Type == ipset.HashNet || s.Type == ipset.HashNetPort {
			st.Hash = append(st.Hash, dataplane.SetWriteCountEntries(st.MaxPlen, plenCounts(st.Hash))...)
			st.Capacity += dataplane.SetWriteCountKeys(st.MaxPlen)
		}
	}
	return st, nil
}

// plenCounts counts the element entries (meta keys left out) of hash per
// prefix length.
func plenCounts(hash []dataplane.SetHashEntry) *[129]int64 {
	var n [129]int64
	for _, e := range hash {
		if e.Key.Plen != dataplane.SetMetaPlen && int(e.Key.Plen) < len(n) {
			n[e.Key.Plen]++
		}
	}
	return &n
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
