/* SPDX-License-Identifier: GPL-2.0 */
/*
 * connmark.h — the connmark match and the CONNMARK target (xt_connmark.c)
 * as probes of the walk (probe.h).
 *
 * The connection's mark is struct xfw_ct_val .mark: in the tracking
 * scratch's pending value for a connection this packet opens (created
 * with the mark the walk left, if the packet is accepted: the kernel's
 * unconfirmed connection dies with a dropped packet, its mark with it),
 * else in the entry of either connection table under the scratch's key
 * (the connection's, or a RELATED packet's master). A packet without a
 * connection (INVALID, UNTRACKED) matches no connmark rule, inverted or
 * not, and CONNMARK leaves its marks alone, as nf_ct_get finds none.
 *
 * CONNMARK (connmark_tg_shift, revision 2): .arg's XFW_CONNMARK_* mode
 * and shift, .mask the ctmask, .val the ctmark (set) or the nfmask (save,
 * restore). The packet's mark is the walk's copy (mark.h). The entry's
 * mark is written with one 32-bit store, as the kernel's WRITE_ONCE.
 *
 * Includes: common.h, xfw_structs.h, parse.h, ct_structs.h, ct_maps.h, ct_conn.h.
 */
#ifndef XFW_CONNMARK_H
#define XFW_CONNMARK_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"

/* xfw_connmark_ptr returns where the connection mark of packet p of hook
 * lives, NULL when it has no connection. An ICMP error the host sends
 * about a packet it neither forwarded nor delivered carries that packet's
 * unconfirmed connection (attached, no entry: ct_related.h), whose mark is
 * the scratch's amark, 0 with each packet (found by the differential
 * test: a time-exceeded error matched the kernel's -m connmark --mark 0). */
static __always_inline __u32 *xfw_connmark_ptr(const struct xfw_pkt *p, __u32 hook)
{
	struct xfw_ct_scratch *cs;
	struct xfw_ct_entry *e;
	__u32 key = hook, state = p->ct & 7;

	if (state == XFW_CTS_INVALID || state == XFW_CTS_UNTRACKED)
		return NULL;
	cs = bpf_map_lookup_elem(&xfw_ct_scratch, &key);
	if (!cs)
		return NULL;
	if (cs->pending == XFW_CTP_CREATE)
		return &cs->nv.mark;
	e = xfw_ct_lookup(&cs->key);
	if (!e)
		return cs->attached ? &cs->amark : NULL;
	/* Keep the NULL check before the offset (the verifier refuses
	 * arithmetic on a pointer that may be NULL). */
	asm volatile("" : "+r"(e));
	return &e->v.mark;
}

/* xfw_connmark_write sets the connection mark of the packet whose
 * tracking scratch is cs to next, under its entry's lock when it has one,
 * so that a promotion on another CPU (ct_track.h xfw_ct_promote) copies
 * it or the write goes to the copy. Inlined: the probe walk's call chain
 * has no frame to spare for it and the lock's wait (bpf_loop). */
static __always_inline void xfw_connmark_write(struct xfw_ct_scratch *cs, __u32 next)
{
	struct xfw_ct_entry *e;
	int locked, table;

	if (!cs)
		return;
	if (cs->pending == XFW_CTP_CREATE) {
		cs->nv.mark = next;
		return;
	}
	e = xfw_ct_lookup_tab(&cs->key, &table);
	if (!e) {
		if (cs->attached)
			cs->amark = next;
		return;
	}
	/* Moved since the lookup: the copy in xfw_ct; gone (moved and
	 * deleted, or its element another connection's): nothing to mark
	 * (ct_conn.h xfw_ct_lock_found). */
	locked = xfw_ct_lock_found(&cs->key, &e, &table);
	if (!e || (locked != 1 && e->lock == XFW_CT_LOCK_MOVED))
		return;
	e->v.mark = next;
	if (locked == 1)
		xfw_ct_unlock(&e->lock);
}

/* xfw_connmark_match answers connmark probe pr for packet p of hook. */
static __always_inline int xfw_connmark_match(struct xfw_probe *pr, struct xfw_pkt *p, __u32 hook)
{
	__u32 *m = xfw_connmark_ptr(p, hook);

	if (!m)
		return 0;
	return ((*m & pr->mask) == pr->val) ^ !!pr->arg;
}

/* xfw_connmark_shift shifts x as CONNMARK probe argument arg says. */
static __always_inline __u32 xfw_connmark_shift(__u32 arg, __u32 x)
{
	__u32 n = (arg >> XFW_CONNMARK_SHIFT_POS) & XFW_CONNMARK_SHIFT_BITS;

	return (arg & XFW_CONNMARK_SHIFT_RIGHT) ? x >> n : x << n;
}

/* xfw_connmark_set is the CONNMARK target for packet p of hook (always
 * true: the walk goes on). */
static __always_inline int xfw_connmark_set(struct xfw_probe *pr, struct xfw_pkt *p, __u32 hook)
{
	__u32 *m = xfw_connmark_ptr(p, hook);
	__u32 arg = pr->arg, ct, next;

	if (!m)
		return 1;
	ct = *m;
	switch (arg & XFW_CONNMARK_MODE) {
	case XFW_CONNMARK_SET:
		next = xfw_connmark_shift(arg, (ct & ~pr->mask) ^ pr->val);
		break;
	case XFW_CONNMARK_SAVE:
		next = (ct & ~pr->mask) ^ xfw_connmark_shift(arg, p->mark & pr->val);
		break;
	case XFW_CONNMARK_RESTORE:
		p->mark = (p->mark & ~pr->val) ^ xfw_connmark_shift(arg, ct & pr->mask);
		return 1;
	default:
		return 1;
	}
	if (next != ct) {
		__u32 key = hook;

		xfw_connmark_write(bpf_map_lookup_elem(&xfw_ct_scratch, &key), next);
	}
	return 1;
}

#endif /* XFW_CONNMARK_H */
