/* SPDX-License-Identifier: GPL-2.0 */
/*
 * generation.h — how a program run uses the generations (classify_maps.h):
 * it counts itself in flight (xfw_enter / xfw_leave), reads its family's
 * active slot once (xfw_active_slot), and reaches that slot's inner maps
 * (xfw_inner); rule counters (xfw_count) and statistics (xfw_stat_inc).
 *
 * Quiescence. After the flip the control plane must know when no packet
 * still reads the old bank (its counters are final, its maps may be
 * rewritten by the next change). Each program run brackets its work with
 * xfw_enter / xfw_leave, which count runs begun and ended per CPU
 * (xfw_inflight); the control plane snapshots the begun counts after the
 * flip and waits until every CPU has ended as many — microseconds, where
 * waiting for an RCU grace period takes 10–25 ms. As x_tables' per-CPU
 * sequence counts, this relies on runs of one CPU not nesting (XDP and
 * TC run with bottom halves off); on PREEMPT_RT the control plane waits
 * for a grace period instead. The begun count is incremented with a
 * fetching atomic, a full barrier: the bank is read after the increment
 * is visible (the control plane fences between its flip and its snapshot).
 *
 * Includes: common.h, xfw_structs.h, classify_maps.h.
 */
#ifndef XFW_GENERATION_H
#define XFW_GENERATION_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_maps.h"

/* xfw_stat_inc counts one event of statistics slot idx (enum xfw_stat). */
static __always_inline void xfw_stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&xfw_stats, &idx);

	if (v)
		*v += 1;
}

/* xfw_enter counts a program run as begun, before it reads the bank; the
 * caller passes the result to xfw_leave once it no longer reads the slot's
 * maps. */
static __always_inline struct xfw_inflight *xfw_enter(void)
{
	struct xfw_inflight *f;
	__u32 zero = 0;

	f = bpf_map_lookup_elem(&xfw_inflight, &zero);
	if (f && __sync_fetch_and_add(&f->begun, 1) == (__u64)-1)
		f->ended = 0; /* unreachable wrap; keeps the fetch (a barrier) */
	return f;
}

static __always_inline void xfw_leave(struct xfw_inflight *f)
{
	if (f)
		__sync_fetch_and_add(&f->ended, 1);
}

/* xfw_active_cfg returns the configuration of family fi's (0 IPv4, 1
 * IPv6) active generation and sets *slot to its slot, or returns NULL
 * (*slot XFW_NO_SLOT) when the family has no ruleset. */
static __always_inline struct xfw_family_cfg *xfw_active_cfg(__u32 fi, __u32 *slot)
{
	struct xfw_family_cfg *c;
	__u32 *bank, s;

	*slot = XFW_NO_SLOT;
	bank = bpf_map_lookup_elem(&xfw_bank, &fi);
	if (!bank)
		return 0;
	s = fi * 2 + (*bank & 1);
	c = bpf_map_lookup_elem(&xfw_cfg, &s);
	if (!c || !c->enabled)
		return 0;
	*slot = s;
	return c;
}

/* xfw_active_slot returns the generation slot of family fi (0 IPv4, 1
 * IPv6), or XFW_NO_SLOT when the family has no ruleset. */
static __always_inline __u32 xfw_active_slot(__u32 fi)
{
	__u32 slot;

	xfw_active_cfg(fi, &slot);
	return slot;
}

/* xfw_inner returns slot's inner map of outer map o, or NULL. */
static __always_inline void *xfw_inner(void *o, __u32 slot)
{
	return bpf_map_lookup_elem(o, &slot);
}

static __always_inline void xfw_count(__u32 slot, __u32 rule, __u32 bytes)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	void *m = xfw_inner(&xfw_o_counters, slot);
	struct xfw_counter *c;
	__u32 key;

	if (!fc || !m || rule >= fc->ncounters)
		return;
	key = bpf_get_smp_processor_id() * fc->ncounters + rule;
	c = bpf_map_lookup_elem(m, &key);
	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

#endif /* XFW_GENERATION_H */
