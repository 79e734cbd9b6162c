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
// Both families share the direct table and the encoding of a "result" word:
//
//	result word, bit 63 clear: a leaf; bits 0..31 are the value (0 = no match)
//	result word, bit 63 set:   a chunk; bits 0..31 are the index of its first
//	                           range, bits 32..62 the number of ranges (>= 2)
//
// Direct: 65536 result words, entry i covering the addresses whose top 16
// bits are i (IPv4 a.b.0.0/16, IPv6 xxxx::/16).
//
// IPv4 ranges: one word per range, value << 32 | start, start being the full
// 32-bit address where the range begins. A chunk lists the ranges of one /16
// in increasing start order; its first range starts at the /16's first
// address; a range ends where the next begins (the last at the /16's end).
// The answer for address a is the value of the last range with start <= a.
//
// IPv6 ranges: two words per range, (start, result); range index i is words
// 2i and 2i+1. A direct entry's chunk is a level-1 chunk: starts are the high
// 64 bits of the address (the /16 fixed by the direct entry). Its results are
// leaves, or chunks of level-2 ranges, whose starts are the low 64 bits of
// the address, covering exactly one value of the high 64 bits (the prefixes
// longer than /64 below it). A level-2 chunk's results are leaves.
//
// Each direct entry owns one block of the range table: its level-1 chunk
// followed by its level-2 chunks (IPv6), or its chunk (IPv4). A direct entry
// whose /16 has a single answer is a leaf and owns no block.
//
// # Updates
//
// Insert and Delete rebuild only the blocks of the direct entries the prefix
// touches (one for a prefix of /16 or longer, 2^(16-len) otherwise), write each
// new block into free space of the range table, and return a Patch: the
// range-table regions to write first, then the direct entries to write. A
// reader (the BPF program) loads the direct entry once, with one aligned
// 8-byte load, and then reads only the block it points to; the new block is
// complete in the map before the direct entry is switched by one aligned
// 8-byte store, so a reader sees the old block or the new one, never a mix.
// Old blocks are not reused until Reclaim is called (after an RCU grace
// period: readers of the old block are BPF programs that began before the
// switch). When the range table has no room, the update compacts: it rebuilds
// every block and returns a Patch with Full set, which the caller applies by
// filling a new map and swapping it in (an ARRAY_OF_MAPS slot).
package lpm
