/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lpm_bench.c — the programs of the LPM benchmark (bench/lpm): each XDP
 * program, run by BPF_PROG_TEST_RUN (never attached), looks up
 * XFW_BENCH_BATCH addresses taken in turn from a key array and adds the
 * results into a global, which user space compares with its own lookups.
 *
 * Conventions: as bpf/lpm.h; keys are host-order (IPv4 in key_lo, IPv6 as
 * key_hi/key_lo); key arrays hold XFW_BENCH_KEYS entries (a power of two),
 * the cursor wraps around them.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "../../../bpf/lpm.h"

char LICENSE[] SEC("license") = "GPL";

/* Lookups per program run: amortizes the test-run overhead per run. */
#define XFW_BENCH_BATCH 256
/* Entries of the key arrays (2^20). */
#define XFW_BENCH_KEYS (1 << 20)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_BENCH_KEYS);
	__uint(map_flags, BPF_F_MMAPABLE);
} key_hi SEC(".maps"), key_lo SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_LPM4_DIRECT_ENTRIES);
	__uint(map_flags, BPF_F_MMAPABLE);
} direct4 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_LPM6_DIRECT_ENTRIES);
	__uint(map_flags, BPF_F_MMAPABLE);
} direct6 SEC(".maps");

/* Sized by the loader to the table's capacity. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
} ranges4 SEC(".maps"), ranges6 SEC(".maps");

/* The product's form: the tables as inner maps of BPF_MAP_TYPE_ARRAY_OF_MAPS
 * (one outer slot per set). Two variants:
 *  - outer_*4: inner maps of exactly the template's size (the loader sets the
 *    template to the maps' sizes), so the verifier still inlines the array
 *    lookups;
 *  - outer_*4dyn: inner maps flagged BPF_F_INNER_MAP, which may differ in
 *    size from the template, at the price of a helper call per lookup (the
 *    verifier does not inline lookups into such maps). */
struct inner_u64_array {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
};
struct inner_u64_array_dyn {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct inner_u64_array);
} outer_direct4 SEC(".maps"), outer_ranges4 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct inner_u64_array_dyn);
} outer_direct4dyn SEC(".maps"), outer_ranges4dyn SEC(".maps");
/* The inner maps of the BPF_F_INNER_MAP variant (copies of direct4 and
 * ranges4). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);
} direct4dyn SEC(".maps"), ranges4dyn SEC(".maps");

struct lpm4_key {
	__u32 prefixlen;
	__u8 addr[4];
};
struct lpm6_key {
	__u32 prefixlen;
	__u8 addr[16];
};

/* The kernel's LPM tries and a hash (for /32-only sets), sized by the
 * loader. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lpm4_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
} trie4 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct lpm6_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
} trie6 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} hash4 SEC(".maps");

/* Next key index, and the sum of the results of every lookup. */
__u32 cursor;
__u64 sum;

enum bench_kind {
	BENCH_NULL4,
	BENCH_DXR4,
	BENCH_TRIE4,
	BENCH_HASH4,
	BENCH_INNER4,
	BENCH_INNERDYN4,
	BENCH_NULL6,
	BENCH_DXR6,
	BENCH_TRIE6,
};

/* one_lookup looks up key i of the arrays with the structure kind. */
static __always_inline __u32 one_lookup(__u32 i, int kind)
{
	__u64 *hp, *lp, hi = 0, lo;
	__u32 *v;

	lp = bpf_map_lookup_elem(&key_lo, &i);
	if (!lp)
		return 0;
	lo = *lp;
	if (kind >= BENCH_NULL6) {
		hp = bpf_map_lookup_elem(&key_hi, &i);
		if (!hp)
			return 0;
		hi = *hp;
	}
	switch (kind) {
	case BENCH_NULL4:
		return (__u32)lo;
	case BENCH_DXR4:
		return xfw_lpm4_lookup(&direct4, &ranges4, (__u32)lo);
	case BENCH_TRIE4: {
		struct lpm4_key k = { .prefixlen = 32 };
		__u32 a = bpf_htonl((__u32)lo);

		__builtin_memcpy(k.addr, &a, 4);
		v = bpf_map_lookup_elem(&trie4, &k);
		return v ? *v : 0;
	}
	case BENCH_INNER4:
	case BENCH_INNERDYN4: {
		__u32 slot = 0;
		void *d, *r;

		if (kind == BENCH_INNER4) {
			d = bpf_map_lookup_elem(&outer_direct4, &slot);
			r = bpf_map_lookup_elem(&outer_ranges4, &slot);
		} else {
			d = bpf_map_lookup_elem(&outer_direct4dyn, &slot);
			r = bpf_map_lookup_elem(&outer_ranges4dyn, &slot);
		}
		if (!d || !r)
			return 0;
		return xfw_lpm4_lookup(d, r, (__u32)lo);
	}
	case BENCH_HASH4: {
		__u32 k = (__u32)lo;

		v = bpf_map_lookup_elem(&hash4, &k);
		return v ? *v : 0;
	}
	case BENCH_NULL6:
		return (__u32)(hi ^ lo);
	case BENCH_DXR6:
		return xfw_lpm6_lookup(&direct6, &ranges6, hi, lo);
	case BENCH_TRIE6: {
		struct lpm6_key k = { .prefixlen = 128 };
		__u32 w[4] = { bpf_htonl(hi >> 32), bpf_htonl((__u32)hi),
			       bpf_htonl(lo >> 32), bpf_htonl((__u32)lo) };

		__builtin_memcpy(k.addr, w, 16);
		v = bpf_map_lookup_elem(&trie6, &k);
		return v ? *v : 0;
	}
	}
	return 0;
}

/* One bpf_loop callback per kind: the kind must be a constant for the
 * switch above to fold. */
#define BENCH_PROG(name, kind)                                                 \
	static long name##_step(__u32 j, void *ctx)                            \
	{                                                                      \
		__u64 *acc = ctx;                                              \
		*acc += one_lookup((cursor + j) & (XFW_BENCH_KEYS - 1), kind); \
		return 0;                                                      \
	}                                                                      \
	SEC("xdp") int name(struct xdp_md *ctx)                                \
	{                                                                      \
		__u64 acc = 0;                                                 \
		bpf_loop(XFW_BENCH_BATCH, name##_step, &acc, 0);               \
		cursor += XFW_BENCH_BATCH;                                     \
		sum += acc;                                                    \
		return XDP_PASS;                                               \
	}

BENCH_PROG(bench_null4, BENCH_NULL4)
BENCH_PROG(bench_dxr4, BENCH_DXR4)
BENCH_PROG(bench_trie4, BENCH_TRIE4)
BENCH_PROG(bench_hash4, BENCH_HASH4)
BENCH_PROG(bench_inner4, BENCH_INNER4)
BENCH_PROG(bench_innerdyn4, BENCH_INNERDYN4)
BENCH_PROG(bench_null6, BENCH_NULL6)
BENCH_PROG(bench_dxr6, BENCH_DXR6)
BENCH_PROG(bench_trie6, BENCH_TRIE6)
