/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_out.h — DNAT and REDIRECT in nat OUTPUT: the host's own packets,
 * with the kernel's semantics (nf_nat_ipv4_local_fn, ip_route_me_harder,
 * nf_nat_ipv4_local_in):
 *
 *  - The host's packets are seen at TC egress of the device their route
 *    picked (loopback for a destination of the host's own). A
 *    connection's first packet walks OUTPUT with that device; a DNAT
 *    verdict of its nat OUTPUT segment translates the destination
 *    (xfw_nat_dnat_prep, as nat PREROUTING's), routes the packet again
 *    from its source (xfw_nat_out_route: bpf_fib_lookup, the local
 *    routes for the host's own) and resumes the walk after the nat
 *    OUTPUT segment with the new device (xfw_family_cfg.nat_resume), so
 *    filter OUTPUT and POSTROUTING see the translated packet, as in the
 *    kernel. Later packets of the original direction are translated
 *    before tracking (xfw_nat_out_pre_tc, by the wire tuple in xfw_nat);
 *    one the tracker then finds INVALID gets its destination and first
 *    route back (xfw_nat_out_undo: the kernel's nat hook leaves a packet
 *    without a connection as it came).
 *  - An accepted translated packet leaves by the new route's device
 *    (xfw_nat_out_send): bpf_redirect_neigh, which routes it out of that
 *    device (the skb gets the route) and resolves the neighbour; to the
 *    host's own address it goes to loopback (the local route) unless it
 *    is there already. The redirected packet passes that device's TC egress
 *    again, marked judged (skb->tc_index XFW_NAT_OUT_MARK).
 *  - The replies: delivered locally, they get their source back after
 *    INPUT accepted them, before the socket (xfw_nat_in_xdp: the kernel's
 *    nat INPUT hook after filter INPUT), and go on to the stack where
 *    they arrived when its input routing accepts the new source there
 *    (xfw_nat_in_direct: they get the kernel's RTN_LOCAL route, which
 *    a RST without a socket needs); the others reach it through loopback
 *    with a route to the host (xfw_nat_in_send): the source may be the
 *    host's own, which input routing refuses from outside; loopback's
 *    XDP lets them pass unjudged (xfw_nat_lo_pass). So do ICMP errors
 *    about such a connection, the quoted packet translated back
 *    (xfw_nat_icmp_in_xdp, nat_icmp.h).
 *  - REDIRECT is compiled to 127.0.0.1 (nf_nat_redirect_ipv4 at
 *    LOCAL_OUT).
 *  - Packets without TCP or UDP ports (an ICMP echo request with its
 *    identifier kept, SCTP with its ports kept, protocols without ports)
 *    by the address alone, as nat PREROUTING translates them
 *    (nat_query.h: xfw_natq_dnat_tc, xfw_natq_out_pre_tc,
 *    xfw_natq_in_xdp); xfw_nat_out.portless tells the undo.
 *  - nat INPUT's SNAT (nf_nat_ipv4_local_in) shares the machinery: the
 *    packets of the original direction get their new source in
 *    xfw_nat_in_xdp after INPUT accepted them (xfw_nat_src_of) and are
 *    delivered as the replies above; the host's replies get their
 *    destination back in xfw_nat_out_pre_tc (the SNAT mapping of their
 *    wire tuple) and are routed again, and so are the host's ICMP errors
 *    about such a connection's packet (xfw_nat_icmp_out_tc,
 *    xfw_nat6_icmp_out_tc: the quote's original source back).
 *  - IPv6 (nf_nat_ipv6_local_fn, ip6_route_me_harder) the same way: the
 *    128-bit addresses of xfw_nat_key, the rewrites nat.h's
 *    xfw_nat_rw_xdp/_tc pick by family, REDIRECT compiled to ::1; an
 *    IPv6 reply goes on to the stack where it arrived unless its source
 *    is ::1 (ip6_rcv_core's check: delivered through loopback), and so
 *    does an ICMPv6 error about such a connection, its quote translated
 *    back (xfw_nat6_icmp_in_xdp, nat6_icmp.h).
 *  - Checksums: at TC the kernel's helpers follow ip_summed
 *    (CHECKSUM_PARTIAL of a local socket: the pseudo-header sum only).
 *
 * Not translated the kernel's way (docs/differences.md): a translated
 * packet bpf_fib_lookup finds no route for, or too big for the new
 * device without GSO (the kernel fragments), is dropped; forwarding off
 * on loopback makes the lookup refuse (dropped).
 *
 * Conventions: global functions, verified once; the per-CPU
 * xfw_nat_out_scratch holds the packet's new route from the translation
 * to the send. Addresses and ports host order, as in struct xfw_pkt.
 *
 * Includes: nat.h (its maps and rewrites), nat_icmp.h (nat6_icmp.h), local.h (xfw_local_type),
 * reject_send.h (the XDP metadata's mark, xfw_tc_ingress).
 */
#ifndef XFW_NAT_OUT_H
#define XFW_NAT_OUT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"
#include "local.h"
#include "nat.h"
#include "nat_icmp.h"
#include "reject_send.h"
#include "route.h"

/* skb->tc_index of a translated packet sent on to its new device, judged
 * already. Nothing else uses tc_index since the dsmark qdisc and tcindex
 * classifier went (Linux 6.3); redirection keeps it. */
#define XFW_NAT_OUT_MARK 0x78f1

#ifndef AF_INET
#define AF_INET 2 /* bpf_fib_lookup's family */
#endif

/* A translated packet's new route, from the translation to the send. */
struct xfw_nat_out {
	__u32 oif;       /* the new route's device; 0: the packet is not translated */
	__u32 local;     /* the new destination is the host's own */
	__u64 orig_hi;   /* the destination before the translation (REJECT's undo), */
	__u64 orig_addr; /* hi:lo as struct xfw_pkt holds it (IPv4: hi 0) */
	__u32 orig_port;
	__u32 portless;  /* translated by the address alone (nat_query.h) */
	__u32 igmp_nh;   /* an IPv4 IGMP packet's next hop (network order; 0
			  * for any other packet): xfw_nat_out_send */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_nat_out);
	__uint(max_entries, 1);
} xfw_nat_out_scratch SEC(".maps");

/* xfw_nat_out_get returns this CPU's xfw_nat_out_scratch. */
static __always_inline struct xfw_nat_out *xfw_nat_out_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&xfw_nat_out_scratch, &zero);
}

/* xfw_nat_out_route routes translated p from its source as
 * ip_route_me_harder does and leaves the device and next hop in o.
 * Returns the device, or 0 when there is no route (the kernel drops the
 * packet). The lookup is the output one of the kernel (the input
 * interface loopback, as ip_route_output_key sets it). */
static __always_inline __u32 xfw_nat_out_route(struct __sk_buff *skb, struct xfw_pkt *p,
					       struct xfw_nat_out *o)
{
	struct xfw_out_hop hop = {};
	int rc;

	o->igmp_nh = 0;
	if (xfw_local_type(p->fam, p->dst_hi, p->dst_lo) == XFW_RTN_LOCAL) {
		o->local = 1;
		o->oif = XFW_LOOPBACK_IFINDEX;
		return o->oif;
	}
	/* With the packet's mark, as ip_route_me_harder routes (policy
	 * routing by fwmark); a kernel before 6.10 refuses the mark: asked
	 * again without it. */
	rc = xfw_out_lookup(skb, p, p->mark, &hop);
	if (rc < 0 && p->mark)
		rc = xfw_out_lookup(skb, p, 0, &hop);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return 0;
	o->local = 0;
	o->oif = hop.ifindex;
	if (p->fam == 0 && p->proto == IPPROTO_IGMP)
		o->igmp_nh = hop.nh[0];
	return o->oif;
}

/* xfw_nat_out_icmp_err reports whether p is an ICMP or ICMPv6 error. */
static __always_inline int xfw_nat_out_icmp_err(struct xfw_pkt *p)
{
	if (p->icmp > 0xffff)
		return 0;
	if (p->fam == 0)
		return p->proto == IPPROTO_ICMP && xfw_icmp_is_err(p->icmp >> 8);
	return p->proto == IPPROTO_ICMPV6 && (p->icmp >> 8) < XFW_NAT6_ICMP_INFO;
}

/* xfw_nat_out_pre_tc translates, before tracking, the destination of a
 * later packet of the host's own in a connection nat OUTPUT translated
 * (the original direction's wire tuple in xfw_nat), or of the host's
 * reply in a connection nat INPUT's SNAT translated (the reply's wire
 * tuple), or of the host's ICMP error about a packet of the latter
 * (xfw_nat_icmp_out_tc), and routes it again.
 * Returns the new device, 0 when the packet is not translated,
 * XFW_NAT_OUT_DROP, or XFW_NAT_OUT_NOROUTE when the translated destination
 * has no route (the kernel's nat OUTPUT hook drops it in
 * ip_route_me_harder, after its conntrack saw it: ct_unrouted.h
 * xfw_ct_unrouted_tc). A global function. */
#define XFW_NAT_OUT_DROP (~0u)
#define XFW_NAT_OUT_NOROUTE (~1u)
__attribute__((noinline)) __u32 xfw_nat_out_pre_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	struct xfw_nat_out *o = xfw_nat_out_get();
	struct xfw_nat_key k = {};
	struct xfw_nat_val v;

	int rc;

	if (!skb || !p || !o)
		return 0;
	o->oif = 0;
	if (!xfw_nat_enabled())
		return 0;
	o->orig_hi = p->dst_hi;
	o->orig_addr = p->dst_lo;
	o->orig_port = p->dport;
	o->portless = !xfw_nat_translatable(p);
	if (xfw_nat_out_icmp_err(p)) {
		/* The host's ICMP error about a packet nat INPUT's SNAT
		 * translated (nat_icmp.h, nat6_icmp.h). */
		rc = p->fam ? xfw_nat6_icmp_out_tc(skb, p, &v) : xfw_nat_icmp_out_tc(skb, p, &k, &v);
		if (rc < 0)
			return XFW_NAT_OUT_DROP;
		if (!rc)
			return 0;
	} else if (o->portless) {
		/* An echo request, a protocol without ports (nat_query.h). */
		rc = xfw_natq_out_pre_tc(skb, p);
		if (rc < 0)
			return XFW_NAT_OUT_DROP;
		if (!rc)
			return 0;
	} else {
		/* A DNAT's original direction, or the reply of a connection
		 * nat INPUT's SNAT translated: the destination. */
		if (!xfw_nat_live(&k, p, &v))
			return 0;
		if (xfw_nat_rw_tc(skb, p, 1, v.to_hi, v.to_addr, v.to_port))
			return XFW_NAT_OUT_DROP;
	}
	if (!xfw_nat_out_route(skb, p, o))
		return XFW_NAT_OUT_NOROUTE;
	return o->oif;
}

/* xfw_nat_out_dnat_tc applies nat OUTPUT's DNAT verdict to a connection's
 * first packet of the host's own (cs: its tracking, a new connection
 * pending) to addr:port (port 0 keeps the port): translated, routed
 * again. An IPv6 address is its range probe's (XFW_NAT_ADDR6, always
 * ranged), as in nat PREROUTING. Returns the new device, or 0 when the
 * packet must be dropped (not translatable, a clash, a failed write, no
 * route). A global function. */
__attribute__((noinline)) __u32 xfw_nat_out_dnat_tc(struct __sk_buff *skb, struct xfw_pkt *p,
						    struct xfw_ct_scratch *cs, __u32 addr, __u32 port)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_out *o = xfw_nat_out_get();

	if (!skb || !p || !cs || !np || !o)
		return 0;
	np->pending = 0;
	o->oif = 0;
	if (!addr)
		return 0; /* the compiler gives REDIRECT its loopback address */
	np->range.addr_hi = 0;
	np->range.addr = addr;
	if (addr == XFW_NAT_KEEP_ADDR) {
		np->range.addr_hi = p->dst_hi;
		np->range.addr = p->dst_lo;
	}
	if (port & XFW_NAT_RANGED) {
		__u64 to = xfw_natr_dnat(p, port);

		if (to == ~0ULL)
			return 0;
		port = to & 0xffff;
	} else if (p->fam != 0 && addr != XFW_NAT_KEEP_ADDR) {
		return 0; /* an IPv6 address is its range probe's (XFW_NAT_ADDR6) */
	}
	o->orig_hi = p->dst_hi;
	o->orig_addr = p->dst_lo;
	o->orig_port = p->dport;
	o->portless = !xfw_nat_translatable(p);
	if (o->portless) {
		/* An echo request, a protocol without ports: the address
		 * alone (nat_query.h). */
		if (xfw_natq_dnat_tc(skb, p, cs))
			return 0;
		return xfw_nat_out_route(skb, p, o);
	}
	if (!port)
		port = p->dport;
	if (xfw_nat_dnat_prep(p, cs, np, np->range.addr_hi, np->range.addr, port))
		return 0;
	if (xfw_nat_rw_tc(skb, p, 1, np->val[XFW_NAT_PD].to_hi, np->val[XFW_NAT_PD].to_addr, port))
		return 0;
	np->pending = XFW_NAT_F_DST;
	return xfw_nat_out_route(skb, p, o);
}

/* xfw_nat_out_undo gives a translated packet OUTPUT did not accept its
 * destination back (REJECT answers it as it came, as the kernel's
 * translation of the answer shows it) and forgets its new route. A
 * global function. */
__attribute__((noinline)) int xfw_nat_out_undo(struct __sk_buff *skb, struct xfw_pkt *p)
{
	struct xfw_nat_out *o = xfw_nat_out_get();

	if (!skb || !p || !o || !o->oif)
		return 0;
	o->oif = 0;
	if (o->portless && p->fam)
		return xfw_natq6_addr_tc(skb, p, 1, o->orig_hi, o->orig_addr);
	if (o->portless)
		return xfw_natq_addr_tc(skb, p, 1, (__u32)o->orig_addr);
	return xfw_nat_rw_tc(skb, p, 1, o->orig_hi, o->orig_addr, o->orig_port);
}

/* xfw_nat_out_send sends an accepted translated packet on by its new
 * route: the TC verdict. A packet not translated, or to the host's own
 * address already on loopback, goes on (TC_ACT_OK). */
static __always_inline int xfw_nat_out_send(struct __sk_buff *skb)
{
	struct xfw_nat_out *o = xfw_nat_out_get();
	__u32 oif;

	if (!o || !o->oif)
		return TC_ACT_OK;
	oif = o->oif;
	o->oif = 0;
	if (o->local && skb->ifindex == oif)
		return TC_ACT_OK;
	skb->tc_index = XFW_NAT_OUT_MARK;
	/* IGMP gets the next hop the FIB lookup found: routed with an output
	 * device, as bpf_redirect_neigh routes, the kernel takes every IGMP
	 * packet for link multicast (ip_route_output_key_hash_rcu: an
	 * RTN_MULTICAST route, which the redirect refuses and drops), where
	 * ip_route_me_harder, with no device, routes it as unicast (difftest
	 * nat seeds 37, 61, 66: fw's own protocol-2 datagrams DNATed in nat
	 * OUTPUT were lost). */
	if (o->igmp_nh) {
		struct bpf_redir_neigh nh = {.nh_family = AF_INET, .ipv4_nh = o->igmp_nh};

		o->igmp_nh = 0;
		return bpf_redirect_neigh(oif, &nh, sizeof(nh), 0);
	}
	/* Without a next hop given, bpf_redirect_neigh routes the packet out
	 * of oif itself and gives the skb that route (ip_route_output_flow):
	 * the neighbour of its gateway, or to loopback the local route,
	 * whose input delivers it. */
	return bpf_redirect_neigh(oif, 0, 0, 0);
}

/* xfw_nat_out_judged reports whether skb is a translated packet
 * xfw_nat_out_send redirected here, judged already (and clears the
 * mark). */
static __always_inline int xfw_nat_out_judged(struct __sk_buff *skb)
{
	if (skb->tc_index != XFW_NAT_OUT_MARK)
		return 0;
	skb->tc_index = 0;
	return 1;
}

/* xfw_nat_keep_xdp marks a forwarded packet FORWARD accepted without a
 * connection (INVALID: the kernel's conntrack attaches none; UNTRACKED,
 * exempted by raw PREROUTING) for
 * xfw_tc_egress, once a translated connection may exist: the kernel's
 * POSTROUTING nat hook leaves such a packet as it came (nf_nat_inet_fn),
 * where xfw_nat_fwd_tc would translate it by its tuple (a DNAT's reply,
 * an SNAT's original direction). XDP metadata XFW_NAT_KEEP_META_MAGIC,
 * which xfw_tc_ingress turns into skb->tc_index XFW_NAT_KEEP_MARK; a
 * driver without XDP metadata leaves the packet unmarked (translated,
 * docs/differences.md). Returns 0. A global function. */
__attribute__((noinline)) int xfw_nat_keep_xdp(struct xdp_md *ctx)
{
	struct xfw_rj_meta *m;

	if (!ctx || !xfw_nat_enabled())
		return 0;
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xfw_rj_meta)))
		return 0;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return 0;
	m->magic = XFW_NAT_KEEP_META_MAGIC;
	m->ifindex = 0;
	return 0;
}

/* xfw_nat_kept reports whether skb is a packet xfw_nat_keep_xdp marked
 * (and clears the mark). */
static __always_inline int xfw_nat_kept(struct __sk_buff *skb)
{
	if (skb->tc_index != XFW_NAT_KEEP_MARK)
		return 0;
	skb->tc_index = 0;
	return 1;
}

/* Replies delivered through loopback, not judged again there: the
 * translated tuple → packets on their way. LRU: a count left behind by a
 * packet lost on the way is forgotten in time. */
#define XFW_NAT_LO_PASS_MAX 4096

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_nat_key);
	__type(value, __u32);
	__uint(max_entries, XFW_NAT_LO_PASS_MAX);
} xfw_nat_lo_pass SEC(".maps");

/* xfw_nat_in_direct reports whether a reply xfw_nat_in_xdp gave its
 * source back (p, translated) may go on to the stack on the device it
 * arrived on: the kernel's input routing there (ip_route_input_slow,
 * fib_validate_source) accepts the new source — not a martian, not one
 * of the host's own addresses, and the route back to it leaves by that
 * device, so that strict reverse-path filtering passes too — and gives
 * the packet the local route (RTN_LOCAL) the kernel's own delivery has;
 * with rp_filter off everywhere (xfw_rl_cfg) the route back may leave
 * by any device.
 * The loopback detour's route is not one: routed out of lo, the host's
 * address gets an RTN_UNICAST route (local delivery, RTCF_LOCAL), and
 * tcp_v4_send_reset answers a segment without a socket only on an
 * RTN_LOCAL route (found by xfw difftest: no RST to a SYN,ACK). A lookup
 * that cannot tell (forwarding off on the device: bpf_fib_lookup
 * answers nothing) keeps the detour. */
static __always_inline int xfw_nat_in_direct(struct xdp_md *ctx, struct xfw_pkt *p)
{
	struct bpf_fib_lookup fib = {};
	struct xfw_rl_cfg *c;
	__u32 zero = 0;

	/* IPv4's limited broadcast (xfw_martian 2) is delivered where it
	 * arrived once fib_validate_source accepts the source
	 * (ip_route_input_slow's brd_input): the checks below; the loopback
	 * detour would not deliver it (difftest nat seed 117). */
	if (xfw_martian(p) == 1 || xfw_src_is_ours(p))
		return 0;
	/* IPv6 input routing has no source check beyond ip6_rcv_core's
	 * (xfw_martian): no reverse-path filter, a source of the host's own
	 * accepted from outside, the local route given. */
	if (p->fam != 0)
		return 1;
	/* Reverse-path filtering off for every device (the control plane
	 * reads the sysctls at each sync): any route back will do. */
	c = bpf_map_lookup_elem(&xfw_rl_cfg, &zero);
	if (c && c->set && !c->rp_filter)
		return 1;
	fib.family = AF_INET;
	fib.ifindex = ctx->ingress_ifindex;
	fib.l4_protocol = p->proto;
	fib.ipv4_src = bpf_htonl((__u32)p->dst_lo);
	fib.ipv4_dst = bpf_htonl((__u32)p->src_lo);
	if (bpf_fib_lookup(ctx, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH) !=
	    BPF_FIB_LKUP_RET_SUCCESS)
		return 0;
	return fib.ifindex == ctx->ingress_ifindex;
}

/* xfw_nat_in_xdp gives a packet INPUT accepted (p tracked in cs) the
 * source xfw_nat_src_of names before local delivery (the kernel's nat
 * INPUT hook, after filter INPUT): a reply in a connection whose
 * destination nat OUTPUT translated its source back, a packet of a
 * connection nat INPUT's SNAT translated its new source. The
 * translated reply goes on to the stack where it arrived when input
 * routing accepts it there (xfw_nat_in_direct); else it is handed to
 * xfw_tc_ingress (XDP metadata XFW_NAT_IN_META_MAGIC), which delivers it
 * through loopback with a route to the host: the kernel's input routing
 * would call a packet from outside with a source of the host's own a
 * martian (the kernel translates after routing). Returns 0 (not such a
 * reply) or 1 (pass it), or -1 when the packet must be dropped (the
 * write failed; a driver without XDP metadata). A global function. */
__attribute__((noinline)) int xfw_nat_in_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					     struct xfw_ct_scratch *cs)
{
	struct xfw_nat_key k = {};
	struct xfw_nat_to to = {};
	struct xfw_rj_meta *m;
	struct xfw_ct_entry *e;
	__u32 st, one = 1, *n;
	int r;

	if (!ctx || !p || !cs || !xfw_nat_enabled())
		return 0;
	if (xfw_nat_translatable(p)) {
		st = p->ct & 7;
		if (st != XFW_CTS_NEW && st != XFW_CTS_ESTABLISHED)
			return 0;
		/* A DNAT's reply: the original destination; nat INPUT's
		 * SNAT's original direction: the new source. */
		e = xfw_nat_tracked(&cs->key);
		if (!e || !xfw_nat_src_of(e, !!(p->ct & XFW_CTV_DIR_REPLY), &to))
			return 0;
		if (xfw_nat_rw_xdp(ctx, p, 0, to.hi, to.lo, to.port))
			return -1;
		if (xfw_nat_in_direct(ctx, p))
			return 1;
	} else if ((r = xfw_natq_in_xdp(ctx, p, cs)) != 0) {
		/* An echo reply, a protocol without ports (nat_query.h). */
		if (r < 0)
			return r;
		if (xfw_nat_in_direct(ctx, p))
			return 1;
	} else {
		/* An ICMP error about such a connection (nat_icmp.h,
		 * nat6_icmp.h); IPv6's goes on where it arrived as a reply
		 * does. */
		r = p->fam ? xfw_nat6_icmp_in_xdp(ctx, p) : xfw_nat_icmp_in_xdp(ctx, p);
		if (r <= 0)
			return r;
		if (p->fam && xfw_nat_in_direct(ctx, p))
			return 1;
	}
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xfw_rj_meta)))
		return -1;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return -1;
	m->magic = XFW_NAT_IN_META_MAGIC;
	m->ifindex = 0;
	xfw_nat_tuple_key(&k, p);
	n = bpf_map_lookup_elem(&xfw_nat_lo_pass, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&xfw_nat_lo_pass, &k, &one, BPF_ANY);
	return 1;
}

/* xfw_nat_in_send delivers a reply xfw_nat_in_xdp translated (called by
 * xfw_tc_ingress), or a REJECT reply for the host itself judged in OUTPUT
 * there (reject_send.h), through loopback: bpf_redirect_neigh routes it
 * to the host's own address (the local route, whose input delivers it
 * without another routing decision); loopback's TC egress lets it pass
 * (XFW_NAT_OUT_MARK). An IPv6 link-local destination (a REJECT reply to
 * a spoofed source of one of the host's link-local addresses) has no
 * route bound to lo, and lo's input finds none either (the address's
 * local route is its interface's: the kernel's own packet carries the
 * route it was sent by through lo): it is sent into lo with itself as
 * the next hop, marked XFW_NAT_LL_MARK: lo's TC egress addresses it
 * (xfw_rj_ll_address) and lo's TCX ingress hands it to the input of the
 * address's device once lo's XDP hook has judged it (xfw_rj_ll_deliver;
 * found against the kernel, tests/e2e
 * TestRejectOwnLinkLocalSourceAgainstKernel). A global function. */
__attribute__((noinline)) int xfw_nat_in_send(struct __sk_buff *skb)
{
	struct bpf_redir_neigh nh;
	struct ipv6hdr *ip6;

	if (!skb)
		return TC_ACT_SHOT;
	skb->tc_index = XFW_NAT_OUT_MARK;
	ip6 = (void *)(long)skb->data + ETH_HLEN;
	if (skb->protocol != bpf_htons(ETH_P_IPV6) || (void *)(ip6 + 1) > (void *)(long)skb->data_end ||
	    !xfw_rj_ll6((const __u32 *)&ip6->daddr))
		return bpf_redirect_neigh(XFW_LOOPBACK_IFINDEX, 0, 0, 0);
	skb->tc_index = XFW_NAT_LL_MARK;
	__builtin_memset(&nh, 0, sizeof(nh));
	nh.nh_family = AF_INET6;
	__builtin_memcpy(nh.ipv6_nh, &ip6->daddr, 16);
	return bpf_redirect_neigh(XFW_LOOPBACK_IFINDEX, &nh, sizeof(nh), 0);
}

/* xfw_nat_lo_passed reports whether p, arriving on loopback, is a reply
 * xfw_nat_in_xdp translated and judged already (and counts it off). */
static __always_inline int xfw_nat_lo_passed(struct xfw_pkt *p)
{
	__u32 zero = 0, *n;
	struct xfw_nat_pend *np;

	if (!xfw_nat_enabled() || (!xfw_nat_translatable(p) && p->proto != IPPROTO_ICMP &&
				   p->proto != IPPROTO_ICMPV6 && xfw_natq_kind(p) == XFW_NATQ_NONE))
		return 0;
	np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	if (!np)
		return 0;
	__builtin_memset(&np->lk, 0, sizeof(np->lk));
	xfw_nat_tuple_key(&np->lk, p);
	n = bpf_map_lookup_elem(&xfw_nat_lo_pass, &np->lk);
	if (!n || !*n)
		return 0;
	if (*n > 1)
		__sync_fetch_and_add(n, -1);
	else
		bpf_map_delete_elem(&xfw_nat_lo_pass, &np->lk);
	return 1;
}

#endif /* XFW_NAT_OUT_H */
