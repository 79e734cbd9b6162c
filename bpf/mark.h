/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mark.h — the statistic match (xt_statistic), the mark match and the MARK
 * target (xt_mark revision 2) as probes of the walk (probe.h).
 *
 * The packet's mark lives in the hook's scratch copy of the packet
 * (struct xfw_pkt .mark): the hooks set it before the walk (skb->mark on
 * TC egress, 0 at XDP, where no skb exists yet) and TC egress writes it
 * back to the skb after an ACCEPT. MARK entries (XFW_EF_ACT, classify.h)
 * change it in rule order and mark probes read it then, so a MARK in an
 * earlier chain of the walk is seen by later rules, as in the kernel.
 *
 * statistic: random mode compares 31 random bits with the threshold
 * lround(P * 2^31) (.val); nth mode advances the probe's counter (.count,
 * shared by the CPUs) by one per packet and matches when it comes to 0
 * modulo every + 1 (.val = every - 1 ... as the kernel keeps it: the
 * period minus one). The kernel's compare-and-swap loop moves the counter
 * through the same sequence; one atomic add gives each packet its own
 * step without a retry bound. The control plane writes .count = every -
 * packet with each generation, as statistic_mt_check does with each table.
 *
 * Includes: common.h, xfw_structs.h, parse.h.
 */
#ifndef XFW_MARK_H
#define XFW_MARK_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"

/* The random bits xt_statistic compares (get_random_u32() & 0x7FFFFFFF). */
#define XFW_STAT_RANDOM_BITS 0x7fffffffu

/* xfw_statistic answers statistic probe pr (1 match, 0 not). Inlined into
 * the global xfw_probe. */
static __always_inline int xfw_statistic(struct xfw_probe *pr)
{
	int hit;

	if (pr->arg & XFW_STAT_NTH) {
		__u64 next = __sync_fetch_and_add(&pr->count, 1) + 1;

		hit = next % ((__u64)pr->val + 1) == 0;
	} else {
		hit = (bpf_get_prandom_u32() & XFW_STAT_RANDOM_BITS) < pr->val;
	}
	return hit ^ !!(pr->arg & XFW_STAT_INVERT);
}

/* xfw_mark_match answers mark probe pr for the packet's mark now. */
static __always_inline int xfw_mark_match(struct xfw_probe *pr, struct xfw_pkt *p)
{
	return ((p->mark & pr->mask) == pr->val) ^ !!pr->arg;
}

/* xfw_mark_set is the MARK target: mark = (mark & ~mask) ^ value. */
static __always_inline int xfw_mark_set(struct xfw_probe *pr, struct xfw_pkt *p)
{
	p->mark = (p->mark & ~pr->mask) ^ pr->val;
	return 1;
}

#endif /* XFW_MARK_H */
