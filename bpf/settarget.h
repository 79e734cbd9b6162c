/* SPDX-License-Identifier: GPL-2.0 */
/*
 * settarget.h — -j SET: the packet's address added to and deleted from
 * sets by the data plane, as the kernel's SET target (xt_set.c
 * set_target_v3) and ipset's hash:ip, hash:net, hash:ip,port and
 * hash:net,port types (mtype_kadt, mtype_add, mtype_del) do.
 *
 * A set a generation writes has a hash table lookup (set_lookup.h's
 * struct xfw_setkey tables) after its set conditions' lookups: written set
 * w (1-based) of slot is lookup nsetlk + w - 1, whose table the set's
 * matches share. The table's XFW_SETW_META key says how to make an
 * element (hash:ip: the address masked to the set's netmask; hash:net: to
 * the longest prefix length present, the host length when none, as
 * nets[0].cidr; the ,port types add the protocol and port of the second
 * dimension's direction, as ip_set_get_ip_port: set_lookup.h
 * xfw_set_port) and the set's timeouts. An add marks the element's prefix
 * length among the present ones (an atomic OR on the data plane's meta
 * word, XFW_SETW_MDP: the control plane writes its own words whole, by a
 * lookup and an update, which would lose a bit OR-ed between the two),
 * then writes the element: a lookup meanwhile tries one length more and
 * finds nothing, as before. A net type's table also counts its elements per
 * prefix length (XFW_SETW_NDP + plen: the data plane's adds and deletes,
 * atomic adds; XFW_SETW_NCP + plen: the control plane's, written by the
 * command holding xfw's lock), so that the longest length present is one
 * some element still has, as the kernel's nets[] counts (mtype_add_cidr,
 * mtype_del_cidr) forget a length with its last element; a length whose
 * counts are missing (a table built before them) counts as present. A
 * count is raised before its element is added and lowered after it is
 * deleted: never below the elements there. A full table refuses the
 * element, as a full set (maxelem) does; a full table of a set with
 * timeouts first has its expired elements collected (xfw_setw_gc_one, as
 * mtype_add's mtype_gc_do when the set is full), then takes the element
 * if that made room.
 *
 * Conventions: the evaluators run from xfw_probe, at the bottom of the
 * deepest call chain, so they keep the key in the set walk's per-CPU
 * scratch (struct xfw_hwalk, unused once the walk runs) and little on the
 * stack. Global functions, verified once.
 *
 * A --match-set of a written set is asked in rule order too
 * (XFW_PROBE_SETMATCH, xfw_set_written_match), so that a packet a SET rule
 * added matches a later rule, as in the kernel; it walks the table as the
 * packet's lookups do (set_lookup.h xfw_hwalk_step).
 *
 * Includes: common.h, xfw_structs.h, parse.h (struct xfw_pkt), bits.h,
 * classify_structs.h, classify_maps.h, set_lookup.h.
 */
#ifndef XFW_SETTARGET_H
#define XFW_SETTARGET_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "bits.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "set_lookup.h"

/* IPSET_MAX_TIMEOUT: the longest timeout in seconds (set_target_v3 cuts
 * longer ones to it). */
#define XFW_SET_MAX_TIMEOUT 2147483
/* Nanoseconds per second. */
#define XFW_NS_PER_SEC 1000000000ULL
/* xfw_set_write's flags beside XFW_SETT_*: delete (else add). */
#define XFW_SETT_OP_DEL (1u << 31)

/* E2BIG: a full hash map's answer to an update that adds a key. */
#define XFW_E2BIG 7

/* EEXIST, ENOENT: an update's answers for a key there (BPF_NOEXIST) and
 * not there (BPF_EXIST). */
#define XFW_EEXIST 17
#define XFW_ENOENT 2

/* xfw_setw_count adds delta to the data plane's count of prefix length
 * plen of table m (a net type's written set; nothing when it has no such
 * count). Its key is built in c's gckey, not on the stack: it runs from
 * the set's collection callback too (xfw_setw_gc_one), whose frame ends
 * the TC program's longest call chain. */
static __always_inline void xfw_setw_count(struct xfw_hwalk *c, void *m, __u32 plen, __s64 delta)
{
	struct xfw_setkey *k = &c->gckey;
	struct xfw_setval *v;

	__builtin_memset(k, 0, sizeof(*k));
	k->plen = XFW_SETKEY_META;
	k->port = XFW_SETW_NDP + (plen & 0xff);
	v = bpf_map_lookup_elem(m, k);
	if (v)
		__sync_fetch_and_add(&v->expires, (__u64)delta);
}

/* The collection's state, on xfw_set_write's stack for its callback. */
struct xfw_setw_gc_ctx {
	__u64 now;
	struct xfw_hwalk *c; /* the scratch whose gckey the callback uses */
	__u32 net;           /* the table counts its prefix lengths */
	__u32 pad;
};

/* xfw_setw_gc_one deletes element key of a written set's table when it
 * has expired (mtype_gc_do: ip_set_timeout_expired, then
 * mtype_del_cidr); meta keys stay. */
static long xfw_setw_gc_one(void *map, struct xfw_setkey *key, struct xfw_setval *v,
			    struct xfw_setw_gc_ctx *g)
{
	__u32 plen = key->plen;

	if (plen != XFW_SETKEY_META && v->expires && g->now >= v->expires &&
	    bpf_map_delete_elem(map, key) == 0 && g->net && g->c)
		xfw_setw_count(g->c, map, plen, -1);
	return 0;
}

/* xfw_setw_counted says whether prefix length plen of the table has
 * elements: its two counts' sum, or missing counts. c->key is free. */
static __always_inline int xfw_setw_counted(struct xfw_hwalk *c, void *m, __u32 plen)
{
	struct xfw_setval *dp, *cp;

	__builtin_memset(&c->key, 0, sizeof(c->key));
	c->key.plen = XFW_SETKEY_META;
	c->key.port = XFW_SETW_NDP + (plen & 0xff);
	dp = bpf_map_lookup_elem(m, &c->key);
	c->key.port = XFW_SETW_NCP + (plen & 0xff);
	cp = bpf_map_lookup_elem(m, &c->key);
	if (!dp || !cp)
		return 1;
	return (__s64)(dp->expires + cp->expires) > 0;
}

/* xfw_setw_longest_step tries the next present prefix length of the
 * written table c->idx (xfw_setw_longest's walk, c->next as in
 * xfw_hwalk_next): 1 stops, c->next then 1 + the length found, or 0. */
static long xfw_setw_longest_step(__u32 i, void *unused)
{
	struct xfw_hwalk *c;
	__u32 zero = 0, plen;
	void *m;

	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!c)
		return 1;
	m = bpf_map_lookup_elem(&xfw_o_sethash, &c->idx);
	if (!m || !c->next) {
		c->next = 0;
		return 1;
	}
	plen = xfw_hwalk_next(c);
	if (plen > 128) {
		c->next = 0;
		return 1;
	}
	if (xfw_setw_counted(c, m, plen)) {
		c->next = plen + 1;
		return 1;
	}
	c->next = plen;
	return 0;
}

/* xfw_setw_table returns the hash table of written set w (1-based) of
 * slot, its outer index in *idx; NULL when the generation has none. */
static __always_inline void *xfw_setw_table(__u32 slot, __u32 w, __u32 *idx)
{
	struct xfw_family_cfg *fc;

	if (!w || slot >= XFW_NSLOTS)
		return NULL;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc || fc->nsetlk + w - 1 >= XFW_MAX_SETLOOKUPS)
		return NULL;
	*idx = slot * XFW_MAX_SETLOOKUPS + fc->nsetlk + w - 1;
	return bpf_map_lookup_elem(&xfw_o_sethash, idx);
}

/* xfw_setw_words reads the present prefix lengths of written table m
 * into c->words: the control plane's meta words (port w) OR-ed with the
 * data plane's (port XFW_SETW_MDP + w). c->key is a meta key (plen
 * XFW_SETKEY_META, address 0); its port is left changed. */
static __always_inline void xfw_setw_words(struct xfw_hwalk *c, void *m)
{
	struct xfw_setval *v;

	for (int w = 0; w < XFW_SET_PLEN_WORDS; w++) {
		c->key.port = w;
		v = bpf_map_lookup_elem(m, &c->key);
		c->words[w] = v ? v->expires : 0;
		c->key.port = XFW_SETW_MDP + w;
		v = bpf_map_lookup_elem(m, &c->key);
		if (v)
			c->words[w] |= v->expires;
	}
}

/* xfw_setw_longest returns the longest prefix length of table m (outer
 * index idx) some element has: marked in its meta words and counted
 * (xfw_setw_counted), or maxplen when none is: hash:net's element length
 * (INIT_CIDR(nets[0].cidr[0], HOST_MASK)). c->key is the meta key. */
static __always_inline __u32 xfw_setw_longest(struct xfw_hwalk *c, void *m, __u32 idx, __u32 maxplen)
{
	xfw_setw_words(c, m);
	c->idx = idx;
	c->next = maxplen + 1;
	/* 129 prefix lengths at most: /128 to /0. */
	bpf_loop(129, xfw_setw_longest_step, NULL, 0);
	return c->next ? c->next - 1 : maxplen;
}

/* xfw_setw_put writes element c->key of table m with value val, and
 * returns the update's answer; *created says it was not there before. */
static __always_inline long xfw_setw_put(void *m, struct xfw_hwalk *c, struct xfw_setval *val,
					 int *created)
{
	long rc = bpf_map_update_elem(m, &c->key, val, BPF_NOEXIST);

	*created = rc == 0;
	if (rc != -XFW_EEXIST)
		return rc;
	rc = bpf_map_update_elem(m, &c->key, val, BPF_EXIST);
	if (rc != -XFW_ENOENT)
		return rc;
	/* Deleted meanwhile: added afresh. */
	rc = bpf_map_update_elem(m, &c->key, val, BPF_NOEXIST);
	*created = rc == 0;
	return rc;
}

/* xfw_setw_port puts the protocol and port of p's second dimension (the
 * destination's when dst2) into c->key for a set with a port dimension
 * (XFW_SETW_PORT in answer), nothing for one without. Returns 0 when the
 * kernel's kadt fails (ip_set_get_ip4_port/ip_set_get_ip6_port: no
 * element) or when the rule names fewer dimensions than the set has
 * (!dim2: ip_set_add/del/test refuse, IPSET_ERR_TYPE_MISMATCH). */
static __always_inline int xfw_setw_port(struct xfw_hwalk *c, struct xfw_pkt *p, __u32 answer,
					 int dst2, int dim2)
{
	__u16 port = 0;
	__u8 proto = 0;

	c->key.port = 0;
	c->key.proto = 0;
	if (!(answer & XFW_SETW_PORT))
		return 1;
	if (!dim2 || !xfw_set_port(p, dst2, 0, &port, &proto))
		return 0;
	c->key.port = port;
	c->key.proto = proto;
	return 1;
}

/* xfw_set_write adds the packet's source (or destination: XFW_SETT_ADD_DST
 * in flags; the port of XFW_SETT_ADD_DST2's direction for a set with ports)
 * to written set w (1-based) of slot, or deletes it (XFW_SETT_OP_DEL,
 * XFW_SETT_DEL_DST, XFW_SETT_DEL_DST2), with
 * timeout seconds (~0: the set's default) and XFW_SETT_EXIST: an element
 * already there gets the new timeout only with --exist, or when it has
 * expired (mtype_add). Returns 1. */
__attribute__((noinline)) int xfw_set_write(struct xfw_pkt *p, __u32 slot, __u32 w, __u32 flags,
					    __u32 timeout)
{
	struct xfw_setval *v, val = {};
	struct xfw_hwalk *c;
	__u32 zero = 0, idx, plen;
	int created = 0;
	__u16 port;
	__u8 proto;
	void *m;

	if (!p)
		return 1;
	m = xfw_setw_table(slot, w, &idx);
	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!m || !c)
		return 1;
	__builtin_memset(&c->key, 0, sizeof(c->key));
	c->key.plen = XFW_SETKEY_META;
	c->key.port = XFW_SETW_META;
	v = bpf_map_lookup_elem(m, &c->key);
	if (!v)
		return 1;
	/* The set's parameters, kept in the scratch (the stack is short). */
	c->answer = v->answer;
	c->ctr = (__u32)v->expires;
	c->maxplen = p->fam ? 128 : 32;
	plen = v->aux;
	if (c->answer & XFW_SETW_NET)
		plen = xfw_setw_longest(c, m, idx, c->maxplen);
	if (plen > c->maxplen)
		return 1;
	if (flags & ((flags & XFW_SETT_OP_DEL) ? XFW_SETT_DEL_DST : XFW_SETT_ADD_DST)) {
		c->hi = p->dst_hi;
		c->lo = p->dst_lo;
	} else {
		c->hi = p->src_hi;
		c->lo = p->src_lo;
	}
	xfw_hwalk_mask(c, plen);
	/* hash:ip and hash:ip,port: the address 0 (after the netmask or
	 * bitmask) is no element (-EINVAL; hash:ip,port's since Linux 6.3);
	 * the net types take it. */
	if (!(c->answer & XFW_SETW_NET) && !c->key.hi && !c->key.lo)
		return 1;
	if (flags & XFW_SETT_OP_DEL) {
		if (!xfw_setw_port(c, p, c->answer, !!(flags & XFW_SETT_DEL_DST2), !!(flags & XFW_SETT_DEL_DIM2)))
			return 1;
	} else if (!xfw_setw_port(c, p, c->answer, !!(flags & XFW_SETT_ADD_DST2), !!(flags & XFW_SETT_ADD_DIM2))) {
		return 1;
	}
	if (flags & XFW_SETT_OP_DEL) {
		if (bpf_map_delete_elem(m, &c->key) == 0 && (c->answer & XFW_SETW_NET))
			xfw_setw_count(c, m, plen, -1);
		return 1;
	}
	c->now = bpf_ktime_get_ns();
	v = bpf_map_lookup_elem(m, &c->key);
	if (v && !(flags & XFW_SETT_EXIST) && !(v->expires && c->now >= v->expires))
		return 1; /* -IPSET_ERR_EXIST: left as it is */
	if (c->answer & XFW_SETW_TIMEOUT) {
		if (timeout == ~0u)
			timeout = c->ctr;
		if (timeout > XFW_SET_MAX_TIMEOUT)
			timeout = XFW_SET_MAX_TIMEOUT;
		if (timeout)
			val.expires = c->now + (__u64)timeout * XFW_NS_PER_SEC;
	}
	val.answer = XFW_SET_MEMBER;
	/* The prefix length first (a lookup then tries it and finds nothing
	 * until the element is in), in the data plane's word (XFW_SETW_MDP:
	 * the control plane rewrites its own whole); a table built before
	 * those words has the control plane's only. */
	port = c->key.port; /* the element's, kept while the meta key is used */
	proto = c->key.proto;
	c->key.hi = 0;
	c->key.lo = 0;
	c->key.plen = XFW_SETKEY_META;
	c->key.port = XFW_SETW_MDP + plen / 64; /* plen ≤ 128: word 0, 1 or 2 */
	c->key.proto = 0;
	v = bpf_map_lookup_elem(m, &c->key);
	if (!v) {
		c->key.port = plen / 64;
		v = bpf_map_lookup_elem(m, &c->key);
	}
	if (v && !(v->expires & (1ULL << (plen & 63))))
		__sync_fetch_and_or(&v->expires, 1ULL << (plen & 63));
	xfw_hwalk_mask(c, plen);
	c->key.port = port;
	c->key.proto = proto;
	/* Counted first: a length's count never falls below its elements. */
	if (c->answer & XFW_SETW_NET)
		xfw_setw_count(c, m, plen, 1);
	if (xfw_setw_put(m, c, &val, &created) == -XFW_E2BIG && (c->answer & XFW_SETW_TIMEOUT)) {
		/* Full: the expired elements make room first (only a set
		 * with timeouts has any), as the kernel's add collects them
		 * when the set is full. Still full: not added. */
		struct xfw_setw_gc_ctx g = {.now = c->now, .c = c, .net = !!(c->answer & XFW_SETW_NET)};

		bpf_for_each_map_elem(m, xfw_setw_gc_one, &g, 0);
		xfw_setw_put(m, c, &val, &created);
	}
	if (!created && (c->answer & XFW_SETW_NET))
		xfw_setw_count(c, m, plen, -1);
	return 1;
}

/* xfw_set_written_match answers a --match-set of written set arg & 0xff
 * (XFW_PROBE_SETMATCH, flags XFW_SETM_*) of slot for p, as ip_set_test
 * with a hash:ip, hash:net, hash:ip,port or hash:net,port (no element of
 * the packet, or fewer dimensions than the set's: no member): the present prefix lengths are tried from
 * the longest, an expired entry skipped; --return-nomatch reverses a
 * hash:net's answer. */
__attribute__((noinline)) int xfw_set_written_match(struct xfw_pkt *p, __u32 slot, __u32 arg)
{
	struct xfw_setval *v;
	struct xfw_hwalk *c;
	__u32 zero = 0, w, idx;
	void *m;

	if (!p)
		return 0;
	m = xfw_setw_table(slot, arg & 0xff, &idx);
	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!m || !c)
		return 0;
	__builtin_memset(c, 0, sizeof(*c));
	c->idx = idx;
	c->maxplen = p->fam ? 128 : 32;
	c->key.plen = XFW_SETKEY_META;
	xfw_setw_words(c, m);
	c->key.port = XFW_SETW_META;
	v = bpf_map_lookup_elem(m, &c->key);
	if (!v)
		return 0;
	/* Only a type with nomatch entries honours --return-nomatch. */
	if (!(v->answer & XFW_SETW_NET))
		arg &= ~XFW_SETM_RETURN_NOMATCH;
	if (!xfw_setw_port(c, p, v->answer, !!(arg & XFW_SETM_DST2), !!(arg & XFW_SETM_DIM2)))
		return !!(arg & XFW_SETM_INVERT);
	if (arg & XFW_SETM_DST) {
		c->hi = p->dst_hi;
		c->lo = p->dst_lo;
	} else {
		c->hi = p->src_hi;
		c->lo = p->src_lo;
	}
	c->next = c->maxplen + 1;
	/* 129 prefix lengths at most: /128 to /0. */
	bpf_loop(129, xfw_hwalk_step, NULL, 0);
	if (arg & XFW_SETM_RETURN_NOMATCH)
		w = c->answer == XFW_SET_NOMATCH;
	else
		w = c->answer == XFW_SET_MEMBER;
	return w != !!(arg & XFW_SETM_INVERT);
}

/* xfw_set_target is the SET target's action (XFW_PROBE_SETTARGET, .arg
 * and .val): --add-set, then --del-set, as set_target_v3; always true
 * (XT_CONTINUE). */
static __always_inline int xfw_set_target(struct xfw_pkt *p, __u32 slot, __u32 arg, __u32 timeout)
{
	xfw_set_write(p, slot, arg & 0xff, arg, timeout);
	xfw_set_write(p, slot, (arg >> XFW_SETT_DEL_SHIFT) & 0xff, arg | XFW_SETT_OP_DEL, timeout);
	return 1;
}

#endif /* XFW_SETTARGET_H */
