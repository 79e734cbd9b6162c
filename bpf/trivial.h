/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trivial.h — the minimal path of a walk that accepts every packet
 * without classifying it (a host with no rule in the packet's chains):
 * the compiler finds such walks (internal/compiler/trivial.go) and lists,
 * per chain, the counters they bump in the slot's configuration
 * (xfw_family_cfg.trivial, .trivial_ctr): the chains' ACCEPT policies,
 * unconditional counting rules. The hooks count the packet once, per
 * slot and chain in the per-CPU statistics (XFW_STAT_TRIVIAL; the control
 * plane adds those counts to each listed counter), and accept,
 * skipping the classifier's call, its scratch and its set-up, the
 * pre-walk fields and the verdict's NAT and mark checks.
 *
 * Never for a generation that tracks connections (the compiler decides
 * none trivial then; the test here holds it too): tracking must see every
 * packet as before.
 *
 * Includes: common.h, xfw_structs.h, classify_structs.h (XFW_STAT_TRIVIAL),
 * classify_maps.h (xfw_cfg, xfw_stats).
 */
#ifndef XFW_TRIVIAL_H
#define XFW_TRIVIAL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_structs.h"
#include "classify_maps.h"

/* xfw_trivial_walk reports whether chain's walk of generation slot is
 * trivial; if so it has counted one packet of bytes for it (this CPU's
 * xfw_stats pair of the slot's chain: one place, whichever counters the
 * walk bumps, which the control plane adds to each of them) and the
 * verdict is ACCEPT. */
static __always_inline int xfw_trivial_walk(__u32 slot, __u32 chain, __u32 bytes)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	__u64 *packets, *octets;
	__u32 idx;

	if (!fc || chain >= XFW_NCHAINS || !fc->trivial[chain] ||
	    (fc->active & (1u << XFW_F_CT)))
		return 0;
	idx = XFW_STAT_TRIVIAL + (slot * XFW_NCHAINS + chain) * 2;
	packets = bpf_map_lookup_elem(&xfw_stats, &idx);
	idx += 1;
	octets = bpf_map_lookup_elem(&xfw_stats, &idx);
	if (!packets || !octets)
		return 0; /* the classifier's path decides (and counts) */
	*packets += 1;
	*octets += bytes;
	return 1;
}

#endif /* XFW_TRIVIAL_H */
