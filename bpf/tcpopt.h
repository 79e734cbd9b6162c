/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tcpopt.h — the TCP option scan of -m tcpmss: the packet's XFW_F_TCPMSS
 * value, computed by the hooks before classification only when the
 * generation uses the field.
 *
 * As xt_tcpmss.c's tcpmss_mt: the 20-byte header at par->thoff (also in
 * a later fragment, which the kernel reads as a header too: IPv4's
 * payload, IPv6's own header, xfw_tcpmss_thoff), the data
 * offset at least 5, the options all there, else XFW_V_TRUNC (the match
 * hotdrops); then the options walked from the start, one byte for kinds
 * 0 and 1 (the walk does not stop at End of Option List), the stated
 * length for the others (0 counts as 1); the first kind 2 of length 4
 * with 4 bytes left gives the value, none gives XFW_V_NONE.
 *
 * Conventions: the option bytes are copied into a buffer in the hook's
 * per-CPU scratch (struct xfw_xdp_scratch: the stack has no room left)
 * and walked under bpf_loop(), one option per step.
 *
 * Includes: common.h, parse.h (struct xfw_pkt), classify_maps.h (xfw_cfg).
 */
#ifndef XFW_TCPOPT_H
#define XFW_TCPOPT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "classify_maps.h"

#define XFW_TCPHDR_LEN 20    /* struct tcphdr */
#define XFW_TCPHDR_MAX 60    /* data offset 15 */
#define XFW_TCPOPT_MAX 40    /* option bytes: data offset 15 */
#define XFW_TCPOPT_MSS 2     /* TCPOPT_MSS */
#define XFW_TCPOLEN_MSS 4    /* TCPOLEN_MSS */
#define XFW_TCPOPT_NOP 1     /* kinds below this and it are one byte */


/* The walk's state, on the stack (bpf_loop wants its context there); the
 * bytes stay in the scratch. */
struct xfw_tcpwalk {
	struct xfw_tcpopt *o;
	__u32 off;   /* next option */
	__u32 len;   /* option bytes */
	__u32 mss;   /* the result */
	__u32 pad;
};

/* xfw_tcpopt_step looks at the option at w->off; returns 1 to stop. */
static long xfw_tcpopt_step(__u64 i, void *arg)
{
	struct xfw_tcpwalk *w = arg;
	struct xfw_tcpopt *o = w->o;
	__u32 off = w->off, len;
	__u8 kind;

	if (!o || off >= w->len || off >= XFW_TCPOPT_MAX)
		return 1;
	kind = o->b[off & (XFW_TCPOPT_BUF - 1)];
	if (kind == XFW_TCPOPT_MSS && w->len - off >= XFW_TCPOLEN_MSS &&
	    o->b[(off + 1) & (XFW_TCPOPT_BUF - 1)] == XFW_TCPOLEN_MSS) {
		w->mss = (__u32)o->b[(off + 2) & (XFW_TCPOPT_BUF - 1)] << 8 |
			 o->b[(off + 3) & (XFW_TCPOPT_BUF - 1)];
		return 1;
	}
	if (kind <= XFW_TCPOPT_NOP) {
		w->off = off + 1;
		return 0;
	}
	/* The kernel reads the length byte even past the options (then it
	 * only ends the walk). */
	len = o->b[(off + 1) & (XFW_TCPOPT_BUF - 1)];
	w->off = off + (len ? len : 1);
	return 0;
}

/* xfw_tcpmss_walk returns the XFW_F_TCPMSS value of the len option bytes
 * copied into o->b (load says whether they could be read). */
static __always_inline __u32 xfw_tcpmss_walk(struct xfw_tcpopt *o, __u32 len, int load)
{
	struct xfw_tcpwalk w = { .o = o, .len = len, .mss = XFW_V_NONE };

	if (!load)
		return XFW_V_TRUNC;
	bpf_loop(XFW_TCPOPT_MAX, xfw_tcpopt_step, &w, 0);
	return w.mss;
}

/* xfw_tcpopt_len returns the option bytes of the header whose data offset
 * byte is doff_byte, or -1 for a data offset below 5, and whether
 * thoff + header + options lie inside the packet's l4_end. */
static __always_inline int xfw_tcpopt_len(__u8 doff_byte, __u32 thoff, __u32 l4_end)
{
	__u32 hl = (doff_byte >> 4) * 4;

	if (hl < XFW_TCPHDR_LEN || thoff + hl > l4_end)
		return -1;
	return hl - XFW_TCPHDR_LEN;
}

/* xfw_tcpmss_at returns the XFW_F_TCPMSS value of the TCP packet whose
 * header is at thoff of the frame (XDP, is_xdp) or skb, the IP packet
 * ending at l4_end, copying its options into o. Inlined into the two
 * global functions below, one per program type. */
static __always_inline __u32 xfw_tcpmss_at(void *ctx, int is_xdp, struct xfw_tcpopt *o,
					   __u32 thoff, __u32 l4_end)
{
	__u64 len;
	__u8 doff;
	int n;

	if (!ctx || !o || thoff == 0 || thoff + XFW_TCPHDR_LEN > l4_end)
		return XFW_V_TRUNC;
	if (xfw_load_bytes(ctx, is_xdp, thoff + 12, &doff, 1) < 0)
		return XFW_V_TRUNC;
	n = xfw_tcpopt_len(doff, thoff, l4_end);
	if (n < 0 || n > XFW_TCPOPT_MAX)
		return XFW_V_TRUNC;
	len = (__u32)n;
	/* The bounds checked on the register the helper call reads (64
	 * bits: no zero extension into another register). */
	xfw_barrier_var(len);
	if (len == 0 || len > XFW_TCPOPT_MAX)
		return XFW_V_NONE;
	return xfw_tcpmss_walk(o, len, xfw_load_bytes(ctx, is_xdp, thoff + XFW_TCPHDR_LEN, o->b, len) == 0);
}

/* xfw_tcpmss_xdp is xfw_tcpmss_at for an XDP frame. A global function,
 * verified once. */
__attribute__((noinline)) __u32 xfw_tcpmss_xdp(struct xdp_md *ctx, struct xfw_tcpopt *o,
					       __u32 thoff, __u32 l4_end)
{
	return xfw_tcpmss_at(ctx, 1, o, thoff, l4_end);
}

/* xfw_tcpmss_skb is xfw_tcpmss_at for an skb (TC egress). */
__attribute__((noinline)) __u32 xfw_tcpmss_skb(struct __sk_buff *skb, struct xfw_tcpopt *o,
					       __u32 thoff, __u32 l4_end)
{
	return xfw_tcpmss_at(skb, 0, o, thoff, l4_end);
}

/* xfw_uses_tcpmss reports whether generation slot's rules read
 * XFW_F_TCPMSS or add an MSS option (a TCPMSS target: mangle.h), and the
 * packet is TCP, the only kind they test. */
static __always_inline int xfw_uses_tcpmss(__u32 slot, struct xfw_pkt *p)
{
	struct xfw_family_cfg *fc;

	if (p->proto != IPPROTO_TCP)
		return 0;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	return fc && ((fc->active & (1u << XFW_F_TCPMSS)) || fc->mss_targets);
}

/* xfw_mss_room sets p->mss_room (p->tcpmss known): a SYN (a TCPMSS rule
 * tests the flag: tcpmss_tg4_check) whose header has no MSS option, no
 * data after it, and a data offset below 15 after 4 more bytes, to which
 * xt_TCPMSS's tcpmss_mangle_packet adds an option. */
static __always_inline void xfw_mss_room(void *ctx, int is_xdp, struct xfw_pkt *p)
{
	__u32 hl;
	__u8 doff;

	p->mss_room = 0;
	if (p->tcpmss != XFW_V_NONE || p->frag || !p->thoff || p->tcpflags > 0xff ||
	    !(p->tcpflags & XFW_TH_SYN))
		return;
	if (xfw_load_bytes(ctx, is_xdp, p->thoff + 12, &doff, 1) < 0)
		return;
	hl = (doff >> 4) * 4;
	p->mss_room = p->l4_end - p->thoff == hl && hl + XFW_TCPOLEN_MSS <= XFW_TCPHDR_MAX;
}

/* xfw_tcpmss_thoff returns where -m tcpmss reads p's TCP header: p->thoff,
 * but the IPv6 header itself for an IPv6 later fragment (ip6t_do_table's
 * thoff stays 0: ipv6_find_hdr returns a later fragment's protocol
 * without setting the offset, and tcpmss_mt, which does not look at the
 * fragment offset, reads the IPv6 header as the TCP header: its data
 * offset is the source address's fifth byte, and the kernel hotdrops
 * the fragment when that is below 5; found by xfw difftest, ipv6 seed
 * 27). */
static __always_inline __u32 xfw_tcpmss_thoff(const struct xfw_pkt *p)
{
	return p->fam && p->frag ? p->l3_off : p->thoff;
}

/* xfw_tcpmss_set_xdp and xfw_tcpmss_set_skb set p->tcpmss when generation
 * slot uses it. Global functions: the hooks' own stacks, at the limit of
 * the deepest call chain, take no temporaries of theirs. */
__attribute__((noinline)) int xfw_tcpmss_set_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
						 struct xfw_tcpopt *o, __u32 slot)
{
	__u32 thoff;
	__u8 vihl;

	if (!ctx || !p || !o || !xfw_uses_tcpmss(slot, p))
		return 0;
	thoff = xfw_tcpmss_thoff(p);
	/* An IPv4 later fragment: the parser leaves thoff to us (a store
	 * there would cost the hook a stack slot). */
	if (!thoff && p->fam == 0 && p->frag) {
		if (bpf_xdp_load_bytes(ctx, p->l3_off, &vihl, 1) < 0)
			return 0;
		thoff = p->l3_off + (vihl & 0xf) * 4;
	}
	p->tcpmss = xfw_tcpmss_xdp(ctx, o, thoff, p->l4_end);
	xfw_mss_room(ctx, 1, p);
	return 1;
}

__attribute__((noinline)) int xfw_tcpmss_set_skb(struct __sk_buff *skb, struct xfw_pkt *p,
						 struct xfw_tcpopt *o, __u32 slot)
{
	__u32 thoff;
	__u8 vihl;

	if (!skb || !p || !o || !xfw_uses_tcpmss(slot, p))
		return 0;
	thoff = xfw_tcpmss_thoff(p);
	/* An IPv4 later fragment: the parser leaves thoff to us (a store
	 * there would cost the hook a stack slot). */
	if (!thoff && p->fam == 0 && p->frag) {
		if (bpf_skb_load_bytes(skb, p->l3_off, &vihl, 1) < 0)
			return 0;
		thoff = p->l3_off + (vihl & 0xf) * 4;
	}
	p->tcpmss = xfw_tcpmss_skb(skb, o, thoff, p->l4_end);
	xfw_mss_room(skb, 0, p);
	return 1;
}

/* xfw_mss_mtu_wanted reports whether the walk of generation slot needs p's
 * path MTU (struct xfw_pkt .clamp_mtu): a rule reads the MSS option, one
 * clamps it, and p has one or gets one. */
static __always_inline int xfw_mss_mtu_wanted(__u32 slot, const struct xfw_pkt *p)
{
	struct xfw_family_cfg *fc;

	if (p->tcpmss > 0xffff && !p->mss_room)
		return 0;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	return fc && (fc->active & (1u << XFW_F_TCPMSS)) && (fc->mss_targets & XFW_MSST_CLAMP);
}

#endif /* XFW_TCPOPT_H */
