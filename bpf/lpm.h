/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lpm.h — longest-prefix match over xfw's DXR-class tables for large address
 * sets, built and patched in user space by internal/lpm (the package comment
 * there is the reference for the layout; Lookup4Flat and Lookup6Flat are
 * this file's lookups in Go, step for step).
 *
 * Conventions:
 *  - The tables are two BPF array maps of __u64 values (BPF_F_MMAPABLE, so
 *    user space fills them with one copy): "direct" (indexed by the top
 *    XFW_LPM4_DIRECT_BITS / XFW_LPM6_DIRECT_BITS bits of the address) and
 *    "ranges". The caller passes the map pointers (maps of the object, or
 *    inner maps of an ARRAY_OF_MAPS).
 *  - Addresses are host-order numbers: IPv4 one __u32, IPv6 the two 64-bit
 *    halves (hi, lo) of common.h.
 *  - A result word with bit 63 clear is a leaf: its low 32 bits are the
 *    value (0 = no prefix matches). With bit 63 set it is a chunk: bits 0..31
 *    the index of its first range; IPv6: bits 32..61 its number of ranges
 *    (>= 2); IPv4: bits 48..51 its part shift (bits 32..47, the block's
 *    size, are not read).
 *  - IPv4 chunk (one /18): an index of 2^(XFW_LPM4_PART_BITS - shift)
 *    words, then the runs of addresses whose answer differs from the
 *    chunk's default, each one word, value << 32 | last << 16 | first (the
 *    low 16 bits of its first and last addresses), disjoint and sorted.
 *    Address a reads index word (a & (2^XFW_LPM4_PART_BITS - 1)) >> shift:
 *    value << 32 | count << 16 | rel. With count 0 the value is the answer;
 *    else the answer is that of the last of the count runs from range index
 *    chunk + rel with first <= key, if key lies within it, else the value
 *    (the chunk's default).
 *  - IPv6 range: two words, start (high half in level-1 chunks, low half in
 *    level-2 chunks) then a result word (a leaf, or in level 1 a level-2
 *    chunk); a range ends where the next begins, and the answer is the
 *    range with the largest start <= key. Where a level-1 chunk would be
 *    long, an index replaces it: range i covers the i-th part of the
 *    interval, selected by the next XFW_LPM6_INDEX_BITS address bits.
 *  - Binary searches are bounded by a compile-time number of halvings.
 *  - Each direct entry is read once (one 8-byte load): user space writes a
 *    new chunk before switching the entry, so a lookup sees the old chunk or
 *    the new one whole.
 *  - Comparisons in the searches are branch-free (the verifier explores one
 *    path per halving, not two).
 *
 * Includes: no other xfw header.
 */
#ifndef XFW_LPM_H
#define XFW_LPM_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Bit 63 of a result word: a chunk, not a leaf. */
#define XFW_LPM_CHUNK (1ULL << 63)
/* An IPv4 chunk word's part shift: bits XFW_LPM4_SHIFT_POS.. (mask
 * XFW_LPM4_SHIFT_MASK after the shift). An index selects by the address bits
 * below the direct index: XFW_LPM4_PART_BITS = 32 - XFW_LPM4_DIRECT_BITS. */
#define XFW_LPM4_SHIFT_POS 48
#define XFW_LPM4_SHIFT_MASK 0xf
#define XFW_LPM4_PART_BITS 14
/* An IPv4 index word's run count and relative start: 16 bits each. */
#define XFW_LPM4_FIELD_MASK 0xffff
/* Bit 62 of an IPv6 level-1 chunk word (in a direct entry or an index): the
 * chunk is an index of 2^XFW_LPM6_INDEX_BITS ranges, range i covering the
 * i-th part of the word's interval, each a leaf, a level-1 chunk or a deeper
 * index; at most XFW_LPM6_INDEX_DEPTH levels (parts of at least 2^8 high
 * halves: bits 16..56 of the address, (64 - 16 - 8) / 8 = 5 levels). */
#define XFW_LPM6_INDEXED (1ULL << 62)
#define XFW_LPM6_INDEX_BITS 8
#define XFW_LPM6_INDEX_DEPTH 5
/* Mask of a chunk word's range count, bits 32..61 (after >> 32). */
#define XFW_LPM_COUNT_MASK 0x3fffffff
/* Address bits indexing the direct tables (internal/lpm Direct4Bits,
 * Direct6Bits), and their sizes. */
#define XFW_LPM4_DIRECT_BITS 18
#define XFW_LPM6_DIRECT_BITS 16
#define XFW_LPM4_DIRECT_ENTRIES (1 << XFW_LPM4_DIRECT_BITS)
#define XFW_LPM6_DIRECT_ENTRIES (1 << XFW_LPM6_DIRECT_BITS)
/* Halvings of an IPv4 search: a chunk covers one /18, at most 2^14 runs,
 * and 14 halvings reduce any count to one (three spare). */
#define XFW_LPM4_STEPS 17
/* Halvings of an IPv6 search: at most 2^30 ranges (30 halvings, two
 * spare). */
#define XFW_LPM6_STEPS 32

/* xfw_lpm_lt returns 1 when a < b (unsigned 64-bit), without a branch: the
 * borrow out of a - b. */
static __always_inline __u64 xfw_lpm_lt(__u64 a, __u64 b)
{
	return ((~a & b) | (~(a ^ b) & (a - b))) >> 63;
}

/* xfw_lpm4_lookup returns the value of the longest prefix of the IPv4 table
 * (direct, ranges) containing addr, or 0 when none does (or when an index
 * lies beyond a map, which only a corrupt table produces). */
static __always_inline __u32 xfw_lpm4_lookup(void *direct, void *ranges, __u32 addr)
{
	__u32 key = addr >> (32 - XFW_LPM4_DIRECT_BITS), low = addr & 0xffff;
	__u32 lo = 0, n, half, i, base;
	__u64 *w, d, e, r, ge;

	w = bpf_map_lookup_elem(direct, &key);
	if (!w)
		return 0;
	d = *(volatile __u64 *)w;
	if (!(d & XFW_LPM_CHUNK))
		return (__u32)d;
	/* The index word of the address's part. */
	i = (__u32)d + ((addr & ((1 << XFW_LPM4_PART_BITS) - 1)) >>
			((d >> XFW_LPM4_SHIFT_POS) & XFW_LPM4_SHIFT_MASK));
	w = bpf_map_lookup_elem(ranges, &i);
	if (!w)
		return 0;
	e = *w;
	n = (e >> 16) & XFW_LPM4_FIELD_MASK;
	if (!n)
		return e >> 32;
	base = (__u32)d + (e & XFW_LPM4_FIELD_MASK);
	for (int step = 0; step < XFW_LPM4_STEPS; step++) {
		if (n <= 1)
			break;
		half = n >> 1;
		i = base + lo + half;
		w = bpf_map_lookup_elem(ranges, &i);
		if (!w)
			return 0;
		/* first <= low: the top bit of low - first (both < 2^16) is
		 * clear. */
		ge = 1 - (((__u64)low - (*w & 0xffff)) >> 63);
		lo += half & (__u32)-ge;
		n -= half;
	}
	i = base + lo;
	w = bpf_map_lookup_elem(ranges, &i);
	if (!w)
		return 0;
	r = *w;
	if ((r & 0xffff) <= low && low <= ((r >> 16) & 0xffff))
		return r >> 32;
	/* Before, between or after the part's runs: the index word's value. */
	return e >> 32;
}

/* xfw_lpm6_search returns the result word of the range of chunk c (in
 * ranges, two words per range) holding key, or 0 (no match). */
static __always_inline __u64 xfw_lpm6_search(void *ranges, __u64 c, __u64 key)
{
	__u32 base = (__u32)c, lo = 0, n = (c >> 32) & XFW_LPM_COUNT_MASK, half, i;
	__u64 *w, ge;

	for (int step = 0; step < XFW_LPM6_STEPS; step++) {
		if (n <= 1)
			break;
		half = n >> 1;
		i = 2 * (base + lo + half);
		w = bpf_map_lookup_elem(ranges, &i);
		if (!w)
			return 0;
		ge = 1 - xfw_lpm_lt(key, *w);
		lo += half & (__u32)-ge;
		n -= half;
	}
	i = 2 * (base + lo) + 1;
	w = bpf_map_lookup_elem(ranges, &i);
	return w ? *w : 0;
}

/* xfw_lpm6_lookup returns the value of the longest prefix of the IPv6 table
 * (direct, ranges) containing the address (hi, lo), or 0 when none does. */
static __always_inline __u32 xfw_lpm6_lookup(void *direct, void *ranges, __u64 hi, __u64 lo)
{
	__u32 key = hi >> (64 - XFW_LPM6_DIRECT_BITS), shift;
	__u64 *w, r;

	w = bpf_map_lookup_elem(direct, &key);
	if (!w)
		return 0;
	r = *(volatile __u64 *)w;
	if (!(r & XFW_LPM_CHUNK))
		return (__u32)r;
	shift = 64 - XFW_LPM6_DIRECT_BITS;
	for (int depth = 0; depth < XFW_LPM6_INDEX_DEPTH; depth++) {
		if (!(r & XFW_LPM6_INDEXED))
			break;
		shift -= XFW_LPM6_INDEX_BITS;
		key = 2 * ((__u32)r + ((hi >> shift) & ((1 << XFW_LPM6_INDEX_BITS) - 1))) + 1;
		w = bpf_map_lookup_elem(ranges, &key);
		if (!w)
			return 0;
		r = *w;
		if (!(r & XFW_LPM_CHUNK))
			return (__u32)r;
	}
	if (r & XFW_LPM6_INDEXED)
		return 0; /* deeper than XFW_LPM6_INDEX_DEPTH: a corrupt table */
	r = xfw_lpm6_search(ranges, r, hi);
	if (!(r & XFW_LPM_CHUNK))
		return (__u32)r;
	r = xfw_lpm6_search(ranges, r, lo);
	/* Level-2 results are leaves; a chunk here is a corrupt table. */
	return (r & XFW_LPM_CHUNK) ? 0 : (__u32)r;
}

#endif /* XFW_LPM_H */
