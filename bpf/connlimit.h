/* SPDX-License-Identifier: GPL-2.0 */
/*
 * connlimit.h — the connlimit match (xt_connlimit and nf_conncount): a
 * probe (probe.h) that counts the connections met by the match under the
 * packet's masked source (or destination) address, the packet's own
 * included, and compares the count with the match's limit.
 *
 * As nf_conncount, each match keeps per masked address the list of the
 * connections it has counted (struct xfw_connlimit_list in xfw_connlimit,
 * keyed by generation slot, match and address: a generation's matches
 * start with no lists, as a table replacement gives the kernel's match
 * instances new ones). Counting walks the list and checks every
 * connection against the connection tables (ct.h): one gone (expired,
 * evicted, swept, deleted) or closed (TCP TIME_WAIT or CLOSE) leaves it; one
 * not in the tables yet stays for XFW_CONNLIMIT_PENDING jiffies when
 * another CPU added it (it may be waiting for its verdict, as the
 * kernel's unconfirmed connections do). The packet's connection is added
 * when the list does not hold it. A packet without a connection (INVALID,
 * UNTRACKED) counts itself and is not kept, as the kernel's entry for its
 * tuple is dropped at the next count on the same CPU. The count is
 * therefore exact whatever removed a connection: nothing needs to tell
 * this match when one ends.
 *
 * A list holds XFW_CONNLIMIT_SLOTS connections; the compiler refuses
 * limits above that (a count is exact up to SLOTS + 1). A list that
 * cannot be created (the map full) hotdrops the packet, as the kernel
 * does when it cannot allocate one.
 *
 * The probe's argument packs the match (internal/compiler/connlimit.go
 * ConnlimitArg): bits 0-7 the match's index, 8-15 the mask's prefix
 * length, 16-23 the limit, bit 24 "upto" (count <= limit matches), bit 25
 * "daddr" (group by destination).
 *
 * Conventions: inlined into the global xfw_probe, whose frame is short:
 * the key and the walk's state live in a per-CPU scratch element; the
 * walk is a bpf_loop callback (one frame, verified once).
 *
 * Includes: common.h, xfw_structs.h, parse.h, ct_structs.h, ct_maps.h,
 * ct_conn.h (the tables and the entry lock), conn_structs.h.
 */
#ifndef XFW_CONNLIMIT_H
#define XFW_CONNLIMIT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"
#include "conn_structs.h"

/* Lists (match, masked address) of all generations at most. */
#define XFW_CONNLIMIT_KEYS 16384
/* Jiffies a connection another CPU added and the tables do not hold yet
 * is kept (nf_conncount's find_or_evict). */
#define XFW_CONNLIMIT_PENDING 2

/* A probe's answer when the packet is to be dropped at once (probe.h). */

/* Fields of the probe's argument. */
#define XFW_CL_INDEX(a) ((a) & 0xff)
#define XFW_CL_BITS(a) (((a) >> 8) & 0xff)
#define XFW_CL_LIMIT(a) (((a) >> 16) & 0xff)
#define XFW_CL_UPTO (1u << 24)
#define XFW_CL_DADDR (1u << 25)


struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct xfw_connlimit_key);
	__type(value, struct xfw_connlimit_list);
	__uint(max_entries, XFW_CONNLIMIT_KEYS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xfw_connlimit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_connlimit_scratch);
	__uint(max_entries, 1);
} xfw_connlimit_sc SEC(".maps");

/* xfw_connlimit_mask sets k's address to p's source (or destination)
 * masked to bits. */
static __always_inline void xfw_connlimit_mask(struct xfw_connlimit_key *k,
					       const struct xfw_pkt *p, __u32 arg)
{
	__u32 bits = XFW_CL_BITS(arg);
	__u64 hi = (arg & XFW_CL_DADDR) ? p->dst_hi : p->src_hi;
	__u64 lo = (arg & XFW_CL_DADDR) ? p->dst_lo : p->src_lo;

	if (p->fam == 0) {
		hi = 0;
		lo &= bits >= 32 ? 0xffffffffULL : bits == 0 ? 0 : (0xffffffffULL << (32 - bits)) & 0xffffffffULL;
	} else {
		hi &= bits >= 64 ? ~0ULL : bits == 0 ? 0 : ~0ULL << (64 - bits);
		lo &= bits >= 128 ? ~0ULL : bits <= 64 ? 0 : ~0ULL << (128 - bits);
	}
	k->hi = hi;
	k->lo = lo;
	k->fam = p->fam;
	k->pad = 0;
}

/* xfw_connlimit_same reports whether two connection keys are equal. */
static __always_inline int xfw_connlimit_same(const struct xfw_ct_key *a, const struct xfw_ct_key *b)
{
	return a->a_hi == b->a_hi && a->a_lo == b->a_lo && a->b_hi == b->b_hi && a->b_lo == b->b_lo &&
	       a->a_port == b->a_port && a->b_port == b->b_port && a->proto == b->proto &&
	       a->fam == b->fam && a->pad == b->pad;
}

/* xfw_connlimit_entry returns c's live entry in the connection tables
 * (expired ones are gone, as nf_conntrack_find skips them), or 0. */
static __always_inline struct xfw_ct_entry *xfw_connlimit_entry(struct xfw_connlimit_conn *c,
								__u64 now)
{
	struct xfw_ct_entry *e = bpf_map_lookup_elem(&xfw_ct, &c->key);

	if (e && (__s64)(e->v.expires - now) > 0)
		return e;
	e = bpf_map_lookup_elem(&xfw_ct_new, &c->key);
	if (e && e->lock != XFW_CT_LOCK_MOVED && (__s64)(e->v.expires - now) > 0)
		return e;
	/* Moved by a promotion meanwhile (ct_track.h xfw_ct_promote). */
	e = bpf_map_lookup_elem(&xfw_ct, &c->key);
	if (e && (__s64)(e->v.expires - now) > 0)
		return e;
	return 0;
}

/* xfw_connlimit_keep says whether connection c stays in its list (1) or
 * leaves it (0), as nf_conncount's walk decides. The packet's connection
 * (sc->own) stays whatever its state and sets sc->found. */
static __always_inline int xfw_connlimit_keep(struct xfw_connlimit_scratch *sc,
					      struct xfw_connlimit_conn *c)
{
	struct xfw_ct_entry *e = xfw_connlimit_entry(c, bpf_jiffies64());
	int pending = 0;

	if (!e) {
		if (c->cpu == sc->cpu || sc->now32 - c->added >= XFW_CONNLIMIT_PENDING)
			return 0; /* gone */
		pending = 1; /* another CPU's, maybe waiting for its verdict */
	}
	if (sc->has_own && xfw_connlimit_same(&c->key, &sc->own)) {
		sc->found = 1;
		return 1;
	}
	if (!pending && e && c->key.proto == IPPROTO_TCP &&
	    (e->v.tcp_state == XFW_TCP_TIME_WAIT || e->v.tcp_state == XFW_TCP_CLOSE))
		return 0; /* closed: not counted any more */
	return 1;
}

/* The list walk's bpf_loop context (on xfw_probe's stack). */
struct xfw_connlimit_walk {
	struct xfw_connlimit_list *l;
	struct xfw_connlimit_scratch *sc;
};

/* xfw_connlimit_step keeps or drops connection i of the list, moving the
 * kept ones to the front in their order. A bpf_loop callback: verified
 * once, not once per connection. */
static long xfw_connlimit_step(__u32 i, struct xfw_connlimit_walk *wk)
{
	struct xfw_connlimit_list *l = wk->l;
	struct xfw_connlimit_scratch *sc = wk->sc;
	__u32 w;

	if (!l || !sc || i >= XFW_CONNLIMIT_SLOTS || i >= l->n)
		return 1;
	/* One copy of i, bounded where the verifier sees it. */
	asm volatile("%[i] &= 63" : [i] "+r"(i)); /* XFW_CONNLIMIT_SLOTS - 1 */
	if (!xfw_connlimit_keep(sc, &l->conn[i]))
		return 0;
	w = sc->kept;
	if (w >= XFW_CONNLIMIT_SLOTS)
		return 1;
	asm volatile("%[w] &= 63" : [w] "+r"(w)); /* XFW_CONNLIMIT_SLOTS - 1 */
	if (w != i)
		__builtin_memcpy(&l->conn[w], &l->conn[i], sizeof(l->conn[0]));
	sc->kept = w + 1;
	return 0;
}

/* xfw_connlimit_probe answers connlimit probe arg of slot for packet p of
 * hook: 1 the match holds, 0 not, XFW_PROBE_HOTDROP. */
static __always_inline int xfw_connlimit_probe(const struct xfw_pkt *p, __u32 hook, __u32 slot,
					       __u32 arg)
{
	struct xfw_connlimit_walk wk;
	struct xfw_ct_scratch *cs;
	__u32 key = 0, count;

	wk.sc = bpf_map_lookup_elem(&xfw_connlimit_sc, &key);
	if (!wk.sc)
		return XFW_PROBE_HOTDROP;
	wk.sc->hook = hook;
	cs = bpf_map_lookup_elem(&xfw_ct_scratch, &wk.sc->hook);
	if (!cs)
		return XFW_PROBE_HOTDROP;
	/* A packet with a connection counts it; tracking left its key (for
	 * RELATED, the connection the error is about) in the scratch. */
	wk.sc->has_own = (p->ct & 7) != XFW_CTS_INVALID && (p->ct & 7) != XFW_CTS_UNTRACKED;
	if (wk.sc->has_own)
		__builtin_memcpy(&wk.sc->own, &cs->key, sizeof(cs->key));
	xfw_connlimit_mask(&wk.sc->key, p, arg);
	wk.sc->key.slot = slot;
	wk.sc->key.index = XFW_CL_INDEX(arg);
	wk.l = bpf_map_lookup_elem(&xfw_connlimit, &wk.sc->key);
	if (!wk.l) {
		if (!wk.sc->has_own) {
			count = 1;
			goto compare;
		}
		wk.sc->empty.lock = 0;
		wk.sc->empty.n = 0;
		bpf_map_update_elem(&xfw_connlimit, &wk.sc->key, &wk.sc->empty, BPF_NOEXIST);
		wk.l = bpf_map_lookup_elem(&xfw_connlimit, &wk.sc->key);
		if (!wk.l)
			return XFW_PROBE_HOTDROP; /* full: the kernel's failed allocation */
	}
	if (!xfw_ct_lock(&wk.l->lock))
		return XFW_PROBE_HOTDROP;
	wk.sc->now32 = (__u32)bpf_jiffies64();
	wk.sc->cpu = bpf_get_smp_processor_id();
	wk.sc->kept = 0;
	wk.sc->found = 0;
	bpf_loop(XFW_CONNLIMIT_SLOTS, xfw_connlimit_step, &wk, 0);
	count = wk.sc->kept;
	if (wk.sc->has_own && !wk.sc->found) {
		/* The packet's connection joins the list (or counts unkept
		 * when the list is full: the count is exact up to SLOTS + 1). */
		if (count < XFW_CONNLIMIT_SLOTS) {
			asm volatile("%[c] &= 63" : [c] "+r"(count)); /* SLOTS - 1 */
			__builtin_memcpy(&wk.l->conn[count].key, &wk.sc->own, sizeof(wk.sc->own));
			wk.l->conn[count].added = wk.sc->now32;
			wk.l->conn[count].cpu = wk.sc->cpu;
			wk.sc->kept = count + 1;
		}
		count++;
	} else if (!wk.sc->has_own) {
		count++;
	}
	wk.l->n = wk.sc->kept;
	xfw_ct_unlock(&wk.l->lock);
compare:
	if (arg & XFW_CL_UPTO)
		return count <= XFW_CL_LIMIT(arg);
	return count > XFW_CL_LIMIT(arg);
}

#endif /* XFW_CONNLIMIT_H */
