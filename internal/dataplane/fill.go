package dataplane

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// putClsch writes g's class table and chunk masks into the clsch map
// (Generation.WriteClassTable), two values an element (putPairedU32s).
func putClsch(m *ebpf.Map, g *compiler.Generation) error {
	n := g.ClassChunks.NumIDs() + g.NumChunkMasks()
	if n == 0 {
		return nil
	}
	mem, err := mappedPrefix(m, pairedElems(n)*int(unsafe.Sizeof(bpfU32Pair{})))
	if err != nil {
		return err
	}
	// Stored natively, as the programs read them.
	g.WriteClassTable(unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), n))
	return nil
}

// fillGeneration writes u's generation into its maps (by kind, as
// buildSlot names them). Reused maps (not in created) get their live
// counters zeroed and their unused text pages cleared: everything else the
// data plane reads is indexed by the generation's own data. Limit buckets
// taken over from the running generation (Update.SameRules) are not
// written.
//
// The class table (clsch, the largest: 61 MB at kube-proxy's 10,000
// services) is written on another goroutine beside the rest; an error is
// reported in the order the maps were written in one after the other.
func fillGeneration(m map[string]*ebpf.Map, created map[string]bool, u *Update, ncpu int) error {
	g := u.Gen
	classes := make(chan error, 1)
	go func() {
		classes <- putClsch(m["clsch"], g)
	}()
	if err := fillBeforeClasses(m, created, u, ncpu); err != nil {
		<-classes
		return err
	}
	err := fillAfterClasses(m, created, u)
	t := time.Now()
	cerr := <-classes
	TraceSince("fill: wait for clsch", t)
	if cerr != nil {
		return fmt.Errorf("fill class chunks: %w", cerr)
	}
	return err
}

// fillBeforeClasses writes what fillGeneration wrote before the class
// table: the set tables, counters, limits, probes, predicates, the small
// fields' classes, the address bounds and the hashed classes.
func fillBeforeClasses(m map[string]*ebpf.Map, created map[string]bool, u *Update, ncpu int) error {
	g := u.Gen
	t := time.Now()
	if err := fillSetTables(m, u); err != nil {
		return err
	}
	if !created["counters"] {
		if err := zeroArray[bpfCounter](m["counters"], g.NumCounters()*ncpu); err != nil {
			return fmt.Errorf("zero counters: %w", err)
		}
	}
	if !created["setctr"] {
		if err := zeroArray[bpfCounter](m["setctr"], len(u.SetCounters)); err != nil {
			return fmt.Errorf("zero set counters: %w", err)
		}
	}
	if !u.keepLimits {
		if err := fillLimits(m["limit"], g.Limits); err != nil {
			return err
		}
	}
	probes, err := hashLimitProbes(g.Probes, u.hashLimitArgs)
	if err != nil {
		return err
	}
	if err := fillProbes(m["probe"], probes); err != nil {
		return err
	}
	if err := fillPreds(m["pred"], g.Preds); err != nil {
		return err
	}
	t = TraceSince("fill: counters, limits, probes, preds", t)
	if err := fillSmall(m["small"], created["small"], g.Small, u.IdleSmall); err != nil {
		return fmt.Errorf("fill small-field classes: %w", err)
	}
	t = TraceSince("fill: small", t)
	if err := putBoundTrees(m["bounds"], g); err != nil {
		return fmt.Errorf("fill address bounds: %w", err)
	}
	if !created["hcls"] {
		if err := clearMap[bpfHKey, uint32](m["hcls"]); err != nil {
			return fmt.Errorf("empty hashed classes: %w", err)
		}
	}
	if len(g.Hash) > 0 {
		keys := make([]bpfHKey, 0, len(g.Hash))
		vals := make([]uint32, 0, len(g.Hash))
		for k, v := range g.Hash {
			keys = append(keys, bpfHKey{Field: k.Field, Value: k.Value})
			vals = append(vals, v)
		}
		if _, err := m["hcls"].BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("fill hashed classes: %w", err)
		}
	}
	TraceSince("fill: bounds, hcls", t)
	return nil
}

// putBoundTrees writes g's address search trees into m: built straight
// into the mapped map when it is one (bpfBNode is compiler.BoundNode,
// at a stride of its size), else built and written element by element.
func putBoundTrees(m *ebpf.Map, g *compiler.Generation) error {
	s := compiler.ShapeBoundTrees(g.AddrCount)
	if s.Nodes == 0 {
		return nil
	}
	if m.Flags()&unix.BPF_F_MMAPABLE != 0 && unsafe.Sizeof(bpfBNode{}) == unsafe.Sizeof(compiler.BoundNode{}) {
		mem, size, stride, err := mappedArray[bpfBNode](m, s.Nodes)
		if err != nil {
			return err
		}
		if size != stride || s.Nodes*stride > len(mem) {
			return fmt.Errorf("map %s: %d nodes of %d bytes at a stride of %d in %d bytes", m, s.Nodes, size, stride, len(mem))
		}
		return g.WriteBoundTrees(unsafe.Slice((*compiler.BoundNode)(unsafe.Pointer(&mem[0])), s.Nodes), s)
	}
	nodes, _, err := g.BoundTrees()
	if err != nil {
		return err
	}
	return putArray(m, len(nodes), func(i int) bpfBNode {
		return *(*bpfBNode)(unsafe.Pointer(&nodes[i]))
	})
}

// fillAfterClasses writes what fillGeneration wrote after the class
// table: the chunks, entries, LOG options, the saved ruleset and the
// counters' bases.
func fillAfterClasses(m map[string]*ebpf.Map, created map[string]bool, u *Update) error {
	g := u.Gen
	t := time.Now()
	if err := putChunks(m["chunks"], g.Chunks); err != nil {
		return fmt.Errorf("fill chunks: %w", err)
	}
	if err := putArray(m["entries"], len(g.Entries), func(i int) bpfEntry {
		e := g.Entries[i]
		return bpfEntry{Rule: e.Rule, Action: uint8(e.Action), Flags: e.Flags, Aux: e.Aux, Next: e.Next}
	}); err != nil {
		return fmt.Errorf("fill entries: %w", err)
	}
	if err := putArray(m["logcfg"], len(g.LogConfigs), func(i int) bpfLogCfg {
		lc := g.LogConfigs[i]
		var v bpfLogCfg
		copy(v.Prefix[:compiler.LogPrefixLen-1], lc.Prefix)
		v.Level, v.Flags = lc.Level, lc.Flags
		v.NFLogGroup, v.NFLogLen = lc.NFLogGroup, lc.NFLogLen
		return v
	}); err != nil {
		return fmt.Errorf("fill LOG options: %w", err)
	}
	t = TraceSince("fill: chunks, entries, logcfg", t)
	defer TraceSince("fill: state, cbase", t)
	if err := putBlob(m["state"], u.blob, !created["state"]); err != nil {
		return fmt.Errorf("save ruleset: %w", err)
	}
	// Counter bases: written after the swap when a generation is replaced
	// (all of them, the carried and the fresh), else here.
	if u.basesCarried {
		return nil
	}
	return putFreshBases(m["cbase"], u.Counters)
}

// putFreshBases writes the counter bases of counters that start fresh
// (their initial values) and zero for carried ones.
func putFreshBases(base *ebpf.Map, src []CounterSource) error {
	return putArray(base, len(src), func(i int) bpfCounter {
		c := src[i].Initial
		if src[i].From >= 0 {
			c = ir.Counters{}
		}
		return bpfCounter{Packets: c.Packets, Bytes: c.Bytes}
	})
}

// fillSetTables writes the tables of u's set lookups that the slot builds:
// a DXR lookup's direct and range arrays (and the ranges' high-water mark),
// a hash lookup's entries unless it takes its table over or shares one.
func fillSetTables(m map[string]*ebpf.Map, u *Update) error {
	for k, st := range u.Sets {
		if st.Kind != SetKindDXR {
			if st.Reuse > 0 || st.SameAs > 0 {
				continue
			}
			if err := fillSetHash(m[setKind(setHashOuter, k)], st.Hash); err != nil {
				return fmt.Errorf("set lookup %d (%s): %w", k, st.Set, err)
			}
			continue
		}
		for i, name := range setOuters {
			words := st.Direct
			if i == 1 {
				words = st.Ranges
			}
			if err := putArray(m[setKind(name, k)], len(words), func(j int) uint64 { return words[j] }); err != nil {
				return fmt.Errorf("fill table %d of set condition %d: %w", i, k, err)
			}
		}
		rng := m[setKind(setOuters[1], k)]
		if err := rng.Put(rng.MaxEntries()-1, uint64(st.Used)); err != nil {
			return fmt.Errorf("mark the used ranges of set condition %d: %w", k, err)
		}
	}
	return nil
}

// fillSetHash writes a hash set table's entries into m, created for them
// (a set table is never refilled: the running generation may share it).
func fillSetHash(m *ebpf.Map, entries []SetHashEntry) error {
	if len(entries) == 0 {
		return nil
	}
	keys := make([]bpfSetKey, len(entries))
	vals := make([]bpfSetVal, len(entries))
	for i, e := range entries {
		keys[i] = bpfSetKey(e.Key)
		vals[i] = bpfSetVal{Expires: e.Expires, Answer: e.Answer, Aux: e.Aux, Ctr: e.Ctr}
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
		return fmt.Errorf("fill the hash table (%d entries): %w", len(entries), err)
	}
	return nil
}

// putBlob writes blob into the state map's pages, and with clearRest
// zeroes the pages past it (a reused map's previous ruleset). The map is
// mapped: one copy and one clear, not a page value built per element.
func putBlob(m *ebpf.Map, blob *stateParts, clearRest bool) error {
	size := blob.len()
	pages := (size + statePage - 1) / statePage
	if clearRest {
		pages = int(m.MaxEntries())
	}
	if m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		flat := make([]byte, size)
		blob.copyTo(flat)
		return putArray(m, pages, func(i int) (p [statePage]byte) {
			if i*statePage < len(flat) {
				copy(p[:], flat[i*statePage:])
			}
			return p
		})
	}
	if pages == 0 {
		return nil
	}
	mem, _, stride, err := mappedArray[[statePage]byte](m, pages)
	if err != nil {
		return err
	}
	if stride != statePage || pages*stride > len(mem) || size > pages*stride {
		return fmt.Errorf("map %s: write %d bytes in %d pages of %d", m, size, pages, len(mem)/stride)
	}
	end := pages * stride
	if old, ok := blobEnd(mem[:end]); ok && clearRest {
		// Past what the map held it is zero already (a map is
		// created zeroed, and each write clears what the one before
		// left past its own end): only the bytes between are.
		end = max(size, old)
	}
	blob.copyTo(mem)
	clear(mem[size:end])
	return nil
}

// blobEnd returns where the content stateBlob laid out in mem ends (its
// two parts, each after its length), false when the lengths do not fit
// in mem.
func blobEnd(mem []byte) (int, bool) {
	at := 0
	for range 2 {
		if len(mem)-at < savedLenBytes {
			return 0, false
		}
		n := binary.LittleEndian.Uint64(mem[at:])
		if n > uint64(len(mem)-at-savedLenBytes) {
			return 0, false
		}
		at += savedLenBytes + int(n)
	}
	return at, true
}

// fillSmall writes the small-field classes small into m: only the ranges
// idle lists when m is the map idle describes, reused (not created), and
// holds as many entries; else all of them.
func fillSmall(m *ebpf.Map, created bool, small []uint32, idle *SmallDelta) error {
	if idle == nil || created || idle.Len != len(small) || len(small) == 0 {
		return putU32s(m, small)
	}
	if _, id, err := mapFacts(m); err != nil || id != idle.Map {
		return putU32s(m, small)
	}
	mem, err := mappedPrefix(m, len(small)*8)
	if err != nil {
		return err
	}
	// Stored natively at the kernel's 8-byte stride (putU32s).
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), 2*len(small))
	d := idle.Differ
	for i := 0; i+1 < len(d); i += 2 {
		lo, hi := int(d[i]), int(d[i+1])
		if lo > hi || hi > len(small) {
			return fmt.Errorf("range %d–%d of %d entries", lo, hi, len(small))
		}
		for j := lo; j < hi; j++ {
			words[2*j] = small[j]
		}
	}
	if traceOn {
		TraceSince(fmt.Sprintf("fill: small, %d ranges of %d entries", len(d)/2, len(small)), time.Now())
	}
	return nil
}
