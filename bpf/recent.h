/* SPDX-License-Identifier: GPL-2.0 */
/*
 * recent.h — the recent match (xt_recent, net/netfilter/xt_recent.c) for
 * the walk's recent probes (XFW_PROBE_RECENT, probe.h).
 *
 * The namespace's lists outlive generations: xfw_rc_list holds each list
 * (its name, the address mask and timestamp ring of the rule that created
 * it, its entry count and LRU clock), xfw_rc_ent the entries of every list
 * (key: list, family, masked address; value: the TTL, the ring of the
 * last timestamps in jiffies, the LRU stamp). The control plane creates,
 * flushes and frees lists as the kernel's recent_mt_check and
 * recent_mt_destroy do (internal/dataplane/recent.go). xfw_rc_rule holds
 * the recent matches of each slot's generation (XFW_RECENT_RULES a slot;
 * the probe's .arg is the match's index in its slot).
 *
 * The evaluator is recent_mt: look the packet's masked address up (with
 * --rttl, an entry of another TTL is none), add it for --set (evicting the
 * list's least recently used entry when it holds XFW_RECENT_LIST_TOT),
 * remove it for --remove, count its timestamps within --seconds for
 * --rcheck and --update, reap the list's oldest entry for --reap, and
 * stamp it for --set and a matching --update. The LRU order is the
 * entries' stamp of the list's clock; the oldest is found by a walk of
 * xfw_rc_ent (bpf_for_each_map_elem), only when a full list takes a new
 * address or --reap asks. The kernel serialises all of it with one spin
 * lock; here the ring of one entry is updated under the entry's lock and
 * the rest with atomics (docs/differences.md says what may differ).
 *
 * Includes: common.h, parse.h, recent_structs.h.
 */
#ifndef XFW_RECENT_H
#define XFW_RECENT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"

#include "recent_structs.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct xfw_rc_key);
	__type(value, struct xfw_rc_ent);
	/* Every list full, and room for additions racing an eviction. */
	__uint(max_entries, XFW_RECENT_LISTS * XFW_RECENT_LIST_TOT + 256);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xfw_rc_ent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rc_list);
	__uint(max_entries, XFW_RECENT_LISTS);
	/* The control plane writes a list's fields in place: packets change
	 * its clock and entry count meanwhile. */
	__uint(map_flags, BPF_F_MMAPABLE);
} xfw_rc_list SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rc_rule);
	__uint(max_entries, XFW_NSLOTS * XFW_RECENT_RULES);
} xfw_rc_rule SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rc_scratch);
	__uint(max_entries, 1);
} xfw_rc_scr SEC(".maps");

#ifndef XFW_READ_ONCE
/* One load of x, which other CPUs change (as limit.h's). */
#define XFW_READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))
#endif

/* time_after(a, b): a is later than b, across the counter's wrap. */
#define XFW_TIME_AFTER(a, b) ((__s64)((b) - (a)) < 0)

/* xfw_rc_oldest_cb keeps the entry of the scratch's list with the lowest
 * LRU stamp (bpf_for_each_map_elem over xfw_rc_ent). */
static long xfw_rc_oldest_cb(void *map, struct xfw_rc_key *k, struct xfw_rc_ent *e, void *ctx)
{
	__u32 zero = 0;
	struct xfw_rc_scratch *s = bpf_map_lookup_elem(&xfw_rc_scr, &zero);

	if (!s || k->list != s->list)
		return 0;
	if (!s->found || e->lru < s->oldest_lru) {
		s->found = 1;
		s->oldest_lru = e->lru;
		s->oldest = *k;
	}
	return 0;
}

/* xfw_rc_find_oldest leaves the key of list's least recently stamped
 * entry in s->oldest (s->found 0: the list is empty). */
static __always_inline void xfw_rc_find_oldest(struct xfw_rc_scratch *s, __u32 list)
{
	s->list = list;
	s->found = 0;
	bpf_for_each_map_elem(&xfw_rc_ent, xfw_rc_oldest_cb, NULL, 0);
}

/* xfw_rc_remove is recent_entry_remove. */
static __always_inline void xfw_rc_remove(struct xfw_rc_list *l, struct xfw_rc_key *k)
{
	if (bpf_map_delete_elem(&xfw_rc_ent, k) == 0)
		__sync_fetch_and_add(&l->entries, -1);
}

/* xfw_rc_stamp is recent_entry_update with the TTL recent_mt sets after
 * it: the next slot of the ring gets now, the entry becomes the list's
 * most recently used. */
static __always_inline void xfw_rc_stamp(struct xfw_rc_list *l, struct xfw_rc_ent *e, __u8 ttl, __u64 now)
{
	__u64 lru = __sync_fetch_and_add(&l->clock, 1);
	__u32 ring = l->ring & (XFW_RECENT_STAMPS - 1);

	bpf_spin_lock(&e->lock);
	e->index &= ring;
	e->stamps[e->index & (XFW_RECENT_STAMPS - 1)] = now;
	e->index++;
	if (e->index > e->nstamps)
		e->nstamps = e->index;
	e->lru = lru;
	e->ttl = ttl;
	bpf_spin_unlock(&e->lock);
}

/* xfw_rc_insert is recent_entry_init: a full list first loses its least
 * recently used entry. 0 when the entry could not be added (the kernel's
 * failed allocation, which drops the packet: the rule does not match). */
static __always_inline int xfw_rc_insert(struct xfw_rc_scratch *s, struct xfw_rc_list *l, __u8 ttl, __u64 now)
{
	if (XFW_READ_ONCE(l->entries) >= XFW_RECENT_LIST_TOT) {
		xfw_rc_find_oldest(s, s->key.list);
		if (s->found)
			xfw_rc_remove(l, &s->oldest);
	}
	__builtin_memset(&s->fresh, 0, sizeof(s->fresh) - sizeof(s->fresh.stamps));
	s->fresh.stamps[0] = now;
	s->fresh.nstamps = 1;
	s->fresh.index = 1;
	s->fresh.ttl = ttl;
	s->fresh.lru = __sync_fetch_and_add(&l->clock, 1);
	if (bpf_map_update_elem(&xfw_rc_ent, &s->key, &s->fresh, BPF_NOEXIST) != 0)
		return 0;
	__sync_fetch_and_add(&l->entries, 1);
	return 1;
}

/* The timestamp walk's bpf_loop context (on xfw_probe's stack). */
struct xfw_rc_walk {
	const struct xfw_rc_rule *r;
	struct xfw_rc_ent *e;
	struct xfw_rc_scratch *s;
};

/* xfw_rc_hits_step counts timestamp i of the entry when it is no older
 * than s->since. A bpf_loop callback: verified once, not once per
 * timestamp (as an inlined loop, ~15,000 instructions per program). */
static long xfw_rc_hits_step(__u32 i, struct xfw_rc_walk *w)
{
	const struct xfw_rc_rule *r = w->r;
	struct xfw_rc_ent *e = w->e;
	struct xfw_rc_scratch *s = w->s;

	if (!r || !e || !s || i >= XFW_RECENT_STAMPS || i >= s->n)
		return 1;
	/* One copy of i, bounded where the verifier sees it. */
	asm volatile("%[i] &= 255" : [i] "+r"(i)); /* XFW_RECENT_STAMPS - 1 */
	if (r->seconds && XFW_TIME_AFTER(s->since, e->stamps[i]))
		return 0;
	if (!r->hits || ++s->hits >= r->hits) {
		s->held = 1;
		return 1;
	}
	return 0;
}

/* xfw_rc_hits is the --rcheck/--update test: 1 when the entry has
 * --hitcount timestamps (one without it) no older than time. */
static __always_inline int xfw_rc_hits(const struct xfw_rc_rule *r, struct xfw_rc_ent *e,
				       struct xfw_rc_scratch *s, __u64 time)
{
	struct xfw_rc_walk w = {.r = r, .e = e, .s = s};

	s->since = time;
	s->n = e->nstamps;
	s->hits = 0;
	s->held = 0;
	bpf_loop(XFW_RECENT_STAMPS, xfw_rc_hits_step, &w, 0);
	return s->held;
}

/* xfw_rc_reap is recent_entry_reap: the list's least recently used entry
 * goes when its last timestamp is older than time, unless it is the entry
 * about to be stamped (working, when update). */
static __always_inline void xfw_rc_reap(struct xfw_rc_scratch *s, struct xfw_rc_list *l, __u64 time, int update)
{
	struct xfw_rc_ent *e;
	__u32 last;

	xfw_rc_find_oldest(s, s->key.list);
	if (!s->found)
		return;
	if (update && s->oldest.fam == s->key.fam && s->oldest.hi == s->key.hi && s->oldest.lo == s->key.lo)
		return;
	e = bpf_map_lookup_elem(&xfw_rc_ent, &s->oldest);
	if (!e)
		return;
	last = (__u32)(e->index - 1) & (XFW_RECENT_STAMPS - 1);
	if (XFW_TIME_AFTER(time, e->stamps[last]))
		xfw_rc_remove(l, &s->oldest);
}

/* xfw_recent_match is recent_mt for the recent probe of argument arg (its
 * match's index in slot, XFW_RC_ARG_FWD) and the packet p: 1 the match is
 * true, 0 false. */
static __always_inline int xfw_recent_match(__u32 slot, __u32 arg, const struct xfw_pkt *p)
{
	__u32 k = arg & ~XFW_RC_ARG_FWD;
	__u32 idx = slot * XFW_RECENT_RULES + (k & (XFW_RECENT_RULES - 1));
	/* "use TTL as seen before forwarding": recent_mt adds one when the
	 * packet has an output device and no socket: FORWARD's p->ttl is one
	 * less (XFW_RC_ARG_FWD), as is that of an OUTPUT packet without a
	 * socket (p->nosock, REJECT's resets). */
	__u8 ttl = p->ttl + !!(arg & XFW_RC_ARG_FWD) + p->nosock;
	struct xfw_rc_scratch *s;
	struct xfw_rc_rule *r;
	struct xfw_rc_list *l;
	struct xfw_rc_ent *e;
	__u64 now, time;
	int ret;

	r = bpf_map_lookup_elem(&xfw_rc_rule, &idx);
	if (!r || k >= XFW_RECENT_RULES)
		return 0;
	idx = 0;
	s = bpf_map_lookup_elem(&xfw_rc_scr, &idx);
	l = bpf_map_lookup_elem(&xfw_rc_list, &r->list);
	if (!s || !l)
		return 0;
	ret = r->invert;
	s->key.list = r->list;
	s->key.fam = p->fam;
	if (p->fam) {
		s->key.hi = (r->dest ? p->dst_hi : p->src_hi) & l->mask_hi;
		s->key.lo = (r->dest ? p->dst_lo : p->src_lo) & l->mask_lo;
	} else {
		s->key.hi = 0;
		s->key.lo = (r->dest ? p->dst_lo : p->src_lo) & l->mask4;
	}
	now = bpf_jiffies64();
	e = bpf_map_lookup_elem(&xfw_rc_ent, &s->key);
	if (e && (r->flags & XFW_RC_TTL) && ttl && e->ttl && e->ttl != ttl)
		e = NULL;
	if (!e) {
		if (!(r->flags & XFW_RC_SET))
			return ret;
		if (!xfw_rc_insert(s, l, ttl, now))
			return 0;
		return !ret;
	}
	if (r->flags & XFW_RC_SET) {
		ret = !ret;
	} else if (r->flags & XFW_RC_REMOVE) {
		xfw_rc_remove(l, &s->key);
		return !ret;
	} else {
		time = now - r->window;
		if (xfw_rc_hits(r, e, s, time))
			ret = !ret;
		if (r->flags & XFW_RC_REAP)
			xfw_rc_reap(s, l, time, (r->flags & XFW_RC_UPDATE) && ret);
	}
	if ((r->flags & XFW_RC_SET) || ((r->flags & XFW_RC_UPDATE) && ret)) {
		/* Reaped meanwhile (not this entry, unless --set): look again. */
		e = bpf_map_lookup_elem(&xfw_rc_ent, &s->key);
		if (e)
			xfw_rc_stamp(l, e, ttl, now);
	}
	return ret;
}

#endif /* XFW_RECENT_H */
