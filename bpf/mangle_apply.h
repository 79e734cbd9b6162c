/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mangle_apply.h — writes the rewrites of the walk's TCPMSS, DSCP, TOS,
 * TTL and HL rules (mangle.h: struct xfw_pkt .mangle) into an accepted
 * packet: at XDP for the INPUT and FORWARD walks (their PREROUTING,
 * FORWARD and POSTROUTING chains), at TC egress for OUTPUT's.
 *
 *  - The TOS byte (IPv6: traffic class) and the TTL (hop limit), the IPv4
 *    header checksum updated incrementally (RFC 1624). A forwarded
 *    packet's walk holds the TTL after ip_forward's decrement: the frame
 *    gets one more (at most 255), which the kernel's forwarding takes off.
 *  - TCPMSS as xt_TCPMSS's tcpmss_mangle_packet: not a later fragment;
 *    a transport header shorter than 20 bytes or than its data offset
 *    drops the packet (the kernel's NF_DROP); the new MSS is the lowest
 *    --set-mss of the walk and, for --clamp-mss-to-pmtu, the smaller of
 *    the MTUs of the packet's route and of the route back to its source
 *    (xfw_mangle_mtu_xdp) minus 40 (IPv6: 60) bytes (an MTU
 *    not above that drops); the options walked as -m tcpmss walks them
 *    (tcpopt.h), the first MSS option lowered, never raised. A segment
 *    without an MSS option and without data, whose header has room, gets
 *    one of at most the default MSS (536, IPv6 1220) before its other
 *    options (moved 4 bytes on, as the kernel's memmove): the frame grows by 4 bytes (XDP: bpf_xdp_adjust_tail beyond
 *    any Ethernet padding; TC: bpf_skb_change_tail), the data offset,
 *    the IP length and the checksums follow. The TCP checksum: at TC the kernel's helper,
 *    which leaves a CHECKSUM_PARTIAL sum alone; at XDP a checksum field
 *    holding exactly the pseudo-header sum is taken for a partial one (a
 *    veth peer's offload) and left alone, as nat.h does. A value at an
 *    odd offset changes the sum byte-swapped.
 *
 * Conventions: global functions, verified once, called by the hooks after
 * an ACCEPT when .mangle is set; headers copied to the stack, option bytes
 * to the hook's scratch (struct xfw_xdp_scratch .opt).
 *
 * Includes: common.h, parse.h, xfw_maps.h, tcpopt.h, mangle.h, local.h,
 * mark_route.h, route.h, route_main.h.
 */
#ifndef XFW_MANGLE_APPLY_H
#define XFW_MANGLE_APPLY_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "xfw_maps.h"
#include "tcpopt.h"
#include "mangle.h"
#include "local.h"
#include "mark_route.h"
#include "route.h"
#include "route_main.h"

#define XFW_MG_IP4_HDR 20  /* struct iphdr */
#define XFW_MG_IP6_HDR 40  /* struct ipv6hdr */
#define XFW_MG_IP4_CSUM 10 /* offset of the IPv4 header checksum */
#define XFW_MG_TCP_DOFF 12 /* offset of the TCP data offset byte */
#define XFW_MG_TCP_CSUM 16 /* offset of the TCP checksum */
#define XFW_MG_NO_MSS 0xffff

static __always_inline __u32 xfw_mg_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	return (s & 0xffff) + (s >> 16);
}

/* xfw_mg_csum16 returns checksum f (host order) with the 16-bit word old
 * replaced by new (RFC 1624 eqn. 3). */
static __always_inline __u32 xfw_mg_csum16(__u32 f, __u32 old, __u32 new)
{
	return ~xfw_mg_fold((~f & 0xffff) + (~old & 0xffff) + new) & 0xffff;
}

static __always_inline __u32 xfw_mg_rd16(const __u8 *b, __u32 off)
{
	return (__u32)b[off] << 8 | b[off + 1];
}

/* xfw_mg_wire_ttl is the TTL the frame carries for the walk's value. */
static __always_inline __u32 xfw_mg_wire_ttl(struct xfw_pkt *p, __u32 fwd)
{
	__u32 v = p->ttl + (fwd ? 1 : 0);

	return v > 255 ? 255 : v;
}

/* xfw_mg_ip4 rewrites the TOS byte and TTL of the IPv4 header h (its
 * first 20 bytes), the checksum updated. */
static __always_inline void xfw_mg_ip4(__u8 *h, struct xfw_pkt *p, __u32 fwd)
{
	__u32 w0 = xfw_mg_rd16(h, 0), w8 = xfw_mg_rd16(h, 8);
	__u32 f = xfw_mg_rd16(h, XFW_MG_IP4_CSUM);

	if (p->mangle & XFW_MG_TOS)
		h[1] = p->tos;
	if (p->mangle & XFW_MG_TTL)
		h[8] = xfw_mg_wire_ttl(p, fwd);
	f = xfw_mg_csum16(f, w0, xfw_mg_rd16(h, 0));
	f = xfw_mg_csum16(f, w8, xfw_mg_rd16(h, 8));
	h[XFW_MG_IP4_CSUM] = f >> 8;
	h[XFW_MG_IP4_CSUM + 1] = f;
}

/* xfw_mg_ip6 rewrites the traffic class and hop limit of the IPv6 header
 * h (no checksum covers them). */
static __always_inline void xfw_mg_ip6(__u8 *h, struct xfw_pkt *p, __u32 fwd)
{
	if (p->mangle & XFW_MG_TOS) {
		h[0] = (h[0] & 0xf0) | (p->tos >> 4);
		h[1] = (h[1] & 0x0f) | (__u8)(p->tos << 4);
	}
	if (p->mangle & XFW_MG_TTL)
		h[7] = xfw_mg_wire_ttl(p, fwd);
}

/* xfw_mg_target_mss returns the MSS the walk's TCPMSS rules ask for, the
 * path MTU given (0 when no rule clamps); -1 to drop (xt_TCPMSS: "unknown
 * or invalid path-MTU"). */
static __always_inline int xfw_mg_target_mss(struct xfw_pkt *p, __u32 mtu)
{
	__u32 mss = (p->mangle & XFW_MG_MSS) ? p->mss_new : XFW_MG_NO_MSS;
	__u32 minlen = XFW_MG_MINLEN(p->fam);

	if (p->mangle & XFW_MG_CLAMP) {
		if (mtu <= minlen)
			return -1;
		if (mtu - minlen < mss)
			mss = mtu - minlen;
	}
	return mss;
}

/* xfw_mg_find_mss walks the TCP options of the packet (ctx, is_xdp) into
 * o and returns the options' offset of its first MSS option, with the
 * option's value in *old; -1 when it has none, -2 when the header is cut
 * short (the kernel drops the packet). *hlen is the header's length. */
static __always_inline int xfw_mg_find_mss(void *ctx, int is_xdp, struct xfw_pkt *p,
					   struct xfw_tcpopt *o, __u32 *old, __u32 *hlen)
{
	struct xfw_tcpwalk w = { .o = o, .mss = XFW_V_NONE };
	__u32 thoff = p->thoff, hl;
	__u64 len;
	__u8 doff;

	if (thoff == 0 || thoff + XFW_TCPHDR_LEN > p->l4_end)
		return -2;
	if (xfw_load_bytes(ctx, is_xdp, thoff + XFW_MG_TCP_DOFF, &doff, 1) < 0)
		return -2;
	hl = (doff >> 4) * 4;
	*hlen = hl;
	if (hl < XFW_TCPHDR_LEN || thoff + hl > p->l4_end)
		return -2;
	len = hl - XFW_TCPHDR_LEN;
	xfw_barrier_var(len);
	if (len == 0 || len > XFW_TCPOPT_MAX)
		return -1;
	if (xfw_load_bytes(ctx, is_xdp, thoff + XFW_TCPHDR_LEN, o->b, len) < 0)
		return -2;
	w.len = len;
	bpf_loop(XFW_TCPOPT_MAX, xfw_tcpopt_step, &w, 0);
	if (w.mss > 0xffff)
		return -1;
	*old = w.mss;
	return w.off;
}

/* xfw_mg_pseudo returns the TCP pseudo-header sum of the IP header h
 * (IPv4: 20 bytes, IPv6: 40) for a transport length l4len. */
static __always_inline __u32 xfw_mg_pseudo(const __u8 *h, __u32 fam, __u32 l4len)
{
	__u32 s = IPPROTO_TCP + l4len;

	if (fam) {
		for (__u32 i = 8; i < XFW_MG_IP6_HDR; i += 2) /* source, destination */
			s += xfw_mg_rd16(h, i);
	} else {
		for (__u32 i = 12; i < XFW_MG_IP4_HDR; i += 2)
			s += xfw_mg_rd16(h, i);
	}
	return xfw_mg_fold(xfw_mg_fold(s));
}

#define XFW_MG_OPT_MSS 0x0204 /* kind 2, length 4 */

/* xfw_mg_can_add says whether xt_TCPMSS adds an MSS option to a segment
 * with none whose header is hl bytes long: no data after the header, and
 * room for 4 more header bytes. */
static __always_inline int xfw_mg_can_add(struct xfw_pkt *p, __u32 hl)
{
	return p->l4_end - p->thoff <= hl && hl + XFW_TCPOLEN_MSS <= XFW_TCPHDR_MAX;
}

/* xfw_mg_put_mss writes the MSS option opt first among the options of the
 * hl-byte TCP header of the packet (ctx, is_xdp), which grew by its 4
 * bytes, the options there before moved after it: tcpmss_mangle_packet's
 * memmove. xfw_mg_find_mss left those in the hook's scratch (.opt). The
 * move keeps every 16-bit word's alignment: the checksum sees the option
 * alone added. Returns 0, or -1 on failure. */
static __always_inline int xfw_mg_put_mss(void *ctx, int is_xdp, struct xfw_pkt *p, __u32 hl,
					  __u8 *opt)
{
	__u32 key = is_xdp ? XFW_SCRATCH_XDP : XFW_SCRATCH_TC;
	struct xfw_xdp_scratch *sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &key);
	__u64 n = hl - XFW_TCPHDR_LEN;
	__u32 at = p->thoff + XFW_TCPHDR_LEN;

	if (!sc || hl < XFW_TCPHDR_LEN)
		return -1;
	/* The bound on the register the helper reads. */
	xfw_barrier_var(n);
	if (n > XFW_TCPOPT_MAX - XFW_TCPOLEN_MSS)
		return -1;
	if (is_xdp) {
		if (bpf_xdp_store_bytes(ctx, at, opt, XFW_TCPOLEN_MSS) ||
		    (n && bpf_xdp_store_bytes(ctx, at + XFW_TCPOLEN_MSS, sc->opt.b, n)))
			return -1;
		return 0;
	}
	if (bpf_skb_store_bytes(ctx, at, opt, XFW_TCPOLEN_MSS, 0) ||
	    (n && bpf_skb_store_bytes(ctx, at + XFW_TCPOLEN_MSS, sc->opt.b, n, 0)))
		return -1;
	return 0;
}

/* xfw_mg_grow_head makes the frame 4 bytes longer at its head, for a
 * segment that ends with its TCP header where the frame has no room left
 * at its tail (a veth peer's buffer is cut to the frame): everything up to
 * the end of the fixed 20-byte TCP header moves 4 bytes towards the
 * frame's start, leaving the gap the option goes in before the other
 * options. Returns 0, or -1 when it cannot. */
static __always_inline int xfw_mg_grow_head(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 key = XFW_SCRATCH_XDP;
	struct xfw_xdp_scratch *sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &key);
	__u64 n = p->thoff + XFW_TCPHDR_LEN;

	xfw_barrier_var(n);
	if (!sc || n > XFW_MG_MOVE_MAX || n < XFW_TCPHDR_LEN)
		return -1;
	if (bpf_xdp_load_bytes(ctx, 0, sc->mv, n) ||
	    bpf_xdp_adjust_head(ctx, -XFW_TCPOLEN_MSS) ||
	    bpf_xdp_store_bytes(ctx, 0, sc->mv, n))
		return -1;
	return 0;
}

/* xfw_mg_add_mss_xdp adds an MSS option of mss (at most the default MSS)
 * first among the options of the hl-byte TCP header of the frame, which ends there:
 * the frame grows by 4 bytes (into its Ethernet padding first, at its
 * head when its tail has no room: xfw_mg_grow_head), the data
 * offset, the IP length and both checksums follow (a partial TCP
 * checksum gets the new length's pseudo-header sum). h holds the IP
 * header. */
static __always_inline int xfw_mg_add_mss_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u8 *h,
					       __u32 hl, __u32 mss)
{
	__u32 l4len = p->l4_end - p->thoff, frame = ctx->data_end - ctx->data, f, w12, pseudo;
	__u8 opt[XFW_TCPOLEN_MSS], v[2];

	if (mss > XFW_MG_DEFAULT_MSS(p->fam))
		mss = XFW_MG_DEFAULT_MSS(p->fam);
	if (p->l4_end + XFW_TCPOLEN_MSS > frame &&
	    bpf_xdp_adjust_tail(ctx, p->l4_end + XFW_TCPOLEN_MSS - frame) && xfw_mg_grow_head(ctx, p))
		return -1;
	if (bpf_xdp_load_bytes(ctx, p->thoff + XFW_MG_TCP_DOFF, v, 2) ||
	    bpf_xdp_load_bytes(ctx, p->thoff + XFW_MG_TCP_CSUM, opt, 2))
		return -1;
	w12 = xfw_mg_rd16(v, 0);
	f = xfw_mg_rd16(opt, 0);
	pseudo = xfw_mg_pseudo(h, p->fam, l4len);
	if (f == pseudo) {
		f = xfw_mg_pseudo(h, p->fam, l4len + XFW_TCPOLEN_MSS);
	} else {
		f = xfw_mg_csum16(f, l4len, l4len + XFW_TCPOLEN_MSS);
		f = xfw_mg_csum16(f, w12, w12 + 0x1000); /* data offset + 1 */
		f = xfw_mg_csum16(f, 0, XFW_MG_OPT_MSS);
		f = xfw_mg_csum16(f, 0, mss);
	}
	v[0] += 0x10;
	opt[0] = f >> 8;
	opt[1] = f;
	if (bpf_xdp_store_bytes(ctx, p->thoff + XFW_MG_TCP_DOFF, v, 2) ||
	    bpf_xdp_store_bytes(ctx, p->thoff + XFW_MG_TCP_CSUM, opt, 2))
		return -1;
	opt[0] = XFW_MG_OPT_MSS >> 8;
	opt[1] = XFW_TCPOLEN_MSS;
	opt[2] = mss >> 8;
	opt[3] = mss;
	if (xfw_mg_put_mss(ctx, 1, p, hl, opt))
		return -1;
	if (p->fam) {
		f = xfw_mg_rd16(h, 4) + XFW_TCPOLEN_MSS; /* payload length */
		v[0] = f >> 8;
		v[1] = f;
		return bpf_xdp_store_bytes(ctx, p->l3_off + 4, v, 2) ? -1 : 0;
	}
	f = xfw_mg_rd16(h, 2) + XFW_TCPOLEN_MSS; /* total length */
	w12 = xfw_mg_csum16(xfw_mg_rd16(h, XFW_MG_IP4_CSUM), xfw_mg_rd16(h, 2), f);
	h[2] = f >> 8;
	h[3] = f;
	h[XFW_MG_IP4_CSUM] = w12 >> 8;
	h[XFW_MG_IP4_CSUM + 1] = w12;
	return bpf_xdp_store_bytes(ctx, p->l3_off, h, XFW_MG_IP4_HDR) ? -1 : 0;
}

/* What xfw_mg_mss_plan says to do, besides an option's offset to lower. */
#define XFW_MG_PLAN_DROP (-1) /* drop the packet (the kernel's NF_DROP) */
#define XFW_MG_PLAN_KEEP (-2) /* leave it as it is */
#define XFW_MG_PLAN_ADD (-3)  /* add an MSS option of *mss */

/* xfw_mg_mss_plan decides TCPMSS's change to the packet (ctx, is_xdp)
 * for the path MTU mtu: the options' offset of the MSS option to lower
 * from *old to *mss, or XFW_MG_PLAN_*; *hl is the TCP header's length. */
static __always_inline int xfw_mg_mss_plan(void *ctx, int is_xdp, struct xfw_pkt *p, __u32 mtu,
					   __u32 *old, __u32 *hl, int *mss)
{
	struct xfw_xdp_scratch *sc;
	__u32 key = is_xdp ? XFW_SCRATCH_XDP : XFW_SCRATCH_TC;
	int at;

	*mss = xfw_mg_target_mss(p, mtu);
	if (*mss < 0)
		return XFW_MG_PLAN_DROP;
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &key);
	if (!sc)
		return XFW_MG_PLAN_DROP;
	at = xfw_mg_find_mss(ctx, is_xdp, p, &sc->opt, old, hl);
	if (at == -2)
		return XFW_MG_PLAN_DROP;
	if (at < 0)
		return xfw_mg_can_add(p, *hl) ? XFW_MG_PLAN_ADD : XFW_MG_PLAN_KEEP;
	return *old <= (__u32)*mss ? XFW_MG_PLAN_KEEP : at;
}

/* xfw_mg_dev_mtu returns the MTU of device ifindex (0 when unknown). */
static __always_inline __u32 xfw_mg_dev_mtu(void *ctx, __u32 ifindex)
{
	__u32 mtu = 1; /* a length to check: the helper reports the MTU */

	if (bpf_check_mtu(ctx, ifindex, &mtu, 0, 0) < 0)
		return 0;
	return mtu;
}

/* XFW_MG_MTU_PROBE is the length the path-MTU look-ups ask a route to
 * take: any route takes it, and bpf_fib_lookup answers SUCCESS with the
 * route's MTU in mtu_result and its device in ifindex. */
#define XFW_MG_MTU_PROBE 1

/* xfw_mg_route_mtu returns the MTU of the route lookup fib finds (the
 * caller set its flow, device and flags) as the kernel's dst_mtu gives it:
 * a learned path MTU, else the route's mtu metric, else the device's.
 * bpf_fib_lookup's mtu_result has the metric only when it is locked (`ip
 * route ... mtu lock N`): where it gives the device's MTU, the metric of
 * the main table's route to the destination by that device (route_main.h)
 * replaces it. When the lookup gives none (no route, forwarding off) dev's
 * MTU (0: none). */
static __always_inline __u32 xfw_mg_route_mtu(void *ctx, struct bpf_fib_lookup *fib, __u32 flags,
					      __u32 dev)
{
	struct xfw_route_val *rt;
	__u32 mtu;

	/* Before the lookup, which writes the next hop over the destination. */
	if (fib->family == AF_INET)
		rt = xfw_route_main(&fib->ipv4_dst, 4);
	else
		rt = xfw_route_main(fib->ipv6_dst, 6);
	fib->tot_len = XFW_MG_MTU_PROBE;
	if (bpf_fib_lookup(ctx, fib, sizeof(*fib), flags | BPF_FIB_LOOKUP_SKIP_NEIGH) !=
		    BPF_FIB_LKUP_RET_SUCCESS ||
	    !fib->mtu_result)
		return dev ? xfw_mg_dev_mtu(ctx, dev) : 0;
	mtu = fib->mtu_result;
	if (rt && rt->mtu && (!rt->ifindex || rt->ifindex == fib->ifindex) &&
	    mtu == xfw_mg_dev_mtu(ctx, fib->ifindex))
		return rt->mtu;
	return mtu;
}

/* xfw_mg_reverse_mtu returns the MTU of tcpmss_reverse_mtu's route: to the
 * packet's source, a flow of nothing else, as an output lookup (from
 * loopback); 0 when it reports none (a local source's route is loopback's,
 * whose MTU is above any other). */
static __always_inline __u32 xfw_mg_reverse_mtu(void *ctx, struct xfw_pkt *p)
{
	struct bpf_fib_lookup fib = {};

	fib.ifindex = XFW_LOOPBACK_IFINDEX;
	if (p->fam == 0) {
		fib.family = AF_INET;
		fib.ipv4_dst = bpf_htonl((__u32)p->src_lo);
	} else {
		fib.family = AF_INET6;
		fib.ipv6_dst[0] = bpf_htonl(p->src_hi >> 32);
		fib.ipv6_dst[1] = bpf_htonl((__u32)p->src_hi);
		fib.ipv6_dst[2] = bpf_htonl(p->src_lo >> 32);
		fib.ipv6_dst[3] = bpf_htonl((__u32)p->src_lo);
	}
	return xfw_mg_route_mtu(ctx, &fib, 0, 0);
}

/* xfw_mg_forward_mtu returns the MTU of the route of p out of device oif
 * as looked up from device from (the input device, or loopback for the
 * host's packets) with p's flow and mark, else oif's MTU. */
static __always_inline __u32 xfw_mg_forward_mtu(void *ctx, struct xfw_pkt *p, __u32 from, __u32 oif)
{
	struct bpf_fib_lookup fib = {};
	__u32 flags = 0;

	fib.ifindex = from;
	xfw_fib_flow(&fib, p);
	if (p->mark)
		flags = xfw_fib_mark(&fib, p->mark);
	return xfw_mg_route_mtu(ctx, &fib, flags, oif);
}

/* xfw_mangle_mtu_xdp gives p the path MTU --clamp-mss-to-pmtu clamps to,
 * as xt_TCPMSS: the smaller of the MTUs of the packet's route (out of
 * ifs >> 32) and of the route back to its source (the input device's MTU
 * when that lookup reports none); ifs as for xfw_mangle_xdp. Called before
 * the walk, for -m tcpmss after a clamping rule, and by the rewrite. A
 * global function. */
__attribute__((noinline)) int xfw_mangle_mtu_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u64 ifs)
{
	__u32 a, b;

	if (!ctx || !p)
		return 0;
	a = xfw_mg_forward_mtu(ctx, p, (__u32)ifs, ifs >> 32);
	b = xfw_mg_reverse_mtu(ctx, p);
	if (!b)
		b = xfw_mg_dev_mtu(ctx, (__u32)ifs);
	p->clamp_mtu = b && b < a ? b : a;
	return 0;
}

/* xfw_mangle_mtu_tc is xfw_mangle_mtu_xdp at TC egress: the MTU of the
 * packet's output route out of skb->ifindex (a local packet's reverse
 * route is loopback's, and a reverse route reported smaller still counts).
 * A global function. */
__attribute__((noinline)) int xfw_mangle_mtu_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 a, b;

	if (!skb || !p)
		return 0;
	a = xfw_mg_forward_mtu(skb, p, XFW_LOOPBACK_IFINDEX, skb->ifindex);
	b = xfw_mg_reverse_mtu(skb, p);
	p->clamp_mtu = b && b < a ? b : a;
	return 0;
}

/* xfw_mg_mss_xdp lowers the frame's MSS option (see the top of this
 * file). Returns 0, or -1 to drop the packet. */
static __always_inline int xfw_mg_mss_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u8 *h,
					  __u64 ifs)
{
	__u32 mtu = 0, old = 0, hl = 0, f, off, pseudo;
	__u8 v[2];
	int mss = 0, at;

	if (p->proto != IPPROTO_TCP || p->frag)
		return 0;
	if (p->mangle & XFW_MG_CLAMP) {
		xfw_mangle_mtu_xdp(ctx, p, ifs);
		mtu = p->clamp_mtu;
	}
	at = xfw_mg_mss_plan(ctx, 1, p, mtu, &old, &hl, &mss);
	if (at == XFW_MG_PLAN_ADD)
		return xfw_mg_add_mss_xdp(ctx, p, h, hl, mss);
	if (at < 0)
		return at == XFW_MG_PLAN_DROP ? -1 : 0;
	off = p->thoff + XFW_TCPHDR_LEN + at + 2;
	if (bpf_xdp_load_bytes(ctx, p->thoff + XFW_MG_TCP_CSUM, v, 2))
		return -1;
	f = (__u32)v[0] << 8 | v[1];
	pseudo = xfw_mg_pseudo(h, p->fam, p->l4_end - p->thoff);
	if (f != pseudo) {
		/* A value at an odd offset of the header sits byte-swapped
		 * in the 16-bit words the sum adds. */
		if (at & 1)
			f = xfw_mg_csum16(f, __builtin_bswap16(old), __builtin_bswap16(mss));
		else
			f = xfw_mg_csum16(f, old, mss);
		v[0] = f >> 8;
		v[1] = f;
		if (bpf_xdp_store_bytes(ctx, p->thoff + XFW_MG_TCP_CSUM, v, 2))
			return -1;
	}
	v[0] = mss >> 8;
	v[1] = mss;
	if (bpf_xdp_store_bytes(ctx, off, v, 2))
		return -1;
	return 0;
}

/* xfw_mangle_xdp writes the walk's rewrites into the accepted frame; fwd
 * says the walk was FORWARD's, ifs is output ifindex << 32 | input
 * ifindex. Returns 0, or -1 to drop it. A global function. */
__attribute__((noinline)) int xfw_mangle_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 fwd,
					     __u64 ifs)
{
	__u8 h[XFW_MG_IP6_HDR];

	if (!ctx || !p)
		return 0;
	if (p->fam == 0) {
		if (bpf_xdp_load_bytes(ctx, p->l3_off, h, XFW_MG_IP4_HDR))
			return -1;
		if (p->mangle & (XFW_MG_TOS | XFW_MG_TTL)) {
			xfw_mg_ip4(h, p, fwd);
			if (bpf_xdp_store_bytes(ctx, p->l3_off, h, XFW_MG_IP4_HDR))
				return -1;
		}
	} else {
		if (bpf_xdp_load_bytes(ctx, p->l3_off, h, XFW_MG_IP6_HDR))
			return -1;
		if (p->mangle & (XFW_MG_TOS | XFW_MG_TTL)) {
			xfw_mg_ip6(h, p, fwd);
			if (bpf_xdp_store_bytes(ctx, p->l3_off, h, 8))
				return -1;
		}
	}
	if (p->mangle & (XFW_MG_MSS | XFW_MG_CLAMP))
		return xfw_mg_mss_xdp(ctx, p, h, ifs);
	return 0;
}

/* xfw_mg_add_mss_tc is xfw_mg_add_mss_xdp for an skb at TC egress, with
 * the kernel's checksum helpers (a partial checksum gets only the
 * pseudo-header's length change). */
static __always_inline int xfw_mg_add_mss_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 hl, __u32 mss)
{
	__u32 l4len = p->l4_end - p->thoff, csoff = p->thoff + XFW_MG_TCP_CSUM, lenoff;
	__u16 oldw, neww;
	__u8 opt[XFW_TCPOLEN_MSS];
	__u32 optw;

	if (skb->len != p->l4_end)
		return 0; /* bytes after the IP packet: none at egress */
	if (mss > XFW_MG_DEFAULT_MSS(p->fam))
		mss = XFW_MG_DEFAULT_MSS(p->fam);
	if (bpf_skb_change_tail(skb, skb->len + XFW_TCPOLEN_MSS, 0))
		return -1;
	opt[0] = XFW_MG_OPT_MSS >> 8;
	opt[1] = XFW_TCPOLEN_MSS;
	opt[2] = mss >> 8;
	opt[3] = mss;
	__builtin_memcpy(&optw, opt, sizeof(optw));
	if (xfw_mg_put_mss(skb, 0, p, hl, opt) ||
	    bpf_l4_csum_replace(skb, csoff, 0, optw, sizeof(optw)))
		return -1;
	if (bpf_skb_load_bytes(skb, p->thoff + XFW_MG_TCP_DOFF, &oldw, 2))
		return -1;
	neww = oldw;
	((__u8 *)&neww)[0] += 0x10; /* data offset + 1 */
	if (bpf_l4_csum_replace(skb, csoff, oldw, neww, 2) ||
	    bpf_skb_store_bytes(skb, p->thoff + XFW_MG_TCP_DOFF, &neww, 2, 0))
		return -1;
	oldw = bpf_htons(l4len);
	neww = bpf_htons(l4len + XFW_TCPOLEN_MSS);
	if (bpf_l4_csum_replace(skb, csoff, oldw, neww, BPF_F_PSEUDO_HDR | 2))
		return -1;
	lenoff = p->l3_off + (p->fam ? 4 : 2); /* payload or total length */
	if (bpf_skb_load_bytes(skb, lenoff, &oldw, 2))
		return -1;
	neww = bpf_htons(bpf_ntohs(oldw) + XFW_TCPOLEN_MSS);
	if (!p->fam && bpf_l3_csum_replace(skb, p->l3_off + XFW_MG_IP4_CSUM, oldw, neww, 2))
		return -1;
	return bpf_skb_store_bytes(skb, lenoff, &neww, 2, 0) ? -1 : 0;
}

/* xfw_mg_mss_tc lowers the skb's MSS option (TC egress, OUTPUT's walk). */
static __always_inline int xfw_mg_mss_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 mtu = 0, old = 0, hl = 0;
	__u16 from, to;
	int mss = 0, at;

	if (p->proto != IPPROTO_TCP || p->frag)
		return 0;
	if (p->mangle & XFW_MG_CLAMP) {
		xfw_mangle_mtu_tc(skb, p);
		mtu = p->clamp_mtu;
	}
	at = xfw_mg_mss_plan(skb, 0, p, mtu, &old, &hl, &mss);
	if (at == XFW_MG_PLAN_ADD)
		return xfw_mg_add_mss_tc(skb, p, hl, mss);
	if (at < 0)
		return at == XFW_MG_PLAN_DROP ? -1 : 0;
	from = bpf_htons(old);
	to = bpf_htons(mss);
	if (bpf_l4_csum_replace(skb, p->thoff + XFW_MG_TCP_CSUM, (at & 1) ? __builtin_bswap16(from) : from,
				(at & 1) ? __builtin_bswap16(to) : to, sizeof(to)) ||
	    bpf_skb_store_bytes(skb, p->thoff + XFW_TCPHDR_LEN + at + 2, &to, sizeof(to), 0))
		return -1;
	return 0;
}

/* xfw_mangle_tc writes the OUTPUT walk's rewrites into the accepted skb.
 * Returns 0, or -1 to drop it. A global function. */
__attribute__((noinline)) int xfw_mangle_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u8 h[8];
	__u16 old, new;

	if (!skb || !p)
		return 0;
	if (p->mangle & (XFW_MG_TOS | XFW_MG_TTL)) {
		if (bpf_skb_load_bytes(skb, p->l3_off, h, sizeof(h)))
			return -1;
		if (p->fam == 0) {
			/* Words 0 (version, TOS) and 4 (TTL, protocol). */
			__builtin_memcpy(&old, h, 2);
			if (p->mangle & XFW_MG_TOS)
				h[1] = p->tos;
			__builtin_memcpy(&new, h, 2);
			if (old != new && (bpf_l3_csum_replace(skb, p->l3_off + XFW_MG_IP4_CSUM, old, new, 2) ||
					   bpf_skb_store_bytes(skb, p->l3_off, &new, 2, 0)))
				return -1;
			if (p->mangle & XFW_MG_TTL) {
				if (bpf_skb_load_bytes(skb, p->l3_off + 8, &old, 2))
					return -1;
				new = old;
				((__u8 *)&new)[0] = p->ttl;
				if (old != new &&
				    (bpf_l3_csum_replace(skb, p->l3_off + XFW_MG_IP4_CSUM, old, new, 2) ||
				     bpf_skb_store_bytes(skb, p->l3_off + 8, &new, 2, 0)))
					return -1;
			}
		} else {
			xfw_mg_ip6(h, p, 0);
			if (bpf_skb_store_bytes(skb, p->l3_off, h, sizeof(h), 0))
				return -1;
		}
	}
	if (p->mangle & (XFW_MG_MSS | XFW_MG_CLAMP))
		return xfw_mg_mss_tc(skb, p);
	return 0;
}

/* xfw_mangle_mss_done notes in p that the walk's TCPMSS rewrite is in the
 * packet (rc 0): no rewrite left for an ACCEPT, an added option in its
 * length. */
static __always_inline int xfw_mangle_mss_done(struct xfw_pkt *p, int rc)
{
	if (rc == 0 && (p->mangle & XFW_MG_GROWN))
		p->l4_end += XFW_TCPOLEN_MSS;
	p->mangle &= ~(XFW_MG_MSS | XFW_MG_CLAMP | XFW_MG_GROWN);
	return rc;
}

/* xfw_mangle_mss_now_xdp writes the walk's TCPMSS rewrite into the frame
 * before REJECT answers it (ifs as for xfw_mangle_xdp): the kernel's
 * target changed the packet where its rule stood, and its reply quotes the
 * packet the rules before left, an added MSS option included (its reset
 * acknowledges that packet's length). Returns 0, or -1 to drop it. A
 * global function. */
__attribute__((noinline)) int xfw_mangle_mss_now_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u64 ifs)
{
	__u8 h[XFW_MG_IP6_HDR];
	long err;

	if (!ctx || !p || !(p->mangle & (XFW_MG_MSS | XFW_MG_CLAMP)))
		return 0;
	if (p->fam)
		err = bpf_xdp_load_bytes(ctx, p->l3_off, h, XFW_MG_IP6_HDR);
	else
		err = bpf_xdp_load_bytes(ctx, p->l3_off, h, XFW_MG_IP4_HDR);
	if (err)
		return -1;
	return xfw_mangle_mss_done(p, xfw_mg_mss_xdp(ctx, p, h, ifs));
}

/* xfw_mangle_mss_now_tc is xfw_mangle_mss_now_xdp for OUTPUT's REJECT at
 * TC egress. A global function. */
__attribute__((noinline)) int xfw_mangle_mss_now_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	if (!skb || !p || !(p->mangle & (XFW_MG_MSS | XFW_MG_CLAMP)))
		return 0;
	return xfw_mangle_mss_done(p, xfw_mg_mss_tc(skb, p));
}

#endif /* XFW_MANGLE_APPLY_H */
