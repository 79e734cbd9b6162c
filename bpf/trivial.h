/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trivial.h — the minimal path of a walk that accepts every packet
 * without classifying it (a host with no rule in the packet's chains):
 * the compiler finds such walks (internal/compiler/trivial.go) and lists,
 * per chain, the counters they bump in the slot's configuration
 * (xfw_family_cfg.trivial, .trivial_ctr): the chains' ACCEPT policies,
 * unconditional counting rules. The hooks bump those counters and accept,
 * skipping the classifier's call, its scratch and its set-up, the
 * pre-walk fields and the verdict's NAT and mark checks.
 *
 * Never for a generation that tracks connections (the compiler decides
 * none trivial then; the test here holds it too): tracking must see every
 * packet as before.
 *
 * Includes: common.h, xfw_structs.h, classify_maps.h, generation.h.
 */
#ifndef XFW_TRIVIAL_H
#define XFW_TRIVIAL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_maps.h"
#include "generation.h"

/* xfw_trivial_walk reports whether chain's walk of generation slot is
 * trivial; if so it has bumped the walk's counters by one packet of bytes
 * (as xfw_count: this CPU's row of the slot's counters) and the verdict
 * is ACCEPT. */
static __always_inline int xfw_trivial_walk(__u32 slot, __u32 chain, __u32 bytes)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	struct xfw_counter *c;
	__u32 n, rule, row, key;
	void *m;

	if (!fc || chain >= XFW_NCHAINS || !fc->trivial[chain] ||
	    (fc->active & (1u << XFW_F_CT)))
		return 0;
	n = fc->trivial[chain] - 1;
	m = xfw_inner(&xfw_o_counters, slot);
	if (!m)
		return 0; /* the classifier's path decides (and counts) */
	row = bpf_get_smp_processor_id() * fc->ncounters;
	for (__u32 i = 0; i < XFW_TRIVIAL_CTRS; i++) {
		if (i >= n)
			break;
		rule = fc->trivial_ctr[chain][i];
		if (rule >= fc->ncounters)
			continue;
		key = row + rule;
		c = bpf_map_lookup_elem(m, &key);
		if (c) {
			c->packets += 1;
			c->bytes += bytes;
		}
	}
	return 1;
}

#endif /* XFW_TRIVIAL_H */
