package compiler

import (
	"slices"
	"testing"
)

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

// TestWriteClassTable checks WriteClassTable's one pass against the ids
// in class order and ChunkMasks, into a buffer that held other values,
// on a table of several blocks and two mask words a class.
func TestWriteClassTable(t *testing.T) {
	const width, rows = 40, 5000 // 1,638 rows a block
	g := &Generation{NumChunks: width, ClassChunks: NewClassTable(width)}
	for c := 0; c < rows; c++ {
		row := make([]uint32, width)
		for k := range row {
			if (c*31+k*7)%5 == 0 {
				row[k] = uint32(c + k + 1)
			}
		}
		g.ClassChunks.Append(row)
	}
	if len(g.ClassChunks.Blocks()) < 2 || g.ChunkMaskWords() != 2 {
		t.Fatalf("%d blocks, %d mask words a class: the test premise (several, two) does not hold",
			len(g.ClassChunks.Blocks()), g.ChunkMaskWords())
	}
	want := append(g.ClassChunks.IDs(), g.ChunkMasks()...)
	got := make([]uint32, len(want))
	for i := range got {
		got[i] = ^uint32(0)
	}
	g.WriteClassTable(got)
	if !slices.Equal(got, want) {
		t.Fatal("WriteClassTable differs from the ids and ChunkMasks")
	}
}
