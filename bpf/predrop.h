/* SPDX-License-Identifier: GPL-2.0 */
/*
 * predrop.h — the short path of a flood's drop: the leading rules of the
 * PREROUTING chains judged before routing that only match one address
 * range and DROP (`-t raw -A PREROUTING -s NET -j DROP`), listed by the
 * compiler (internal/compiler/predrop.go) in the slot's configuration
 * (xfw_family_cfg.predrop). xfw_xdp_rawpre compares the packet's address
 * with each in order before it classifies: at the first range that holds
 * it, that rule is counted and the packet dropped, as the walk would have
 * (it meets nothing before that rule); otherwise the walk runs from the
 * chain's start as before. A packet dropped there costs no field
 * classification, no walk and none of their map lookups.
 *
 * Not when some set match counts packets (xfw_family_cfg.nsetctr): the
 * walk's end counts them (classify.h).
 *
 * Includes: common.h, xfw_structs.h, classify_structs.h, classify_maps.h,
 * generation.h (xfw_count).
 */
#ifndef XFW_PREDROP_H
#define XFW_PREDROP_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "generation.h"

/* xfw_u128_le reports (ah, al) <= (bh, bl). */
static __always_inline int xfw_u128_le(__u64 ah, __u64 al, __u64 bh, __u64 bl)
{
	return ah < bh || (ah == bh && al <= bl);
}

/* xfw_predrop reports whether one of slot's leading address drops holds
 * the packet p; if so it has counted that rule. */
static __always_inline int xfw_predrop(struct xfw_pkt *p, __u32 slot)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	__u32 n;

	if (!fc || fc->nsetctr)
		return 0;
	n = fc->predrop_n;
	for (__u32 i = 0; i < XFW_PREDROP_MAX; i++) {
		struct xfw_predrop *d = &fc->predrop[i];
		__u64 hi = p->src_hi, lo = p->src_lo;

		if (i >= n)
			return 0;
		if (d->field == XFW_F_DST) {
			hi = p->dst_hi;
			lo = p->dst_lo;
		}
		if (xfw_u128_le(d->lo_hi, d->lo_lo, hi, lo) && xfw_u128_le(hi, lo, d->hi_hi, d->hi_lo)) {
			xfw_count(slot, d->ctr, p->l3len);
			return 1;
		}
	}
	return 0;
}

#endif /* XFW_PREDROP_H */
