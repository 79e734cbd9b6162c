/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ip6ext.h — IPv6 extension header matches (-m rt, -m frag, IPv6 -m ah,
 * -m hbh, -m dst, -m mh, -m ipv6header): the packet's XFW_F_EXT6 value,
 * computed once per packet by the hook when the generation uses such a
 * match; each walk only when a condition of its kinds is used.
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
 *    evaluated as ip6t_rt.c / ip6t_frag.c / ip6t_ah.c / ip6t_hbh.c /
 *    ip6t_mh.c / ip6t_ipv6header.c do, in a global function per program
 *    type (verified once each).
 *  - -m mh reads the Mobility Header at the transport offset (par->thoff)
 *    of a packet of protocol 135 that is no later fragment; -m ipv6header
 *    walks the chain its own way (through later fragments, stopping at ESP)
 *    in a global function of its own: a chain longer than
 *    XFW_EXT6_MAX_HDRS makes its matches hotdrop (fail closed).
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
#include "iter.h"

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
/* struct ip6_mh: the Mobility Header ip6t_mh reads (proto, hdrlen, type,
 * reserved, checksum), and where its type byte lies. */
#define XFW_MH_LEN 6
#define XFW_MH_TYPE_OFF 2
/* The most options one hbh / dst match lists (IP6T_OPTS_OPTSNR). */
#define XFW_OPTS_NR 16
/* xfw_e6h_*'s answer besides the header bits (ip6t_ipv6header MASK_*):
 * the match is false whatever it asks (a header cut short), or the chain
 * is longer than the walk (hotdrop). */
#define XFW_E6H_FALSE 0x100
#define XFW_E6H_HOT 0x200
/* ip6t_ipv6header's MASK_* bits. */
#define XFW_E6H_HOP 0x80
#define XFW_E6H_DST 0x40
#define XFW_E6H_ROUTE 0x20
#define XFW_E6H_FRAG 0x10
#define XFW_E6H_AUTH 0x08
#define XFW_E6H_ESP 0x04
#define XFW_E6H_NONE 0x02
#define XFW_E6H_PROTO 0x01
#define XFW_NH_ESP 50
#define XFW_NH_MH 135

/* The walk's findings: per kind its state (bit masks, so that no stack
 * slot is indexed by a variable) and offset. */
struct xfw_ext6_found {
	__u32 off_rt, off_frag, off_ah, off_hbh, off_dst;
	__u32 thoff; /* mh: the Mobility Header */
	__u32 hdrs;  /* ipv6header: xfw_e6h_*'s answer */
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
	switch (k) {
	case XFW_EXT6_RT:
		return f->off_rt;
	case XFW_EXT6_FRAG:
		return f->off_frag;
	case XFW_EXT6_AH:
		return f->off_ah;
	case XFW_EXT6_HBH:
		return f->off_hbh;
	case XFW_EXT6_DST:
		return f->off_dst;
	case XFW_EXT6_MH:
		return f->thoff;
	}
	return f->hdrs;
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
	case XFW_NH_HOP:
		return XFW_EXT6_HBH;
	case XFW_NH_DEST:
		return XFW_EXT6_DST;
	}
	return -1;
}

/* xfw_e6_fail marks the kinds not found yet as unreadable. */
static __always_inline void xfw_e6_fail(struct xfw_ext6_found *f)
{
	f->bad = ~f->found & ((1u << XFW_EXT6_NWALK) - 1);
}

/* xfw_e6_walk walks the chain from the header after the IPv6 header. */
static __always_inline void xfw_e6_walk(void *ctx, int is_xdp, struct xfw_pkt *p,
					struct xfw_ext6_found *f)
{
	__u32 start = p->l3_off + sizeof(struct ipv6hdr), end = p->l4_end, hl;
	__u8 h[4] = {}, nh;
	int k;

	if (xfw_load_bytes(ctx, is_xdp, p->l3_off + 6, &nh, 1) < 0) { /* ipv6hdr.nexthdr */
		xfw_e6_fail(f);
		return;
	}
	for (int i = 0; i < XFW_EXT6_MAX_HDRS; i++) {
		if (!xfw_ipv6_is_ext(nh))
			return;
		/* ipv6_find_hdr reads two bytes, four of a routing header
		 * and of a fragment header. */
		if (nh == XFW_NH_ROUTING || nh == XFW_NH_FRAGMENT) {
			if (start + 4 > end || xfw_load_bytes(ctx, is_xdp, start, h, 4) < 0)
				goto bad;
		} else if (start + 2 > end || xfw_load_bytes(ctx, is_xdp, start, h, 2) < 0) {
			goto bad;
		}
		k = xfw_e6_kind(nh);
		if (k >= 0 && !(f->found & (1u << k))) {
			f->found |= 1u << k;
			if (k == XFW_EXT6_RT)
				f->off_rt = start;
			else if (k == XFW_EXT6_FRAG)
				f->off_frag = start;
			else if (k == XFW_EXT6_AH)
				f->off_ah = start;
			else if (k == XFW_EXT6_HBH)
				f->off_hbh = start;
			else
				f->off_dst = start;
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
	if (xfw_load_bytes(ctx, is_xdp, off + XFW_RT0_HDR_LEN + t * XFW_IN6_LEN, a, sizeof(a)) < 0)
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
	__u32 n = (hdrlen - XFW_RT0_HDR_LEN) / XFW_IN6_LEN, want = c->naddr, i = 0, miss = 0, ti, t;
	int nstrict = c->flags & XFW_E6_NSTRICT, eq, bad = 0, *tp;
	struct bpf_iter_num it;

	if (want > n)
		return 0;
	/* On the kernel's numeric iterator (iter.h): the body is verified
	 * a few times, not once per address slot. */
	bpf_iter_num_new(&it, 0, XFW_EXT6_MAX_ADDRS);
	while ((tp = bpf_iter_num_next(&it))) {
		t = *tp;
		if (t >= (nstrict ? n : want) || i >= want)
			break;
		ti = t << 8 | (nstrict ? i : t);
		eq = is_xdp ? xfw_e6a_xdp(ctx, slot << 8 | k, off, ti) : xfw_e6a_tc(ctx, slot << 8 | k, off, ti);
		if (eq < 0) {
			bad = 1;
			break;
		}
		i += eq;
		miss |= !eq;
	}
	bpf_iter_num_destroy(&it);
	if (bad)
		return 0;
	if (nstrict)
		return i == want;
	return !miss && i == want && want == n;
}

/* xfw_e6_opts is hbh_mt6's option walk of the header at off (hdrlen
 * bytes, all within the packet): the options listed must be the header's
 * first ones in order, Pad1 (type 0, one byte) included; an option's
 * length is compared unless listed without one; the last listed option
 * may run past the header, no other. */
static __always_inline int xfw_e6_opts(void *ctx, int is_xdp, const struct xfw_family_cfg *fc,
				       const struct xfw_ext6cond *c, __u32 off, __u32 hdrlen)
{
	__u32 ptr = off + 2, rem = hdrlen - 2, n = c->naddr, optlen, want, t;
	struct bpf_iter_num it;
	int ok = 1, *tp;
	__u8 o[2];

	/* On the kernel's numeric iterator (iter.h), as xfw_e6_addrs. */
	bpf_iter_num_new(&it, 0, XFW_OPTS_NR);
	while ((tp = bpf_iter_num_next(&it))) {
		t = *tp;
		if (t >= n)
			break;
		ok = 0;
		if (rem < 1)
			break;
		o[1] = 0;
		if (xfw_load_bytes(ctx, is_xdp, ptr, o, rem < 2 ? 1 : 2) < 0)
			break;
		want = fc->ext6_opt[(c->addr0 + t) & (XFW_EXT6_MAX_OPTS - 1)];
		if (o[0] != want >> 8)
			break;
		if (o[0]) {
			if (rem < 2)
				break;
			if ((want & 0xff) != 0xff && (want & 0xff) != o[1])
				break;
			optlen = (__u32)o[1] + 2;
		} else {
			optlen = 1;
		}
		if (rem < optlen && t + 1 < n)
			break;
		ptr += optlen;
		rem -= optlen;
		ok = 1;
	}
	bpf_iter_num_destroy(&it);
	return ok;
}

/* xfw_e6_ip6hdr is ipv6header_mt6's verdict on the chain's header bits
 * (xfw_e6h_*'s answer r): soft, the listed headers present (inverted:
 * absent); else exactly the listed set (inverted: any other). */
static __always_inline int xfw_e6_ip6hdr(const struct xfw_ext6cond *c, __u32 r)
{
	__u32 temp = r & 0xff, match = c->lo, inv = c->hi;

	if (r & XFW_E6H_FALSE)
		return 0;
	if (c->flags & XFW_E6_SOFT)
		return !((temp ^ match ^ inv) & match);
	return inv ? temp != match : temp == match;
}

/* xfw_e6_cond evaluates condition c on the header of its kind at off (mh:
 * the Mobility Header; ipv6header: xfw_e6h_*'s answer); the IPv6 packet
 * ends at end. */
static __always_inline int xfw_e6_cond(void *ctx, int is_xdp, const struct xfw_family_cfg *fc,
				       __u32 slot, __u32 k, const struct xfw_ext6cond *c, __u32 off,
				       __u32 end)
{
	__u8 h[XFW_AUTH_HDR_LEN] = {};
	__u32 hl, fo;
	int ok;

	switch (c->kind) {
	case XFW_EXT6_RT:
		if (xfw_load_bytes(ctx, is_xdp, off, h, XFW_RT0_HDR_LEN) < 0)
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
		if (xfw_load_bytes(ctx, is_xdp, off, h, XFW_FRAG_HDR_LEN) < 0)
			return 0;
		fo = (__u32)h[2] << 8 | h[3];
		return xfw_e6_in(xfw_be32(h + 4), c) &&
		       !((c->flags & XFW_E6_RES) && (h[1] || (fo & 0x6))) &&
		       !((c->flags & XFW_E6_FIRST) && (fo & ~0x7u)) &&
		       !((c->flags & XFW_E6_MORE) && !(fo & 1)) &&
		       !((c->flags & XFW_E6_LAST) && (fo & 1));
	case XFW_EXT6_AH:
		if (xfw_load_bytes(ctx, is_xdp, off, h, XFW_AUTH_HDR_LEN) < 0)
			return 0;
		hl = ((__u32)h[1] + 2) * 4;
		return xfw_e6_in(xfw_be32(h + 4), c) &&
		       (!(c->flags & XFW_E6_LEN) || ((c->len == hl) != !!(c->inv & XFW_E6I_LEN))) &&
		       !((c->flags & XFW_E6_RES) && (h[2] || h[3]));
	case XFW_EXT6_HBH:
	case XFW_EXT6_DST:
		if (xfw_load_bytes(ctx, is_xdp, off, h, 2) < 0)
			return 0;
		hl = ((__u32)h[1] + 1) * 8;
		/* Shorter than its length field: hotdropped (xfw_e6_hot). */
		if (end - off < hl)
			return 0;
		ok = !(c->flags & XFW_E6_LEN) || ((c->len == hl) != !!(c->inv & XFW_E6I_LEN));
		if (ok && (c->flags & XFW_E6_OPTS))
			ok = xfw_e6_opts(ctx, is_xdp, fc, c, off, hl);
		return ok;
	case XFW_EXT6_MH:
		if (xfw_load_bytes(ctx, is_xdp, off + XFW_MH_TYPE_OFF, h, 1) < 0)
			return 0;
		return xfw_e6_in(h[0], c);
	case XFW_EXT6_IP6HDR:
		return xfw_e6_ip6hdr(c, off);
	}
	return 0;
}

/* xfw_e6_hot reports whether matches of kind k hotdrop the packet: the
 * walk could not reach their header, or it is cut short: its fixed part,
 * or the length its length field claims (rt_mt6's, hbh_mt6's and, since
 * the kernel's "mark malformed IPv6 extension headers for hotdrop" fix,
 * ah_mt6's check; older kernels answered false without a hotdrop for a
 * routing or options header, and did not check an AH header's length). */
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
		if (xfw_load_bytes(ctx, is_xdp, off, h, 2) < 0)
			return 1;
		return end - off < ((__u32)h[1] + 1) * 8;
	case XFW_EXT6_FRAG:
		return off + XFW_FRAG_HDR_LEN > end;
	case XFW_EXT6_AH:
		if (off + XFW_AUTH_HDR_LEN > end || xfw_load_bytes(ctx, is_xdp, off, h, 2) < 0)
			return 1;
		return end - off < ((__u32)h[1] + 2) * 4;
	case XFW_EXT6_HBH:
	case XFW_EXT6_DST:
		if (xfw_load_bytes(ctx, is_xdp, off, h, 2) < 0)
			return 1;
		return end - off < ((__u32)h[1] + 1) * 8;
	}
	return 0;
}

/* xfw_e6_cond_at evaluates condition k of generation slot on the header
 * at off (xfw_e6_cond). */
static __always_inline int xfw_e6_cond_at(void *ctx, int is_xdp, __u32 slot, __u32 k, __u32 off,
					  __u32 end)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	if (!fc || k >= XFW_MAX_EXT6CONDS)
		return 0;
	k &= XFW_MAX_EXT6CONDS - 1; /* for the verifier */
	xfw_barrier_var(k);
	return xfw_e6_cond(ctx, is_xdp, fc, slot, k, &fc->ext6[k & (XFW_MAX_EXT6CONDS - 1)], off, end);
}

/* xfw_e6_mh finds the Mobility Header of p for -m mh (a packet of
 * protocol 135, no later fragment: mh_mt6 answers false for those) and
 * reports whether mh matches hotdrop the packet: the header is cut short
 * or its payload protocol is not "no next header". */
static __always_inline int xfw_e6_mh(void *ctx, int is_xdp, struct xfw_pkt *p,
				     struct xfw_ext6_found *f)
{
	__u8 proto;

	if (p->proto != XFW_NH_MH || p->frag || !p->thoff)
		return 0;
	if (p->thoff + XFW_MH_LEN > p->l4_end ||
	    xfw_load_bytes(ctx, is_xdp, p->thoff, &proto, 1) < 0 || proto != XFW_NH_NONE)
		return 1;
	f->found |= 1u << XFW_EXT6_MH;
	f->thoff = p->thoff;
	return 0;
}

static __always_inline __u32 xfw_e6h_bit(__u8 nh)
{
	switch (nh) {
	case XFW_NH_HOP:
		return XFW_E6H_HOP;
	case XFW_NH_ROUTING:
		return XFW_E6H_ROUTE;
	case XFW_NH_FRAGMENT:
		return XFW_E6H_FRAG;
	case XFW_NH_AUTH:
		return XFW_E6H_AUTH;
	case XFW_NH_DEST:
		return XFW_E6H_DST;
	}
	return 0;
}

/* xfw_e6h_walk is ipv6header_mt6's walk of p's chain: the MASK_* bits of
 * the headers met (fragment headers skipped as 8 bytes whatever their
 * offset), XFW_E6H_FALSE for a header with less than two bytes left, or
 * XFW_E6H_HOT for a chain longer than XFW_EXT6_MAX_HDRS headers. */
static __always_inline __u32 xfw_e6h_walk(void *ctx, int is_xdp, struct xfw_pkt *p)
{
	__u32 ptr = p->l3_off + sizeof(struct ipv6hdr), end = p->l4_end, temp = 0, bit;
	__u8 h[2], nh;

	if (xfw_load_bytes(ctx, is_xdp, p->l3_off + 6, &nh, 1) < 0) /* ipv6hdr.nexthdr */
		return XFW_E6H_HOT;
	for (int i = 0; i <= XFW_EXT6_MAX_HDRS; i++) {
		bit = xfw_e6h_bit(nh);
		if (!bit && nh != XFW_NH_NONE && nh != XFW_NH_ESP)
			break;
		if (nh == XFW_NH_NONE)
			return temp | XFW_E6H_NONE;
		if (ptr > end || end - ptr < 2)
			return XFW_E6H_FALSE;
		if (nh == XFW_NH_ESP)
			return temp | XFW_E6H_ESP;
		if (i == XFW_EXT6_MAX_HDRS || xfw_load_bytes(ctx, is_xdp, ptr, h, 2) < 0)
			return XFW_E6H_HOT;
		temp |= bit;
		if (nh == XFW_NH_FRAGMENT)
			ptr += XFW_FRAG_HDR_LEN;
		else if (nh == XFW_NH_AUTH)
			ptr += ((__u32)h[1] + 2) * 4;
		else
			ptr += ((__u32)h[1] + 1) * 8;
		nh = h[0];
		if (ptr > end)
			break;
	}
	if (nh != XFW_NH_NONE && nh != XFW_NH_ESP)
		temp |= XFW_E6H_PROTO;
	return temp;
}

/* xfw_e6_value computes the XFW_F_EXT6 value of p for generation slot;
 * walk, hwalk and cond are the program type's global functions. */
#define XFW_E6_VALUE(ctx, p, slot, walk, hwalk, cond)                                   \
	({                                                                             \
		struct xfw_ext6_found f = {};                                          \
		struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &(slot));   \
		__u32 v = 0, hot = 0, kinds, r;                                        \
		if (fc && (fc->active & (1u << XFW_F_EXT6)) && (p)->fam == 1) {       \
			kinds = fc->ext6_kinds;                                        \
			if (kinds & ((1u << XFW_EXT6_NWALK) - 1))                      \
				walk(ctx, p, &f);                                      \
			for (int k = 0; k < XFW_EXT6_NWALK; k++)                       \
				if (xfw_e6_hot(ctx, is_xdp, &f, k, (p)->l4_end))        \
					hot |= 1u << k;                                \
			if ((kinds & (1u << XFW_EXT6_MH)) && xfw_e6_mh(ctx, is_xdp, p, &f)) \
				hot |= 1u << XFW_EXT6_MH;                              \
			if (kinds & (1u << XFW_EXT6_IP6HDR)) {                         \
				r = hwalk(ctx, p);                                     \
				if (r & XFW_E6H_HOT)                                   \
					hot |= 1u << XFW_EXT6_IP6HDR;                  \
				else                                                   \
					f.found |= 1u << XFW_EXT6_IP6HDR;              \
				f.hdrs = r;                                            \
			}                                                              \
			for (__u32 k = 0; k < XFW_MAX_EXT6CONDS; k++) {                \
				__u32 kind;                                            \
				if (k >= fc->next6)                                    \
					break;                                         \
				kind = fc->ext6[k].kind & 7;                           \
				if (kind >= XFW_EXT6_NKINDS || (hot & (1u << kind)) ||  \
				    xfw_e6_state(&f, kind) != XFW_E6S_FOUND)           \
					continue;                                      \
				if (cond(ctx, slot, k, xfw_e6_off(&f, kind), (p)->l4_end)) \
					v |= 1u << k;                                  \
			}                                                              \
		}                                                                      \
		v | hot << XFW_EXT6_HOT_SHIFT;                                         \
	})

/* The global functions of a program type (verified once each): the walk,
 * ipv6header's walk, one condition, and the entry point that sets p->ext6
 * when the generation in slot uses IPv6 extension header matches. */
#define XFW_E6_GLOBALS(SUF, CTX_T, IS_XDP)                                                        \
	__attribute__((noinline)) int xfw_e6w_##SUF(CTX_T *ctx, struct xfw_pkt *p,               \
						    struct xfw_ext6_found *f)                    \
	{                                                                                         \
		if (!p || !f)                                                                     \
			return 0;                                                                 \
		xfw_e6_walk(ctx, IS_XDP, p, f);                                                   \
		return 0;                                                                         \
	}                                                                                         \
	__attribute__((noinline)) __u32 xfw_e6h_##SUF(CTX_T *ctx, struct xfw_pkt *p)             \
	{                                                                                         \
		if (!p)                                                                           \
			return XFW_E6H_HOT;                                                       \
		return xfw_e6h_walk(ctx, IS_XDP, p);                                              \
	}                                                                                         \
	__attribute__((noinline)) int xfw_e6c_##SUF(CTX_T *ctx, __u32 slot, __u32 k, __u32 off,  \
						    __u32 end)                                   \
	{                                                                                         \
		return xfw_e6_cond_at(ctx, IS_XDP, slot, k, off, end);                            \
	}                                                                                         \
	__attribute__((noinline)) int xfw_ext6_##SUF(CTX_T *ctx, struct xfw_pkt *p, __u32 slot)  \
	{                                                                                         \
		const int is_xdp = IS_XDP;                                                        \
		if (!p)                                                                           \
			return 0;                                                                 \
		p->ext6 = XFW_E6_VALUE(ctx, p, slot, xfw_e6w_##SUF, xfw_e6h_##SUF, xfw_e6c_##SUF); \
		return 0;                                                                         \
	}

XFW_E6_GLOBALS(xdp, struct xdp_md, 1)
XFW_E6_GLOBALS(tc, struct __sk_buff, 0)

#endif /* XFW_IP6EXT_H */
