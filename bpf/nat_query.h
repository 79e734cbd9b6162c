/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_query.h — source NAT (SNAT, MASQUERADE) and destination NAT
 * (DNAT, REDIRECT: xfw_natq_dnat_xdp) of packets without ports, as the
 * kernel's nf_nat_proto.c does for them (IPv4 here; IPv6's
 * rewrites, ICMPv6's checksum covering the addresses, in nat6_query.h):
 *
 *  - ICMP and ICMPv6 echo requests and their replies (the identifier
 *    plays the port: nf_nat_icmp_unique_tuple, icmp_manip_pkt,
 *    icmpv6_manip_pkt). The identifier is kept,
 *    as the kernel keeps it when the translated tuple is free; when it is
 *    taken xfw drops the request instead of choosing another identifier
 *    (docs/differences.md). The other ICMP queries (timestamp, address
 *    mask, information; ICMPv6's others) are dropped by a translation.
 *  - Protocols whose connections have no ports (GRE, ESP, OSPF, ...: the
 *    kernel's generic tracker and nf_nat_proto's unknown protocol): the
 *    address only.
 *  - SCTP (tracked by addresses, ct_conn.h): the address only, its ports
 *    kept (its CRC32c does not cover the addresses, so it stays valid,
 *    as the kernel's recomputation leaves it for a valid packet).
 *  - DCCP (its checksum covers the addresses) is not translated: such a
 *    packet is dropped (docs/differences.md). UDP-Lite takes UDP's path
 *    (nat.h xfw_nat_udp).
 *
 * Only the address changes, so only the IPv4 header checksum (the ICMP
 * checksum does not cover the addresses). The translation is decided in
 * nat_snat.h (xfw_nat_snat), kept as for TCP and UDP in xfw_nat under the
 * replies' wire tuple with the identifier (0 without one) as both ports;
 * later packets are translated here: replies before routing
 * (xfw_nat_query_pre_xdp), the original direction as it leaves
 * (xfw_nat_query_fwd_tc forwarded, xfw_nat_query_post_tc the host's own).
 *
 * Conventions: the translations are global functions, verified once.
 * Addresses are host order, as in struct xfw_pkt.
 *
 * Includes: nat.h, nat6_query.h.
 */
#ifndef XFW_NAT_QUERY_H
#define XFW_NAT_QUERY_H

#include "nat.h"
#include "nat6_query.h"

/* What a translation changes of a packet without TCP or UDP ports. */
#define XFW_NATQ_NONE 0 /* nothing it can: not translated here */
#define XFW_NATQ_ECHO 1 /* an ICMP echo request or reply: the identifier */
#define XFW_NATQ_ADDR 2 /* a protocol without ports: the address only */

#define XFW_ICMP_ECHOREPLY 0
#define XFW_ICMP_ECHO 8
#define XFW_ICMP_ID_OFF 4 /* the identifier in the ICMP (and ICMPv6) header */

/* xfw_natq_icmp returns family fam's ICMP protocol (0 IPv4, 1 IPv6). */
static __always_inline __u8 xfw_natq_icmp(__u32 fam)
{
	return fam ? IPPROTO_ICMPV6 : IPPROTO_ICMP;
}

/* xfw_natq_echo returns family fam's echo request type, or with reply
 * its echo reply's (ICMPv6: 128 and 129, nat6_query.h). */
static __always_inline __u8 xfw_natq_echo(__u32 fam, __u32 reply)
{
	if (fam)
		return reply ? XFW_ICMP6_ECHOREPLY : XFW_ICMP6_ECHO;
	return reply ? XFW_ICMP_ECHOREPLY : XFW_ICMP_ECHO;
}

/* An echo's mapping in xfw_nat is keyed by its code too, in this byte of
 * the key's padding (0 for every other key): the kernel's ICMP tuples
 * carry the code (a reply keeps its request's), so two echo connections
 * with one identifier and different codes are two tuples, and an SNAT
 * gives both the same address and identifier without a clash (difftest
 * nat6 seed 50: xfw found the first one's mapping under the second's
 * reply tuple and dropped the second request). */
#define XFW_NATQ_CODE 0

/* xfw_natq_kind returns what a translation changes of p. */
static __always_inline __u32 xfw_natq_kind(struct xfw_pkt *p)
{
	__u32 t = p->icmp >> 8;

	if (p->fam > 1 || p->fragmented || p->proto > 255)
		return XFW_NATQ_NONE;
	if (p->proto == xfw_natq_icmp(p->fam)) {
		if (!p->l4_off || p->icmp > 0xffff || (t != xfw_natq_echo(p->fam, 0) && t != xfw_natq_echo(p->fam, 1)))
			return XFW_NATQ_NONE;
		return XFW_NATQ_ECHO;
	}
	/* The other family's ICMP has no connection (ct_track.h). DCCP's
	 * checksum covers the addresses (its pseudo-header), which an
	 * address-only rewrite would leave wrong; SCTP's CRC32c does not
	 * cover them, and its ports are kept. */
	if (xfw_ct_ports(p->proto) || p->proto == IPPROTO_ICMPV6 || p->proto == IPPROTO_ICMP ||
	    p->proto == IPPROTO_DCCP)
		return XFW_NATQ_NONE;
	return XFW_NATQ_ADDR;
}

/* xfw_natq_id reads p's echo identifier from the packet (an XDP frame, or
 * an skb). Returns 0, or -1 when it cannot. */
static __always_inline int xfw_natq_id(void *ctx, int is_xdp, struct xfw_pkt *p, __u32 *id)
{
	__u8 b[2];

	if (xfw_load_bytes(ctx, is_xdp, p->l4_off + XFW_ICMP_ID_OFF, b, sizeof(b)))
		return -1;
	*id = (__u32)b[0] << 8 | b[1];
	return 0;
}

/* xfw_natq_gre reads the connection key of p, a GRE packet without its
 * connection's scratch, from the packet (ct_conn.h xfw_gre_key): version
 * 1's call ID, else 0. Returns 0, or -1 when it cannot or p has no
 * connection (version 1 carrying another protocol than PPP). */
static __always_inline int xfw_natq_gre(void *ctx, int is_xdp, struct xfw_pkt *p, __u32 *id)
{
	__u8 b[XFW_GRE_V1_HLEN] = {};
	__u32 len;
	int key;

	if (!p->l4_off || p->l4_end <= p->l4_off)
		return 0;
	len = p->l4_end - p->l4_off;
	if (len >= XFW_GRE_V1_HLEN) {
		if (xfw_load_bytes(ctx, is_xdp, p->l4_off, b, XFW_GRE_V1_HLEN))
			return -1;
	} else if (len >= 4) {
		if (xfw_load_bytes(ctx, is_xdp, p->l4_off, b, 4))
			return -1;
	}
	key = xfw_gre_key(len, b[1], (__u32)b[2] << 8 | b[3], (__u32)b[XFW_GRE_CALL_ID] << 8 | b[XFW_GRE_CALL_ID + 1]);
	if (key < 0)
		return -1;
	*id = key;
	return 0;
}

/* xfw_natq_ident reads what plays the port in p's connection (kind): an
 * echo's identifier, GRE's key (xfw_natq_gre); 0 for other protocols
 * without ports. Returns 0, or -1 when p is not translated here. */
static __always_inline int xfw_natq_ident(void *ctx, int is_xdp, struct xfw_pkt *p, __u32 kind, __u32 *id)
{
	*id = 0;
	if (kind == XFW_NATQ_ECHO)
		return xfw_natq_id(ctx, is_xdp, p, id);
	if (p->proto == IPPROTO_GRE)
		return xfw_natq_gre(ctx, is_xdp, p, id);
	return 0;
}

/* xfw_natq_key fills k with p's wire tuple: id as both ports of an echo,
 * as the destination port of GRE (its key: ct_conn.h xfw_gre_key, the
 * source key 0), 0 of other protocols; an echo's code in
 * k->pad[XFW_NATQ_CODE] (xfw_natq_code_key). */
static __always_inline void xfw_natq_key(struct xfw_nat_key *k, struct xfw_pkt *p, __u32 id)
{
	__builtin_memset(k, 0, sizeof(*k));
	if (p->proto == xfw_natq_icmp(p->fam))
		k->pad[XFW_NATQ_CODE] = p->icmp & 0xff;
	k->saddr_hi = p->src_hi;
	k->saddr = p->src_lo;
	k->daddr_hi = p->dst_hi;
	k->daddr = p->dst_lo;
	k->sport = p->proto == IPPROTO_GRE ? 0 : id;
	k->dport = id;
	k->proto = p->proto;
	k->fam = p->fam;
}

/* xfw_natq_ctkey fills k with the connection key of p (kind, echo
 * identifier or GRE key id: xfw_natq_ident) and returns whether p goes the reply way: an echo reply;
 * for a protocol without ports, when its key's order differs from the
 * connection's first packet's (e's status, looked up after). */
static __always_inline int xfw_natq_ctkey(struct xfw_ct_key *k, struct xfw_pkt *p, __u32 kind, __u32 id)
{
	if (kind == XFW_NATQ_ECHO) {
		__u8 icmp = xfw_natq_icmp(p->fam), req = xfw_natq_echo(p->fam, 0);

		if ((p->icmp >> 8) == xfw_natq_echo(p->fam, 1)) {
			xfw_ct_mkkey_icmp(k, p->fam, icmp, p->dst_hi, p->dst_lo, p->src_hi, p->src_lo, id, req,
					  p->icmp & 0xff);
			return 1;
		}
		xfw_ct_mkkey_icmp(k, p->fam, icmp, p->src_hi, p->src_lo, p->dst_hi, p->dst_lo, id, req,
				  p->icmp & 0xff);
		return 0;
	}
	return xfw_ct_mkkey(k, p->fam, p->proto, p->src_hi, p->src_lo, 0, p->dst_hi, p->dst_lo, id);
}

/* xfw_natq_reply reports whether a packet whose key xfw_natq_ctkey made
 * (returning order) goes connection e's reply way. */
static __always_inline int xfw_natq_reply(struct xfw_ct_entry *e, __u32 kind, int order)
{
	if (kind == XFW_NATQ_ECHO)
		return order;
	return order != !!(e->v.status & XFW_CTST_ORIG_B);
}

/* xfw_natq_set gives p its translated destination (dst 1) or source
 * address. */
static __always_inline void xfw_natq_set(struct xfw_pkt *p, __u32 dst, __u32 addr)
{
	if (dst)
		p->dst_lo = addr;
	else
		p->src_lo = addr;
}

/* xfw_natq_addr_xdp rewrites p's destination (dst 1) or source address to
 * addr and the IPv4 checksum. Returns 0, or -1 when the header cannot be
 * read or written. A global function. */
__attribute__((noinline)) int xfw_natq_addr_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst, __u32 addr)
{
	__u8 ip[XFW_NAT_IP_LEN];
	__u32 old, f, aoff = dst ? 6 : 2;

	if (!ctx || !p)
		return -1;
	if (bpf_xdp_load_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, ip, XFW_NAT_IP_LEN))
		return -1;
	old = xfw_nat_rd16(ip, aoff) << 16 | xfw_nat_rd16(ip, aoff + 2);
	f = (~xfw_nat_rd16(ip, 0) & 0xffff) + xfw_nat_diff32(old, addr);
	xfw_nat_wr16(ip, 0, ~xfw_nat_fold(f));
	xfw_nat_wr16(ip, aoff, addr >> 16);
	xfw_nat_wr16(ip, aoff + 2, addr);
	if (bpf_xdp_store_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, ip, XFW_NAT_IP_LEN))
		return -1;
	xfw_natq_set(p, dst, addr);
	return 0;
}

/* xfw_natq_addr_tc is xfw_natq_addr_xdp on an skb at TC egress. */
__attribute__((noinline)) int xfw_natq_addr_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst, __u32 addr)
{
	__u32 aoff;
	__be32 olda, newa = bpf_htonl(addr);

	if (!skb || !p)
		return -1;
	aoff = p->l3_off + XFW_NAT_IP_OFF + (dst ? 6 : 2);
	if (bpf_skb_load_bytes(skb, aoff, &olda, sizeof(olda)) ||
	    bpf_l3_csum_replace(skb, p->l3_off + XFW_NAT_IP_OFF, olda, newa, sizeof(newa)) ||
	    bpf_skb_store_bytes(skb, aoff, &newa, sizeof(newa), 0))
		return -1;
	xfw_natq_set(p, dst, addr);
	return 0;
}

/* xfw_nat_query_pre_xdp gives a packet of a translated connection without
 * ports its destination before the route lookup: an SNAT's reply (an echo
 * reply, a protocol without ports) the original source, a DNAT's original
 * direction (an echo request, a protocol without ports) the translated
 * destination. Returns 1 when it did. A global function. */
__attribute__((noinline)) int xfw_nat_query_pre_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	struct xfw_nat_key k;
	struct xfw_nat_val v;
	__u32 id = 0, kind, kinds;

	if (!ctx || !p || !xfw_nat_enabled())
		return 0;
	kind = xfw_natq_kind(p);
	if (kind == XFW_NATQ_NONE)
		return 0;
	if (xfw_natq_ident(ctx, 1, p, kind, &id))
		return 0;
	/* An echo request goes a DNAT's original way, a reply an SNAT's reply
	 * way; a protocol without ports either. */
	kinds = XFW_NAT_F_ANY;
	if (kind == XFW_NATQ_ECHO)
		kinds = (p->icmp >> 8) == xfw_natq_echo(p->fam, 1) ? XFW_NAT_F_SRC : XFW_NAT_F_DST;
	xfw_natq_key(&k, p, id);
	/* A mapping whose connection is gone is deleted: the packet opens a
	 * new one. An echo's key has no type: an echo request whose key is
	 * an SNAT's reply mapping (a remote host pinging the translated
	 * address with the same identifier), or a reply whose key is a
	 * DNAT's, must not delete it. */
	if (!xfw_nat_held(&k, kinds, kind != XFW_NATQ_ECHO, &v))
		return 0;
	/* An echo reply with another code than its request's is not the
	 * connection's reply (the kernel's tuples carry the code, and a
	 * reply keeps the request's: icmp_invert_tuple); the mapping's key
	 * has the identifier only. */
	if (kind == XFW_NATQ_ECHO && (v.ct.pad >> 8) != (p->icmp & 0xff))
		return 0;
	if (p->fam)
		return xfw_natq6_addr_xdp(ctx, p, 1, v.to_hi, v.to_addr) == 0;
	return xfw_natq_addr_xdp(ctx, p, 1, v.to_addr) == 0;
}

/* xfw_nat_query_fwd_tc gives a forwarded packet without ports of an SNAT
 * connection its new source as it leaves (the kernel's POSTROUTING).
 * Returns -1 when the packet must be dropped (the write failed). A global
 * function. */
__attribute__((noinline)) int xfw_nat_query_fwd_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0, id = 0, kind;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_ct_entry *e;
	struct xfw_nat_to to = {};
	int order;

	if (!skb || !p || !np)
		return 0;
	kind = xfw_natq_kind(p);
	if (kind == XFW_NATQ_NONE || xfw_natq_ident(skb, 0, p, kind, &id))
		return 0;
	order = xfw_natq_ctkey(&np->fwd, p, kind, id);
	e = xfw_nat_tracked(&np->fwd);
	if (!e || !xfw_nat_src_of(e, xfw_natq_reply(e, kind, order), &to))
		return 0;
	if (p->fam)
		return xfw_natq6_addr_tc(skb, p, 0, to.hi, to.lo);
	return xfw_natq_addr_tc(skb, p, 0, (__u32)to.lo);
}

/* xfw_nat_query_post_tc is xfw_nat_post_tc for the host's own packets
 * without ports (cs: their tracking, after OUTPUT). A global function. */
__attribute__((noinline)) int xfw_nat_query_post_tc(struct __sk_buff *skb, struct xfw_pkt *p,
						    struct xfw_ct_scratch *cs)
{
	struct xfw_nat_to to = {};

	if (!skb || !p || !cs || xfw_natq_kind(p) == XFW_NATQ_NONE || !xfw_nat_own_src(p, cs, &to))
		return 0;
	if (p->fam ? xfw_natq6_addr_tc(skb, p, 0, to.hi, to.lo) : xfw_natq_addr_tc(skb, p, 0, (__u32)to.lo))
		return -1;
	/* Loopback brings it in again under a tuple no connection is keyed
	 * by (the reply of a REDIRECT in nat OUTPUT): its connection facts go
	 * to loopback's INPUT by the loopback handoff (ct_track.h), as
	 * xfw_nat_post_tc hands them. */
	if (skb->ifindex == XFW_LOOPBACK_IFINDEX) {
		xfw_ct_load_tc(skb, p, cs);
		xfw_ct_lo_put(p, cs);
	}
	return 0;
}

/* xfw_natq_taken reports whether the reply tuple np->key[XFW_NAT_PS] of
 * an echo request with code code, or of a protocol without ports, is a
 * live connection's (nat_snat.h's xfw_snat_taken for these). */
static __always_inline int xfw_natq_taken(struct xfw_nat_pend *np, __u32 kind, __u32 code)
{
	struct xfw_nat_key *k = &np->key[XFW_NAT_PS];

	/* The key the mapping is confirmed under (nat_snat.h): an echo's
	 * with its code. */
	k->pad[XFW_NATQ_CODE] = kind == XFW_NATQ_ECHO ? code : 0;
	if (xfw_nat_held(k, XFW_NAT_F_ANY, 0, 0))
		return 1;
	if (kind == XFW_NATQ_ECHO)
		xfw_ct_mkkey_icmp(&np->fwd, k->fam, xfw_natq_icmp(k->fam), k->daddr_hi, k->daddr, k->saddr_hi,
				  k->saddr, k->dport, xfw_natq_echo(k->fam, 0), code);
	else /* the connection whose reply tuple k is (GRE's keys swapped) */
		xfw_ct_mkkey(&np->fwd, k->fam, k->proto, k->daddr_hi, k->daddr, k->dport, k->saddr_hi, k->saddr,
			     k->sport);
	return xfw_nat_conn(&np->fwd) != 0;
}

/* xfw_natq_dnat_prep readies the DNAT of a connection's first packet p
 * without TCP or UDP ports (cs: its tracking, a new connection pending)
 * to the address in np->range, as nf_nat_proto.c translates it: an ICMP
 * or ICMPv6 echo request with its identifier kept, a protocol without
 * ports by the address alone. The connection is rekeyed to the
 * translated tuple, which keeps the original destination; the mapping
 * waits in the NAT scratch for xfw_nat_confirm, under the original wire
 * tuple with the identifier (0 without one) as both ports. The caller
 * rewrites the packet (to np->val[XFW_NAT_PD].to_hi:to_addr), then marks
 * np pending. Returns 0, or -1 when the packet must be dropped (not
 * such a packet; a translated tuple already a connection's: the kernel
 * gives an echo another identifier, docs/differences.md; a protocol
 * without ports is dropped at confirmation: nat_null.h). */
static __always_inline int xfw_natq_dnat_prep(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					      struct xfw_nat_pend *np)
{
	__u32 id = 0, kind = xfw_natq_kind(p);
	struct xfw_nat_val *v = &np->val[XFW_NAT_PD];
	int srcb = 0;

	if (kind == XFW_NATQ_NONE || (kind == XFW_NATQ_ECHO && (p->icmp >> 8) != xfw_natq_echo(p->fam, 0)) ||
	    cs->pending != XFW_CTP_CREATE)
		return -1;
	if (kind == XFW_NATQ_ECHO)
		id = xfw_rd16(cs->buf, XFW_ICMP_ID_OFF);
	else if (p->proto == IPPROTO_GRE && xfw_ct_gre_key(cs->buf, 0, cs->buflen) > 0)
		id = xfw_ct_gre_key(cs->buf, 0, cs->buflen); /* kept: no PPTP master */
	if (kind == XFW_NATQ_ECHO)
		xfw_ct_mkkey_icmp(&v->ct, p->fam, p->proto, p->src_hi, p->src_lo, np->range.addr_hi,
				  np->range.addr, id, xfw_natq_echo(p->fam, 0), p->icmp & 0xff);
	else
		srcb = xfw_ct_mkkey(&v->ct, p->fam, p->proto, p->src_hi, p->src_lo, 0, np->range.addr_hi,
				    np->range.addr, id);
	/* A taken tuple: an echo is dropped here (the kernel would pick
	 * another identifier); a protocol without ports goes on through the
	 * chains and is dropped at confirmation, as the kernel's
	 * (nat_null.h xfw_nat_null_clash). */
	if (kind == XFW_NATQ_ECHO && xfw_nat_conn(&v->ct))
		return -1;
	xfw_natq_key(&np->key[XFW_NAT_PD], p, id);
	xfw_nat_val_set(v, np->range.addr_hi, np->range.addr, id, XFW_NAT_F_DST);
	cs->nv.nat_addr_hi = p->dst_hi;
	cs->nv.nat_addr = p->dst_lo;
	cs->nv.nat_port = id;
	cs->nv.nat_flags = XFW_NAT_F_DST;
	cs->key = v->ct;
	if (srcb)
		cs->nv.status |= XFW_CTST_ORIG_B;
	else
		cs->nv.status &= ~XFW_CTST_ORIG_B;
	return 0;
}

/* xfw_natq_dnat_xdp is xfw_nat_dnat_xdp (nat.h) for a connection's first
 * packet without TCP or UDP ports (xfw_natq_dnat_prep; addr, port: the
 * entry's; a range names addresses only). Returns 0, or -1 when the
 * packet must be dropped. A global function. */
__attribute__((noinline)) int xfw_natq_dnat_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
						struct xfw_ct_scratch *cs, __u32 addr, __u32 port)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_val *v;
	int rc;

	if (!ctx || !p || !cs || !np)
		return -1;
	np->pending = 0; /* the first translation of the packet */
	if (xfw_nat_dnat_to(ctx, p, &np->range, addr, &port) || xfw_natq_dnat_prep(p, cs, np))
		return -1;
	v = &np->val[XFW_NAT_PD];
	if (p->fam)
		rc = xfw_natq6_addr_xdp(ctx, p, 1, v->to_hi, v->to_addr);
	else
		rc = xfw_natq_addr_xdp(ctx, p, 1, (__u32)v->to_addr);
	if (rc)
		return -1;
	np->pending = XFW_NAT_F_DST;
	return 0;
}

/* xfw_natq_dnat_tc is xfw_natq_dnat_xdp at TC egress for nat OUTPUT's
 * DNAT (nat_out.h), the new address already in np->range. Returns 0, or
 * -1 when the packet must be dropped. A global function. */
__attribute__((noinline)) int xfw_natq_dnat_tc(struct __sk_buff *skb, struct xfw_pkt *p,
					       struct xfw_ct_scratch *cs)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_val *v;
	int rc;

	if (!skb || !p || !cs || !np || xfw_natq_dnat_prep(p, cs, np))
		return -1;
	v = &np->val[XFW_NAT_PD];
	if (p->fam)
		rc = xfw_natq6_addr_tc(skb, p, 1, v->to_hi, v->to_addr);
	else
		rc = xfw_natq_addr_tc(skb, p, 1, (__u32)v->to_addr);
	if (rc)
		return -1;
	np->pending = XFW_NAT_F_DST;
	return 0;
}

/* xfw_natq_out_pre_tc translates, at TC egress before tracking, the
 * destination of a later packet without ports of the host's own in a
 * connection nat OUTPUT translated (an echo request, a protocol without
 * ports: the original direction's wire tuple in xfw_nat), or of its reply
 * in one nat INPUT's SNAT translated (an echo reply, a protocol without
 * ports: the reply's wire tuple). Returns 1 when
 * it did, 0 when p is no such packet, -1 when the write failed. A global
 * function. */
__attribute__((noinline)) int xfw_natq_out_pre_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0, id = 0, kind, kinds = XFW_NAT_F_ANY;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_val *v;

	if (!skb || !p || !np)
		return 0;
	kind = xfw_natq_kind(p);
	if (kind == XFW_NATQ_NONE || xfw_natq_ident(skb, 0, p, kind, &id))
		return 0;
	/* An echo request goes a DNAT's original way, a reply (the host
	 * answering a ping nat INPUT's SNAT translated) an SNAT's reply
	 * way; a protocol without ports either. */
	if (kind == XFW_NATQ_ECHO)
		kinds = (p->icmp >> 8) == xfw_natq_echo(p->fam, 1) ? XFW_NAT_F_SRC : XFW_NAT_F_DST;
	v = &np->lv;
	xfw_natq_key(&np->lk, p, id);
	if (!xfw_nat_held(&np->lk, kinds, kind != XFW_NATQ_ECHO, v))
		return 0;
	/* An echo's mapping holds its request's code (xfw_nat_query_pre_xdp). */
	if (kind == XFW_NATQ_ECHO && (v->ct.pad >> 8) != (p->icmp & 0xff))
		return 0;
	if (p->fam)
		return xfw_natq6_addr_tc(skb, p, 1, v->to_hi, v->to_addr) ? -1 : 1;
	return xfw_natq_addr_tc(skb, p, 1, (__u32)v->to_addr) ? -1 : 1;
}

/* xfw_natq_in_xdp gives a packet without ports INPUT accepted (p tracked
 * in cs) the source xfw_nat_src_of names: a reply (an echo reply, a
 * protocol without ports) in a connection nat OUTPUT's DNAT translated
 * the original destination, a packet of one nat INPUT's SNAT translated
 * the new source.
 * Returns 1 when it did, 0 when p is no such reply, -1 when the write
 * failed. A global function (nat_out.h delivers the reply). */
__attribute__((noinline)) int xfw_natq_in_xdp(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	struct xfw_nat_to to = {};
	struct xfw_ct_entry *e;
	__u32 st;

	if (!ctx || !p || !cs || xfw_natq_kind(p) == XFW_NATQ_NONE)
		return 0;
	st = p->ct & 7;
	if (st != XFW_CTS_NEW && st != XFW_CTS_ESTABLISHED)
		return 0;
	/* A DNAT's reply: the original destination; nat INPUT's SNAT's
	 * original direction: the new source. */
	e = xfw_nat_tracked(&cs->key);
	if (!e || !xfw_nat_src_of(e, !!(p->ct & XFW_CTV_DIR_REPLY), &to))
		return 0;
	if (p->fam)
		return xfw_natq6_addr_xdp(ctx, p, 0, to.hi, to.lo) ? -1 : 1;
	return xfw_natq_addr_xdp(ctx, p, 0, (__u32)to.lo) ? -1 : 1;
}

#endif /* XFW_NAT_QUERY_H */
