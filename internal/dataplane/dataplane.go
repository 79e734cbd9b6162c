// Package dataplane loads xfw's eBPF programs into the current network
// namespace, fills their maps from a compiled generation, attaches them to
// every interface (XDP ingress, TCX egress) and swaps generations
// atomically. It is the only package that touches the kernel's BPF API.
//
// State lives in the kernel, anchored on the interfaces: the attached
// programs hold their maps, and among them each generation's saved ruleset
// text and counter offsets. Nothing is pinned, so `ip netns exec` (which remounts
// /sys) works, the filter keeps running after the command exits, and
// deleting the namespace frees everything.
package dataplane

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/prefault"
)

//go:embed bpf/xfw.o
var objectBytes []byte

// Program names as the kernel keeps them (15 characters at most).
const (
	xdpProgName = "xfw_xdp"
	tcProgName  = "xfw_tc_egress"
)

// familyIndex maps a family to its index in the data plane (0 IPv4, 1 IPv6).
func familyIndex(f ir.Family) int {
	if f == ir.IPv6 {
		return 1
	}
	return 0
}

// generationMaps are the kinds of per-generation inner maps; the outer map
// of kind k is "xfw_o_"+k (bpf/classify.h, bpf/xfw.c).
var generationMaps = []string{"small", "bounds", "hcls", "clsch", "chunks",
	"entries", "counters", "logcfg", "state", "cbase", "setctr"}

// outerName is the outer (ARRAY_OF_MAPS) map of a generation map kind.
func outerName(kind string) string { return "xfw_o_" + kind }

// slotOf is the generation slot of a family's bank (XFW_NSLOTS slots).
func slotOf(fam ir.Family, bank uint32) uint32 { return uint32(familyIndex(fam))*2 + bank&1 }

// CounterSource says where a new generation's counter starts from.
type CounterSource struct {
	// From is the old counter index to carry over, or -1.
	From int
	// Initial is the starting value when From is -1.
	Initial ir.Counters
}

// Update is one family's new ruleset, ready to load.
type Update struct {
	Gen *compiler.Generation
	// Saved is the ruleset in its binary form (ir.Ruleset.MarshalBinary),
	// kept with the generation: what the next command reads back (Running).
	Saved []byte
	// Counters has one source per counter index of Gen (len NumCounters).
	Counters []CounterSource
	// Sets has the set lookups of Gen.SetConds (at most maxSetLookups):
	// each answers one set and is OR-ed into its condition's bit (one per
	// condition, or one per member of a list:set; none for a condition
	// that never matches).
	Sets []SetTable
	// Interfaces are those Gen was compiled for, kept with it so that a
	// later command can extend the running generation (RunningGeneration,
	// compiler.AppendRule) while they have not changed.
	Interfaces []compiler.Interface
	// SetCounters names the generation's list:set entry counters (index i
	// is SetTable.ListCtr i+1); a hash table's element counters are its
	// own (SetTable.Counters). Counters start at zero: the stored sets hold
	// what was counted before (the caller moves running counts there,
	// TakeSetCounters). Apply carries the counts of the generation it
	// replaces over to rebuilt tables and list entries (its packets keep
	// counting until they end; a table taken over keeps its counters) and
	// returns in SetLeftover those of entries this generation lacks, for
	// the caller to keep in the stored sets.
	SetCounters []SetCounterID
	// SetLeftover is set by Apply (see SetCounters).
	SetLeftover []SetCounterValue

	// blob is what the slot's state pages hold: Saved and the generation's
	// metadata, each after its little-endian length (stateBlob).
	blob []byte
}

// stateBlob returns u's state pages' content: the saved ruleset and the
// generation's metadata (generationMeta), each after its length.
func stateBlob(u *Update) ([]byte, error) {
	meta, err := generationMeta(u)
	if err != nil {
		return nil, err
	}
	blob := make([]byte, 0, 2*savedLenBytes+len(u.Saved)+len(meta))
	prefault.Slice(blob[:cap(blob)])
	blob = binary.LittleEndian.AppendUint64(blob, uint64(len(u.Saved)))
	blob = append(blob, u.Saved...)
	blob = binary.LittleEndian.AppendUint64(blob, uint64(len(meta)))
	return append(blob, meta...), nil
}

// SetTable is one set lookup of a generation: the set it looks up (as a
// longest-prefix-match table, internal/lpm's flat arrays looked up by
// bpf/lpm.h, or as a hash table, bpf/classify.h xfw_set_hlookup), how, and
// the set condition its answer goes to. Its values are SetMember and
// SetNomatch.
type SetTable struct {
	// Cond is the set condition (bit of compiler.FieldSets) the answer is
	// OR-ed into.
	Cond int
	// Set is the set looked up; Via the list:set it is a member of, when
	// the condition tests a list ("" otherwise).
	Set, Via string
	// Kind is SetKindDXR (Direct, Ranges, Used) or hash kinds
	// (SetKindAddr|…: Hash, MaxPlen).
	Kind uint8
	// Dst1 and Dst2 say the first and second dimensions are looked up by
	// the destination (address, port; for interfaces: the output one).
	Dst1, Dst2 bool
	// ReturnNomatch is --return-nomatch, for a set type with nomatch
	// entries.
	ReturnNomatch bool
	// ListCtr is 1 + the set counter of the list:set entry (Via's) naming
	// Set, 0 when the list has no counters.
	ListCtr uint32
	// ID is the set's content identity (ipset.Set.ID) and ListExp the
	// wall-clock expiry (Unix ns, 0: none) of the list entry capping its
	// entries: with Set, Via and Kind, what decides whether a later
	// generation may take the hash table over (Reuse).
	ID      uint64
	ListExp int64
	// Reuse is 1 + the index of the running generation's lookup whose
	// hash table (and element counters) this lookup takes over unchanged
	// (Hash is then empty); SameAs 1 + the index of an earlier lookup of
	// this generation whose table it shares. 0: its own table, built from
	// Hash.
	Reuse, SameAs int
	// Counters is the number of element counters of a hash table of a set
	// with counters (its entries' Ctr are 1…Counters), 0 without.
	Counters int

	Direct, Ranges []uint64
	// Used is how many words of Ranges are in use (lpm.Table.Used): the
	// ranges map keeps it in its last word, the high-water mark after
	// which a patch of the running generation (RunningSets.Tables) writes new
	// blocks.
	Used int
	// Nomatch says the set's type has nomatch entries (hash:net, …):
	// --return-nomatch reverses its answers only then (ip_set_test
	// inverts a matched element of a type with IPSET_TYPE_NOMATCH).
	Nomatch bool

	// Hash are the hash table's entries, meta keys (SetMetaEntries)
	// included.
	Hash []SetHashEntry
	// MaxPlen is the address length of a hash kind with an address (32,
	// 128), else 0.
	MaxPlen uint8
	// Capacity is the number of entries the hash table is created for:
	// the set's maxelem and the meta keys, so that patches always fit.
	Capacity int
}

// Kinds of set lookups (XFW_SETK_*): SetKindDXR, or a hash table whose
// keys hold the parts named by the other bits.
const (
	SetKindDXR    = 0
	SetKindAddr   = 1 // the address, masked to each present prefix length
	SetKindPort   = 2 // protocol and port
	SetKindIface  = 4 // the interface's ifindex
	SetKindTCPUDP = 8 // port of TCP and UDP only, protocol 0 (bitmap:port)
)

// SetHashKey is the key of a hash set table (struct xfw_setkey).
type SetHashKey struct {
	Hi, Lo  uint64 // the address, masked (IPv4: Lo)
	Ifindex uint32
	Port    uint16
	Proto   uint8
	Plen    uint8
}

// SetHashEntry is one entry of a hash set table: Answer SetMember or
// SetNomatch, Expires the CLOCK_MONOTONIC time in ns it times out at (0:
// never); meta entries carry a prefix-length word in Expires. A
// hash:net,iface blocker (Key.Ifindex 0, Answer 0) ends the walk over
// prefix lengths unless Aux is the packet's interface (struct xfw_setval).
type SetHashEntry struct {
	Key     SetHashKey
	Expires uint64
	Answer  uint32
	Aux     uint32
	// Ctr is 1 + the entry's element counter in its table's counters
	// (SetTable.Counters), 0 when the set has no counters.
	Ctr uint32
}

// SetMetaPlen is the Plen of a hash set table's meta keys (XFW_SETKEY_META):
// meta key Port w holds, in Expires, bits 64w..64w+63 of the prefix
// lengths present (bit i: length 64w+i has entries).
const SetMetaPlen = 255

// SetMetaWords is the number of meta keys: 129 prefix lengths.
const SetMetaWords = 3

// SetMetaEntries returns the meta entries describing the prefix lengths
// present (plens[l] for length l, 0–128).
func SetMetaEntries(plens *[129]bool) []SetHashEntry {
	var out []SetHashEntry
	for w := 0; w < SetMetaWords; w++ {
		var word uint64
		for i := 0; i < 64 && 64*w+i <= 128; i++ {
			if plens[64*w+i] {
				word |= 1 << i
			}
		}
		out = append(out, SetHashEntry{Key: SetHashKey{Port: uint16(w), Plen: SetMetaPlen}, Expires: word})
	}
	return out
}

// Values of a SetTable's prefixes (XFW_SET_MEMBER, XFW_SET_NOMATCH).
const (
	SetMember  = 1
	SetNomatch = 2
)

// maxSetLookups is XFW_MAX_SETLOOKUPS: set lookups per generation.
const maxSetLookups = 16

// MaxSetLookups is how many set lookups one family's ruleset may use: a
// set condition takes one, a list:set condition one per member.
const MaxSetLookups = maxSetLookups

// setOuters are the outer maps of the DXR set lookups' tables, element
// slot * maxSetLookups + lookup (bpf/classify.h); setHashOuter that of the
// hash ones.
var setOuters = []string{"xfw_o_setdir", "xfw_o_setrng"}

const setHashOuter = "xfw_o_sethash"

// setElemCtrOuter is the outer map of the hash tables' element counters
// (by lookup, as setHashOuter).
const setElemCtrOuter = "xfw_o_setectr"

// allSetOuters are every set lookup outer map.
var allSetOuters = []string{"xfw_o_setdir", "xfw_o_setrng", setHashOuter, setElemCtrOuter}

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
	pages := (len(u.blob) + statePage - 1) / statePage
	return map[string]int{
		"small":    len(g.Small),
		"bounds":   len(g.Bounds),
		"hcls":     len(g.Hash),
		"clsch":    len(g.ClassChunks),
		"chunks":   len(g.Chunks),
		"entries":  len(g.Entries),
		"counters": g.NumCounters() * ncpu,
		"logcfg":   len(g.LogConfigs),
		"state":    pages,
		"cbase":    g.NumCounters(),
		"setctr":   max(1, len(u.SetCounters)),
	}
}

// Apply compiles nothing: it installs u's generation for its family. The
// programs are loaded and verified once per namespace (the first Apply, or
// after Stop); every later Apply builds the generation's maps in the
// family's idle bank, then flips the family's bank index — one write the
// data plane reads once per packet, so every packet is judged wholly by the
// old ruleset or wholly by the new one. Counters of carried rules continue;
// the other family's ruleset is not touched.
func Apply(fam ir.Family, u *Update, opts AttachOptions) error {
	defer unmapOutsideSession()
	if extra := u.Gen.Active >> bpfNumFields; extra != 0 {
		return fmt.Errorf("generation uses classification fields the data plane does not compute (active %#x, fields from %s on)", u.Gen.Active, compiler.Field(bpfNumFields))
	}
	if len(u.Sets) > maxSetLookups {
		return fmt.Errorf("generation needs %d set lookups, at most %d are supported", len(u.Sets), maxSetLookups)
	}
	for i, st := range u.Sets {
		if st.Cond < 0 || st.Cond >= len(u.Gen.SetConds) {
			return fmt.Errorf("set lookup %d (%s) is for set condition %d of %d", i, st.Set, st.Cond, len(u.Gen.SetConds))
		}
	}
	t := time.Now()
	blob, err := stateBlob(u)
	if err != nil {
		return err
	}
	u.blob = blob
	cur, ifaces, err := loadedState()
	if err != nil {
		return err
	}
	defer cur.Close()
	t = TraceSince("apply: state, interfaces", t)
	fi := familyIndex(fam)
	wasOn := cur.hasFamily(fam)
	oldSlot := slotOf(fam, cur.banks[fi])
	newBank := 1 - cur.banks[fi]&1
	newSlot := slotOf(fam, newBank)
	// The old generation's counters, held open across its removal.
	var oldLive, oldBase *ebpf.Map
	oldN := int(cur.cfgs[oldSlot].NCounters)
	if wasOn {
		if oldLive, err = cur.inner("counters", oldSlot); err != nil {
			return err
		}
		defer oldLive.Close()
		if oldBase, err = cur.inner("cbase", oldSlot); err != nil {
			return err
		}
		defer oldBase.Close()
	}

	// The old generation's metadata, when a table is taken over from it
	// or its set counters are carried over (most generations do neither).
	oldCfg := cur.cfgs[oldSlot]
	var oldMeta *genMeta
	needMeta := oldCfg.NSetCtr > 0
	for _, st := range u.Sets {
		needMeta = needMeta || st.Reuse > 0
	}
	if wasOn && needMeta {
		if oldMeta, err = slotMeta(cur, oldSlot); err != nil {
			return err
		}
	}
	for k, st := range u.Sets {
		if st.Reuse > 0 && (oldMeta == nil || st.Reuse > len(oldMeta.SetLookups)) {
			return fmt.Errorf("set lookup %d (%s) takes over lookup %d the running generation lacks", k, st.Set, st.Reuse-1)
		}
		if st.SameAs > 0 && (st.SameAs > k || u.Sets[st.SameAs-1].Kind == SetKindDXR) {
			return fmt.Errorf("set lookup %d (%s) shares the table of lookup %d", k, st.Set, st.SameAs-1)
		}
	}
	runSlot := int64(-1)
	if wasOn {
		runSlot = int64(oldSlot)
	}

	if u.Gen.Active&(1<<compiler.FieldCt) != 0 {
		if err := configureConntrack(cur); err != nil {
			return err
		}
	}
	if err := buildSlot(cur, newSlot, runSlot, u); err != nil {
		clearSlot(cur, newSlot)
		return err
	}
	t = TraceSince("apply: build generation", t)
	fc := familyCfg(u.Gen)
	for k, st := range u.Sets {
		lk := bpfSetLk{Bit: uint8(st.Cond), Kind: st.Kind, MaxPlen: st.MaxPlen}
		if st.Dst1 {
			lk.Flags |= setLkDst1
		}
		if st.Dst2 {
			lk.Flags |= setLkDst2
		}
		if st.ReturnNomatch && st.Nomatch {
			lk.Flags |= setLkReturnNomatch
		}
		if st.Via != "" {
			lk.Flags |= setLkMember
		}
		fc.SetLk[k] = lk
		fc.SetLkLCtr[k] = st.ListCtr
	}
	fc.NSetLk = uint32(len(u.Sets))
	if setCounting(u.Gen) {
		fc.NSetCtr = uint32(max(1, len(u.SetCounters)))
	}
	if fc.MaxIters == 0 {
		fc.MaxIters = 1
	}
	if err := cur.maps["xfw_cfg"].Put(newSlot, fc); err != nil {
		clearSlot(cur, newSlot)
		return fmt.Errorf("write generation configuration: %w", err)
	}
	// The swap.
	if err := cur.maps["xfw_bank"].Put(uint32(fi), newBank); err != nil {
		clearSlot(cur, newSlot)
		return fmt.Errorf("switch to the new generation: %w", err)
	}
	cur.banks[fi] = newBank
	cur.cfgs[newSlot] = fc

	// Attach last: a namespace loaded for the first time starts filtering
	// with the complete ruleset, and interfaces added since are covered.
	if err := attachMissing(cur, ifaces, opts); err != nil {
		return err
	}

	t = TraceSince("apply: swap, attach", t)
	// Wait until no packet that read the old bank before the flip is
	// still running: then the old counters are final and the old slot may
	// be rewritten by the next update. Its maps stay for that update to
	// reuse.
	if wasOn {
		if err := cur.waitForReaders(oldSlot); err != nil {
			return err
		}
		if err := cur.maps["xfw_cfg"].Put(oldSlot, bpfFamilyCfg{}); err != nil {
			return fmt.Errorf("reset configuration of slot %d: %w", oldSlot, err)
		}
		cur.cfgs[oldSlot] = bpfFamilyCfg{}
	}
	t = TraceSince("apply: wait for old readers", t)
	if wasOn {
		old, err := counterTotals(oldBase, oldLive, oldN)
		if err != nil {
			return err
		}
		if err := carryCounters(cur, old, newSlot, u.Counters); err != nil {
			return err
		}
		if oldCfg.NSetCtr > 0 {
			if err := carrySetCounters(cur, fam, oldSlot, newSlot, &oldCfg, oldMeta, u); err != nil {
				return err
			}
		}
	}
	TraceSince("apply: carry counters", t)
	return nil
}

// loadedState returns the namespace's running state (xfw loaded first
// when it is not) and its interfaces, whose facts (and the local routes) it
// refreshes: a new generation may name interfaces that appeared since the
// last change. The BPF object is parsed only to load it (loadSpec, ~5 ms).
func loadedState() (*state, []Interface, error) {
	ifaces, err := listInterfaces()
	if err != nil {
		return nil, nil, err
	}
	if err := checkForeignXDP(ifaces); err != nil {
		return nil, nil, err
	}
	cur, err := Current()
	if err != nil {
		return nil, nil, err
	}
	if cur == nil {
		spec, err := loadSpec()
		if err != nil {
			return nil, nil, err
		}
		if cur, err = load(spec); err != nil {
			return nil, nil, err
		}
	}
	if err := fillIfInfo(cur.maps["xfw_ifinfo"], ifaces); err != nil {
		cur.Close()
		return nil, nil, err
	}
	if err := fillLocal(cur.maps["xfw_local4"], cur.maps["xfw_local6"]); err != nil {
		cur.Close()
		return nil, nil, err
	}
	return cur, ifaces, nil
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
	if err := cur.maps["xfw_cfg"].Put(slot, bpfFamilyCfg{}); err != nil {
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
// waits cost ~10 ms each, run together they share one grace period.
func eachOuter(op func(kind string, outer *ebpf.Map, key uint32) error, cur *state, slot uint32) []error {
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
	// Hash tables taken over from the running generation or shared with
	// an earlier lookup (and their element counters): installed, not
	// built.
	given := map[string]*ebpf.Map{}
	defer func() {
		for _, m := range given {
			m.Close()
		}
	}()
	for k, st := range u.Sets {
		if st.Kind != SetKindDXR {
			switch {
			case st.Reuse > 0:
				for _, outer := range []string{setHashOuter, setElemCtrOuter} {
					m, err := cur.innerAt(outer, setKey(uint32(runSlot), st.Reuse-1))
					if err != nil {
						if outer == setElemCtrOuter && errors.Is(err, ebpf.ErrKeyNotExist) {
							continue // no counters
						}
						return fmt.Errorf("set lookup %d (%s): the running table: %w", k, st.Set, err)
					}
					given[setKind(outer, k)] = m
				}
			case st.SameAs == 0:
				sizes[setKind(setHashOuter, k)] = max(len(st.Hash), st.Capacity)
				if st.Counters > 0 {
					sizes[setKind(setElemCtrOuter, k)] = st.Counters
				}
			}
			continue
		}
		sizes[setKind(setOuters[0], k)] = len(st.Direct)
		sizes[setKind(setOuters[1], k)] = len(st.Ranges) + 1 // and the high-water mark
	}
	t0 := time.Now()
	maps := map[string]*ebpf.Map{} // every map of the generation, by kind
	created := map[string]bool{}   // kinds whose map is new
	stale := map[string]bool{}     // set tables to remove from the slot
	defer func() {
		for _, m := range maps {
			m.Close()
		}
	}()
	held := cur.slotMaps(slot)
	defer func() {
		for _, m := range held {
			if m != nil {
				m.Close()
			}
		}
	}()
	for kind, n := range sizes {
		if m := held[kind]; m != nil && !sharedSetKind(kind) && reusable(kind, m, n, ncpu) {
			maps[kind], held[kind] = m, nil
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
		is.MaxEntries = uint32(capacity(kind, n, ncpu))
		m, err := ebpf.NewMap(is)
		if err != nil {
			return fmt.Errorf("create %s map (%d entries): %w", kind, n, err)
		}
		maps[kind], created[kind] = m, true
	}
	// Lookups sharing an earlier one's table get its maps.
	for k, st := range u.Sets {
		if st.Kind == SetKindDXR || st.SameAs == 0 {
			continue
		}
		for _, outer := range []string{setHashOuter, setElemCtrOuter} {
			src := setKind(outer, st.SameAs-1)
			m := maps[src]
			if m == nil {
				m = given[src]
			}
			if m == nil {
				continue
			}
			c, err := m.Clone()
			if err != nil {
				return fmt.Errorf("set lookup %d (%s): %w", k, st.Set, err)
			}
			given[setKind(outer, k)] = c
		}
	}
	install := map[string]bool{} // given kinds not already in the slot
	for kind, m := range given {
		if h := held[kind]; h != nil && sameMap(h, m) {
			continue
		}
		install[kind] = true
	}
	for kind, m := range held {
		if m != nil && strings.IndexByte(kind, '/') >= 0 {
			_, used := sizes[kind]
			if _, ok := given[kind]; !used && !ok {
				stale[kind] = true
			}
		}
	}
	t := TraceSince(fmt.Sprintf("apply: create %d maps, take over %d", len(created), len(given)), t0)
	if err := fillGeneration(maps, created, u, ncpu); err != nil {
		return err
	}
	if traceOn {
		t = TraceSince(fmt.Sprintf("apply: fill maps %v", sizes), t)
	}
	if len(created)+len(stale)+len(install) == 0 {
		return nil
	}
	err = errors.Join(eachOuter(func(kind string, outer *ebpf.Map, key uint32) error {
		switch {
		case install[kind]:
			if err := outer.Put(key, given[kind]); err != nil {
				return fmt.Errorf("install %s map in slot %d: %w", kind, slot, err)
			}
		case created[kind]:
			if err := outer.Put(key, maps[kind]); err != nil {
				return fmt.Errorf("install %s map in slot %d: %w", kind, slot, err)
			}
		case stale[kind]:
			if err := outer.Delete(key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return fmt.Errorf("free %s map of slot %d: %w", kind, slot, err)
			}
		}
		return nil
	}, cur, slot)...)
	TraceSince(fmt.Sprintf("apply: install %d maps, free %d", len(created), len(stale)), t)
	return err
}

// withHeadroom is the number of elements a new generation map of n
// elements is created with: a quarter more (and 64) so that the next
// updates of a growing ruleset fit in it.
func withHeadroom(n int) int { return n + n/4 + 64 }

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
	return withHeadroom(n)
}

// mapName is the kernel name of a generation map of kind ("xfw_small",
// "xfw_setdir3" …; 15 characters at most).
func mapName(kind string) string {
	if i := strings.IndexByte(kind, '/'); i >= 0 {
		return "xfw_" + kind[len("xfw_o_"):i] + kind[i+1:]
	}
	return "xfw_" + kind
}

// fillGeneration writes u's generation into its maps (by kind, as
// buildSlot names them). Reused maps (not in created) get their live
// counters zeroed and their unused text pages cleared: everything else the
// data plane reads is indexed by the generation's own data.
func fillGeneration(m map[string]*ebpf.Map, created map[string]bool, u *Update, ncpu int) error {
	g := u.Gen
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
	if !created["counters"] {
		if err := putArray(m["counters"], g.NumCounters()*ncpu, func(int) bpfCounter { return bpfCounter{} }); err != nil {
			return fmt.Errorf("zero counters: %w", err)
		}
	}
	if !created["setctr"] {
		if err := putArray(m["setctr"], len(u.SetCounters), func(int) bpfCounter { return bpfCounter{} }); err != nil {
			return fmt.Errorf("zero set counters: %w", err)
		}
	}
	if err := putU32s(m["small"], g.Small); err != nil {
		return fmt.Errorf("fill small-field classes: %w", err)
	}
	if err := putArray(m["bounds"], len(g.Bounds), func(i int) bpfBound {
		b := g.Bounds[i]
		return bpfBound{Hi: b.Value.Hi, Lo: b.Value.Lo, Cls: b.Class}
	}); err != nil {
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
	if err := putU32s(m["clsch"], g.ClassChunks); err != nil {
		return fmt.Errorf("fill class chunks: %w", err)
	}
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
		return v
	}); err != nil {
		return fmt.Errorf("fill LOG options: %w", err)
	}
	blob := u.blob
	pages := (len(blob) + statePage - 1) / statePage
	if !created["state"] {
		pages = int(m["state"].MaxEntries()) // clear the previous pages
	}
	if err := putArray(m["state"], pages, func(i int) (p [statePage]byte) {
		if i*statePage < len(blob) {
			copy(p[:], blob[i*statePage:])
		}
		return p
	}); err != nil {
		return fmt.Errorf("save ruleset: %w", err)
	}
	// Counter bases of counters that start fresh (carried ones are written
	// after the swap).
	return putArray(m["cbase"], len(u.Counters), func(i int) bpfCounter {
		c := u.Counters[i].Initial
		if u.Counters[i].From >= 0 {
			c = ir.Counters{}
		}
		return bpfCounter{Packets: c.Packets, Bytes: c.Bytes}
	})
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

// clearMap deletes every key of the hash map m, whose keys are K and
// values V (a table of the idle bank, or one no packet reads any more).
func clearMap[K, V any](m *ebpf.Map) error {
	// Batches of deletes (BPF_MAP_LOOKUP_AND_DELETE_BATCH): two
	// syscalls per entry make a million-entry set table take seconds.
	err := eachBatch(m, true, func([]K, []V) {})
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	var keys []K
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("list the keys: %w", err)
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("delete a key: %w", err)
		}
	}
	return nil
}

// hashBatch is the number of entries a batch operation on a hash map moves.
const hashBatch = 4096

// eachBatch reads every entry of hash map m (and deletes it, with del) in
// batches, calling fn on each batch; ebpf.ErrNotSupported when the kernel
// has no batch operations for the map.
func eachBatch[K, V any](m *ebpf.Map, del bool, fn func(keys []K, vals []V)) error {
	keys := make([]K, hashBatch)
	vals := make([]V, hashBatch)
	var cursor ebpf.MapBatchCursor
	for {
		var n int
		var err error
		if del {
			n, err = m.BatchLookupAndDelete(&cursor, keys, vals, nil)
		} else {
			n, err = m.BatchLookup(&cursor, keys, vals, nil)
		}
		if n > 0 {
			fn(keys[:n], vals[:n])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("batch over %s: %w", m, err)
		}
	}
}

// putChunks writes the chunks into the mapped chunk array with one copy.
func putChunks(m *ebpf.Map, chunks []compiler.Chunk) error {
	if len(chunks) == 0 {
		return nil
	}
	mem, size, stride, err := mappedArray[bpfChunk](m, len(chunks))
	if err != nil {
		return err
	} else if size != stride || size != int(unsafe.Sizeof(chunks[0])) {
		return fmt.Errorf("map %s: chunk layout %d/%d/%d", m.String(), size, stride, unsafe.Sizeof(chunks[0]))
	}
	b := chunkBytes(chunks)
	if len(b) > len(mem) {
		return fmt.Errorf("map %s: write %d chunks of %d", m, len(chunks), len(mem)/stride)
	}
	if !sameMemory(b, mem) { // else read in place (RunningGeneration)
		copy(mem, b)
	}
	return nil
}

// batchSize is how many array elements one BPF_MAP_UPDATE_BATCH carries.
const batchSize = 8192

// putArray writes n elements of an array map, val(i) being element i. A
// generation's arrays are BPF_F_MMAPABLE: the elements are encoded into
// the mapped map (at the kernel's stride: the value size rounded up to 8
// bytes). Other arrays are written in batches of one
// BPF_MAP_UPDATE_BATCH call each.
func putArray[T any](m *ebpf.Map, n int, val func(i int) T) error {
	if n == 0 {
		return nil
	}
	if m.Flags()&unix.BPF_F_MMAPABLE != 0 {
		mem, size, stride, err := mappedArray[T](m, n)
		if err != nil {
			return err
		}
		if n*stride > len(mem) {
			return fmt.Errorf("map %s: write %d elements of %d", m, n, len(mem)/stride)
		}
		for i := 0; i < n; i++ {
			v := val(i)
			copy(mem[i*stride:], unsafe.Slice((*byte)(unsafe.Pointer(&v)), size))
		}
		return nil
	}
	for start := 0; start < n; start += batchSize {
		end := start + batchSize
		if end > n {
			end = n
		}
		keys := make([]uint32, end-start)
		vals := make([]T, end-start)
		for i := range keys {
			keys[i] = uint32(start + i)
			vals[i] = val(start + i)
		}
		if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("map %s[%d:%d]: %w", m.String(), start, end, err)
		}
	}
	return nil
}

// mappedArray returns the memory of the first n elements (all when n is
// 0) of a BPF_F_MMAPABLE array map whose values are T (mapped), the size
// of T and the kernel's stride between elements (the value size rounded up
// to 8 bytes).
func mappedArray[T any](m *ebpf.Map, n int) (mem []byte, size, stride int, err error) {
	var zero T
	size = int(unsafe.Sizeof(zero))
	if size != int(m.ValueSize()) {
		return nil, 0, 0, fmt.Errorf("map %s: value size %d, Go layout %d", m.String(), m.ValueSize(), size)
	}
	stride = (size + 7) &^ 7
	if mem, err = mapped(m, n*stride); err != nil {
		return nil, 0, 0, err
	}
	return mem, size, stride, nil
}

// carryCounters writes the new generation's counter bases: the old
// generation's totals for carried counters, the stated initial values for
// the others (one memory copy).
func carryCounters(cur *state, old []ir.Counters, newSlot uint32, src []CounterSource) error {
	base, err := cur.inner("cbase", newSlot)
	if err != nil {
		return err
	}
	defer base.Close()
	if err := putArray(base, len(src), func(i int) bpfCounter {
		c := src[i].Initial
		if f := src[i].From; f >= 0 && f < len(old) {
			c = old[f]
		}
		return bpfCounter{Packets: c.Packets, Bytes: c.Bytes}
	}); err != nil {
		return fmt.Errorf("carry counters: %w", err)
	}
	return nil
}

// Stop detaches xfw from every interface of the namespace. The programs and
// maps are freed by the kernel once detached.
func Stop() error {
	forgetSession()
	ifaces, err := listInterfaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, ifc := range ifaces {
		if err := detachInterface(ifc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Counters returns the counters of fam's running ruleset, indexed as the
// generation's counter indexes (0–2 policies, then rules), or nil when no
// ruleset of the family is loaded.
func Counters(fam ir.Family) ([]ir.Counters, error) {
	defer unmapOutsideSession()
	var out []ir.Counters
	err := withFamily(fam, func(cur *state, slot uint32) (err error) {
		out, err = cur.readCounters(slot)
		return err
	})
	return out, err
}

// withFamily calls fn with xfw's loaded state and the slot of fam's
// running generation; it does nothing when xfw is not loaded or fam has no
// ruleset. The state is closed when fn returns.
func withFamily(fam ir.Family, fn func(cur *state, slot uint32) error) error {
	cur, err := Current()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil
	}
	return fn(cur, cur.slot(fam))
}

// Running returns fam's running ruleset in its binary form (Update.Saved)
// and its counters, indexed as the generation's counter indexes (0–2
// policies, then rules); nil, nil when no ruleset of the family is loaded.
func Running(fam ir.Family) (saved []byte, counters []ir.Counters, err error) {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil, nil
	}
	if saved, err = cur.saved(cur.slot(fam)); err != nil {
		return nil, nil, err
	}
	if counters, err = cur.readCounters(cur.slot(fam)); err != nil {
		return nil, nil, err
	}
	return saved, counters, nil
}
