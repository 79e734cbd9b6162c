/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bridge_reject.h — REJECT of a frame bridged from port to port, built at
 * the output port's TC egress hook (bridge_tc.h), as the kernel's REJECT
 * answers a frame br_netfilter passed to FORWARD (Linux 6.18,
 * tests/e2e TestBridgedRejectAgainstKernel):
 *
 *  - A TCP reset (nf_send_reset, nf_send_reset6: their bridge case) goes
 *    straight back out of the port the frame came in by, its Ethernet
 *    addresses the frame's swapped (the reset seems to come from the
 *    frame's destination), past OUTPUT and POSTROUTING. The kernel routes
 *    it first (no route back to the source: no reset); its TTL is the
 *    namespace's default TTL, its hop limit the route's device's.
 *  - An ICMP or ICMPv6 error (icmp_send, icmp6_send) is the host's own:
 *    from the address the route back to the source picks (the bridge's),
 *    rate-limited as a FORWARD reply's (the global bucket and the
 *    destination's), judged in OUTPUT and POSTROUTING with -o the route's
 *    device (the bridge) and the offending frame's connection (RELATED),
 *    then sent through the bridge device, which bridges it to the source.
 *    After a bridged DNAT the kernel's nat translates it at POSTROUTING:
 *    it quotes the frame as it came, from the frame's destination (the
 *    DNAT is given back first, bridge_tc.h xfw_br_dnat_undo; a reset
 *    stays translated). It echoes no IPv4 option.
 *
 * A reply on its way is marked (skb->tc_index XFW_BR_RJ_MARK): the
 * bridge's TC egress hook passes it, judged already, and so does the port
 * it leaves by, which would otherwise take it for a bridged frame (its
 * skb->ingress_ifindex is still the input port's).
 *
 * Included by bridge_tc.h (uses reject.h and xfw.c's xfw_tc_reply_judge).
 */
#ifndef XFW_BRIDGE_REJECT_H
#define XFW_BRIDGE_REJECT_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include "reject.h"

/* skb->tc_index (and tc_classid, which TCX_PASS copies into tc_index) of
 * a reply to a bridged frame (nat_out.h's XFW_NAT_OUT_MARK is 0x78f1,
 * redirect.h's XFW_RD_MARK 0x78f2, reject.h's XFW_RJ_ROUTED_MARK 0x78f3). */
#define XFW_BR_RJ_MARK 0x78f4

/* xfw_br_rj_sent reports whether skb, at a TC egress hook, is a reply to
 * a bridged frame on its way (judged already). The mark is kept through a
 * bridge (a device with the bridge-nf-call sysctls' flags that is no
 * port) for its port, and cleared where the reply leaves (port: the
 * device's xfw_br_port, nonzero on a port). */
static __always_inline int xfw_br_rj_sent(struct __sk_buff *skb, __u64 port)
{
	__u64 key = skb->ifindex;
	struct xfw_ifinfo *ifi;
	__u32 keep;

	if (skb->tc_index != XFW_BR_RJ_MARK)
		return 0;
	ifi = port ? 0 : bpf_map_lookup_elem(&xfw_ifinfo, &key);
	keep = ifi && (ifi->flags & (XFW_IF_BRNF4 | XFW_IF_BRNF6)) ? XFW_BR_RJ_MARK : 0;
	skb->tc_index = keep;
	skb->tc_classid = keep;
	return 1;
}

/* The REJECT type's flag (xfw_br_reject): the frame's DNAT was given back
 * (bridge_tc.h xfw_br_dnat_undo). */
#define XFW_BR_RJ_UNDONE 0x10000

/* xfw_br_rj_route finds the route of the reply r back to the frame's
 * source, as the kernel's output routing would (from the bridge br; where
 * the bridge does not forward, bpf_fib_lookup refuses every lookup: no
 * reply, docs/differences.md), for an ICMP error (icmp: with the neighbour,
 * whose addresses go to r->l2 when it is known, fib->tot_len 1, as
 * xfw_rj_tc_route leaves it for xfw_rj_tc_out; with its source picked
 * unless pick is 0, BPF_FIB_LOOKUP_SRC) or a reset (neither). Returns 0,
 * or -1: no route, no reply. */
static __always_inline int xfw_br_rj_route(struct __sk_buff *skb, struct xfw_rj *r,
					   struct bpf_fib_lookup *fib, __u32 br, int v6, int icmp,
					   int pick)
{
	__u32 flags = !icmp ? BPF_FIB_LOOKUP_SKIP_NEIGH : pick ? BPF_FIB_LOOKUP_SRC : 0;
	long rc;

	xfw_rj_fib_init(fib, r, br, v6, !pick,
			icmp ? (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP) : IPPROTO_TCP);
	rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return -1;
	if (pick)
		xfw_rj_take_src(r, fib, v6);
	fib->tot_len = icmp && rc == BPF_FIB_LKUP_RET_SUCCESS;
	if (fib->tot_len) {
		__builtin_memcpy(r->l2, fib->dmac, ETH_ALEN);
		__builtin_memcpy(r->l2 + ETH_ALEN, fib->smac, ETH_ALEN);
	}
	return 0;
}

/* XFW_BR_RJ_JUDGE, returned by xfw_br_reject (through xfw_tc_bridged): the
 * skb holds an ICMP error, routed (xfw_rj_scratch's fib), for
 * xfw_br_rj_out. Not a TC action code (reject.h's XFW_RJ_TC_LOCAL is
 * 0x100). Judging it there, in the hook's own frame, keeps the call chain
 * within the verifier's stack limit. */
#define XFW_BR_RJ_JUDGE 0x101

/* xfw_br_rj_error turns the frame in skb into the ICMP error planned in
 * rs->r (kind XFW_RJK_ICMP4 or ICMP6), routed through the bridge br:
 * XFW_BR_RJ_JUDGE, or TC_ACT_SHOT when none is sent. Its source is the
 * route's, or after a DNAT given back (undone) the frame's destination, as
 * the kernel's nat makes it. */
static __always_inline int xfw_br_rj_error(struct __sk_buff *skb, struct xfw_rj_scratch *rs,
					   __u32 br, int v6, int undone, __u32 encap)
{
	struct xfw_rj *r = &rs->r;
	__u64 now = bpf_ktime_get_ns();
	struct xfw_rl_cfg *rl;

	/* No IPv4 option is echoed (reject_opts.h echoes a routed packet's):
	 * for a bridged frame the options ip_options_compile found are
	 * gone from the control block the bridge reuses (found against the
	 * kernel: record route, timestamps). */
	rl = xfw_rl_limited(r->type, r->code, v6);
	if (rl && !xfw_rl_global_allow(rl, now))
		return TC_ACT_SHOT;
	if (xfw_br_rj_route(skb, r, &rs->fib, br, v6, 1, !undone))
		return TC_ACT_SHOT;
	if (rl && !xfw_rl_spend(rl, r->daddr, v6, 0, now))
		return TC_ACT_SHOT;
	r->ttl = v6 ? xfw_rj_hop_limit6(rs->fib.ifindex) : xfw_rj_ttl4();
	if (xfw_rj_tc_put_icmp(skb, r, v6, 0, encap))
		return TC_ACT_SHOT;
	return XFW_BR_RJ_JUDGE;
}

/* xfw_br_reject answers the bridged frame in sc->p, judged REJECT (type,
 * with XFW_BR_RJ_UNDONE when its DNAT was given back) in FORWARD on the
 * bridge br (cs: its connection, or 0), as the kernel
 * does (see above), and returns the TC action that sends a reset,
 * XFW_BR_RJ_JUDGE for an ICMP error, or TC_ACT_SHOT when the kernel sends
 * nothing. A global function. */
__attribute__((noinline)) int xfw_br_reject(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					    struct xfw_ct_scratch *cs, __u32 br, __u32 type)
{
	__u32 slot = XFW_RJ_SLOT_TC, in, undone = type & XFW_BR_RJ_UNDONE, encap = 0;
	struct xfw_rj_scratch *rs;
	struct xfw_pkt *p;
	int kind, v6;

	type &= ~XFW_BR_RJ_UNDONE;
	if (!skb || !sc)
		return TC_ACT_SHOT;
	rs = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!rs)
		return TC_ACT_SHOT;
	/* The kernel's reply to a VLAN-tagged frame (judged with
	 * bridge-nf-filter-vlan-tagged) is a new packet, untagged: the
	 * reset nf_send_reset sends out of the input port, the error the
	 * host sends through the bridge. The frame's tag is out of its
	 * data (bridge_tc.h), so the headers stay where they are. */
	if (skb->vlan_present && bpf_skb_vlan_pop(skb))
		return TC_ACT_SHOT;
	p = &sc->p;
	in = p->physin;
	__builtin_memset(&rs->r, 0, sizeof(rs->r));
	kind = xfw_rj_plan(&rs->r, p, type, (void *)(long)skb->data, (void *)(long)skb->data_end, 1, 0);
	if (kind == XFW_RJK_NONE || !xfw_rj_csum_ok_tc(skb, p, 0))
		return TC_ACT_SHOT;
	v6 = kind == XFW_RJK_ICMP6 || kind == XFW_RJK_RST6;
	/* Likewise a PPPoE session frame's (bridge-nf-filter-pppoe-tagged):
	 * an Ethernet frame of the datagram's family, without the PPPoE
	 * header (found against the kernel), written over the frame. */
	if (p->vlan == XFW_VLAN_PPPOE) {
		encap = XFW_RJ_PPPOE_HLEN;
		rs->r.l2len = XFW_RJ_ETH_HLEN;
		*(__u16 *)(rs->r.l2 + 12) = bpf_htons(v6 ? ETH_P_IPV6 : ETH_P_IP);
	}
	if (kind == XFW_RJK_ICMP4 || kind == XFW_RJK_ICMP6) {
		if (cs)
			xfw_ct_save(cs, p);
		return xfw_br_rj_error(skb, rs, br, v6, undone != 0, encap);
	}
	/* The reset: routed first (its hop limit the route's device's),
	 * then sent out of the input port. */
	if (xfw_br_rj_route(skb, &rs->r, &rs->fib, br, v6, 0, 0))
		return TC_ACT_SHOT;
	rs->r.ttl = v6 ? xfw_rj_hop_limit6(rs->fib.ifindex) : xfw_rj_ttl4();
	if (xfw_rj_tc_put_rst(skb, &rs->r, v6))
		return TC_ACT_SHOT;
	skb->tc_index = XFW_BR_RJ_MARK;
	return bpf_redirect(in, 0);
}

/* xfw_br_rj_out judges the ICMP error xfw_br_reject left in skb in
 * OUTPUT (and POSTROUTING), out of its route's device, with the offending
 * frame's connection when it was tracked (RELATED), and sends it through
 * that device (the bridge), marked judged. sc is the hook's scratch, its
 * slot the offending frame's. Returns a TC action. */
static __always_inline int xfw_br_rj_out(struct __sk_buff *skb, struct xfw_xdp_scratch *sc)
{
	__u32 slot = XFW_RJ_SLOT_TC, verdict, oif;
	struct xfw_ct_scratch *cs = 0;
	struct xfw_rj_scratch *rs = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);

	if (!rs)
		return TC_ACT_SHOT;
	oif = rs->fib.ifindex;
	/* xfw_tc_bridged tracked the frame when its generation tracks. */
	if (xfw_ct_active(sc->st.slot))
		cs = xfw_ct_scratch_get(1);
	verdict = xfw_tc_reply_judge(skb, &sc->p, &sc->st, cs, oif);
	if (sc->st.nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
	sc->st.nlogs = 0;
	if (verdict != XFW_ACT_ACCEPT)
		return TC_ACT_SHOT;
	skb->tc_index = XFW_BR_RJ_MARK;
	return xfw_rj_tc_out(&rs->fib);
}

#endif /* XFW_BRIDGE_REJECT_H */
