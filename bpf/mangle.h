/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mangle.h — the packet-rewriting targets (TCPMSS, DSCP, TOS, TTL, HL) and
 * the notrack targets (CT --notrack, NOTRACK) as action entries of the
 * walk (XFW_EF_ACT, probe kind XFW_PROBE_MANGLE).
 *
 * The kernel rewrites the packet where the rule stands and goes on with
 * the next rule (XT_CONTINUE), which sees the new values. Here the walk
 * changes its copy of the packet (struct xfw_pkt: .tos, .ttl, .tcpmss,
 * .ct) in rule order and looks the field's class up again, so later
 * rules' -m dscp, -m tos, -m ttl, -m hl, -m tcpmss and -m conntrack see
 * the rewritten value; .mangle records what the hook writes into the
 * packet itself after an ACCEPT (mangle_apply.h). A notrack rule makes
 * the packet UNTRACKED: the connection tracking found or opened is let
 * go unconfirmed (no entry is created).
 *
 * TTL in FORWARD's PREROUTING: the walk holds the TTL after ip_forward's
 * decrement (the hook decrements before the walk), the rule sees it
 * before: XFW_MGOP_PREDEC computes on the value one higher.
 *
 * Conventions: evaluators inlined into the global xfw_probe (probe.h);
 * the walk's state is the hook's scratch (struct xfw_xdp_scratch .cls).
 *
 * Includes: common.h, xfw_structs.h, parse.h, classify_structs.h,
 * classify_maps.h, generation.h, xfw_maps.h, ct_maps.h.
 */
#ifndef XFW_MANGLE_H
#define XFW_MANGLE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "generation.h"
#include "xfw_maps.h"
#include "ct_maps.h"

#define XFW_MG_U8_MAX 255 /* TTL and hop limit */
/* xt_TCPMSS's minlen: the IP and TCP headers the MSS leaves out of the
 * MTU (IPv4 40, IPv6 60). */
#define XFW_MG_MINLEN(fam) ((fam) ? 60 : 40)
/* An added MSS option's value is at most the default MSS a peer assumes
 * without one (RFC 1122: 536; IPv6: 1280 - 60). */
#define XFW_MG_DEFAULT_MSS(fam) ((fam) ? 1220 : 536)
#define XFW_MG_BARE_TCP 20 /* a TCP header without options */
#define XFW_MG_OPTLEN 4    /* TCPOLEN_MSS */

/* xfw_mangle_reclass looks field f's class up again for value (the walk
 * changed it), when the generation classifies f, and forgets what the
 * walk cached from the old class: the chunk summaries (the walk's and
 * those its calls saved), chunk ids, word and chunk masks. A global
 * function: one copy of its loop for every rewrite. */
__attribute__((noinline)) int xfw_mangle_reclass(struct xfw_cls *st, __u32 slot, __u32 f, __u32 value)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	void *small = xfw_inner(&xfw_o_small, slot);
	__u64 i = f; /* 64 bits: the bound checked on the register the accesses use */
	__u32 key, *c;

	xfw_barrier_var(i);
	if (!st || !fc || !small || i >= XFW_NFIELDS || !(fc->active & (1u << i)))
		return 0;
	key = fc->small_base[i] + value;
	c = bpf_map_lookup_elem(small, &key);
	st->cls[i] = c ? *c : 0;
	/* Everything read with the old class: the summary, the chunk ids,
	 * the word and the chunk masks (classify.h). */
	st->chunk = ~0u;
	st->ids_chunk = ~0u;
	st->word_chunk = ~0u;
	st->mask_w = ~0u;
	for (__u32 d = 0; d < XFW_MAX_CALLS; d++) {
		if (d >= st->depth)
			break;
		st->ret_chunk[d] = ~0u;
	}
	return 0;
}

/* xfw_mangle_ttl returns the TTL rule op's result (xt_HL's ttl_tg, hl_tg6)
 * for the walk's value v. */
static __always_inline __u32 xfw_mangle_ttl(__u32 arg, __u32 val, __u32 v)
{
	int predec = !!(arg & XFW_MGOP_PREDEC);

	v += predec;
	switch (arg & XFW_MGOP_MASK) {
	case XFW_MGOP_TTL_SET:
		v = val;
		break;
	case XFW_MGOP_TTL_INC:
		v = v + val > XFW_MG_U8_MAX ? XFW_MG_U8_MAX : v + val;
		break;
	case XFW_MGOP_TTL_DEC:
		v = v > val ? v - val : 0;
		break;
	}
	/* A TTL of 0 or 1 is dropped by ip_forward after PREROUTING: the
	 * walk's value stays at 0. */
	return predec ? (v ? v - 1 : 0) : v;
}

/* xfw_mangle_mss_seen is what later rules see of a TCPMSS rule asking
 * for mss (0: unknown, a clamp without the path MTU): a lower MSS option;
 * and for a SYN without one whose header has room and no data after it
 * (p->mss_room, a bare 20-byte header certainly), which gets an MSS
 * option (mangle_apply.h), a packet 4 bytes longer (-m length, the
 * counters) with an option of at most the default MSS, the first. */
static __always_inline void xfw_mangle_mss_seen(struct xfw_pkt *p, struct xfw_cls *st, __u32 slot,
						__u32 mss)
{
	__u32 v = p->tcpmss;

	if (!p->frag && p->thoff && (p->mss_room || p->l4_end - p->thoff == XFW_MG_BARE_TCP)) {
		if (!(p->mangle & XFW_MG_GROWN)) {
			p->mangle |= XFW_MG_GROWN;
			p->l3len += XFW_MG_OPTLEN;
			p->lenm += XFW_MG_OPTLEN;
			st->l3len = p->l3len;
			xfw_mangle_reclass(st, slot, XFW_F_LEN, p->lenm);
		}
		if (v == XFW_V_NONE && mss)
			v = mss < XFW_MG_DEFAULT_MSS(p->fam) ? mss : XFW_MG_DEFAULT_MSS(p->fam);
	}
	if (v <= 0xffff && mss && mss < v)
		v = mss;
	if (v != p->tcpmss) {
		p->tcpmss = v;
		xfw_mangle_reclass(st, slot, XFW_F_TCPMSS, v);
	}
}

/* xfw_mangle_act is mangle probe pr's effect on packet p of the walk st
 * (hook's): true, but XFW_PROBE_HOTDROP for a TCPMSS rule meeting a TCP
 * header cut short (shorter than 20 bytes or than its data offset; not a
 * later fragment), which xt_TCPMSS drops at the rule (tcpmss_mangle_packet
 * returns -1: NF_DROP, the rule counted, no later rule or policy; found
 * by xfw difftest, the SYN whose first fragment cuts its options).
 * .tcpmss says it: every TCP packet's is read while a TCPMSS rule exists
 * (tcpopt.h), XFW_V_TRUNC for such a header, and a TCPMSS rule changes it
 * only to a value. */
static __always_inline int xfw_mangle_act(struct xfw_probe *pr, struct xfw_pkt *p,
					  struct xfw_cls *st, __u32 hook)
{
	struct xfw_ct_scratch *cs;
	__u32 slot = st->slot, key = hook;

	switch (pr->arg & XFW_MGOP_MASK) {
	case XFW_MGOP_TOS:
		p->tos = (p->tos & ~pr->mask) ^ pr->val;
		p->mangle |= XFW_MG_TOS;
		xfw_mangle_reclass(st, slot, XFW_F_TOS, p->tos);
		break;
	case XFW_MGOP_TTL_SET:
	case XFW_MGOP_TTL_INC:
	case XFW_MGOP_TTL_DEC:
		p->ttl = xfw_mangle_ttl(pr->arg, pr->val, p->ttl);
		p->mangle |= XFW_MG_TTL;
		xfw_mangle_reclass(st, slot, XFW_F_TTL, p->ttl);
		break;
	case XFW_MGOP_MSS:
		if (!p->frag && p->tcpmss == XFW_V_TRUNC)
			return XFW_PROBE_HOTDROP;
		if (!(p->mangle & XFW_MG_MSS) || pr->val < p->mss_new)
			p->mss_new = pr->val;
		p->mangle |= XFW_MG_MSS;
		xfw_mangle_mss_seen(p, st, slot, p->mss_new);
		break;
	case XFW_MGOP_CLAMP:
		if (!p->frag && p->tcpmss == XFW_V_TRUNC)
			return XFW_PROBE_HOTDROP;
		p->mangle |= XFW_MG_CLAMP;
		/* -m tcpmss after it sees the clamped value: the hook gave
		 * the path MTU to a packet whose MSS a rule reads. */
		xfw_mangle_mss_seen(p, st, slot, p->clamp_mtu > XFW_MG_MINLEN(p->fam) ?
						 p->clamp_mtu - XFW_MG_MINLEN(p->fam) : 0);
		break;
	case XFW_MGOP_NOTRACK:
		/* UNTRACKED with the direction bit, which the tracker never
		 * sets without a connection: raw's later rules tell it from
		 * the INVALID they see otherwise (compiler.CtNotrackValue). */
		p->ct = XFW_CTS_UNTRACKED | XFW_CTV_DIR_REPLY;
		xfw_mangle_reclass(st, slot, XFW_F_CT, p->ct);
		/* No connection is created for it (nf_conntrack_in skips a
		 * packet with a template that says untracked). */
		cs = bpf_map_lookup_elem(&xfw_ct_scratch, &key);
		if (cs)
			cs->pending = XFW_CTP_NONE;
		break;
	}
	return 1;
}

#endif /* XFW_MANGLE_H */
