/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_null.h — the kernel's null source binding of a new connection no
 * SNAT or MASQUERADE translated, for protocols without ports
 * (nf_nat_core.c nf_nat_alloc_null_binding, get_unique_tuple and
 * nf_nat_used_tuple; nf_conntrack_core.c __nf_conntrack_confirm):
 *
 *  - At nat POSTROUTING every new connection gets a source mapping, the
 *    identity when no rule translated it. When its reply tuple is
 *    already a live connection's (another connection's source was
 *    translated to this one's destination-facing tuple: a host behind
 *    MASQUERADE sending protocol 255 to a peer, then the host itself
 *    sending protocol 255 to the same peer from the masquerading
 *    address), the kernel searches another tuple: TCP and UDP get
 *    another source port, an ICMP echo another identifier; a protocol
 *    without ports has none to change, and the confirmation finds the
 *    reply tuple taken and drops the packet (found against
 *    iptables-legacy: the raw socket's send fails with EPERM).
 *  - The same when a DNAT by the address gave an earlier connection this
 *    one's tuple (a host's protocol 253 to fw's address DNATed to a far
 *    host, then the host's protocol 253 to the far host itself: the new
 *    connection's reply tuple is the DNATed one's), in either order.
 *  - xfw drops such a packet too: xfw_nat_null_clash reports it, before
 *    the connection is confirmed. (TCP, UDP and ICMP echo are not
 *    searched: docs/differences.md "Tables".)
 *
 * Conventions: xfw_nat_null_clash is a global function (verified once),
 * called where the forwarding and output paths confirm a connection.
 *
 * Includes: nat.h, nat_query.h.
 */
#ifndef XFW_NAT_NULL_H
#define XFW_NAT_NULL_H

#include "nat.h"
#include "nat_query.h"

/* xfw_nat_null_clash reports whether p, the first packet of a new
 * connection (cs) of a protocol without ports that no source translation
 * changed, has as its reply tuple a live source translation's wire tuple
 * (xfw_nat, kind XFW_NAT_F_SRC): the kernel drops it at confirmation. A
 * global function. */
__attribute__((noinline)) int xfw_nat_null_clash(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	struct xfw_nat_key k = {};

	if (!p || !cs || cs->pending != XFW_CTP_CREATE || xfw_natq_kind(p) != XFW_NATQ_ADDR)
		return 0;
	/* A DNAT by the address to a tuple a live connection holds
	 * (xfw_natq_dnat_prep lets it on), or a packet that came with the
	 * tuple a DNAT gave a live connection (ct_track.h
	 * xfw_ct_dnat_stranger): no port to change either, the confirmation
	 * drops it after the chains counted it. */
	if (!(cs->nv.nat_flags & XFW_NAT_F_SRC) && xfw_nat_conn(&cs->key))
		return 1;
	if ((cs->nv.nat_flags & XFW_NAT_F_SRC) || !xfw_nat_enabled())
		return 0;
	/* The reply's wire tuple: no ports (xfw_nat_snat keys a protocol
	 * without ports with both 0), GRE's keys swapped (the source key
	 * version 1's call ID). */
	if (p->proto == IPPROTO_GRE && xfw_ct_gre_key(cs->buf, 0, cs->buflen) > 0)
		k.sport = xfw_ct_gre_key(cs->buf, 0, cs->buflen);
	k.saddr_hi = p->dst_hi;
	k.saddr = p->dst_lo;
	k.daddr_hi = p->src_hi;
	k.daddr = p->src_lo;
	k.proto = p->proto;
	k.fam = p->fam;
	return xfw_nat_held(&k, XFW_NAT_F_SRC, 0, 0);
}

#endif /* XFW_NAT_NULL_H */
