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
 * Includes: common.h, xfw_structs.h, parse.h, ct_structs.h, ct_maps.h.
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

/* The state bits of XFW_PROBE_CTNAT's .val above the five states
 * (compiler.CtNatSNAT, CtNatDNAT). */
#define XFW_CTNAT_SNAT (1u << 5)
#define XFW_CTNAT_DNAT (1u << 6)

/* xfw_ctnat_flags returns the XFW_NAT_F_* of the connection of packet p
 * of hook (0 without one). */
static __always_inline __u32 xfw_ctnat_flags(const struct xfw_pkt *p, __u32 hook)
{
	struct xfw_ct_scratch *cs;
	struct xfw_ct_entry *e;
	__u32 key = hook, state = p->ct & 7;

	if (state == XFW_CTS_INVALID || state == XFW_CTS_UNTRACKED)
		return 0;
	cs = bpf_map_lookup_elem(&xfw_ct_scratch, &key);
	if (!cs)
		return 0;
	if (cs->pending == XFW_CTP_CREATE)
		return cs->nv.nat_flags;
	e = bpf_map_lookup_elem(&xfw_ct, &cs->key);
	if (!e)
		e = bpf_map_lookup_elem(&xfw_ct_new, &cs->key);
	return e ? e->v.nat_flags : 0;
}

/* xfw_ctnat_match answers --ctstate probe pr for packet p of hook. */
static __always_inline int xfw_ctnat_match(struct xfw_probe *pr, struct xfw_pkt *p, __u32 hook)
{
	__u32 nat = xfw_ctnat_flags(p, hook);
	__u32 bits = 1u << (p->ct & 7);

	if (nat & XFW_NAT_F_SRC)
		bits |= XFW_CTNAT_SNAT;
	if (nat & XFW_NAT_F_DST)
		bits |= XFW_CTNAT_DNAT;
	return ((bits & pr->val) != 0) != (pr->arg & 1);
}

#endif /* XFW_CTNAT_H */
