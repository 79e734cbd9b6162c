/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ctnat.h — the conntrack match's --ctstate with SNAT or DNAT as a probe
 * of the walk (probe.h), since the connection's translation is no
 * classification field (FieldCt packs the state, direction, four status
 * bits and protocol).
 *
 * conntrack_mt: the packet's state bit (INVALID, NEW, ESTABLISHED,
 * RELATED, UNTRACKED), with SNAT when the connection's source is
 * translated (IPS_SRC_NAT) and DNAT when its destination is
 * (IPS_DST_NAT); the match passes when a bit of the option's is among
 * them, "!" inverting. The translation is the connection's (struct
 * xfw_ct_val .nat_flags): in the tracking scratch's pending value for a
 * connection this packet opens (a DNAT of the walk's nat PREROUTING or
 * OUTPUT has set it), else in the entry under the scratch's key (the
 * connection's, or a RELATED packet's master). The match's other options
 * stay the rule's terms (internal/compiler ctnat.go).
 *
 * .val: the states, bit XFW_CTS_* for each state and XFW_CTNAT_SNAT,
 * XFW_CTNAT_DNAT; .arg 1 inverts.
 *
 * --ctreplsrc and --ctrepldst in a ruleset with NAT are a probe too
 * (XFW_PROBE_CTREPL, xfw_ctrepl_match): the reply tuple's addresses are
 * the translated ones, which the classification fields (the original
 * tuple's) do not give.
 *
 * Includes: common.h, xfw_structs.h, parse.h, ct_structs.h, ct_maps.h, ct_conn.h.
 */
#ifndef XFW_CTNAT_H
#define XFW_CTNAT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"

/* The state bits of XFW_PROBE_CTNAT's .val above the five states
 * (compiler.CtNatSNAT, CtNatDNAT). */
#define XFW_CTNAT_SNAT (1u << 5)
#define XFW_CTNAT_DNAT (1u << 6)

/* xfw_ctnat_conn returns the connection of packet p of hook (its
 * tracking scratch in *csp): the pending value of one the packet opens,
 * else the entry under the scratch's key; 0 without one. */
static __always_inline struct xfw_ct_val *xfw_ctnat_conn(const struct xfw_pkt *p, __u32 hook,
							 struct xfw_ct_scratch **csp)
{
	struct xfw_ct_scratch *cs;
	struct xfw_ct_entry *e;
	__u32 key = hook, state = p->ct & 7;

	if (state == XFW_CTS_INVALID || state == XFW_CTS_UNTRACKED)
		return 0;
	cs = bpf_map_lookup_elem(&xfw_ct_scratch, &key);
	if (!cs)
		return 0;
	*csp = cs;
	if (cs->pending == XFW_CTP_CREATE)
		return &cs->nv;
	e = xfw_ct_lookup(&cs->key);
	if (!e)
		return 0;
	/* Keep the NULL check before the offset (connmark.h). */
	asm volatile("" : "+r"(e));
	return &e->v;
}

/* xfw_ctnat_flags returns the XFW_NAT_F_* of the connection of packet p
 * of hook (0 without one). */
static __always_inline __u32 xfw_ctnat_flags(const struct xfw_pkt *p, __u32 hook)
{
	struct xfw_ct_scratch *cs = 0;
	struct xfw_ct_val *v = xfw_ctnat_conn(p, hook, &cs);

	if (!v)
		return 0;
	/* A DNAT clash's source port is the kernel's after POSTROUTING: its
	 * first packet's chains do not see SNAT (nat_clash.h). */
	if (cs && cs->pending == XFW_CTP_CREATE)
		return v->nat_flags & ~XFW_NAT_F_CLASH;
	return v->nat_flags;
}

/* xfw_ctnat_match answers --ctstate probe pr for packet p of hook. */
static __always_inline int xfw_ctnat_match(struct xfw_probe *pr, struct xfw_pkt *p, __u32 hook)
{
	__u32 nat = xfw_ctnat_flags(p, hook);
	__u32 bits = 1u << (p->ct & 7);

	if (nat & (XFW_NAT_F_SRC | XFW_NAT_F_CLASH))
		bits |= XFW_CTNAT_SNAT;
	if (nat & XFW_NAT_F_DST)
		bits |= XFW_CTNAT_DNAT;
	return ((bits & pr->val) != 0) != (pr->arg & 1);
}

/* XFW_PROBE_CTREPL's .arg: which of --ctreplsrc and --ctrepldst the match
 * has, and their "!" (compiler.CtRepl*). */
#define XFW_CTREPL_SRC 0x1
#define XFW_CTREPL_SRC_INV 0x2
#define XFW_CTREPL_DST 0x4
#define XFW_CTREPL_DST_INV 0x8

/* xfw_ctrepl_addr reports whether addr passes an address option: (addr &
 * mask) == want (want masked already), "!" inverting. */
static __always_inline int xfw_ctrepl_addr(__u32 addr, __u32 want, __u32 mask, __u32 inv)
{
	return ((addr & mask) == want) != !!inv;
}

/* xfw_ctrepl6_addr reports whether IPv6 address hi:lo passes an address
 * option whose masked address and mask are probes ka and km of probe map
 * m (XFW_PROBE_NATADDR6: .val:.mask the high 64 bits, .count the low),
 * "!" inverting. */
static __always_inline int xfw_ctrepl6_addr(void *m, __u32 ka, __u32 km, __u64 hi, __u64 lo, __u32 inv)
{
	struct xfw_probe *a = bpf_map_lookup_elem(m, &ka), *mk = bpf_map_lookup_elem(m, &km);

	if (!a || !mk)
		return 0;
	return ((hi & ((__u64)mk->val << 32 | mk->mask)) == ((__u64)a->val << 32 | a->mask) &&
		(lo & mk->count) == a->count) != !!inv;
}

/* xfw_ctrepl6_match is xfw_ctrepl_match's IPv6 comparison of the reply
 * tuple's source shi:slo and destination dhi:dlo, the options' addresses
 * in probes of m (compiler ctReplProbe6). */
static __always_inline int xfw_ctrepl6_match(struct xfw_probe *pr, void *m, __u64 shi, __u64 slo, __u64 dhi,
					     __u64 dlo)
{
	if ((pr->arg & XFW_CTREPL_SRC) && !xfw_ctrepl6_addr(m, pr->val, pr->mask, shi, slo, pr->arg & XFW_CTREPL_SRC_INV))
		return 0;
	return !(pr->arg & XFW_CTREPL_DST) ||
	       xfw_ctrepl6_addr(m, pr->count >> 32, (__u32)pr->count, dhi, dlo, pr->arg & XFW_CTREPL_DST_INV);
}

/* xfw_ctrepl_match answers --ctreplsrc and --ctrepldst (a ruleset with
 * NAT) for packet p of hook: the reply tuple's source is the key's
 * responder end (the translated destination after a DNAT), its
 * destination the originator's address, or the translated source after
 * an SNAT. A packet without a connection passes (conntrack_mt answers it
 * by its state alone, which the rule's terms decide). IPv6's addresses
 * are probes of the slot's probe map m. */
static __always_inline int xfw_ctrepl_match(struct xfw_probe *pr, struct xfw_pkt *p, __u32 hook, void *m)
{
	struct xfw_ct_scratch *cs = 0;
	struct xfw_ct_val *v;
	__u32 state = p->ct & 7, status, src, dst;

	if (state == XFW_CTS_INVALID || state == XFW_CTS_UNTRACKED)
		return 1;
	v = xfw_ctnat_conn(p, hook, &cs);
	if (!v || !cs)
		return 0;
	status = v->status;
	if (p->fam == 1) {
		struct xfw_ct_key *k = &cs->key;
		int orig_b = !!(status & XFW_CTST_ORIG_B), snat = !!(v->nat_flags & XFW_NAT_F_SRC);

		return xfw_ctrepl6_match(pr, m, orig_b ? k->a_hi : k->b_hi, orig_b ? k->a_lo : k->b_lo,
					 snat ? v->snat_addr_hi : orig_b ? k->b_hi : k->a_hi,
					 snat ? v->snat_addr : orig_b ? k->b_lo : k->a_lo);
	}
	src = (status & XFW_CTST_ORIG_B) ? cs->key.a_lo : cs->key.b_lo;
	dst = (status & XFW_CTST_ORIG_B) ? cs->key.b_lo : cs->key.a_lo;
	if (v->nat_flags & XFW_NAT_F_SRC)
		dst = v->snat_addr;
	if ((pr->arg & XFW_CTREPL_SRC) && !xfw_ctrepl_addr(src, pr->val, pr->mask, pr->arg & XFW_CTREPL_SRC_INV))
		return 0;
	if ((pr->arg & XFW_CTREPL_DST) &&
	    !xfw_ctrepl_addr(dst, pr->count >> 32, (__u32)pr->count, pr->arg & XFW_CTREPL_DST_INV))
		return 0;
	return 1;
}

#endif /* XFW_CTNAT_H */
