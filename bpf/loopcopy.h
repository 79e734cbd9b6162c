/* SPDX-License-Identifier: GPL-2.0 */
/*
 * loopcopy.h — the copy of a broadcast or multicast packet the host
 * delivers to itself, judged in PREROUTING and INPUT.
 *
 * When the host sends a broadcast (SO_BROADCAST) or a multicast datagram
 * to a group its output device joined (IP_MULTICAST_LOOP, IPV6_MULTICAST_LOOP
 * on: the default), the kernel loops a copy back (ip_mc_output,
 * ip6_finish_output2 → dev_loopback_xmit → netif_rx) that passes raw and
 * mangle PREROUTING, mangle, filter and security INPUT with the output
 * device as its input device (not nat's: the connection OUTPUT opened
 * comes with it, confirmed at the copy's POSTROUTING). The XDP hook never
 * sees it; the device's TCX ingress does, first among the stack's hooks:
 * skb->pkt_type PACKET_LOOPBACK, no Ethernet header (the IP header at
 * offset 0, skb->protocol its protocol). xfw_tc_ingress hands it here.
 *
 * The state is the one OUTPUT gives the original (xfw_ct_loopcopy: the
 * original is tracked once, at its TC egress, which may run before or
 * after this). -m pkttype sees multicast for IPv4 multicast and every
 * IPv6 copy, broadcast otherwise (pkttype_mt). REJECT drops without a
 * reply (the kernel answers no broadcast or multicast destination); no
 * nat verdict can come (nat's chains skip a confirmed connection). IPv6
 * copies of a fragmented datagram are fragments (looped after
 * ip6_fragment): later ones pass unjudged. The walk's rewrites (TTL, HL,
 * TOS, DSCP) and mark go on with the copy.
 *
 * Includes: xfw.c's hooks (xfw_judge, xfw_emit_logs_tc), parse.h, ct*.h.
 */
#ifndef XFW_LOOPCOPY_H
#define XFW_LOOPCOPY_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"

/* xfw_tc_parse_noeth parses the skb, which starts with its network header,
 * into p (xfw_parse_noeth and the transport header). A global function. */
__attribute__((noinline)) int xfw_tc_parse_noeth(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 pull;
	int rc;

	if (!skb || !p)
		return XFW_PARSE_PASS;
	pull = skb->len < XFW_TC_PULL ? skb->len : XFW_TC_PULL;
	bpf_skb_pull_data(skb, pull);
	rc = xfw_parse_noeth(p, skb, (void *)(long)skb->data, (void *)(long)skb->data_end, skb->len,
			     bpf_ntohs(skb->protocol));
	if (rc == XFW_PARSE_L4) {
		xfw_parse_l4(p, (void *)(long)skb->data, (void *)(long)skb->data_end);
		rc = XFW_PARSE_JUDGE;
	}
	return rc;
}

/* xfw_loopcopy_pkttype is -m pkttype's type of the copy (pkttype_mt for
 * PACKET_LOOPBACK). */
static __always_inline __u8 xfw_loopcopy_pkttype(const struct xfw_pkt *p)
{
	/* IPv4 multicast: 224.0.0.0/4, the top four bits of the address
	 * (dst_lo holds an IPv4 address in its low 32 bits). */
	if (p->fam == 1 || ((p->dst_lo >> 28) & 0xf) == 0xe)
		return PACKET_MULTICAST;
	return PACKET_BROADCAST;
}

/* xfw_loopcopy_walk judges the parsed copy in sc on device iif: its
 * connection state, the INPUT walk from raw PREROUTING on (resumed past
 * PREROUTING when a mark there asks the kernel's routing again, which
 * the copy's route does not take: it keeps its own), its LOG lines.
 * Returns the verdict. */
static __always_inline __u32 xfw_loopcopy_walk(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					       __u32 iif)
{
	struct xfw_pkt *p = &sc->p;
	struct xfw_pending *st = &sc->st;
	struct xfw_family_cfg *fc;
	struct xfw_ct_scratch *cs;
	__u32 rj = 0, verdict;

	if (xfw_ct_active(st->slot)) {
		cs = xfw_ct_scratch_get(1);
		if (!cs)
			return XFW_ACT_DROP;
		xfw_ct_load_tc(skb, p, cs);
		cs->stack_icmp = 0;
		p->ct = xfw_ct_track(p, cs, XFW_CTM_LOOPCOPY);
		cs->pending = XFW_CTP_NONE; /* nothing to confirm */
	}
	if (xfw_prewalk_used(st->slot)) {
		xfw_ext6_tc(skb, p, st->slot);
		xfw_preds_tc(skb, p, st->slot);
		xfw_hdr4_tc(skb, p, st->slot);
	}
	fc = bpf_map_lookup_elem(&xfw_cfg, &st->slot);
	if (!fc)
		return XFW_ACT_DROP;
	/* The copy's own POSTROUTING (its OUTPUT was the original's): the
	 * OUTPUT walk's POSTROUTING segments, with no owner (a clone has
	 * no socket); nat's skips it as a confirmed connection, as the
	 * original's. */
	if (fc->post_start[XFW_CHAIN_OUTPUT]) {
		st->start = fc->post_start[XFW_CHAIN_OUTPUT];
		verdict = xfw_judge(p, XFW_CHAIN_OUTPUT, 0, iif, st, &rj);
		st->start = 0;
		if (st->nlogs)
			xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, iif);
		st->nlogs = 0;
		if (verdict != XFW_ACT_ACCEPT)
			return XFW_ACT_DROP;
	}
	verdict = xfw_judge(p, XFW_CHAIN_INPUT, iif, 0, st, &rj);
	if (verdict == XFW_ACT_REROUTE) {
		if (st->nlogs)
			xfw_emit_logs_tc(skb, sc, XFW_CHAIN_INPUT, iif, 0);
		st->nlogs = 0;
		if (!fc->reroute[XFW_CHAIN_INPUT])
			return XFW_ACT_DROP;
		st->start = fc->reroute[XFW_CHAIN_INPUT];
		verdict = xfw_judge(p, XFW_CHAIN_INPUT, iif, 0, st, &rj);
		st->start = 0;
	}
	if (st->nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_INPUT, iif, 0);
	st->nlogs = 0;
	return verdict;
}

/* xfw_tc_loopcopy judges the copy in skb (skb->pkt_type PACKET_LOOPBACK)
 * and returns the TCX verdict: dropped, or on to the next program with
 * the mark the walk left. Bracketed for quiescence, with TC's scratch (TC
 * egress on this CPU never runs at the same time: netif_rx queues the
 * copy to the backlog, which runs with bottom halves off). A global
 * function. */
__attribute__((noinline)) int xfw_tc_loopcopy(struct __sk_buff *skb)
{
	struct xfw_xdp_scratch *sc;
	struct xfw_inflight *f;
	__u32 one = 1, verdict = XFW_ACT_ACCEPT;

	if (!skb)
		return TC_ACT_SHOT;
	if (xfw_skb_away(skb))
		return XFW_TCX_NEXT;
	f = xfw_enter();
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &one);
	if (sc && xfw_tc_parse_noeth(skb, &sc->p) == XFW_PARSE_JUDGE && !sc->p.frag) {
		sc->st.slot = xfw_active_slot(sc->p.fam ? 1 : 0);
		sc->st.hook = XFW_SCRATCH_TC;
		sc->st.nlogs = 0;
		sc->st.start = 0;
		sc->st.end = 0;
		sc->st.raw_done = 0;
		sc->st.unrouted = 0;
		sc->p.mark = skb->mark;
		sc->st.route_mark = skb->mark;
		sc->p.owner = 0; /* no socket in INPUT */
		sc->p.pkttype = xfw_loopcopy_pkttype(&sc->p);
		if (sc->st.slot != XFW_NO_SLOT)
			verdict = xfw_loopcopy_walk(skb, sc, skb->ifindex);
		/* TTL, HL, TOS, DSCP rewrites of its chains (mangle_apply.h:
		 * the helpers unshare the clone's data first). */
		if (verdict == XFW_ACT_ACCEPT && sc->p.mangle && xfw_mangle_tc(skb, &sc->p) < 0)
			verdict = XFW_ACT_DROP;
		/* MARK rules' mark goes on with the packet (mark.h). */
		if (verdict == XFW_ACT_ACCEPT && sc->p.mark != skb->mark)
			skb->mark = sc->p.mark;
	}
	xfw_leave(f);
	return verdict == XFW_ACT_ACCEPT ? XFW_TCX_NEXT : TC_ACT_SHOT;
}

#endif /* XFW_LOOPCOPY_H */
