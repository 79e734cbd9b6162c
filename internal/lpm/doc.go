// Package lpm builds and patches xfw's longest-prefix-match tables for large
// address sets: a DXR-class structure (a direct table indexed by the top 16
// bits of the address, pointing into a table of sorted ranges searched by a
// bounded binary search), laid out as flat arrays of 64-bit words ready to be
// copied into BPF array maps and searched by bpf/lpm.h.
//
// # Semantics
//
// A Table holds (prefix, value) pairs of one family; Lookup returns the value
// of the longest prefix containing the address, or 0 when none does. Values
// are non-zero uint32s chosen by the caller (for example an entry index + 1).
// Prefixes may overlap and nest, from /0 to /32 (IPv4) or /128 (IPv6).
//
// # Layout (host byte order, uint64 words)
//
// Both families share the encoding of a "result" word:
//
//	bit 63 clear: a leaf; bits 0..31 are the value (0 = no match)
//	bit 63 set:   a chunk; bits 0..31 are the index of its first range;
//	              IPv6: bits 32..61 the number of ranges (>= 2), bit 62 set
//	              when the chunk is an index; IPv4: bits 32..47 the block's
//	              size in words, bits 48..51 the part shift
//
// Direct: one result word per value of the address's top bits: 2^18 entries
// for IPv4 (entry i covers the /18 whose top bits are i), 2^16 for IPv6
// (xxxx::/16). Direct4Bits and Direct6Bits.
//
// IPv4 chunks: an index of 2^k words (k = 14 - the part shift), then the
// chunk's runs. The runs are the maximal runs of addresses of the /18 whose
// answer differs from the chunk's default (the answer of the longest prefix
// of /18 or shorter covering it), one word each, value << 32 | last << 16 |
// first, first and last being the low 16 bits of the run's first and last
// addresses; they are disjoint and in increasing order. Index word i covers
// the i-th of the 2^k equal parts of the /18 (address a selects word
// (a & (2^14 - 1)) >> shift): value << 32 | count << 16 | rel. With count
// 0, value answers for the whole part. Otherwise the runs overlapping the
// part are the count runs from range index (chunk + rel); the answer is the
// value of the last of them with first <= a's low 16 bits if a lies within
// it (<= last), else the index word's value: the chunk's default. A chunk of
// up to 7 runs has a one-word index (k = 0): the word and the runs fill at
// most a cache line, and a block of at most 8 words never straddles a
// 64-byte line. A larger chunk's index starts at about one word per
// ranges4PerPart runs and doubles while that does not make more parts need
// a search, up to maxIndex4PerRun words per run: most lookups read the
// index word and at most one cache line of runs, many only the index word.
// Dropping the runs that answer the default halves a host set's runs; the
// index words carry the default, so no lookup reads more than the direct
// entry, one index word and its part's runs.
//
// IPv6 ranges: two words per range, (start, result); range index i is words
// 2i and 2i+1. A direct entry's chunk is a level-1 chunk: starts are the high
// 64 bits of the address; a range ends where the next begins (the last at
// the /16's end); the answer is the result of the last range with start <=
// the high half. Its results are leaves, or chunks of level-2 ranges, whose
// starts are the low 64 bits of the address, covering exactly one value of
// the high half (the prefixes longer than /64 below it). A level-2 chunk's
// results are leaves. Where a level-1 chunk would hold more than 64 ranges,
// an index replaces it (bit 62 of the word designating it): 256 ranges,
// range i covering the i-th part of the interval (the next 8 address bits),
// found by indexing, each holding a leaf, a level-1 chunk of the ranges
// within that part, or a deeper index (at most 5 levels, down to parts of
// 2^8 high halves).
//
// Each direct entry owns one block of the range table: its chunk (IPv4), or
// its level-2 chunks followed by its level-1 structure (IPv6). A direct entry
// whose addresses all have a single answer is a leaf and owns no block.
//
// # Updates
//
// Insert and Delete rebuild only the blocks of the direct entries the prefix
// touches (one for a prefix longer than the direct index, 2^(bits-len)
// otherwise, bits being Direct4Bits or Direct6Bits), write each
// new block into free space of the range table, and return a Patch: the
// range-table regions to write first, then the direct entries to write. A
// reader (the BPF program) loads the direct entry once, with one aligned
// 8-byte load, and then reads only the block it points to; the new block is
// complete in the map before the direct entry is switched by one aligned
// 8-byte store, so a reader sees the old block or the new one, never a mix.
// (A prefix shorter than the direct index changes several direct entries,
// each switched atomically but not all at once: in between, some of its
// addresses answer the old way, as if the update were a sequence of smaller
// ones. Swap maps when that matters.) Old blocks are not reused until Reclaim is called (after an RCU grace
// period: readers of the old block are BPF programs that began before the
// switch). When the range table has no room, the update compacts: it rebuilds
// every block and returns a Patch with Full set, which the caller applies by
// filling a new map and swapping it in (an ARRAY_OF_MAPS slot).
//
// # Imports
//
// lpm imports nothing of xfw's. The CLI (internal/cli) builds the tables of
// large sets with it; the LPM benchmark (bench/lpm) measures it.
package lpm
