/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bridge_tc.h — the judgement of frames bridged from port to port, at the
 * output port's TC egress hook (bridge.h explains where xfw sees bridged
 * traffic): FORWARD with -i and -o the bridge, the ports for -m physdev,
 * connection tracking as in the other hooks.
 *
 * Included by xfw.c after xfw_judge, xfw_tc_parse and xfw_tc_nat_src,
 * which it uses.
 * Includes: bridge.h, bridge_reject.h, ct.h, log.h, frag.h, tcpopt.h, ip6ext.h, pred.h,
 * hdr4.h, nat.h (through xfw.c).
 */
#ifndef XFW_BRIDGE_TC_H
#define XFW_BRIDGE_TC_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_packet.h>
#include "bridge.h"
#include "bridge_reject.h"
#include "bridge_redo.h"

/* xfw_br_dnat applies nat PREROUTING's DNAT verdict (its address and port
 * in st) to a connection's first frame p bridged from port to port (cs:
 * its tracking, a new connection pending), as br_netfilter does when the
 * bridge reaches the translated destination at the frame's destination
 * MAC: translated (nat.h, nat_query.h), the mapping pending until the
 * verdict confirms it. Returns 0; 1, untranslated, when the bridge reaches
 * it at another neighbour's MAC (np->fib.dmac: xfw_br_redo_send); or -1
 * when the frame must be dropped: REDIRECT (the bridge's own address,
 * which the kernel passes up), a destination elsewhere (the kernel routes
 * it), a clash, a failed write. A global function. */
__attribute__((noinline)) int xfw_br_dnat(struct __sk_buff *skb, struct xfw_pkt *p,
					  struct xfw_pending *st, struct xfw_ct_scratch *cs, __u32 br)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_range *r;
	int port;

	if (!skb || !p || !st || !cs || !np)
		return -1;
	np->pending = 0;
	r = &np->range;
	port = xfw_br_dnat_dst(p, st, np);
	if (port < 0)
		return -1;
	if (!xfw_br_fib(skb, p, np, br, np->range.addr_hi, np->range.addr, port))
		return -1;
	/* Another neighbour of the bridge: sent back into it (bridge_redo.h). */
	if (xfw_mac48(np->fib.dmac) != xfw_mac48(p->dst_mac))
		return 1;
	if (!xfw_nat_translatable(p))
		return xfw_natq_dnat_tc(skb, p, cs) ? -1 : 0;
	if (xfw_nat_dnat_prep(p, cs, np, r->addr_hi, r->addr, port))
		return -1;
	if (xfw_nat_rw_tc(skb, p, 1, np->val[XFW_NAT_PD].to_hi, np->val[XFW_NAT_PD].to_addr, port))
		return -1;
	np->pending = XFW_NAT_F_DST;
	return 0;
}

/* xfw_br_snat applies nat POSTROUTING's SNAT or MASQUERADE verdict (its
 * address and port in st; MASQUERADE's address the bridge br's, as the
 * kernel's masquerade takes the bridge for the output device) to a
 * connection's first frame p bridged from port to port (cs: its
 * tracking, 0 when untracked: dropped, as the kernel's nat needs it).
 * The frame's source is rewritten after the verdict (xfw_tc_nat_src), as
 * a forwarded packet's; replies to the new source come to the bridge's
 * own MAC and are translated back there. Returns the verdict. */
static __always_inline __u32 xfw_br_snat(struct __sk_buff *skb, struct xfw_pkt *p,
					 struct xfw_pending *st, struct xfw_ct_scratch *cs, __u32 br)
{
	if (!cs)
		return XFW_ACT_DROP;
	if (p->fam == 1 && !st->nat_addr)
		xfw_nat6_masq_tc(skb, p, br);
	return xfw_nat_snat(p, cs, st->nat_addr, st->nat_port, br) ? XFW_ACT_DROP : XFW_ACT_ACCEPT;
}

/* What xfw_br_walk returns for a first frame whose DNAT sends it to
 * another neighbour of the bridge (xfw_br_redo_send); no entry action. */
#define XFW_BR_REDO 0xff

/* xfw_br_walk judges the bridged frame in sc->p in FORWARD, tracked when
 * the generation uses connection tracking, and returns the verdict; br
 * is the bridge. A DNAT verdict translates the frame (xfw_br_dnat) and
 * the walk resumes after the nat PREROUTING segment, as the kernel's
 * FORWARD sees the translated frame; its LOG lines so far are emitted
 * before the frame changes. A first frame the bridge's XDP hook sent back
 * into the bridge (rd, bridge_redo.h) comes with its walk's DNAT verdict:
 * translated, then the walk resumes (dropped when the generation changed
 * in between). */
static __always_inline __u32 xfw_br_walk(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					 struct xfw_ct_scratch *cs, __u32 br, struct xfw_br_redo *rd)
{
	struct xfw_pkt *p = &sc->p;
	struct xfw_pending *st = &sc->st;
	struct xfw_family_cfg *fc;
	__u32 rj = 0, verdict, slot;

	if (!rd && cs && xfw_ct_fast(p, st->slot, XFW_CHAIN_FORWARD)) {
		st->nlogs = 0;
		return XFW_ACT_ACCEPT;
	}
	xfw_tcpmss_set_skb(skb, p, &sc->opt, st->slot);
	if (xfw_prewalk_used(st->slot)) {
		xfw_ext6_tc(skb, p, st->slot);
		xfw_preds_tc(skb, p, st->slot);
		xfw_hdr4_tc(skb, p, st->slot);
	}
	if (rd) {
		if (rd->slot != st->slot)
			return XFW_ACT_DROP;
		st->nat_addr = rd->nat_addr;
		st->nat_port = rd->nat_port;
		st->nlogs = 0;
		p->mark = rd->mark;
		verdict = XFW_ACT_DNAT;
	} else {
		verdict = xfw_judge(p, XFW_CHAIN_FORWARD, br, br, st, &rj);
	}
	p->reject = rj; /* the REJECT type, for xfw_br_reject */
	if (verdict == XFW_ACT_SNAT)
		return xfw_br_snat(skb, p, st, cs, br);
	if (verdict != XFW_ACT_DNAT)
		return verdict;
	if (st->nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_FORWARD, br, br);
	st->nlogs = 0;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!cs || !fc || !fc->nat_resume[XFW_CHAIN_FORWARD])
		return XFW_ACT_DROP;
	verdict = (__u32)xfw_br_dnat(skb, p, st, cs, br);
	if (verdict)
		return verdict == 1 && !rd ? XFW_BR_REDO : XFW_ACT_DROP;
	st->start = fc->nat_resume[XFW_CHAIN_FORWARD];
	verdict = xfw_judge(p, XFW_CHAIN_FORWARD, br, br, st, &rj);
	p->reject = rj;
	st->start = 0;
	if (verdict == XFW_ACT_SNAT)
		return xfw_br_snat(skb, p, st, cs, br);
	/* nat chains after PREROUTING hold no DNAT. */
	return verdict == XFW_ACT_DNAT ? XFW_ACT_DROP : verdict;
}

/* xfw_br_dnat_undo gives a bridged first frame that a DNAT verdict
 * translated (xfw_br_dnat, still pending) and REJECT answers with an ICMP
 * error its destination back: the kernel's nat translates that error
 * (nf_nat_icmp_reply_translation at POSTROUTING), which then quotes the
 * frame as it came and comes from the destination it was sent to. (A
 * reset leaves translated: no nat hook sees it.) Returns 1 when it did. */
static __always_inline int xfw_br_dnat_undo(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_key *k;
	int rc;

	if (!np || !(np->pending & XFW_NAT_F_DST))
		return 0;
	k = &np->key[XFW_NAT_PD];
	if (xfw_nat_translatable(p))
		rc = xfw_nat_rw_tc(skb, p, 1, k->daddr_hi, k->daddr, k->dport);
	else if (p->fam)
		rc = xfw_natq6_addr_tc(skb, p, 1, k->daddr_hi, k->daddr);
	else
		rc = xfw_natq_addr_tc(skb, p, 1, (__u32)k->daddr);
	return rc == 0;
}

/* xfw_br_pre_tc is xfw_nat_pre_tc for the bridged frame p (TCP, UDP,
 * ...), after a later frame whose connection translates it to another
 * neighbour of its bridge is sent there (xfw_br_redo_later_tc; one sent
 * back already has that neighbour's MAC): -1 then, this copy dropped. A
 * global function. */
__attribute__((noinline)) int xfw_br_pre_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	if (!skb || !p || xfw_br_redo_later_tc(skb, p, xfw_br_port(skb->ifindex) >> 16) >= 0)
		return -1;
	return xfw_nat_pre_tc(skb, p);
}

/* xfw_br_nat_pre translates the destination of a bridged frame of a
 * translated connection before FORWARD (br_netfilter's PREROUTING): a
 * DNAT's original direction, an SNAT's reply, with ports (nat.h) or
 * without (an echo, a protocol without ports: nat_query.h); with ports,
 * one for another neighbour of the bridge is sent there first
 * (xfw_br_pre_tc). Returns 1 when it did, 0 when not, -1 when the frame
 * must be dropped. */
static __always_inline int xfw_br_nat_pre(struct __sk_buff *skb, struct xfw_pkt *p)
{
	if (!xfw_nat_enabled())
		return 0;
	if (xfw_nat_translatable(p))
		return xfw_br_pre_tc(skb, p);
	return xfw_natq_out_pre_tc(skb, p);
}

/* xfw_br_pppoe reports whether the bridge of port (its xfw_br_port)
 * passes the IP datagrams of PPPoE session frames to iptables and skb is
 * one (br_netfilter's is_pppoe_ip reads skb->protocol). */
static __always_inline int xfw_br_pppoe(struct __sk_buff *skb, __u64 port)
{
	return (port & XFW_IF_BRPPPOE) && skb->protocol == bpf_htons(XFW_ETH_P_PPP_SES);
}

/* xfw_tc_bridged is the TC egress hook's work on a bridge port (port: the
 * port's xfw_br_port): a frame bridged to it is judged in FORWARD; any
 * other passes. A frame of a connection xfw translated is translated as
 * br_netfilter's conntrack does: its destination before FORWARD (a DNAT's
 * original direction, an SNAT's reply), its source after (a DNAT's reply,
 * an SNAT's original direction; an ICMP error's quote). A DNAT verdict
 * for a connection's first frame translates it when the bridge reaches
 * the new destination at the frame's destination MAC (xfw_br_dnat), else
 * drops it. An SNAT or MASQUERADE verdict translates its source
 * (xfw_br_snat). REJECT answers as the kernel's does (bridge_reject.h).
 * A global function, verified once. */
__attribute__((noinline)) int xfw_tc_bridged(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					     __u64 port)
{
	struct xfw_ct_scratch *cs = 0;
	struct xfw_br_redo *rd = 0;
	struct xfw_pkt *p;
	struct xfw_pending *st;
	__u32 br = port >> 16, verdict, undone = 0;
	__u64 redo;
	int tr;

	/* A tag the receive took out of the frame (every tag a port's
	 * receive sees first): br_netfilter judges the frame inside it with
	 * bridge-nf-filter-vlan-tagged, as an untagged one (-i and -o the
	 * bridge); the frame leaves with its tag. A PPPoE session frame's
	 * IP datagram (skb->protocol the one inside a tag) with
	 * bridge-nf-filter-pppoe-tagged, tagged or not: the frame leaves with
	 * its PPPoE header. */
	if (!skb || !sc ||
	    (skb->vlan_present && !(port & XFW_IF_BRVLAN) && !xfw_br_pppoe(skb, port)))
		return TC_ACT_OK;
	/* The input port; of a frame xfw sent back into the bridge, the one
	 * it came in by (bridge_redo.h). */
	redo = xfw_br_redo_tc(skb, br);
	if (!xfw_br_bridged((__u32)redo, br))
		return TC_ACT_OK;
	p = &sc->p;
	st = &sc->st;
	if (xfw_tc_parse(skb, p, xfw_br_pppoe(skb, port)) != XFW_PARSE_JUDGE ||
	    (p->vlan && p->vlan != XFW_VLAN_PPPOE) || !(port & xfw_brnf_bit(p)))
		return TC_ACT_OK;
	/* A first frame's DNAT verdict (a later frame's connection translates
	 * it: xfw_br_nat_pre). */
	if ((redo >> 32) & XFW_BR_REDO_DNAT) {
		rd = xfw_br_redo_note();
		if (!rd)
			return TC_ACT_SHOT;
	}
	p->mark = skb->mark;
	p->owner = 0; /* no socket */
	p->physin = (__u32)redo;
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
		 * frame (nat.h): FORWARD sees it translated, unless the
		 * tracker finds it INVALID (no connection in the kernel,
		 * which its nat hook leaves as it came: given back). */
		tr = cs ? xfw_br_nat_pre(skb, p) : 0;
		if (tr < 0)
			return TC_ACT_SHOT;
		if (cs) {
			xfw_ct_load_tc(skb, p, cs);
			cs->stack_icmp = 0;
			p->ct = xfw_ct_track(p, cs, XFW_CTM_TRACK);
			if (tr && (p->ct & 7) == XFW_CTS_INVALID && xfw_nat_translatable(p) &&
			    xfw_nat_pre_undo_tc(skb, p))
				return TC_ACT_SHOT;
		}
	}
	verdict = xfw_br_walk(skb, sc, cs, br, rd);
	/* Translated to another neighbour of the bridge: sent back into it,
	 * judged where it leaves (bridge_redo.h). */
	if (verdict == XFW_BR_REDO) {
		xfw_nat_cancel();
		return xfw_br_redo_send(skb, sc, br);
	}
	if (verdict == XFW_ACT_ACCEPT && cs) {
		xfw_ct_confirm(cs);
		xfw_nat_confirm();
	} else {
		if (verdict == XFW_ACT_REJECT && p->reject != XFW_RJ_TCP_RESET && xfw_br_dnat_undo(skb, p))
			undone = XFW_BR_RJ_UNDONE;
		xfw_nat_cancel();
	}
	if (cs)
		xfw_frag_note_tc(skb, p, 1, verdict);
	if (st->nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_FORWARD, br, br);
	st->nlogs = 0;
	if (verdict == XFW_ACT_REJECT)
		return xfw_br_reject(skb, sc, cs, br, p->reject | undone);
	if (verdict != XFW_ACT_ACCEPT)
		return TC_ACT_SHOT;
	/* MARK rules' mark goes on with the frame (mark.h). */
	if (p->mark != skb->mark)
		skb->mark = p->mark;
	/* POSTROUTING's: a translated connection's reply gets its original
	 * source back, an ICMP error about one its quote (xfw.c); not an
	 * INVALID frame (no connection in the kernel). */
	if (cs && xfw_nat_enabled() && (p->ct & 7) != XFW_CTS_INVALID)
		return xfw_tc_nat_src(skb, p);
	return TC_ACT_OK;
}

#endif /* XFW_BRIDGE_TC_H */
