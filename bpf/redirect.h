/* SPDX-License-Identifier: GPL-2.0 */
/*
 * redirect.h — the kernel's ICMP redirects for packets FORWARD drops.
 *
 * A packet whose route leaves by the interface it came in on makes the
 * kernel send a redirect (ip_forward → ip_rt_send_redirect; ip6_forward →
 * ndisc_send_redirect) before the FORWARD hook, whatever FORWARD then
 * decides. xfw judges FORWARD at XDP; a packet it dropped there would
 * never reach the stack, and no redirect would go out. So a FORWARD DROP
 * of such a hairpin is not dropped at XDP: the packet goes on to the
 * stack marked, the kernel routes it and sends the redirect itself (its
 * own conditions: send_redirects, the source on the link, shared_media,
 * the IPv6 target's scope, and its own per-peer rate limits), and the
 * marked packet is dropped, uncounted, when it reaches TC egress:
 *
 *   XDP (xfw_rd_xdp): XDP metadata { XFW_RD_META_MAGIC, iif }, the
 *     destination MAC zeroed (the frame is for another host until
 *     xfw_tc_ingress takes it: fail closed, as reject_send.h's replies).
 *   xfw_tc_ingress (reject_send.h) → xfw_rd_tc_ingress: skb->tc_index
 *     XFW_RD_MARK, the frame for this host again (PACKET_HOST).
 *   The stack: ip_forward / ip6_forward, the redirect, neighbour output.
 *   xfw_tc_egress (xfw.c): a packet marked XFW_RD_MARK is dropped first.
 *
 * Never fail open: the packet is dropped at XDP as before when the frame
 * is tagged (VLAN), comes from loopback, when its route (looked up again
 * from the frame's own header, after any translation was undone) does not
 * leave by iif or its next hop's neighbour is not resolved (the stack
 * would otherwise resolve it: ARP / neighbour solicitations, "host
 * unreachable" to the sender, where the kernel's FORWARD drop makes
 * neither), or when the metadata cannot be set (a driver without XDP
 * metadata). Without xfw_tc_ingress the stack drops the frame for another
 * host (PACKET_OTHERHOST) before any hook.
 *
 * Conventions: xfw_rd_xdp is a global function with its own stack (the
 * FIB request), called only for that verdict; xfw_rd_tc_ingress one
 * verified with xfw_tc_ingress.
 *
 * Includes: common.h, parse.h (struct xfw_pkt), local.h, route.h
 * (XFW_MAX_L3_OFF), reject_send.h
 * (struct xfw_rj_meta, XFW_RD_META_MAGIC).
 */
#ifndef XFW_REDIRECT_H
#define XFW_REDIRECT_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"
#include "route.h"
#include "reject_send.h"

/* skb->tc_index of a packet passed on only for the kernel's redirect:
 * xfw_tc_egress drops it. (nat_out.h's XFW_NAT_OUT_MARK is 0x78f1.) */
#define XFW_RD_MARK 0x78f2

#ifndef AF_INET6
#define AF_INET6 10 /* bpf_fib_lookup's family */
#endif

/* xfw_rd_fib fills fib from the IP header at l3_off in ctx's frame (the
 * packet as the stack will route it). Returns 0, or -1 when it cannot
 * be read. */
static __always_inline int xfw_rd_fib(struct xdp_md *ctx, __u32 l3_off, int v6,
				      struct bpf_fib_lookup *fib)
{
	if (v6) {
		struct ipv6hdr ip6;

		if (bpf_xdp_load_bytes(ctx, l3_off, &ip6, sizeof(ip6)))
			return -1;
		fib->family = AF_INET6;
		fib->l4_protocol = ip6.nexthdr;
		__builtin_memcpy(fib->ipv6_src, &ip6.saddr, sizeof(fib->ipv6_src));
		__builtin_memcpy(fib->ipv6_dst, &ip6.daddr, sizeof(fib->ipv6_dst));
		return 0;
	}
	{
		struct iphdr ip;

		if (bpf_xdp_load_bytes(ctx, l3_off, &ip, sizeof(ip)))
			return -1;
		fib->family = AF_INET;
		fib->tos = ip.tos;
		fib->l4_protocol = ip.protocol;
		fib->ipv4_src = ip.saddr;
		fib->ipv4_dst = ip.daddr;
	}
	return 0;
}

/* xfw_rd_xdp decides the fate of packet p, received on iif (no VLAN),
 * that FORWARD dropped and whose route leaves by iif: handed on to the
 * stack for the kernel's redirect (XDP_PASS, marked), or dropped here
 * (XDP_DROP). A global function, verified once. */
__attribute__((noinline)) int xfw_rd_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 iif)
{
	struct bpf_fib_lookup fib;
	struct xfw_rj_meta *m;
	struct ethhdr *eth;
	void *data;

	if (!ctx || !p || p->vlan || iif == XFW_LOOPBACK_IFINDEX || ctx->ingress_ifindex != iif ||
	    p->l3_off > XFW_MAX_L3_OFF)
		return XDP_DROP;
	__builtin_memset(&fib, 0, sizeof(fib));
	fib.ifindex = iif;
	if (xfw_rd_fib(ctx, p->l3_off, p->fam, &fib))
		return XDP_DROP;
	/* Without BPF_FIB_LOOKUP_SKIP_NEIGH: SUCCESS only with a valid
	 * neighbour entry for the next hop. */
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), 0) != BPF_FIB_LKUP_RET_SUCCESS || fib.ifindex != iif)
		return XDP_DROP;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xfw_rj_meta)))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	m = (void *)(long)ctx->data_meta;
	eth = data;
	if ((void *)(m + 1) > data || (void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	__builtin_memset(eth->h_dest, 0, ETH_ALEN);
	m->magic = XFW_RD_META_MAGIC;
	m->ifindex = iif;
	return XDP_PASS;
}

/* xfw_rd_tc_ingress takes the frame xfw_rd_xdp marked: marks the skb for
 * xfw_tc_egress, makes it this host's again and lets the stack have it
 * (no later TCX program: nothing may redirect it past the drop). A
 * global function. */
__attribute__((noinline)) int xfw_rd_tc_ingress(struct __sk_buff *skb)
{
	if (!skb)
		return TC_ACT_SHOT;
	if (bpf_skb_change_type(skb, PACKET_HOST))
		return TC_ACT_SHOT;
	/* TCX_PASS sets tc_index from tc_classid (tcx_action_code). */
	skb->tc_classid = XFW_RD_MARK;
	skb->tc_index = XFW_RD_MARK;
	return TC_ACT_OK;
}

/* xfw_rd_tc_egress_drop reports whether skb is a packet xfw_rd_xdp passed
 * on only for the redirect: FORWARD dropped it, xfw_tc_egress drops it. */
static __always_inline int xfw_rd_tc_egress_drop(struct __sk_buff *skb)
{
	return skb->tc_index == XFW_RD_MARK;
}

#endif /* XFW_REDIRECT_H */
