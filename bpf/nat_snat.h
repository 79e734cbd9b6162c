/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_snat.h — source NAT (nat POSTROUTING's SNAT and MASQUERADE) for
 * IPv4 and IPv6 TCP and UDP, with the kernel's semantics (nf_nat_core.c
 * get_unique_tuple and nf_nat_l4proto_unique_tuple, nf_nat_masquerade.c):
 *
 *  - Decided by a connection's first packet in the walk's nat POSTROUTING
 *    segment (entry action XFW_ACT_SNAT, an ACCEPT with a translation):
 *    forwarded packets at XDP (the FORWARD walk ends with POSTROUTING),
 *    the host's own at TC egress (OUTPUT's walk); or in nat INPUT's
 *    segment (SNAT only), packets delivered to the host at XDP, rewritten
 *    after INPUT accepted them (nat_out.h xfw_nat_in_xdp).
 *  - The new source: SNAT's address (without one, `--to-source :PORT`,
 *    the packet's own), or MASQUERADE's, the output interface's primary
 *    address (xfw_nat_ifaddr; none: dropped, as the
 *    kernel drops it); IPv6's, the source the kernel's routing picks
 *    for the destination on that interface (nat6.h xfw_nat6_masq_xdp).
 *    The port: the one given, else the packet's own if
 *    the translated tuple is free, else a free one in the kernel's range
 *    for it (1-511, 600-1023 or 1024-65535 after the original port's),
 *    searched from a random offset (nat_range.h, which also chooses in
 *    address and port ranges and with --random, --random-fully,
 *    --persistent); none free, or a given port taken: dropped, as the
 *    kernel's confirmation drops the clash. A tuple is taken when a live
 *    connection answers to it: a translation's wire tuple in xfw_nat, or
 *    a connection keyed by it.
 *  - The connection keeps its original tuple as key (filter chains see
 *    the original source; replies come back to it at PREROUTING before
 *    routing) and the new source in xfw_ct_val.snat_*; xfw_nat maps the
 *    replies' wire tuple to it (kind XFW_NAT_F_SRC). The source is
 *    rewritten as the packet leaves (nat.h xfw_nat_fwd_tc, xfw_nat_post_tc),
 *    the replies' destination before routing (xfw_nat_pre_xdp).
 *
 * Conventions: xfw_nat_snat is a global function.
 *
 * Packets without TCP or UDP ports (ICMP and ICMPv6 echo, protocols
 * without ports) keep their identifier: nat_query.h.
 *
 * Includes: nat.h, nat_query.h, nat_range.h.
 */
#ifndef XFW_NAT_SNAT_H
#define XFW_NAT_SNAT_H

#include "nat.h"
#include "nat_query.h"
#include "nat_range.h"

/* xfw_nat_snat applies an SNAT or MASQUERADE verdict (addr 0: the output
 * interface oif's address; port 0: chosen) to a connection's first packet
 * (cs: its tracking, a new connection pending): the new source kept with
 * the pending connection, the replies' mapping left for xfw_nat_confirm.
 * The packet itself is rewritten as it leaves. Returns 0, or -1 when the
 * packet must be dropped. A global function. */
__attribute__((noinline)) int xfw_nat_snat(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					   __u32 addr, __u32 port, __u32 oif)
{
	struct xfw_nat_ifaddr_val *a;
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_range *r;
	struct xfw_nat_key *k;
	struct xfw_nat_val *v;

	__u32 kind = XFW_NATQ_NONE, sport, dport, chosen = 0;

	if (!p || !cs || !np)
		return -1;
	sport = p->sport;
	dport = p->dport;
	r = &np->range;
	if (!xfw_nat_translatable(p)) {
		/* Without ports (nat_query.h): the echo identifier or none,
		 * kept. */
		kind = xfw_natq_kind(p);
		if (kind == XFW_NATQ_NONE || (kind == XFW_NATQ_ECHO && (p->icmp >> 8) != xfw_natq_echo(p->fam, 0)))
			return -1;
		sport = dport = kind == XFW_NATQ_ECHO ? xfw_rd16(cs->buf, XFW_ICMP_ID_OFF) : 0;
		/* GRE: its keys, kept (the kernel changes them only for a
		 * PPTP master's expected connection): source 0, destination
		 * version 1's call ID (ct_conn.h xfw_gre_key). */
		if (p->proto == IPPROTO_GRE && xfw_ct_gre_key(cs->buf, 0, cs->buflen) > 0)
			dport = xfw_ct_gre_key(cs->buf, 0, cs->buflen);
	}
	/* Loopback's packets are the host's own both ways: not translated
	 * (docs/differences.md). */
	if (cs->pending != XFW_CTP_CREATE || oif == XFW_LOOPBACK_IFINDEX)
		return -1;
	r->addr_hi = 0;
	r->addr = addr;
	if (addr == XFW_NAT_KEEP_ADDR) {
		r->addr_hi = p->src_hi;
		r->addr = p->src_lo;
	} else if (!addr) {
		if (p->fam != 0) {
			/* MASQUERADE: the kernel's source for the route (nat6.h) */
			if (xfw_nat6_masq_src(np, p))
				return -1;
		} else {
			a = bpf_map_lookup_elem(&xfw_nat_ifaddr, &oif);
			if (!a || !a->addr4)
				return -1; /* MASQUERADE without an address drops */
			r->addr = a->addr4;
		}
	} else if (p->fam != 0 && !(port & XFW_NAT_RANGED)) {
		return -1; /* an IPv6 address is its range probe's (XFW_NAT_ADDR6) */
	}
	if ((port & XFW_NAT_RANGED) || (!port && kind == XFW_NATQ_NONE)) {
		/* A range, random flags, or the port to choose. */
		__u64 to = xfw_natr_snat(p, port, dport << 16 | sport, kind == XFW_NATQ_NONE);

		if (to == XFW_NATR_NONE)
			return -1;
		port = to & 0xffff;
		chosen = 1;
	}
	k = &np->key[XFW_NAT_PS];
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr_hi = p->dst_hi;
	k->saddr = p->dst_lo;
	k->daddr_hi = r->addr_hi;
	k->daddr = r->addr;
	k->sport = dport;
	k->proto = p->proto;
	k->fam = p->fam;
	if (kind != XFW_NATQ_NONE) {
		/* No other identifier is searched (docs/differences.md);
		 * --to-ports does not apply (the kernel's range is the
		 * ports'). */
		port = sport;
		k->dport = port;
		if (xfw_natq_taken(np, kind, p->icmp & 0xff))
			return -1;
	} else if (!chosen && xfw_snat_taken(np, port)) {
		return -1; /* the one port given is taken */
	}
	k->dport = port;
	v = &np->val[XFW_NAT_PS];
	v->ct = cs->key;
	xfw_nat_val_set(v, p->src_hi, p->src_lo, sport, XFW_NAT_F_SRC);
	cs->nv.snat_addr_hi = k->daddr_hi;
	cs->nv.snat_addr = k->daddr;
	cs->nv.snat_port = port;
	cs->nv.nat_flags |= XFW_NAT_F_SRC;
	np->pending |= XFW_NAT_F_SRC;
	return 0;
}

#endif /* XFW_NAT_SNAT_H */
