/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fastpath.h — the XDP fast path for FORWARD (issue 22): a packet the
 * FORWARD walk accepted, which the kernel would forward unchanged, is
 * rewritten as ip_forward / ip6_forward would (TTL or hop limit minus one,
 * the IPv4 header checksum updated, the Ethernet addresses of the route's
 * next hop) and redirected to the output device at XDP, skipping the
 * stack. Everything else goes to the stack as before (XDP_PASS).
 *
 * What qualifies (docs/design.md, "XDP fast path"): an untagged frame
 * (trailing bytes after the packet are cut off, as ip_rcv does), no
 * IPv4 options, no IPv6 hop-by-hop header, no fragment, a transport
 * checksum the sender finished (TCP, UDP, ICMP only), no translated
 * connection in the namespace (xfw_tc_egress's only work on forwarded
 * packets), a full route lookup (with the neighbour, the MTU against the
 * packet's length) answering SUCCESS towards the device the walk saw, not
 * the input device, an output device the control plane marked
 * XFW_IF_FASTTX (it takes XDP frames, nothing on its egress needs the
 * skb; internal/dataplane/fastpath.go; none when the fast path is off)
 * and an input device it marked XFW_IF_FASTRX (no other user's tc or
 * nftables ingress hook, which the redirected frame would skip).
 * The caller has checked the rest: FORWARD, ACCEPT, no mark, no mangle.
 *
 * Counters: xfw_stats' XFW_STAT_FP + enum xfw_fp_why, per CPU (`xfw
 * fastpath` prints them).
 *
 * Conventions: xfw_fp_xdp is a global function (its own stack holds the
 * route request), called once, at the end of the XDP hook.
 *
 * Includes: common.h, parse.h (struct xfw_pkt), route.h (xfw_fib_flow),
 * classify_maps.h (xfw_stats), xfw_maps.h (xfw_ifinfo), nat.h
 * (xfw_nat_enabled), ifinfo_cache.h (xfw_ifinfo_get).
 */
#ifndef XFW_FASTPATH_H
#define XFW_FASTPATH_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "route.h"
#include "classify_maps.h"
#include "xfw_maps.h"
#include "nat.h"
#include "nat6.h"
#include "generation.h"
#include "ifinfo_cache.h"

/* The longest IPv4 header (60 bytes) or IPv6 header chain the transport
 * checksum test reads behind (longer ones go to the stack). */
#define XFW_FP_MAX_L3_HLEN 256

/* xfw_fp_count bumps this CPU's counter of outcome why. */
static __always_inline void xfw_fp_count(__u32 why)
{
	if (why < XFW_FP_NWHY)
		xfw_stat_inc(XFW_STAT_FP + why);
}

/* xfw_fp_marked reports whether the control plane gave device ifindex
 * flag (XFW_IF_FASTTX: a fast-path target; XFW_IF_FASTRX: a source). The
 * facts come from the CPU's cache (ifinfo_cache.h): a hash lookup for the
 * output device cost every forwarded packet ~8 ns, fast path on or off. */
static __always_inline int xfw_fp_marked(__u32 ifindex, __u16 flag)
{
	__u32 hook = XFW_SCRATCH_XDP;
	struct xfw_xdp_scratch *sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &hook);
	__u64 key = ifindex;
	struct xfw_ifinfo *ifi;

	ifi = sc ? xfw_ifinfo_get(sc, key) : bpf_map_lookup_elem(&xfw_ifinfo, &key);
	return ifi && (ifi->flags & flag);
}

/* xfw_fp_why_route maps a refused route lookup's answer to its counter. */
static __always_inline __u32 xfw_fp_why_route(int rc)
{
	switch (rc) {
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return XFW_FP_NO_NEIGH;
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
		return XFW_FP_MTU;
	}
	return XFW_FP_ROUTE;
}

/* xfw_fp_rewrite4 decrements the IPv4 TTL of the header at l3_off, with
 * the checksum update of RFC 1624 as ip_decrease_ttl writes it. Returns
 * nonzero when the header is out of reach or the TTL would expire. */
static __always_inline int xfw_fp_rewrite4(struct xdp_md *ctx, __u32 l3_off)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct iphdr *ip;
	__u32 sum;

	if (l3_off > XFW_MAX_L3_OFF)
		return 1;
	ip = data + l3_off;
	if ((void *)(ip + 1) > end || ip->ttl <= 1)
		return 1;
	/* The TTL is the high byte of its 16-bit word: the sum grows by
	 * 0x0100 as the field shrinks by one (ones' complement, end-around
	 * carry). */
	sum = ip->check + bpf_htons(0x0100);
	ip->check = (__u16)(sum + (sum >= 0xffff));
	ip->ttl -= 1;
	return 0;
}

/* xfw_fp_rewrite6 decrements the IPv6 hop limit of the header at l3_off.
 * Returns nonzero when the header is out of reach, the limit would expire
 * or a hop-by-hop header follows (ip6_forward reads it first). */
static __always_inline int xfw_fp_rewrite6(struct xdp_md *ctx, __u32 l3_off)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ipv6hdr *ip6;

	if (l3_off > XFW_MAX_L3_OFF)
		return 1;
	ip6 = data + l3_off;
	if ((void *)(ip6 + 1) > end || ip6->hop_limit <= 1 || ip6->nexthdr == XFW_NH_HOP)
		return 1;
	ip6->hop_limit -= 1;
	return 0;
}

/* xfw_fp_words adds the four 16-bit words of x to a ones'-complement sum. */
static __always_inline __u64 xfw_fp_words(__u64 x)
{
	return (x >> 48) + ((x >> 32) & 0xffff) + ((x >> 16) & 0xffff) + (x & 0xffff);
}

/* xfw_fp_csum_unfinished reports whether p's transport checksum may be one
 * the sender left to offload (CHECKSUM_PARTIAL: a packet a local socket
 * sent through a veth, whose skb still says the device must finish it),
 * which an XDP frame cannot carry: the field then holds the pseudo
 * header's folded sum (csum_tcpudp_magic, csum_ipv6_magic uncomplemented).
 * A finished checksum equal to it (about 1 in 65,536) goes to the stack
 * too. Also 1 for protocols besides TCP, UDP and ICMP (SCTP's CRC is
 * offloaded as well). */
static __always_inline int xfw_fp_csum_unfinished(struct xdp_md *ctx, struct xfw_pkt *p)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 off, l4len;
	__u16 *field;
	__u64 sum;

	switch (p->proto) {
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return 0; /* always finished by the sender */
	case IPPROTO_TCP:
		off = 16; /* the checksum's offset in the TCP header */
		break;
	case IPPROTO_UDP:
		off = 6; /* in the UDP header */
		break;
	default:
		return 1;
	}
	if (p->thoff > XFW_MAX_L3_OFF + XFW_FP_MAX_L3_HLEN || p->thoff < p->l3_off)
		return 1;
	field = data + p->thoff + off;
	if ((void *)(field + 1) > end)
		return 1;
	l4len = p->l3len - (p->thoff - p->l3_off);
	sum = xfw_fp_words(p->src_hi) + xfw_fp_words(p->src_lo) + xfw_fp_words(p->dst_hi) +
	      xfw_fp_words(p->dst_lo) + p->proto + l4len;
	sum = xfw_csum_fold(sum);
	return bpf_ntohs(*field) == sum || (sum == 0xffff && *field == 0);
}

/* xfw_fp_trim cuts bytes after the IP packet off the frame (Ethernet
 * padding, trailing garbage), as ip_rcv / ipv6_rcv trim the skb to the
 * packet's length. Returns nonzero when the frame is shorter than the
 * packet says, or the trim fails (the stack drops or trims it). */
static __always_inline int xfw_fp_trim(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 have = ctx->data_end - ctx->data, want = p->l3_off + p->l3len;

	if (have < want)
		return 1;
	if (have == want)
		return 0;
	return bpf_xdp_adjust_tail(ctx, -(int)(have - want)) < 0;
}

/* xfw_fp_prechecks returns the counter of what keeps p (routed from iif
 * to oif) on the stack, XFW_FP_TAKEN when nothing does. */
static __always_inline __u32 xfw_fp_prechecks(struct xfw_pkt *p, __u32 iif, __u32 oif)
{
	if (p->fragmented)
		return XFW_FP_FRAG;
	/* Any VLAN tag, also a priority tag (VLAN 0, which p->vlan does not
	 * tell from none): the stack takes it off. */
	if (p->l3_off != sizeof(struct ethhdr) || oif == iif ||
	    (p->fam == 0 && p->thoff != p->l3_off + sizeof(struct iphdr)))
		return XFW_FP_HEADER;
	if (xfw_nat_enabled())
		return XFW_FP_NAT;
	if (!xfw_fp_marked(oif, XFW_IF_FASTTX))
		return XFW_FP_NO_TARGET;
	if (!xfw_fp_marked(iif, XFW_IF_FASTRX))
		return XFW_FP_NO_SOURCE;
	return XFW_FP_TAKEN;
}

/* xfw_fp_csum_check is xfw_fp_csum_unfinished's counter, or XFW_FP_TAKEN. */
static __always_inline __u32 xfw_fp_csum_check(struct xdp_md *ctx, struct xfw_pkt *p)
{
	return xfw_fp_csum_unfinished(ctx, p) ? XFW_FP_CSUM : XFW_FP_TAKEN;
}

/* xfw_fp_xdp forwards p, accepted in FORWARD (ifs: output ifindex << 32 |
 * input ifindex), at XDP when it qualifies: XDP_REDIRECT, else XDP_PASS
 * (the stack forwards it). stack: the walk left a mark or rewrote the
 * packet, which the stack carries on. A global function. */
__attribute__((noinline)) int xfw_fp_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u64 ifs, __u32 stack)
{
	struct bpf_fib_lookup fib = {};
	__u32 iif = (__u32)ifs, oif = ifs >> 32, why;
	void *data, *end;
	struct ethhdr *eth;
	int rc;

	if (!ctx || !p)
		return XDP_PASS;
	why = stack ? XFW_FP_STACK : xfw_fp_prechecks(p, iif, oif);
	if (why == XFW_FP_TAKEN)
		why = xfw_fp_csum_check(ctx, p);
	if (why != XFW_FP_TAKEN) {
		xfw_fp_count(why);
		return XDP_PASS;
	}
	/* The whole lookup this time: the neighbour (NO_NEIGH: the stack
	 * resolves it) and the route's MTU against the packet's length
	 * (FRAG_NEEDED: the stack fragments it or answers). */
	fib.ifindex = iif;
	xfw_fib_flow(&fib, p);
	fib.tot_len = p->l3len;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || fib.ifindex != oif) {
		xfw_fp_count(rc == BPF_FIB_LKUP_RET_SUCCESS ? XFW_FP_ROUTE : xfw_fp_why_route(rc));
		return XDP_PASS;
	}
	if (xfw_fp_trim(ctx, p) ||
	    (p->fam == 0 ? xfw_fp_rewrite4(ctx, p->l3_off) : xfw_fp_rewrite6(ctx, p->l3_off))) {
		xfw_fp_count(XFW_FP_HEADER);
		return XDP_PASS;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_PASS; /* not reached: the header was parsed */
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	xfw_fp_count(XFW_FP_TAKEN);
	return bpf_redirect(oif, 0);
}

#endif /* XFW_FASTPATH_H */
