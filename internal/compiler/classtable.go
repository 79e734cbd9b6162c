package compiler

import "slices"

// ClassTable is the class→chunk table: row c holds class c's chunk ids,
// Width of them (Generation.NumChunks). The rows are kept in blocks of
// perBlock rows, every block full but the last: the class sweep adds
// classes one at a time without regrowing what it holds, and the data
// plane writes the blocks one after the other into the clsch map, so
// the table is never copied into one slice (at kube-proxy's 10K services
// 112,519 classes of 131 ids, 56 MB).
type ClassTable struct {
	// Width is the number of chunk ids in a row.
	Width int
	// perBlock is the number of rows a block holds; blocks the blocks;
	// rows the number of rows.
	perBlock int
	blocks   [][]uint32
	rows     int
}

// classBlockIDs is the number of chunk ids in a full block of a
// ClassTable (256 KB, at least one row).
const classBlockIDs = 64 << 10

// NewClassTable returns an empty table of rows of width chunk ids.
func NewClassTable(width int) ClassTable {
	return ClassTable{Width: width, perBlock: max(1, classBlockIDs/max(width, 1))}
}

// ClassTableOf returns the table whose rows are ids, width at a time
// (len(ids) a multiple of width): the blocks are parts of ids, not
// copies; the last is cut at its length, so an Append past it does not
// write into ids.
func ClassTableOf(ids []uint32, width int) ClassTable {
	t := NewClassTable(width)
	if width == 0 {
		return t
	}
	t.rows = len(ids) / width
	for at, step := 0, t.perBlock*width; at < len(ids); at += step {
		end := min(at+step, len(ids))
		t.blocks = append(t.blocks, ids[at:end:end])
	}
	return t
}

// Len returns the number of rows (classes).
func (t *ClassTable) Len() int { return t.rows }

// NumIDs returns the number of chunk ids, Len()*Width.
func (t *ClassTable) NumIDs() int { return t.rows * t.Width }

// Row returns class c's chunk ids, a part of the table (writes change it).
func (t *ClassTable) Row(c uint32) []uint32 {
	at := (int(c) % t.perBlock) * t.Width
	return t.blocks[int(c)/t.perBlock][at : at+t.Width]
}

// At returns the chunk id of class c's chunk k.
func (t *ClassTable) At(c, k uint32) uint32 {
	return t.Row(c)[k]
}

// Append adds a row of ids (Width of them, copied) and returns its class.
func (t *ClassTable) Append(ids []uint32) uint32 {
	c := uint32(t.rows)
	if t.rows%t.perBlock == 0 {
		t.blocks = append(t.blocks, make([]uint32, 0, t.perBlock*t.Width))
	}
	last := len(t.blocks) - 1
	t.blocks[last] = append(t.blocks[last], ids...)
	t.rows++
	return c
}

// Blocks returns the table's blocks: their ids one block after the other
// are the rows in class order (parts of the table, not copies).
func (t *ClassTable) Blocks() [][]uint32 { return t.blocks }

// IDs returns the rows in class order in one new slice.
func (t *ClassTable) IDs() []uint32 {
	out := make([]uint32, 0, t.NumIDs())
	for _, b := range t.blocks {
		out = append(out, b...)
	}
	return out
}

// Equal reports whether t and u have the same rows, however they are
// blocked.
func (t *ClassTable) Equal(u *ClassTable) bool {
	if t.rows != u.rows || (t.rows > 0 && t.Width != u.Width) {
		return false
	}
	for c := uint32(0); c < uint32(t.rows); c++ {
		if !slices.Equal(t.Row(c), u.Row(c)) {
			return false
		}
	}
	return true
}
