/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mark_kernel.h — the mark a walk leaves the packet, where the kernel
 * would use it after the hook:
 *
 *  - XDP (xfw_xdp_mark_out): handed to the skb through the XDP metadata
 *    (mark_route.h), before the stack routes the packet. The kernel
 *    routes a received packet once, with the mark PREROUTING left it
 *    (xfw.c xfw_xdp_rerouted routed it so too): a mark set later (mangle
 *    INPUT, FORWARD, POSTROUTING) goes to the skb only when it routes the
 *    packet alike; else the skb gets the routing mark
 *    (docs/differences.md).
 *  - The walks stop where the kernel routes again only for a packet whose
 *    mark changed (an XFW_PROBE_MARKMOVED probe, then an XFW_ACT_REROUTE
 *    entry: internal/compiler mark_route.go); the hooks go on in
 *    xfw_xdp_rerouted and xfw_tc_rerouted (xfw.c).
 *  - TC egress (xfw_mark_out_route, xfw_mark_out_send): the host's packet
 *    whose mark mangle OUTPUT changed is routed again with it, as
 *    ip_route_me_harder does (xfw.c xfw_tc_rerouted walks POSTROUTING
 *    with the new device), and sent out of the new route with
 *    bpf_redirect_neigh, marked judged as nat OUTPUT's rerouted packets
 *    are (skb->tc_index XFW_NAT_OUT_MARK, nat_out.h).
 *
 * BPF route lookups need forwarding on (bpf_fib_lookup answers
 * BPF_FIB_LKUP_RET_FWD_DISABLED before any lookup): with forwarding off on
 * loopback, the host's packet keeps the route it had.
 *
 * Conventions: global functions, verified once. Addresses host order, as
 * in struct xfw_pkt.
 *
 * Includes: mark_route.h (the metadata, the lookup's mark), route.h
 * (xfw_route), xfw_maps.h (struct xfw_xdp_scratch), local.h, nat_out.h
 * (XFW_NAT_OUT_MARK).
 */
#ifndef XFW_MARK_KERNEL_H
#define XFW_MARK_KERNEL_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "mark_route.h"
#include "route.h"
#include "local.h"
#include "xfw_maps.h"
#include "nat_out.h"

/* xfw_xdp_mark_out hands the mark the walk left p (sc's packet) to the
 * kernel, when it is not 0 (the mark a frame arrives with at XDP). route
 * (chain << 32 | output ifindex, or XFW_ROUTE_PASS) is the route the
 * packet was judged with, routed with st.route_mark; iif its input
 * device. Returns 0, or -1 when the packet must be dropped: its mark
 * picked its route and the driver keeps no metadata. A global function. */
__attribute__((noinline)) int xfw_xdp_mark_out(struct xdp_md *ctx, struct xfw_xdp_scratch *sc,
					       __u64 route, __u32 iif)
{
	__u32 mark, fwd = (route >> 32) == XFW_CHAIN_FORWARD;

	if (!ctx || !sc)
		return 0;
	mark = sc->p.mark;
	if (mark != sc->st.route_mark) {
		sc->p.ttl += fwd; /* as the route lookup before FORWARD saw it */
		if (xfw_route(ctx, &sc->p, iif) != route)
			mark = sc->st.route_mark;
		sc->p.ttl -= fwd;
	}
	if (!mark || !xfw_mark_meta_put(ctx, mark))
		return 0;
	return sc->st.route_mark ? -1 : 0;
}

/* What xfw_mark_out_route answers for a packet the kernel's routing
 * refuses (ip_route_me_harder fails: the kernel drops it). */
#define XFW_MARK_OUT_NOROUTE (~0u)

/* The device and next hop of a route (bpf_fib_lookup's answer). */
/* xfw_mark_out_unicast reports whether p's destination is another
 * host's unicast address: not one of this host's (local table), not
 * multicast, not IPv4's limited broadcast. */
static __always_inline int xfw_mark_out_unicast(struct xfw_pkt *p)
{
	if (xfw_local_type(p->fam, p->dst_hi, p->dst_lo))
		return 0;
	if (p->fam == 0)
		return !XFW_V4_MULTICAST((__u32)p->dst_lo) && !XFW_V4_LBCAST((__u32)p->dst_lo);
	return !XFW_V6_MULTICAST(p->dst_hi);
}

/* xfw_mark_out_route routes the host's packet p again with the mark
 * mangle OUTPUT gave it, as ip_route_me_harder does, when it changed from
 * old (the mark its route was made with). Returns the new route's device
 * when the route changed (device or next hop), 0 when the packet keeps
 * its route (the same route; a local, broadcast or multicast
 * destination; no answer: forwarding off, a kernel without
 * BPF_FIB_LOOKUP_MARK), or XFW_MARK_OUT_NOROUTE (no route to another
 * host). A global function. */
__attribute__((noinline)) __u32 xfw_mark_out_route(struct __sk_buff *skb, struct xfw_pkt *p, __u32 old)
{
	struct xfw_out_hop now = {}, before = {};
	int rc;

	if (!skb || !p)
		return 0;
	rc = xfw_out_lookup(skb, p, p->mark, &now);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		break;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return XFW_MARK_OUT_NOROUTE;
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		/* No route (IPv6 answers so for a "prohibit" rule too), or
		 * a local, broadcast or multicast one: the route stays. */
		return xfw_mark_out_unicast(p) ? XFW_MARK_OUT_NOROUTE : 0;
	default:
		return 0;
	}
	rc = xfw_out_lookup(skb, p, old, &before);
	if ((rc == BPF_FIB_LKUP_RET_SUCCESS || rc == BPF_FIB_LKUP_RET_NO_NEIGH) &&
	    now.ifindex == before.ifindex && now.nh[0] == before.nh[0] && now.nh[1] == before.nh[1] &&
	    now.nh[2] == before.nh[2] && now.nh[3] == before.nh[3])
		return 0;
	return now.ifindex;
}

/* xfw_mark_out_send sends an accepted packet xfw_mark_out_route routed
 * anew out of its new device oif: the TC verdict. bpf_redirect_neigh
 * without a next hop routes it there itself, with skb->mark (the skb gets
 * that route) and resolves the neighbour; that device's TC egress lets it
 * pass, judged. */
static __always_inline int xfw_mark_out_send(struct __sk_buff *skb, __u32 oif)
{
	skb->tc_index = XFW_NAT_OUT_MARK;
	return bpf_redirect_neigh(oif, 0, 0, 0);
}

#endif /* XFW_MARK_KERNEL_H */
