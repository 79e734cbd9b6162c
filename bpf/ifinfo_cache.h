/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ifinfo_cache.h — a per-CPU cache of the XDP hook's interface facts
 * (xfw_ifinfo, a hash keyed by ifindex | VLAN id << 32): the hash lookup
 * costs every packet ~10 ns, and a CPU sees few devices.
 *
 * Validity: the control plane bumps the facts' generation (xfw_bank's
 * XFW_BANK_IFGEN entry) after every refill of xfw_ifinfo
 * (internal/dataplane: fillIfInfo, then bumpIfinfoGen). An entry holds the
 * generation read before its hash lookup and is used only while it is
 * unchanged: a lookup racing with a refill is tagged with the older
 * generation, never used after the bump. The entries live in the hook's
 * per-CPU scratch (XDP runs do not nest on a CPU): no torn reads, as an
 * array of facts updated in place could give.
 *
 * Includes: xfw_structs.h (struct xfw_ifc_ent), classify_maps.h
 * (xfw_bank), xfw_maps.h (xfw_ifinfo, struct xfw_xdp_scratch).
 */
#ifndef XFW_IFINFO_CACHE_H
#define XFW_IFINFO_CACHE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xfw_structs.h"
#include "classify_maps.h"
#include "xfw_maps.h"

/* xfw_ifinfo_get returns the facts of key (xfw_ifinfo's), from this CPU's
 * cache when they are of the current generation, or NULL when the device
 * has none. */
static __always_inline struct xfw_ifinfo *xfw_ifinfo_get(struct xfw_xdp_scratch *sc, __u64 key)
{
	__u32 k = XFW_BANK_IFGEN, *genp = bpf_map_lookup_elem(&xfw_bank, &k);
	struct xfw_ifc_ent *e = &sc->ifc[(key ^ (key >> 32)) & (XFW_IFC_SLOTS - 1)];
	struct xfw_ifinfo *v;
	__u32 gen;

	if (!genp)
		return bpf_map_lookup_elem(&xfw_ifinfo, &key);
	gen = *genp; /* read before the lookup (see Validity) */
	if (e->valid && e->key == key && e->gen == gen)
		return &e->v;
	v = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	if (!v)
		return 0;
	e->key = key;
	e->gen = gen;
	e->v = *v;
	e->valid = 1;
	return &e->v;
}

#endif /* XFW_IFINFO_CACHE_H */
