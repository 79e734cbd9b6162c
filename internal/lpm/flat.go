package lpm

// Direct4Bits and Direct6Bits are how many leading address bits index the
// direct table of each family: IPv4 /18s (2^18 entries, 2 MiB: a chunk of a
// million-host set then fits in about one cache line), IPv6 /16s.
const (
	Direct4Bits = 18
	Direct6Bits = 16
)

// maxDirectBits is the larger of Direct4Bits and Direct6Bits.
const maxDirectBits = Direct4Bits

// DirectEntries returns the number of direct-table entries of the family.
func (f Family) DirectEntries() int { return 1 << f.DirectBits() }

// DirectBits returns how many leading address bits index the family's direct
// table.
func (f Family) DirectBits() int {
	if f == IPv6 {
		return Direct6Bits
	}
	return Direct4Bits
}

// chunkFlag marks a result word as a chunk (see the package comment).
const chunkFlag = uint64(1) << 63

// An IPv4 chunk word: bits 0..31 the range index of its block, bits
// 32..47 the block's size in words (for tests and tools; the lookup does not
// need it), bits 48..51 the part shift: the chunk's index has 2^(part4Bits -
// shift) words, and address a selects word (a & (2^part4Bits - 1)) >> shift.
const (
	size4Mask  = 1<<16 - 1
	shift4Pos  = 48
	shift4Mask = 0xf
)

// part4Bits is the number of address bits of an IPv4 direct entry's /18
// below the direct index: the most an index can consume.
const part4Bits = 32 - Direct4Bits

// maxIndex4PerRun bounds an IPv4 chunk's index: at most this many words
// per run (index4Bits).
const maxIndex4PerRun = 2

// cacheLine is the size in bytes of the CPU's cache line (x86-64, arm64)
// and of the alignment the BPF array maps give their values (mmapable
// maps: a page).
const cacheLine = 64

// ranges4PerLine is the largest number of runs an IPv4 chunk holds with a
// one-word index: the word and the runs fill one 64-byte cache line.
const ranges4PerLine = cacheLine/8 - 1

// ranges4PerPart is about how many runs one part of an indexed IPv4 chunk
// holds (the index has about n / ranges4PerPart words for n runs): its
// search reads one cache line, most often.
const ranges4PerPart = 2

// chunk4 encodes an IPv4 chunk word: its block at range index base, of size
// words, with the part shift.
func chunk4(base, size uint32, shift int) uint64 {
	return chunkFlag | uint64(shift)<<shift4Pos | uint64(size)<<32 | uint64(base)
}

// index4 encodes an IPv4 index word: the part's answer outside its runs
// (the chunk's default; or, with count 0, the whole part's answer), the
// number of runs to search, and where they begin, relative to the block.
func index4(value, count, rel uint32) uint64 {
	return uint64(value)<<32 | uint64(count)<<16 | uint64(rel)
}

// indexedFlag marks an IPv6 level-1 chunk word (in a direct entry or an
// index) as an index: 2^Index6Bits ranges, the i-th covering the i-th part
// of the interval the word covers, each holding a leaf, a level-1 chunk, or
// a deeper index. (IPv4 chunk words do not use bit 62.)
const indexedFlag = uint64(1) << 62

// Index6Bits is how many address bits one IPv6 index consumes.
const Index6Bits = 8

// IndexDepth6 bounds the nesting of IPv6 indexes: parts must stay at least
// 2^Index6Bits high halves wide, so indexes consume at most bits 16..56 of
// the address: (64 - 16 - 8) / 8 = 5 levels.
const IndexDepth6 = (64 - Direct6Bits - Index6Bits) / Index6Bits

// indexThreshold6 is the number of level-1 ranges above which a direct
// entry's chunk is indexed: a binary search of more would take more than
// log2(64) = 6 steps.
const indexThreshold6 = 64

// countMask is the mask of a chunk word's count field (bits 32..61) after
// the shift.
const countMask = 1<<30 - 1

// maxChunkRanges is the largest number of ranges one chunk may hold (the
// count field has 30 bits; the BPF search runs at most Search6Steps halvings,
// enough for 2^30 ranges).
const maxChunkRanges = countMask

// Search4Steps bounds the binary search of an IPv4 chunk's part: a chunk
// covers one /18, so it holds at most 2^14 runs (at most one per address),
// and 14 halvings reduce any count to 1; three spare steps.
const Search4Steps = 17

// Search6Steps bounds the binary search of an IPv6 chunk (at most 2^30
// ranges, 30 halvings; two spare steps).
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
func chunkCount(r uint64) uint32 { return uint32(r>>32) & countMask }

// range4 encodes an IPv4 range word: the value, and the low 16 bits of the
// range's first and last addresses (the direct entry fixes the others).
func range4(first, last, value uint32) uint64 {
	return uint64(value)<<32 | uint64(last&0xffff)<<16 | uint64(first&0xffff)
}

// Lookup4Flat is the lookup bpf/lpm.h performs for IPv4 (xfw_lpm4_lookup),
// step for step, over the flat arrays: direct (IPv4.DirectEntries() words)
// and ranges (one word per range). It returns 0 when no prefix matches or
// when the arrays are inconsistent (an index beyond an array, as the BPF map
// lookup would fail).
func Lookup4Flat(direct, ranges []uint64, addr uint32) uint32 {
	d := direct[addr>>(32-Direct4Bits)]
	if !isChunk(d) {
		return uint32(d)
	}
	i := uint64(chunkBase(d)) + uint64(addr&(1<<part4Bits-1)>>(d>>shift4Pos&shift4Mask))
	if i >= uint64(len(ranges)) {
		return 0
	}
	e := ranges[i]
	n := uint32(e>>16) & 0xffff
	if n == 0 {
		return uint32(e >> 32)
	}
	base := chunkBase(d) + uint32(e)&0xffff
	low := addr & 0xffff
	lo := uint32(0)
	for step := 0; step < Search4Steps && n > 1; step++ {
		half := n / 2
		i := uint64(base) + uint64(lo) + uint64(half)
		if i >= uint64(len(ranges)) {
			return 0
		}
		if uint32(ranges[i])&0xffff <= low {
			lo += half
		}
		n -= half
	}
	i = uint64(base) + uint64(lo)
	if i >= uint64(len(ranges)) {
		return 0
	}
	if r := uint32(ranges[i]); r&0xffff <= low && low <= r>>16 {
		return uint32(ranges[i] >> 32)
	}
	// Before, between or after the part's runs: the index word's answer.
	return uint32(e >> 32)
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
	r := direct[hi>>(64-Direct6Bits)]
	if !isChunk(r) {
		return uint32(r)
	}
	shift := 64 - Direct6Bits
	for depth := 0; depth < IndexDepth6 && r&indexedFlag != 0; depth++ {
		shift -= Index6Bits
		i := 2*(uint64(chunkBase(r))+(hi>>shift)&(1<<Index6Bits-1)) + 1
		if i >= uint64(len(ranges)) {
			return 0
		}
		if r = ranges[i]; !isChunk(r) {
			return uint32(r)
		}
	}
	if r&indexedFlag != 0 {
		return 0 // deeper than IndexDepth6: corrupt
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
