// SPDX-License-Identifier: GPL-2.0
/*
 * xfw.c — entry points of xfw's data plane: XDP on ingress of every
 * interface, TCX on egress. One object serves both families. It is loaded
 * and verified once per namespace; rulesets are swapped by replacing inner
 * maps and flipping a bank index (classify_maps.h), never by reloading code.
 *
 * Hook → chain (as netfilter's filter table):
 *   XDP ingress: raw and mangle PREROUTING first when they decide on the
 *     packet alone (xfw_xdp_rawpre), as the kernel runs them before
 *     routing; then
 *     bpf_fib_lookup() asks the kernel's routing. Local delivery
 *     (NOT_FWDED) → INPUT; forwarded (SUCCESS / NO_NEIGH) → FORWARD with the
 *     route's output interface; anything the kernel drops or answers before
 *     the FORWARD hook (no route, forwarding off, TTL ≤ 1, too big with DF)
 *     is passed unjudged by the chains after PREROUTING, as netfilter
 *     never shows it to them (route.h).
 *   TC egress: only locally generated packets (skb->ingress_ifindex == 0)
 *     → OUTPUT; forwarded packets were judged once, at ingress (a reply
 *     of a DNAT connection gets its source back there: nat.h).
 *   TCX ingress (reject_send.h): the copy of a broadcast or multicast
 *     packet the host delivers to itself → its POSTROUTING, then INPUT's
 *     walk from PREROUTING (loopcopy.h); otherwise REJECT replies.
 *
 * Stages: parse.h (fields) → ct.h (connection tracking, when the ruleset
 * uses it) → classify.h (LBVS, counters) → reject.h (REJECT replies) →
 * log.h (LOG events to the ring buffer). The hooks' own maps are in
 * xfw_maps.h. The connection tables' clock is another object (ct_clock.c).
 *
 * Verifier budget (docs/design.md, "Verifier budget"): the kernel refuses
 * a program past 1,000,000 processed instructions; TestVerifierBudget
 * (internal/dataplane) fails past 600,000 and prints both programs' counts.
 * Every change here reports them before and after. Rules:
 *  - Inlined code is verified once per path reaching it (and per loop
 *    iteration); a global (noinline) function once. Non-trivial work is a
 *    global function, above all after branchy code (parse, tracker, walk),
 *    in a loop body or called from several places, as the stages are (parse,
 *    ct, classify and its set lookups, probes, REJECT, LOG emission).
 *  - A global function: at most five arguments, a scalar result, the
 *    context first (struct xdp_md * / struct __sk_buff *), offsets instead
 *    of packet pointers (bounds re-checked inside), pointer arguments
 *    checked for NULL, larger inputs in a per-CPU scratch.
 *  - Join paths before common work: record a walk's result in memory and
 *    read it back (xfw_parse_frame); no unrolled branchy loops inline.
 *  - 512 bytes of stack for the deepest chain of frames, bpf_loop
 *    callbacks included; each global function adds a frame.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "common.h"

/* Set only to keep every state map referenced by the program, so the control
 * plane finds them from the attached program's map ids. Never true. */
const volatile __u32 xfw_anchor = 0;

#include "parse.h"
#include "bridge.h"
#include "classify.h"
#include "local.h"
#include "reject.h"
#include "ct.h"
#include "reject_ct.h"
#include "xfw_maps.h"
#include "log.h"
#include "route.h"
#include "tcpopt.h"
#include "ip6ext.h"
#include "pred.h"
#include "hdr4.h"
#include "netns.h"
#include "nat.h"
#include "nat_query.h"
#include "nat_range.h"
#include "nat_clash.h"
#include "nat_snat.h"
#include "nat_null.h"
#include "nat_icmp.h"
#include "bench.h"
#include "frag.h"
#include "nat_out.h"
#include "mangle_apply.h"
#include "mark_kernel.h"
#include "ct_unrouted.h"
#include "redirect.h"
#include "trivial.h"
#include "predrop.h"
#include "ifinfo_cache.h"
#include "fastpath.h"
#include "bridge_redo.h"

#define XFW_SOCK_RAW 3 /* SOCK_RAW */
/* The length of an IPv4 header without options. */
#define XFW_IPV4_MIN_HLEN 20
/* The Ethernet broadcast address as a 48-bit number. */
#define XFW_MAC_BCAST 0xffffffffffffULL

/* xfw_touch_state references the state maps (see xfw_anchor). */
static __always_inline void xfw_touch_state(void)
{
	__u32 k = 0;

	if (xfw_anchor) {
		bpf_map_lookup_elem(&xfw_o_state, &k);
		bpf_map_lookup_elem(&xfw_o_ipsets, &k);
		bpf_map_lookup_elem(&xfw_o_cbase, &k);
		bpf_map_lookup_elem(&xfw_build, &k);
	}
}

/* xfw_policy returns the verdict of a built-in chain's policy in slot. */
static __always_inline __u32 xfw_policy(__u32 slot, __u32 chain)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	if (!fc || chain >= XFW_NCHAINS)
		return XFW_ACT_DROP;
	return fc->policy_drop[chain] ? XFW_ACT_DROP : XFW_ACT_ACCEPT;
}

/* The fields the hooks compute before the walk, each only for a
 * generation that uses it: IPv6 extension headers (ip6ext.h), IPv4 header
 * conditions (hdr4.h), and predicates (pred.h, fc->npreds). */
#define XFW_PREWALK_FIELDS ((1u << XFW_F_EXT6) | (1u << XFW_F_HDR4))

/* xfw_prewalk_used reports whether generation slot uses any of them: one
 * test on the common path instead of a call per field. */
static __always_inline int xfw_prewalk_used(__u32 slot)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	return fc && ((fc->active & XFW_PREWALK_FIELDS) || fc->npreds);
}

/* xfw_judge classifies p in chain of generation slot st->slot and returns
 * the verdict as XFW_ACT_ACCEPT, XFW_ACT_DROP or XFW_ACT_REJECT (*reject =
 * type), XFW_ACT_DNAT or XFW_ACT_SNAT. */
static __always_inline __u32 xfw_judge(struct xfw_pkt *p, __u32 chain, __u32 iif,
				       __u32 oif, struct xfw_pending *st, __u32 *reject)
{
	__u32 res;

	res = xfw_classify(p, chain, iif, oif, st);
	if (res == XFW_RES_HOTDROP)
		return XFW_ACT_DROP;
	/* A walk stopped early (st->end) that got there was accepted by
	 * every chain before: the chains after it decide. */
	if (res == XFW_RES_END)
		return st->end ? XFW_ACT_ACCEPT : xfw_policy(st->slot, chain);
	/* The terminal entry, as the walk read it (xfw_classify). */
	*reject = st->term_aux;
	st->nat_addr = st->term_next; /* XFW_ACT_DNAT's address and port */
	st->nat_port = st->term_aux;
	if (st->term_flags & XFW_EF_NATRANGE) /* its range's probe (nat_range.h) */
		st->nat_port |= XFW_NAT_RANGED | st->slot << XFW_NAT_RANGE_SLOT_SHIFT;
	return st->term_action;
}

/* xfw_xdp_parse parses the frame into p, a PPPoE session frame's IP
 * datagram too (judged only on a bridge that passes them to iptables:
 * bridge.h xfw_phys_xdp; else passed). A global function: the parser is
 * verified once, on its own. */
__attribute__((noinline)) int xfw_xdp_parse(struct xdp_md *ctx, struct xfw_pkt *p)
{
	if (!p)
		return XFW_PARSE_PASS;
	return xfw_parse_frame(ctx, 1, p, (__u32)(ctx->data_end - ctx->data),
			       XFW_PARSE_F_CSUM | XFW_PARSE_F_PPPOE);
}

/* xfw_xdp_dnat_logs emits the LOG lines of the walk a DNAT ended, before
 * the packet changes. A global function: one copy of the emitter. */
__attribute__((noinline)) int xfw_xdp_dnat_logs(struct xdp_md *ctx, struct xfw_xdp_scratch *sc,
						__u32 chain, __u64 ifs)
{
	if (ctx && sc && sc->st.nlogs)
		xfw_emit_logs_xdp(ctx, sc, chain, (__u32)ifs, ifs >> 32);
	if (sc)
		sc->st.nlogs = 0;
	return 0;
}

/* What xfw_xdp_dnat returns: the resumed walk's verdict << 40 | chain <<
 * 32 | output ifindex, or XFW_DNAT_PASS when the kernel's routing does not
 * bring the translated packet to netfilter (it goes on unjudged, its
 * translation unconfirmed). */
#define XFW_DNAT_PASS (~0ULL)
#define XFW_DNAT_VERDICT_SHIFT 40

/* xfw_xdp_dnat applies the DNAT verdict of a first packet's walk in chain
 * (chain_iif: chain << 32 | input ifindex; the entry's address and port
 * in st) after its LOG lines were emitted (xfw_xdp_dnat_logs): the
 * translation (nat.h), the route lookup for the translated destination
 * (the kernel routes after nat PREROUTING) and the walk of the chain it
 * picks, resumed after its nat PREROUTING segment. The REJECT type goes
 * to p->reject. A global function. */
__attribute__((noinline)) __u64 xfw_xdp_dnat(struct xdp_md *ctx, struct xfw_pkt *p,
					     struct xfw_pending *st, struct xfw_ct_scratch *cs,
					     __u64 chain_iif)
{
	struct xfw_family_cfg *fc;
	__u32 slot, rj = 0, verdict, oif, chain = chain_iif >> 32, iif = (__u32)chain_iif;
	__u64 route;
	int rc;

	if (!ctx || !p || !st)
		return (__u64)XFW_ACT_DROP << XFW_DNAT_VERDICT_SHIFT;
	if (!cs)
		return (__u64)XFW_ACT_DROP << XFW_DNAT_VERDICT_SHIFT;
	if (xfw_nat_translatable(p))
		rc = xfw_nat_dnat_xdp(ctx, p, cs, st->nat_addr, st->nat_port);
	else /* without TCP or UDP ports (nat_query.h) */
		rc = xfw_natq_dnat_xdp(ctx, p, cs, st->nat_addr, st->nat_port);
	/* A clash: another source port (nat_clash.h). */
	if (rc == 1)
		rc = xfw_nat_clash_xdp(ctx, p, cs);
	if (rc)
		return (__u64)XFW_ACT_DROP << XFW_DNAT_VERDICT_SHIFT;
	if (chain == XFW_CHAIN_FORWARD)
		p->ttl += 1; /* the route decides the decrement anew */
	st->route_mark = p->mark; /* PREROUTING's mark routes it */
	route = xfw_route(ctx, p, iif);
	if (route == XFW_ROUTE_PASS) {
		xfw_nat_cancel();
		return XFW_DNAT_PASS;
	}
	chain = (route >> 32) & 3;
	oif = (__u32)route;
	if (chain == XFW_CHAIN_FORWARD)
		p->ttl -= 1;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc || chain >= XFW_NCHAINS || !fc->nat_resume[chain])
		return (__u64)XFW_ACT_DROP << XFW_DNAT_VERDICT_SHIFT;
	st->start = fc->nat_resume[chain];
	verdict = xfw_judge(p, chain, iif, oif, st, &rj);
	st->start = 0;
	/* nat chains after PREROUTING hold no DNAT (the compiler refuses it). */
	if (verdict == XFW_ACT_DNAT)
		verdict = XFW_ACT_DROP;
	p->reject = rj;
	return (__u64)verdict << XFW_DNAT_VERDICT_SHIFT | (__u64)chain << 32 | oif;
}

/* xfw_xdp_rerouted goes on with a walk of chain (chain_iif: chain << 32 |
 * input ifindex; oif the route's device) that ended where the kernel
 * routes the packet (XFW_ACT_REROUTE: PREROUTING left it a mark): it
 * emits the walk's LOG lines, routes the packet with its mark (ip rule
 * fwmark, route.h) and resumes the walk of the chain that route picks
 * after its PREROUTING segments (fc->reroute). Returns as xfw_xdp_dnat. A
 * global function. */
__attribute__((noinline)) __u64 xfw_xdp_rerouted(struct xdp_md *ctx, struct xfw_xdp_scratch *sc,
						 __u64 chain_iif, __u32 oif)
{
	struct xfw_family_cfg *fc;
	__u32 slot, rj = 0, verdict, chain = chain_iif >> 32, iif = (__u32)chain_iif;
	__u64 route;

	if (!ctx || !sc)
		return (__u64)XFW_ACT_DROP << XFW_DNAT_VERDICT_SHIFT;
	xfw_xdp_dnat_logs(ctx, sc, chain, (__u64)oif << 32 | iif);
	sc->st.route_mark = sc->p.mark;
	if (chain == XFW_CHAIN_FORWARD)
		sc->p.ttl += 1; /* the route decides the decrement anew */
	route = xfw_route(ctx, &sc->p, iif);
	if (route == XFW_ROUTE_PASS)
		return XFW_DNAT_PASS;
	chain = (route >> 32) & 3;
	oif = (__u32)route;
	if (chain == XFW_CHAIN_FORWARD)
		sc->p.ttl -= 1;
	slot = sc->st.slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc || chain >= XFW_NCHAINS || !fc->reroute[chain])
		return (__u64)XFW_ACT_DROP << XFW_DNAT_VERDICT_SHIFT;
	sc->st.start = fc->reroute[chain];
	verdict = xfw_judge(&sc->p, chain, iif, oif, &sc->st, &rj);
	sc->st.start = 0;
	sc->p.reject = rj;
	return (__u64)verdict << XFW_DNAT_VERDICT_SHIFT | (__u64)chain << 32 | oif;
}

/* xfw_xdp_rerouted_out passes to the stack the packet in sc (received on
 * iif) that PREROUTING's mark or TTL routed to where netfilter never sees
 * it (xfw_xdp_rerouted: p->ttl the frame's), with its mark
 * (mark_kernel.h) and PREROUTING's rewrites (mangle_apply.h: a TTL set
 * to 1 gets the kernel's "time exceeded"). A global function. */
__attribute__((noinline)) int xfw_xdp_rerouted_out(struct xdp_md *ctx, struct xfw_xdp_scratch *sc, __u32 iif)
{
	if (!ctx || !sc || sc->p.pre_drop)
		return XDP_DROP; /* the stack drops it after PREROUTING */
	if (sc->p.mangle && xfw_mangle_xdp(ctx, &sc->p, 0, iif) < 0)
		return XDP_DROP;
	return xfw_xdp_mark_out(ctx, sc, XFW_ROUTE_PASS, iif) ? XDP_DROP : XDP_PASS;
}

/* What xfw_xdp_rawpre returns, and st->raw_done after it. */
#define XFW_RAWPRE_ON 0       /* go on: routed, then walked (st->raw_done) */
#define XFW_RAWPRE_DROP 1     /* PREROUTING dropped it */
#define XFW_RAWPRE_DONE 1     /* raw_done: judged and accepted */
#define XFW_RAWPRE_NOTRACKED 2 /* raw_done: and a notrack rule exempted it */

/* xfw_notracked reports whether raw PREROUTING, judged before the route
 * lookup, exempted the packet from connection tracking (NOTRACK, CT
 * --notrack): the kernel's conntrack then leaves it alone, routed or not,
 * and no translation applies to it. */
static __always_inline int xfw_notracked(struct xfw_pending *st)
{
	return st->raw_done == XFW_RAWPRE_NOTRACKED;
}

/* xfw_xdp_rawpre judges, before the route lookup, the PREROUTING chains
 * of the packet in sc (received on iif) the generation has judged there
 * (raw, and mangle after it: st->pre_at, compiler.Layout.RawPre): the
 * kernel runs them before its routing, so a packet they drop costs no
 * route lookup, one the routing then drops (no route, an IPv4 martian or
 * option) is counted there as the kernel counts it, and the mark they
 * leave routes the packet. The INPUT walk's segments stand for both
 * walks' (PREROUTING sees the TTL before ip_forward's decrement). It
 * emits their LOG lines and sets st->raw_done when they accepted the
 * packet, for the walk after routing to resume past them, saying whether
 * a notrack rule exempted it from tracking (mangle.h leaves p->ct
 * UNTRACKED with the direction bit, which the tracker never sets: parse
 * left it 0). A later fragment is judged alone, as the kernel's
 * PREROUTING sees each fragment without connection tracking (routed or
 * not, for the host or not); with it, not here: it follows its datagram's
 * verdict (frag.h), the kernel reassembling first. Nor is an IPv6 martian
 * (ip6_rcv_core drops it before the hook). A global function: verified
 * once, for both callers. */
__attribute__((noinline)) int xfw_xdp_rawpre(struct xdp_md *ctx, struct xfw_xdp_scratch *sc, __u32 iif)
{
	struct xfw_pkt *p;
	struct xfw_pending *st;
	__u32 res;

	if (!ctx || !sc)
		return XFW_RAWPRE_ON;
	p = &sc->p;
	st = &sc->st;
	st->raw_done = 0;
	if (!st->pre_at[XFW_CHAIN_INPUT] || (xfw_frag_follows(p) && xfw_ct_active(st->slot)))
		return XFW_RAWPRE_ON;
	if (p->fam == 1 && iif != XFW_LOOPBACK_IFINDEX && xfw_martian(p) == 1)
		return XFW_RAWPRE_ON;
	/* A leading address drop (a flood's): no fields before the walk,
	 * no classification (predrop.h). */
	if (xfw_predrop(p, st->slot))
		return XFW_RAWPRE_DROP;
	if (xfw_prewalk_used(st->slot)) {
		xfw_ext6_xdp(ctx, p, st->slot);
		xfw_preds_xdp(ctx, p, st->slot);
		xfw_hdr4_xdp(ctx, p, st->slot);
	}
	st->end = st->pre_at[XFW_CHAIN_INPUT];
	res = xfw_classify(p, XFW_CHAIN_INPUT, iif, 0, st);
	st->end = 0;
	if (st->nlogs)
		xfw_emit_logs_xdp(ctx, sc, XFW_CHAIN_INPUT, iif, 0);
	st->nlogs = 0;
	/* A packet over loopback carries the connection OUTPUT gave it,
	 * which a notrack rule leaves (xt_CT: not for a packet with one). */
	if (res == XFW_RES_END) {
		st->raw_done = p->ct == (XFW_CTS_UNTRACKED | XFW_CTV_DIR_REPLY) && iif != XFW_LOOPBACK_IFINDEX
				       ? XFW_RAWPRE_NOTRACKED
				       : XFW_RAWPRE_DONE;
		return XFW_RAWPRE_ON;
	}
	/* A DROP or a hotdrop: the only ends the compiler lets these segments
	 * have (compiler.preRouteTarget); anything else fails closed. */
	return XFW_RAWPRE_DROP;
}

/* xfw_xdp_unrouted passes to the stack a packet it drops after PREROUTING
 * (route.h): counted first in the PREROUTING chains that only count
 * (st->pre_lazy: not walked before routing), as the kernel's are for
 * every packet, then tracked as the kernel's PREROUTING tracks it when the
 * generation tracks connections (ct_unrouted.h) and raw PREROUTING did
 * not exempt it. */
static __always_inline int xfw_xdp_unrouted(struct xdp_md *ctx, struct xfw_xdp_scratch *sc, __u32 iif)
{
	if (sc->st.pre_lazy) {
		sc->st.pre_at[XFW_CHAIN_INPUT] = sc->st.pre_lazy;
		xfw_xdp_rawpre(ctx, sc, iif); /* empty chains: it accepts */
	}
	if (xfw_ct_active(sc->st.slot) && !xfw_notracked(&sc->st))
		xfw_ct_unrouted(ctx, &sc->p, iif);
	return XDP_PASS;
}

/* st->unrouted: the walk is that of a packet the routing drops
 * (xfw_xdp_unrouted_walk), or of one the stack drops before routing it
 * (refused IPv4 options), which no DNAT or mark routes. */
#define XFW_UNROUTED_WALK 1
#define XFW_UNROUTED_DROPPED 2

/* xfw_xdp_unrouted_walk decides whether the packet in sc, received on
 * iif, which the routing drops, is walked through the INPUT walk's
 * PREROUTING segments the pre-walk left (nat PREROUTING; raw and mangle
 * PREROUTING when they read more than the packet): the kernel runs them
 * before its routing decision for every packet, routed or not, and a DNAT
 * there or the mark they leave may route it after all. Then it sets
 * st->unrouted and the walk's end (st->end, xfw_family_cfg.pre_end) and
 * returns 1: the hook walks the packet as INPUT's, tracked first. Not
 * such a walk (0): a later fragment (it follows its datagram), loopback's
 * packets (tracked at OUTPUT), an IPv6 martian (ip6_rcv_core drops it
 * before the hook), or nothing left to walk. A global function. */
__attribute__((noinline)) int xfw_xdp_unrouted_walk(struct xfw_xdp_scratch *sc, __u32 iif)
{
	struct xfw_family_cfg *fc;
	struct xfw_pending *st;
	__u32 slot, from;

	if (!sc)
		return 0;
	st = &sc->st;
	st->unrouted = 0;
	if (sc->p.frag || iif == XFW_LOOPBACK_IFINDEX)
		return 0;
	if (sc->p.fam == 1 && xfw_martian(&sc->p) == 1)
		return 0;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc)
		return 0;
	from = st->raw_done ? st->pre_at[XFW_CHAIN_INPUT] : 1;
	if (fc->pre_end[XFW_CHAIN_INPUT] <= from)
		return 0;
	st->end = fc->pre_end[XFW_CHAIN_INPUT];
	st->unrouted = XFW_UNROUTED_WALK;
	return 1;
}

/* xfw_xdp_unrouted_done ends the walk of a packet the routing dropped
 * (xfw_xdp_unrouted_walk) that PREROUTING left unrouted with verdict:
 * passed to the stack, which drops it (its new connection unconfirmed, as
 * the kernel's dies with the skb), unless PREROUTING dropped it; routed
 * by its mark to a "prohibit" rule, the kernel's routing takes the mark
 * too (mark_kernel.h). A global function. */
__attribute__((noinline)) int xfw_xdp_unrouted_done(struct xdp_md *ctx, struct xfw_xdp_scratch *sc,
						    __u32 verdict, __u32 iif)
{
	if (!ctx || !sc)
		return XDP_DROP;
	sc->st.unrouted = 0;
	if (sc->st.nlogs)
		xfw_emit_logs_xdp(ctx, sc, XFW_CHAIN_INPUT, iif, 0);
	sc->st.nlogs = 0;
	if (verdict != XFW_ACT_ACCEPT)
		return XDP_DROP;
	if (sc->p.mark && xfw_xdp_mark_out(ctx, sc, XFW_ROUTE_PASS, iif))
		return XDP_DROP;
	/* Multicast to a group the device has not joined (mcast.h): dropped
	 * here, so a group joined since the last mirror fails closed. */
	return sc->p.pre_drop ? XDP_DROP : XDP_PASS;
}

/* xfw_rawpre_on reports whether the generation judges PREROUTING before
 * the route lookup (st->pre_at, copied by xfw_xdp_slot): tested inline,
 * so that other generations pay no call for it. */
static __always_inline int xfw_rawpre_on(struct xfw_pending *st)
{
	return st->pre_at[XFW_CHAIN_INPUT] != 0;
}

/* xfw_rawpre_resume returns where the walk of chain starts
 * (xfw_pending.start): past its PREROUTING segments when xfw_xdp_rawpre
 * judged them (st->raw_done), else at its beginning (0). */
static __always_inline __u32 xfw_rawpre_resume(struct xfw_pending *st, __u32 chain)
{
	if (!st->raw_done || chain > XFW_CHAIN_FORWARD)
		return 0;
	return st->pre_at[chain];
}

/* xfw_xdp_slot sets st->slot to family fi's active generation (the one
 * lookup of its configuration the hook makes before routing: st->pre_at
 * copies what the PREROUTING pre-walk reads of it). Returns 0 when the
 * family has no ruleset. */
static __always_inline int xfw_xdp_slot(struct xfw_pending *st, __u32 fi)
{
	struct xfw_family_cfg *fc = xfw_active_cfg(fi, &st->slot);

	if (!fc)
		return 0;
	st->pre_at[XFW_CHAIN_INPUT] = fc->pre_passive ? 0 : fc->raw_pre[XFW_CHAIN_INPUT];
	st->pre_at[XFW_CHAIN_FORWARD] = fc->raw_pre[XFW_CHAIN_FORWARD];
	st->pre_lazy = fc->pre_passive ? fc->raw_pre[XFW_CHAIN_INPUT] : 0;
	return 1;
}

/* xfw_xdp_nat_pre translates, before routing, a later packet p of a
 * translated connection received on iif (xfw_nat_pre: a DNAT's original
 * direction, an SNAT's reply; not one raw PREROUTING exempted from
 * tracking, st: the kernel translates connections), and tracks one with
 * ports there, as the kernel's PREROUTING tracks a packet before its nat
 * hook (the tracker keys the connection by the translated tuple), when
 * the generation tracks and iif is not loopback (tracked at OUTPUT). A
 * packet the tracker finds INVALID (a TCP segment out of the window,
 * SCTP with a wrong verification tag) has no connection in the kernel
 * (nf_conntrack_in leaves skb->_nfct NULL), and nf_nat_inet_fn leaves it
 * as it came: its wire tuple is given back, routed and judged as it
 * came. p->nat_pre records the tracking (the hook does not track p
 * again). Returns 0, or -1 when the packet must be dropped (a failed
 * write). A global function, verified once. */
__attribute__((noinline)) int xfw_xdp_nat_pre(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_pending *st,
					      __u32 iif)
{
	struct xfw_ct_scratch *cs;

	if (!ctx || !p || !st || xfw_notracked(st) || !xfw_nat_pre(ctx, p))
		return 0;
	if (iif == XFW_LOOPBACK_IFINDEX || !xfw_ct_active(st->slot))
		return 0;
	cs = xfw_ct_scratch_get(0);
	if (!cs)
		return 0;
	xfw_ct_load_xdp(ctx, p, cs);
	p->ct = xfw_ct_track(p, cs, XFW_CTM_TRACK);
	p->nat_pre = XFW_NATPRE_TRACKED;
	if ((p->ct & 7) != XFW_CTS_INVALID)
		return 0;
	return xfw_nat_pre_undo_xdp(ctx, p);
}

/* xfw_xdp_judged is the XDP hook's work; xfw_xdp brackets it for
 * quiescence (generation.h). */
static __always_inline int xfw_xdp_judged(struct xdp_md *ctx)
{
	struct xfw_ifinfo *ifi;
	struct xfw_ct_scratch *cs = 0;
	struct xfw_xdp_scratch *sc;
	struct xfw_pkt *p;
	struct xfw_pending *st;
	__u32 zero = 0;
	__u32 chain, iif, oif = 0, rj = 0, verdict, dnat_undone = 0;
	int rc, tagged;
	__u64 key, route;

	xfw_touch_state();
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &zero);
	if (!sc)
		return XDP_PASS;
	p = &sc->p;
	st = &sc->st;
	st->hook = XFW_SCRATCH_XDP;
	XFW_BENCH_AT(XFW_BS_ENTER, XDP_PASS);
	if (xfw_xdp_parse(ctx, p) != XFW_PARSE_JUDGE)
		return XDP_PASS;
	XFW_BENCH_AT(XFW_BS_PARSE, XDP_PASS);
	/* No skb yet: nothing before PREROUTING has marked the packet (a tc
	 * ingress program would run after XDP). */
	p->mark = 0;
	st->route_mark = 0;
	st->raw_done = 0;
	st->unrouted = 0;
	p->owner = 0; /* no socket at XDP (-m owner, owner.h) */
	if (!xfw_xdp_slot(st, p->fam ? 1 : 0))
		return XDP_PASS;
	XFW_BENCH_AT(XFW_BS_SLOT, XDP_PASS);
	/* -m tcpmss's value, when a rule uses it (tcpopt.h; tested here: a
	 * global call for nothing costs every packet). */
	if (xfw_uses_tcpmss(st->slot, p))
		xfw_tcpmss_set_xdp(ctx, p, &sc->opt, st->slot);
	/* IPv6 options the stack refuses: dropped before any chain. */
	if (p->fam == 1 && !xfw_ipv6_hbh_ok(ctx, p->l3_off, p->l3len, &sc->tlv))
		return XDP_PASS;
	XFW_BENCH_AT(XFW_BS_OPTS, XDP_PASS);
	key = (__u64)ctx->ingress_ifindex | ((__u64)(p->vlan & XFW_VLAN_ID_MASK) << 32);
	ifi = xfw_ifinfo_get(sc, key);
	if (!ifi)
		return XDP_PASS; /* a VLAN with no device: the stack drops it */
	/* Frames for another host (PACKET_OTHERHOST) never reach IP. */
	if (p->dst_unicast && xfw_mac48(p->dst_mac) != xfw_mac48(ifi->mac))
		return XDP_PASS;
	/* skb->pkt_type as eth_type_trans sets it (-m pkttype). */
	if (!p->dst_unicast)
		p->pkttype = xfw_mac48(p->dst_mac) == XFW_MAC_BCAST ? PACKET_BROADCAST : PACKET_MULTICAST;
	iif = ifi->ifindex;
	/* The device's sysctls the checks before any chain follow. */
	p->in_sys = (ifi->flags >> XFW_IF_INSYS_SHIFT) & XFW_INSYS_MASK;
	st->srr = 0;
	/* Its reverse-path filter (route.h xfw_rpf). */
	st->rpf = (ifi->flags >> XFW_IF_RPF_SHIFT) & XFW_RPF_IN_MASK;
	/* Passed up by a bridge: -m physdev's ports (bridge.h). */
	tagged = xfw_phys_xdp(ctx, p, ifi);
	if (tagged == XFW_BR_TAGGED_PASS || (p->vlan == XFW_VLAN_PPPOE && tagged != XFW_BR_TAGGED_PRE))
		return XDP_PASS;
	/* mac_mt matches nothing on a device that is not Ethernet. */
	if (iif == XFW_LOOPBACK_IFINDEX)
		p->mac_src = XFW_MAC_NONE;
	/* IPv4 options the stack refuses (ip_rcv_options, after
	 * PREROUTING): dropped before any other chain, after raw
	 * PREROUTING judged it (xfw_xdp_rawpre). A header without options
	 * (the transport header right after its 20 bytes; thoff is 0 for a
	 * later fragment) has none to check. A source route the device's
	 * accept_source_route lets through is judged with the route
	 * (st->srr, route.h xfw_srr_route). */
	/* So is a VLAN-tagged or PPPoE frame a bridge passes up (bridge.h). */
	if (tagged == XFW_BR_TAGGED_PRE ||
	    (p->fam == 0 && p->thoff != p->l3_off + XFW_IPV4_MIN_HLEN &&
	     !(st->srr = xfw_ipv4_opts_ok(ctx, p, ifi->flags & XFW_IF_SRCROUTE)))) {
		if (xfw_rawpre_on(st) && xfw_xdp_rawpre(ctx, sc, iif) == XFW_RAWPRE_DROP)
			return XDP_DROP;
		/* The rest of PREROUTING too, which neither DNAT nor a mark
		 * saves from the drop (st->unrouted). */
		if (xfw_xdp_unrouted_walk(sc, iif)) {
			st->unrouted = XFW_UNROUTED_DROPPED;
			route = (__u64)XFW_CHAIN_INPUT << 32;
			goto routed;
		}
		return xfw_xdp_unrouted(ctx, sc, iif);
	}
	st->srr &= ~1u; /* the XFW_SRR_* bits alone (0 without options) */
	XFW_BENCH_AT(XFW_BS_DEVICE, XDP_PASS);
	/* A reply nat OUTPUT translated back, judged where it came in. */
	if (iif == XFW_LOOPBACK_IFINDEX && xfw_nat_lo_passed(p))
		return XDP_PASS;
	/* Passed up by a port for the bridge's MAC, a later frame of a
	 * connection whose translation sends it to a neighbour of the same
	 * bridge: back into the bridge, judged where it leaves a port as
	 * br_netfilter's bridged DNAT (bridge_redo.h). */
	if (p->physin && p->physin < XFW_PHYS_NULL && xfw_nat_enabled() && xfw_ct_active(st->slot) &&
	    xfw_br_redo_xdp(ctx, sc, iif, 0) == XDP_TX)
		return XDP_TX;
	/* raw and mangle PREROUTING, which the kernel runs before DNAT and
	 * routing: judged first when they decide on the packet alone. */
	if (xfw_rawpre_on(st) && xfw_xdp_rawpre(ctx, sc, iif) == XFW_RAWPRE_DROP)
		return XDP_DROP;
	/* Their mark (-j MARK) routes the packet (mark_route.h). */
	st->route_mark = p->mark;
	/* A later packet of a translated connection: DNAT before routing,
	 * kept when the tracker finds it INVALID. */
	if (xfw_nat_enabled() && xfw_xdp_nat_pre(ctx, p, st, iif))
		return XDP_DROP;
	XFW_BENCH_AT(XFW_BS_NATPRE, XDP_PASS);
	route = xfw_route(ctx, p, iif);
	XFW_BENCH_AFTER(XFW_BS_FIB, XFW_BS_FIB, XDP_PASS);
	if (route == XFW_ROUTE_PASS) {
		/* With connection tracking the kernel reassembles first and
		 * refuses the datagram once, which its first fragment, passed
		 * to the stack, stands for: a later fragment goes no further
		 * (the stack would answer each: IPv6 sends errors about
		 * later fragments). */
		if (xfw_frag_follows(p) && xfw_ct_active(st->slot))
			return XDP_DROP;
		/* PREROUTING's chains after the pre-walk see it too: walked
		 * as INPUT's up to their end (st->unrouted). */
		if (xfw_xdp_unrouted_walk(sc, iif)) {
			route = (__u64)XFW_CHAIN_INPUT << 32;
			goto routed;
		}
		rc = xfw_xdp_unrouted(ctx, sc, iif);
		/* Routed by PREROUTING's mark (a "prohibit" rule): the
		 * kernel's routing takes it too (mark_kernel.h). */
		if (p->mark && xfw_xdp_mark_out(ctx, sc, XFW_ROUTE_PASS, iif))
			return XDP_DROP;
		/* As xfw_xdp_unrouted_done. */
		return p->pre_drop ? XDP_DROP : rc;
	}
	XFW_BENCH_AT(XFW_BS_ROUTE, XDP_PASS);
routed:
	chain = route >> 32;
	oif = (__u32)route;
	/* -m tcpmss after --clamp-mss-to-pmtu: the path MTU (mangle.h). */
	if (!st->unrouted && xfw_mss_mtu_wanted(st->slot, p))
		xfw_mangle_mtu_xdp(ctx, p, (__u64)oif << 32 | iif);
	/* ip_forward and ip6_forward decrement the TTL / hop limit before
	 * the FORWARD hook: -m ttl / -m hl see the decremented value. */
	if (chain == XFW_CHAIN_FORWARD)
		p->ttl -= 1;
	/* ip_local_deliver reassembles IPv4 before the INPUT hook: INPUT sees
	 * whole datagrams. The first fragment stands for its datagram (its
	 * verdict decides whether reassembly can complete); later fragments
	 * are left to the kernel, unjudged. IPv6 reassembles after INPUT. */
	if (chain == XFW_CHAIN_INPUT && p->fam == 0 && p->fragmented) {
		if (p->frag)
			return XDP_PASS;
	}
	/* A walk that accepts every packet: counted, accepted (trivial.h).
	 * No connection tracked, no LOG, no mark, no rewrite; no
	 * translation pending (undone as any untracked packet's). */
	if (!st->unrouted && xfw_trivial_walk(st->slot, chain, p->l3len)) {
		xfw_nat_undo_xdp(ctx, p);
		/* Forwarded at XDP when it qualifies (fastpath.h). */
		if (chain == XFW_CHAIN_FORWARD)
			return xfw_fp_xdp(ctx, p, (__u64)oif << 32 | iif, st->rpf & XFW_RPF_UNSURE);
		return XDP_PASS;
	}
	if (xfw_ct_active(st->slot)) {
		/* Connection tracking reassembles (nf_defrag) before any
		 * chain, in both families and both paths: the first fragment
		 * stands for its datagram, later ones follow its verdict
		 * (frag.h). */
		if (xfw_frag_follows(p))
			return xfw_frag_later_xdp(ctx, p);
		/* Exempted by raw PREROUTING before routing: untracked
		 * (p->ct says UNTRACKED), no connection; a later fragment
		 * judged alone has none either (INVALID, parse's 0). */
		cs = xfw_notracked(st) || p->frag ? 0 : xfw_ct_scratch_get(0);
		/* (Tracked already when translated before routing.) */
		if (cs && p->nat_pre != XFW_NATPRE_TRACKED) {
			xfw_ct_load_xdp(ctx, p, cs);
			p->ct = xfw_ct_track(p, cs, iif == XFW_LOOPBACK_IFINDEX ? XFW_CTM_LO_INPUT
									    : XFW_CTM_TRACK);
		}
	}

	if (cs && !st->unrouted && xfw_ct_fast(p, st->slot, chain)) {
		st->nlogs = 0;
		verdict = XFW_ACT_ACCEPT;
	} else {
		if (xfw_prewalk_used(st->slot)) {
			xfw_ext6_xdp(ctx, p, st->slot);
			xfw_preds_xdp(ctx, p, st->slot);
			xfw_hdr4_xdp(ctx, p, st->slot);
		}
		XFW_BENCH_AT(XFW_BS_FIELDS, XDP_PASS);
		/* Past PREROUTING's segments judged before routing. */
		st->start = xfw_rawpre_resume(st, chain);
		st->route_ttl = p->ttl; /* routed with them (the reroute probe) */
		st->route_tos = p->tos;
		verdict = xfw_judge(p, chain, iif, oif, st, &rj);
		st->start = 0;
		st->end = 0; /* an unrouted packet's walk (st->unrouted) */
		/* Dropped by the stack whatever its route: not translated,
		 * not routed again. */
		if (st->unrouted == XFW_UNROUTED_DROPPED &&
		    (verdict == XFW_ACT_REROUTE || verdict == XFW_ACT_DNAT))
			verdict = XFW_ACT_ACCEPT;
		/* PREROUTING left it a mark: routed again (mark_kernel.h). */
		if (verdict == XFW_ACT_REROUTE) {
			route = xfw_xdp_rerouted(ctx, sc, (__u64)chain << 32 | iif, oif);
			/* Routed by its mark, or by its new TTL, to where
			 * netfilter never sees it: the kernel's routing sees
			 * them, and PREROUTING's rewrites (mangle_apply.h). */
			if (route == XFW_DNAT_PASS)
				return xfw_xdp_rerouted_out(ctx, sc, iif);
			st->unrouted = 0;
			verdict = route >> XFW_DNAT_VERDICT_SHIFT;
			chain = (route >> 32) & 0xff;
			oif = (__u32)route;
			rj = p->reject;
		}
		XFW_BENCH_AFTER(XFW_BS_WALKSETUP, XFW_BS_JUDGE, XDP_PASS);
	}
	/* The REJECT type waits in p, not in a register spilled across the
	 * LOG calls: the stack has no slot to spare. */
	p->reject = rj;
	if (verdict == XFW_ACT_DNAT) {
		xfw_xdp_dnat_logs(ctx, sc, chain, (__u64)oif << 32 | iif);
		/* Passed up by a port, translated to a neighbour of the same
		 * bridge: the rest is judged where it leaves (bridge_redo.h). */
		if (xfw_br_redo_ok(p, st, cs) && xfw_br_redo_xdp(ctx, sc, iif, 1) == XDP_TX)
			return XDP_TX;
		route = xfw_xdp_dnat(ctx, p, st, cs, (__u64)chain << 32 | iif);
		/* Routed where netfilter never sees it; one the stack drops
		 * after PREROUTING (p->pre_drop) dropped here. */
		if (route == XFW_DNAT_PASS)
			return p->pre_drop ? XDP_DROP : XDP_PASS;
		st->unrouted = 0;
		verdict = route >> XFW_DNAT_VERDICT_SHIFT;
		chain = (route >> 32) & 0xff;
		oif = (__u32)route;
	}
	/* Left unrouted by PREROUTING: the stack drops it. */
	if (st->unrouted)
		return xfw_xdp_unrouted_done(ctx, sc, verdict, iif);
	/* nat POSTROUTING's SNAT or MASQUERADE (nat_snat.h); an IPv6
	 * MASQUERADE's source by the route (nat6.h). nat INPUT's SNAT
	 * (MASQUERADE is refused there) names the input device: loopback's
	 * packets are not translated. */
	if (verdict == XFW_ACT_SNAT && p->fam == 1 && !st->nat_addr)
		xfw_nat6_masq_xdp(ctx, p, oif);
	if (verdict == XFW_ACT_SNAT)
		verdict = cs && !xfw_nat_snat(p, cs, st->nat_addr, st->nat_port,
					      chain == XFW_CHAIN_INPUT ? iif : oif) ? XFW_ACT_ACCEPT
										   : XFW_ACT_DROP;
	/* A new connection's reply tuple taken by a translation (nat_null.h). */
	if (verdict == XFW_ACT_ACCEPT && cs && xfw_nat_null_clash(p, cs))
		verdict = XFW_ACT_DROP;
	if (verdict == XFW_ACT_ACCEPT && cs) {
		xfw_ct_confirm(cs);
		xfw_nat_confirm();
	}
	/* (An untracked first fragment too: its datagram is reassembled
	 * all the same, nf_defrag running before raw.) */
	if (cs || xfw_notracked(st))
		xfw_frag_note_xdp(ctx, p, verdict);
	if (st->nlogs)
		xfw_emit_logs_xdp(ctx, sc, chain, iif, oif);
	/* A translation the verdict did not accept is undone: REJECT
	 * answers the packet as it came (the kernel translates its answer
	 * back). */
	if (verdict != XFW_ACT_ACCEPT || !cs)
		dnat_undone = xfw_nat_undo_xdp(ctx, p);
	switch (verdict) {
	case XFW_ACT_ACCEPT:
		/* TCPMSS, DSCP, TOS, TTL, HL rewrites (mangle_apply.h). */
		if (p->mangle &&
		    xfw_mangle_xdp(ctx, p, chain == XFW_CHAIN_FORWARD, (__u64)oif << 32 | iif) < 0)
			return XDP_DROP;
		/* A reply in a connection nat OUTPUT translated, a packet of
		 * one nat INPUT's SNAT translated (nat_out.h); loopback's
		 * were translated as they left by it. */
		if (cs && chain == XFW_CHAIN_INPUT && iif != XFW_LOOPBACK_IFINDEX &&
		    xfw_nat_in_xdp(ctx, p, cs) < 0)
			return XDP_DROP;
		/* Forwarded without a connection (INVALID, or exempted by
		 * raw PREROUTING): POSTROUTING leaves it as it came
		 * (nat_out.h); before the mark, which the metadata holds
		 * first. */
		if (chain == XFW_CHAIN_FORWARD &&
		    ((cs && (p->ct & 7) == XFW_CTS_INVALID) || xfw_notracked(st)))
			xfw_nat_keep_xdp(ctx);
		/* The mark the walk left, for the kernel (mark_kernel.h). */
		if ((p->mark | st->route_mark) &&
		    xfw_xdp_mark_out(ctx, sc, (__u64)chain << 32 | oif, iif))
			return XDP_DROP;
		/* Forwarded at XDP when it qualifies (fastpath.h); a mark or
		 * a rewrite is the stack's to carry on, and so is a packet
		 * whose reverse-path check xfw could not make. */
		if (chain == XFW_CHAIN_FORWARD)
			return xfw_fp_xdp(ctx, p, (__u64)oif << 32 | iif,
					  p->mangle || (p->mark | st->route_mark) ||
						  (st->rpf & XFW_RPF_UNSURE));
		return XDP_PASS;
	case XFW_ACT_REJECT:
		/* The reply quotes the packet TCPMSS changed (mangle_apply.h). */
		if (xfw_mangle_mss_now_xdp(ctx, p, (__u64)oif << 32 | iif) < 0)
			return XDP_DROP;
		rc = xfw_xdp_reject(ctx, p, chain, dnat_undone,
				    xfw_ct_active(st->slot) && (p->ct & 7) != XFW_CTS_UNTRACKED /* state bits */);
		/* A reset closes the connection it answered (ct_hook.h). */
		if (cs && rc != XDP_DROP)
			xfw_ct_rst_close(cs, XFW_RJ_SLOT_XDP, p->ct);
		/* Handed to xfw_tc_ingress, which judges the reply in OUTPUT
		 * with the connection the kernel attaches (reject_ct.h) or,
		 * without one, tracks it. */
		if (cs && rc == XDP_PASS)
			xfw_rjct_put_xdp(ctx, p, cs);
		/* Sent at once (no XDP metadata): a reset sent for a packet without a
		 * connection is tracked here. */
		else if (cs && rc != XDP_DROP && (p->ct & 7) == XFW_CTS_INVALID &&
			 p->proto == IPPROTO_TCP)
			xfw_ct_track_rst(p, cs);
		return rc;
	}
	/* A hairpin: the kernel's redirect goes out all the same (redirect.h). */
	if (chain == XFW_CHAIN_FORWARD && oif == iif)
		return xfw_rd_xdp(ctx, p, iif);
	return XDP_DROP;
}

SEC("xdp")
int xfw_xdp(struct xdp_md *ctx)
{
	struct xfw_inflight *f;
	int rc;

	XFW_BENCH_AT(XFW_BS_BARE, XDP_PASS);
	/* A device that left xfw's namespace (netns.h). */
	if (xfw_xdp_away(ctx))
		return XDP_PASS;
	f = xfw_enter();
	rc = xfw_xdp_judged(ctx);

	xfw_leave(f);
	return rc;
}

/* Bytes of headers made linear before parsing on egress: Ethernet, a VLAN
 * tag, IPv6 with extension headers and a TCP header fit. */
#define XFW_TC_PULL 256

/* xfw_tc_parse parses the skb into p: the packet the hook judges, and
 * again REJECT's reply, built in place; pppoe: the IP datagram of a PPPoE
 * session frame too (XFW_PARSE_F_PPPOE). A global function: the parser is
 * verified once, on its own, and its stack is gone before classifying. */
__attribute__((noinline)) int xfw_tc_parse(struct __sk_buff *skb, struct xfw_pkt *p, int pppoe)
{
	__u32 pull;

	if (!skb || !p)
		return XFW_PARSE_PASS;
	pull = skb->len < XFW_TC_PULL ? skb->len : XFW_TC_PULL;
	bpf_skb_pull_data(skb, pull);
	return xfw_parse_frame(skb, 0, p, skb->len, pppoe ? XFW_PARSE_F_PPPOE : 0);
}

/* xfw_tc_reply_judge judges, in OUTPUT with output device oif, a REJECT
 * reply in the skb: the one for the host itself that xfw_tc_reject left
 * there (the kernel's reply passes OUTPUT, leaving by lo, where rules
 * count, log and may drop it), or one to a packet that arrived, sent on by
 * xfw_tc_ingress (xfw_rj_out_judge). p and st are the caller's, reused; the
 * caller emits the LOG lines; a REJECT's type goes to p->reject. A global function: the second parse and
 * judgement are verified once, on their own. */
__attribute__((noinline)) int xfw_tc_reply_judge(struct __sk_buff *skb, struct xfw_pkt *p,
						 struct xfw_pending *st, struct xfw_ct_scratch *cs,
						 __u32 oif)
{
	struct xfw_family_cfg *fc;
	__u32 rj = 0, verdict;

	if (!skb || !p || !st)
		return XFW_ACT_DROP;
	st->nlogs = 0;
	if (xfw_tc_parse(skb, p, 0) != XFW_PARSE_JUDGE)
		return XFW_ACT_DROP;
	p->mark = 0; /* the kernel's reply is unmarked (fwmark_reflect off) */
	st->route_mark = 0;
	/* -m owner and -m recent: nf_send_reset's reset has no socket,
	 * icmp_send's error the ICMP socket (owner.h). */
	xfw_owner_reply(p);
	st->slot = xfw_active_slot(p->fam ? 1 : 0);
	if (st->slot == XFW_NO_SLOT)
		return XFW_ACT_ACCEPT;
	/* cs is set when the offending packet was tracked. */
	if (cs)
		xfw_ct_reply(skb, p, cs);
	xfw_ext6_tc(skb, p, st->slot);
	xfw_preds_tc(skb, p, st->slot);
	xfw_hdr4_tc(skb, p, st->slot);
	verdict = xfw_judge(p, XFW_CHAIN_OUTPUT, 0, oif, st, &rj);
	/* Marked in mangle OUTPUT: the reply's route stays (to the host
	 * itself it is loopback in the kernel too). */
	if (verdict == XFW_ACT_REROUTE && (fc = bpf_map_lookup_elem(&xfw_cfg, &st->slot))) {
		st->start = fc->reroute[XFW_CHAIN_OUTPUT];
		verdict = xfw_judge(p, XFW_CHAIN_OUTPUT, 0, oif, st, &rj);
		st->start = 0;
	}
	/* A REJECT's type, for an answer to the reply (xfw_tc_judged). */
	p->reject = rj;
	/* The reply's connection state goes along to lo's INPUT when it is
	 * delivered through lo (xfw_rj_tc_via_lo). */
	if (verdict == XFW_ACT_ACCEPT && cs)
		xfw_ct_confirm_out(p, cs,
				   oif != XFW_LOOPBACK_IFINDEX ? oif :
				   xfw_rj_tc_via_lo(skb, p) ? XFW_LOOPBACK_IFINDEX : skb->ifindex);
	return verdict;
}

/* xfw_tc_nat_src is POSTROUTING's translation of an accepted packet p
 * (parsed) that passed FORWARD, as it leaves: once a translated
 * connection exists (nat.h), a reply of one gets its original source
 * back, an SNAT connection's packet its new source, an ICMP error about
 * one its quoted packet translated back. Returns TC_ACT_OK, or
 * TC_ACT_SHOT when a write failed. A global function. */
__attribute__((noinline)) int xfw_tc_nat_src(struct __sk_buff *skb, struct xfw_pkt *p)
{
	if (!skb || !p)
		return TC_ACT_OK;
	if (xfw_nat_translatable(p))
		return xfw_nat_fwd_tc(skb, p) ? TC_ACT_SHOT : TC_ACT_OK;
	if (p->proto == IPPROTO_ICMP && p->icmp <= 0xffff && xfw_icmp_is_err(p->icmp >> 8))
		return xfw_nat_icmp_tc(skb, p) ? TC_ACT_SHOT : TC_ACT_OK;
	/* An ICMPv6 error about a translated connection (nat6.h); echo
	 * requests and replies are translated as queries (nat_query.h). */
	if (p->proto == IPPROTO_ICMPV6 && p->icmp <= 0xffff && (p->icmp >> 8) < XFW_NAT6_ICMP_INFO)
		return xfw_nat6_icmp_tc(skb, p) ? TC_ACT_SHOT : TC_ACT_OK;
	return xfw_nat_query_fwd_tc(skb, p) ? TC_ACT_SHOT : TC_ACT_OK;
}

/* xfw_tc_forwarded is the TC hook's work for a forwarded packet, judged
 * at ingress: once a translated connection exists (nat.h), a reply of
 * one gets its original source back; not a packet FORWARD saw without
 * a connection (xfw_nat_kept). A global function. */
__attribute__((noinline)) int xfw_tc_forwarded(struct __sk_buff *skb, struct xfw_pkt *p)
{
	if (!skb || !p || xfw_nat_kept(skb) || !xfw_nat_enabled() || skb->vlan_present)
		return TC_ACT_OK;
	if (xfw_tc_parse(skb, p, 0) != XFW_PARSE_JUDGE || p->vlan)
		return TC_ACT_OK;
	return xfw_tc_nat_src(skb, p);
}

/* xfw_tc_rawout judges raw OUTPUT by itself, before the TC egress hook
 * translates (xfw_nat_out_pre_tc) or tracks the host's packet in sc, out
 * of oif, when the generation judges it there (xfw_family_cfg.raw_pre
 * [OUTPUT], compiler.Layout.RawPre: a raw table with a notrack rule, its
 * OUTPUT reading the packet alone). The kernel's raw OUTPUT runs before
 * conntrack and nat OUTPUT: a packet a notrack rule exempts is neither
 * tracked nor translated (the reply of a connection nat INPUT's SNAT or
 * nat OUTPUT's DNAT translated leaves as its socket sent it), one raw
 * drops was never tracked. Emits its LOG lines and sets st->raw_done
 * (XFW_RAWPRE_NOTRACKED: a notrack rule exempted it, mangle.h) for the
 * walk to resume past it (xfw_tc_rawout_resume). Not judged here: a later
 * fragment (it follows its datagram). Returns XFW_RAWPRE_ON, or
 * XFW_RAWPRE_DROP. A global function. */
__attribute__((noinline)) int xfw_tc_rawout(struct __sk_buff *skb, struct xfw_xdp_scratch *sc, __u32 oif)
{
	struct xfw_family_cfg *fc;
	struct xfw_pending *st;
	__u32 slot, res;

	if (!skb || !sc)
		return XFW_RAWPRE_ON;
	st = &sc->st;
	st->raw_done = 0;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc || !fc->raw_pre[XFW_CHAIN_OUTPUT] || sc->p.frag)
		return XFW_RAWPRE_ON;
	if (xfw_prewalk_used(slot)) {
		xfw_ext6_tc(skb, &sc->p, slot);
		xfw_preds_tc(skb, &sc->p, slot);
		xfw_hdr4_tc(skb, &sc->p, slot);
	}
	st->start = 0;
	st->end = fc->raw_pre[XFW_CHAIN_OUTPUT];
	res = xfw_classify(&sc->p, XFW_CHAIN_OUTPUT, 0, oif, st);
	st->end = 0;
	if (st->nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
	st->nlogs = 0;
	if (res != XFW_RES_END)
		return XFW_RAWPRE_DROP; /* a DROP or a hotdrop (compiler.preRouteTarget) */
	st->raw_done = sc->p.ct == (XFW_CTS_UNTRACKED | XFW_CTV_DIR_REPLY) ? XFW_RAWPRE_NOTRACKED : XFW_RAWPRE_DONE;
	return XFW_RAWPRE_ON;
}

/* xfw_tc_rawout_resume returns where the TC egress hook's OUTPUT walk
 * starts: past raw OUTPUT when xfw_tc_rawout judged it, else at its
 * beginning (0). */
static __always_inline __u32 xfw_tc_rawout_resume(struct xfw_family_cfg *fc, struct xfw_pending *st)
{
	return st->raw_done ? fc->raw_pre[XFW_CHAIN_OUTPUT] : 0;
}

/* xfw_tc_out_walk judges in OUTPUT a packet nat OUTPUT translated and
 * routed again (nat_out.h), from the walk's start or, for the first
 * packet (resume), after its nat OUTPUT segment: the OUTPUT chains with
 * the first route's device (the kernel's hook keeps it), POSTROUTING with
 * the new route's (oifs: first << 32 | new). The LOG lines before
 * POSTROUTING are emitted here. Returns the verdict; the REJECT type goes
 * to p->reject. A global function. */
__attribute__((noinline)) __u32 xfw_tc_out_walk(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
						__u32 resume, __u64 oifs)
{
	struct xfw_family_cfg *fc;
	__u32 slot, rj = 0, verdict, post;

	if (!skb || !sc)
		return XFW_ACT_DROP;
	slot = sc->st.slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc || (resume && !fc->nat_resume[XFW_CHAIN_OUTPUT]))
		return XFW_ACT_DROP;
	post = fc->post_start[XFW_CHAIN_OUTPUT];
	sc->st.start = resume ? fc->nat_resume[XFW_CHAIN_OUTPUT] : xfw_tc_rawout_resume(fc, &sc->st);
	sc->st.end = post;
	verdict = xfw_judge(&sc->p, XFW_CHAIN_OUTPUT, 0, oifs >> 32, &sc->st, &rj);
	/* nat's route stands: not routed again by a mangle OUTPUT mark. */
	if (verdict == XFW_ACT_REROUTE) {
		if (sc->st.nlogs)
			xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oifs >> 32);
		sc->st.start = fc->reroute[XFW_CHAIN_OUTPUT];
		verdict = xfw_judge(&sc->p, XFW_CHAIN_OUTPUT, 0, oifs >> 32, &sc->st, &rj);
	}
	sc->st.end = 0;
	/* The OUTPUT chains' LOG lines name the first route's device,
	 * whatever their verdict. */
	if (sc->st.nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oifs >> 32);
	sc->st.nlogs = 0;
	/* The OUTPUT chains accepted it: POSTROUTING with the new device. */
	if (verdict == XFW_ACT_ACCEPT && post) {
		sc->st.start = post;
		verdict = xfw_judge(&sc->p, XFW_CHAIN_OUTPUT, 0, (__u32)oifs, &sc->st, &rj);
	}
	sc->st.start = 0;
	/* Only the first packet meets nat OUTPUT; POSTROUTING holds no DNAT
	 * (the compiler refuses it). */
	if (verdict == XFW_ACT_DNAT)
		verdict = XFW_ACT_DROP;
	sc->p.reject = rj;
	return verdict;
}

/* xfw_tc_rerouted goes on with an OUTPUT walk of the host's packet (sc's,
 * leaving by oif) that ended where the kernel routes it again
 * (XFW_ACT_REROUTE: mangle OUTPUT changed its mark): it routes the packet
 * with its mark (ip_route_me_harder, xfw_mark_out_route) and resumes the
 * walk after mangle OUTPUT (fc->reroute): the OUTPUT chains see the first
 * route's device (the hook's out), POSTROUTING the new one. Returns the
 * verdict << 32 | the new device (0: the route stays); the REJECT type
 * goes to p->reject. LOG lines before the last part are emitted here. A
 * global function. */
__attribute__((noinline)) __u64 xfw_tc_rerouted(struct __sk_buff *skb, struct xfw_xdp_scratch *sc, __u32 oif)
{
	struct xfw_family_cfg *fc;
	__u32 slot, rj = 0, verdict, post, moved;

	if (!skb || !sc)
		return (__u64)XFW_ACT_DROP << 32;
	slot = sc->st.slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc || !fc->reroute[XFW_CHAIN_OUTPUT])
		return (__u64)XFW_ACT_DROP << 32;
	if (sc->st.nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
	moved = xfw_mark_out_route(skb, &sc->p, sc->st.route_mark);
	if (moved == XFW_MARK_OUT_NOROUTE) {
		sc->st.nlogs = 0;
		return (__u64)XFW_ACT_DROP << 32;
	}
	post = fc->post_start[XFW_CHAIN_OUTPUT];
	sc->st.start = fc->reroute[XFW_CHAIN_OUTPUT];
	sc->st.end = moved ? post : 0;
	verdict = xfw_judge(&sc->p, XFW_CHAIN_OUTPUT, 0, oif, &sc->st, &rj);
	sc->st.end = 0;
	/* The OUTPUT chains' LOG lines name the first route's device,
	 * whatever their verdict (the caller's name the new one). */
	if (moved) {
		if (sc->st.nlogs)
			xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
		sc->st.nlogs = 0;
	}
	/* POSTROUTING with the new route's device. */
	if (verdict == XFW_ACT_ACCEPT && moved && post) {
		sc->st.start = post;
		verdict = xfw_judge(&sc->p, XFW_CHAIN_OUTPUT, 0, moved, &sc->st, &rj);
	}
	sc->st.start = 0;
	sc->p.reject = rj;
	return (__u64)verdict << 32 | moved;
}

/* xfw_rj_out_judge judges in OUTPUT (and POSTROUTING), with the output
 * device oif, the REJECT reply to a packet that arrived (INPUT, FORWARD)
 * that xfw_tc_ingress is about to send (reject_send.h), as the kernel's
 * reply from icmp_send or nf_send_reset passes OUTPUT: counted, logged,
 * dropped by any verdict but ACCEPT (the kernel answers no ICMP error and
 * no reset). With connection tracking in use the reply carries the
 * offending packet's connection, as the kernel attaches it: the XDP hook
 * handed it over (reject_ct.h); without one the reply is tracked like any
 * packet (xfw_ct_reply). An ICMPv6 error about a forwarded packet gets
 * its source picked on the input device sel_iif (not 0) first, once the
 * connection is taken (its key is the reply as the XDP hook built it:
 * xfw_rj_saddr6, reject_saddr.h). Runs in TCX
 * ingress: bracketed for quiescence itself, with TC's scratch (TC egress
 * on this CPU never runs at the same time: both run with bottom halves
 * off). A global function. */
__attribute__((noinline)) int xfw_rj_out_judge(struct __sk_buff *skb, __u32 oif, __u32 sel_iif)
{
	struct xfw_xdp_scratch *sc;
	struct xfw_ct_scratch *cs = 0;
	struct xfw_inflight *f;
	__u32 one = 1, slot, v6, verdict = XFW_ACT_ACCEPT;

	if (!skb)
		return TC_ACT_SHOT;
	f = xfw_enter();
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &one);
	v6 = skb->protocol == bpf_htons(ETH_P_IPV6);
	slot = xfw_active_slot(v6);
	if (sc && slot != XFW_NO_SLOT) {
		/* With tracking, the connection the XDP hook handed over. */
		if (xfw_ct_active(slot)) {
			cs = xfw_ct_scratch_get(1);
			if (cs)
				xfw_rjct_take_tc(skb, XFW_RJ_ETH_HLEN, v6, cs);
			else
				verdict = XFW_ACT_DROP;
		}
		/* An ICMPv6 error's source, picked on the input device
		 * (a REJECT made the reply: its family's ruleset is on). */
		if (sel_iif && verdict == XFW_ACT_ACCEPT && xfw_rj_saddr6(skb, sel_iif))
			verdict = XFW_ACT_DROP;
		sc->st.hook = XFW_SCRATCH_TC;
		sc->st.nlogs = 0;
		if (verdict == XFW_ACT_ACCEPT)
			verdict = xfw_tc_reply_judge(skb, &sc->p, &sc->st, cs, oif);
		if (sc->st.nlogs)
			xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
	}
	xfw_leave(f);
	return verdict == XFW_ACT_ACCEPT ? TC_ACT_OK : TC_ACT_SHOT;
}

/* xfw_tc_stack_icmp reports whether skb comes from the stack's own ICMP
 * or ICMPv6 socket (icmp_send, icmp6_send: a raw socket of that protocol)
 * rather than from a process's raw socket writing whole packets. */
static __always_inline __u32 xfw_tc_stack_icmp(struct __sk_buff *skb)
{
	__u32 k = xfw_sk_kind(skb); /* frag.h */

	return k == XFW_SK_KIND(XFW_SOCK_RAW, IPPROTO_ICMP) ||
	       k == XFW_SK_KIND(XFW_SOCK_RAW, IPPROTO_ICMPV6);
}

/* The replies the stack's ICMP socket sends itself (icmp_reply: echo,
 * timestamp and extended echo replies; icmpv6_echo_reply: echo and
 * extended echo replies), by type. */
#define XFW_ICMP_TSTAMPREPLY 14
#define XFW_ICMP_EXT_ECHOREPLY 43
#define XFW_ICMP6_REPLY 129
#define XFW_ICMP6_EXT_ECHOREPLY 161

/* xfw_tc_stack_reply reports whether skb is such a reply (p parsed from
 * it), sent holding this CPU's ICMP transmit lock (icmp_xmit_lock,
 * icmpv6_xmit_lock): the stack's ICMP socket (a kernel socket, no file:
 * not a process's raw socket), not its neighbour discovery or MLD
 * socket (another kernel raw ICMPv6 socket, without the lock). */
static __always_inline __u32 xfw_tc_stack_reply(struct __sk_buff *skb, const struct xfw_pkt *p)
{
	__u32 t = p->icmp >> 8;

	if (p->icmp > 0xffff)
		return 0;
	if (p->fam == 0 ? p->proto != IPPROTO_ICMP ||
				  (t != XFW_ICMP_ECHOREPLY && t != XFW_ICMP_TSTAMPREPLY && t != XFW_ICMP_EXT_ECHOREPLY)
			: p->proto != IPPROTO_ICMPV6 || (t != XFW_ICMP6_REPLY && t != XFW_ICMP6_EXT_ECHOREPLY))
		return 0;
	return xfw_tc_stack_icmp(skb) && xfw_sk_kernel(skb);
}

/* Frames bridged from port to port (uses xfw_judge and xfw_tc_parse). */
#include "bridge_tc.h"
/* The host's copy of its broadcast or multicast packet (uses xfw_judge). */
#include "loopcopy.h"

/* xfw_tc_judged is the TC hook's work; xfw_tc_egress brackets it for
 * quiescence (generation.h). */
static __always_inline int xfw_tc_judged(struct __sk_buff *skb)
{
	struct xfw_xdp_scratch *sc;
	struct xfw_pkt *p;
	struct xfw_pending *st;
	struct xfw_ct_scratch *cs = 0;
	struct xfw_family_cfg *fc;
	__u32 one = 1;
	__u32 oif, rj = 0, verdict, moved = 0, depth;
	__u64 route, port;
	int rc;

	xfw_touch_state();
	/* The packet facts live in this CPU's scratch (entry 1, TC's): on
	 * the stack they would push the deepest call chain past 512 bytes. */
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &one);
	if (!sc)
		return TC_ACT_OK;
	p = &sc->p;
	st = &sc->st;
	/* A bridge port: frames bridged to it (bridge.h). */
	port = xfw_br_port(skb->ifindex);
	/* A REJECT reply to a bridged frame, judged already (bridge_reject.h). */
	if (xfw_br_rj_sent(skb, port))
		return TC_ACT_OK;
	if (port) {
		rc = xfw_tc_bridged(skb, sc, port);
		return rc == XFW_BR_RJ_JUDGE ? xfw_br_rj_out(skb, sc) : rc;
	}
	/* Forwarded packets were judged at ingress (FORWARD); a reply of a
	 * translated connection gets its source back here (POSTROUTING). */
	/* Translated in nat OUTPUT and judged on the device its first route
	 * picked, or a reply translated back on its way to the socket. */
	if (skb->tc_index == XFW_NAT_LL_MARK)
		return xfw_rj_ll_address(skb);
	if (xfw_nat_out_judged(skb))
		return TC_ACT_OK;
	/* FORWARD dropped it; passed on only for the kernel's redirect. */
	if (xfw_rd_tc_egress_drop(skb))
		return TC_ACT_SHOT;
	if (skb->ingress_ifindex != 0)
		return xfw_tc_forwarded(skb, p);
	/* A VLAN device's traffic was judged on the VLAN device itself. */
	if (skb->vlan_present)
		return TC_ACT_OK;
	if (xfw_tc_parse(skb, p, 0) != XFW_PARSE_JUDGE)
		return TC_ACT_OK;
	if (p->vlan)
		return TC_ACT_OK;
	p->mark = skb->mark;
	st->route_mark = p->mark; /* the mark its route was made with */
	st->slot = xfw_active_slot(p->fam ? 1 : 0);
	st->hook = XFW_SCRATCH_TC;
	if (st->slot == XFW_NO_SLOT)
		return TC_ACT_OK;
	/* The stack fragments after the OUTPUT hook (ip_finish_output,
	 * ip6_finish_output): OUTPUT saw the whole datagram, the first
	 * fragment stands for it and later ones follow its verdict; a raw
	 * socket's own fragments are judged one by one (frag.h). */
	if (p->frag) {
		rc = xfw_frag_later_tc(skb, p, xfw_ct_active(st->slot));
		if (rc != XFW_FRAG_JUDGE)
			return rc;
	}
	oif = skb->ifindex;
	xfw_owner_tc(skb, p, st->slot);
	p->nosock = !skb->sk; /* -m recent's TTL (recent.h) */
	/* A REJECT reply another device's OUTPUT routed here still holds
	 * the offending packet's socket: judged with the kernel's reply's
	 * (reject.h xfw_rj_tc_routed). */
	if (xfw_rj_tc_routed(skb))
		xfw_owner_reply(p);
	/* raw OUTPUT before tracking and translation, when it notracks. */
	if (xfw_tc_rawout(skb, sc, oif) == XFW_RAWPRE_DROP)
		return TC_ACT_SHOT;
	/* A later packet of a connection nat OUTPUT translated: translated
	 * and routed again before tracking (nat_out.h); not one raw OUTPUT
	 * exempted from tracking. */
	route = xfw_notracked(st) ? 0 : xfw_nat_out_pre_tc(skb, p);
	if (route == XFW_NAT_OUT_DROP)
		return TC_ACT_SHOT;
	if (route == XFW_NAT_OUT_NOROUTE) {
		/* Seen by the kernel's conntrack, dropped by its nat hook
		 * before filter OUTPUT (ct_unrouted.h). */
		if (xfw_ct_active(st->slot))
			xfw_ct_unrouted_tc(skb, p);
		return TC_ACT_SHOT;
	}
	if (route)
		oif = route;
	/* A walk that accepts every packet (trivial.h), of a packet nat
	 * OUTPUT did not route again: counted, accepted as the ACCEPT
	 * verdict below would (the datagram's verdict noted for its later
	 * fragments). */
	if (!route && xfw_trivial_walk(st->slot, XFW_CHAIN_OUTPUT, p->l3len)) {
		xfw_nat_cancel();
		if (p->fragmented)
			xfw_frag_note_tc(skb, p, 0, XFW_ACT_ACCEPT);
		return xfw_nat_out_send(skb);
	}
	if (xfw_ct_active(st->slot) && !xfw_notracked(st)) {
		cs = xfw_ct_scratch_get(1);
		if (cs) {
			xfw_ct_load_tc(skb, p, cs);
			cs->stack_icmp = xfw_tc_stack_icmp(skb);
			/* A REJECT reply routed here from another device's
			 * OUTPUT carries its offending packet's connection
			 * (reject_ct.h). */
			if (xfw_rjct_maybe(p) && xfw_rjct_take_tc(skb, p->l3_off, p->fam, cs))
				xfw_ct_reply(skb, p, cs);
			else
				p->ct = xfw_ct_track(p, cs, XFW_CTM_TRACK);
		}
	}
	/* Translated by its connection's mapping but INVALID (no
	 * connection in the kernel, whose nat OUTPUT hook leaves it as it
	 * came): its destination and first route back (nat_out.h). */
	if (route && cs && (p->ct & 7) == XFW_CTS_INVALID && xfw_nat_translatable(p)) {
		xfw_nat_out_undo(skb, p);
		route = 0;
		oif = skb->ifindex;
	}

	if (cs && xfw_ct_fast(p, st->slot, XFW_CHAIN_OUTPUT)) {
		st->nlogs = 0;
		verdict = XFW_ACT_ACCEPT;
	} else {
		xfw_tcpmss_set_skb(skb, p, &sc->opt, st->slot);
		if (xfw_mss_mtu_wanted(st->slot, p))
			xfw_mangle_mtu_tc(skb, p);
		if (xfw_prewalk_used(st->slot)) {
			xfw_ext6_tc(skb, p, st->slot);
			xfw_preds_tc(skb, p, st->slot);
			xfw_hdr4_tc(skb, p, st->slot);
		}
		if (route) {
			verdict = xfw_tc_out_walk(skb, sc, 0, (__u64)skb->ifindex << 32 | oif);
			rj = p->reject;
		} else {
			fc = bpf_map_lookup_elem(&xfw_cfg, &st->slot);
			st->start = fc ? xfw_tc_rawout_resume(fc, st) : 0;
			verdict = xfw_judge(p, XFW_CHAIN_OUTPUT, 0, oif, st, &rj);
			st->start = 0;
		}
		/* mangle OUTPUT changed the mark: routed again (mark_kernel.h);
		 * a DNAT of nat OUTPUT routes the packet itself. */
		if (verdict == XFW_ACT_REROUTE) {
			route = xfw_tc_rerouted(skb, sc, oif);
			verdict = route >> 32;
			moved = verdict == XFW_ACT_DNAT ? 0 : (__u32)route;
			if (moved)
				oif = moved;
			route = 0;
			rj = p->reject;
		}
	}
	/* nat OUTPUT's DNAT or REDIRECT (nat_out.h). */
	if (verdict == XFW_ACT_DNAT) {
		if (st->nlogs)
			xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
		st->nlogs = 0;
		route = cs ? xfw_nat_out_dnat_tc(skb, p, cs, st->nat_addr, st->nat_port) : 0;
		verdict = route ? xfw_tc_out_walk(skb, sc, 1, (__u64)oif << 32 | route) : XFW_ACT_DROP;
		if (route)
			oif = route;
		rj = p->reject;
	}
	/* nat POSTROUTING's SNAT or MASQUERADE (nat_snat.h); an IPv6
	 * MASQUERADE's source by the route (nat6.h). */
	if (verdict == XFW_ACT_SNAT && p->fam == 1 && !st->nat_addr)
		xfw_nat6_masq_tc(skb, p, oif);
	if (verdict == XFW_ACT_SNAT)
		verdict = cs && !xfw_nat_snat(p, cs, st->nat_addr, st->nat_port, oif) ? XFW_ACT_ACCEPT
										 : XFW_ACT_DROP;
	/* A new connection's reply tuple taken by a translation (nat_null.h). */
	if (verdict == XFW_ACT_ACCEPT && cs && xfw_nat_null_clash(p, cs))
		verdict = XFW_ACT_DROP;
	/* The LOG lines before a translation the verdict did not accept is
	 * undone: the kernel's OUTPUT chains after nat OUTPUT log the packet
	 * as nat OUTPUT translated it (an SNAT is applied later, on accept). */
	if (st->nlogs)
		xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, oif);
	st->nlogs = 0;
	if (verdict == XFW_ACT_ACCEPT && cs) {
		xfw_ct_confirm_out(p, cs, oif);
		xfw_nat_confirm();
	} else {
		xfw_nat_cancel();
		xfw_nat_out_undo(skb, p);
	}
	xfw_frag_note_tc(skb, p, cs != 0, verdict);
	switch (verdict) {
	case XFW_ACT_ACCEPT:
		/* TCPMSS, DSCP, TOS, TTL, HL rewrites (mangle_apply.h). */
		if (p->mangle && xfw_mangle_tc(skb, p) < 0)
			return TC_ACT_SHOT;
		/* MARK rules' mark goes on with the packet (mark.h). */
		if (p->mark != skb->mark)
			skb->mark = p->mark;
		/* The host's reply in a translated connection (nat.h). */
		if (cs && (xfw_nat_post_tc(skb, p, cs) || xfw_nat_query_post_tc(skb, p, cs)))
			return TC_ACT_SHOT;
		/* Routed again by its new mark: out by the new route. */
		if (moved)
			return xfw_mark_out_send(skb, moved);
		/* Translated in nat OUTPUT: out by the new route. */
		return xfw_nat_out_send(skb);
	case XFW_ACT_REJECT:
		/* The stack's own ICMP socket sends it (an echo or timestamp
		 * reply: icmp_reply, icmpv6_echo_reply) holding this CPU's
		 * ICMP transmit lock, which icmp_send (icmp6_send) then finds
		 * taken: no error about it. A process's raw socket is
		 * answered. */
		if (xfw_tc_stack_reply(skb, p))
			return TC_ACT_SHOT;
		/* A reply for the host itself that OUTPUT REJECTs in turn
		 * is answered as any packet (ipt_REJECT: an ICMP error
		 * about a RST, routed to its source; none about an ICMP
		 * error, no RST for a RST: xfw_rj_plan), once: the answer
		 * is an ICMP error (found by xfw difftest, IPv4 seed 16: an
		 * OUTPUT REJECT's net-unreachable error about the reset to
		 * fw itself that another OUTPUT REJECT sent, counted in the
		 * kernel's OUTPUT). The first reply quotes the packet
		 * TCPMSS changed (mangle_apply.h). */
		if (xfw_mangle_mss_now_tc(skb, p) < 0)
			return TC_ACT_SHOT;
		for (depth = 0; depth < XFW_RJ_TC_DEPTH; depth++) {
			if (cs)
				xfw_ct_save(cs, p);
			rc = xfw_tc_reject(skb, p, rj);
			/* A reset closes the connection it answered
			 * (ct_hook.h), before its judge tracks the reply
			 * with this scratch. */
			if (cs && rc != TC_ACT_SHOT)
				xfw_ct_rst_close(cs, XFW_RJ_SLOT_TC, cs->orig.ct);
			/* Routed out of another device, whose TC egress
			 * judges it: the connection goes along
			 * (reject_ct.h), and the mark tells that hook the
			 * reply's socket (xfw_rj_tc_routed). */
			if (rc != XFW_RJ_TC_LOCAL && rc != TC_ACT_SHOT) {
				if (cs)
					xfw_rjct_put_tc(skb, p, cs);
				skb->tc_index = XFW_RJ_ROUTED_MARK;
			}
			if (rc != XFW_RJ_TC_LOCAL)
				return rc;
			verdict = xfw_tc_reply_judge(skb, p, st, cs, XFW_LOOPBACK_IFINDEX);
			if (st->nlogs)
				xfw_emit_logs_tc(skb, sc, XFW_CHAIN_OUTPUT, 0, XFW_LOOPBACK_IFINDEX);
			if (verdict != XFW_ACT_REJECT)
				break;
			rj = p->reject;
		}
		if (verdict != XFW_ACT_ACCEPT)
			return TC_ACT_SHOT;
		if (xfw_rj_tc_via_lo(skb, p)) {
			/* lo's TC egress lets it pass (judged); the route the
			 * redirect gives it delivers it locally. */
			skb->tc_index = XFW_NAT_OUT_MARK;
			return bpf_redirect_neigh(XFW_LOOPBACK_IFINDEX, 0, 0, 0);
		}
		return xfw_rj_tc_deliver(skb);
	}
	return TC_ACT_SHOT;
}

SEC("tc")
int xfw_tc_egress(struct __sk_buff *skb)
{
	struct xfw_inflight *f;
	int rc;

	if (xfw_skb_away(skb))
		return TC_ACT_OK;
	f = xfw_enter();
	rc = xfw_tc_judged(skb);

	xfw_leave(f);
	return rc;
}

char _license[] SEC("license") = "GPL";
