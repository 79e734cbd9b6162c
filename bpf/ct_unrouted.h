/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_unrouted.h — connection tracking of the packets the XDP hook passes
 * to the stack unjudged because the kernel drops them after PREROUTING and
 * before any other chain: IPv4 martians (ip_route_input_slow), IPv4
 * options the stack refuses (ip_rcv_options), no route, TTL or hop limit
 * ending, what ip_forward / ip6_forward refuse before the FORWARD hook.
 *
 * The kernel's conntrack saw each of them at PREROUTING (nf_conntrack_in)
 * before its routing dropped it: a packet of a known connection advanced
 * it (a reply set SEEN_REPLY, a TCP segment moved the state, an RST closed
 * it), and a new connection's unconfirmed entry died with the dropped skb.
 * xfw_ct_unrouted does the same: it tracks the packet and forgets the
 * pending entry of a new connection. Not the packets the kernel drops
 * before the hook: IPv6 martians (ip6_rcv_core: multicast or loopback
 * source, loopback destination, interface-local multicast), an IPv6
 * hop-by-hop header it refuses, frames for another host, VLANs without a
 * device; nor loopback traffic (tracked once, at OUTPUT) and later
 * fragments (the first one stands for its datagram, frag.h).
 *
 * xfw_ct_unrouted_tc does the same at TC egress for the host's packets the
 * nat OUTPUT hook drops, its translated destination without a route; not
 * for one raw OUTPUT exempts from tracking, which the kernel neither
 * tracks nor translates (xfw.c xfw_tc_rawout, when raw OUTPUT decides on
 * the packet alone: such a packet is not translated, so it never gets
 * here; docs/differences.md for the other raw OUTPUT chains).
 *
 * Conventions: xfw_ct_unrouted and xfw_ct_unrouted_tc are global functions
 * (verified once), called only while the generation tracks (xfw_ct_active).
 *
 * Includes: common.h, parse.h, route.h (xfw_martian), ct.h.
 */
#ifndef XFW_CT_UNROUTED_H
#define XFW_CT_UNROUTED_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "route.h"
#include "ct.h"

/* xfw_ct_unrouted tracks p, received on iif and about to be passed to the
 * stack, which drops it, when the kernel's PREROUTING would have tracked
 * it (see above); a new connection is not confirmed. Returns 0. */
__attribute__((noinline)) int xfw_ct_unrouted(struct xdp_md *ctx, struct xfw_pkt *p, __u32 iif)
{
	struct xfw_ct_scratch *cs;

	if (!ctx || !p)
		return 0;
	if (iif == XFW_LOOPBACK_IFINDEX || p->frag)
		return 0;
	/* ip6_rcv_core drops IPv6 martians before the PREROUTING hook. */
	if (p->fam == 1 && xfw_martian(p))
		return 0;
	cs = xfw_ct_scratch_get(0);
	if (!cs)
		return 0;
	/* Tracked before routing already (xfw.c xfw_xdp_nat_pre). */
	if (p->nat_pre != XFW_NATPRE_TRACKED) {
		xfw_ct_load_xdp(ctx, p, cs);
		xfw_ct_track(p, cs, XFW_CTM_TRACK);
	}
	/* The unconfirmed entry dies with the skb. */
	cs->pending = XFW_CTP_NONE;
	return 0;
}

/* xfw_ct_unrouted_tc tracks p, a packet of the host's own that the TC
 * egress hook drops because the destination nat OUTPUT's hook gave it back
 * (the reply of a connection nat INPUT's SNAT translated, a later packet
 * of one nat OUTPUT's DNAT translated) has no route: the kernel's
 * conntrack saw it at LOCAL_OUT before ip_route_me_harder dropped it in
 * the nat hook, and filter OUTPUT never did. The host's RST answering a
 * connection's first packet so closes the connection (its only reply an
 * RST), though it never leaves: a later connection may take its
 * translated tuple (an SNAT to a single port). A new connection is not
 * confirmed. Returns 0. */
__attribute__((noinline)) int xfw_ct_unrouted_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	struct xfw_ct_scratch *cs;

	if (!skb || !p || p->frag)
		return 0;
	cs = xfw_ct_scratch_get(1);
	if (!cs)
		return 0;
	xfw_ct_load_tc(skb, p, cs);
	xfw_ct_track(p, cs, XFW_CTM_TRACK);
	cs->pending = XFW_CTP_NONE;
	return 0;
}

#endif /* XFW_CT_UNROUTED_H */
