package compiler

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestClassesByHash checks that vectorBuilder.class tells classes apart
// by their chunk ids, not by their hash: equal ids are one class, ids
// whose hash collides (forced here) are two, found again afterwards.
func TestClassesByHash(t *testing.T) {
	vb := newVectorBuilder(3)
	a, b := []uint32{1, 2, 3}, []uint32{3, 2, 1}
	const forced = 42 // one hash for both: a collision
	steps := []struct {
		ids  []uint32
		h    uint64
		want uint32
	}{
		{make([]uint32, 3), classHash(make([]uint32, 3)), 0}, // the empty class
		{a, forced, 1},
		{b, forced, 2},
		{a, forced, 1},
		{b, forced, 2},
		{a, classHash(a), 3}, // another hash: the builder trusts it
	}
	for i, s := range steps {
		if got := vb.class(s.ids, s.h); got != s.want {
			t.Errorf("step %d: class %d, want %d", i, got, s.want)
		}
	}
	if got := vb.classIDs(2); got[0] != 3 || got[2] != 1 {
		t.Errorf("class 2's chunk ids %v, want %v", got, b)
	}
}

// TestClassesDistinct checks that the sweep's hash, updated per changed
// chunk, finds every class again: no two classes of a generation have the
// same chunk ids.
func TestClassesDistinct(t *testing.T) {
	g, err := Compile(fiveTuple(10_000, 3), Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for c := 0; c < g.ClassChunks.Len(); c++ {
		key := fmt.Sprint(g.ClassChunks.Row(uint32(c)))
		if d, ok := seen[key]; ok {
			t.Fatalf("classes %d and %d have the same chunks", d, c)
		}
		seen[key] = c
	}
	if len(seen) < 3 {
		t.Fatalf("%d classes: the test premise (several) does not hold", len(seen))
	}
}

// TestSweepHashUpToDate checks that the sweep keeps each class's hash up
// to date as chunks change: a stale hash finds classes only through the
// collision lists (correct, but a linear scan), so a sweep over many
// entries in many chunks must leave none.
func TestSweepHashUpToDate(t *testing.T) {
	const n = 5 * ChunkBits
	entries := make([]Entry, n)
	for i := range entries {
		if i%3 != 0 { // every third entry a wildcard
			entries[i].Cond = CondList{{Field: FieldDport, Set: Range(U64(uint64(i%1000)), U64(uint64(i%1000+7)))}}
		}
	}
	vb := newVectorBuilder(n / ChunkBits)
	fc, err := vb.buildField(FieldDport, entries, constrainedBy(entries)[FieldDport])
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.Bounds) < 100 || len(vb.classCollided) != 0 {
		t.Errorf("%d bounds, %d hashes with collisions, want many bounds and no collision", len(fc.Bounds), len(vb.classCollided))
	}
}

// TestSetFirstBits checks the wildcard start of a field's sweep: the
// first n positions set, word by word, against setting them one by one.
func TestSetFirstBits(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 127, ChunkBits - 1, ChunkBits, ChunkBits + 1, 2*ChunkBits + 70} {
		got := make([]Chunk, 3)
		setFirstBits(got, n)
		want := make([]Chunk, 3)
		for i := 0; i < n; i++ {
			want[i/ChunkBits].Words[(i%ChunkBits)/64] |= 1 << uint(i%64)
		}
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: the bits differ from setting them one by one", n)
		}
	}
}

// TestConstrainedBy checks the per-field entry lists of the sweep against
// each entry's condition.
func TestConstrainedBy(t *testing.T) {
	entries := []Entry{
		{},
		{Cond: CondList{{Field: FieldDport, Set: Range(U64(1), U64(2))}}},
		{Cond: CondList{{Field: FieldProto, Set: Range(U64(6), U64(6))}, {Field: FieldDport, Set: Range(U64(3), U64(4))}}},
		{Cond: CondList{{Field: FieldProto, Set: Range(U64(17), U64(17))}}},
	}
	got := constrainedBy(entries)
	for f := Field(0); f < NumFields; f++ {
		var want []uint32
		for i := range entries {
			if entries[i].Cond.Get(f) != nil {
				want = append(want, uint32(i))
			}
		}
		if !slices.Equal(got[f], want) {
			t.Errorf("field %s: entries %v, want %v", f, got[f], want)
		}
	}
}

// TestSweepPreparedAhead checks that the class sweep gives the same
// generation whether the fields' events are prepared on another goroutine
// beside it (prepareAhead) or each when its sweep starts; and that a
// sweep ended early (a refused field) leaves no preparing goroutine
// waiting.
func TestSweepPreparedAhead(t *testing.T) {
	saved := minPrepareAheadEntries
	defer func() { minPrepareAheadEntries = saved }()
	compile := func(min int) *Generation {
		minPrepareAheadEntries = min
		g, err := Compile(fiveTuple(5_000, 7), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	serial, ahead := compile(1<<30), compile(0)
	if !reflect.DeepEqual(serial, ahead) {
		t.Fatalf("the generations differ: serial %s, prepared ahead %s", serial, ahead)
	}
	if serial.Active&(1<<FieldSrc|1<<FieldDport) != 1<<FieldSrc|1<<FieldDport {
		t.Fatalf("active fields %#x: the test premise (several swept fields) does not hold", serial.Active)
	}

	entries := make([]Entry, 3*ChunkBits)
	for i := range entries {
		v := U64(uint64(i))
		entries[i].Cond = CondList{ // five fields, more than preparedAhead+1
			{Field: FieldSrc, Set: Point(v)},
			{Field: FieldDst, Set: Point(v)},
			{Field: FieldProto, Set: Point(U64(uint64(i % 3)))},
			{Field: FieldSport, Set: Point(v)},
			{Field: FieldDport, Set: Point(v)},
		}
	}
	constrained := constrainedBy(entries)
	before := runtime.NumGoroutine()
	prepared, stop := prepareAhead(entries, constrained, 3)
	if fe := prepared(FieldSrc); len(fe.events) != 2*len(entries) {
		t.Fatalf("%d events for the source address, want %d", len(fe.events), 2*len(entries))
	}
	stop() // as after a refused field: the others are never asked for
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after stop, %d before: the preparing goroutine is left waiting", n, before)
	}
}
