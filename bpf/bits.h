/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bits.h — branch-free bit tricks on 64-bit words, for the classifier's
 * bit vectors (classify.h) and the set lookups' prefix-length walk
 * (set_lookup.h). BPF has no count-zeros instruction, and a branchy loop
 * multiplies the paths the verifier explores.
 *
 * Includes: <linux/types.h> only. Owns the read-only table xfw_debruijn64
 * (in the object's .rodata).
 */
#ifndef XFW_BITS_H
#define XFW_BITS_H

#include <linux/types.h>

/* De Bruijn table for xfw_ctz64 (magic 0x03f79d71b4ca8b09): a branch-free
 * count of trailing zeros, since BPF has no ctz instruction and a branchy
 * one multiplies the paths the verifier explores. */
static const volatile __u8 xfw_debruijn64[64] = {
	0, 1, 56, 2, 57, 49, 28, 3, 61, 58, 42, 50, 38, 29, 17, 4,
	62, 47, 59, 36, 45, 43, 51, 22, 53, 39, 33, 30, 24, 18, 12, 5,
	63, 55, 48, 27, 60, 41, 37, 16, 46, 35, 44, 21, 52, 32, 23, 11,
	54, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6,
};

/* xfw_ctz64 counts trailing zeros of a non-zero word. */
static __always_inline __u32 xfw_ctz64(__u64 x)
{
	return xfw_debruijn64[((x & -x) * 0x03f79d71b4ca8b09ULL) >> 58];
}

/* xfw_msb64 returns the index of the highest set bit of a non-zero word
 * (branch-free: the bits below it are smeared, the top one isolated). */
static __always_inline __u32 xfw_msb64(__u64 x)
{
	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	x |= x >> 8;
	x |= x >> 16;
	x |= x >> 32;
	return xfw_ctz64(x ^ (x >> 1));
}

/* xfw_mask64 returns the mask of the first n (0-64) bits of a word. */
static __always_inline __u64 xfw_mask64(__u32 n)
{
	return n == 0 ? 0 : ~0ULL << (64 - (n & 63 ? n & 63 : 64));
}

#endif /* XFW_BITS_H */
