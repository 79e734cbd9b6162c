package compiler

import (
	"slices"
	"testing"
)

// TestClassTable checks a table built row by row over several blocks
// against the flat layout it stands for, the same rows read back in
// blocks of a flat slice (ClassTableOf), and that appending to the
// latter does not write into the slice it was made of.
func TestClassTable(t *testing.T) {
	for _, width := range []int{1, 3, 1000, classBlockIDs + 1} {
		rows := 3*max(1, classBlockIDs/width) + 1 // four blocks, the last with one row
		flat := make([]uint32, 0, rows*width)
		built := NewClassTable(width)
		for c := 0; c < rows; c++ {
			row := make([]uint32, width)
			for k := range row {
				row[k] = uint32(c*7 + k)
			}
			if got := built.Append(row); got != uint32(c) {
				t.Fatalf("width %d: row %d appended as %d", width, c, got)
			}
			flat = append(flat, row...)
		}
		if built.Len() != rows || built.NumIDs() != len(flat) {
			t.Fatalf("width %d: %d rows, %d ids; want %d, %d", width, built.Len(), built.NumIDs(), rows, len(flat))
		}
		if got := len(built.Blocks()); got != 4 {
			t.Errorf("width %d: %d blocks, want 4", width, got)
		}
		if !slices.Equal(built.IDs(), flat) || !slices.Equal(slices.Concat(built.Blocks()...), flat) {
			t.Fatalf("width %d: the blocks are not the flat table", width)
		}
		for c := 0; c < rows; c++ {
			if !slices.Equal(built.Row(uint32(c)), flat[c*width:(c+1)*width]) {
				t.Fatalf("width %d: row %d differs", width, c)
			}
			if k := uint32(width - 1); built.At(uint32(c), k) != flat[c*width+int(k)] {
				t.Fatalf("width %d: At(%d, %d) differs", width, c, k)
			}
		}
		read := ClassTableOf(slices.Clone(flat), width)
		if !read.Equal(&built) || !built.Equal(&read) {
			t.Fatalf("width %d: the table read back differs", width)
		}
		backing := read.IDs()
		extra := make([]uint32, width)
		if got := read.Append(extra); got != uint32(rows) {
			t.Fatalf("width %d: appended as %d, want %d", width, got, rows)
		}
		if read.Equal(&built) {
			t.Errorf("width %d: a table one row longer compares equal", width)
		}
		if !slices.Equal(backing, flat) {
			t.Errorf("width %d: appending changed the rows before", width)
		}
		built.Row(0)[0]++
		if fresh := ClassTableOf(slices.Clone(flat), width); fresh.Equal(&built) || built.At(0, 0) != flat[0]+1 {
			t.Errorf("width %d: a changed id is not seen", width)
		}
	}
}

// TestClassTableOfKeepsItsSlice checks that ClassTableOf's blocks are
// parts of the slice given (no copy), cut so that an append after the
// last row does not write past it.
func TestClassTableOfKeepsItsSlice(t *testing.T) {
	ids := make([]uint32, 6, 12)
	tab := ClassTableOf(ids, 2)
	tab.Row(1)[0] = 5
	if ids[2] != 5 {
		t.Fatalf("row 1 is not a part of the slice: %v", ids)
	}
	tab.Append([]uint32{8, 9})
	if full := ids[:12]; full[6] != 0 || full[7] != 0 {
		t.Fatalf("Append wrote past the slice's length: %v", full)
	}
	if !slices.Equal(tab.Row(3), []uint32{8, 9}) || tab.Len() != 4 {
		t.Fatalf("row 3 %v, %d rows", tab.Row(3), tab.Len())
	}
}
