/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_conn.h — what every part of the tracker shares about a connection:
 * the ICMP types that are queries or errors, the key of a connection
 * (endpoints ordered, ICMP queries by requester), looking it up in the two
 * tables, its entry's lock, the XFW_F_CT value (xfw_ctv) and the original
 * tuple a packet gets from it (xfw_ct_tuple); and the readers of the
 * scratch buffer (cs->buf) the hook copies headers into.
 *
 * Includes: common.h, xfw_structs.h, parse.h (struct xfw_pkt),
 * ct_structs.h, ct_maps.h.
 */
#ifndef XFW_CT_CONN_H
#define XFW_CT_CONN_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"

/* xfw_ix masks a buffer index in a way the compiler keeps (it would drop a
 * mask an earlier bound makes redundant, which the verifier may not have
 * followed). */
static __always_inline __u32 xfw_ix(__u32 i)
{
	xfw_barrier_var(i);
	return i & XFW_CT_BUF_MASK;
}

static __always_inline __u32 xfw_rd32(const __u8 *b, __u32 off)
{
	off &= XFW_CT_BUF_MASK - 3;
	return ((__u32)b[off] << 24) | ((__u32)b[off + 1] << 16) |
	       ((__u32)b[off + 2] << 8) | (__u32)b[off + 3];
}

static __always_inline __u32 xfw_rd16(const __u8 *b, __u32 off)
{
	off &= XFW_CT_BUF_MASK - 1;
	return ((__u32)b[off] << 8) | (__u32)b[off + 1];
}

/* ICMP types (RFC 792) and ICMPv6 types (RFC 4443, 2710, 4861, 3810). */
#define XFW_ICMP_ECHOREPLY 0
#define XFW_ICMP_ECHO 8
#define XFW_ICMP_MAX_TYPE 18 /* NR_ICMP_TYPES */
#define XFW_ICMP6_ECHO 128
#define XFW_ICMP6_NI_QUERY 139
#define XFW_ICMP6_NI_REPLY 140

/* xfw_icmp_is_err: the ICMP (v4) error types: unreachable, source quench,
 * redirect, time exceeded, parameter problem. */
static __always_inline int xfw_icmp_is_err(__u32 t)
{
	return t == 3 || t == 4 || t == 5 || t == 11 || t == 12;
}

/* xfw_icmp_query returns the request type of a query or reply type (the
 * kernel's invmap), or -1 when the type is neither. *reply is set for a
 * reply type. */
static __always_inline int xfw_icmp_query(__u8 fam, __u32 t, int *reply)
{
	*reply = 0;
	if (fam == 0) {
		switch (t) {
		case 8: case 13: case 15: case 17:
			return t;
		case 0:
			*reply = 1;
			return 8;
		case 14: case 16: case 18:
			*reply = 1;
			return t - 1;
		}
		return -1;
	}
	switch (t) {
	case XFW_ICMP6_ECHO:
	case XFW_ICMP6_NI_QUERY:
		return t;
	case XFW_ICMP6_ECHO + 1:
	case XFW_ICMP6_NI_REPLY:
		*reply = 1;
		return t - 1;
	}
	return -1;
}

/* xfw_icmp6_untracked: MLD, neighbour discovery and multicast router
 * discovery advertisements and solicitations (151, 152) are never
 * tracked (noct_valid_new in nf_conntrack_proto_icmpv6.c). */
static __always_inline int xfw_icmp6_untracked(__u32 t)
{
	return (t >= 130 && t <= 136) || t == 143 || t == 151 || t == 152;
}

/* xfw_ct_ports reports whether the protocol's key carries ports (TCP,
 * UDP, UDP-Lite, SCTP; DCCP is tracked as generic, as by Linux 6.16 and
 * later, which have no DCCP tracker). */
static __always_inline int xfw_ct_ports(__u32 proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
	       proto == IPPROTO_SCTP;
}

/* GRE (nf_conntrack_proto_gre.c gre_pkt_to_tuple): version 1, PPTP's
 * enhanced GRE, carrying PPP is keyed by its call ID, the tuple's
 * destination key (the destination port's place in xfw's key); the source
 * key comes from the PPTP helper's keymap, which xfw has not: 0, as in a
 * namespace without the helper. Other versions, and a version 1 header
 * too short for a call ID, have keys 0 (tracked by the addresses); version
 * 1 carrying anything but PPP has no tuple: INVALID. */
#define XFW_GRE_VERSION 0x07     /* the version: low bits of the second byte */
#define XFW_GRE_VERSION_1 1
#define XFW_GRE_PROTO_PPP 0x880b /* the protocol field, bytes 2-3 */
#define XFW_GRE_V1_HLEN 8        /* flags, protocol, payload length, call ID */
#define XFW_GRE_CALL_ID 6        /* the call ID's offset */

/* xfw_gre_key returns the destination key of a GRE header of len bytes
 * (at most those of XFW_GRE_V1_HLEN that are there) whose second byte,
 * protocol and call ID are ver, proto and call: the call ID, 0, or -1 for
 * INVALID. */
static __always_inline int xfw_gre_key(__u32 len, __u32 ver, __u32 proto, __u32 call)
{
	if (len < 4 || (ver & XFW_GRE_VERSION) != XFW_GRE_VERSION_1)
		return 0;
	if (len < XFW_GRE_V1_HLEN)
		return 0;
	if (proto != XFW_GRE_PROTO_PPP)
		return -1;
	return call & 0xffff;
}

/* xfw_ct_gre_key is xfw_gre_key of the GRE header at off in b (a
 * tracking buffer), of which len bytes are there. */
static __always_inline int xfw_ct_gre_key(const __u8 *b, __u32 off, __u32 len)
{
	if (len < 4)
		return 0;
	return xfw_gre_key(len, b[xfw_ix(off + 1)], xfw_rd16(b, off + 2), xfw_rd16(b, off + XFW_GRE_CALL_ID));
}

/* xfw_ct_mkkey fills k for a packet from (shi,slo,sport) to (dhi,dlo,dport)
 * and returns 1 when the source is endpoint b. Endpoints are ordered, so
 * both directions share the key. */
static __always_inline int xfw_ct_mkkey(struct xfw_ct_key *k, __u8 fam, __u8 proto,
					__u64 shi, __u64 slo, __u16 sport,
					__u64 dhi, __u64 dlo, __u16 dport)
{
	int swap = shi > dhi || (shi == dhi && (slo > dlo || (slo == dlo && sport > dport)));

	k->fam = fam;
	k->proto = proto;
	k->pad = 0;
	if (swap) {
		k->a_hi = dhi; k->a_lo = dlo; k->a_port = dport;
		k->b_hi = shi; k->b_lo = slo; k->b_port = sport;
	} else {
		k->a_hi = shi; k->a_lo = slo; k->a_port = sport;
		k->b_hi = dhi; k->b_lo = dlo; k->b_port = dport;
	}
	return swap;
}

/* xfw_ct_mkkey_icmp fills k for an ICMP query: endpoint a is always the
 * requester, and the request type and the code are part of the key (pad:
 * type in the low byte, code in the high one), so echo and timestamp
 * queries with one id, queries each way, or echo requests with different
 * codes are different connections, as in the kernel, whose tuples carry
 * type, code and id (icmp_pkt_to_tuple; a reply keeps the request's code,
 * icmp_invert_tuple). */
static __always_inline void xfw_ct_mkkey_icmp(struct xfw_ct_key *k, __u8 fam, __u8 proto,
					      __u64 rhi, __u64 rlo, __u64 thi, __u64 tlo,
					      __u16 id, __u8 reqtype, __u8 code)
{
	k->fam = fam;
	k->proto = proto;
	k->pad = reqtype | (__u16)code << 8;
	k->a_hi = rhi; k->a_lo = rlo;
	k->b_hi = thi; k->b_lo = tlo;
	k->a_port = id;
	k->b_port = id;
}

/* xfw_ct_self reports whether k's tuple is its own inverse: both
 * endpoints the same address and port (a host talking to itself). */
static __always_inline int xfw_ct_self(const struct xfw_ct_key *k)
{
	return k->a_hi == k->b_hi && k->a_lo == k->b_lo && k->a_port == k->b_port;
}

/* Which table holds a found entry. */
#define XFW_CTT_NONE 0
#define XFW_CTT_MAIN 1
#define XFW_CTT_EMB 2

/* Values of an entry's lock word: free, held, and (xfw_ct_new only, for
 * good) moved: xfw_ct_promote copied the entry into xfw_ct under the lock
 * and released it with this value, so nobody updates it any more. */
#define XFW_CT_LOCK_FREE 0
#define XFW_CT_LOCK_HELD 1
#define XFW_CT_LOCK_MOVED 2

/* xfw_ctstat_add adds n to statistic i (enum xfw_ctstat) of this CPU. A
 * global function: verified once, whatever calls it. */
__attribute__((noinline)) int xfw_ctstat_add(__u32 i, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&xfw_ct_stats, &i);

	if (v)
		*v += n;
	return 0;
}

/* xfw_ct_gone counts an entry the tracker removed from table. */
static __always_inline void xfw_ct_gone(int table)
{
	xfw_ctstat_add(table == XFW_CTT_MAIN ? XFW_CTSTAT_MAIN_GONE : XFW_CTSTAT_NEW_GONE, 1);
}

/* xfw_ct_find looks k up in both tables; an expired entry is deleted and
 * not returned. The order covers a promotion on another CPU (ct_track.h
 * xfw_ct_promote): xfw_ct, xfw_ct_new unless its entry is marked moved,
 * then xfw_ct again. */
static __always_inline struct xfw_ct_entry *xfw_ct_find(struct xfw_ct_key *k, __u64 now,
							int *table)
{
	struct xfw_ct_entry *e;

	*table = XFW_CTT_NONE;
	e = bpf_map_lookup_elem(&xfw_ct, k);
	if (e) {
		if ((__s64)(e->v.expires - now) > 0) {
			*table = XFW_CTT_MAIN;
			return e;
		}
		if (bpf_map_delete_elem(&xfw_ct, k) == 0)
			xfw_ct_gone(XFW_CTT_MAIN);
	}
	e = bpf_map_lookup_elem(&xfw_ct_new, k);
	if (e && e->lock != XFW_CT_LOCK_MOVED) {
		if ((__s64)(e->v.expires - now) > 0) {
			*table = XFW_CTT_EMB;
			return e;
		}
		if (bpf_map_delete_elem(&xfw_ct_new, k) == 0)
			xfw_ct_gone(XFW_CTT_EMB);
		return 0;
	}
	/* Missed in both, or found moved: a promotion moved the connection
	 * after the first lookup (inserted into xfw_ct, then marked moved,
	 * then deleted from xfw_ct_new; ct_track.h xfw_ct_promote). Its
	 * insert came before the mark and the delete, so xfw_ct has it now. */
	e = bpf_map_lookup_elem(&xfw_ct, k);
	if (e && (__s64)(e->v.expires - now) > 0) {
		*table = XFW_CTT_MAIN;
		return e;
	}
	return 0;
}

/* xfw_ct_lookup_tab returns the entry of k in either table, expired or
 * not, and says which table in *table: the one in xfw_ct when both have
 * it (a promotion under way, ct_track.h xfw_ct_promote), and after a miss
 * in both xfw_ct again (as xfw_ct_find). */
static __always_inline struct xfw_ct_entry *xfw_ct_lookup_tab(struct xfw_ct_key *k, int *table)
{
	struct xfw_ct_entry *e = bpf_map_lookup_elem(&xfw_ct, k);

	*table = XFW_CTT_MAIN;
	if (e)
		return e;
	e = bpf_map_lookup_elem(&xfw_ct_new, k);
	if (e && e->lock != XFW_CT_LOCK_MOVED) {
		*table = XFW_CTT_EMB;
		return e;
	}
	return bpf_map_lookup_elem(&xfw_ct, k);
}

/* xfw_ct_lookup is xfw_ct_lookup_tab without the table: the readers and
 * writers besides the tracker (CONNMARK, --ctstate's NAT bits,
 * --ctexpire) use it. */
static __always_inline struct xfw_ct_entry *xfw_ct_lookup(struct xfw_ct_key *k)
{
	int table;

	return xfw_ct_lookup_tab(k, &table);
}

/* xfw_ct_peek looks k up in both tables, expired entries included (the
 * loopback INPUT reads what OUTPUT left, xfw_ct_track). */
static __always_inline struct xfw_ct_entry *xfw_ct_peek(struct xfw_ct_key *k, int *table)
{
	struct xfw_ct_entry *e;

	*table = XFW_CTT_MAIN;
	e = bpf_map_lookup_elem(&xfw_ct, k);
	if (e)
		return e;
	*table = XFW_CTT_EMB;
	e = bpf_map_lookup_elem(&xfw_ct_new, k);
	if (!e)
		*table = XFW_CTT_NONE;
	return e;
}

static __always_inline void xfw_ct_delete(struct xfw_ct_key *k, int table)
{
	long rc;

	if (table == XFW_CTT_MAIN)
		rc = bpf_map_delete_elem(&xfw_ct, k);
	else
		rc = bpf_map_delete_elem(&xfw_ct_new, k);
	if (rc == 0)
		xfw_ct_gone(table);
}

/* Compare-and-swap attempts before waiting in a bpf_loop, and the
 * attempts of that wait before updating without the lock. The holder runs
 * on another CPU with bottom halves off (XDP in NAPI, TC under
 * rcu_read_lock_bh), so it is never preempted by this one and a tracker
 * run takes well under a microsecond; but a loaded host (a virtual CPU
 * descheduled) can stretch that: 64 attempts were too few, and updates
 * of two packets of one connection on two CPUs at once were lost, one
 * overwriting the other (TestCtPromoteRace); 2^16 more attempts, about
 * 2 ms, still gave up once in 400 such races here. 2^20 attempts, each a
 * plain read until the word looks free (no cache-line bouncing), wait
 * tens of milliseconds at most, a stall only a descheduled holder
 * causes. */
#define XFW_CT_LOCK_TRIES 8
#define XFW_CT_LOCK_SPINS (1 << 20)

/* The wait of xfw_ct_lock: the lock word and the outcome (0 while not
 * taken). */
struct xfw_ct_lock_wait {
	__u64 *lk;
	__u64 got;
};

static long xfw_ct_lock_spin(__u32 i, struct xfw_ct_lock_wait *w)
{
	__u64 old;

	if (!w->lk)
		return 1;
	if (*(volatile __u64 *)w->lk == XFW_CT_LOCK_HELD)
		return 0;
	old = __sync_val_compare_and_swap(w->lk, XFW_CT_LOCK_FREE, XFW_CT_LOCK_HELD);
	if (old == XFW_CT_LOCK_FREE)
		w->got = 1;
	else if (old == XFW_CT_LOCK_MOVED)
		w->got = XFW_CT_LOCK_MOVED;
	return w->got != 0;
}

/* xfw_ct_lock takes the lock word lk (1), gives up (0), or finds the
 * entry moved to xfw_ct (XFW_CT_LOCK_MOVED: not taken). A global
 * function: its attempts are verified once, not on every path of the
 * tracker that reaches them. */
__attribute__((noinline)) int xfw_ct_lock(__u64 *lk)
{
	struct xfw_ct_lock_wait w = {.lk = lk, .got = 0};
	__u64 old;

	if (!lk)
		return 0;
#pragma unroll
	for (int i = 0; i < XFW_CT_LOCK_TRIES; i++) {
		old = __sync_val_compare_and_swap(lk, XFW_CT_LOCK_FREE, XFW_CT_LOCK_HELD);
		if (old == XFW_CT_LOCK_FREE)
			return 1;
		if (old == XFW_CT_LOCK_MOVED)
			return XFW_CT_LOCK_MOVED;
	}
	bpf_loop(XFW_CT_LOCK_SPINS, xfw_ct_lock_spin, &w, 0);
	if (w.got == 0) {
		/* The update goes ahead unserialised: counted, as the one
		 * way left for two CPUs' updates to overwrite each other. */
		xfw_ctstat_add(XFW_CTSTAT_LOCK_TIMEOUT, 1);
		return 0;
	}
	return w.got == 1 ? 1 : XFW_CT_LOCK_MOVED;
}

static __always_inline void xfw_ct_unlock(__u64 *lk)
{
	__sync_lock_test_and_set(lk, 0);
}

/* xfw_ct_lock_found locks the entry *e that a lookup of k found in
 * *table and returns xfw_ct_lock's outcome (1 held, 0 given up) for the
 * entry *e then points to. Two things can happen between the lookup and
 * the lock (ct_track.h xfw_ct_promote):
 * - the entry moved to xfw_ct (its lock word says so): *e becomes the
 *   copy in xfw_ct, locked in turn;
 * - the entry left xfw_ct_new (moved, or deleted by an expiry or
 *   conntrack -D) and the LRU table, which hands a freed element to the
 *   next insert at once (a preallocated map: no grace period), gave its
 *   memory to another connection, whose lock word is free or held, not
 *   moved: taking that lock would update a stranger and lose this
 *   packet's update. So a lock taken in xfw_ct_new is checked against a
 *   new lookup of k; when the element is not k's any more, *e becomes the
 *   copy in xfw_ct, or 0 (the connection is gone) when there is none.
 * A moved entry whose copy is gone (deleted meanwhile) stays *e, not
 * locked: the packet keeps the connection it found, as the kernel's
 * keeps its reference. */
static __always_inline int xfw_ct_lock_found(struct xfw_ct_key *k, struct xfw_ct_entry **e,
					     int *table)
{
	struct xfw_ct_entry *m;
	int locked = xfw_ct_lock(&(*e)->lock), stale = 0;

	if (locked == 1 && *table == XFW_CTT_EMB && bpf_map_lookup_elem(&xfw_ct_new, k) != *e) {
		xfw_ct_unlock(&(*e)->lock);
		locked = XFW_CT_LOCK_MOVED;
		stale = 1;
	}
	if (locked != XFW_CT_LOCK_MOVED)
		return locked;
	m = bpf_map_lookup_elem(&xfw_ct, k);
	if (!m) {
		if (stale)
			*e = 0;
		return 0;
	}
	*e = m;
	*table = XFW_CTT_MAIN;
	return xfw_ct_lock(&m->lock);
}

static __always_inline __u32 xfw_ctv(__u32 state, __u32 reply, __u32 status, __u32 proto)
{
	return state | (reply ? XFW_CTV_DIR_REPLY : 0) |
	       ((status & 0xf) << XFW_CTV_STATUS_SHIFT) | ((proto & 0xff) << XFW_CTV_PROTO_SHIFT);
}

/* xfw_ct_icmp_ports sets an ICMP connection's "ports" as the kernel's
 * tuples have them: the identifier as source both ways, type << 8 | code as
 * destination, the request's in the original tuple, the reply's (the
 * request's type + 1 for every query xfw tracks: 8/0 excepted) in the
 * reply tuple. */
static __always_inline void xfw_ct_icmp_ports(struct xfw_pkt *p, __u32 id, __u32 type, __u32 code)
{
	__u32 rtype = type == XFW_ICMP_ECHO ? XFW_ICMP_ECHOREPLY : type + 1;

	p->ct_osport = id;
	p->ct_odport = (type << 8) | code;
	p->ct_rsport = id;
	p->ct_rdport = ((rtype & 0xff) << 8) | code;
}

/* xfw_ct_tuple gives p its connection's original tuple (XFW_F_CTOSRC …):
 * the originator's end of key k first; ICMP queries: the identifier and
 * the request's type << 8 | code, as the kernel's tuple has them. A
 * global function: inlined, it was verified again for every path of the
 * tracker reaching either call. */
__attribute__((noinline)) int xfw_ct_tuple(struct xfw_pkt *p, struct xfw_ct_key *k,
					   struct xfw_ct_val *v)
{
	if (!p || !k || !v)
		return 0;
	if (v->status & XFW_CTST_ORIG_B) {
		p->ct_osrc_hi = k->b_hi;
		p->ct_osrc_lo = k->b_lo;
		p->ct_odst_hi = k->a_hi;
		p->ct_odst_lo = k->a_lo;
		p->ct_osport = k->b_port;
		p->ct_odport = k->a_port;
	} else {
		p->ct_osrc_hi = k->a_hi;
		p->ct_osrc_lo = k->a_lo;
		p->ct_odst_hi = k->b_hi;
		p->ct_odst_lo = k->b_lo;
		p->ct_osport = k->a_port;
		p->ct_odport = k->b_port;
	}
	p->ct_rsport = p->ct_odport;
	p->ct_rdport = p->ct_osport;
	/* DNAT: the key holds the translated tuple; the original
	 * destination is kept with the connection (nat.h). */
	if (v->nat_flags & XFW_NAT_F_DST) {
		p->ct_odst_hi = v->nat_addr_hi;
		p->ct_odst_lo = v->nat_addr;
		p->ct_odport = v->nat_port;
	}
	/* SNAT: the replies come to the translated source port
	 * (--ctrepldstport; nat_snat.h). */
	if (v->nat_flags & XFW_NAT_F_SRC)
		p->ct_rdport = v->snat_port;
	/* A DNAT clash: the key holds the new source port, which the
	 * replies come to (nat_clash.h). */
	if (v->nat_flags & XFW_NAT_F_CLASH)
		p->ct_osport = v->nat_sport;
	if (k->proto == IPPROTO_ICMP || k->proto == IPPROTO_ICMPV6)
		xfw_ct_icmp_ports(p, p->ct_osport, v->icmp_type, v->icmp_code);
	return 0;
}

#endif /* XFW_CT_CONN_H */
