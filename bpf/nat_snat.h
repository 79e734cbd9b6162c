/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_snat.h — source NAT (nat POSTROUTING's SNAT and MASQUERADE) for
 * IPv4 TCP and UDP, with the kernel's semantics (nf_nat_core.c
 * get_unique_tuple and nf_nat_l4proto_unique_tuple, nf_nat_masquerade.c):
 *
 *  - Decided by a connection's first packet in the walk's nat POSTROUTING
 *    segment (entry action XFW_ACT_SNAT, an ACCEPT with a translation):
 *    forwarded packets at XDP (the FORWARD walk ends with POSTROUTING),
 *    the host's own at TC egress (OUTPUT's walk).
 *  - The new source: SNAT's address, or MASQUERADE's, the output
 *    interface's primary address (xfw_nat_ifaddr; none: dropped, as the
 *    kernel drops it). The port: the one given, else the packet's own if
 *    the translated tuple is free, else a free one in the kernel's range
 *    for it (1-511, 600-1023 or 1024-65535 after the original port's),
 *    searched from a random offset (128 tries, then 64, 32 and 16 from new
 *    offsets, as the kernel does); none free, or a given port taken:
 *    dropped, as the kernel's confirmation drops the clash. A tuple is
 *    taken when a live connection answers to it: a translation's wire
 *    tuple in xfw_nat, or a connection keyed by it.
 *  - The connection keeps its original tuple as key (filter chains see
 *    the original source; replies come back to it at PREROUTING before
 *    routing) and the new source in xfw_ct_val.snat_*; xfw_nat maps the
 *    replies' wire tuple to it (kind XFW_NAT_F_SRC). The source is
 *    rewritten as the packet leaves (nat.h xfw_nat_fwd_tc, xfw_nat_post_tc),
 *    the replies' destination before routing (xfw_nat_pre_xdp).
 *
 * Conventions: xfw_nat_snat is a global function; the port search runs
 * under bpf_loop (one candidate per step).
 *
 * Packets without TCP or UDP ports (ICMP echo, protocols without ports)
 * keep their identifier: nat_query.h.
 *
 * Includes: nat.h, nat_query.h.
 */
#ifndef XFW_NAT_SNAT_H
#define XFW_NAT_SNAT_H

#include "nat.h"
#include "nat_query.h"

/* The kernel's source port ranges when none is given, after the
 * original port (nf_nat_l4proto_unique_tuple). */
#define XFW_SNAT_LOW_MIN 1
#define XFW_SNAT_LOW_SIZE 511    /* 1-511 for ports below 512 */
#define XFW_SNAT_MID_MIN 600
#define XFW_SNAT_MID_SIZE 424    /* 600-1023 for ports below 1024 */
#define XFW_SNAT_HIGH_MIN 1024
#define XFW_SNAT_HIGH_SIZE 64512 /* 1024-65535 */
#define XFW_SNAT_TRIES 128       /* the kernel's max_attempts */
#define XFW_SNAT_LAST_TRIES 16   /* it halves the tries down to this */

/* xfw_snat_taken reports whether the reply tuple np->key[XFW_NAT_PS] with
 * destination port port is a live connection's. */
static __always_inline int xfw_snat_taken(struct xfw_nat_pend *np, __u32 port)
{
	struct xfw_nat_key *k = &np->key[XFW_NAT_PS];
	struct xfw_nat_val *v;
	struct xfw_ct_entry *e;

	k->dport = port;
	v = bpf_map_lookup_elem(&xfw_nat, k);
	if (v) {
		e = xfw_nat_conn(&v->ct);
		if (e && xfw_nat_owns(&e->v, v->kind, k->daddr, port))
			return 1;
	}
	xfw_ct_mkkey(&np->fwd, 0, k->proto, 0, k->daddr, port, 0, k->saddr, k->sport);
	return xfw_nat_conn(&np->fwd) != 0;
}

/* The port search's state, on xfw_nat_snat's stack (bpf_loop's context). */
struct xfw_snat_search {
	struct xfw_nat_pend *np;
	__u32 min, size, off;
	__u32 found; /* the free port, 0 while none */
};

static long xfw_snat_try(__u32 i, struct xfw_snat_search *s)
{
	__u32 port;

	if (!s->np || !s->size)
		return 1;
	port = s->min + (s->off + i) % s->size;
	if (!xfw_snat_taken(s->np, port)) {
		s->found = port;
		return 1;
	}
	return 0;
}

/* xfw_snat_search finds a free source port for the pending reply tuple
 * in the kernel's range after orig, the original port: 0 when none. */
static __always_inline __u32 xfw_snat_search(struct xfw_nat_pend *np, __u32 orig)
{
	struct xfw_snat_search s = {.np = np};
	__u32 tries = XFW_SNAT_TRIES;

	if (orig < 512) {
		s.min = XFW_SNAT_LOW_MIN;
		s.size = XFW_SNAT_LOW_SIZE;
	} else if (orig < 1024) {
		s.min = XFW_SNAT_MID_MIN;
		s.size = XFW_SNAT_MID_SIZE;
	} else {
		s.min = XFW_SNAT_HIGH_MIN;
		s.size = XFW_SNAT_HIGH_SIZE;
	}
	for (int round = 0; round < 4; round++) {
		s.off = bpf_get_prandom_u32() % s.size;
		bpf_loop(tries, xfw_snat_try, &s, 0);
		if (s.found)
			return s.found;
		tries /= 2;
		if (tries < XFW_SNAT_LAST_TRIES)
			break;
	}
	return 0;
}

/* xfw_nat_snat applies an SNAT or MASQUERADE verdict (addr 0: the output
 * interface oif's address; port 0: chosen) to a connection's first packet
 * (cs: its tracking, a new connection pending): the new source kept with
 * the pending connection, the replies' mapping left for xfw_nat_confirm.
 * The packet itself is rewritten as it leaves. Returns 0, or -1 when the
 * packet must be dropped. A global function. */
__attribute__((noinline)) int xfw_nat_snat(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					   __u32 addr, __u32 port, __u32 oif)
{
	__u32 zero = 0, *a;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_key *k;
	struct xfw_nat_val *v;

	__u32 kind = XFW_NATQ_NONE, sport, dport;

	if (!p || !cs || !np)
		return -1;
	sport = p->sport;
	dport = p->dport;
	if (!xfw_nat_translatable(p)) {
		/* Without ports (nat_query.h): the echo identifier or none,
		 * kept. */
		kind = xfw_natq_kind(p);
		if (kind == XFW_NATQ_NONE || (kind == XFW_NATQ_ECHO && (p->icmp >> 8) != XFW_ICMP_ECHO))
			return -1;
		sport = dport = kind == XFW_NATQ_ECHO ? xfw_rd16(cs->buf, XFW_ICMP_ID_OFF) : 0;
	}
	/* Loopback's packets are the host's own both ways: not translated
	 * (docs/differences.md). */
	if (cs->pending != XFW_CTP_CREATE || oif == XFW_LOOPBACK_IFINDEX)
		return -1;
	if (!addr) {
		a = bpf_map_lookup_elem(&xfw_nat_ifaddr, &oif);
		if (!a || !*a)
			return -1; /* MASQUERADE without an address drops */
		addr = *a;
	}
	k = &np->key[XFW_NAT_PS];
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr = p->dst_lo;
	k->daddr = addr;
	k->sport = dport;
	k->proto = p->proto;
	if (kind != XFW_NATQ_NONE) {
		/* No other identifier is searched (docs/differences.md);
		 * --to-ports does not apply (the kernel's range is the
		 * ports'). */
		port = sport;
		k->dport = port;
		if (xfw_natq_taken(np, kind, p->icmp & 0xff))
			return -1;
	} else if (port) {
		if (xfw_snat_taken(np, port))
			return -1;
	} else if (!xfw_snat_taken(np, p->sport)) {
		port = p->sport; /* the port is kept when the tuple is free */
	} else {
		port = xfw_snat_search(np, p->sport);
		if (!port)
			return -1;
	}
	k->dport = port;
	v = &np->val[XFW_NAT_PS];
	v->ct = cs->key;
	v->to_addr = p->src_lo;
	v->to_port = sport;
	v->kind = XFW_NAT_F_SRC;
	v->pad = 0;
	cs->nv.snat_addr = addr;
	cs->nv.snat_port = port;
	cs->nv.nat_flags |= XFW_NAT_F_SRC;
	np->pending |= XFW_NAT_F_SRC;
	return 0;
}

#endif /* XFW_NAT_SNAT_H */
