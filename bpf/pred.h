/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pred.h — predicates: the string (xt_string), u32 (xt_u32) and time
 * (xt_time) matches, asked by the walk's probes of kind XFW_PROBE_PRED
 * (probe.h; internal/compiler/pred.go).
 *
 * A generation's predicates (struct xfw_pred, the slot's xfw_o_pred) are
 * evaluated once per packet it classifies, at the hook, before the walk
 * (xfw_preds_xdp, xfw_preds_tc): the hook's frame is the shallowest, and
 * the searches need bpf_loop callbacks the walk's depth has no stack for.
 * The answers (inversion applied) are the bits of xfw_pktbytes.bits, which
 * the probe reads (xfw_pred_bit). Only generations with predicates
 * (xfw_family_cfg.npreds) pay for them.
 *
 * The packet: what the kernel's skb holds at the netfilter hook, from the
 * network header to the end of the IP packet (IPv4 total length, IPv6
 * header and payload length; link-layer padding is not part of it), copied
 * into this CPU's xfw_pktbytes (a plain array indexed by CPU and hook: a
 * per-CPU map's values cannot be 64 KiB) with bpf_xdp_load_bytes or
 * bpf_skb_load_bytes, which read non-linear packets too. At most
 * XFW_PKTBYTES_MAX bytes: a longer packet (BIG TCP's GSO packets beyond
 * 64 KiB) is seen up to there.
 *
 * string: a Boyer-Moore-Horspool search of the pattern in [from, min(to,
 * len)) (skb_find_text: the whole match within the window), comparing with
 * the kernel's toupper (Latin-1, lib/ctype.c) under --icase; the pattern
 * (folded), the folding table and the shift table by raw byte come from
 * the control plane.
 * Linear data: bm and kmp give the same answer, and so does xfw.
 * u32: xt_u32's u32_match_it with its bounds checks (out of the packet: no
 * match); shifts of 32 or more shift by the count modulo 32, as x86 does.
 * time: xt_time's time_mt with the wall clock as CLOCK_TAI minus the TAI
 * offset the control plane measured, and the kernel's timezone (sys_tz)
 * as the control plane read it, both when the generation was written.
 *
 * Includes: common.h, xfw_structs.h, classify_maps.h, generation.h,
 * parse.h, xfw_maps.h, pred_structs.h.
 */
#ifndef XFW_PRED_H
#define XFW_PRED_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_maps.h"
#include "generation.h"
#include "parse.h"
#include "xfw_maps.h"
#include "pred_structs.h"

XFW_INNER_ARRAY(xfw_pred_m, struct xfw_pred);
/* The generation's predicates (struct xfw_pred). */
XFW_OUTER(xfw_o_pred, xfw_pred_m);

/* The packet's bytes and the predicates' answers, element cpu * 2 + hook
 * (XFW_SCRATCH_XDP, XFW_SCRATCH_TC); the loader sizes it to the possible
 * CPUs. */
struct xfw_pktbytes {
	__u64 bits;  /* predicate k answered true: bit k */
	__u32 len;   /* bytes in data */
	__u32 pad;
	/* 4 more: a u32 read at a masked offset stays inside. */
	__u8 data[XFW_PKTBYTES_MAX + 4];
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_pktbytes);
	__uint(max_entries, 2); /* 2 * possible CPUs, set by the loader */
} xfw_pktbytes SEC(".maps");

/* xfw_pktbytes_key is this CPU's element of xfw_pktbytes for hook. */
static __always_inline __u32 xfw_pktbytes_key(__u32 hook)
{
	return bpf_get_smp_processor_id() * 2 + (hook & 1);
}

/* xfw_pred_bit answers probe argument k: predicate k's bit for the packet
 * in hand of hook. */
static __always_inline int xfw_pred_bit(__u32 hook, __u32 k)
{
	__u32 key = xfw_pktbytes_key(hook);
	struct xfw_pktbytes *b = bpf_map_lookup_elem(&xfw_pktbytes, &key);

	if (!b)
		return 0;
	return (b->bits >> (k & (XFW_PRED_MAX - 1))) & 1;
}

/* Search state of one string predicate (bpf_loop context). */
struct xfw_search {
	__u32 key;   /* xfw_pktbytes element */
	__u32 slot;
	__u32 k;     /* predicate */
	__u32 i;     /* text index under the pattern's last byte */
	__u32 end;   /* window end */
	__u32 found;
};

/* One comparison of the pattern with the text (bpf_loop context, on the
 * search step's stack): the pattern's last byte under text index i. */
struct xfw_compare {
	struct xfw_pktbytes *b;
	struct xfw_pred *pr;
	__u32 i;
	__u32 n;     /* pattern length */
	__u32 match; /* every byte matched */
	__u32 pad;
};

/* xfw_compare_step compares the pattern's byte n - 1 - j with the text's
 * byte i - j. A bpf_loop callback: verified once, not once for each of
 * the pattern's 128 bytes (~7,500 instructions per program). */
static long xfw_compare_step(__u32 j, struct xfw_compare *c)
{
	struct xfw_pktbytes *b = c->b;
	struct xfw_pred *pr = c->pr;
	__u32 n = c->n;

	if (!b || !pr)
		return 1;
	if (j >= n) {
		c->match = 1;
		return 1;
	}
	if (pr->fold[b->data[(c->i - j) & XFW_PKTBYTES_MASK]] !=
	    pr->pattern[(n - 1 - j) & (XFW_PRED_PATMAX - 1)])
		return 1;
	return 0;
}

/* xfw_search_step tries the pattern with its last byte at s->i, then
 * shifts by the table's entry for the text byte there. */
static long xfw_search_step(__u32 step, void *ctx)
{
	struct xfw_search *s = ctx;
	struct xfw_pktbytes *b = bpf_map_lookup_elem(&xfw_pktbytes, &s->key);
	void *m = xfw_inner(&xfw_o_pred, s->slot);
	struct xfw_compare c = {};
	struct xfw_pred *pr;
	__u32 i = s->i;

	if (!b || !m || i >= s->end)
		return 1;
	pr = bpf_map_lookup_elem(m, &s->k);
	if (!pr)
		return 1;
	c.b = b;
	c.pr = pr;
	c.i = i;
	c.n = pr->n;
	/* j runs to the pattern's length, XFW_PRED_PATMAX at most. */
	bpf_loop(XFW_PRED_PATMAX + 1, xfw_compare_step, &c, 0);
	if (c.match) {
		s->found = 1;
		return 1;
	}
	s->i = i + pr->shift[b->data[i & XFW_PKTBYTES_MASK]];
	return 0;
}

/* xfw_pred_string is skb_find_text over [from, min(to, len)). */
static __always_inline int xfw_pred_string(struct xfw_pred *pr, struct xfw_pktbytes *b,
					   __u32 key, __u32 slot, __u32 k)
{
	struct xfw_search s = {.key = key, .slot = slot, .k = k};
	__u32 end = pr->to < b->len ? pr->to : b->len;

	if (pr->n == 0 || pr->n > XFW_PRED_PATMAX || end < pr->from || end - pr->from < pr->n)
		return 0;
	s.i = pr->from + pr->n - 1;
	s.end = end;
	/* Every step moves on by at least one byte. */
	bpf_loop(end - s.i, xfw_search_step, &s, 0);
	return s.found;
}

/* xfw_be32_at reads the big-endian word at off (off + 4 <= len checked). */
static __always_inline __u32 xfw_be32_at(struct xfw_pktbytes *b, __u32 off)
{
	off &= XFW_PKTBYTES_MASK;
	return (__u32)b->data[off] << 24 | (__u32)b->data[off + 1] << 16 |
	       (__u32)b->data[off + 2] << 8 | b->data[off + 3];
}

/* State of one u32 predicate (bpf_loop context). */
struct xfw_u32run {
	__u32 key, slot, k;
	__u32 ok; /* every test so far held */
};

/* xfw_u32_test evaluates test t of u32 predicate r->k: 0 stops the
 * tests (done, or this one failed: r->ok). */
static long xfw_u32_step(__u32 t, void *ctx)
{
	struct xfw_u32run *r = ctx;
	struct xfw_pktbytes *b = bpf_map_lookup_elem(&xfw_pktbytes, &r->key);
	void *m = xfw_inner(&xfw_o_pred, r->slot);
	struct xfw_u32_test *ct;
	struct xfw_pred *pr;
	__u32 len, pos, val, at = 0, num, i;

	r->ok = 0;
	if (!b || !m || t >= XFW_U32_MAX)
		return 1;
	pr = bpf_map_lookup_elem(m, &r->k);
	if (!pr)
		return 1;
	/* Hidden from the compiler, which would drop the mask after the
	 * check above; the verifier needs it. */
	asm volatile("" : "+r"(t));
	ct = &pr->tests[t & (XFW_U32_SLOTS - 1)];
	len = b->len;
	pos = ct->num[0];
	if (len < 4 || pos > len - 4)
		return 1;
	val = xfw_be32_at(b, pos);
	for (i = 1; i < XFW_U32_MAX; i++) {
		if (i >= ct->nnums)
			break;
		num = ct->num[i];
		switch (ct->op[i]) {
		case XFW_U32_AND:
			val &= num;
			break;
		case XFW_U32_LSH:
			val <<= num & 31;
			break;
		case XFW_U32_RSH:
			val >>= num & 31;
			break;
		case XFW_U32_AT:
			if (at + val < at)
				return 1;
			at += val;
			pos = num;
			if (at + 4 < at || len < at + 4 || pos > len - at - 4)
				return 1;
			val = xfw_be32_at(b, at + pos);
			break;
		}
	}
	for (i = 0; i < XFW_U32_MAX; i++) {
		if (i >= ct->nvalues)
			return 1;
		if (ct->min[i] <= val && val <= ct->max[i]) {
			r->ok = 1;
			return 0;
		}
	}
	return 1;
}

/* xfw_pred_u32 is u32_match_it: every test holds. */
static __always_inline int xfw_pred_u32(struct xfw_pred *pr, __u32 key, __u32 slot, __u32 k)
{
	struct xfw_u32run r = {.key = key, .slot = slot, .k = k, .ok = 1};
	__u32 n = pr->n;

	if (n == 0)
		return 1;
	if (n > XFW_U32_MAX)
		return 0;
	bpf_loop(n, xfw_u32_step, &r, 0);
	return r.ok;
}

/* xfw_monthday is the day of the month of day dse since the epoch (the
 * civil calendar; the kernel's table agrees up to 2039). */
static __always_inline __u32 xfw_monthday(__u64 dse)
{
	/* Days from 0000-03-01, 400-year eras of 146097 days. */
	__u64 z = dse + 719468, era = z / 146097, doe = z - era * 146097;
	__u64 yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	__u64 doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	__u64 mp = (5 * doy + 2) / 153;

	return doy - (153 * mp + 2) / 5 + 1;
}

/* xfw_pred_time is time_mt at the wall clock. */
static __always_inline int xfw_pred_time(struct xfw_pred *pr)
{
	__s64 stamp = ((__s64)bpf_ktime_get_tai_ns() - pr->tai_off);
	__u32 packet_time;
	__u64 dse;

	if (stamp < 0)
		return 0;
	stamp = (__u64)stamp / XFW_NS_PER_SEC;
	if (pr->flags & XFW_PREDF_KERNELTZ)
		stamp -= pr->tz_west;
	if (stamp < (__s64)pr->date_start || stamp > (__s64)pr->date_stop)
		return 0;
	packet_time = (__u64)stamp % XFW_SECONDS_PER_DAY;
	if (pr->daytime_start < pr->daytime_stop) {
		if (packet_time < pr->daytime_start || packet_time > pr->daytime_stop)
			return 0;
	} else {
		if (packet_time < pr->daytime_start && packet_time > pr->daytime_stop)
			return 0;
		if ((pr->flags & XFW_PREDF_CONTIGUOUS) && packet_time <= pr->daytime_stop)
			stamp -= XFW_SECONDS_PER_DAY;
	}
	if (stamp < 0)
		return 0;
	dse = (__u64)stamp / XFW_SECONDS_PER_DAY;
	/* 1970-01-01 was a Thursday (4); Sunday is 7. */
	if (!(pr->weekdays & (1u << ((dse + 3) % 7 + 1))))
		return 0;
	if (pr->monthdays != 0xFFFFFFFE && !(pr->monthdays & (1u << (xfw_monthday(dse) & 31))))
		return 0;
	return 1;
}

/* xfw_pred_one answers predicate k of slot for the bytes in element key of
 * xfw_pktbytes. A global function: verified once. */
__attribute__((noinline)) int xfw_pred_one(__u32 key, __u32 slot, __u32 k)
{
	void *m = xfw_inner(&xfw_o_pred, slot);
	struct xfw_pktbytes *b = bpf_map_lookup_elem(&xfw_pktbytes, &key);
	struct xfw_pred *pr;
	int ans;

	if (!m || !b)
		return 0;
	pr = bpf_map_lookup_elem(m, &k);
	if (!pr)
		return 0;
	switch (pr->kind) {
	case XFW_PRED_STRING:
		ans = xfw_pred_string(pr, b, key, slot, k);
		break;
	case XFW_PRED_U32:
		ans = xfw_pred_u32(pr, key, slot, k);
		break;
	case XFW_PRED_TIME:
		ans = xfw_pred_time(pr);
		break;
	default:
		return 0;
	}
	return ans ^ ((pr->flags & XFW_PREDF_INVERT) ? 1 : 0);
}

/* xfw_preds_eval answers the n predicates of slot into element key's bits.
 * A global function: verified once. */
__attribute__((noinline)) int xfw_preds_eval(__u32 key, __u32 slot, __u32 n)
{
	struct xfw_pktbytes *b;
	__u64 bits = 0;
	__u32 k;

	for (k = 0; k < XFW_PRED_MAX; k++) {
		if (k >= n)
			break;
		if (xfw_pred_one(key, slot, k))
			bits |= 1ULL << k;
	}
	b = bpf_map_lookup_elem(&xfw_pktbytes, &key);
	if (b)
		b->bits = bits;
	return 0;
}

/* xfw_pktbytes_len is the length of the network packet p describes. */
static __always_inline __u32 xfw_pktbytes_len(struct xfw_pkt *p)
{
	__u32 len = p->l4_end - p->l3_off;

	return len > XFW_PKTBYTES_MAX ? XFW_PKTBYTES_MAX : len;
}

/* XFW_PKTBYTES_COPY copies len (at most XFW_PKTBYTES_MAX) bytes at off
 * of the packet into b->data with LOAD (bpf_xdp_load_bytes or
 * bpf_skb_load_bytes): whole chunks, then the rest; b->len is what was
 * copied. */
#define XFW_PKTBYTES_COPY(LOAD, ctx, b, off, len)                                  \
	do {                                                                       \
		__u32 _i, _full = (len) / XFW_PKTBYTES_CHUNK;                      \
		__u32 _o = (len) & (XFW_PKTBYTES_MASK & ~(XFW_PKTBYTES_CHUNK - 1)); \
		__u32 _rest = (len) & (XFW_PKTBYTES_CHUNK - 1);                    \
		(b)->len = 0;                                                      \
		for (_i = 0; _i < XFW_PKTBYTES_MAX / XFW_PKTBYTES_CHUNK; _i++) {   \
			if (_i >= _full)                                           \
				break;                                             \
			if (LOAD(ctx, (off) + _i * XFW_PKTBYTES_CHUNK,             \
				 &(b)->data[_i * XFW_PKTBYTES_CHUNK],              \
				 XFW_PKTBYTES_CHUNK) < 0)                          \
				return 0;                                          \
			(b)->len = (_i + 1) * XFW_PKTBYTES_CHUNK;                  \
		}                                                                  \
		if (_rest && _full < XFW_PKTBYTES_MAX / XFW_PKTBYTES_CHUNK &&      \
		    LOAD(ctx, (off) + _o, &(b)->data[_o], _rest) == 0)             \
			(b)->len = _o + _rest;                                     \
	} while (0)

/* xfw_pktbytes_xdp copies the network packet of ctx (p) into element key.
 * A global function: verified once. */
__attribute__((noinline)) int xfw_pktbytes_xdp(struct xdp_md *ctx, __u32 key, __u32 off, __u32 len)
{
	struct xfw_pktbytes *b = bpf_map_lookup_elem(&xfw_pktbytes, &key);

	if (!ctx || !b)
		return 0;
	if (len > XFW_PKTBYTES_MAX)
		len = XFW_PKTBYTES_MAX;
	XFW_PKTBYTES_COPY(bpf_xdp_load_bytes, ctx, b, off, len);
	return 0;
}

/* xfw_pktbytes_tc is xfw_pktbytes_xdp for an skb. */
__attribute__((noinline)) int xfw_pktbytes_tc(struct __sk_buff *skb, __u32 key, __u32 off, __u32 len)
{
	struct xfw_pktbytes *b = bpf_map_lookup_elem(&xfw_pktbytes, &key);

	if (!skb || !b)
		return 0;
	if (len > XFW_PKTBYTES_MAX)
		len = XFW_PKTBYTES_MAX;
	XFW_PKTBYTES_COPY(bpf_skb_load_bytes, skb, b, off, len);
	return 0;
}

/* xfw_preds_npreds is the number of predicates of slot (0: none). */
static __always_inline __u32 xfw_preds_npreds(__u32 slot)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	return fc ? fc->npreds : 0;
}

/* xfw_preds_xdp answers slot's predicates for the XDP packet p, when the
 * generation has any. */
static __always_inline void xfw_preds_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 slot)
{
	__u32 n = xfw_preds_npreds(slot), key;

	if (!n)
		return;
	key = xfw_pktbytes_key(XFW_SCRATCH_XDP);
	xfw_pktbytes_xdp(ctx, key, p->l3_off, xfw_pktbytes_len(p));
	xfw_preds_eval(key, slot, n);
}

/* xfw_preds_tc is xfw_preds_xdp on egress. */
static __always_inline void xfw_preds_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 slot)
{
	__u32 n = xfw_preds_npreds(slot), key;

	if (!n)
		return;
	key = xfw_pktbytes_key(XFW_SCRATCH_TC);
	xfw_pktbytes_tc(skb, key, p->l3_off, xfw_pktbytes_len(p));
	xfw_preds_eval(key, slot, n);
}

#endif /* XFW_PRED_H */
