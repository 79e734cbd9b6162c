package compiler

import "testing"

// TestChunkMasks checks the classes' chunk masks against ClassChunks,
// over a word boundary.
func TestChunkMasks(t *testing.T) {
	g := &Generation{NumChunks: 40}
	ids := make([]uint32, 3*40)
	ids[1*40+0] = 7
	ids[1*40+33] = 9
	ids[2*40+39] = 1
	g.ClassChunks = ClassTableOf(ids, 40)
	if w := g.ChunkMaskWords(); w != 2 {
		t.Fatalf("%d words per class, want 2", w)
	}
	want := []uint32{0, 0, 1, 1 << 1, 0, 1 << 7}
	got := g.ChunkMasks()
	if len(got) != len(want) {
		t.Fatalf("%d mask words, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("word %d: %#x, want %#x", i, got[i], want[i])
		}
	}
}
