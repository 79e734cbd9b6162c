/* SPDX-License-Identifier: GPL-2.0 */
/*
 * classify.h — stage 2: linear bit-vector search (LBVS) over the flattened
 * entries of one family, and stage 3: counters.
 *
 * Data (all per family, built by internal/compiler, see common.h):
 *   value → class:  small##F (direct arrays), bounds##F (sorted intervals,
 *                   binary search), hcls##F (hash, with a default class)
 *   class → chunks: clsch##F[class * nchunks + k] = chunk id (0 = empty)
 *   chunk:          chunks##F[id] = summary word + 64 words of bits
 *   entries:        entries##F[i] = action of flattened entry i
 *
 * Search: from position pos, AND the chunk of every active field, skip words
 * whose summary bit is clear, take the first set bit ≥ pos. A CONTINUE entry
 * (LOG, jump, RETURN, counters-only rule) counts and moves pos forward to its
 * .next; a terminal entry ends the search; reaching the chain's end means the
 * policy. Positions only grow, so the walk runs under one bpf_loop() of at
 * most nchunks * 65 (words and chunk skips) + CONTINUE entries + 1 steps.
 *
 * XFW_DEFINE_CLASSIFIER(F, FI) instantiates the maps and functions of family
 * F (4 or 6) at index FI (0 or 1): the maps of each family are separate so
 * one family's ruleset can be swapped while the other's stays in place.
 */
#ifndef XFW_CLASSIFY_H
#define XFW_CLASSIFY_H

#include "common.h"
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

/* LOG entries met by a packet, reported by xfw_classify##F to the hook
 * program, which owns the context needed to copy the packet. */
struct xfw_pending {
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
	__u32 pad;
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

#define XFW_DEFINE_CLASSIFIER(F, FI)                                               \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__type(key, __u32);                                                        \
	__type(value, __u32);                                                      \
	__uint(max_entries, 1);                                                    \
} xfw_small##F SEC(".maps");                                                      \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__type(key, __u32);                                                        \
	__type(value, struct xfw_bound);                                           \
	__uint(max_entries, 1);                                                    \
} xfw_bounds##F SEC(".maps");                                                     \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_HASH);                                           \
	__type(key, struct xfw_hkey);                                              \
	__type(value, __u32);                                                      \
	__uint(max_entries, 1);                                                    \
} xfw_hcls##F SEC(".maps");                                                       \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__type(key, __u32);                                                        \
	__type(value, __u32);                                                      \
	__uint(max_entries, 1);                                                    \
} xfw_clsch##F SEC(".maps");                                                      \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__type(key, __u32);                                                        \
	__type(value, struct xfw_chunk);                                           \
	__uint(max_entries, 1);                                                    \
} xfw_chunks##F SEC(".maps");                                                     \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__type(key, __u32);                                                        \
	__type(value, struct xfw_entry);                                           \
	__uint(max_entries, 1);                                                    \
} xfw_entries##F SEC(".maps");                                                    \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);                                   \
	__type(key, __u32);                                                        \
	__type(value, struct xfw_counter);                                         \
	__uint(max_entries, 3);                                                    \
} xfw_counters##F SEC(".maps");                                                   \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__type(key, __u32);                                                        \
	__type(value, struct xfw_logcfg);                                          \
	__uint(max_entries, 1);                                                    \
} xfw_logcfg##F SEC(".maps");                                                     \
                                                                                   \
static __always_inline void xfw_count##F(__u32 rule, __u32 bytes)                 \
{                                                                                  \
	struct xfw_counter *c = bpf_map_lookup_elem(&xfw_counters##F, &rule);      \
                                                                                   \
	if (c) {                                                                   \
		c->packets += 1;                                                   \
		c->bytes += bytes;                                                 \
	}                                                                          \
}                                                                                  \
                                                                                   \
static __always_inline int xfw_small_cls##F(struct xfw_cls *st, __u32 f,          \
					     __u32 value)                          \
{                                                                                  \
	__u32 key = cfg.fam[FI].small_base[f] + value;                             \
	__u32 *c = bpf_map_lookup_elem(&xfw_small##F, &key);                       \
                                                                                   \
	if (!c || !*c)                                                             \
		return 0;                                                          \
	st->cls[f] = *c;                                                           \
	return 1;                                                                  \
}                                                                                  \
                                                                                   \
static __always_inline int xfw_addr_cls##F(struct xfw_cls *st, __u32 f, __u32 a,  \
					    __u64 hi, __u64 lo)                    \
{                                                                                  \
	__u32 base = xfw_addrs.base[FI][a & 1];                                    \
	__u32 l = 0, h = xfw_addrs.count[FI][a & 1] - 1, key;                      \
	struct xfw_bound *b;                                                       \
                                                                                   \
	for (int i = 0; i < XFW_BSEARCH_STEPS; i++) {                              \
		__u32 mid;                                                         \
                                                                                   \
		if (l >= h)                                                        \
			break;                                                     \
		mid = l + (h - l + 1) / 2;                                         \
		key = base + mid;                                                  \
		b = bpf_map_lookup_elem(&xfw_bounds##F, &key);                     \
		if (!b)                                                            \
			return 0;                                                  \
		if (b->hi < hi || (b->hi == hi && b->lo <= lo))                    \
			l = mid;                                                   \
		else                                                               \
			h = mid - 1;                                               \
	}                                                                          \
	key = base + l;                                                            \
	b = bpf_map_lookup_elem(&xfw_bounds##F, &key);                             \
	if (!b || !b->cls)                                                         \
		return 0;                                                          \
	st->cls[f] = b->cls;                                                       \
	return 1;                                                                  \
}                                                                                  \
                                                                                   \
static __always_inline int xfw_hash_cls##F(struct xfw_cls *st, __u32 f,           \
					    __u64 value)                           \
{                                                                                  \
	struct xfw_hkey k = { .field = f, .pad = 0, .value = value };              \
	__u32 *c = bpf_map_lookup_elem(&xfw_hcls##F, &k);                          \
	__u32 cls = c ? *c : cfg.fam[FI].default_cls[f];                           \
                                                                                   \
	if (!cls)                                                                  \
		return 0;                                                          \
	st->cls[f] = cls;                                                          \
	return 1;                                                                  \
}                                                                                  \
                                                                                   \
/* xfw_resolve##F maps every active field to its class; 0 when some field's  \
 * class is empty, so no entry can match (early break). */                     \
static __always_inline int xfw_resolve##F(struct xfw_pkt *p, __u32 iif,            \
					   __u32 oif, struct xfw_cls *st)          \
{                                                                                  \
	__u32 act = cfg.fam[FI].active;                                            \
                                                                                   \
	if ((act & (1u << XFW_F_PROTO)) && !xfw_small_cls##F(st, XFW_F_PROTO, p->proto))     \
		return 0;                                                          \
	if ((act & (1u << XFW_F_DPORT)) && !xfw_small_cls##F(st, XFW_F_DPORT, p->dport))     \
		return 0;                                                          \
	if ((act & (1u << XFW_F_SPORT)) && !xfw_small_cls##F(st, XFW_F_SPORT, p->sport))     \
		return 0;                                                          \
	if ((act & (1u << XFW_F_TCPFLAGS)) &&                                      \
	    !xfw_small_cls##F(st, XFW_F_TCPFLAGS, p->tcpflags))                    \
		return 0;                                                          \
	if ((act & (1u << XFW_F_ICMP)) && !xfw_small_cls##F(st, XFW_F_ICMP, p->icmp))        \
		return 0;                                                          \
	if ((act & (1u << XFW_F_FRAG)) && !xfw_small_cls##F(st, XFW_F_FRAG, p->frag))        \
		return 0;                                                          \
	if ((act & (1u << XFW_F_LEN)) && !xfw_small_cls##F(st, XFW_F_LEN, p->lenm))         \
		return 0;                                                          \
	if ((act & (1u << XFW_F_TTL)) && !xfw_small_cls##F(st, XFW_F_TTL, p->ttl))           \
		return 0;                                                          \
	if ((act & (1u << XFW_F_IIF)) && !xfw_hash_cls##F(st, XFW_F_IIF, iif))               \
		return 0;                                                          \
	if ((act & (1u << XFW_F_OIF)) && !xfw_hash_cls##F(st, XFW_F_OIF, oif))               \
		return 0;                                                          \
	if ((act & (1u << XFW_F_MAC)) && !xfw_hash_cls##F(st, XFW_F_MAC, p->mac_src))        \
		return 0;                                                          \
	if ((act & (1u << XFW_F_SRC)) &&                                           \
	    !xfw_addr_cls##F(st, XFW_F_SRC, 0, p->src_hi, p->src_lo))              \
		return 0;                                                          \
	if ((act & (1u << XFW_F_DST)) &&                                           \
	    !xfw_addr_cls##F(st, XFW_F_DST, 1, p->dst_hi, p->dst_lo))              \
		return 0;                                                          \
	return 1;                                                                  \
}                                                                                  \
                                                                                   \
/* xfw_chunk_of##F returns the chunk of field f for chunk index c, NULL when   \
 * it is empty. */                                                             \
static __always_inline struct xfw_chunk *xfw_chunk_of##F(struct xfw_cls *st,      \
							 __u32 f, __u32 c)         \
{                                                                                  \
	__u32 key = st->cls[f] * cfg.fam[FI].nchunks + c;                          \
	__u32 *id = bpf_map_lookup_elem(&xfw_clsch##F, &key);                      \
                                                                                   \
	if (!id || !*id)                                                           \
		return NULL;                                                       \
	return bpf_map_lookup_elem(&xfw_chunks##F, id);                            \
}                                                                                  \
                                                                                   \
/* xfw_step##F is one bpf_loop iteration: it examines one candidate word at  \
 * st->pos (the AND of the active fields' chunk summaries says which words   \
 * can hold a match) and either moves pos forward, acts on a CONTINUE entry  \
 * and moves on, or stops at a terminal entry or the chain's end. One word  \
 * per iteration keeps the callback loop-free for the verifier. */           \
static long xfw_step##F(__u32 iter, struct xfw_cls *st)                           \
{                                                                                  \
	__u32 act = cfg.fam[FI].active;                                            \
	__u32 pos = st->pos, c, j, e;                                              \
	__u64 summ, w;                                                             \
	struct xfw_chunk *ch;                                                      \
	struct xfw_entry *ent;                                                     \
                                                                                   \
	if (pos >= st->end) {                                                      \
		st->result = XFW_RES_END;                                          \
		return 1;                                                          \
	}                                                                          \
	c = pos / XFW_CHUNK_BITS;                                                  \
	if (c != st->chunk) {                                                      \
		summ = ~0ULL;                                                      \
		for (int f = 0; f < XFW_NFIELDS; f++) {                            \
			if (!(act & (1u << f)))                                    \
				continue;                                          \
			ch = xfw_chunk_of##F(st, f, c);                            \
			if (!ch) {                                                 \
				summ = 0;                                          \
				break;                                             \
			}                                                          \
			summ &= ch->summary;                                       \
		}                                                                  \
		st->chunk = c;                                                     \
		st->summary = summ;                                                \
	}                                                                          \
	j = (pos % XFW_CHUNK_BITS) / 64;                                           \
	summ = st->summary & (~0ULL << j);                                         \
	if (!summ) {                                                               \
		st->pos = (c + 1) * XFW_CHUNK_BITS;                                \
		return 0;                                                          \
	}                                                                          \
	if (xfw_ctz64(summ) != j) {                                                \
		/* Skip to the next word that can match. */                        \
		st->pos = c * XFW_CHUNK_BITS + xfw_ctz64(summ) * 64;               \
		return 0;                                                          \
	}                                                                          \
	w = ~0ULL << (pos % 64);                                                   \
	for (int f = 0; f < XFW_NFIELDS; f++) {                                    \
		if (!(act & (1u << f)))                                            \
			continue;                                                  \
		ch = xfw_chunk_of##F(st, f, c);                                    \
		if (!ch) {                                                         \
			w = 0;                                                     \
			break;                                                     \
		}                                                                  \
		w &= ch->words[j & (XFW_CHUNK_WORDS - 1)];                         \
	}                                                                          \
	if (!w) {                                                                  \
		st->pos = c * XFW_CHUNK_BITS + (j + 1) * 64;                       \
		return 0;                                                          \
	}                                                                          \
	e = c * XFW_CHUNK_BITS + j * 64 + xfw_ctz64(w);                            \
	if (e >= st->end) {                                                        \
		st->result = XFW_RES_END;                                          \
		return 1;                                                          \
	}                                                                          \
	ent = bpf_map_lookup_elem(&xfw_entries##F, &e);                            \
	if (!ent) {                                                                \
		st->result = XFW_RES_END;                                          \
		return 1;                                                          \
	}                                                                          \
	if (ent->flags & st->hotdrop) {                                            \
		st->result = XFW_RES_HOTDROP;                                      \
		return 1;                                                          \
	}                                                                          \
	if (ent->action != XFW_ACT_CONTINUE) {                                     \
		st->result = e;                                                    \
		return 1;                                                          \
	}                                                                          \
	if (ent->flags & XFW_EF_COUNT)                                             \
		xfw_count##F(ent->rule, st->l3len);                                \
	if (ent->flags & XFW_EF_LOG) {                                             \
		if (st->nlogs < XFW_MAX_PENDING_LOGS)                              \
			st->logs[st->nlogs & (XFW_MAX_PENDING_LOGS - 1)] = e;      \
		else                                                               \
			xfw_stat_inc(XFW_STAT_LOG_LOST);                           \
		st->nlogs++;                                                       \
	}                                                                          \
	/* The compiler guarantees next > e: the walk only moves forward. */      \
	st->pos = ent->next;                                                       \
	return 0;                                                                  \
}                                                                                  \
                                                                                   \
/* xfw_classify##F runs chain `chain` for the packet and returns the terminal  \
 * entry's index, XFW_RES_END for the policy or XFW_RES_HOTDROP. Counters of   \
 * the terminal entry and the policy are updated here. It is a global (non-   \
 * inlined) function so the verifier checks it once, not once per path of    \
 * the parser before it. */                                                    \
__attribute__((noinline)) __u32 xfw_classify##F(struct xfw_pkt *p, __u32 chain,  \
						 __u32 iif, __u32 oif,             \
						 struct xfw_pending *st)           \
{                                                                                  \
	struct xfw_entry *ent;                                                     \
	struct xfw_cls local = {};                                                 \
	__u32 res;                                                                 \
                                                                                   \
	/* A global function: verified once, on its own, with these checks. */    \
	if (!p || !st)                                                             \
		return XFW_RES_END;                                                \
	st->nlogs = 0;                                                             \
	/* bpf_loop wants its context on this function's stack. */                \
	local.l3len = p->l3len;                                                      \
	local.hotdrop = xfw_defects(p);                                            \
	local.nlogs = 0;                                                             \
	local.chunk = ~0u;                                                           \
	local.result = XFW_RES_END;                                                  \
	if (chain >= XFW_NCHAINS)                                                  \
		return XFW_RES_END;                                                \
	local.pos = cfg.fam[FI].chain_start[chain];                                  \
	local.end = cfg.fam[FI].chain_end[chain];                                    \
	/* No "pos < end" shortcut: a provably dead bpf_loop call trips a  \
	 * kernel bug (see xfw_fam_on in xfw.c); the first step ends it. */ \
	if (xfw_resolve##F(p, iif, oif, &local)) {                                \
		local.result = XFW_RES_END;                                          \
		if (bpf_loop(cfg.fam[FI].max_iters, xfw_step##F, &local, 0) < 0)       \
			local.result = XFW_RES_END;                                  \
	}                                                                          \
	res = local.result;                                                          \
	/* LOG rules met before a hotdrop log, as in the kernel (the pending   \
	 * events were left unset here before: garbage LOG events; found by   \
	 * the differential test, internal/difftest). */                      \
	st->nlogs = local.nlogs;                                                   \
	__builtin_memcpy(st->logs, local.logs, sizeof(local.logs));                \
	if (res == XFW_RES_HOTDROP)                                                \
		return res;                                                        \
	if (res == XFW_RES_END) {                                                  \
		xfw_count##F(chain, p->l3len);                                     \
		return res;                                                        \
	}                                                                          \
	ent = bpf_map_lookup_elem(&xfw_entries##F, &res);                          \
	if (ent && (ent->flags & XFW_EF_COUNT))                                    \
		xfw_count##F(ent->rule, p->l3len);                                 \
	return res;                                                                \
}

#endif /* XFW_CLASSIFY_H */
