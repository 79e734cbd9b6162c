package lpm

import "math/bits"

// block is a run of ranges in the range table: [base, base+size).
type block struct {
	base, size uint32
}

// allocator hands out blocks of the range table. Blocks are carved from the
// end of the used part (top) or taken from free lists segregated by size
// class (class k holds free blocks of 2^k to 2^(k+1)-1 ranges). Freed blocks
// wait in quarantine until reclaim: a reader may still be searching them.
type allocator struct {
	capacity uint32
	top      uint32
	// line is the number of ranges per cache line when small blocks must
	// not straddle one, or 0. A block of at most line ranges carved at top
	// starts a new line rather than cross into one; the padding left
	// behind goes to holes[size], where later small blocks fit.
	line       uint32
	holes      [][]uint32
	free       [33][]block
	quarantine []block
	freeRanges uint64 // ranges in the free lists and quarantine
}

// sizeClass is the free list a block of n ranges belongs to.
func sizeClass(n uint32) int { return bits.Len32(n) - 1 }

// alloc returns the base of a block of n ranges, or false when the table has
// no room for it.
func (a *allocator) alloc(n uint32) (uint32, bool) {
	if a.line > 0 && n <= a.line {
		// Best fit among the holes: none straddles a line.
		for r := n; r < a.line; r++ {
			if l := len(a.holes[r]); l > 0 {
				base := a.holes[r][l-1]
				a.holes[r] = a.holes[r][:l-1]
				if r > n {
					a.holes[r-n] = append(a.holes[r-n], base+n)
				}
				return base, true
			}
		}
	}
	// Any block of a class above n's holds at least n ranges.
	for k := sizeClass(n) + 1; k < len(a.free); k++ {
		if l := len(a.free[k]); l > 0 {
			b := a.free[k][l-1]
			a.free[k] = a.free[k][:l-1]
			return a.split(b, n), true
		}
	}
	// n's own class: first fit among a few.
	list := a.free[sizeClass(n)]
	for j := len(list) - 1; j >= 0 && j >= len(list)-8; j-- {
		if b := list[j]; b.size >= n {
			list[j] = list[len(list)-1]
			a.free[sizeClass(n)] = list[:len(list)-1]
			return a.split(b, n), true
		}
	}
	base, pad := a.top, uint32(0)
	if a.line > 0 && n <= a.line && base%a.line+n > a.line {
		pad = a.line - base%a.line
	}
	if uint64(base)+uint64(pad)+uint64(n) > uint64(a.capacity) {
		return 0, false
	}
	if pad > 0 {
		a.holes[pad] = append(a.holes[pad], base)
		base += pad
	}
	a.top = base
	a.top += n
	return base, true
}

// split takes n ranges from the front of free block b; the rest stays free
// (nobody reads it, so it is reusable at once).
func (a *allocator) split(b block, n uint32) uint32 {
	a.freeRanges -= uint64(n)
	if rest := b.size - n; rest > 0 {
		a.putFree(block{b.base + n, rest})
	}
	return b.base
}

// putFree adds a block to its free list.
func (a *allocator) putFree(b block) {
	k := sizeClass(b.size)
	a.free[k] = append(a.free[k], b)
}

// release quarantines a block that the last patch stopped referencing.
func (a *allocator) release(b block) {
	if b.size == 0 {
		return
	}
	a.quarantine = append(a.quarantine, b)
	a.freeRanges += uint64(b.size)
}

// reclaim makes the quarantined blocks reusable.
func (a *allocator) reclaim() {
	for _, b := range a.quarantine {
		a.putFree(b)
	}
	a.quarantine = a.quarantine[:0]
}

// used is the number of ranges in live blocks.
func (a *allocator) used() uint64 { return uint64(a.top) - a.freeRanges }
