/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ip6ext.h — IPv6 extension header matches (-m rt, -m frag, IPv6 -m ah):
 * the packet's XFW_F_EXT6 value, computed once per packet by the hook
 * when the generation uses such a match.
 *
 * Conventions:
 *  - One walk of the header chain finds the first routing, fragment and
 *    authentication header as ipv6_find_hdr(target) would for each: a
 *    header it cannot read (beyond the IPv6 packet's end) makes the
 *    targets not found before it "bad" (-EBADMSG: the kernel's match
 *    hotdrops); a transport or "no next header", or a later fragment,
 *    ends the walk with the others not found. More than XFW_EXT6_MAX_HDRS
 *    headers count as unreadable, as in parse.h (fail closed).
 *  - Reads go through bpf_xdp_load_bytes / bpf_skb_load_bytes at offsets
 *    from the frame's start, bounded by the IPv6 packet's end (xfw_pkt
 *    .l4_end, what skb->len is to the kernel's matches): a routing header's
 *    addresses may lie beyond the linear part TC pulls.
 *  - Each condition (struct xfw_ext6cond in the slot's xfw_family_cfg) is
 *    evaluated as ip6t_rt.c / ip6t_frag.c / ip6t_ah.c do, in a global
 *    function per program type (verified once each).
 *
 * Includes: common.h, xfw_structs.h, parse.h, classify_maps.h (xfw_cfg).
 */
#ifndef XFW_IP6EXT_H
#define XFW_IP6EXT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_maps.h"

/* Extension headers walked before the chain counts as unreadable. */
#define XFW_EXT6_MAX_HDRS 8
/* Where a target header stands after the walk. */
#define XFW_E6S_NONE 0  /* not found (-ENOENT) */
#define XFW_E6S_FOUND 1
#define XFW_E6S_BAD 2   /* unreadable before or at it (-EBADMSG) */
/* Header sizes the kernel's matches read: struct frag_hdr, struct
 * ip_auth_hdr, and the fixed part of a routing header (struct rt0_hdr). */
#define XFW_FRAG_HDR_LEN 8
#define XFW_AUTH_HDR_LEN 12
#define XFW_RT0_HDR_LEN 8
#define XFW_IN6_LEN 16

/* The walk's findings: per kind its state (bit masks, so that no stack
 * slot is indexed by a variable) and offset. */
struct xfw_ext6_found {
	__u32 off_rt, off_frag, off_ah;
	__u32 found; /* bit k: kind k found */
	__u32 bad;   /* bit k: kind k unreadable */
};

static __always_inline __u32 xfw_e6_state(const struct xfw_ext6_found *f, __u32 k)
{
	if (f->bad & (1u << k))
		return XFW_E6S_BAD;
	return f->found & (1u << k) ? XFW_E6S_FOUND : XFW_E6S_NONE;
}

static __always_inline __u32 xfw_e6_off(const struct xfw_ext6_found *f, __u32 k)
{
	if (k == XFW_EXT6_RT)
		return f->off_rt;
	return k == XFW_EXT6_FRAG ? f->off_frag : f->off_ah;
}

static __always_inline long xfw_e6_load(void *ctx, int is_xdp, __u32 off, void *buf, __u32 len)
{
	if (is_xdp)
		return bpf_xdp_load_bytes(ctx, off, buf, len);
	return bpf_skb_load_bytes(ctx, off, buf, len);
}

static __always_inline int xfw_e6_kind(__u8 nh)
{
	switch (nh) {
	case XFW_NH_ROUTING:
		return XFW_EXT6_RT;
	case XFW_NH_FRAGMENT:
		return XFW_EXT6_FRAG;
	case XFW_NH_AUTH:
		return XFW_EXT6_AH;
	}
	return -1;
}

/* xfw_e6_fail marks the kinds not found yet as unreadable. */
static __always_inline void xfw_e6_fail(struct xfw_ext6_found *f)
{
	f->bad = ~f->found & ((1u << XFW_EXT6_NKINDS) - 1);
}

/* xfw_e6_walk walks the chain from the header after the IPv6 header. */
static __always_inline void xfw_e6_walk(void *ctx, int is_xdp, struct xfw_pkt *p,
					struct xfw_ext6_found *f)
{
	__u32 start = p->l3_off + sizeof(struct ipv6hdr), end = p->l4_end, hl;
	__u8 h[4] = {}, nh;
	int k;

	if (xfw_e6_load(ctx, is_xdp, p->l3_off + 6, &nh, 1) < 0) { /* ipv6hdr.nexthdr */
		xfw_e6_fail(f);
		return;
	}
	for (int i = 0; i < XFW_EXT6_MAX_HDRS; i++) {
		if (!xfw_ipv6_is_ext(nh))
			return;
		/* ipv6_find_hdr reads two bytes, four of a routing header
		 * and of a fragment header. */
		if (nh == XFW_NH_ROUTING || nh == XFW_NH_FRAGMENT) {
			if (start + 4 > end || xfw_e6_load(ctx, is_xdp, start, h, 4) < 0)
				goto bad;
		} else if (start + 2 > end || xfw_e6_load(ctx, is_xdp, start, h, 2) < 0) {
			goto bad;
		}
		k = xfw_e6_kind(nh);
		if (k >= 0 && !(f->found & (1u << k))) {
			f->found |= 1u << k;
			if (k == XFW_EXT6_RT)
				f->off_rt = start;
			else if (k == XFW_EXT6_FRAG)
				f->off_frag = start;
			else
				f->off_ah = start;
		}
		if (nh == XFW_NH_FRAGMENT) {
			/* A later fragment: the walk ends there. */
			if (((__u32)h[2] << 8 | h[3]) & 0xfff8)
				return;
			hl = XFW_FRAG_HDR_LEN;
		} else if (nh == XFW_NH_AUTH) {
			hl = ((__u32)h[1] + 2) * 4;
		} else {
			hl = ((__u32)h[1] + 1) * 8;
		}
		nh = h[0];
		start += hl;
	}
	if (!xfw_ipv6_is_ext(nh))
		return;
bad:
	xfw_e6_fail(f);
}

static __always_inline __u32 xfw_be32(const __u8 *b)
{
	return (__u32)b[0] << 24 | (__u32)b[1] << 16 | (__u32)b[2] << 8 | b[3];
}

/* xfw_e6_in reports lo <= v <= hi, inverted by inv. */
static __always_inline int xfw_e6_in(__u32 v, const struct xfw_ext6cond *c)
{
	return (v >= c->lo && v <= c->hi) != !!(c->inv & XFW_E6I_RANGE);
}

/* xfw_e6_addr_eq reports whether the packet's address t of the routing
 * header at off equals address i of condition k in generation slot (-1:
 * unreadable). */
static __always_inline int xfw_e6_addr_eq(void *ctx, int is_xdp, __u32 slot, __u32 k, __u32 off,
					  __u32 t, __u32 i)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	__u64 a[2], *w;
	__u32 n;

	if (!fc || k >= XFW_MAX_EXT6CONDS || t >= XFW_EXT6_MAX_ADDRS)
		return -1;
	if (xfw_e6_load(ctx, is_xdp, off + XFW_RT0_HDR_LEN + t * XFW_IN6_LEN, a, sizeof(a)) < 0)
		return -1;
	n = (fc->ext6[k & (XFW_MAX_EXT6CONDS - 1)].addr0 + i) & (XFW_EXT6_MAX_ADDRS - 1);
	w = (__u64 *)fc->ext6_addr[n];
	return a[0] == w[0] && a[1] == w[1];
}

/* The address comparisons are global functions so that the loop below
 * keeps no precise index (its states merge). */
/* (At most five arguments: sk is slot << 8 | k, ti is t << 8 | i.) */
__attribute__((noinline)) int xfw_e6a_xdp(struct xdp_md *ctx, __u32 sk, __u32 off, __u32 ti)
{
	return xfw_e6_addr_eq(ctx, 1, sk >> 8, sk & 0xff, off, ti >> 8, ti & 0xff);
}

__attribute__((noinline)) int xfw_e6a_tc(struct __sk_buff *ctx, __u32 sk, __u32 off, __u32 ti)
{
	return xfw_e6_addr_eq(ctx, 0, sk >> 8, sk & 0xff, off, ti >> 8, ti & 0xff);
}

/* xfw_e6_addrs is rt_mt6's type-0 address test of the header at off, of
 * hdrlen bytes (all within the packet): strict, the list is the header's
 * whole list in order; not strict, a subsequence of it. */
static __always_inline int xfw_e6_addrs(void *ctx, int is_xdp, __u32 slot, __u32 k,
					const struct xfw_ext6cond *c, __u32 off, __u32 hdrlen)
{
	__u32 n = (hdrlen - XFW_RT0_HDR_LEN) / XFW_IN6_LEN, want = c->naddr, i = 0, miss = 0, ti;
	int nstrict = c->flags & XFW_E6_NSTRICT, eq;

	if (want > n)
		return 0;
	for (__u32 t = 0; t < XFW_EXT6_MAX_ADDRS; t++) {
		if (t >= (nstrict ? n : want) || i >= want)
			break;
		ti = t << 8 | (nstrict ? i : t);
		eq = is_xdp ? xfw_e6a_xdp(ctx, slot << 8 | k, off, ti) : xfw_e6a_tc(ctx, slot << 8 | k, off, ti);
		if (eq < 0)
			return 0;
		i += eq;
		miss |= !eq;
	}
	if (nstrict)
		return i == want;
	return !miss && i == want && want == n;
}

/* xfw_e6_cond evaluates condition c on the header of its kind at off. */
static __always_inline int xfw_e6_cond(void *ctx, int is_xdp, __u32 slot, __u32 k,
				       const struct xfw_ext6cond *c, __u32 off)
{
	__u8 h[XFW_AUTH_HDR_LEN] = {};
	__u32 hl, fo;
	int ok;

	switch (c->kind) {
	case XFW_EXT6_RT:
		if (xfw_e6_load(ctx, is_xdp, off, h, XFW_RT0_HDR_LEN) < 0)
			return 0;
		hl = ((__u32)h[1] + 1) * 8;
		ok = xfw_e6_in(h[3], c) &&
		     (!(c->flags & XFW_E6_LEN) || ((c->len == hl) != !!(c->inv & XFW_E6I_LEN))) &&
		     (!(c->flags & XFW_E6_TYPE) || ((c->type == h[2]) != !!(c->inv & XFW_E6I_TYPE)));
		if (ok && (c->flags & XFW_E6_RES))
			ok = xfw_be32(h + 4) == 0;
		if (ok && (c->flags & XFW_E6_ADDRS))
			ok = xfw_e6_addrs(ctx, is_xdp, slot, k, c, off, hl);
		return ok;
	case XFW_EXT6_FRAG:
		if (xfw_e6_load(ctx, is_xdp, off, h, XFW_FRAG_HDR_LEN) < 0)
			return 0;
		fo = (__u32)h[2] << 8 | h[3];
		return xfw_e6_in(xfw_be32(h + 4), c) &&
		       !((c->flags & XFW_E6_RES) && (h[1] || (fo & 0x6))) &&
		       !((c->flags & XFW_E6_FIRST) && (fo & ~0x7u)) &&
		       !((c->flags & XFW_E6_MORE) && !(fo & 1)) &&
		       !((c->flags & XFW_E6_LAST) && (fo & 1));
	case XFW_EXT6_AH:
		if (xfw_e6_load(ctx, is_xdp, off, h, XFW_AUTH_HDR_LEN) < 0)
			return 0;
		hl = ((__u32)h[1] + 2) * 4;
		return xfw_e6_in(xfw_be32(h + 4), c) &&
		       (!(c->flags & XFW_E6_LEN) || ((c->len == hl) != !!(c->inv & XFW_E6I_LEN))) &&
		       !((c->flags & XFW_E6_RES) && (h[2] || h[3]));
	}
	return 0;
}

/* xfw_e6_hot reports whether matches of kind k hotdrop the packet: the
 * walk could not reach their header, or it is cut short (a routing
 * header longer than the packet: rt_mt6's length check). */
static __always_inline int xfw_e6_hot(void *ctx, int is_xdp, struct xfw_ext6_found *f,
				      int k, __u32 end)
{
	__u32 off = xfw_e6_off(f, k), st = xfw_e6_state(f, k);
	__u8 h[2];

	if (st == XFW_E6S_BAD)
		return 1;
	if (st != XFW_E6S_FOUND)
		return 0;
	switch (k) {
	case XFW_EXT6_RT:
		if (xfw_e6_load(ctx, is_xdp, off, h, 2) < 0)
			return 1;
		return end - off < ((__u32)h[1] + 1) * 8;
	case XFW_EXT6_FRAG:
		return off + XFW_FRAG_HDR_LEN > end;
	case XFW_EXT6_AH:
		return off + XFW_AUTH_HDR_LEN > end;
	}
	return 0;
}

/* xfw_e6_cond_at evaluates condition k of generation slot on the header
 * at off. */
static __always_inline int xfw_e6_cond_at(void *ctx, int is_xdp, __u32 slot, __u32 k, __u32 off)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	if (!fc || k >= XFW_MAX_EXT6CONDS)
		return 0;
	k &= XFW_MAX_EXT6CONDS - 1; /* for the verifier */
	xfw_barrier_var(k);
	return xfw_e6_cond(ctx, is_xdp, slot, k, &fc->ext6[k & (XFW_MAX_EXT6CONDS - 1)], off);
}

/* xfw_e6_value computes the XFW_F_EXT6 value of p for generation slot;
 * walk and cond are the program type's global functions. */
#define XFW_E6_VALUE(ctx, p, slot, walk, cond)                                         \
	({                                                                             \
		struct xfw_ext6_found f = {};                                          \
		struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &(slot));   \
		__u32 v = 0, hot = 0;                                                  \
		if (fc && (fc->active & (1u << XFW_F_EXT6)) && (p)->fam == 1) {       \
			walk(ctx, p, &f);                                              \
			for (int k = 0; k < XFW_EXT6_NKINDS; k++)                      \
				if (xfw_e6_hot(ctx, is_xdp, &f, k, (p)->l4_end))        \
					hot |= 1u << k;                                \
			for (__u32 k = 0; k < XFW_MAX_EXT6CONDS; k++) {                \
				__u32 kind;                                            \
				if (k >= fc->next6)                                    \
					break;                                         \
				kind = fc->ext6[k].kind & 3;                           \
				if (kind >= XFW_EXT6_NKINDS || (hot & (1u << kind)) ||  \
				    xfw_e6_state(&f, kind) != XFW_E6S_FOUND)           \
					continue;                                      \
				if (cond(ctx, slot, k, xfw_e6_off(&f, kind)))          \
					v |= 1u << k;                                  \
			}                                                              \
		}                                                                      \
		v | hot << XFW_EXT6_HOT_SHIFT;                                         \
	})

/* The global functions of a program type (verified once each): the walk,
 * one condition, and the entry point that sets p->ext6 when the generation
 * in slot uses IPv6 extension header matches. */
#define XFW_E6_GLOBALS(SUF, CTX_T, IS_XDP)                                                        \
	__attribute__((noinline)) int xfw_e6w_##SUF(CTX_T *ctx, struct xfw_pkt *p,               \
						    struct xfw_ext6_found *f)                    \
	{                                                                                         \
		if (!p || !f)                                                                     \
			return 0;                                                                 \
		xfw_e6_walk(ctx, IS_XDP, p, f);                                                   \
		return 0;                                                                         \
	}                                                                                         \
	__attribute__((noinline)) int xfw_e6c_##SUF(CTX_T *ctx, __u32 slot, __u32 k, __u32 off)  \
	{                                                                                         \
		return xfw_e6_cond_at(ctx, IS_XDP, slot, k, off);                                 \
	}                                                                                         \
	__attribute__((noinline)) int xfw_ext6_##SUF(CTX_T *ctx, struct xfw_pkt *p, __u32 slot)  \
	{                                                                                         \
		const int is_xdp = IS_XDP;                                                        \
		if (!p)                                                                           \
			return 0;                                                                 \
		p->ext6 = XFW_E6_VALUE(ctx, p, slot, xfw_e6w_##SUF, xfw_e6c_##SUF);               \
		return 0;                                                                         \
	}

XFW_E6_GLOBALS(xdp, struct xdp_md, 1)
XFW_E6_GLOBALS(tc, struct __sk_buff, 0)

#endif /* XFW_IP6EXT_H */
