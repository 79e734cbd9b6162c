package dataplane

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/prefault"
)

// The running generation, read back: a command that appends rules extends
// it (compiler.AppendRule) instead of compiling the whole ruleset again.
// Most of a generation is in the slot's maps and configuration; what they
// do not say (array lengths, the slack layout, the set conditions, the
// interfaces it was compiled for) is kept after the saved ruleset in the
// slot's state pages.

// genMeta is a generation's metadata kept in the state pages (JSON).
type genMeta struct {
	// Version is genMetaVersion when written: a generation whose
	// metadata an older xfw wrote is not read back (RunningGeneration).
	Version                                int `json:",omitempty"`
	Small, ClassChunks, Chunks, LogConfigs int
	Layout                                 compiler.Layout
	SetConds                               []compiler.SetCond
	Interfaces                             []compiler.Interface
	// SetLookups describe Update.Sets: what a patch of a set's members
	// needs to find the tables that look it up.
	SetLookups []SetLookupInfo `json:",omitempty"`
	// Limits are the generation's limit buckets (compiler.Generation).
	Limits []compiler.Limit `json:",omitempty"`
	// Statistics are the nth statistic matches' instances
	// (compiler.Generation).
	Statistics []compiler.StatisticInst `json:",omitempty"`
	// Probes are the generation's probes (compiler.Generation): an
	// in-place change of the running generation keeps them.
	Probes []compiler.Probe `json:",omitempty"`
	// Recents are the generation's recent matches (compiler.Generation).
	Recents []compiler.Recent `json:",omitempty"`
	// HashLimits are the generation's hashlimit matches, which its
	// hashlimit probes name.
	HashLimits []compiler.HashLimit `json:",omitempty"`
	// Preds are the generation's predicates (compiler.Generation).
	Preds []predMeta `json:",omitempty"`
	// Headers are the generation's IPv6 extension header and transport
	// header conditions (headermeta.go), which its maps do not say.
	Headers *headerMeta `json:",omitempty"`
	// CtExpires are the generation's --ctexpire ranges
	// (compiler.Generation), which its ctexpire probes name.
	CtExpires []compiler.CtExpire `json:",omitempty"`
	// FilterStart and FilterEnd are the filter table's base chains
	// (compiler.Generation's ChainStart and ChainEnd) of a generation
	// that walks other tables too: the configuration holds its walks
	// (Generation.Walk) there instead.
	FilterStart, FilterEnd *[compiler.NumChains]uint32 `json:",omitempty"`
}

// SetLookupInfo describes one set lookup of a running generation.
type SetLookupInfo struct {
	// Index is the lookup's index in the generation (its outer-map key).
	Index int
	// Set is the set looked up, Via the list:set it came from ("" when
	// none), Kind SetKindDXR or the hash kinds.
	Set, Via string
	Kind     uint8
	// MaxPlen is a hash kind's address length (0: no address).
	MaxPlen uint8
	// ID, ListExp and Counters are SetTable's: what a later generation
	// checks before it takes the lookup's hash table over, and the
	// number of its element counters.
	ID       uint64 `json:",omitempty"`
	ListExp  int64  `json:",omitempty"`
	Counters int    `json:",omitempty"`
	// Write and Writable are SetTable's: the lookup of a set SET targets
	// write, and a table holding the write parameters.
	Write    bool `json:",omitempty"`
	Writable bool `json:",omitempty"`
}

// genMetaVersion numbers what genMeta holds: 1 added CtExpires and the
// filter chains of a generation that walks other tables, without which
// the generation read back is not the one compiled; 2: the bounds map
// holds search trees (struct xfw_bnode), no longer the flat bounds; 3:
// the port fields' direct arrays hold the cut-short ports (ValShort) and
// the TCP flags' the later fragments' bytes (FlagsLater), so their
// fields' runs in the small map are longer.
const genMetaVersion = 3

// generationMeta encodes u's generation metadata.
func generationMeta(u *Update) ([]byte, error) {
	g := u.Gen
	hm, err := headerMetaOf(g)
	if err != nil {
		return nil, err
	}
	meta := genMeta{
		Version: genMetaVersion,
		Small:   len(g.Small), ClassChunks: g.ClassChunks.NumIDs(), Chunks: len(g.Chunks), LogConfigs: len(g.LogConfigs),
		Layout: g.Layout, SetConds: g.SetConds, Interfaces: u.Interfaces,
		SetLookups: setLookupInfos(u.Sets), Limits: g.Limits, Probes: g.Probes, Statistics: g.Statistics,
		Recents:    g.Recents,
		HashLimits: g.HashLimits,
		Preds:      predMetas(g.Preds),
		Headers:    hm,
		CtExpires:  g.CtExpires,
	}
	if g.Walks() {
		meta.FilterStart, meta.FilterEnd = &g.ChainStart, &g.ChainEnd
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, fmt.Errorf("encode generation metadata: %w", err)
	}
	return b, nil
}

// RunningGeneration returns fam's running generation as compiled (entry
// conditions and Rules excepted: the caller knows its rules) and the
// interfaces it was compiled for; nil when no ruleset of the family is
// loaded or an older xfw wrote its metadata (genMetaVersion).
//
// During a session its chunks may be the idle bank's memory (readChunks):
// the generation is then valid until the session ends.
func RunningGeneration(fam ir.Family) (*compiler.Generation, []compiler.Interface, error) {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil, nil
	}
	slot := cur.slot(fam)
	t0 := time.Now()
	metaBytes, err := cur.savedMeta(slot)
	if err != nil {
		return nil, nil, err
	}
	var meta genMeta
	if err := json.Unmarshal(metaBytes, &meta); err != nil {
		return nil, nil, fmt.Errorf("decode generation metadata: %w", err)
	}
	if meta.Version != genMetaVersion {
		return nil, nil, nil // an older xfw's: compiled in full
	}
	t0 = TraceSince("gen: blob, meta", t0)
	c := cur.cfgs[slot]
	g := &compiler.Generation{
		Family: fam, Active: c.Active, NumChunks: c.NChunks,
		ChainStart: c.ChainStart, ChainEnd: c.ChainEnd, MaxIters: c.MaxIters,
		AddrBase: c.AddrBase, AddrCount: c.AddrCount,
		Hash: map[compiler.HashKey]uint32{}, Layout: meta.Layout, SetConds: meta.SetConds,
		Limits: meta.Limits, Probes: meta.Probes, Statistics: meta.Statistics,
		Recents: meta.Recents, HashLimits: meta.HashLimits, Preds: predsOfMeta(meta.Preds),
		CtExpires: meta.CtExpires,
	}
	if meta.Headers != nil {
		if err := meta.Headers.restore(g); err != nil {
			return nil, nil, err
		}
	}
	if meta.FilterStart != nil && meta.FilterEnd != nil {
		g.ChainStart, g.ChainEnd = *meta.FilterStart, *meta.FilterEnd
	}
	for i, d := range c.PolicyDrop {
		g.PolicyDrop[i] = d != 0
	}
	g.Trivial = trivialOfCfg(&c)
	g.SetPreDrops(preDropsOfCfg(&c))
	copy(g.SmallBase[:], c.SmallBase[:])
	g.NoShortPorts = c.NoShortPorts != 0
	copy(g.DefaultClass[:], c.DefaultCls[:])
	read := func(kind string, n int, each func(m *mapReader) error) error {
		m, err := cur.inner(kind, slot)
		if err != nil {
			return err
		}
		defer m.Close()
		defer TraceSince("gen: "+kind, time.Now())
		return each(&mapReader{kind: kind, n: n, m: m})
	}
	errs := []error{
		read("small", meta.Small, func(r *mapReader) (err error) {
			g.Small, err = readU32s(r.m, r.n)
			return err
		}),
		read("bounds", compiler.ShapeBoundTrees(c.AddrCount).Nodes, func(r *mapReader) (err error) {
			mem, err := mappedPrefix(r.m, r.n*boundNodeStride)
			if err != nil {
				return fmt.Errorf("bounds: %w", err)
			}
			g.Bounds, err = compiler.BoundsOfTrees(boundNodes(mem), c.AddrBase, c.AddrCount)
			return err
		}),
		read("clsch", meta.ClassChunks, func(r *mapReader) (err error) {
			ids, err := readPairedU32s(r.m, r.n)
			g.ClassChunks = compiler.ClassTableOf(ids, int(c.NChunks))
			return err
		}),
		read("chunks", meta.Chunks, func(r *mapReader) (err error) {
			g.Chunks, err = cur.readChunks(r.m, fam, r.n, nil)
			return err
		}),
		read("entries", int(c.NEntries), func(r *mapReader) error {
			buf, err := mappedPrefix(r.m, r.n*entryStride)
			if err != nil {
				return fmt.Errorf("entries: %w", err)
			}
			g.Entries = make([]compiler.Entry, r.n)
			prefault.Slice(g.Entries)
			for i := range g.Entries {
				b := buf[i*entryStride:]
				g.Entries[i] = compiler.Entry{Rule: binary.LittleEndian.Uint32(b), Action: compiler.Action(b[4]), Flags: b[5],
					Aux: binary.LittleEndian.Uint16(b[6:]), Next: binary.LittleEndian.Uint32(b[8:])}
			}
			return nil
		}),
		read("logcfg", meta.LogConfigs, func(r *mapReader) error {
			return readInto(r, &g.LogConfigs, func(v bpfLogCfg) compiler.LogConfig {
				return compiler.LogConfig{Prefix: string(bytes.TrimRight(v.Prefix[:], "\x00")), Level: v.Level, Flags: v.Flags,
					NFLogGroup: v.NFLogGroup, NFLogLen: v.NFLogLen}
			})
		}),
		read("hcls", 0, func(r *mapReader) error {
			var k bpfHKey
			var v uint32
			it := r.m.Iterate()
			for it.Next(&k, &v) {
				g.Hash[compiler.HashKey{Field: k.Field, Value: k.Value}] = v
			}
			return it.Err()
		}),
	}
	for _, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("read the running generation: %w", err)
		}
	}
	return g, meta.Interfaces, nil
}

// RunningChunks returns the first n chunks of fam's running generation,
// read as RunningGeneration reads them (readChunks: during a session,
// into the idle bank's memory, where the next generation needs them): for
// a caller that kept the rest of the generation (the agent), whose chunks
// are the running bank's memory, which the session unmaps. idle, when not
// nil, is what the caller knows the idle bank's chunk map holds already
// (the chunks of the generation the running one was made from in place,
// which it starts with): those are not copied again.
func RunningChunks(fam ir.Family, n int, idle *ChunkPrefix) ([]compiler.Chunk, error) {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil {
		return nil, err
	}
	if cur == nil || !cur.hasFamily(fam) {
		return nil, errors.New("no running generation")
	}
	defer cur.Close()
	m, err := cur.inner("chunks", cur.slot(fam))
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return cur.readChunks(m, fam, n, idle)
}

// mapReader is one generation map to read n elements of.
type mapReader struct {
	kind string
	n    int
	m    *ebpf.Map
}

// readInto reads r's n elements (of the data plane's type B) into out,
// converted by conv.
func readInto[B, T any](r *mapReader, out *[]T, conv func(B) T) error {
	*out = make([]T, 0, r.n)
	if err := readArray(r.m, r.n, func(_ int, v B) { *out = append(*out, conv(v)) }); err != nil {
		return fmt.Errorf("%s: %w", r.kind, err)
	}
	if len(*out) != r.n {
		return fmt.Errorf("%s: %d of %d elements", r.kind, len(*out), r.n)
	}
	return nil
}

// savedMeta returns the generation metadata kept in slot's state pages
// after the saved ruleset (stateBlob's layout).
func (s *state) savedMeta(slot uint32) ([]byte, error) {
	meta, err := s.statePart(slot, 1)
	if err != nil {
		return nil, fmt.Errorf("running generation metadata: %w", err)
	}
	return meta, nil
}

// Strides of the generation arrays read byte by byte: struct xfw_bnode
// (compiler.BoundNode: 32 keys of two __u64, 32 __u32 classes) and struct
// xfw_entry (12 bytes at the kernel's 8-byte alignment).
const (
	boundNodeStride = int(unsafe.Sizeof(compiler.BoundNode{}))
	entryStride     = 16
)

// readChunks returns the n chunks of active, the running generation's
// chunk map. During a session whose idle bank holds a chunk map large
// enough, they are copied into that map (memory to memory) and returned in
// place: the caller's changes (compiler.AppendRule adds chunks) are then
// already where the next generation needs them, and buildSlot, reusing
// that map, copies nothing (putChunks). The idle bank is read by no packet.
// Otherwise they are copied into the heap, with room for a few more. The
// first idle.Len chunks are not copied when the idle map is idle.Map
// (idle nil: none known).
func (s *state) readChunks(active *ebpf.Map, fam ir.Family, n int, idle *ChunkPrefix) ([]compiler.Chunk, error) {
	src, err := mappedPrefix(active, n*chunkStride)
	if err != nil {
		return nil, fmt.Errorf("chunks: %w", err)
	}
	if sessionActive() {
		idleSlot := slotOf(fam, 1-s.banks[familyIndex(fam)]&1)
		if m, err := s.inner("chunks", idleSlot); err == nil {
			defer m.Close()
			if int(m.MaxEntries()) >= n && int(m.ValueSize()) == chunkStride {
				// Room for the chunks the change adds (up to a class
				// copied per changed class, maxAppendClasses).
				dst, err := mapped(m, (n+chunkRoom)*chunkStride)
				if err != nil {
					return nil, fmt.Errorf("chunks: %w", err)
				}
				from := 0
				if idle != nil && idle.Len <= n {
					if _, id, err := mapFacts(m); err == nil && id == idle.Map {
						from = idle.Len * chunkStride
					}
				}
				copy(dst[from:], src[from:])
				if traceOn {
					TraceSince(fmt.Sprintf("chunks: %d of %d copied", n-from/chunkStride, n), time.Now())
				}
				return unsafe.Slice((*compiler.Chunk)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/chunkStride)[:n], nil
			}
		}
	}
	// Room for the chunks appended rules add (compiler.AppendRule).
	chunks := make([]compiler.Chunk, n, n+64)
	prefault.Slice(chunks)
	copy(chunkBytes(chunks), src)
	return chunks, nil
}

// The Go layouts read and written as the data plane's bytes: a build
// fails here when they drift apart.
var (
	_ = [1]struct{}{}[unsafe.Sizeof(compiler.BoundNode{})-unsafe.Sizeof(bpfBNode{})]
	_ = [1]struct{}{}[unsafe.Sizeof(compiler.Chunk{})-unsafe.Sizeof(bpfChunk{})]
)

// chunkRoom is how many chunks more than the running generation's the
// idle bank's chunk memory is mapped for (readChunks): an in-place change
// copies at most a few hundred; more move the chunks to the heap.
const chunkRoom = 1024

// chunkStride is the size of struct xfw_chunk (and of compiler.Chunk).
const chunkStride = int(unsafe.Sizeof(compiler.Chunk{}))

// boundNodes views mem, a bounds map's memory, as its search tree nodes
// (compiler.BoundNode has the data plane's layout, struct xfw_bnode).
func boundNodes(mem []byte) []compiler.BoundNode {
	if len(mem) < boundNodeStride {
		return nil
	}
	return unsafe.Slice((*compiler.BoundNode)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/boundNodeStride)
}

// setLookupInfos describes the set lookups of a generation.
func setLookupInfos(sets []SetTable) []SetLookupInfo {
	out := make([]SetLookupInfo, len(sets))
	for i, st := range sets {
		out[i] = SetLookupInfo{Index: i, Set: st.Set, Via: st.Via, Kind: st.Kind, MaxPlen: st.MaxPlen,
			ID: st.ID, ListExp: st.ListExp, Counters: st.Counters, Write: st.Write, Writable: st.Writable}
		if st.SameAs > 0 {
			out[i].Counters = sets[st.SameAs-1].Counters
		}
	}
	return out
}
