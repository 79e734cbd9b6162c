/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bridge_tc.h — the judgement of frames bridged from port to port, at the
 * output port's TC egress hook (bridge.h explains where xfw sees bridged
 * traffic): FORWARD with -i and -o the bridge, the ports for -m physdev,
 * connection tracking as in the other hooks.
 *
 * Included by xfw.c after xfw_judge, xfw_tc_parse and xfw_tc_nat_src,
 * which it uses.
 * Includes: bridge.h, ct.h, log.h, frag.h, tcpopt.h, ip6ext.h, pred.h,
 * hdr4.h, nat.h (through xfw.c).
 */
#ifndef XFW_BRIDGE_TC_H
#define XFW_BRIDGE_TC_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_packet.h>
#include "bridge.h"

/* xfw_br_walk judges the bridged frame in sc->p in FORWARD, tracked when
 * the generation uses connection tracking, and returns the verdict; br
 * is the bridge. */
static __always_inline __u32 xfw_br_walk(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					 struct xfw_ct_scratch *cs, __u32 br)
{
	struct xfw_pkt *p = &sc->p;
	struct xfw_pending *st = &sc->st;
	__u32 rj = 0;

	if (cs && xfw_ct_fast(p, st->slot, XFW_CHAIN_FORWARD)) {
		st->nlogs = 0;
		return XFW_ACT_ACCEPT;
	}
	xfw_tcpmss_set_skb(skb, p, &sc->opt, st->slot);
	if (xfw_prewalk_used(st->slot)) {
		xfw_ext6_tc(skb, p, st->slot);
		xfw_preds_tc(skb, p, st->slot);
		xfw_hdr4_tc(skb, p, st->slot);
	}
	return xfw_judge(p, XFW_CHAIN_FORWARD, br, br, st, &rj);
}

/* xfw_br_nat_pre translates the destination of a bridged frame of a
 * translated connection before FORWARD (br_netfilter's PREROUTING): a
 * DNAT's original direction, an SNAT's reply, with ports (nat.h) or
 * without (an echo, a protocol without ports: nat_query.h). Returns 1
 * when it did, 0 when not, -1 when the frame must be dropped. */
static __always_inline int xfw_br_nat_pre(struct __sk_buff *skb, struct xfw_pkt *p)
{
	if (!xfw_nat_enabled())
		return 0;
	if (xfw_nat_translatable(p))
		return xfw_nat_pre_tc(skb, p);
	return xfw_natq_out_pre_tc(skb, p);
}

/* xfw_tc_bridged is the TC egress hook's work on a bridge port (port: the
 * port's xfw_br_port): a frame bridged to it is judged in FORWARD; any
 * other passes. A frame of a connection xfw translated is translated as
 * br_netfilter's conntrack does: its destination before FORWARD (a DNAT's
 * original direction, an SNAT's reply), its source after (a DNAT's reply,
 * an SNAT's original direction; an ICMP error's quote). REJECT drops
 * (the kernel answers from the host; xfw does not), so do new NAT
 * verdicts (xfw does not open translated connections here). A global
 * function, verified once. */
__attribute__((noinline)) int xfw_tc_bridged(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					     __u64 port)
{
	struct xfw_ct_scratch *cs = 0;
	struct xfw_pkt *p;
	struct xfw_pending *st;
	__u32 br = port >> 16, verdict;

	if (!skb || !sc || !xfw_br_bridged(skb->ingress_ifindex, br) || skb->vlan_present)
		return TC_ACT_OK;
	p = &sc->p;
	st = &sc->st;
	if (xfw_tc_parse(skb, p) != XFW_PARSE_JUDGE || p->vlan || !(port & xfw_brnf_bit(p)))
		return TC_ACT_OK;
	p->mark = skb->mark;
	p->owner = 0; /* no socket */
	p->physin = skb->ingress_ifindex;
	p->physout = skb->ifindex;
	if (!p->dst_unicast)
		p->pkttype = xfw_mac48(p->dst_mac) == XFW_BR_MAC_BCAST ? PACKET_BROADCAST
								      : PACKET_MULTICAST;
	st->slot = xfw_active_slot(p->fam ? 1 : 0);
	st->hook = XFW_SCRATCH_TC;
	if (st->slot == XFW_NO_SLOT)
		return TC_ACT_OK;
	if (xfw_ct_active(st->slot)) {
		/* Tracking reassembles before PREROUTING: later fragments
		 * follow their datagram's verdict (frag.h). */
		if (p->frag)
			return xfw_frag_later_tc(skb, p, 1);
		cs = xfw_ct_scratch_get(1);
		/* PREROUTING's translation of a translated connection's
		 * frame (nat.h): FORWARD sees it translated. */
		if (cs && xfw_br_nat_pre(skb, p) < 0)
			return TC_ACT_SHOT;
		if (cs) {
			xfw_ct_load_tc(skb, p, cs);
			cs->stack_icmp = 0;
			p->ct = xfw_ct_track(p, cs, XFW_CTM_TRACK);
		}
	}
	verdict = xfw_br_walk(skb, sc, cs, br);
	if (verdict == XFW_ACT_ACCEPT && cs)
		xfw_ct_confirm(cs);
	if (cs)
		xfw_frag_note_tc(skb, p, 1, verdict);
	if (st->nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_FORWARD, br, br);
	if (verdict != XFW_ACT_ACCEPT)
		return TC_ACT_SHOT;
	/* MARK rules' mark goes on with the frame (mark.h). */
	if (p->mark != skb->mark)
		skb->mark = p->mark;
	/* POSTROUTING's: a translated connection's reply gets its original
	 * source back, an ICMP error about one its quote (xfw.c). */
	if (cs && xfw_nat_enabled())
		return xfw_tc_nat_src(skb, p);
	return TC_ACT_OK;
}

#endif /* XFW_BRIDGE_TC_H */
