/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ctexpire.h — the conntrack match's --ctexpire MIN[:MAX] (conntrack_mt):
 * a probe (probe.h) comparing the seconds left before the packet's
 * connection expires with an inclusive range, after the packet refreshed
 * the connection (tracking runs before classification).
 *
 * The seconds are nf_ct_expires(ct) / HZ on the kernel's own clock
 * (bpf_jiffies64 is jiffies): the 32-bit difference between the timeout
 * and the jiffies' low 32 bits, 0 when negative. A connection this packet
 * opens is not confirmed yet: its timeout is still the relative one the
 * kernel stores before confirmation, and nf_ct_expires subtracts the
 * jiffies from it all the same, which xfw reproduces. A packet without a
 * connection passes: conntrack_mt answers for it before reading the
 * expiry, and the rule's terms hold that answer.
 *
 * The ranges live in xfw_ctexpire, XFW_CTEXPIRE_PER_SLOT per generation
 * slot, written by the control plane with the generation
 * (internal/dataplane/ctexpire.go); the probe's argument is the index.
 *
 * Includes: common.h, xfw_structs.h, parse.h, ct_structs.h, ct_maps.h, ct_conn.h,
 * conn_structs.h.
 */
#ifndef XFW_CTEXPIRE_H
#define XFW_CTEXPIRE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"
#include "conn_structs.h"

/* Ranges per generation slot (internal/compiler MaxCtExpires). */
#define XFW_CTEXPIRE_PER_SLOT 256


struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ctexpire);
	__uint(max_entries, XFW_NSLOTS * XFW_CTEXPIRE_PER_SLOT);
} xfw_ctexpire SEC(".maps");

/* xfw_ctexpire_probe answers --ctexpire k of slot for packet p of hook. */
static __always_inline int xfw_ctexpire_probe(const struct xfw_pkt *p, __u32 hook, __u32 slot,
					      __u32 k)
{
	struct xfw_ct_scratch *cs;
	struct xfw_ctexpire *r;
	struct xfw_ct_entry *e;
	struct xfw_ct_cfg *cfg;
	__u32 key = hook, left;
	__s32 t;
	__u64 now;

	if ((p->ct & 7) == XFW_CTS_INVALID || (p->ct & 7) == XFW_CTS_UNTRACKED)
		return 1;
	cs = bpf_map_lookup_elem(&xfw_ct_scratch, &key);
	key = slot * XFW_CTEXPIRE_PER_SLOT + (k & (XFW_CTEXPIRE_PER_SLOT - 1));
	r = bpf_map_lookup_elem(&xfw_ctexpire, &key);
	key = 0;
	cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &key);
	if (!cs || !r || !cfg || !cfg->hz)
		return 0;
	now = bpf_jiffies64();
	if (cs->pending == XFW_CTP_CREATE) {
		/* Unconfirmed: the kernel's timeout is relative. */
		t = (__s32)((__u32)(cs->nv.expires - now) - (__u32)now);
	} else {
		e = xfw_ct_lookup(&cs->key);
		if (!e)
			return 0;
		t = (__s32)((__u32)e->v.expires - (__u32)now);
	}
	left = t > 0 ? (__u32)t / cfg->hz : 0;
	return (left >= r->min && left <= r->max) != !!r->invert;
}

#endif /* XFW_CTEXPIRE_H */
