/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hashlimit.h — the hashlimit match (xt_hashlimit revision 3,
 * net/netfilter/xt_hashlimit.c), for the hashlimit probes of the walk
 * (XFW_PROBE_HASHLIMIT, probe.h).
 *
 * The namespace's tables live in xfw_hl_tab (one per name and family,
 * written by the control plane with the configuration of the rule that
 * created it, kept while a rule names it: internal/dataplane/hashlimit.go)
 * and their entries in xfw_hl_ent, keyed by the table's id and the masked
 * addresses and ports the table's mode keeps. An entry is the kernel's
 * dsthash_ent: a token bucket under a spin lock (no call is made while it
 * is held), charged with the kernel's arithmetic (rateinfo_recalc,
 * hashlimit_byte_cost) in 64 bits; with --hashlimit-rate-match it counts
 * the packets (or bytes) of fixed windows instead, as revision 3 does.
 *
 * A table at its maximum refuses new entries and the packet is dropped
 * (the kernel's hotdrop), as is a packet whose ports cannot be read.
 *
 * Garbage collection: the kernel frees a table's expired entries every
 * --hashlimit-htable-gcinterval ms from the table's creation (htable_gc,
 * a delayed work); until then an expired entry is used and counted as
 * any other (its bucket refilled by the time since its last packet
 * only). xfw runs no timer (bpf_timer needs maps held by a process or
 * pinned); it makes up for the collections when it meets their effect
 * (xfw_hl_last_gc): an entry a packet meets that expired before the
 * last collection's time starts again as a new one; a table at its
 * maximum frees the entries expired before that time, once per
 * collection, before refusing a new key. An expired entry a packet meets
 * before a collection is used as the kernel uses it.
 *
 * Includes: common.h, parse.h (struct xfw_pkt), hashlimit_structs.h.
 */
#ifndef XFW_HASHLIMIT_H
#define XFW_HASHLIMIT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "hashlimit_structs.h"

/* The namespace's tables, by id (the control plane numbers them). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct xfw_hl_table);
	__uint(max_entries, 1024);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xfw_hl_tab SEC(".maps");

/* The tables' entries: memory only for the entries in use, up to the sum
 * of HASHLIMIT_MAX_SIZE-sized tables a busy host would hold. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct xfw_hl_key);
	__type(value, struct xfw_hl_entry);
	__uint(max_entries, 1 << 20);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xfw_hl_ent SEC(".maps");

/* Per-CPU room for a key and a new entry: the probe's frame is short. */
struct xfw_hl_scratch {
	struct xfw_hl_key key;
	struct xfw_hl_init init;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_hl_scratch);
	__uint(max_entries, 1);
} xfw_hl_scratch SEC(".maps");

/* What the evaluator answers beyond true and false. */
#define XFW_HL_HOTDROP XFW_PROBE_HOTDROP

/* The collection's state, on xfw_hl_gc's stack for its callback. */
struct xfw_hl_gc_ctx {
	__u64 now;
	__u64 freed;
	__u32 table;
	__u32 pad;
};

/* xfw_hl_gc_one frees entry key of the collected table when it expired
 * by the collection's time c->now (select_gc: time_after_eq(jiffies,
 * expires)). */
static long xfw_hl_gc_one(void *map, struct xfw_hl_key *key, struct xfw_hl_entry *e,
			  struct xfw_hl_gc_ctx *c)
{
	if (key->table == c->table && (__s64)(c->now - e->expires) >= 0 &&
	    bpf_map_delete_elem(map, key) == 0)
		c->freed++;
	return 0;
}

/* xfw_hl_gc collects the entries of table `table` expired by jiffies now
 * (htable_gc) and returns how many it freed. A global function, verified
 * once. */
__attribute__((noinline)) int xfw_hl_gc(__u32 table, __u64 now)
{
	struct xfw_hl_gc_ctx c = {.now = now, .table = table};

	bpf_for_each_map_elem(&xfw_hl_ent, xfw_hl_gc_one, &c, 0);
	return (int)c.freed;
}

/* xfw_hl_last_gc returns the number (from 1) of table t's last
 * collection by jiffies now, 0 before its first; *at its time: born plus
 * that many intervals. */
static __always_inline __u64 xfw_hl_last_gc(const struct xfw_hl_table *t, __u64 now, __u64 *at)
{
	__u64 age = now - t->born, g = t->gc, k;

	*at = 0;
	if (!g || (__s64)age < (__s64)g)
		return 0;
	k = age / g;
	*at = t->born + k * g;
	return k;
}

/* xfw_hl_key_of builds the packet's key in k (hashlimit_init_dst): 0, or
 * -1 when the ports the mode wants cannot be read. The ports are the four
 * bytes at proto_ports_offset (p->ports4: a TCP or UDP header's first
 * four however short the rest, ESP's and AH's SPI halves, an IPv4 later
 * fragment's payload); an IPv6 later fragment has none (ipv6_skip_exthdr
 * stops at its fragment header, whose number has no ports); an IPv6
 * packet without a next header has no key at all. */
static __always_inline int xfw_hl_key_of(const struct xfw_pkt *p, const struct xfw_hl_table *t,
					 __u32 table, struct xfw_hl_key *k)
{
	__u32 sport = 0, dport = 0;

	k->table = table;
	k->src_hi = p->src_hi & t->src_hi;
	k->src_lo = p->src_lo & t->src_lo;
	k->dst_hi = p->dst_hi & t->dst_hi;
	k->dst_lo = p->dst_lo & t->dst_lo;
	k->ports = 0;
	if (!(t->mode & (XFW_HL_SPT | XFW_HL_DPT)))
		return 0;
	/* ipv6_skip_exthdr fails at "no next header" and at an extension
	 * header cut short (not after a later fragment's header, where it
	 * stops: a chain xfw could not walk that has a fragment header is
	 * taken for that case). */
	if (p->fam == 1 && !p->frag &&
	    (p->proto == XFW_NH_NONE || (p->proto == XFW_PROTO_ERR && !p->fragmented)))
		return -1;
	switch (p->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
	case IPPROTO_SCTP:
	case IPPROTO_DCCP:
	case IPPROTO_ESP:
	case IPPROTO_AH:
		if (p->fam == 1 && p->frag)
			break;
		if (!p->ports4_ok)
			return -1;
		sport = p->ports4 >> 16;
		dport = p->ports4 & 0xffff;
		break;
	}
	if (t->mode & XFW_HL_SPT)
		k->ports = sport << 16;
	if (t->mode & XFW_HL_DPT)
		k->ports |= dport;
	return 0;
}

/* xfw_hl_recalc is rateinfo_recalc: the credits the jiffies since the
 * last packet bring, capped. */
static __always_inline void xfw_hl_recalc(struct xfw_hl_entry *e, const struct xfw_hl_table *t,
					  __u64 now)
{
	__u64 delta = now - e->prev, old = e->credit, cap = e->credit_cap;

	if (delta == 0)
		return;
	if (t->mode & XFW_HL_RATE_MATCH) {
		/* A window ends after interval jiffies: the next one opens
		 * unless this one's count went over the rate. */
		if (delta < t->interval)
			return;
		e->prev = now;
		e->cost = e->credit * t->interval > delta * t->rate;
		e->credit = 0;
		return;
	}
	e->prev = now;
	if (t->mode & XFW_HL_BYTES) {
		e->credit += t->cpj * delta;
		cap = t->bfull;
		if (old >= e->credit) { /* overflow */
			e->credit = cap;
			return;
		}
	} else {
		e->credit += delta * t->cpj;
	}
	if (e->credit > cap)
		e->credit = cap;
}

/* xfw_hl_fill writes a new entry's bucket (rateinfo_init) into n. */
static __always_inline void xfw_hl_fill(struct xfw_hl_init *n, const struct xfw_hl_table *t,
					__u64 now)
{
	n->lock = 0;
	n->pad = 0;
	n->expires = now + t->expire;
	n->prev = now;
	n->credit = t->credit;
	n->cost = t->cost;
	n->credit_cap = (t->mode & XFW_HL_BYTES) ? t->refills : t->cap;
	if (t->mode & XFW_HL_RATE_MATCH) {
		n->credit = 0; /* current_rate */
		n->cost = 0;   /* prev_window */
		n->credit_cap = 0;
	}
}

/* xfw_hl_insert adds the new entry of s->key to table t (id table):
 * 0, or -1 when the table is full (after making up for the kernel's
 * collections since the last time) or the map refuses it. Another CPU may have added it meanwhile: that is
 * no error (the kernel's race), the caller looks it up again. */
static __always_inline int xfw_hl_insert(struct xfw_hl_table *t, __u32 table,
					 struct xfw_hl_scratch *s, __u64 now)
{
	__u64 k, at;
	long err;

	if (__sync_fetch_and_add(&t->count, 1) >= t->max) {
		__sync_fetch_and_add(&t->count, -1);
		/* The kernel's collections so far freed what expired by the
		 * last one's time: made up for once per collection. */
		k = xfw_hl_last_gc(t, now, &at);
		if (!k || (__u32)k == t->gc_done)
			return -1;
		t->gc_done = (__u32)k;
		__sync_fetch_and_add(&t->count, -(__s64)xfw_hl_gc(table, at));
		if (__sync_fetch_and_add(&t->count, 1) >= t->max) {
			__sync_fetch_and_add(&t->count, -1);
			return -1;
		}
	}
	xfw_hl_fill(&s->init, t, now);
	err = bpf_map_update_elem(&xfw_hl_ent, &s->key, &s->init, BPF_NOEXIST);
	if (err) {
		__sync_fetch_and_add(&t->count, -1);
		if (err != -17) /* -EEXIST: another CPU added it */
			return -1;
	}
	return 0;
}

/* xfw_hashlimit answers a hashlimit probe (hashlimit_mt_common) of arg
 * (XFW_HL_ARG_*) for packet p: 1 true, 0 false, XFW_HL_HOTDROP. Inlined
 * into the global xfw_probe (probe.h). */
static __always_inline int xfw_hashlimit(const struct xfw_pkt *p, __u32 arg)
{
	__u32 zero = 0, table = arg & XFW_HL_ARG_TABLE;
	struct xfw_hl_scratch *s = bpf_map_lookup_elem(&xfw_hl_scratch, &zero);
	struct xfw_hl_table *t = bpf_map_lookup_elem(&xfw_hl_tab, &table);
	struct xfw_hl_entry *e;
	__u64 now, cost, k, at;
	int under;

	if (!s || !t || xfw_hl_key_of(p, t, table, &s->key) < 0)
		return XFW_HL_HOTDROP;
	now = bpf_jiffies64();
	e = bpf_map_lookup_elem(&xfw_hl_ent, &s->key);
	if (!e) {
		if (xfw_hl_insert(t, table, s, now) < 0)
			return XFW_HL_HOTDROP;
		e = bpf_map_lookup_elem(&xfw_hl_ent, &s->key);
		if (!e)
			return XFW_HL_HOTDROP;
	}
	/* A collection since the entry expired freed it (read outside the
	 * lock: a call under it is refused). */
	k = xfw_hl_last_gc(t, now, &at);
	bpf_spin_lock(&e->lock);
	if (k && (__s64)(at - e->expires) >= 0) {
		/* The kernel's collection freed it: it starts again as a new
		 * entry. An entry expired since is used as it is. */
		e->prev = now;
		e->credit = t->credit;
		e->cost = t->cost;
		e->credit_cap = (t->mode & XFW_HL_BYTES) ? t->refills : t->cap;
		if (t->mode & XFW_HL_RATE_MATCH) {
			e->credit = 0;
			e->cost = 0;
			e->credit_cap = 0;
		}
	} else {
		xfw_hl_recalc(e, t, now);
	}
	e->expires = now + t->expire;
	if (arg & XFW_HL_ARG_RATE_MATCH) {
		/* The window's count, packets or bytes (skb->len); under the
		 * rate while the last window was and the count is within the
		 * burst. (The control plane gives such a rule a rate-match
		 * table.) */
		e->credit += (arg & XFW_HL_ARG_BYTES) ? (__u64)p->l3len : 1;
		under = !e->cost && e->credit <= t->burst;
		bpf_spin_unlock(&e->lock);
		return under ^ !!(arg & XFW_HL_ARG_INVERT);
	}
	if (arg & XFW_HL_ARG_BYTES) {
		/* hashlimit_byte_cost: chunks of the length, at most a full
		 * bucket; an empty bucket is refilled while refills last. */
		cost = (((__u64)p->l3len >> 4) + 1) * e->cost;
		if (cost > t->bfull)
			cost = t->bfull;
		if (e->credit < cost && e->credit_cap) {
			e->credit_cap--;
			e->credit = t->bfull;
		}
	} else {
		cost = e->cost;
	}
	under = e->credit >= cost;
	if (under)
		e->credit -= cost;
	bpf_spin_unlock(&e->lock);
	return under ^ !!(arg & XFW_HL_ARG_INVERT);
}

#endif /* XFW_HASHLIMIT_H */
