/* SPDX-License-Identifier: GPL-2.0 */
/*
 * classify.h — stage 2: linear bit-vector search (LBVS) over the flattened
 * entries of one family's ruleset, and stage 3: counters.
 *
 * The generations it reads are described in classify_maps.h (their maps)
 * and generation.h (how a run picks its slot); the -m set lookups whose
 * answers are one of its fields in set_lookup.h.
 *
 * Data of one slot (built by internal/compiler; layouts in xfw_structs.h):
 *   value → class:  o_small (direct arrays), o_bounds (sorted intervals
 *                   as search trees of 32-key nodes), o_hcls (hash, with
 *                   a default class)
 *   class → chunks: id k of class c, i = c * nchunks + k, is
 *                   o_clsch[i / 2].v[i % 2] (chunk id, 0 = empty; two ids
 *                   an element: struct xfw_u32pair)
 *   chunk:          o_chunks[id] = summary word + 64 words of bits
 *   entries:        o_entries[i] = action of flattened entry i
 *
 * Search: from position pos, AND the chunk of every active field, skip words
 * whose summary bit is clear, take the first set bit ≥ pos. A CONTINUE entry
 * (LOG, RETURN, counters-only rule) counts and moves pos forward to its
 * .next; a terminal entry ends the search; reaching the chain's end means the
 * policy. A user chain is a region of its own (internal/compiler/regions.go):
 * a CALL entry (jump, goto) counts, pushes the position after it on the call
 * stack in the walk's state and searches on from the region's start; the
 * region's last entry, a RETURN every packet matches, pops it. The walk runs
 * under one bpf_loop() whose bound the compiler computes (iterBound).
 *
 * A probe (XFW_EF_PROBE: a limit match's token, probe.h) answers in rule
 * order: the search goes on at the next entry when it says true, at .next
 * when it says false.
 *
 * Includes: common.h, xfw_structs.h, parse.h, bits.h, classify_structs.h,
 * classify_maps.h, generation.h, set_lookup.h, probe.h, local.h (-m
 * addrtype's route types).
 */
#ifndef XFW_CLASSIFY_H
#define XFW_CLASSIFY_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "bits.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "generation.h"
#include "set_lookup.h"
#include "probe.h"
#include "local.h"
#include "bench.h"

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

/* xfw_ports_view returns the port (sport, or dport when dst) a rule's
 * port fields see: p's, but for a TCP or UDP first fragment whose header
 * holds its ports and is cut short after them (p->sport XFW_V_TRUNC, the
 * four bytes in p->ports4), XFW_V_SHORT + the port: multiport_mt reads
 * four bytes where tcp_mt and udp_mt hotdrop. A generation whose port
 * arrays end before XFW_V_SHORT (fc->no_short_ports: no condition tells
 * the two apart) sees XFW_V_TRUNC, within its arrays. */
static __always_inline __u32 xfw_ports_view(const struct xfw_pkt *p, const struct xfw_family_cfg *fc,
					    int dst)
{
	if (p->sport != XFW_V_TRUNC || !p->ports4_ok || p->frag || fc->no_short_ports ||
	    (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP && p->proto != IPPROTO_UDPLITE))
		return dst ? p->dport : p->sport;
	return XFW_V_SHORT + (dst ? p->ports4 & 0xffff : p->ports4 >> 16);
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

/* XFW_ADDR_FA packs an address field f and its address index a (into the
 * family's bounds) into xfw_addr_cls's argument fa. */
#define XFW_ADDR_FA(f, a) ((f) << 8 | (a))

/* xfw_bkey_le reports whether key k is at most address hi:lo. */
static __always_inline int xfw_bkey_le(const struct xfw_bkey *k, __u64 hi, __u64 lo)
{
	return k->hi < hi || (k->hi == hi && k->lo <= lo);
}

/* xfw_addr_cls classifies address hi:lo of field fa (XFW_ADDR_FA) by a
 * search of the field's tree in the generation's bounds map (struct
 * xfw_bnode): one node per level, a binary search of its keys for the
 * last one ≤ the address (the first when none is: the tree's first key is
 * the field's minimum), whose slot names the child, or at a leaf the
 * class. A global function: the search's steps are verified once, not at
 * each of xfw_resolve's four address fields. */
__attribute__((noinline)) int xfw_addr_cls(struct xfw_cls *st, struct xfw_family_cfg *fc,
					   __u32 fa, __u64 hi, __u64 lo)
{
	__u32 f = fa >> 8, a = fa & (XFW_NADDR - 1);
	__u32 node, levels;
	struct xfw_bnode *n;
	void *bounds;

	if (!st || !fc || f >= XFW_NFIELDS)
		return 0;
	bounds = xfw_inner(&xfw_o_bounds, st->slot);
	if (!bounds)
		return 0;
	node = fc->addr_root[a];
	levels = fc->addr_levels[a];
	if (!levels || levels > XFW_BTREE_LEVELS)
		return 0; /* the control plane builds no deeper tree */
	for (int l = 0; l < XFW_BTREE_LEVELS; l++) {
		__u32 i = 0;

		if (l >= levels)
			break;
		n = bpf_map_lookup_elem(bounds, &node);
		if (!n)
			return 0;
#pragma unroll
		for (__u32 w = XFW_BTREE_FANOUT / 2; w; w /= 2)
			if (xfw_bkey_le(&n->key[(i + w) & (XFW_BTREE_FANOUT - 1)], hi, lo))
				i += w;
		node = n->cls[i & (XFW_BTREE_FANOUT - 1)];
	}
	if (!node)
		return 0;
	/* The bound in the very register the store uses. */
	xfw_barrier_var(f);
	if (f >= XFW_NFIELDS)
		return 0;
	st->cls[f] = node;
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

/* xfw_addrtype_value returns the packet's XFW_F_ADDRTYPE value: the facts
 * of its source and destination addresses (enum xfw_addrtype), the routes'
 * devices compared with iif and oif. A global function, verified once on
 * its own, called by xfw_classify (its stack would not fit below
 * xfw_resolve's). */
__attribute__((noinline)) __u32 xfw_addrtype_value(struct xfw_pkt *p, __u32 iif, __u32 oif)
{
	if (!p)
		return 0;
	if (p->fam == 0)
		return xfw_addrtype4((__u32)p->src_lo, iif, oif) |
		       xfw_addrtype4((__u32)p->dst_lo, iif, oif) << XFW_AT_DST_SHIFT;
	return xfw_addrtype6(p->src_hi, p->src_lo) |
	       xfw_addrtype6(p->dst_hi, p->dst_lo) << XFW_AT_DST_SHIFT;
}

/* xfw_resolve maps every active field to its class; 0 when some field's
 * class is empty, so no entry can match (early break). A global function:
 * its temporaries stay off the deepest call chain's stack (XDP program →
 * xfw_classify → bpf_loop callback → xfw_and_chunk), which must fit in 512
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
	if ((act & (1u << XFW_F_DPORT)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_DPORT, xfw_ports_view(p, fc, 1)))
		return 0;
	if ((act & (1u << XFW_F_SPORT)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_SPORT, xfw_ports_view(p, fc, 0)))
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
	if ((act & (1u << XFW_F_SRC)) && !xfw_addr_cls(st, fc, XFW_ADDR_FA(XFW_F_SRC, 0), p->src_hi, p->src_lo))
		return 0;
	if ((act & (1u << XFW_F_DST)) && !xfw_addr_cls(st, fc, XFW_ADDR_FA(XFW_F_DST, 1), p->dst_hi, p->dst_lo))
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
	    !xfw_addr_cls(st, fc, XFW_ADDR_FA(XFW_F_CTOSRC, 2), p->ct_osrc_hi, p->ct_osrc_lo))
		return 0;
	if ((act & (1u << XFW_F_CTODST)) &&
	    !xfw_addr_cls(st, fc, XFW_ADDR_FA(XFW_F_CTODST, 3), p->ct_odst_hi, p->ct_odst_lo))
		return 0;
	if ((act & (1u << XFW_F_PKTTYPE)) && !xfw_small_cls(st, fc, small, XFW_F_PKTTYPE, p->pkttype))
		return 0;
	if ((act & (1u << XFW_F_ADDRTYPE)) &&
	    !xfw_small_cls(st, fc, small, XFW_F_ADDRTYPE, p->addrtype))
		return 0;
	if ((act & (1u << XFW_F_TOS)) && !xfw_small_cls(st, fc, small, XFW_F_TOS, p->tos))
		return 0;
	if ((act & (1u << XFW_F_TCPMSS)) && !xfw_small_cls(st, fc, small, XFW_F_TCPMSS, p->tcpmss))
		return 0;
	if ((act & (1u << XFW_F_EXT6)) && !xfw_small_cls(st, fc, small, XFW_F_EXT6, p->ext6))
		return 0;
	if ((act & (1u << XFW_F_HDR4)) && !xfw_small_cls(st, fc, small, XFW_F_HDR4, p->hdr4))
		return 0;
	if ((act & (1u << XFW_F_PHYSIN)) && !xfw_hash_cls(st, fc, hcls, XFW_F_PHYSIN, p->physin))
		return 0;
	if ((act & (1u << XFW_F_PHYSOUT)) && !xfw_hash_cls(st, fc, hcls, XFW_F_PHYSOUT, p->physout))
		return 0;
	return 1;
}

/* xfw_and_chunk returns the AND, over the active fields, of the summaries
 * of chunk c of each field's class; 0 when some field's chunk is empty.
 * From the same elements it ANDs word j into st->word (.word_chunk c,
 * .word_j j: the word the walk is at) and keeps each field's chunk id
 * (.ids, .ids_chunk c) for the chunk's later words (xfw_and_word). A
 * global function, verified once on its own: inlined into the bpf_loop
 * callback, its per-field branches multiply with the callback's and the
 * verifier gives up. */
__attribute__((noinline)) __u64 xfw_and_chunk(struct xfw_cls *st, __u32 c, __u32 j)
{
	struct xfw_family_cfg *fc;
	void *clsch, *chunks;
	struct xfw_chunk *ch;
	__u64 acc = ~0ULL, word = ~0ULL;
	__u32 f, slot, key, idx, id;
	struct xfw_u32pair *ids;

	if (!st)
		return 0;
	st->ids_chunk = ~0u;
	st->word_chunk = c;
	st->word_j = j;
	st->word = 0;
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
		idx = st->cls[f] * fc->nchunks + c;
		key = idx / 2;
		ids = bpf_map_lookup_elem(clsch, &key);
		if (!ids)
			return 0;
		id = ids->v[idx & 1];
		if (!id)
			return 0;
		st->ids[i & (XFW_FIELD_LIST - 1)] = id;
		ch = bpf_map_lookup_elem(chunks, &id);
		if (!ch)
			return 0;
		acc &= ch->summary;
		word &= ch->words[j & (XFW_CHUNK_WORDS - 1)];
	}
	st->ids_chunk = c;
	st->word = word;
	return acc;
}

/* xfw_and_word returns the AND, over the active fields, of word j of the
 * chunks xfw_and_chunk last found (st->ids: one lookup per field), and
 * keeps it in st->word. A global function, as xfw_and_chunk. */
__attribute__((noinline)) __u64 xfw_and_word(struct xfw_cls *st, __u32 j)
{
	struct xfw_family_cfg *fc;
	struct xfw_chunk *ch;
	__u64 acc = ~0ULL;
	__u32 slot, id;
	void *chunks;

	if (!st)
		return 0;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	chunks = xfw_inner(&xfw_o_chunks, slot);
	if (!fc || !chunks)
		return 0;
	for (__u32 i = 0; i < XFW_NFIELDS; i++) {
		if (i >= fc->nfields)
			break;
		id = st->ids[i & (XFW_FIELD_LIST - 1)];
		ch = bpf_map_lookup_elem(chunks, &id);
		if (!ch)
			return 0;
		acc &= ch->words[j & (XFW_CHUNK_WORDS - 1)];
		if (!acc)
			break; /* the later fields cannot set a bit */
	}
	st->word_chunk = st->ids_chunk;
	st->word_j = j;
	st->word = acc;
	return acc;
}

/* XFW_SCAN_WORDS bounds the candidate words xfw_scan_words tries in one
 * call (one walk step): each costs at most one lookup per field. */
#define XFW_SCAN_WORDS 4
/* xfw_scan_words' answers besides a word index (0-63). */
#define XFW_SCAN_MORE 64  /* + the next candidate: none of the first held a match */
#define XFW_SCAN_NONE 128 /* no candidate held a match */

/* xfw_scan_words tries the candidate words cand (bits: word indexes of
 * the chunk of st->ids, whose summaries say they may hold a match) in
 * order, up to XFW_SCAN_WORDS of them, each the AND of the active fields'
 * word, stopped at the first field that leaves it empty. It returns the
 * first word index whose AND is not empty (kept in st->word, as
 * xfw_and_word does), XFW_SCAN_MORE + the next untried candidate, or
 * XFW_SCAN_NONE. A global function, as xfw_and_chunk: a wide ruleset's
 * summaries say "maybe" for many words holding no common entry, and one
 * step per such word cost a bpf_loop step, the configuration's and the
 * inner map's lookups each. */
__attribute__((noinline)) __u32 xfw_scan_words(struct xfw_cls *st, __u64 cand)
{
	struct xfw_family_cfg *fc;
	struct xfw_chunk *ch;
	__u32 slot, id, j;
	void *chunks;
	__u64 acc;

	if (!st)
		return XFW_SCAN_NONE;
	slot = st->slot;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	chunks = xfw_inner(&xfw_o_chunks, slot);
	if (!fc || !chunks)
		return XFW_SCAN_NONE;
	for (__u32 k = 0; k < XFW_SCAN_WORDS; k++) {
		if (!cand)
			return XFW_SCAN_NONE;
		j = xfw_ctz64(cand) & (XFW_CHUNK_WORDS - 1);
		acc = ~0ULL;
		for (__u32 i = 0; i < XFW_NFIELDS; i++) {
			if (i >= fc->nfields)
				break;
			id = st->ids[i & (XFW_FIELD_LIST - 1)];
			ch = bpf_map_lookup_elem(chunks, &id);
			if (!ch)
				return XFW_SCAN_NONE; /* ids the walk read: cannot happen */
			acc &= ch->words[j];
			if (!acc)
				break;
		}
		if (acc) {
			st->word_chunk = st->ids_chunk;
			st->word_j = j;
			st->word = acc;
			return j;
		}
		cand &= cand - 1;
	}
	if (!cand)
		return XFW_SCAN_NONE;
	return XFW_SCAN_MORE + xfw_ctz64(cand);
}

/* XFW_MASK_BITS is the number of chunks a chunk mask word covers
 * (compiler.ChunkMaskBits). */
#define XFW_MASK_BITS 32

/* xfw_next_chunk returns the first chunk from n on where every active
 * field's class has entries (by the AND of the fields' chunk masks of
 * n's mask word, kept in st->mask), or the first chunk of the next mask
 * word when none of n's word has; n itself when the masks say nothing. A
 * global function, as xfw_and_chunk. */
__attribute__((noinline)) __u32 xfw_next_chunk(struct xfw_cls *st, __u32 n)
{
	struct xfw_family_cfg *fc;
	__u32 w = n / XFW_MASK_BITS, slot, f, key, idx, acc;
	struct xfw_u32pair *m;
	void *clsch;

	if (!st)
		return n;
	if (st->mask_w != w) {
		slot = st->slot;
		fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
		clsch = xfw_inner(&xfw_o_clsch, slot);
		if (!fc || !clsch || w >= fc->mask_words)
			return n;
		acc = ~0u;
		for (__u32 i = 0; i < XFW_NFIELDS; i++) {
			if (i >= fc->nfields || !acc)
				break;
			f = fc->fields[i];
			if (f >= XFW_NFIELDS)
				return n;
			idx = fc->mask_base + st->cls[f] * fc->mask_words + w;
			key = idx / 2;
			m = bpf_map_lookup_elem(clsch, &key);
			if (!m)
				return n;
			acc &= m->v[idx & 1];
		}
		st->mask_w = w;
		st->mask = acc;
	}
	acc = st->mask & (~0u << (n % XFW_MASK_BITS));
	if (!acc)
		return (w + 1) * XFW_MASK_BITS;
	return w * XFW_MASK_BITS + xfw_ctz64(acc);
}

/* xfw_word_at returns the AND of the active fields' word j of chunk c:
 * cached when xfw_and_chunk read it on entering the chunk, one lookup per
 * field while the chunk's ids are kept, two after a RETURN brought the
 * walk back to its caller's chunk. */
static __always_inline __u64 xfw_word_at(struct xfw_cls *st, __u32 c, __u32 j)
{
	if (st->word_chunk == c && st->word_j == j)
		return st->word;
	if (st->ids_chunk == c)
		return xfw_and_word(st, j);
	xfw_and_chunk(st, c, j);
	return st->word;
}

/* xfw_call enters a user chain's region at entry `to` from CALL entry e
 * (XFW_ACT_CALL): the position after e is pushed. The region's RETURN
 * entry, which every packet matches, ends the search there, so .end is
 * lifted. A stack overflow (the compiler refuses such nesting) hotdrops:
 * never fail open. */
static __always_inline long xfw_call(struct xfw_cls *st, __u32 e, __u32 to, __u32 aux)
{
	__u32 d = st->depth;

	if (d >= XFW_MAX_CALLS) {
		st->result = XFW_RES_HOTDROP;
		return 1;
	}
	st->stack[d & (XFW_MAX_CALLS - 1)] = (e + 1) | (aux == XFW_CALL_EXIT_NEXT ? XFW_RET_PAST_EXIT : 0);
	st->ret_chunk[d & (XFW_MAX_CALLS - 1)] = st->chunk;
	st->ret_summary[d & (XFW_MAX_CALLS - 1)] = st->summary;
	st->depth = d + 1;
	st->end = XFW_MAX_CHUNKS * XFW_CHUNK_BITS;
	st->pos = to;
	return 0;
}

/* xfw_return pops the call stack at a region's RETURN entry (past the
 * CALL's exit entry: XFW_RET_PAST_EXIT); back at the walk's level, its
 * end bounds the search again. */
static __always_inline long xfw_return(struct xfw_cls *st)
{
	__u32 d = st->depth, ret;

	if (!d || d > XFW_MAX_CALLS) {
		st->result = XFW_RES_HOTDROP; /* the compiler emits no such RETURN */
		return 1;
	}
	d--;
	st->depth = d;
	ret = st->stack[d & (XFW_MAX_CALLS - 1)];
	st->pos = (ret & ~XFW_RET_PAST_EXIT) + (ret >> 31);
	st->chunk = st->ret_chunk[d & (XFW_MAX_CALLS - 1)];
	st->summary = st->ret_summary[d & (XFW_MAX_CALLS - 1)];
	if (!d)
		st->end = st->base_end;
	return 0;
}

/* xfw_unwind leaves every region for the position the outermost CALL
 * pushed, its XFW_ACT_EXIT entry, which sends the unwinding walk to the
 * next table's chain (an ACCEPT in a region). */
static __always_inline long xfw_unwind(struct xfw_cls *st)
{
	if (!st->depth) {
		st->result = XFW_RES_HOTDROP; /* the compiler emits no such entry */
		return 1;
	}
	st->pos = st->stack[0] & ~XFW_RET_PAST_EXIT; /* the exit entry */
	st->chunk = st->ret_chunk[0];
	st->summary = st->ret_summary[0];
	st->depth = 0;
	st->end = st->base_end;
	st->unwinding = 1;
	return 0;
}

/* xfw_walk_mark returns the packet's mark at this point of the walk: the
 * hook's scratch copy (struct xfw_pkt .mark), which MARK and CONNMARK
 * entries change in rule order (mark.h). A LOG entry keeps it for its
 * line's MARK= field. */
static __always_inline __u32 xfw_walk_mark(__u32 hook)
{
	struct xfw_xdp_scratch *sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &hook);

	return sc ? sc->p.mark : 0;
}

/* xfw_walk_view returns what the walk's rewrites so far changed of the
 * packet (XFW_LOGV_*, 0 for nothing): a LOG entry keeps it, as the
 * kernel's LOG prints the packet as the rules before it left it. */
static __always_inline __u32 xfw_walk_view(__u32 hook)
{
	struct xfw_xdp_scratch *sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &hook);
	__u32 m, v;

	if (!sc)
		return 0;
	m = sc->p.mangle;
	if (!(m & (XFW_MG_TOS | XFW_MG_TTL | XFW_MG_GROWN)))
		return 0;
	v = XFW_LOGV_SET | (sc->p.ttl & 0xff) | (sc->p.tos & 0xff) << 8;
	if (m & XFW_MG_TTL)
		v |= XFW_LOGV_TTL;
	if (m & XFW_MG_TOS)
		v |= XFW_LOGV_TOS;
	if (m & XFW_MG_GROWN)
		v |= XFW_LOGV_GROWN;
	return v;
}

/* xfw_step is one bpf_loop iteration: it examines one candidate word at
 * or after st->pos (the AND of the active fields' chunk summaries says
 * which words can hold a match: a step skips to the first such word of
 * the chunk, or enters the next chunk the masks allow, and reads that
 * word) and either moves pos forward, acts on a CONTINUE entry and moves
 * on, or stops at a terminal entry or the chain's end. Later candidate
 * words of a chunk are tried by xfw_scan_words, a global function: the
 * callback itself stays loop-free for the verifier. */
static long xfw_step(__u32 iter, struct xfw_walk *walk)
{
	struct xfw_cls *st = walk->st;
	__u32 pos, c, j, e;
	__u64 summ, w;
	struct xfw_entry *ent;
	void *entries;

	if (!st)
		return 1;
	pos = st->pos;
	if (pos >= st->end) {
		st->result = XFW_RES_END;
		return 1;
	}
	c = pos / XFW_CHUNK_BITS;
	j = (pos % XFW_CHUNK_BITS) / 64;
	if (c != st->chunk) {
		st->chunk = c;
		st->summary = xfw_and_chunk(st, c, j);
	}
	summ = st->summary & (~0ULL << j);
	if (!summ) {
		/* On to the next chunk that can hold a match, entered in
		 * this same step. */
		c = xfw_next_chunk(st, c + 1);
		pos = c * XFW_CHUNK_BITS;
		st->pos = pos;
		if (pos >= st->end) {
			st->result = XFW_RES_END;
			return 1;
		}
		j = 0;
		st->chunk = c;
		st->summary = xfw_and_chunk(st, c, 0);
		summ = st->summary;
		if (!summ)
			return 0; /* the next step moves on */
	}
	if (xfw_ctz64(summ) != j) {
		/* Skip to the next word that can match, and read it in this
		 * same step. */
		j = xfw_ctz64(summ) & (XFW_CHUNK_WORDS - 1);
		pos = c * XFW_CHUNK_BITS + j * 64;
	}
	w = (~0ULL << (pos % 64)) & xfw_word_at(st, c, j);
	if (!w) {
		/* The chunk's later candidate words, several in this step. */
		__u64 rest = summ & (~1ULL << j);
		__u32 r;

		if (!rest || st->ids_chunk != c) {
			st->pos = c * XFW_CHUNK_BITS + (j + 1) * 64;
			return 0;
		}
		r = xfw_scan_words(st, rest);
		if (r >= XFW_SCAN_NONE) {
			/* On to the next chunk that can hold a match. */
			st->pos = xfw_next_chunk(st, c + 1) * XFW_CHUNK_BITS;
			return 0;
		}
		if (r >= XFW_SCAN_MORE) {
			st->pos = c * XFW_CHUNK_BITS + (r - XFW_SCAN_MORE) * 64;
			return 0;
		}
		j = r & (XFW_CHUNK_WORDS - 1);
		w = st->word;
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
	if (ent->action == XFW_ACT_RETURN)
		return xfw_return(st);
	if (ent->action == XFW_ACT_EXIT) {
		st->pos = st->unwinding ? ent->next : e + 1;
		st->unwinding = 0;
		return 0;
	}
	if (ent->action != XFW_ACT_CONTINUE && ent->action != XFW_ACT_CALL &&
	    ent->action != XFW_ACT_UNWIND) {
		/* A terminal entry: counted here, where it was read, and
		 * what the verdict needs of it kept. */
		if (ent->flags & XFW_EF_COUNT)
			xfw_count(st->slot, ent->rule, st->l3len);
		st->term_action = ent->action;
		st->term_flags = ent->flags;
		st->term_aux = ent->aux;
		st->term_next = ent->next;
		st->result = e;
		return 1;
	}
	if (ent->flags & XFW_EF_PROBE) {
		/* On to the rule when the probe says true, past it if not;
		 * a hotdrop ends the walk. */
		int said = xfw_probe(st->hook, st->slot, ent->aux);

		if (said == XFW_PROBE_HOTDROP) {
			st->result = XFW_RES_HOTDROP;
			return 1;
		}
		st->pos = said ? e + 1 : ent->next;
		return 0;
	}
	if (ent->flags & XFW_EF_SETCOUNT)
		xfw_set_probe(ent->aux);
	/* Counted before its target acts, as ipt_do_table does: TCPMSS's
	 * added option is not in its own rule's byte count (mangle.h). */
	if (ent->flags & XFW_EF_COUNT)
		xfw_count(st->slot, ent->rule, st->l3len);
	/* -j MARK (mark.h), TCPMSS (mangle.h): a TCPMSS that drops ends
	 * the walk, its rule counted. */
	if ((ent->flags & XFW_EF_ACT) &&
	    xfw_probe(st->hook, st->slot, ent->aux) == XFW_PROBE_HOTDROP) {
		st->result = XFW_RES_HOTDROP;
		return 1;
	}
	if (ent->flags & XFW_EF_LOG) {
		if (st->nlogs < XFW_MAX_PENDING_LOGS) {
			__u32 i = st->nlogs & (XFW_MAX_PENDING_LOGS - 1);

			st->logs[i] = e;
			st->log_marks[i] = xfw_walk_mark(st->hook);
			st->log_views[i] = xfw_walk_view(st->hook);
		} else
			xfw_stat_inc(XFW_STAT_LOG_LOST);
		st->nlogs++;
	}
	if (ent->action == XFW_ACT_CALL)
		return xfw_call(st, e, ent->next, ent->aux);
	if (ent->action == XFW_ACT_UNWIND)
		return xfw_unwind(st);
	/* The compiler guarantees next > e for CONTINUE: within a chain the
	 * walk only moves forward. */
	st->pos = ent->next;
	return 0;
}

/* xfw_classify runs chain `chain` of generation slot ps->slot for the packet
 * and returns the terminal entry's index, XFW_RES_END for the policy or
 * XFW_RES_HOTDROP; a terminal entry's action, flags, .aux and .next in
 * ps->term_*. Counters of the terminal entry (in xfw_step) and the
 * policy are updated here. It is a global (non-inlined) function so the verifier checks it
 * once, not once per path of the parser before it. */
__attribute__((noinline)) __u32 xfw_classify(struct xfw_pkt *p, __u32 chain, __u32 iif,
					     __u32 oif, struct xfw_pending *ps)
{
	struct xfw_family_cfg *fc;
	struct xfw_xdp_scratch *sc;
	struct xfw_cls *local;
	struct xfw_walk walk;
	__u32 res, slot, hook;

	/* A global function: verified once, on its own, with these checks. */
	if (!p || !ps)
		return XFW_RES_END;
	ps->nlogs = 0;
	slot = ps->slot;
	hook = ps->hook;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc)
		return XFW_RES_END;
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &hook);
	if (!sc)
		return XFW_RES_END;
	/* Every field the walk reads is set here or by xfw_resolve (the
	 * classes of the active fields), or before it is read (.summary
	 * with .chunk, .logs up to .nlogs). */
	local = &sc->cls;
	local->slot = slot;
	local->hook = hook;
	local->l3len = p->l3len;
	local->hotdrop = xfw_defects(p);
	local->nlogs = 0;
	local->chunk = ~0u;
	local->ids_chunk = ~0u;
	local->word_chunk = ~0u;
	local->mask_w = ~0u;
	local->result = XFW_RES_END;
	if (chain >= XFW_NCHAINS)
		return XFW_RES_END;
	local->pos = fc->chain_start[chain];
	if (ps->start)
		local->pos = ps->start - 1; /* a walk resumed after DNAT */
	local->end = fc->chain_end[chain];
	if (ps->end)
		local->end = ps->end - 1; /* a walk stopped before POSTROUTING */
	local->base_end = local->end;
	local->depth = 0;
	local->unwinding = 0;
	/* An empty chain (or a walk resumed at its end): the policy decides,
	 * with no field, set or class lookup (the walk would end at once). */
	if (local->pos >= local->end) {
		if (!ps->end)
			xfw_count(slot, chain, p->l3len);
		return XFW_RES_END;
	}
	/* The route lookups of -m addrtype and the set lookups run here,
	 * not in xfw_resolve: one call deeper would pass the 512-byte stack
	 * of the call chain. */
	if (fc->active & (1u << XFW_F_ADDRTYPE))
		p->addrtype = xfw_addrtype_value(p, iif, oif);
	XFW_BENCH_AT(XFW_BS_WALKSETUP, XFW_RES_END);
	if (xfw_resolve(p, iif, oif, local,
			(fc->active & (1u << XFW_F_SETS)) ? xfw_set_bits(p, slot, iif, oif) : 0)) {
		XFW_BENCH_AT(XFW_BS_RESOLVE, XFW_RES_END);
		local->result = XFW_RES_END;
		walk.st = local;
		if (bpf_loop(fc->max_iters, xfw_step, &walk, 0) < 0)
			local->result = XFW_RES_END;
	}
	XFW_BENCH_AT(XFW_BS_WALK, XFW_RES_END);
	res = local->result;
	if (fc->nsetctr)
		xfw_set_count(slot, p->l3len); /* some set match counts */
	/* LOG rules met before a hotdrop log, as in the kernel (found by the
	 * differential test, internal/testkit/difftest). */
	ps->nlogs = local->nlogs;
	__builtin_memcpy(ps->logs, local->logs, sizeof(local->logs));
	__builtin_memcpy(ps->log_marks, local->log_marks, sizeof(local->log_marks));
	__builtin_memcpy(ps->log_views, local->log_views, sizeof(local->log_views));
	if (res == XFW_RES_HOTDROP)
		return res;
	/* The policy decides at the walk's end, counted; not where a walk
	 * stopped early (ps->end: before POSTROUTING, or where the kernel
	 * routes again), whose policy entry was counted on the way. */
	if (res == XFW_RES_END && !ps->end)
		xfw_count(slot, chain, p->l3len);
	/* A terminal entry was counted by xfw_step, which kept what the
	 * verdict needs of it. */
	ps->term_action = local->term_action;
	ps->term_flags = local->term_flags;
	ps->term_aux = local->term_aux;
	ps->term_next = local->term_next;
	return res;
}

#endif /* XFW_CLASSIFY_H */
