/* SPDX-License-Identifier: GPL-2.0 */
/*
 * classify.h — stage 2: linear bit-vector search (LBVS) over the flattened
 * entries of one family's ruleset, and stage 3: counters.
 *
 * Generations. Every per-ruleset map is an inner map of an ARRAY_OF_MAPS
 * outer map (xfw_o_*) with XFW_NSLOTS slots: slot = family * 2 + bank. The
 * control plane builds a new ruleset's inner maps in the family's idle bank,
 * writes that slot's xfw_cfg entry, then flips xfw_bank[family] — one 4-byte
 * write, so a packet sees either the old generation or the new one, never a
 * mix. The programs are loaded (and verified) once per namespace; a ruleset
 * change creates maps only. A packet reads its slot once (xfw_active_slot)
 * and carries it (struct xfw_pending .slot) through every later lookup.
 *
 * Data of one slot (built by internal/compiler, see common.h):
 *   value → class:  o_small (direct arrays), o_bounds (sorted intervals,
 *                   binary search), o_hcls (hash, with a default class)
 *   class → chunks: o_clsch[class * nchunks + k] = chunk id (0 = empty)
 *   chunk:          o_chunks[id] = summary word + 64 words of bits
 *   entries:        o_entries[i] = action of flattened entry i
 *
 * Search: from position pos, AND the chunk of every active field, skip words
 * whose summary bit is clear, take the first set bit ≥ pos. A CONTINUE entry
 * (LOG, jump, RETURN, counters-only rule) counts and moves pos forward to its
 * .next; a terminal entry ends the search; reaching the chain's end means the
 * policy. Positions only grow, so the walk runs under one bpf_loop() of at
 * most nchunks * 65 (words and chunk skips) + CONTINUE entries + 1 steps.
 *
 * Quiescence. After the flip the control plane must know when no packet
 * still reads the old bank (its counters are final, its maps may be
 * rewritten by the next change). Each program run brackets its work with
 * xfw_enter / xfw_leave, which count runs begun and ended per CPU
 * (xfw_inflight); the control plane snapshots the begun counts after the
 * flip and waits until every CPU has ended as many — microseconds, where
 * waiting for an RCU grace period takes 10–25 ms. As x_tables' per-CPU
 * sequence counts, this relies on runs of one CPU not nesting (XDP and
 * TC run with bottom halves off); on PREEMPT_RT the control plane waits
 * for a grace period instead. The begun count is incremented with a
 * fetching atomic, a full barrier: the bank is read after the increment
 * is visible (the control plane fences between its flip and its snapshot).
 *
 * Inner array maps carry BPF_F_INNER_MAP so each generation sizes its own
 * (the verifier then calls the lookup instead of inlining it), and
 * BPF_F_MMAPABLE so the control plane fills them with one memory copy
 * instead of a syscall per batch.
 */
#ifndef XFW_CLASSIFY_H
#define XFW_CLASSIFY_H

#include "common.h"
#include "lpm.h"
#include "parse.h"

/* Pending LOG events per packet; more LOG rules matching one packet than
 * this are counted in stats but not logged. */
#define XFW_MAX_PENDING_LOGS 8

/* Results of a search besides an entry index. */
#define XFW_RES_END 0xffffffffu     /* fell off the chain: policy */
#define XFW_RES_HOTDROP 0xfffffffeu /* hotdropped: DROP, uncounted */

/* xfw_defects returns the packet's XFW_EF_HOTDROP_* bits. A hotdrop either
 * is such a flagged rule entry, or an uncounted DROP entry of no rule that
 * the compiler emits where flags cannot express it exactly. */
static __always_inline __u32 xfw_defects(struct xfw_pkt *p)
{
	__u32 d = 0;

	if (p->proto == XFW_PROTO_ERR)
		d |= XFW_EF_HOTDROP_PROTO;
	if (p->sport == XFW_V_TRUNC || p->icmp == XFW_V_TRUNC ||
	    p->tcpflags == XFW_FLAGS_TRUNC)
		d |= XFW_EF_HOTDROP_L4;
	return d;
}

/* Binary search steps for the address fields: 2^22 interval bounds. */
#define XFW_BSEARCH_STEPS 22
#define XFW_MAX_BOUNDS (1u << XFW_BSEARCH_STEPS)

/* What the hook and xfw_classify share: the generation slot the hook chose
 * (in), the LOG entries the packet met (out; the hook owns the context
 * needed to copy the packet). */
struct xfw_pending {
	__u32 slot;
	__u32 nlogs;
	__u32 logs[XFW_MAX_PENDING_LOGS];
};

struct xfw_cls {
	__u32 cls[XFW_NFIELDS];
	__u32 pos;
	__u32 end;
	__u32 result;
	__u32 l3len;
	__u32 hotdrop; /* XFW_EF_HOTDROP_* defects of the packet */
	__u32 nlogs;
	__u32 logs[XFW_MAX_PENDING_LOGS];
	__u32 chunk;   /* chunk whose summary is cached, or ~0 */
	__u32 slot;    /* generation slot (family * 2 + bank) */
	__u64 summary; /* AND of the active fields' summaries of .chunk */
};

/* De Bruijn table for xfw_ctz64 (magic 0x03f79d71b4ca8b09): a branch-free
 * count of trailing zeros, since BPF has no ctz instruction and a branchy
 * one multiplies the paths the verifier explores. */
static const volatile __u8 xfw_debruijn64[64] = {
	0, 1, 56, 2, 57, 49, 28, 3, 61, 58, 42, 50, 38, 29, 17, 4,
	62, 47, 59, 36, 45, 43, 51, 22, 53, 39, 33, 30, 24, 18, 12, 5,
	63, 55, 48, 27, 60, 41, 37, 16, 46, 35, 44, 21, 52, 32, 23, 11,
	54, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6,
};

/* xfw_ctz64 counts trailing zeros of a non-zero word. */
static __always_inline __u32 xfw_ctz64(__u64 x)
{
	return xfw_debruijn64[((x & -x) * 0x03f79d71b4ca8b09ULL) >> 58];
}

/* Statistics slots (stats map, per CPU). */
enum xfw_stat {
	XFW_STAT_LOG_LOST = 0, /* LOG events not sent (ring full, too many) */
	XFW_STAT_LOOP_EXHAUSTED = 1,
	XFW_NSTATS = 4,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_NSTATS);
} xfw_stats SEC(".maps");

static __always_inline void xfw_stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&xfw_stats, &idx);

	if (v)
		*v += 1;
}

/* Inner map templates: the loader creates one of each per generation with
 * the generation's own max_entries. Sizes, not BTF types: clang emits a
 * struct reached only through pointers as a bare declaration, which has no
 * size. */
#define XFW_INNER_ARRAY(name, vtype)                                               \
struct name {                                                                      \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__uint(key_size, sizeof(__u32));                                           \
	__uint(value_size, sizeof(vtype));                                         \
	__uint(max_entries, 1);                                                    \
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);                       \
}
XFW_INNER_ARRAY(xfw_small_m, __u32);
XFW_INNER_ARRAY(xfw_bounds_m, struct xfw_bound);
XFW_INNER_ARRAY(xfw_clsch_m, __u32);
XFW_INNER_ARRAY(xfw_chunks_m, struct xfw_chunk);
XFW_INNER_ARRAY(xfw_entries_m, struct xfw_entry);
XFW_INNER_ARRAY(xfw_logcfg_m, struct xfw_logcfg);
struct xfw_hcls_m {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, sizeof(struct xfw_hkey));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 1);
};
/* Counters: per CPU by hand, since PERCPU_ARRAY refuses BPF_F_INNER_MAP.
 * Element cpu * ncounters + counter: each CPU's counters are contiguous, so
 * CPUs do not share cache lines, and no atomic operation is needed (XDP and
 * TC programs are not migrated while they run). */
XFW_INNER_ARRAY(xfw_counters_m, struct xfw_counter);

/* A set condition's LPM tables (bpf/lpm.h): direct entries and ranges, one
 * inner map each, __u64 words. */
XFW_INNER_ARRAY(xfw_lpm_m, __u64);

#define XFW_OUTER(name, inner)                                                     \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                  \
	__type(key, __u32);                                                        \
	__uint(max_entries, XFW_NSLOTS);                                           \
	__array(values, struct inner);                                             \
} name SEC(".maps")
XFW_OUTER(xfw_o_small, xfw_small_m);
XFW_OUTER(xfw_o_bounds, xfw_bounds_m);
XFW_OUTER(xfw_o_hcls, xfw_hcls_m);
XFW_OUTER(xfw_o_clsch, xfw_clsch_m);
XFW_OUTER(xfw_o_chunks, xfw_chunks_m);
XFW_OUTER(xfw_o_entries, xfw_entries_m);
XFW_OUTER(xfw_o_counters, xfw_counters_m);
XFW_OUTER(xfw_o_logcfg, xfw_logcfg_m);
/* Set entry counters: shared by the CPUs and updated with atomic adds, as
 * the kernel's ipset counters are (one element is rarely hit by several
 * CPUs at once, and a set may hold millions of elements: per-CPU copies
 * would multiply that). The counters of a list:set's entries are the
 * generation's (xfw_o_setctr, by slot; xfw_family_cfg.setlk_lctr); those of
 * a set's elements belong to its hash table (xfw_o_setectr, by lookup, the
 * element at xfw_setval.ctr - 1) and go with it when a new generation
 * takes the table over unchanged. The control plane carries counts over
 * to rebuilt tables (atomic adds through its memory mapping) and folds
 * them into the stored sets. */
XFW_INNER_ARRAY(xfw_setctr_m, struct xfw_counter);
XFW_OUTER(xfw_o_setctr, xfw_setctr_m);

/* The set lookups' tables: element slot * XFW_MAX_SETLOOKUPS + lookup. */
#define XFW_SET_OUTER(name, inner)                                                 \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                  \
	__type(key, __u32);                                                        \
	__uint(max_entries, XFW_NSLOTS * XFW_MAX_SETLOOKUPS);                      \
	__array(values, struct inner);                                             \
} name SEC(".maps")
XFW_SET_OUTER(xfw_o_setdir, xfw_lpm_m);
XFW_SET_OUTER(xfw_o_setrng, xfw_lpm_m);

/* A hash set table (kinds other than XFW_SETK_DXR): allocated per element
 * (BPF_F_NO_PREALLOC), so a set created with a large maxelem costs what it
 * holds, and an update replaces an element as a whole (a lookup sees the
 * old value or the new one). Each generation sizes its own. */
struct xfw_sethash_m {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, sizeof(struct xfw_setkey));
	__uint(value_size, sizeof(struct xfw_setval));
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
};
XFW_SET_OUTER(xfw_o_sethash, xfw_sethash_m);
XFW_SET_OUTER(xfw_o_setectr, xfw_setctr_m);

/* Per-slot ruleset configuration (struct xfw_family_cfg), written by the
 * control plane before it flips the bank. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_family_cfg);
	__uint(max_entries, XFW_NSLOTS);
} xfw_cfg SEC(".maps");

/* Active bank (0 or 1) of each family. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 2);
} xfw_bank SEC(".maps");

/* Program runs begun and ended on one CPU (see Quiescence above). */
struct xfw_inflight {
	__u64 begun;
	__u64 ended;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_inflight);
	__uint(max_entries, 1);
} xfw_inflight SEC(".maps");

/* xfw_enter counts a program run as begun, before it reads the bank; the
 * caller passes the result to xfw_leave once it no longer reads the slot's
 * maps. */
static __always_inline struct xfw_inflight *xfw_enter(void)
{
	struct xfw_inflight *f;
	__u32 zero = 0;

	f = bpf_map_lookup_elem(&xfw_inflight, &zero);
	if (f && __sync_fetch_and_add(&f->begun, 1) == (__u64)-1)
		f->ended = 0; /* unreachable wrap; keeps the fetch (a barrier) */
	return f;
}

static __always_inline void xfw_leave(struct xfw_inflight *f)
{
	if (f)
		__sync_fetch_and_add(&f->ended, 1);
}

/* xfw_active_slot returns the generation slot of family fi (0 IPv4, 1
 * IPv6), or XFW_NO_SLOT when the family has no ruleset. */
static __always_inline __u32 xfw_active_slot(__u32 fi)
{
	struct xfw_family_cfg *c;
	__u32 *bank, slot;

	bank = bpf_map_lookup_elem(&xfw_bank, &fi);
	if (!bank)
		return XFW_NO_SLOT;
	slot = fi * 2 + (*bank & 1);
	c = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!c || !c->enabled)
		return XFW_NO_SLOT;
	return slot;
}

/* xfw_inner returns slot's inner map of outer map o, or NULL. */
static __always_inline void *xfw_inner(void *o, __u32 slot)
{
	return bpf_map_lookup_elem(o, &slot);
}

static __always_inline void xfw_count(__u32 slot, __u32 rule, __u32 bytes)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	void *m = xfw_inner(&xfw_o_counters, slot);
	struct xfw_counter *c;
	__u32 key;

	if (!fc || !m || rule >= fc->ncounters)
		return;
	key = bpf_get_smp_processor_id() * fc->ncounters + rule;
	c = bpf_map_lookup_elem(m, &key);
	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

static __always_inline int xfw_small_cls(struct xfw_cls *st, struct xfw_family_cfg *fc,
					 void *small, __u32 f, __u32 value)
{
	__u32 key, *c;

	if (f >= XFW_NFIELDS)
		return 0;
	key = fc->small_base[f] + value;
	c = bpf_map_lookup_elem(small, &key);
	if (!c || !*c)
		return 0;
	st->cls[f] = *c;
	return 1;
}

static __always_inline int xfw_addr_cls(struct xfw_cls *st, struct xfw_family_cfg *fc,
					__u32 f, __u32 a, __u64 hi, __u64 lo)
{
	void *bounds = xfw_inner(&xfw_o_bounds, st->slot);
	__u32 base = fc->addr_base[a & (XFW_NADDR - 1)];
	__u32 l = 0, h = fc->addr_count[a & (XFW_NADDR - 1)] - 1, key;
	struct xfw_bound *b;

	if (!bounds)
		return 0;
	for (int i = 0; i < XFW_BSEARCH_STEPS; i++) {
		__u32 mid;

		if (l >= h)
			break;
		mid = l + (h - l + 1) / 2;
		key = base + mid;
		b = bpf_map_lookup_elem(bounds, &key);
		if (!b)
			return 0;
		if (b->hi < hi || (b->hi == hi && b->lo <= lo))
			l = mid;
		else
			h = mid - 1;
	}
	key = base + l;
	b = bpf_map_lookup_elem(bounds, &key);
	if (!b || !b->cls)
		return 0;
	st->cls[f] = b->cls;
	return 1;
}

static __always_inline int xfw_hash_cls(struct xfw_cls *st, struct xfw_family_cfg *fc,
					void *hcls, __u32 f, __u64 value)
{
	struct xfw_hkey k = { .field = f, .pad = 0, .value = value };
	__u32 *c = bpf_map_lookup_elem(hcls, &k);
	__u32 cls;

	if (f >= XFW_NFIELDS)
		return 0;
	cls = c ? *c : fc->default_cls[f];
	if (!cls)
		return 0;
	st->cls[f] = cls;
	return 1;
}

/* xfw_mask64 returns the mask of the first n (0-64) bits of a word. */
static __always_inline __u64 xfw_mask64(__u32 n)
{
	return n == 0 ? 0 : ~0ULL << (64 - (n & 63 ? n & 63 : 64));
}

/* xfw_set_port finds the protocol and port ipset's set types see in p
 * (ip_set_get_ip4_port, ip_set_get_ip6_port; tcp_udp: bitmap:port's
 * ip_set_get_ip_port, TCP and UDP only): the port of the direction for
 * TCP, UDP, UDPLite and SCTP, type << 8 | code for ICMP and ICMPv6, 0 for
 * other protocols (DCCP too). Returns 0 when the kernel's test fails:
 * protocol 0 or cut short, a header that is not whole, an IPv4 non-first
 * fragment of a port protocol, any IPv6 non-first fragment, IPv6 "no next
 * header". */
static __always_inline int xfw_set_port(struct xfw_pkt *p, int dst, int tcp_udp,
					__u16 *port, __u8 *proto)
{
	__u32 pr = p->proto, v;

	if (pr == 0 || pr > 255)
		return 0;
	if (tcp_udp && pr != IPPROTO_TCP && pr != IPPROTO_UDP)
		return 0;
	*proto = (__u8)pr;
	*port = 0;
	if (p->frag) {
		if (p->fam)
			return 0; /* ipv6_skip_exthdr: offset != 0 */
		switch (pr) {
		case IPPROTO_TCP:
		case IPPROTO_SCTP:
		case IPPROTO_UDP:
		case IPPROTO_UDPLITE:
		case IPPROTO_ICMP:
			return 0;
		}
		return 1;
	}
	switch (pr) {
	case IPPROTO_SCTP:
		/* get_port reads a whole 12-byte SCTP header (the parser's
		 * ports need 4). */
		if (p->l4_off == 0 || p->l4_end < p->l4_off + 12)
			return 0;
		/* fall through */
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		v = dst ? p->dport : p->sport;
		if (v > 0xffff)
			return 0;
		*port = (__u16)v;
		return 1;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (p->icmp > 0xffff)
			return 0;
		*port = (__u16)p->icmp;
		return 1;
	case 59: /* IPv6 "no next header": ipv6_skip_exthdr fails */
		return !p->fam;
	}
	return 1;
}

/* Bits of xfw_set_hlookup's result that hold the answer (the counter
 * index is above them). */
#define XFW_SET_ANSWER_BITS 2

/* Prefix-length words of a hash set table's meta keys: 129 bits. */
#define XFW_SET_PLEN_WORDS 3

/* State of one hash set lookup's walk over prefix lengths (bpf_loop). */
struct xfw_hwalk {
	struct xfw_setkey key;
	__u64 hi, lo;         /* the address, unmasked */
	__u64 words[XFW_SET_PLEN_WORDS]; /* present prefix lengths */
	__u64 now;            /* bpf_ktime_get_ns(), 0 until needed */
	__u32 idx;            /* the table's element of xfw_o_sethash */
	__u32 maxplen;        /* 32 or 128 (0: no address) */
	__u32 answer;
	__u32 ctr;            /* the answering entry's xfw_setval.ctr */
	__u32 next;           /* 1 + the longest prefix length left to try
			       * (0: none) */
	__u32 pad;
};

/* The walk's state lives in a per-CPU scratch element, not on the stack:
 * the deepest call chain (program → xfw_classify → xfw_set_bits →
 * bpf_loop → xfw_hwalk_step) must fit in 512 bytes. Runs of one CPU
 * do not nest (see Quiescence above). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_hwalk);
	__uint(max_entries, 1);
} xfw_hwalk_scratch SEC(".maps");

/* xfw_hwalk_expired says whether entry v has timed out
 * (ip_set_timeout_expired: gone once its time has come; a shorter prefix
 * may still answer, as in mtype_test_cidrs). */
static __always_inline int xfw_hwalk_expired(struct xfw_hwalk *c, struct xfw_setval *v)
{
	if (!v->expires)
		return 0;
	if (!c->now)
		c->now = bpf_ktime_get_ns();
	return c->now >= v->expires;
}

/* xfw_msb64 returns the index of the highest set bit of a non-zero word
 * (branch-free: the bits below it are smeared, the top one isolated). */
static __always_inline __u32 xfw_msb64(__u64 x)
{
	x |= x >> 1;
	x |= x >> 2;
	x |= x >> 4;
	x |= x >> 8;
	x |= x >> 16;
	x |= x >> 32;
	return xfw_ctz64(x ^ (x >> 1));
}

/* xfw_hwalk_next returns the longest prefix length present below c->next
 * (c->next ≥ 1), or ~0 when none is: the walk visits present lengths only
 * (a miss in a hash:ip set tries /32 alone, not 33 lengths). */
static __always_inline __u32 xfw_hwalk_next(struct xfw_hwalk *c)
{
	__u32 top = c->next - 1, base;
	__u64 w;

	for (int k = XFW_SET_PLEN_WORDS - 1; k >= 0; k--) {
		base = (__u32)k * 64;
		if (base > top)
			continue;
		w = c->words[k];
		if (top - base < 63)
			w &= ~0ULL >> (63 - (top - base));
		if (w)
			return base + xfw_msb64(w);
	}
	return ~0u;
}

/* xfw_hwalk_step tries the next present prefix length: 1 stops the walk
 * (an answer, or none left). */
static long xfw_hwalk_step(__u32 i, void *unused)
{
	struct xfw_setval *v;
	struct xfw_hwalk *c;
	__u32 plen, zero = 0;
	void *m;

	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!c || !c->next)
		return 1;
	plen = xfw_hwalk_next(c);
	if (plen > c->maxplen)
		return 1;
	c->next = plen;
	c->key.plen = plen;
	if (c->maxplen <= 32) {
		c->key.hi = 0;
		c->key.lo = plen ? c->lo & (0xffffffffULL << (32 - plen)) & 0xffffffffULL : 0;
	} else if (plen <= 64) {
		c->key.hi = c->hi & xfw_mask64(plen);
		c->key.lo = 0;
	} else {
		c->key.hi = c->hi;
		c->key.lo = c->lo & xfw_mask64(plen - 64);
	}
	m = bpf_map_lookup_elem(&xfw_o_sethash, &c->idx);
	if (!m)
		return 1;
	v = bpf_map_lookup_elem(m, &c->key);
	if (v && !xfw_hwalk_expired(c, v)) {
		c->answer = v->answer;
		c->ctr = v->ctr;
		return 1;
	}
	if (c->key.ifindex) {
		/* hash:net,iface: another entry of this network ends the
		 * walk (see struct xfw_setval). */
		__u32 ifi = c->key.ifindex;

		c->key.ifindex = 0;
		v = bpf_map_lookup_elem(m, &c->key);
		c->key.ifindex = ifi;
		if (v && !xfw_hwalk_expired(c, v) && v->aux != ifi)
			return 1;
	}
	return 0;
}

/* What a packet's set lookups found, for the counting probes the
 * classification meets later (xfw_set_count): per hash lookup k, the
 * answering entry's counter (xfw_setval.ctr) above XFW_SET_ANSWER_BITS and
 * its answer below (0: nothing found). xfw_set_bits clears it for every
 * packet before its lookups; runs of one CPU do not nest (see Quiescence
 * above). Lookups of a condition that counts are hash lookups: a DXR
 * table's answer is not recorded. */
struct xfw_sethits {
	__u32 hit[XFW_MAX_SETLOOKUPS];
	/* Counting probes met by the walk, per set condition: without and
	 * with "! --update-subcounters" (xfw_set_probe). */
	__u16 probes[XFW_MAX_SETCONDS];
	__u16 probes_nosub[XFW_MAX_SETCONDS];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_sethits);
	__uint(max_entries, 1);
} xfw_sethits_scratch SEC(".maps");

/* xfw_set_hlookup answers lookup desc (struct xfw_setlk as maxplen << 24 |
 * kind << 16 | flags << 8) in the hash set table at outer index idx, as the
 * kernel's hash types test an element (mtype_test, mtype_test_cidrs): the
 * present prefix lengths of the address are tried from the longest, an
 * expired entry is skipped as if absent, the first live entry decides.
 * Returns XFW_SET_MEMBER, XFW_SET_NOMATCH or 0, with the answering entry's
 * counter (xfw_setval.ctr) above XFW_SET_ANSWER_BITS. Inlined in xfw_set_bits
 * (a call frame more would pass the 512-byte stack); the walk is a
 * bpf_loop, its step verified once. */
static __always_inline __u32 xfw_set_hlookup(struct xfw_pkt *p, __u32 idx, __u32 desc,
					      __u32 iif, __u32 oif)
{
	struct xfw_sethits *hits;
	struct xfw_hwalk *c;
	struct xfw_setval *v;
	__u32 kind = (desc >> 16) & 0xff, flags = (desc >> 8) & 0xff;
	__u32 ifindex = 0, zero = 0;
	__u16 port = 0;
	__u8 proto = 0;
	void *m;

	if (!p || idx >= XFW_NSLOTS * XFW_MAX_SETLOOKUPS)
		return 0;
	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!c)
		return 0;
	__builtin_memset(c, 0, sizeof(*c));
	c->idx = idx;
	c->maxplen = desc >> 24;
	if (c->maxplen > 128)
		return 0;
	m = bpf_map_lookup_elem(&xfw_o_sethash, &idx);
	if (!m)
		return 0;
	if (kind & (XFW_SETK_PORT | XFW_SETK_TCPUDP)) {
		/* The port is the first dimension of bitmap:port, else the
		 * second. */
		int dst = (kind & XFW_SETK_ADDR) ? !!(flags & XFW_SETLK_DST2)
						 : !!(flags & XFW_SETLK_DST1);

		if (!xfw_set_port(p, dst, kind & XFW_SETK_TCPUDP, &port, &proto))
			return 0;
		if (!(kind & XFW_SETK_PORT))
			proto = 0;
	}
	if (kind & XFW_SETK_IFACE) {
		/* The input interface for src, the output one for dst; none
		 * (OUTPUT's input, INPUT's output): no match. */
		ifindex = (flags & XFW_SETLK_DST2) ? oif : iif;
		if (!ifindex)
			return 0;
	}
	if (kind & XFW_SETK_ADDR) {
		if (flags & XFW_SETLK_DST1) {
			c->hi = p->dst_hi;
			c->lo = p->dst_lo;
		} else {
			c->hi = p->src_hi;
			c->lo = p->src_lo;
		}
	}
	c->key.plen = XFW_SETKEY_META;
	c->key.port = 0;
	v = bpf_map_lookup_elem(m, &c->key);
	if (v)
		c->words[0] = v->expires;
	if (c->maxplen >= 64) {
		c->key.port = 1;
		v = bpf_map_lookup_elem(m, &c->key);
		if (v)
			c->words[1] = v->expires;
		c->key.port = 2;
		v = bpf_map_lookup_elem(m, &c->key);
		if (v)
			c->words[2] = v->expires;
	}
	c->key.port = port;
	c->key.proto = proto;
	c->key.ifindex = ifindex;
	c->next = c->maxplen + 1;
	/* 129 prefix lengths at most: /128 to /0. */
	bpf_loop(129, xfw_hwalk_step, NULL, 0);
	/* kind and flags are done with: reused for the answer and the hit
	 * (a new variable would grow the frame, which is at its limit). */
	kind = c->answer;
	flags = c->ctr << XFW_SET_ANSWER_BITS | kind;
	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (hits)
		hits->hit[idx & (XFW_MAX_SETLOOKUPS - 1)] = flags;
	return kind;
}


/* xfw_set_bits returns the packet's -m set results in slot: bit k set when
 * set condition k matches, as the kernel's set match (ip_set_test) answers
 * before any "!". Each lookup answers one set (a list:set condition has one
 * per member, OR-ed into its bit, as list_set_ktest tests its members in
 * turn): in a DXR table (hash:ip, hash:net without timeouts) the longest
 * matching prefix decides; in a hash table, xfw_set_hlookup. A nomatch
 * entry answers no, a plain one yes, and --return-nomatch swaps the two
 * (not in the set: no either way). A global function, verified once;
 * xfw_classify calls it before xfw_resolve, so its stack is gone before
 * the bit-vector walk. */
__attribute__((noinline)) __u32 xfw_set_bits(struct xfw_pkt *p, __u32 slot, __u32 iif, __u32 oif)
{
	struct xfw_family_cfg *fc;
	__u32 bits = 0, n, idx, v, zero = 0;
	struct xfw_sethits *hits;
	struct xfw_setlk lk;
	void *dir, *rng;

	if (!p || slot >= XFW_NSLOTS)
		return 0;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (!fc || !hits)
		return 0;
	__builtin_memset(hits, 0, sizeof(*hits));
	n = fc->nsetlk;
	for (__u32 k = 0; k < XFW_MAX_SETLOOKUPS; k++) {
		if (k >= n)
			break;
		idx = slot * XFW_MAX_SETLOOKUPS + k;
		lk = fc->setlk[k];
		if (lk.kind != XFW_SETK_DXR) {
			v = xfw_set_hlookup(p, idx, (__u32)lk.maxplen << 24 | (__u32)lk.kind << 16 |
						     (__u32)lk.flags << 8, iif, oif);
		} else {
			dir = xfw_inner(&xfw_o_setdir, idx);
			rng = xfw_inner(&xfw_o_setrng, idx);
			if (!dir || !rng)
				continue;
			if (p->fam == 0)
				v = xfw_lpm4_lookup(dir, rng, (__u32)((lk.flags & XFW_SETLK_DST1) ? p->dst_lo : p->src_lo));
			else if (lk.flags & XFW_SETLK_DST1)
				v = xfw_lpm6_lookup(dir, rng, p->dst_hi, p->dst_lo);
			else
				v = xfw_lpm6_lookup(dir, rng, p->src_hi, p->src_lo);
		}
		/* --return-nomatch reverses the answer of an element of a set
		 * type with nomatch entries: a nomatch one matches, a plain one
		 * does not (ip_set_test; found by tests/e2e and xfw difftest
		 * against the kernel). The flag is set only for such sets. */
		if (lk.flags & XFW_SETLK_RETURN_NOMATCH)
			v = v == XFW_SET_NOMATCH;
		else
			v = v == XFW_SET_MEMBER;
		bits |= v << (lk.bit & (XFW_MAX_SETCONDS - 1));
	}
	return bits;
}

/* xfw_setctr_add counts a packet of len bytes n times on set counter ctr
 * (1 + its index; 0 counts nothing) of counters m (an array map, which
 * bounds the index). */
static __always_inline void xfw_setctr_add(void *m, __u32 ctr, __u32 n, __u32 len)
{
	struct xfw_counter *c;
	__u32 key;

	if (!m || !ctr)
		return;
	key = ctr - 1;
	c = bpf_map_lookup_elem(m, &key);
	if (c && n) {
		__sync_fetch_and_add(&c->packets, n);
		__sync_fetch_and_add(&c->bytes, (__u64)n * len);
	}
}

/* xfw_set_probe records a counting probe (XFW_EF_SETCOUNT, aux its .aux)
 * the walk met: the packet reached a rule's set match of condition aux &
 * XFW_SETCNT_COND. xfw_set_count applies them once the walk is over. A
 * global function with a small frame: it is called from the walk's step,
 * the deepest call chain (512 bytes of stack in all). Saturates at 65535
 * probes of one condition met by one packet (that many rules testing one
 * set condition, all reached: beyond any real ruleset). */
__attribute__((noinline)) int xfw_set_probe(__u32 aux)
{
	struct xfw_sethits *hits;
	__u32 zero = 0, c = aux & (XFW_MAX_SETCONDS - 1);
	__u16 *n;

	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (!hits)
		return 0;
	n = (aux & XFW_SETCNT_SKIPSUB) ? &hits->probes_nosub[c] : &hits->probes[c];
	if (*n < 0xffff)
		*n += 1;
	return 0;
}

/* xfw_set_count counts the packet (len bytes) on the set entries its
 * lookups found, once per counting probe the walk met, as the kernel's set
 * match updates the counters of the element it finds each time a rule's
 * match is evaluated (ip_set_match_extensions): the element found, even a
 * nomatch one, even when "!" then fails the rule; for a list:set, the
 * members are tested in order up to the first that matches
 * (list_set_ktest), each member's found element counted unless "!
 * --update-subcounters", and the list's own entry of the member that
 * matched counted. A global function, verified once. */
__attribute__((noinline)) int xfw_set_count(__u32 slot, __u32 len)
{
	struct xfw_family_cfg *fc;
	struct xfw_sethits *hits;
	__u32 zero = 0, c, all, sub, hit, matched, idx, done = 0;

	if (slot >= XFW_NSLOTS)
		return 0;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (!fc || !hits)
		return 0;
	for (__u32 k = 0; k < XFW_MAX_SETLOOKUPS; k++) {
		if (k >= fc->nsetlk)
			break;
		c = fc->setlk[k].bit & (XFW_MAX_SETCONDS - 1);
		sub = hits->probes[c];
		all = sub + hits->probes_nosub[c];
		/* A later member of a list is tested only while no earlier
		 * one matched. */
		if (!all || ((done >> c) & 1))
			continue;
		if (!(fc->setlk[k].flags & XFW_SETLK_MEMBER))
			sub = all;
		hit = hits->hit[k];
		if (hit >> XFW_SET_ANSWER_BITS) {
			idx = slot * XFW_MAX_SETLOOKUPS + k;
			xfw_setctr_add(bpf_map_lookup_elem(&xfw_o_setectr, &idx),
				       hit >> XFW_SET_ANSWER_BITS, sub, len);
		}
		/* As xfw_set_bits answers. */
		hit &= (1u << XFW_SET_ANSWER_BITS) - 1;
		if (fc->setlk[k].flags & XFW_SETLK_RETURN_NOMATCH)
			matched = hit == XFW_SET_NOMATCH;
		else
			matched = hit == XFW_SET_MEMBER;
		if (matched) {
			if (fc->setlk_lctr[k])
				xfw_setctr_add(xfw_inner(&xfw_o_setctr, slot), fc->setlk_lctr[k], all, len);
			done |= 1u << c;
		}
	}
	return 0;
}

/* xfw_resolve maps every active field to its class; 0 when some field's
 * class is empty, so no entry can match (early break). A global function:
 * its temporaries stay off the deepest call chain's stack (XDP program →
 * xfw_classify → bpf_loop callback → xfw_and_fields), which must fit in 512
 * bytes. */
__attribute__((noinline)) int xfw_resolve(struct xfw_pkt *p, __u32 iif, __u32 oif,
					  struct xfw_cls *st, __u32 setbits)
{
	struct xfw_family_cfg *fc;
	void *small, *hcls;
	__u32 act, slot;

	if (!p || !st)
		return 0;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	small = xfw_inner(&xfw_o_small, slot);
	hcls = xfw_inner(&xfw_o_hcls, slot);
	if (!fc || !small || !hcls)
		return 0;
	act = fc->active;
	if ((act & (1u << XFW_F_PROTO)) && !xfw_small_cls(st, fc, small, XFW_F_PROTO, p->proto))
		return 0;
	if ((act & (1u << XFW_F_DPORT)) && !xfw_small_cls(st, fc, small, XFW_F_DPORT, p->dport))
		return 0;
	if ((act & (1u << XFW_F_SPORT)) && !xfw_small_cls(st, fc, small, XFW_F_SPORT, p->sport))
		return 0;
	if ((act & (1u << XFW_F_TCPFLAGS)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_TCPFLAGS, p->tcpflags))
		return 0;
	if ((act & (1u << XFW_F_ICMP)) && !xfw_small_cls(st, fc, small, XFW_F_ICMP, p->icmp))
		return 0;
	if ((act & (1u << XFW_F_FRAG)) && !xfw_small_cls(st, fc, small, XFW_F_FRAG, p->frag))
		return 0;
	if ((act & (1u << XFW_F_LEN)) && !xfw_small_cls(st, fc, small, XFW_F_LEN, p->lenm))
		return 0;
	if ((act & (1u << XFW_F_TTL)) && !xfw_small_cls(st, fc, small, XFW_F_TTL, p->ttl))
		return 0;
	if ((act & (1u << XFW_F_IIF)) && !xfw_hash_cls(st, fc, hcls, XFW_F_IIF, iif))
		return 0;
	if ((act & (1u << XFW_F_OIF)) && !xfw_hash_cls(st, fc, hcls, XFW_F_OIF, oif))
		return 0;
	if ((act & (1u << XFW_F_MAC)) && !xfw_hash_cls(st, fc, hcls, XFW_F_MAC, p->mac_src))
		return 0;
	if ((act & (1u << XFW_F_SRC)) && !xfw_addr_cls(st, fc, XFW_F_SRC, 0, p->src_hi, p->src_lo))
		return 0;
	if ((act & (1u << XFW_F_DST)) && !xfw_addr_cls(st, fc, XFW_F_DST, 1, p->dst_hi, p->dst_lo))
		return 0;
	if ((act & (1u << XFW_F_SETS)) && !xfw_small_cls(st, fc, small, XFW_F_SETS, setbits))
		return 0;
	if ((act & (1u << XFW_F_CT)) && !xfw_small_cls(st, fc, small, XFW_F_CT, p->ct))
		return 0;
	if ((act & (1u << XFW_F_CTOSPORT)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_CTOSPORT, p->ct_osport))
		return 0;
	if ((act & (1u << XFW_F_CTODPORT)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_CTODPORT, p->ct_odport))
		return 0;
	if ((act & (1u << XFW_F_CTRSPORT)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_CTRSPORT, p->ct_rsport))
		return 0;
	if ((act & (1u << XFW_F_CTRDPORT)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_CTRDPORT, p->ct_rdport))
		return 0;
	if ((act & (1u << XFW_F_CTOSRC)) &&
	    !xfw_addr_cls(st, fc, XFW_F_CTOSRC, 2, p->ct_osrc_hi, p->ct_osrc_lo))
		return 0;
	if ((act & (1u << XFW_F_CTODST)) &&
	    !xfw_addr_cls(st, fc, XFW_F_CTODST, 3, p->ct_odst_hi, p->ct_odst_lo))
		return 0;
	return 1;
}

/* xfw_chunk_of returns the chunk of field f for chunk index c, NULL when it
 * is empty. */
static __always_inline struct xfw_chunk *xfw_chunk_of(struct xfw_cls *st, void *clsch,
						      void *chunks, __u32 nchunks, __u32 f,
						      __u32 c)
{
	__u32 key = st->cls[f] * nchunks + c;
	__u32 *id = bpf_map_lookup_elem(clsch, &key);

	if (!id || !*id)
		return NULL;
	return bpf_map_lookup_elem(chunks, id);
}

/* XFW_SUMMARY as the word index asks xfw_and_fields for the summaries. */
#define XFW_SUMMARY XFW_CHUNK_WORDS

/* xfw_and_fields returns the AND, over the active fields, of word j of
 * chunk c of each field's class (j == XFW_SUMMARY: the chunk summaries);
 * 0 when some field's chunk is empty. A global function, verified once on
 * its own: inlined into the bpf_loop callback, its per-field branches
 * multiply with the callback's and the verifier gives up. */
__attribute__((noinline)) __u64 xfw_and_fields(struct xfw_cls *st, __u32 c, __u32 j)
{
	struct xfw_family_cfg *fc;
	void *clsch, *chunks;
	struct xfw_chunk *ch;
	__u64 acc = ~0ULL;
	__u32 f, slot;

	if (!st)
		return 0;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	clsch = xfw_inner(&xfw_o_clsch, slot);
	chunks = xfw_inner(&xfw_o_chunks, slot);
	if (!fc || !clsch || !chunks)
		return 0;
	for (__u32 i = 0; i < XFW_NFIELDS; i++) {
		if (i >= fc->nfields)
			break;
		f = fc->fields[i];
		if (f >= XFW_NFIELDS)
			return 0;
		ch = xfw_chunk_of(st, clsch, chunks, fc->nchunks, f, c);
		if (!ch)
			return 0;
		if (j >= XFW_SUMMARY)
			acc &= ch->summary;
		else
			acc &= ch->words[j & (XFW_CHUNK_WORDS - 1)];
	}
	return acc;
}

/* xfw_step is one bpf_loop iteration: it examines one candidate word at
 * st->pos (the AND of the active fields' chunk summaries says which words
 * can hold a match) and either moves pos forward, acts on a CONTINUE entry
 * and moves on, or stops at a terminal entry or the chain's end. One word
 * per iteration keeps the callback loop-free for the verifier. */
static long xfw_step(__u32 iter, struct xfw_cls *st)
{
	__u32 pos = st->pos, c, j, e;
	__u64 summ, w;
	struct xfw_entry *ent;
	void *entries;

	if (pos >= st->end) {
		st->result = XFW_RES_END;
		return 1;
	}
	c = pos / XFW_CHUNK_BITS;
	if (c != st->chunk) {
		st->chunk = c;
		st->summary = xfw_and_fields(st, c, XFW_SUMMARY);
	}
	j = (pos % XFW_CHUNK_BITS) / 64;
	summ = st->summary & (~0ULL << j);
	if (!summ) {
		st->pos = (c + 1) * XFW_CHUNK_BITS;
		return 0;
	}
	if (xfw_ctz64(summ) != j) {
		/* Skip to the next word that can match. */
		st->pos = c * XFW_CHUNK_BITS + xfw_ctz64(summ) * 64;
		return 0;
	}
	w = (~0ULL << (pos % 64)) & xfw_and_fields(st, c, j);
	if (!w) {
		st->pos = c * XFW_CHUNK_BITS + (j + 1) * 64;
		return 0;
	}
	e = c * XFW_CHUNK_BITS + j * 64 + xfw_ctz64(w);
	if (e >= st->end) {
		st->result = XFW_RES_END;
		return 1;
	}
	entries = xfw_inner(&xfw_o_entries, st->slot);
	if (!entries) {
		st->result = XFW_RES_END;
		return 1;
	}
	ent = bpf_map_lookup_elem(entries, &e);
	if (!ent) {
		st->result = XFW_RES_END;
		return 1;
	}
	if (ent->flags & st->hotdrop) {
		st->result = XFW_RES_HOTDROP;
		return 1;
	}
	if (ent->action != XFW_ACT_CONTINUE) {
		st->result = e;
		return 1;
	}
	if (ent->flags & XFW_EF_SETCOUNT)
		xfw_set_probe(ent->aux);
	if (ent->flags & XFW_EF_COUNT)
		xfw_count(st->slot, ent->rule, st->l3len);
	if (ent->flags & XFW_EF_LOG) {
		if (st->nlogs < XFW_MAX_PENDING_LOGS)
			st->logs[st->nlogs & (XFW_MAX_PENDING_LOGS - 1)] = e;
		else
			xfw_stat_inc(XFW_STAT_LOG_LOST);
		st->nlogs++;
	}
	/* The compiler guarantees next > e: the walk only moves forward. */
	st->pos = ent->next;
	return 0;
}

/* xfw_classify runs chain `chain` of generation slot ps->slot for the packet
 * and returns the terminal entry's index, XFW_RES_END for the policy or
 * XFW_RES_HOTDROP. Counters of the terminal entry and the policy are updated
 * here. It is a global (non-inlined) function so the verifier checks it
 * once, not once per path of the parser before it. */
__attribute__((noinline)) __u32 xfw_classify(struct xfw_pkt *p, __u32 chain, __u32 iif,
					     __u32 oif, struct xfw_pending *ps)
{
	struct xfw_family_cfg *fc;
	struct xfw_entry *ent;
	struct xfw_cls local = {};
	void *entries;
	__u32 res, slot;

	/* A global function: verified once, on its own, with these checks. */
	if (!p || !ps)
		return XFW_RES_END;
	ps->nlogs = 0;
	slot = ps->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc)
		return XFW_RES_END;
	/* bpf_loop wants its context on this function's stack. */
	local.slot = slot;
	local.l3len = p->l3len;
	local.hotdrop = xfw_defects(p);
	local.nlogs = 0;
	local.chunk = ~0u;
	local.result = XFW_RES_END;
	if (chain >= XFW_NCHAINS)
		return XFW_RES_END;
	local.pos = fc->chain_start[chain];
	local.end = fc->chain_end[chain];
	/* The set lookups run here, not in xfw_resolve: one call deeper
	 * would pass the 512-byte stack of the call chain. */
	if (xfw_resolve(p, iif, oif, &local,
			(fc->active & (1u << XFW_F_SETS)) ? xfw_set_bits(p, slot, iif, oif) : 0)) {
		local.result = XFW_RES_END;
		if (bpf_loop(fc->max_iters, xfw_step, &local, 0) < 0)
			local.result = XFW_RES_END;
	}
	res = local.result;
	if (fc->nsetctr)
		xfw_set_count(slot, p->l3len); /* some set match counts */
	/* LOG rules met before a hotdrop log, as in the kernel (found by the
	 * differential test, internal/difftest). */
	ps->nlogs = local.nlogs;
	__builtin_memcpy(ps->logs, local.logs, sizeof(local.logs));
	if (res == XFW_RES_HOTDROP)
		return res;
	if (res == XFW_RES_END) {
		xfw_count(slot, chain, p->l3len);
		return res;
	}
	entries = xfw_inner(&xfw_o_entries, slot);
	if (!entries)
		return res;
	ent = bpf_map_lookup_elem(entries, &res);
	if (ent && (ent->flags & XFW_EF_COUNT))
		xfw_count(slot, ent->rule, p->l3len);
	return res;
}

#endif /* XFW_CLASSIFY_H */
