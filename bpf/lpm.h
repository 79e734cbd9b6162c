/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lpm.h — longest-prefix match over xfw's DXR-class tables for large address
 * sets, built and patched in user space by internal/lpm (the package comment
 * there is the reference for the layout; Lookup4Flat and Lookup6Flat are
 * this file's lookups in Go, step for step).
 *
 * Conventions:
 *  - The tables are two BPF array maps of __u64 values (BPF_F_MMAPABLE, so
 *    user space fills them with one copy): "direct" (65536 entries, indexed
 *    by the top 16 bits of the address) and "ranges". The caller passes the
 *    map pointers (maps of the object, or inner maps of an ARRAY_OF_MAPS).
 *  - Addresses are host-order numbers: IPv4 one __u32, IPv6 the two 64-bit
 *    halves (hi, lo) of common.h.
 *  - A result word with bit 63 clear is a leaf: its low 32 bits are the
 *    value (0 = no prefix matches). With bit 63 set it is a chunk: bits 0..31
 *    the index of its first range, bits 32..62 its number of ranges (>= 2).
 *  - IPv4 range: one word, value << 32 | start address. IPv6 range: two
 *    words, start (high half in level-1 chunks, low half in level-2 chunks)
 *    then a result word (a leaf, or in level 1 a level-2 chunk).
 *  - A chunk's first range starts at the first address it covers; the answer
 *    for a key is the range with the largest start <= key, found by a binary
 *    search bounded by a compile-time number of halvings.
 *  - Each direct entry is read once (one 8-byte load): user space writes a
 *    new chunk before switching the entry, so a lookup sees the old chunk or
 *    the new one whole.
 *  - Comparisons in the searches are branch-free (the verifier explores one
 *    path per halving, not two).
 */
#ifndef XFW_LPM_H
#define XFW_LPM_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Bit 63 of a result word: a chunk, not a leaf. */
#define XFW_LPM_CHUNK (1ULL << 63)
/* Number of direct entries: one per value of the top 16 address bits. */
#define XFW_LPM_DIRECT_ENTRIES 65536
/* Halvings of an IPv4 search: a chunk covers one /16, at most 65536
 * ranges, and 16 halvings reduce any count to one (one spare). */
#define XFW_LPM4_STEPS 17
/* Halvings of an IPv6 search: at most 2^31 ranges (31 halvings, one spare). */
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
	__u32 key = addr >> 16, lo = 0, n, half, i;
	__u64 *w, d, ge;

	w = bpf_map_lookup_elem(direct, &key);
	if (!w)
		return 0;
	d = *(volatile __u64 *)w;
	if (!(d & XFW_LPM_CHUNK))
		return (__u32)d;
	n = (d >> 32) & 0x7fffffff;
	for (int step = 0; step < XFW_LPM4_STEPS; step++) {
		if (n <= 1)
			break;
		half = n >> 1;
		i = (__u32)d + lo + half;
		w = bpf_map_lookup_elem(ranges, &i);
		if (!w)
			return 0;
		/* start <= addr: the top bit of addr - start (both < 2^32) is
		 * clear. */
		ge = 1 - (((__u64)addr - (__u32)*w) >> 63);
		lo += half & (__u32)-ge;
		n -= half;
	}
	i = (__u32)d + lo;
	w = bpf_map_lookup_elem(ranges, &i);
	return w ? (__u32)(*w >> 32) : 0;
}

/* xfw_lpm6_search returns the result word of the range of chunk c (in
 * ranges, two words per range) holding key, or 0 (no match). */
static __always_inline __u64 xfw_lpm6_search(void *ranges, __u64 c, __u64 key)
{
	__u32 base = (__u32)c, lo = 0, n = (c >> 32) & 0x7fffffff, half, i;
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
	__u32 key = hi >> 48;
	__u64 *w, r;

	w = bpf_map_lookup_elem(direct, &key);
	if (!w)
		return 0;
	r = *(volatile __u64 *)w;
	if (!(r & XFW_LPM_CHUNK))
		return (__u32)r;
	r = xfw_lpm6_search(ranges, r, hi);
	if (!(r & XFW_LPM_CHUNK))
		return (__u32)r;
	r = xfw_lpm6_search(ranges, r, lo);
	/* Level-2 results are leaves; a chunk here is a corrupt table. */
	return (r & XFW_LPM_CHUNK) ? 0 : (__u32)r;
}

#endif /* XFW_LPM_H */
