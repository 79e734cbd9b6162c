/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hdr4.h — transport header matches beyond tcp and udp (-m sctp, -m dccp,
 * -m esp, IPv4 -m ah, tcp's --tcp-option): the packet's XFW_F_HDR4 value,
 * computed once per packet by the hook when the generation uses them.
 *
 * Conventions:
 *  - Each condition (struct xfw_h4cond in the slot's xfw_family_cfg) is
 *    evaluated as the kernel's match function does — sctp_mt, dccp_mt,
 *    esp_mt, ah_mt, and tcp_mt's tcp_find_option — giving its answer and
 *    whether it hotdrops. A later fragment (par->fragoff != 0) or a packet
 *    without a transport header answers false without a hotdrop.
 *  - Headers are read through bpf_xdp_load_bytes / bpf_skb_load_bytes at
 *    offsets from the frame's start, bounded by the IP packet's end
 *    (xfw_pkt.l4_end, what skb->len is to the kernel's matches).
 *  - The SCTP chunk walk is a loop of XFW_SCTP_MAX_CHUNKS steps at most,
 *    on the kernel's numeric iterator (iter.h: verified a few times,
 *    whatever the bound), each a global function (verified once): every
 *    chunk of a packet of up to 64 KiB, as the kernel walks them; a
 *    packet with more chunks would count as unreadable and hotdrop
 *    (fail closed).
 *  - DCCP and TCP option bytes are copied into a per-CPU buffer
 *    (xfw_h4_scratch) and walked under bpf_loop(). The kernel reads the
 *    length byte of an option starting at the last option byte one byte
 *    past the options: here the packet's byte there, 0 past its end.
 *  - Evaluators are global functions per program type (verified once).
 *
 * Includes: common.h, xfw_structs.h, parse.h, classify_maps.h (xfw_cfg),
 * ip6ext.h (xfw_be32); xfw_load_bytes is parse.h's.
 */
#ifndef XFW_HDR4_H
#define XFW_HDR4_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/dccp.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_maps.h"
#include "ip6ext.h"
#include "iter.h"

/* Header sizes the kernel's matches read: struct sctphdr, struct
 * sctp_chunkhdr, struct dccp_hdr, struct ip_esp_hdr, struct ip_auth_hdr,
 * struct tcphdr. */
#define XFW_SCTP_HDR_LEN 12
#define XFW_SCTP_CHUNK_LEN 4
#define XFW_DCCP_HDR_LEN 12
#define XFW_ESP_HDR_LEN 8
#define XFW_AH_HDR_LEN 12
#define XFW_H4_TCPHDR_LEN 20
/* Chunks the SCTP walk looks at before the packet counts as unreadable:
 * a 64 KiB packet's, of 4 bytes each (more than any IPv4 or non-jumbogram
 * IPv6 packet holds). */
#define XFW_SCTP_MAX_CHUNKS (65536 / XFW_SCTP_CHUNK_LEN)
/* The option buffer: a DCCP header's options are at most 1020 - 12 bytes,
 * plus the byte after them (a power of two, for masking). */
#define XFW_H4_OPTBUF 1024
#define XFW_H4_OPTMAX (XFW_H4_OPTBUF - 1)
/* One-byte options (kinds below this): TCP's EOL and NOP, DCCP's Padding
 * and Mandatory. */
#define XFW_H4_ONE_BYTE_KINDS 2

/* A condition's result bits. */
#define XFW_H4R_TRUE 1
#define XFW_H4R_HOT 2
/* The SCTP walk's step results at and above XFW_H4W_END (offsets below):
 * XFW_H4W_END + result bits. */
#define XFW_H4W_END 0xfffffff0u

/* Per-CPU scratch of the evaluators, one per program type (XDP and TC do
 * not nest on a CPU): the chunk types an sctp "all" test still misses,
 * and the option bytes. */
struct xfw_h4_scratch {
	__u32 seen[8];
	__u8 opt[XFW_H4_OPTBUF];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_h4_scratch);
	__uint(max_entries, 2); /* 1: XDP, 0: TC */
} xfw_h4_scratch SEC(".maps");

/* xfw_h4_cond returns condition k of generation slot, NULL if none. */
static __always_inline struct xfw_h4cond *xfw_h4_cond(__u32 slot, __u32 k)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	if (!fc || k >= XFW_MAX_HDR4CONDS)
		return NULL;
	/* The index computed after its check (for the verifier). */
	xfw_barrier_var(k);
	if (k >= XFW_MAX_HDR4CONDS)
		return NULL;
	return &fc->h4[k];
}

/* xfw_h4_check is SCCHECK / DCCHECK: an untested option passes, a tested
 * one passes when cond differs from its inversion. */
static __always_inline int xfw_h4_check(const struct xfw_h4cond *c, __u8 what, int cond)
{
	return !(c->flags & what) || (!!(c->inv & what) != !!cond);
}

/* xfw_h4_hot is the answer of a test of what (XFW_H4F_TYPES: sctp's
 * match_packet, XFW_H4F_OPTION: dccp_find_option) that hotdrops the packet
 * returning false: SCCHECK / DCCHECK invert it, so an inverted test's
 * match returns true, and ipt_do_table counts the rule and runs its
 * target before it drops the packet. */
static __always_inline __u32 xfw_h4_hot(const struct xfw_h4cond *c, __u8 what)
{
	return xfw_h4_check(c, what, 0) ? XFW_H4R_HOT | XFW_H4R_TRUE : XFW_H4R_HOT;
}

/* xfw_h4_ports tests the source and destination port ranges. */
static __always_inline int xfw_h4_ports(const struct xfw_h4cond *c, const __u8 *h)
{
	__u32 sp = (__u32)h[0] << 8 | h[1], dp = (__u32)h[2] << 8 | h[3];

	return xfw_h4_check(c, XFW_H4F_SPORTS, sp >= c->sport[0] && sp <= c->sport[1]) &&
	       xfw_h4_check(c, XFW_H4F_DPORTS, dp >= c->dport[0] && dp <= c->dport[1]);
}

/* xfw_h4_flags is match_flags: the first flag test of the chunk type
 * decides, none passes. */
static __always_inline int xfw_h4_flags(const struct xfw_h4cond *c, __u8 type, __u8 flags)
{
	for (int i = 0; i < 4; i++)
		if (i < c->nflags && c->fl[i].type == type)
			return (flags & c->fl[i].mask) == c->fl[i].flag;
	return 1;
}

/* xfw_h4_in_map reports whether chunk type t is in condition c's map. */
static __always_inline int xfw_h4_in_map(const __u32 *map, __u8 t)
{
	return (map[(t >> 5) & 7] >> (t & 31)) & 1;
}

/* xfw_h4_sctp_end is match_packet's answer once the chunks are all seen. */
static __always_inline __u32 xfw_h4_sctp_end(const struct xfw_h4cond *c,
					     const struct xfw_h4_scratch *s)
{
	__u32 any = 0;

	switch (c->mtype) {
	case XFW_H4M_ALL:
		for (int i = 0; i < 8; i++)
			any |= s->seen[i];
		return any ? 0 : XFW_H4R_TRUE;
	case XFW_H4M_ONLY:
		return XFW_H4R_TRUE;
	}
	return 0;
}

/* xfw_h4_sctp_step looks at the chunk at off of an SCTP packet ending at
 * end for condition k of slot: the next chunk's offset, or XFW_H4W_END +
 * the walk's result. */
static __always_inline __u32 xfw_h4_sctp_step(void *ctx, int is_xdp, __u32 slot, __u32 k,
					      __u32 off, __u32 end)
{
	struct xfw_h4cond *c = xfw_h4_cond(slot, k);
	__u32 key = is_xdp, len, ok;
	struct xfw_h4_scratch *s = bpf_map_lookup_elem(&xfw_h4_scratch, &key);
	__u8 h[XFW_SCTP_CHUNK_LEN];

	if (!c || !s)
		return XFW_H4W_END + XFW_H4R_HOT;
	if (off + XFW_SCTP_CHUNK_LEN > end || xfw_load_bytes(ctx, is_xdp, off, h, sizeof(h)) < 0)
		return XFW_H4W_END + XFW_H4R_HOT;
	len = (__u32)h[2] << 8 | h[3];
	if (!len)
		return XFW_H4W_END + XFW_H4R_HOT;
	if (xfw_h4_in_map(c->chunkmap, h[0])) {
		ok = xfw_h4_flags(c, h[0], h[1]);
		if (c->mtype == XFW_H4M_ANY && ok)
			return XFW_H4W_END + XFW_H4R_TRUE;
		if (c->mtype == XFW_H4M_ALL && ok)
			s->seen[(h[0] >> 5) & 7] &= ~(1u << (h[0] & 31));
		if (c->mtype == XFW_H4M_ONLY && !ok)
			return XFW_H4W_END;
	} else if (c->mtype == XFW_H4M_ONLY) {
		return XFW_H4W_END;
	}
	off += (len + 3) & ~3u; /* SCTP_PAD4 */
	if (off >= end)
		return XFW_H4W_END + xfw_h4_sctp_end(c, s);
	return off;
}

/* xfw_h4_opt_walk's state: bpf_loop's context, on the stack. */
struct xfw_h4_owalk {
	struct xfw_h4_scratch *s;
	__u32 i, len, found, want;
};

/* xfw_h4_ostep is one step of tcp_find_option / dccp_find_option's loop. */
static long xfw_h4_ostep(__u64 n, void *arg)
{
	struct xfw_h4_owalk *w = arg;
	__u32 i = w->i;
	__u8 kind, l;

	if (!w->s || i >= w->len || i >= XFW_H4_OPTMAX)
		return 1;
	kind = w->s->opt[i & XFW_H4_OPTMAX];
	if (kind == w->want) {
		w->found = 1;
		return 1;
	}
	if (kind < XFW_H4_ONE_BYTE_KINDS) {
		w->i = i + 1;
		return 0;
	}
	l = w->s->opt[(i + 1) & XFW_H4_OPTMAX];
	w->i = i + (l ? l : 1);
	return 0;
}

/* xfw_h4_find_option reports whether option want is among the len option
 * bytes at off (all inside the packet ending at end). */
static __always_inline int xfw_h4_find_option(void *ctx, int is_xdp, __u32 off, __u32 len,
					      __u32 end, __u8 want)
{
	__u32 key = is_xdp;
	struct xfw_h4_scratch *s = bpf_map_lookup_elem(&xfw_h4_scratch, &key);
	struct xfw_h4_owalk w = { .s = s, .len = len, .want = want };
	__u64 n = len;

	if (!s || len == 0 || len >= XFW_H4_OPTMAX)
		return 0;
	/* The byte after the options, when the packet has one. */
	s->opt[len & XFW_H4_OPTMAX] = 0;
	if (off + len < end)
		n = len + 1;
	/* The bounds checked on the register the helper call reads. */
	xfw_barrier_var(n);
	if (n == 0 || n > XFW_H4_OPTMAX)
		return 0;
	if (xfw_load_bytes(ctx, is_xdp, off, s->opt, n) < 0)
		return 0;
	bpf_loop(XFW_H4_OPTBUF, xfw_h4_ostep, &w, 0);
	return w.found;
}

/* xfw_dccp_hdr_len is __dccp_hdr_len: the header before the options
 * (dccp_packet_hdr_len is the uapi header's). */
static __always_inline __u32 xfw_dccp_hdr_len(__u8 type_byte)
{
	__u32 hl = sizeof(struct dccp_hdr) + dccp_packet_hdr_len((type_byte >> 1) & 0xf);

	if (type_byte & 1) /* dccph_x: extended sequence numbers */
		hl += sizeof(struct dccp_hdr_ext);
	return hl;
}

/* xfw_h4_dccp is dccp_mt after the header read (h: its 12 bytes at
 * thoff). */
static __always_inline __u32 xfw_h4_dccp(void *ctx, int is_xdp, const struct xfw_h4cond *c,
					 const __u8 *h, __u32 thoff, __u32 end)
{
	__u32 type = (h[8] >> 1) & 0xf, hl, dl, found;

	if (!xfw_h4_ports(c, h) || !xfw_h4_check(c, XFW_H4F_TYPES, c->types & (1u << type)))
		return 0;
	if (!(c->flags & XFW_H4F_OPTION))
		return XFW_H4R_TRUE;
	hl = xfw_dccp_hdr_len(h[8]);
	dl = (__u32)h[4] * 4;
	/* dccp_find_option: a data offset below the header is invalid; no
	 * options answer false before they are read; options beyond the
	 * packet cannot be read. */
	if (dl < hl || (dl > hl && thoff + dl > end))
		return xfw_h4_hot(c, XFW_H4F_OPTION);
	found = dl > hl && xfw_h4_find_option(ctx, is_xdp, thoff + hl, dl - hl, end, c->option);
	return xfw_h4_check(c, XFW_H4F_OPTION, found) ? XFW_H4R_TRUE : 0;
}

/* xfw_h4_tcpopt is tcp_mt's option test (after its header read, ports
 * and flags). */
static __always_inline __u32 xfw_h4_tcpopt(void *ctx, int is_xdp, const struct xfw_h4cond *c,
					   __u32 thoff, __u32 end)
{
	__u32 hl, inv = !!(c->inv & XFW_H4F_OPTION), found;
	__u8 doff;

	if (thoff + XFW_H4_TCPHDR_LEN > end || xfw_load_bytes(ctx, is_xdp, thoff + 12, &doff, 1) < 0)
		return XFW_H4R_HOT;
	hl = (doff >> 4) * 4;
	if (hl < XFW_H4_TCPHDR_LEN || thoff + hl > end)
		return XFW_H4R_HOT;
	found = hl > XFW_H4_TCPHDR_LEN &&
		xfw_h4_find_option(ctx, is_xdp, thoff + XFW_H4_TCPHDR_LEN, hl - XFW_H4_TCPHDR_LEN, end,
				   c->option);
	return found != inv ? XFW_H4R_TRUE : 0;
}

/* xfw_h4_spi is esp_mt / ah_mt after the fragment test: the SPI at spi_at
 * of a header of hl bytes. */
static __always_inline __u32 xfw_h4_spi(void *ctx, int is_xdp, const struct xfw_h4cond *c,
					__u32 thoff, __u32 end, __u32 hl, __u32 spi_at)
{
	__u8 b[4];
	__u32 spi;

	if (thoff + hl > end || xfw_load_bytes(ctx, is_xdp, thoff + spi_at, b, sizeof(b)) < 0)
		return XFW_H4R_HOT;
	spi = xfw_be32(b);
	return (spi >= c->spi[0] && spi <= c->spi[1]) != !!(c->inv & XFW_H4F_TYPES) ? XFW_H4R_TRUE : 0;
}

/* XFW_H4_EVAL is condition k's result bits for p (walk: the program
 * type's SCTP step function). A macro: the SCTP walk calls the step of
 * its own program type. */
#define XFW_H4_EVAL(ctx, is_xdp, p, slot, k, step)                                             \
	({                                                                                     \
		struct xfw_h4cond *c = xfw_h4_cond(slot, k);                                   \
		__u32 thoff = (p)->thoff, end = (p)->l4_end, r = 0, off, key = is_xdp;         \
		struct xfw_h4_scratch *s = bpf_map_lookup_elem(&xfw_h4_scratch, &key);         \
		__u8 h[XFW_DCCP_HDR_LEN];                                                      \
		struct bpf_iter_num it; /* the chunk walk's (iter.h) */                       \
		if (c && s && thoff && !(p)->frag) {                                           \
			switch (c->kind) {                                                     \
			case XFW_H4_ESP:                                                       \
				r = xfw_h4_spi(ctx, is_xdp, c, thoff, end, XFW_ESP_HDR_LEN, 0); \
				break;                                                         \
			case XFW_H4_AH:                                                        \
				r = xfw_h4_spi(ctx, is_xdp, c, thoff, end, XFW_AH_HDR_LEN, 4);  \
				break;                                                         \
			case XFW_H4_TCPOPT:                                                    \
				r = xfw_h4_tcpopt(ctx, is_xdp, c, thoff, end);                 \
				break;                                                         \
			case XFW_H4_DCCP:                                                      \
				if (thoff + XFW_DCCP_HDR_LEN > end ||                          \
				    xfw_load_bytes(ctx, is_xdp, thoff, h, sizeof(h)) < 0)        \
					r = XFW_H4R_HOT;                                       \
				else                                                           \
					r = xfw_h4_dccp(ctx, is_xdp, c, h, thoff, end);        \
				break;                                                         \
			case XFW_H4_SCTP:                                                      \
				if (thoff + XFW_SCTP_HDR_LEN > end ||                          \
				    xfw_load_bytes(ctx, is_xdp, thoff, h, 4) < 0) {              \
					r = XFW_H4R_HOT;                                       \
					break;                                                 \
				}                                                              \
				if (!xfw_h4_ports(c, h))                                       \
					break;                                                 \
				for (int i = 0; i < 8; i++)                                    \
					s->seen[i] = c->chunkmap[i];                           \
				r = XFW_H4R_HOT; /* more chunks than the bound */              \
				off = thoff + XFW_SCTP_HDR_LEN;                                \
				bpf_iter_num_new(&it, 0, XFW_SCTP_MAX_CHUNKS);                 \
				while (bpf_iter_num_next(&it)) {                               \
					off = step(ctx, slot << 8 | k, off, end);              \
					if (off >= XFW_H4W_END) {                              \
						r = off - XFW_H4W_END;                         \
						break;                                         \
					}                                                      \
				}                                                              \
				bpf_iter_num_destroy(&it);                                     \
				if (r & XFW_H4R_HOT) {                                         \
					r = xfw_h4_hot(c, XFW_H4F_TYPES);                      \
					break;                                                 \
				}                                                              \
				r = xfw_h4_check(c, XFW_H4F_TYPES, r) ? XFW_H4R_TRUE : 0;      \
				break;                                                         \
			}                                                                      \
		}                                                                              \
		r;                                                                             \
	})

/* xfw_h4_short returns the short-header bits of p: an SCTP or DCCP first
 * fragment whose 12-byte header is cut short. */
static __always_inline __u32 xfw_h4_short(const struct xfw_pkt *p)
{
	if (!p->thoff || p->frag || p->thoff + XFW_SCTP_HDR_LEN <= p->l4_end)
		return 0;
	if (p->proto == IPPROTO_SCTP)
		return 1u << XFW_H4_SHORT_SCTP;
	if (p->proto == IPPROTO_DCCP)
		return 1u << XFW_H4_SHORT_DCCP;
	return 0;
}

/* The global functions of a program type (verified once each): the SCTP
 * walk's step, one condition, and the entry point that sets p->hdr4 when
 * the generation in slot uses XFW_F_HDR4. */
#define XFW_H4_GLOBALS(SUF, CTX_T, IS_XDP)                                                      \
	__attribute__((noinline)) __u32 xfw_h4s_##SUF(CTX_T *ctx, __u32 sk, __u32 off, __u32 end) \
	{                                                                                       \
		return xfw_h4_sctp_step(ctx, IS_XDP, sk >> 8, sk & 0xff, off, end);              \
	}                                                                                       \
	__attribute__((noinline)) __u32 xfw_h4c_##SUF(CTX_T *ctx, struct xfw_pkt *p, __u32 slot, \
						      __u32 k)                                  \
	{                                                                                       \
		if (!p)                                                                         \
			return 0;                                                               \
		return XFW_H4_EVAL(ctx, IS_XDP, p, slot, k, xfw_h4s_##SUF);                     \
	}                                                                                       \
	__attribute__((noinline)) int xfw_hdr4_##SUF(CTX_T *ctx, struct xfw_pkt *p, __u32 slot)  \
	{                                                                                       \
		struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);               \
		__u32 v, r;                                                                     \
		if (!p || !fc || !(fc->active & (1u << XFW_F_HDR4)))                            \
			return 0;                                                               \
		v = xfw_h4_short(p);                                                            \
		for (__u32 k = 0; k < XFW_MAX_HDR4CONDS; k++) {                                 \
			if (k >= fc->nh4)                                                       \
				break;                                                          \
			r = xfw_h4c_##SUF(ctx, p, slot, k);                                     \
			if (r & XFW_H4R_TRUE)                                                   \
				v |= 1u << k;                                                   \
			if (r & XFW_H4R_HOT)                                                    \
				v |= 1u << (XFW_H4_HOT_SHIFT + k);                              \
		}                                                                               \
		p->hdr4 = v;                                                                    \
		return 0;                                                                       \
	}

XFW_H4_GLOBALS(xdp, struct xdp_md, 1)
XFW_H4_GLOBALS(tc, struct __sk_buff, 0)

#endif /* XFW_HDR4_H */
