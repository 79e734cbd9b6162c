package lpm

// DirectEntries is the number of direct-table entries: one per value of the
// address's top 16 bits.
const DirectEntries = 1 << directBits

// directBits is how many leading address bits index the direct table.
const directBits = 16

// chunkFlag marks a result word as a chunk (see the package comment).
const chunkFlag = uint64(1) << 63

// maxChunkRanges is the largest number of ranges one chunk may hold (the
// count field has 31 bits; the BPF search runs at most Search6Steps halvings,
// enough for 2^31 ranges).
const maxChunkRanges = 1<<31 - 1

// Search4Steps bounds the binary search of an IPv4 chunk: a chunk covers one
// /16, so it holds at most 65536 ranges, and ceil(log2(65536)) = 16 halvings
// reduce any count to 1; one spare step.
const Search4Steps = 17

// Search6Steps bounds the binary search of an IPv6 chunk (at most 2^31 ranges,
// 31 halvings; one spare step).
const Search6Steps = 32

// leaf encodes a value as a result word.
func leaf(v uint32) uint64 { return uint64(v) }

// chunk encodes a chunk of count ranges beginning at range index base.
func chunk(base, count uint32) uint64 {
	return chunkFlag | uint64(count)<<32 | uint64(base)
}

// isChunk reports whether result word r is a chunk.
func isChunk(r uint64) bool { return r&chunkFlag != 0 }

// chunkBase and chunkCount decode a chunk result word.
func chunkBase(r uint64) uint32  { return uint32(r) }
func chunkCount(r uint64) uint32 { return uint32(r>>32) & 0x7fffffff }

// range4 encodes an IPv4 range word.
func range4(start, value uint32) uint64 { return uint64(value)<<32 | uint64(start) }

// Lookup4Flat is the lookup bpf/lpm.h performs for IPv4 (xfw_lpm4_lookup),
// step for step, over the flat arrays: direct (DirectEntries words) and
// ranges (one word per range). It returns 0 when no prefix matches or when
// the arrays are inconsistent (an index beyond an array, as the BPF map
// lookup would fail).
func Lookup4Flat(direct, ranges []uint64, addr uint32) uint32 {
	d := direct[addr>>16]
	if !isChunk(d) {
		return uint32(d)
	}
	base, n := chunkBase(d), chunkCount(d)
	lo := uint32(0)
	for step := 0; step < Search4Steps && n > 1; step++ {
		half := n / 2
		i := uint64(base) + uint64(lo) + uint64(half)
		if i >= uint64(len(ranges)) {
			return 0
		}
		if uint32(ranges[i]) <= addr {
			lo += half
		}
		n -= half
	}
	i := uint64(base) + uint64(lo)
	if i >= uint64(len(ranges)) {
		return 0
	}
	return uint32(ranges[i] >> 32)
}

// search6 is the binary search of one IPv6 chunk: the result of the last
// range with start <= key, or 0 when the arrays are inconsistent.
func search6(ranges []uint64, c uint64, key uint64) uint64 {
	base, n := chunkBase(c), chunkCount(c)
	lo := uint32(0)
	for step := 0; step < Search6Steps && n > 1; step++ {
		half := n / 2
		i := 2 * (uint64(base) + uint64(lo) + uint64(half))
		if i+1 >= uint64(len(ranges)) {
			return 0
		}
		if ranges[i] <= key {
			lo += half
		}
		n -= half
	}
	i := 2 * (uint64(base) + uint64(lo))
	if i+1 >= uint64(len(ranges)) {
		return 0
	}
	return ranges[i+1]
}

// Lookup6Flat is the lookup bpf/lpm.h performs for IPv6 (xfw_lpm6_lookup)
// over the flat arrays, the address given as its high and low 64 bits.
func Lookup6Flat(direct, ranges []uint64, hi, lo uint64) uint32 {
	r := direct[hi>>48]
	if !isChunk(r) {
		return uint32(r)
	}
	r = search6(ranges, r, hi)
	if !isChunk(r) {
		return uint32(r)
	}
	r = search6(ranges, r, lo)
	if isChunk(r) {
		return 0 // level-2 results are leaves; a chunk here is corrupt
	}
	return uint32(r)
}
