/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bridge_redo.h — br_netfilter's "bridged DNAT" of a frame a bridge passed
 * up: a frame from a port for the bridge's own MAC whose destination nat
 * PREROUTING changes (a DNAT's first frame, a later frame of a DNAT
 * connection, a reply of an SNAT one) to an address the bridge itself
 * reaches. br_nf_pre_routing_finish routes the translated packet; when
 * the route leaves by the bridge and its neighbour is resolved
 * (br_nf_pre_routing_finish_bridge), the frame goes back into the bridge
 * with the neighbour's MAC as its destination, its source MAC and TTL (hop
 * limit) kept, no ICMP redirect: the bridge forwards it port to port, and
 * FORWARD and POSTROUTING see it bridged (--physdev-in the port it came
 * by, --physdev-out the one it leaves by).
 *
 * xfw: the bridge's XDP hook gives the frame the neighbour's MAC and sends
 * it back into the bridge (XDP_TX: generic XDP hands it to the bridge's
 * xmit, which forwards it by that MAC, on the same CPU). It notes the frame
 * first (xfw_br_notes' redo: the input port, its bytes after the rewrite,
 * for a first frame the DNAT verdict). The output port's TC egress hook
 * (bridge_tc.h) takes a frame the bridge device sends that matches the
 * note for a frame bridged from that port: translated there (the
 * connection's translation, or the first frame's verdict applied), judged
 * in FORWARD and POSTROUTING with both ports, tracked, as any bridged frame.
 * A later frame is not judged at XDP at all; a first frame's walk so far
 * (PREROUTING up to the DNAT) counted and logged there, the TC hook resumes
 * after nat PREROUTING.
 *
 * A frame bridged port to port whose translated destination is another
 * resolved neighbour of the bridge than its destination MAC is sent the
 * same way from the port's TC egress hook (redirected to the bridge
 * device, whose xmit forwards it by the new MAC; skb->ingress_ifindex
 * still the input port, the note's via): a first frame after its DNAT
 * verdict (xfw_br_redo_send), a later one before any walk
 * (xfw_br_redo_later_tc).
 *
 * Included by xfw.c after nat.h, nat_query.h, nat_range.h and route.h.
 * Includes: bridge.h, nat.h, nat_query.h, nat_range.h, route.h (through
 * xfw.c).
 */
#ifndef XFW_BRIDGE_REDO_H
#define XFW_BRIDGE_REDO_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include "bridge.h"

/* xfw_br_dnat_dst resolves nat PREROUTING's DNAT verdict in st for frame
 * p: the new address in np->range.addr_hi:addr. Returns the new port (the
 * frame's own when the verdict keeps it), or -1 when xfw drops the frame:
 * REDIRECT (the bridge's own address, which the kernel passes up), no
 * address in the range. */
static __always_inline int xfw_br_dnat_dst(struct xfw_pkt *p, struct xfw_pending *st,
					   struct xfw_nat_pend *np)
{
	struct xfw_nat_range *r = &np->range;
	__u32 port;

	if (st->nat_addr == XFW_NAT_REDIRECT)
		return -1;
	r->addr_hi = 0;
	r->addr = st->nat_addr;
	if (st->nat_addr == XFW_NAT_KEEP_ADDR) {
		r->addr_hi = p->dst_hi;
		r->addr = p->dst_lo;
	}
	port = st->nat_port;
	if (port & XFW_NAT_RANGED) {
		__u64 to = xfw_natr_dnat(p, port);

		if (to == ~0ULL)
			return -1;
		port = to & 0xffff;
	} else if (p->fam != 0 && st->nat_addr != XFW_NAT_KEEP_ADDR) {
		return -1; /* an IPv6 address is its range probe's (XFW_NAT_ADDR6) */
	}
	if (!port)
		port = p->dport;
	return (int)port;
}

/* xfw_br_fib routes frame p's flow to hi:lo, port from the bridge br (ctx:
 * the hook's context) as br_nf_pre_routing_finish does after nat
 * PREROUTING (the lookup in np->fib, off the stack): 1 when the route
 * leaves by br to a resolved neighbour (its MAC in np->fib.dmac), else 0. */
static __always_inline int xfw_br_fib(void *ctx, struct xfw_pkt *p, struct xfw_nat_pend *np, __u32 br,
				      __u64 hi, __u64 lo, __u32 port)
{
	struct bpf_fib_lookup *fib = &np->fib;
	__u32 flags = 0;
	long rc;

	__builtin_memset(fib, 0, sizeof(*fib));
	fib->ifindex = br;
	xfw_fib_flow(fib, p);
	if (p->sport < 65536)
		fib->dport = bpf_htons(port);
	if (p->fam == 0) {
		fib->ipv4_dst = bpf_htonl((__u32)lo);
	} else {
		fib->ipv6_dst[0] = bpf_htonl(hi >> 32);
		fib->ipv6_dst[1] = bpf_htonl((__u32)hi);
		fib->ipv6_dst[2] = bpf_htonl(lo >> 32);
		fib->ipv6_dst[3] = bpf_htonl((__u32)lo);
	}

	if (p->mark)
		flags = xfw_fib_mark(fib, p->mark);
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), flags);
	/* A kernel before 6.10 refuses the mark: routed unmarked (route.h). */
	if (rc < 0 && flags) {
		__builtin_memset(fib->smac, 0, sizeof(fib->smac));
		fib->ifindex = br;
		rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
	}
	return rc == BPF_FIB_LKUP_RET_SUCCESS && fib->ifindex == br;
}

/* xfw_br_redo_portless finds the translation of a later echo p of a
 * translated connection (a request of a DNAT, a reply of an SNAT; not
 * other protocols without ports), as xfw_nat_query_pre_xdp does, without
 * translating it (ctx: an XDP frame with is_xdp, else an
 * skb): 1 with it in np->lv, else 0. */
static __always_inline int xfw_br_redo_portless(void *ctx, int is_xdp, struct xfw_pkt *p,
						struct xfw_nat_pend *np)
{
	__u32 id = 0, kinds;

	if (xfw_natq_kind(p) != XFW_NATQ_ECHO || xfw_natq_id(ctx, is_xdp, p, &id))
		return 0;
	kinds = (p->icmp >> 8) == xfw_natq_echo(p->fam, 1) ? XFW_NAT_F_SRC : XFW_NAT_F_DST;
	xfw_natq_key(&np->lk, p, id);
	if (!xfw_nat_held(&np->lk, kinds, 0, &np->lv))
		return 0;
	/* An echo's mapping holds its request's code. */
	return (np->lv.ct.pad >> 8) == (p->icmp & 0xff);
}

/* xfw_br_later_dst finds the translated destination of a later frame p
 * of a translated connection (ctx: an XDP frame with is_xdp, else an
 * skb): the address in np->range.addr_hi:addr, the port returned (0
 * without ports); -1 when p's connection does not change its destination. */
static __always_inline int xfw_br_later_dst(void *ctx, int is_xdp, struct xfw_pkt *p,
					    struct xfw_nat_pend *np)
{
	if (xfw_nat_translatable(p) ? !xfw_nat_live(&np->lk, p, &np->lv)
				    : !xfw_br_redo_portless(ctx, is_xdp, p, np))
		return -1;
	if (np->lv.to_hi == p->dst_hi && np->lv.to_addr == p->dst_lo)
		return -1;
	np->range.addr_hi = np->lv.to_hi;
	np->range.addr = np->lv.to_addr;
	return xfw_nat_translatable(p) ? np->lv.to_port : 0;
}

/* XFW_BR_REDO_DNAT in a redo note's flags: a connection's first frame,
 * with nat PREROUTING's DNAT verdict in the note (nat_addr, nat_port, the
 * walk's mark, its slot). */
#define XFW_BR_REDO_DNAT 1

/* xfw_br_redo_set completes the redo note rd, whose bytes are those of
 * frame p as it goes back into the bridge, len long: flags
 * (XFW_BR_REDO_*), the walk's verdict and slot in st (NULL: none), the
 * ingress_ifindex the output port's hook will see it with (via), and last
 * the input port, which makes the note valid (xfw_br_redo_tc). */
static __always_inline void xfw_br_redo_set(struct xfw_br_redo *rd, struct xfw_pkt *p, struct xfw_pending *st,
					    __u32 len, __u32 flags, __u32 via)
{
	rd->len = len;
	rd->flags = flags;
	rd->nat_addr = st ? st->nat_addr : 0;
	rd->nat_port = st ? st->nat_port : 0;
	rd->mark = p->mark;
	rd->slot = st ? st->slot : 0;
	rd->via = via;
	rd->port = p->physin;
}

/* xfw_br_redo_xdp sends the frame in sc (received on the bridge br, from a
 * port: p->physin) back into the bridge when its translated destination
 * is a resolved neighbour of br (br_netfilter's bridged DNAT): first, the
 * DNAT verdict of a connection's first frame in sc->st; else the
 * translation of the frame's connection. Returns XDP_TX when it did, else
 * -1 (the hook goes on: the stack routes it). A global function. */
__attribute__((noinline)) int xfw_br_redo_xdp(struct xdp_md *ctx, struct xfw_xdp_scratch *sc, __u32 br,
					      __u32 first)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_br_note *n = bpf_map_lookup_elem(&xfw_br_notes, &zero);
	struct xfw_br_redo *rd;
	struct xfw_pkt *p;
	void *data, *end;
	int port;

	if (!ctx || !sc || !np || !n)
		return -1;
	p = &sc->p;
	if (!p->physin || p->physin >= XFW_PHYS_NULL || p->vlan || !p->dst_unicast || p->fragmented)
		return -1;
	if (first) {
		port = xfw_br_dnat_dst(p, &sc->st, np);
		if (port < 0)
			return -1;
	} else {
		port = xfw_br_later_dst(ctx, 1, p, np);
		if (port < 0)
			return -1;
	}
	if (!xfw_br_fib(ctx, p, np, br, np->range.addr_hi, np->range.addr, port))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + XFW_BR_NOTE > end)
		return -1;
	__builtin_memcpy(data, np->fib.dmac, ETH_ALEN);
	rd = &n->redo;
	rd->port = 0;
	if (bpf_xdp_load_bytes(ctx, 0, rd->w, XFW_BR_NOTE) != 0)
		return -1;
	xfw_br_redo_set(rd, p, &sc->st, ctx->data_end - ctx->data, first ? XFW_BR_REDO_DNAT : 0, br);
	return XDP_TX;
}

/* xfw_br_redo_ok reports whether the DNAT verdict for the first frame p
 * (cs: its tracking) may be applied where the frame leaves the bridge
 * (xfw_br_redo_xdp): a new connection with nothing the walk so far left on
 * it but its mark (no CONNMARK, no pending rewrite). (Its walk may have
 * been an unrouted one, st->unrouted: the kernel's DNAT comes before
 * routing.) */
static __always_inline int xfw_br_redo_ok(struct xfw_pkt *p, struct xfw_pending *st,
					  struct xfw_ct_scratch *cs)
{
	return cs && p->physin && p->physin < XFW_PHYS_NULL && cs->pending == XFW_CTP_CREATE &&
	       !cs->nv.mark && !p->mangle;
}

/* xfw_br_redo_tc returns the port the frame in skb, leaving a port of the
 * bridge br, came in by: skb->ingress_ifindex, unless the frame is one xfw
 * sent back into the bridge (xfw_br_redo_xdp, from the bridge device:
 * ingress_ifindex the bridge; xfw_br_redo_send, redirected from a port to
 * the bridge: the input port), when it is its note's port, with the
 * note's flags << 32. A note redirected from a port is taken (its frame
 * is a bridged one, which a later frame could repeat); the XDP hook's
 * stays, so flooded copies (a neighbour's MAC the bridge has not learnt)
 * all match. A global function: its buffer stays off the hook's frame. */
__attribute__((noinline)) __u64 xfw_br_redo_tc(struct __sk_buff *skb, __u32 br)
{
	__u64 w[XFW_BR_NOTE_WORDS];
	struct xfw_br_note *n;
	__u32 zero = 0, port, in;

	if (!skb)
		return 0;
	in = skb->ingress_ifindex;
	if (in != br && !xfw_br_bridged(in, br))
		return in;
	n = bpf_map_lookup_elem(&xfw_br_notes, &zero);
	if (!n || !n->redo.port || n->redo.via != in || n->redo.len != skb->len ||
	    bpf_skb_load_bytes(skb, 0, w, XFW_BR_NOTE) != 0)
		return in;
	for (int i = 0; i < XFW_BR_NOTE_WORDS; i++)
		if (w[i] != n->redo.w[i])
			return in;
	port = n->redo.port;
	if (port == in)
		n->redo.port = 0;
	return (__u64)n->redo.flags << 32 | port;
}

/* xfw_br_redo_put gives the frame in skb (p: its fields, judged so far in
 * sc's walk) the MAC in np->fib.dmac and notes it as bridged from p's
 * input port (flags XFW_BR_REDO_*; a first frame's verdict in st, NULL
 * for a later frame), for
 * the bridge device's xmit, which forwards it by that MAC. Returns 0, or
 * TC_ACT_SHOT when it failed. */
static __always_inline int xfw_br_redo_put(struct __sk_buff *skb, struct xfw_pkt *p, struct xfw_pending *st,
					   struct xfw_nat_pend *np, struct xfw_br_note *n, __u32 flags)
{
	struct xfw_br_redo *rd = &n->redo;

	if (bpf_skb_store_bytes(skb, 0, np->fib.dmac, ETH_ALEN, 0))
		return TC_ACT_SHOT;
	rd->port = 0;
	if (bpf_skb_load_bytes(skb, 0, rd->w, XFW_BR_NOTE) != 0)
		return TC_ACT_SHOT;
	xfw_br_redo_set(rd, p, st, skb->len, flags, p->physin);
	return 0;
}

/* xfw_br_redo_send sends the first frame in sc, bridged from port to port
 * and judged DNAT in nat PREROUTING (st: the verdict), whose translated
 * destination is another resolved neighbour of the bridge br (np->fib.dmac,
 * xfw_br_dnat), back into the bridge with that neighbour's MAC, as
 * br_nf_pre_routing_finish_bridge does: noted (xfw_br_redo_tc), redirected
 * to the bridge device, which forwards it by its new MAC to the port where
 * the walk resumes. Returns the TC verdict. A global function. */
__attribute__((noinline)) int xfw_br_redo_send(struct __sk_buff *skb, struct xfw_xdp_scratch *sc, __u32 br)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_br_note *n = bpf_map_lookup_elem(&xfw_br_notes, &zero);

	if (!skb || !sc || !np || !n)
		return TC_ACT_SHOT;
	if (xfw_br_redo_put(skb, &sc->p, &sc->st, np, n, XFW_BR_REDO_DNAT))
		return TC_ACT_SHOT;
	return bpf_redirect(br, 0);
}

/* xfw_br_redo_later_tc sends a later frame p, bridged from port to
 * port, whose connection's translation changes its destination to another
 * resolved neighbour of the bridge br than its destination MAC, back into
 * the bridge with that neighbour's MAC (br_netfilter's bridged DNAT),
 * untranslated and unjudged: noted, a copy redirected to the bridge device
 * (bpf_clone_redirect: the caller drops this one, which keeps the hook's
 * verdicts as they were); the port it leaves by translates and judges it.
 * Returns 0 when it sent it (or failed to: dropped all the same), -1 when
 * the frame goes on here. A global function. */
__attribute__((noinline)) int xfw_br_redo_later_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 br)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_br_note *n = bpf_map_lookup_elem(&xfw_br_notes, &zero);
	int port;

	if (!skb || !p || !np || !n || !xfw_nat_enabled())
		return -1;
	if (!p->dst_unicast || p->fragmented)
		return -1;
	port = xfw_br_later_dst(skb, 0, p, np);
	if (port < 0 || !xfw_br_fib(skb, p, np, br, np->range.addr_hi, np->range.addr, port) ||
	    xfw_mac48(np->fib.dmac) == xfw_mac48(p->dst_mac))
		return -1;
	if (xfw_br_redo_put(skb, p, 0, np, n, 0) == 0)
		bpf_clone_redirect(skb, br, 0);
	return 0;
}

/* xfw_br_redo_note returns the redo note (xfw_br_redo_tc found the frame
 * a first frame's). */
static __always_inline struct xfw_br_redo *xfw_br_redo_note(void)
{
	__u32 zero = 0;
	struct xfw_br_note *n = bpf_map_lookup_elem(&xfw_br_notes, &zero);

	return n ? &n->redo : 0;
}

#endif /* XFW_BRIDGE_REDO_H */
