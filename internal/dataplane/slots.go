package dataplane

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// familyIndex maps a family to its index in the data plane (0 IPv4, 1 IPv6).
func familyIndex(f ir.Family) int {
	if f == ir.IPv6 {
		return 1
	}
	return 0
}

// generationMaps are the kinds of per-generation inner maps; the outer map
// of kind k is "xfw_o_"+k (bpf/classify_maps.h, bpf/xfw_maps.h).
var generationMaps = []string{"small", "bounds", "hcls", "clsch", "chunks",
	"entries", "counters", "logcfg", "state", "cbase", "setctr", "limit", "probe", "pred"}

// outerName is the outer (ARRAY_OF_MAPS) map of a generation map kind.
func outerName(kind string) string { return "xfw_o_" + kind }

// slotOf is the generation slot of a family's bank (XFW_NSLOTS slots).
func slotOf(fam ir.Family, bank uint32) uint32 { return uint32(familyIndex(fam))*2 + bank&1 }

// setOuters are the outer maps of the DXR set lookups' tables, element
// slot * maxSetLookups + lookup (bpf/classify_maps.h); setHashOuter that of the
// hash ones.
var setOuters = []string{"xfw_o_setdir", "xfw_o_setrng"}

const setHashOuter = "xfw_o_sethash"

// setElemCtrOuter is the outer map of the hash tables' element counters
// (by lookup, as setHashOuter).
const setElemCtrOuter = "xfw_o_setectr"

// allSetOuters are every set lookup outer map.
var allSetOuters = [...]string{"xfw_o_setdir", "xfw_o_setrng", setHashOuter, setElemCtrOuter}

// sharedSetKind reports whether maps of kind may be shared between
// generations or lookups (hash tables and their counters): such a map held
// by the slot being built is never emptied and refilled, since the running
// generation may use it.
func sharedSetKind(kind string) bool {
	return strings.HasPrefix(kind, setHashOuter+"/") || strings.HasPrefix(kind, setElemCtrOuter+"/")
}

// setKind names the table of set lookup k in outer map name among a
// generation's map kinds ("xfw_o_setdir/3").
func setKind(name string, k int) string { return fmt.Sprintf("%s/%d", name, k) }

// setKey is the outer-map element of set lookup k in slot.
func setKey(slot uint32, k int) uint32 { return slot*maxSetLookups + uint32(k) }

// mapSizes returns the number of entries each generation map needs on a
// machine of ncpu possible CPUs.
func mapSizes(u *Update, ncpu int) map[string]int {
	g := u.Gen
	pages := (u.blob.len() + statePage - 1) / statePage
	return map[string]int{
		"small":    len(g.Small),
		"bounds":   compiler.ShapeBoundTrees(g.AddrCount).Nodes,
		"hcls":     len(g.Hash),
		"clsch":    pairedElems(g.ClassChunks.NumIDs() + g.NumChunkMasks()),
		"chunks":   len(g.Chunks),
		"entries":  len(g.Entries),
		"counters": g.NumCounters() * ncpu,
		"logcfg":   len(g.LogConfigs),
		"state":    pages,
		"cbase":    g.NumCounters(),
		"setctr":   max(1, len(u.SetCounters)),
		"limit":    max(1, len(g.Limits)),
		"probe":    max(1, len(g.Probes)),
		"pred":     max(1, len(g.Preds)),
	}
}

// clearSlot frees a slot's generation: the data plane never reads a slot
// whose bank is not active, and the kernel frees inner maps once no packet
// uses them.
func clearSlot(cur *state, slot uint32) error {
	errs := eachOuter(func(kind string, outer *ebpf.Map, key uint32) error {
		err := outer.Delete(key)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("free %s of slot %d: %w", kind, slot, err)
		}
		return nil
	}, cur, slot)
	if errors.Join(errs...) == nil {
		cur.setIDs[slot] = &setSlotIDs{} // every element deleted
	}
	if err := cur.maps["xfw_cfg"].Put(slot, &bpfFamilyCfg{}); err != nil {
		errs = append(errs, fmt.Errorf("reset configuration of slot %d: %w", slot, err))
	}
	cur.cfgs[slot] = bpfFamilyCfg{}
	return errors.Join(errs...)
}

// eachOuter runs op on slot's element of every outer map concurrently: the
// generation maps' (key slot) and the set conditions' (kind
// "xfw_o_setdir/k", key setKey). The kernel waits for an RCU grace period
// after every update or delete of a map-in-map element (so user space knows
// no program still sees the old inner map); run one after the other, such
// waits cost ~10 ms each, run together they share one grace period. What
// cur knew of the slot's set elements (state.setIDs) is forgotten: the
// caller records what op left there, when it knows.
func eachOuter(op func(kind string, outer *ebpf.Map, key uint32) error, cur *state, slot uint32) []error {
	cur.setIDs[slot] = nil
	type target struct {
		kind  string
		outer *ebpf.Map
		key   uint32
	}
	var targets []target
	for _, kind := range generationMaps {
		targets = append(targets, target{kind, cur.maps[outerName(kind)], slot})
	}
	for _, name := range allSetOuters {
		for k := 0; k < maxSetLookups; k++ {
			targets = append(targets, target{setKind(name, k), cur.maps[name], setKey(slot, k)})
		}
	}
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		if t.outer == nil {
			errs[i] = fmt.Errorf("BPF object lacks map %s", t.kind)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = op(t.kind, t.outer, t.key)
		}()
	}
	wg.Wait()
	return errs
}

// buildSlot writes u's generation into slot (the family's idle bank). A
// map the slot already holds is reused when it is large enough (and not far
// too large): the kernel waits for an RCU grace period after every change
// of an outer map's element, ~10–15 ms, while writing a mapped array is a
// memory copy. Only maps that had to be created are installed, and set
// tables of conditions the generation no longer has are removed; new maps
// get headroom so that a growing ruleset keeps reusing them.
func buildSlot(cur *state, slot uint32, runSlot int64, u *Update) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("count CPUs: %w", err)
	}
	sizes := mapSizes(u, ncpu)
	addSetTableSizes(sizes, u)
	b := &slotBuild{slot: slot, ncpu: ncpu, given: map[string]*ebpf.Map{}}
	defer b.close()
	if err := b.takeOverTables(cur, runSlot, u); err != nil {
		return err
	}
	if err := b.takeOverLimits(cur, runSlot, u); err != nil {
		return err
	}
	if u.keepLimits {
		delete(sizes, "limit")
	}
	t0 := time.Now()
	b.maps = map[string]*ebpf.Map{}
	b.created = map[string]bool{}
	b.stale = map[string]bool{}
	b.held = cur.slotMaps(slot)
	if err := b.dropRunningLimits(cur, runSlot); err != nil {
		return err
	}
	if err := b.createMaps(sizes); err != nil {
		return err
	}
	if err := b.shareTables(u); err != nil {
		return err
	}
	b.planInstall(sizes)
	t := TraceSince(fmt.Sprintf("apply: create %d maps, take over %d", len(b.created), len(b.given)), t0)
	if err := fillGeneration(b.maps, b.created, u, ncpu); err != nil {
		return err
	}
	if err := carryNthCounts(cur, runSlot, b.maps["probe"], u); err != nil {
		return err
	}
	if err := carryLimits(cur, runSlot, b.maps["limit"], u); err != nil {
		return err
	}
	if err := resetConnlimits(cur, slot, runSlot, u); err != nil {
		return err
	}
	if err := resetTrivialCounts(cur.maps["xfw_stats"], slot); err != nil {
		return err
	}
	if err := fillCtExpires(cur, slot, u.Gen.CtExpires); err != nil {
		return err
	}
	if traceOn {
		t = TraceSince(fmt.Sprintf("apply: fill maps %v", sizes), t)
	}
	if len(b.created)+len(b.stale)+len(b.install) == 0 {
		return nil
	}
	err = b.installMaps(cur)
	TraceSince(fmt.Sprintf("apply: install %d maps, free %d", len(b.created), len(b.stale)), t)
	return err
}

// slotBuild is the maps of a generation being built in a slot (buildSlot),
// by kind.
type slotBuild struct {
	slot uint32
	ncpu int
	// given are the hash tables taken over from the running generation
	// or shared with an earlier lookup (and their element counters):
	// installed, not built.
	given map[string]*ebpf.Map
	// maps is every map of the generation the slot builds or reuses;
	// created the kinds whose map is new.
	maps    map[string]*ebpf.Map
	created map[string]bool
	// held are the maps the slot held before (nil once reused).
	held map[string]*ebpf.Map
	// install are the given kinds the slot does not hold already; stale
	// the set tables to remove from the slot.
	install, stale map[string]bool
}

// close closes every map b opened.
func (b *slotBuild) close() {
	for _, m := range b.held {
		if m != nil {
			m.Close()
		}
	}
	for _, m := range b.maps {
		m.Close()
	}
	for _, m := range b.given {
		m.Close()
	}
}

// addSetTableSizes adds to sizes the maps of u's set lookups that the slot
// builds: a DXR lookup's direct and range arrays, and the hash table (and
// element counters) of a hash lookup that neither takes one over nor
// shares one.
func addSetTableSizes(sizes map[string]int, u *Update) {
	for k, st := range u.Sets {
		switch {
		case st.Kind == SetKindDXR:
			sizes[setKind(setOuters[0], k)] = len(st.Direct)
			sizes[setKind(setOuters[1], k)] = len(st.Ranges) + 1 // and the high-water mark
		case st.Reuse > 0: // taken over (takeOverTables)
		case st.SameAs == 0:
			sizes[setKind(setHashOuter, k)] = max(len(st.Hash), st.Capacity)
			if st.Counters > 0 {
				sizes[setKind(setElemCtrOuter, k)] = st.Counters
			}
		}
	}
}

// takeOverTables opens the running generation's (in runSlot) hash tables
// and element counters that u's lookups take over into b.given.
func (b *slotBuild) takeOverTables(cur *state, runSlot int64, u *Update) error {
	for k, st := range u.Sets {
		if st.Kind == SetKindDXR || st.Reuse <= 0 {
			continue
		}
		for _, outer := range []string{setHashOuter, setElemCtrOuter} {
			m, err := cur.innerAt(outer, setKey(uint32(runSlot), st.Reuse-1))
			if err != nil {
				if outer == setElemCtrOuter && errors.Is(err, ebpf.ErrKeyNotExist) {
					continue // no counters
				}
				return fmt.Errorf("set lookup %d (%s): the running table: %w", k, st.Set, err)
			}
			b.given[setKind(outer, k)] = m
		}
	}
	return nil
}

// createMaps gives every kind of sizes its map of n elements: the one the
// slot holds when it is reusable (never a shared set table), else a new
// one with headroom.
func (b *slotBuild) createMaps(sizes map[string]int) error {
	for kind, n := range sizes {
		if m := b.held[kind]; m != nil && !sharedSetKind(kind) && reusable(kind, m, n, b.ncpu) {
			b.maps[kind], b.held[kind] = m, nil
			continue
		}
		outer := outerName(kind)
		if i := strings.IndexByte(kind, '/'); i >= 0 {
			outer = kind[:i]
		}
		is, err := innerMapSpec(outer)
		if err != nil {
			return err
		}
		is.Name = mapName(kind)
		is.MaxEntries = uint32(capacity(kind, n, b.ncpu))
		m, err := ebpf.NewMap(is)
		if err != nil {
			return fmt.Errorf("create %s map (%d entries): %w", kind, n, err)
		}
		b.maps[kind], b.created[kind] = m, true
	}
	return nil
}

// shareTables gives the lookups sharing an earlier one's table its maps.
func (b *slotBuild) shareTables(u *Update) error {
	for k, st := range u.Sets {
		if st.Kind == SetKindDXR || st.SameAs == 0 {
			continue
		}
		for _, outer := range []string{setHashOuter, setElemCtrOuter} {
			src := setKind(outer, st.SameAs-1)
			m := b.maps[src]
			if m == nil {
				m = b.given[src]
			}
			if m == nil {
				continue
			}
			c, err := m.Clone()
			if err != nil {
				return fmt.Errorf("set lookup %d (%s): %w", k, st.Set, err)
			}
			b.given[setKind(outer, k)] = c
		}
	}
	return nil
}

// planInstall decides which of the slot's outer elements change besides
// the created maps: the given maps the slot does not hold already
// (install), and the set tables it holds that the generation, whose map
// sizes are sizes, no longer uses (stale).
func (b *slotBuild) planInstall(sizes map[string]int) {
	b.install = map[string]bool{}
	for kind, m := range b.given {
		if h := b.held[kind]; h != nil && sameMap(h, m) {
			continue
		}
		b.install[kind] = true
	}
	for kind, m := range b.held {
		if m != nil && strings.IndexByte(kind, '/') >= 0 {
			_, used := sizes[kind]
			if _, ok := b.given[kind]; !used && !ok {
				b.stale[kind] = true
			}
		}
	}
}

// installMaps puts the installed and created maps into the slot's outer
// elements and removes the stale ones, all outer maps at once (eachOuter).
func (b *slotBuild) installMaps(cur *state) error {
	slot := b.slot
	before := cur.setIDs[slot]
	err := errors.Join(eachOuter(func(kind string, outer *ebpf.Map, key uint32) error {
		switch {
		case b.install[kind]:
			if err := outer.Put(key, b.given[kind]); err != nil {
				return fmt.Errorf("install %s map in slot %d: %w", kind, slot, err)
			}
		case b.created[kind]:
			if err := outer.Put(key, b.maps[kind]); err != nil {
				return fmt.Errorf("install %s map in slot %d: %w", kind, slot, err)
			}
		case b.stale[kind]:
			if err := outer.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("free %s map of slot %d: %w", kind, slot, err)
			}
		}
		return nil
	}, cur, slot)...)
	if err == nil {
		cur.setIDs[slot] = b.setIDsAfter(before)
	}
	return err
}

// setIDsAfter returns the slot's set elements after installMaps from
// those before it (nil: not known): the stale ones removed; not known when
// a set table was installed or created (its id is not asked for).
func (b *slotBuild) setIDsAfter(before *setSlotIDs) *setSlotIDs {
	if before == nil {
		return nil
	}
	after := *before
	for i, name := range allSetOuters {
		for k := range maxSetLookups {
			kind := setKind(name, k)
			switch {
			case b.install[kind] || b.created[kind]:
				return nil
			case b.stale[kind]:
				after[i][k] = 0
			}
		}
	}
	return &after
}

// withHeadroom is the number of elements a new generation map of n
// elements is created with: a quarter more (and 64) so that the next
// updates of a growing ruleset fit in it.
func withHeadroom(n int) int { return n + n/4 + 64 }

// changeRoom is more room, beyond withHeadroom's, in the maps every
// change in place grows: compiler.AppendRule copies the classes a rule
// changes, each a new chunk (520 bytes) and a class's chunk ids. Beside a
// nat table an append adds about 6 chunks and 12 ids, so on a small
// ruleset withHeadroom's 64 lasted ten appends; a map outgrown is created
// and installed anew, an RCU grace period of 3–15 ms in the command. 256
// chunks (133 KB a bank and family) last about forty.
var changeRoom = map[string]int{"chunks": 256, "clsch": 1024}

// reusable says whether m, the map of kind a slot holds, can take a new
// generation's n elements: large enough and at most four times the size a
// new map would have (a ruleset that shrank gives memory back). A reused
// class hash is emptied before it is filled (fillGeneration): stale keys
// would classify packets.
func reusable(kind string, m *ebpf.Map, n, ncpu int) bool {
	c := int(m.MaxEntries())
	return c >= n && c <= 4*capacity(kind, n, ncpu)
}

// capacity is the size a new map of kind for n elements is created with
// (a hash set table's n is already its set's capacity):
// n with headroom; for the counters, n counts every CPU's, so the headroom
// is per CPU.
func capacity(kind string, n, ncpu int) int {
	if kind == "counters" {
		return withHeadroom(n/ncpu) * ncpu
	}
	if strings.HasPrefix(kind, setHashOuter+"/") {
		return n
	}
	return withHeadroom(n) + changeRoom[kind]
}

// mapName is the kernel name of a generation map of kind ("xfw_small",
// "xfw_setdir3" …; 15 characters at most).
func mapName(kind string) string {
	if i := strings.IndexByte(kind, '/'); i >= 0 {
		return "xfw_" + kind[len("xfw_o_"):i] + kind[i+1:]
	}
	return "xfw_" + kind
}
