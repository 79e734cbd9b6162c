package dataplane

import (
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
)

// TestSessionMappingsKept checks which mappings a session's end releases:
// with keep, those neither that session nor the one before used (a
// command fills one bank, the next the other); without, all of them;
// never those made outside a session, which unmapOutsideSession releases
// once no session is active.
func TestSessionMappingsKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a BPF map needs root")
	}
	newMap := func() *ebpf.Map {
		t.Helper()
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1024, Flags: unix.BPF_F_MMAPABLE})
		if err != nil {
			t.Fatalf("create a mmapable array: %v", err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	setActive := func(on bool) {
		session.mu.Lock()
		session.active = on
		session.mu.Unlock()
	}
	use := func(ms ...*ebpf.Map) {
		t.Helper()
		for _, m := range ms {
			mem, err := mapped(m, 0)
			if err != nil {
				t.Fatal(err)
			}
			mem[0]++ // the mapping is live memory
		}
	}
	count := func(outside bool) int {
		mappings.mu.Lock()
		defer mappings.mu.Unlock()
		n := 0
		for _, mp := range mappings.all {
			if mp.key.outside == outside {
				n++
			}
		}
		return n
	}
	t.Cleanup(func() {
		setActive(false)
		unmapAll()
	})
	unmapAll()
	a, b, c := newMap(), newMap(), newMap()

	use(c) // outside a session
	setActive(true)
	use(a, b) // session 1: both banks
	endSessionMappings(true)
	use(a) // session 2: bank a only
	endSessionMappings(true)
	if got := count(false); got != 2 {
		t.Errorf("after a session that used one of two kept mappings: %d kept, want 2", got)
	}
	use(a) // session 3: b unused in this session and the one before
	endSessionMappings(true)
	if got := count(false); got != 1 {
		t.Errorf("after two sessions without b: %d kept, want 1", got)
	}
	mappings.mu.Lock()
	mapsBefore := len(mappings.all)
	mappings.mu.Unlock()
	use(a) // a kept mapping is reused, not mapped again
	mappings.mu.Lock()
	mapsAfter := len(mappings.all)
	mappings.mu.Unlock()
	if mapsAfter != mapsBefore {
		t.Errorf("a kept mapping was mapped again: %d mappings, then %d", mapsBefore, mapsAfter)
	}
	endSessionMappings(false)
	if got := count(false); got != 0 {
		t.Errorf("a session's end without keep left %d mappings", got)
	}
	unmapOutsideSession() // a session is active: the outside one stays
	if got := count(true); got != 1 {
		t.Errorf("outside mappings while a session is active: %d, want 1", got)
	}
	setActive(false)
	unmapOutsideSession()
	if got := count(true); got != 0 {
		t.Errorf("outside mappings after their call, no session active: %d, want 0", got)
	}
}

// TestPairedU32s checks the clsch map's layout from both sides: values
// written by putPairedU32s (several parts, an odd count) are element
// i / 2's v[i % 2] as the programs look them up (struct xfw_u32pair), and
// readPairedU32s returns them.
func TestPairedU32s(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a BPF map needs root")
	}
	t.Cleanup(func() { unmapAll() })
	ids := []uint32{7, 5, 9, 11, 13}
	masks := []uint32{0xffffffff, 1, 0x80000000}
	n := len(ids) + len(masks)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8,
		MaxEntries: uint32(pairedElems(n)), Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		t.Fatalf("create a mmapable array: %v", err)
	}
	defer m.Close()
	if err := putPairedU32s(m, ids, masks); err != nil {
		t.Fatal(err)
	}
	want := append(append([]uint32{}, ids...), masks...)
	for i, v := range want {
		var pair bpfU32Pair
		if err := m.Lookup(uint32(i/2), &pair); err != nil {
			t.Fatalf("element %d: %v", i/2, err)
		}
		if pair.V[i%2] != v {
			t.Errorf("value %d: element %d holds %v, want v[%d] = %#x", i, i/2, pair.V, i%2, v)
		}
	}
	got, err := readPairedU32s(m, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ids) {
		t.Errorf("read back %v, want %v", got, ids)
	}
}

// TestClassTableThroughClsch writes a class table of several blocks (an
// odd number of ids each, so blocks meet inside a map element) and its
// chunk masks as fillGeneration does (putClsch), over a map that held
// something else, and reads it back as RunningGeneration does: the same
// rows, the masks after them (ChunkMasks').
func TestClassTableThroughClsch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a BPF map needs root")
	}
	t.Cleanup(func() { unmapAll() })
	const width, rows = 999, 150 // 65 rows (64,935 ids) a block: three blocks
	g := &compiler.Generation{NumChunks: width, ClassChunks: compiler.NewClassTable(width)}
	for c := 0; c < rows; c++ {
		row := make([]uint32, width)
		for k := range row {
			if (c+k)%7 == 0 {
				row[k] = uint32(c*width + k)
			}
		}
		g.ClassChunks.Append(row)
	}
	if len(g.ClassChunks.Blocks()) != 3 {
		t.Fatalf("%d blocks: the test premise (three) does not hold", len(g.ClassChunks.Blocks()))
	}
	n := g.ClassChunks.NumIDs() + g.NumChunkMasks()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8,
		MaxEntries: uint32(pairedElems(n)), Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		t.Fatalf("create a mmapable array: %v", err)
	}
	defer m.Close()
	stale := make([]uint32, n) // a reused map's earlier generation
	for i := range stale {
		stale[i] = ^uint32(0)
	}
	if err := putPairedU32s(m, stale); err != nil {
		t.Fatal(err)
	}
	if err := putClsch(m, g); err != nil {
		t.Fatal(err)
	}
	got, err := readPairedU32s(m, n)
	if err != nil {
		t.Fatal(err)
	}
	ids := g.ClassChunks.NumIDs()
	read := compiler.ClassTableOf(got[:ids], width)
	if !read.Equal(&g.ClassChunks) {
		t.Errorf("the class table read back differs")
	}
	if !slices.Equal(got[ids:], g.ChunkMasks()) {
		t.Errorf("the chunk masks read back differ")
	}
}
