package settable

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/ir"
)

// Sets the SET target writes (compiler.Generation.SetWrites). Each gets a
// lookup after the set conditions' (dataplane.SetTable.Write): a hash
// table with the write parameters (dataplane.SetWriteMetaEntry), shared
// with the set's matches (their lookups are hash lookups too, so that they
// see what the data plane adds) and taken over by the next generation like
// any hash table. The data plane's adds and deletes live in that table
// only: TakeWrites moves them into the stored sets (members, timeouts)
// before an `xfw ipset` command or a ruleset change uses the sets, without
// changing the sets' identities (the tables already hold them).

// WriteUsable reports why the data plane cannot write s for a SET target
// (nil when it can): hash:ip, hash:net, hash:ip,port and hash:net,port
// without counters.
func WriteUsable(s *ipset.Set) error {
	switch s.Type {
	case ipset.HashIP, ipset.HashNet, ipset.HashIPPort, ipset.HashNetPort:
	default:
		return fmt.Errorf("sets of type %s are not supported by xfw's SET target (hash:ip, hash:net, hash:ip,port and hash:net,port are)", s.Type)
	}
	if s.Options.Counters {
		return fmt.Errorf("sets with counters are not supported by xfw's SET target")
	}
	return nil
}

// writeMetaEntry returns the write parameters of written set s's table of
// addresses of maxPlen bits.
func writeMetaEntry(s *ipset.Set, maxPlen uint8) dataplane.SetHashEntry {
	plen := maxPlen
	if s.Type == ipset.HashIP && s.Options.Netmask != 0 {
		plen = s.Options.Netmask
	}
	net := s.Type == ipset.HashNet || s.Type == ipset.HashNetPort
	port := s.Type == ipset.HashIPPort || s.Type == ipset.HashNetPort
	return dataplane.SetWriteMetaEntry(s.Options.Timeout, s.Options.HasTimeout, net, port, plen)
}

// addWriteTables appends to tables, the set conditions' lookups, one
// lookup per set gen writes, in gen.SetWrites' order.
func addWriteTables(tables []dataplane.SetTable, gen *compiler.Generation, get func(string) (*ipset.Set, error), ifaces []compiler.Interface, clk setClock, ctrs *setCounterAlloc) ([]dataplane.SetTable, error) {
	for _, name := range gen.SetWrites {
		s, err := get(name)
		if err == nil {
			err = WriteUsable(s)
		}
		if err != nil {
			return nil, fmt.Errorf("SET %s: %w", name, err)
		}
		sc := compiler.SetCond{Family: gen.Family, Name: name, Dirs: ir.SetDirs{Dim: uint8(setDims(s.Type)), Src: 1}}
		if !setTestable(s, sc) {
			return nil, fmt.Errorf("SET %s: the set is not of the rules' family", name)
		}
		st, err := buildSetTable(len(tables), 0, sc, s, "", time.Time{}, ifaces, clk, false, ctrs)
		if err != nil {
			return nil, fmt.Errorf("SET %s: %w", name, err)
		}
		st.Write = true
		tables = append(tables, st)
	}
	if len(tables) > dataplane.MaxSetLookups {
		return nil, fmt.Errorf("the set matches and SET targets need %d set lookups (one per set condition, one per member of a list:set, one per set written), xfw supports at most %d per family", len(tables), dataplane.MaxSetLookups)
	}
	return tables, nil
}

// TakeWrites moves the members the data plane added to and deleted from
// the sets the running generations write into ss (a Clone of the loaded
// sets, as ipset.Store.Commit wants it), reporting whether any changed:
// each written set's members become its table's live entries, with their
// expiry; expired entries leave the table.
func TakeWrites(ss *ipset.Sets) (bool, error) {
	changed, w, err := TakeWritesHeld(ss)
	w.Close()
	return changed, err
}

// TakeWritesHeld is TakeWrites, and returns the written tables it read
// with what they held (nil when none), so that what the data plane adds
// to them until a new generation replaces them is not lost
// (WriteWindow.CatchUp). Close it after use.
func TakeWritesHeld(ss *ipset.Sets) (bool, *WriteWindow, error) {
	if writes, err := dataplane.RunningSetWrites(); err != nil || !writes {
		return false, nil, err
	}
	rsets, err := dataplane.OpenRunningSets()
	if err != nil {
		return false, nil, err
	}
	defer rsets.Close()
	clk, err := nowClock()
	if err != nil {
		return false, nil, err
	}
	changed := false
	w := &WriteWindow{}
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		for _, lk := range rsets.Lookups(fam) {
			if !lk.Write {
				continue
			}
			c, err := takeSetWrites(ss, rsets, fam, lk, clk, w)
			if err != nil {
				w.Close()
				return false, nil, err
			}
			changed = changed || c
		}
	}
	return changed, w, nil
}

// WriteWindow holds the written tables TakeWritesHeld read. A command
// that replaces a written set's table by a new one (a reload that builds
// it afresh) has, between that read and the new generation's start, a
// window in which the data plane still adds to the old table; CatchUp
// copies those adds into the new table, as if they came right after the
// command (the kernel's order for a packet the command did not see).
type WriteWindow struct {
	held []heldWrite
}

// heldWrite is one written table as TakeWritesHeld read it.
type heldWrite struct {
	fam  ir.Family
	set  string
	h    *dataplane.LiveSetHash
	seen map[dataplane.SetHashKey]dataplane.SetHashEntry
}

// Close closes the held tables (nil: nothing).
func (w *WriteWindow) Close() {
	if w == nil {
		return
	}
	for _, hw := range w.held {
		hw.h.Close()
	}
	w.held = nil
}

// CatchUp copies into the written tables of the running generations of fams what the
// data plane added to the held tables since they were read, where the
// running generation has a new table for the set (one taken over has it
// already): the members added or given a new timeout, not expired, each
// added only where the new table has no entry of its own (newer). Members
// deleted in the window stay as the command left them, and a set no
// longer written keeps what was read.
func (w *WriteWindow) CatchUp(fams ...ir.Family) error {
	if w == nil || len(w.held) == 0 {
		return nil
	}
	rsets, err := dataplane.OpenRunningSets()
	if err != nil {
		return err
	}
	defer rsets.Close()
	clk, err := nowClock()
	if err != nil {
		return err
	}
	for _, hw := range w.held {
		if !slices.Contains(fams, hw.fam) {
			continue
		}
		if err := hw.catchUp(rsets, clk); err != nil {
			return err
		}
	}
	return nil
}

// catchUp copies hw's adds since it was read into the running written
// table of its set.
func (hw heldWrite) catchUp(rsets *dataplane.RunningSets, clk setClock) error {
	hashes, err := rsets.Hashes(hw.fam, hw.set)
	if err != nil {
		return err
	}
	defer closeHashes(hashes)
	var cur *dataplane.LiveSetHash
	for _, h := range hashes {
		if h.Info.Write {
			cur = h
		}
	}
	if cur == nil || cur.SameTable(hw.h) {
		return nil
	}
	entries, err := hw.h.Entries()
	if err != nil {
		return err
	}
	var plens [129]bool
	var add []dataplane.SetHashEntry
	for _, e := range entries {
		if e.Answer != dataplane.SetMember || (e.Expires != 0 && e.Expires <= clk.mono) {
			continue
		}
		if old, ok := hw.seen[e.Key]; ok && old == e {
			continue
		}
		if int(e.Key.Plen) < len(plens) {
			plens[e.Key.Plen] = true
		}
		add = append(add, e)
	}
	if len(add) == 0 {
		return nil
	}
	if err := cur.MarkPlens(&plens); err != nil {
		return err
	}
	return cur.PutAbsent(add)
}

// RunningWrites reports whether a running generation writes sets.
func RunningWrites() (bool, error) { return dataplane.RunningSetWrites() }

// takeSetWrites makes the stored set of written lookup lk follow its table.
// It holds the table in w with what it held.
func takeSetWrites(ss *ipset.Sets, rsets *dataplane.RunningSets, fam ir.Family, lk dataplane.SetLookupInfo, clk setClock, w *WriteWindow) (bool, error) {
	s := ss.Get(lk.Set)
	if s == nil || WriteUsable(s) != nil {
		return false, nil
	}
	hashes, err := rsets.Hashes(fam, lk.Set)
	if err != nil {
		return false, err
	}
	var h *dataplane.LiveSetHash
	for _, c := range hashes {
		if c.Info.Index == lk.Index && h == nil {
			h = c
		} else {
			c.Close()
		}
	}
	if h == nil {
		return false, nil
	}
	hw := heldWrite{fam: fam, set: lk.Set, h: h, seen: map[dataplane.SetHashKey]dataplane.SetHashEntry{}}
	w.held = append(w.held, hw)
	entries, err := h.Entries()
	if err != nil {
		return false, err
	}
	if err := h.DeleteExpired(entries, clk.mono); err != nil {
		return false, err
	}
	live := map[dataplane.SetHashKey]dataplane.SetHashEntry{}
	for _, e := range entries {
		if e.Expires == 0 || e.Expires > clk.mono {
			live[e.Key] = e
			hw.seen[e.Key] = e
		}
	}
	changed := false
	kind := setHashKind(s.Type)
	var gone []ipset.Elem
	s.All(func(e *ipset.Entry) bool {
		for _, h := range setHashEntries(kind, &ipset.Entry{Elem: e.Elem}, time.Time{}, nil, clk) {
			t, ok := live[h.Key]
			if !ok {
				gone = append(gone, e.Elem)
				continue
			}
			delete(live, h.Key)
			if exp := clk.wallOf(t.Expires); t.Answer == dataplane.SetMember && !sameSecond(exp, e.Expires) {
				n := *e
				n.Expires = exp
				s.PutLive(n)
				changed = true
			}
		}
		return true
	})
	for _, el := range gone {
		s.RemoveLive(el)
		changed = true
	}
	for k, t := range live {
		if t.Answer != dataplane.SetMember {
			continue
		}
		el := ipset.Elem{Prefix: keyPrefix(k, fam)}
		if kind&dataplane.SetKindPort != 0 {
			el.Proto, el.Port = k.Proto, k.Port
		}
		s.PutLive(ipset.Entry{Elem: el, Expires: clk.wallOf(t.Expires)})
		changed = true
	}
	return changed, nil
}

// sameSecond reports whether two expiry times are one (both zero, or
// within a second: the clocks' conversion moves them by microseconds).
func sameSecond(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b)
	return d > -time.Second && d < time.Second
}

// closeHashes closes hash tables.
func closeHashes(hs []*dataplane.LiveSetHash) {
	for _, h := range hs {
		h.Close()
	}
}

// keyPrefix is the address prefix of a hash table key (addrWords' inverse).
func keyPrefix(k dataplane.SetHashKey, fam ir.Family) netip.Prefix {
	if fam == ir.IPv4 {
		a := netip.AddrFrom4([4]byte{byte(k.Lo >> 24), byte(k.Lo >> 16), byte(k.Lo >> 8), byte(k.Lo)})
		return netip.PrefixFrom(a, int(k.Plen)).Masked()
	}
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(k.Hi >> (56 - 8*i))
		b[8+i] = byte(k.Lo >> (56 - 8*i))
	}
	return netip.PrefixFrom(netip.AddrFrom16(b), int(k.Plen)).Masked()
}
