/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat6_icmp.h — an ICMPv6 error about an IPv6 SNAT or MASQUERADE
 * connection coming back to the translated source, translated before the
 * route lookup as the kernel's nf_nat_icmpv6_reply_translation does: the
 * quoted packet gets its original source (address, a TCP or UDP port, the
 * quoted transport checksum: its pseudo-header covers the address) and
 * the error goes to the original source, the ICMPv6 checksum updated for
 * both (its pseudo-header and the quoted bytes). An error INPUT accepted
 * about a connection nat OUTPUT's DNAT translated gets the quote's
 * original destination and comes from it, one about the host's reply in
 * a connection nat INPUT's SNAT translated the new source
 * (xfw_nat6_icmp_in_xdp, after INPUT as the kernel's nat INPUT hook;
 * delivered by nat_out.h); the host's own error about a packet nat
 * INPUT's SNAT translated gets the quote's original source and goes to
 * it (xfw_nat6_icmp_out_tc, at TC egress, routed again by nat_out.h). A
 * forwarded error about a DNAT connection's packet (a DNATed server's
 * port unreachable to the client) is translated as it leaves, at TC
 * egress (xfw_nat6_icmp_tc: the quote's original destination, the error
 * from it), as IPv4's (nat_icmp.h); other forwarded errors about a
 * translated connection are dropped there.
 *
 * Scope: errors quoting an IPv6 header directly followed by TCP, UDP, an
 * ICMPv6 echo request, or another protocol without ports (the quote's
 * extension headers are not skipped: such an error passes as it came). A
 * TCP header cut short keeps its checksum, as tcp_manip_pkt does.
 *
 * Conventions: the quoted bytes are copied into the per-CPU scratch
 * (xfw_nat_pend.icmp_old), rewritten into icmp_new, and the checksums
 * updated by their difference (bpf_csum_diff), in the packet's byte order.
 *
 * Includes: nat.h (nat6.h), nat_query.h.
 */
#ifndef XFW_NAT6_ICMP_H
#define XFW_NAT6_ICMP_H

#include "nat.h"
#include "nat_query.h"

/* The quote's bytes read: the IPv6 header and 8 bytes (UDP, an ICMPv6
 * header, the first 8 of a TCP header), or with TCP's checksum 20. */
#define XFW_N6Q_SHORT 48
#define XFW_N6Q_TCP 60
#define XFW_N6Q_TCP_CSUM 56
#define XFW_N6Q_UDP_CSUM 46
#define XFW_N6Q_ICMP_CSUM 42

/* xfw_nat6_quote_kinds returns the quote's length to rewrite (q: its
 * first XFW_N6Q_SHORT bytes, in np->icmp_old; a TCP quote's first
 * XFW_N6Q_TCP when tcp_full) and sets *csum to its transport checksum's
 * offset (0: none to update) and *ports whether it carries ports, or
 * returns 0 for a quote this does not translate. */
static __always_inline __u32 xfw_nat6_quote_kinds(struct xfw_nat_pend *np, __u32 tcp_full, __u32 *csum,
						  __u32 *ports)
{
	__u8 *q = np->icmp_old;
	__u32 proto = q[XFW_NAT6_QUOTE_NEXT];

	*csum = 0;
	*ports = proto == IPPROTO_TCP || xfw_nat_udp(proto) || proto == IPPROTO_SCTP;
	/* SCTP: the ports, its quoted CRC32c as it is (the kernel's
	 * sctp_manip_pkt recomputes it over the quoted bytes). */
	if (proto == IPPROTO_SCTP)
		return XFW_N6Q_SHORT;
	if (proto == IPPROTO_TCP) {
		/* A TCP header cut short: ports only. */
		if (!tcp_full)
			return XFW_N6Q_SHORT;
		*csum = XFW_N6Q_TCP_CSUM;
		return XFW_N6Q_TCP;
	}
	if (xfw_nat_udp(proto)) {
		/* A UDP checksum of 0 is none (IPv6 has none without). */
		if (*(__u16 *)(q + XFW_N6Q_UDP_CSUM))
			*csum = XFW_N6Q_UDP_CSUM;
		return XFW_N6Q_SHORT;
	}
	if (proto == IPPROTO_ICMPV6) {
		if (q[XFW_NAT6_QUOTE_PORTS] != XFW_ICMP6_ECHO)
			return 0;
		*csum = XFW_N6Q_ICMP_CSUM;
		return XFW_N6Q_SHORT;
	}
	if (xfw_ct_ports(proto) || proto == IPPROTO_ICMP)
		return 0;
	return XFW_N6Q_SHORT;
}

/* xfw_nat6_quote_fields is xfw_nat6_quote_kinds for an error at XDP (in:
 * its quote's offset), a TCP quote's checksum read when it is there. */
static __always_inline __u32 xfw_nat6_quote_fields(struct xdp_md *ctx, __u32 in, struct xfw_nat_pend *np,
						   __u32 *csum, __u32 *ports)
{
	__u32 full = np->icmp_old[XFW_NAT6_QUOTE_NEXT] == IPPROTO_TCP &&
		     !bpf_xdp_load_bytes(ctx, in, np->icmp_old, XFW_N6Q_TCP);

	return xfw_nat6_quote_kinds(np, full, csum, ports);
}

/* xfw_nat6_quote_map finds the SNAT mapping of the quoted packet in
 * np->icmp_old (its reply's wire tuple is the key, as nat_query.h and
 * nat.h key them) and copies it to v. Returns 1 when there is one. */
static __always_inline int xfw_nat6_quote_map(struct xfw_nat_pend *np, __u32 ports, struct xfw_nat_val *v)
{
	__u8 *q = np->icmp_old;
	struct xfw_nat_key *k = &np->lk;
	__u32 id;
	int key;

	__builtin_memset(k, 0, sizeof(*k));
	k->saddr_hi = xfw_be64(q + XFW_NAT6_DADDR_OFF);
	k->saddr = xfw_be64(q + XFW_NAT6_DADDR_OFF + 8);
	k->daddr_hi = xfw_be64(q + XFW_NAT6_SADDR_OFF);
	k->daddr = xfw_be64(q + XFW_NAT6_SADDR_OFF + 8);
	k->proto = q[XFW_NAT6_QUOTE_NEXT];
	k->fam = 1;
	if (ports) {
		k->sport = xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS + 2);
		k->dport = xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS);
	} else if (k->proto == IPPROTO_ICMPV6) {
		id = xfw_nat_rd16(q, XFW_NAT6_QUOTE_ID);
		k->sport = id;
		k->dport = id;
		k->pad[XFW_NATQ_CODE] = q[XFW_NAT6_QUOTE_PORTS + 1];
	} else if (k->proto == IPPROTO_GRE) {
		/* The reply's source key: the quoted call ID (ct_conn.h
		 * xfw_gre_key). */
		key = xfw_gre_key(XFW_GRE_V1_HLEN, q[XFW_NAT6_QUOTE_PORTS + 1], xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS + 2),
				  xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS + XFW_GRE_CALL_ID));
		if (key < 0)
			return 0;
		k->sport = key;
	}
	if (!xfw_nat_held(k, XFW_NAT_F_SRC, 0, v))
		return 0;
	/* An echo's mapping is its request's code's (nat_query.h). */
	return k->proto != IPPROTO_ICMPV6 || (v->ct.pad >> 8) == q[XFW_NAT6_QUOTE_PORTS + 1];
}

/* xfw_nat6_quote_fix_g writes into np->icmp_new the quoted packet of
 * np->icmp_old with its source (qdst 0) or destination (qdst 1) address
 * hi:lo and (ports) port, its transport checksum (at csum, 0: none)
 * updated; how packs to_port, csum << 16, ports << 24 and qdst << 25
 * (five arguments at most). A global function: inlined, its 64-byte copy
 * was verified again on every path of the ICMPv6 error translations
 * reaching its four calls. */
__attribute__((noinline)) int xfw_nat6_quote_fix_g(struct xfw_nat_pend *np, __u64 hi, __u64 lo, __u32 how)
{
	__u32 to_port = how & 0xffff, csum = (how >> 16) & 0xff, ports = (how >> 24) & 1, qdst = (how >> 25) & 1;
	__u32 diff, f, oldport = 0, port = 0;
	__u32 aoff = qdst ? XFW_NAT6_DADDR_OFF : XFW_NAT6_SADDR_OFF, poff = XFW_NAT6_QUOTE_PORTS + (qdst ? 2 : 0);
	__u8 *q, *n;

	if (!np)
		return 0;
	q = np->icmp_old;
	n = np->icmp_new;

	__builtin_memcpy(n, q, XFW_NAT_QUOTE_BUF);
	xfw_nat6_put(n + aoff, hi, lo);
	if (ports) {
		oldport = *(__u16 *)(q + poff);
		port = bpf_htons(to_port);
		*(__u16 *)(n + poff) = port;
	}
	if (!csum || csum > XFW_N6Q_TCP_CSUM)
		return 0;
	diff = bpf_csum_diff((__be32 *)(q + aoff), XFW_NAT6_ADDR_LEN, (__be32 *)(n + aoff), XFW_NAT6_ADDR_LEN, 0);
	f = *(__u16 *)(q + csum);
	f = xfw_nat6_csum_update(f, (__u64)diff + (~oldport & 0xffff) + port);
	if (f == 0 && csum == XFW_N6Q_UDP_CSUM)
		f = 0xffff;
	*(__u16 *)(n + csum) = f;
	return 0;
}

/* xfw_nat6_quote_fix is xfw_nat6_quote_fix_g with its arguments apart. */
static __always_inline void xfw_nat6_quote_fix(struct xfw_nat_pend *np, __u64 hi, __u64 lo, __u32 to_port,
					       __u32 csum, __u32 ports, __u32 qdst)
{
	xfw_nat6_quote_fix_g(np, hi, lo, (to_port & 0xffff) | (csum & 0xff) << 16 | !!ports << 24 | !!qdst << 25);
}

/* xfw_nat6_icmp_error loads the quote of ICMPv6 error p into
 * np->icmp_old (in: its offset) and returns its length to rewrite
 * (xfw_nat6_quote_fields), or 0 when p is no error this translates. */
static __always_inline __u32 xfw_nat6_icmp_error(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_nat_pend *np,
						 __u32 in, __u32 *csum, __u32 *ports)
{
	if (p->fam != 1 || !p->l4_off || p->proto != IPPROTO_ICMPV6 || p->icmp > 0xffff ||
	    (p->icmp >> 8) >= XFW_NAT6_ICMP_INFO || p->fragmented)
		return 0;
	if (bpf_xdp_load_bytes(ctx, in, np->icmp_old, XFW_N6Q_SHORT))
		return 0;
	return xfw_nat6_quote_fields(ctx, in, np, csum, ports);
}

/* xfw_nat6_icmp_csum updates the ICMPv6 checksum in np->b6.l4 for the
 * pseudo-header address np->b6.ip becoming np->b6.na and the quote's len
 * bytes np->icmp_old becoming np->icmp_new (len XFW_N6Q_TCP or
 * XFW_N6Q_SHORT): the step both hooks' writers share. */
static __always_inline void xfw_nat6_icmp_csum(struct xfw_nat_pend *np, __u32 len)
{
	__u32 diff, f;

	diff = bpf_csum_diff((__be32 *)np->b6.ip, XFW_NAT6_ADDR_LEN, (__be32 *)np->b6.na, XFW_NAT6_ADDR_LEN, 0);
	if (len == XFW_N6Q_TCP)
		diff = bpf_csum_diff((__be32 *)np->icmp_old, XFW_N6Q_TCP, (__be32 *)np->icmp_new, XFW_N6Q_TCP, diff);
	else
		diff = bpf_csum_diff((__be32 *)np->icmp_old, XFW_N6Q_SHORT, (__be32 *)np->icmp_new, XFW_N6Q_SHORT,
				     diff);
	f = *(__u16 *)np->b6.l4;
	*(__u16 *)np->b6.l4 = xfw_nat6_csum_update(f, diff);
}

/* xfw_nat6_icmp_write writes the quote xfw_nat6_quote_fix rewrote (len
 * bytes at in) into error p and gives the error the address hi:lo as its
 * destination (qdst 0: the quote's source was rewritten) or its source
 * (qdst 1, a constant), the ICMPv6 checksum updated for both (its
 * pseudo-header and the quoted bytes). Returns 0, or -1 when the packet
 * cannot be read or written. */
static __always_inline int xfw_nat6_icmp_write(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_nat_pend *np,
					       __u32 in, __u32 len, __u64 hi, __u64 lo, __u32 qdst)
{
	__u32 aoff = p->l3_off + (qdst ? XFW_NAT6_SADDR_OFF : XFW_NAT6_DADDR_OFF);

	if (bpf_xdp_load_bytes(ctx, aoff, np->b6.ip, XFW_NAT6_ADDR_LEN) ||
	    bpf_xdp_load_bytes(ctx, p->l4_off + XFW_ICMP6_CSUM_OFF, np->b6.l4, sizeof(__u16)))
		return -1;
	xfw_nat6_put(np->b6.na, hi, lo);
	xfw_nat6_icmp_csum(np, len);
	if (len == XFW_N6Q_TCP) {
		if (bpf_xdp_store_bytes(ctx, in, np->icmp_new, XFW_N6Q_TCP))
			return -1;
	} else if (bpf_xdp_store_bytes(ctx, in, np->icmp_new, XFW_N6Q_SHORT)) {
		return -1;
	}
	if (bpf_xdp_store_bytes(ctx, p->l4_off + XFW_ICMP6_CSUM_OFF, np->b6.l4, sizeof(__u16)) ||
	    bpf_xdp_store_bytes(ctx, aoff, np->b6.na, XFW_NAT6_ADDR_LEN))
		return -1;
	return 0;
}

/* xfw_nat6_icmp_pre_xdp translates, before the route lookup, an ICMPv6
 * error (p) about an SNAT or MASQUERADE connection coming back to the
 * translated source: the quoted packet gets its original source back,
 * the error its original destination. Returns 1 when it did. A global
 * function. */
__attribute__((noinline)) int xfw_nat6_icmp_pre_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0, in, len, csum, ports;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_val v;

	if (!ctx || !p || !np)
		return 0;
	in = p->l4_off + XFW_NAT6_ICMP_HLEN;
	len = xfw_nat6_icmp_error(ctx, p, np, in, &csum, &ports);
	if (!len || !xfw_nat6_quote_map(np, ports, &v))
		return 0;
	xfw_nat6_quote_fix(np, v.to_hi, v.to_addr, v.to_port, csum, ports, 0);
	if (xfw_nat6_icmp_write(ctx, p, np, in, len, v.to_hi, v.to_addr, 0))
		return 0;
	p->dst_hi = v.to_hi;
	p->dst_lo = v.to_addr;
	return 1;
}

/* xfw_nat6_icmp_in_xdp translates an ICMPv6 error INPUT accepted (p)
 * about a connection whose destination nat OUTPUT translated (the quoted
 * packet its original direction as it left: TCP, UDP, an echo request, a
 * protocol without ports), as the kernel's nat INPUT hook does: the
 * quoted packet gets its original destination (and port) back, the
 * error comes from the original destination. Returns 1 when
 * it did, 0 when p is no such error, -1 when the write failed (drop). A
 * global function (nat_out.h delivers the error). */
__attribute__((noinline)) int xfw_nat6_icmp_in_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0, in, len, csum, ports, order, reply;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_to to = {};
	struct xfw_ct_entry *e;

	if (!ctx || !p || !np)
		return 0;
	in = p->l4_off + XFW_NAT6_ICMP_HLEN;
	len = xfw_nat6_icmp_error(ctx, p, np, in, &csum, &ports);
	if (!len)
		return 0;
	/* TCP and UDP with their ports; an echo request or a protocol
	 * without ports (nat OUTPUT's DNAT by the address, nat_query.h) by
	 * the address alone, a quoted echo's checksum updated for it. */
	order = xfw_nat6_quote_key(np, np->icmp_old);
	if (order == XFW_NAT6_QK_NONE || order == XFW_NAT6_QK_ECHOREPLY)
		return 0;
	e = xfw_nat_tracked(&np->fwd);
	if (!e)
		return 0;
	/* The quoted packet's destination as its sender's peer knows it: a
	 * DNAT's original direction the original destination, the host's
	 * reply in a connection nat INPUT's SNAT translated the new source
	 * (xfw_nat_src_of of the other direction). */
	reply = order != XFW_NAT6_QK_ECHO && order != !!(e->v.status & XFW_CTST_ORIG_B);
	if (!xfw_nat_src_of(e, !reply, &to))
		return 0;
	xfw_nat6_quote_fix(np, to.hi, to.lo, to.port, csum, ports, 1);
	if (xfw_nat6_icmp_write(ctx, p, np, in, len, to.hi, to.lo, 1))
		return -1;
	p->src_hi = to.hi;
	p->src_lo = to.lo;
	return 1;
}

/* xfw_nat6_icmp_out_tc translates, at TC egress before tracking, an
 * ICMPv6 error the host sends (p) about a packet of a connection nat
 * INPUT's SNAT translated (a port unreachable, an unknown next header):
 * the quoted packet, as the host saw it, gets its original source back
 * and the error goes to it, the ICMPv6 checksum updated for both, as the
 * kernel's nat OUTPUT hook does (nf_nat_icmpv6_reply_translation at
 * LOCAL_OUT); the caller routes it again. v is the caller's room for the
 * mapping. Returns 1 when it did, 0 when p is no such error, -1 when a
 * write failed. A global function. */
__attribute__((noinline)) int xfw_nat6_icmp_out_tc(struct __sk_buff *skb, struct xfw_pkt *p, struct xfw_nat_val *v)
{
	__u32 zero = 0, in, len, csum, ports, full, aoff;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);

	if (!skb || !p || !np || !v || p->fam != 1 || !p->l4_off || p->proto != IPPROTO_ICMPV6 ||
	    p->icmp > 0xffff || (p->icmp >> 8) >= XFW_NAT6_ICMP_INFO)
		return 0;
	in = p->l4_off + XFW_NAT6_ICMP_HLEN;
	if (bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_N6Q_SHORT))
		return 0;
	full = np->icmp_old[XFW_NAT6_QUOTE_NEXT] == IPPROTO_TCP &&
	       !bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_N6Q_TCP);
	len = xfw_nat6_quote_kinds(np, full, &csum, &ports);
	if (!len || !xfw_nat6_quote_map(np, ports, v))
		return 0;
	xfw_nat6_quote_fix(np, v->to_hi, v->to_addr, v->to_port, csum, ports, 0);
	aoff = p->l3_off + XFW_NAT6_DADDR_OFF;
	if (bpf_skb_load_bytes(skb, aoff, np->b6.ip, XFW_NAT6_ADDR_LEN) ||
	    bpf_skb_load_bytes(skb, p->l4_off + XFW_ICMP6_CSUM_OFF, np->b6.l4, sizeof(__u16)))
		return -1;
	xfw_nat6_put(np->b6.na, v->to_hi, v->to_addr);
	/* The ICMPv6 checksum (the host's error carries it whole): its
	 * pseudo-header's destination and the quote. */
	xfw_nat6_icmp_csum(np, len);
	if (len == XFW_N6Q_TCP) {
		if (bpf_skb_store_bytes(skb, in, np->icmp_new, XFW_N6Q_TCP, 0))
			return -1;
	} else if (bpf_skb_store_bytes(skb, in, np->icmp_new, XFW_N6Q_SHORT, 0)) {
		return -1;
	}
	if (bpf_skb_store_bytes(skb, p->l4_off + XFW_ICMP6_CSUM_OFF, np->b6.l4, sizeof(__u16), 0) ||
	    bpf_skb_store_bytes(skb, aoff, np->b6.na, XFW_NAT6_ADDR_LEN, 0))
		return -1;
	p->dst_hi = v->to_hi;
	p->dst_lo = v->to_addr;
	return 1;
}

/* xfw_nat6_icmp_dnat_tc translates a forwarded ICMPv6 error (p) quoting
 * the packet of DNAT connection e as it went (its original direction,
 * translated; the quote in np->icmp_old, XFW_NAT6_QUOTE_LEN bytes), as
 * the kernel's nf_nat_icmpv6_reply_translation does: the quoted packet
 * gets its original destination and port back (its transport checksum
 * updated), the error comes from the original destination, whoever sent
 * it, the ICMPv6 checksum updated for both; a quoted echo request or
 * packet without ports (a DNAT by the address, nat_query.h) gets its
 * destination address back alone. Returns 0, or -1 when a write
 * failed. */
static __always_inline int xfw_nat6_icmp_dnat_tc(struct __sk_buff *skb, struct xfw_pkt *p, struct xfw_nat_pend *np,
						  struct xfw_ct_entry *e)
{
	__u32 in = p->l4_off + XFW_NAT6_ICMP_HLEN, aoff = p->l3_off + XFW_NAT6_SADDR_OFF;
	__u32 proto = np->icmp_old[XFW_NAT6_QUOTE_NEXT], len = XFW_N6Q_SHORT, csum = 0, ports = 1;
	__u64 hi = e->v.nat_addr_hi, lo = e->v.nat_addr;

	if (proto == IPPROTO_TCP) {
		/* A TCP header cut short: ports only. */
		if (!bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_N6Q_TCP)) {
			len = XFW_N6Q_TCP;
			csum = XFW_N6Q_TCP_CSUM;
		}
	} else if (xfw_nat_udp(proto)) {
		/* A UDP checksum of 0 is none. */
		if (*(__u16 *)(np->icmp_old + XFW_N6Q_UDP_CSUM))
			csum = XFW_N6Q_UDP_CSUM;
	} else if (proto == IPPROTO_SCTP) {
		/* The ports; the quoted CRC32c as it is (xfw_nat6_quote_fields). */
	} else if (proto == IPPROTO_ICMPV6) {
		/* An echo request (xfw_nat6_icmp_tc): its identifier kept, its
		 * checksum covering the addresses. */
		csum = XFW_N6Q_ICMP_CSUM;
		ports = 0;
	} else {
		ports = 0; /* without ports (nat_query.h): the address alone */
	}
	xfw_nat6_quote_fix(np, hi, lo, e->v.nat_port, csum, ports, 1);
	if (bpf_skb_load_bytes(skb, aoff, np->b6.ip, XFW_NAT6_ADDR_LEN) ||
	    bpf_skb_load_bytes(skb, p->l4_off + XFW_ICMP6_CSUM_OFF, np->b6.l4, sizeof(__u16)))
		return -1;
	xfw_nat6_put(np->b6.na, hi, lo);
	/* The ICMPv6 checksum: its pseudo-header's source and the quote. */
	xfw_nat6_icmp_csum(np, len);
	if (len == XFW_N6Q_TCP) {
		if (bpf_skb_store_bytes(skb, in, np->icmp_new, XFW_N6Q_TCP, 0))
			return -1;
	} else if (bpf_skb_store_bytes(skb, in, np->icmp_new, XFW_N6Q_SHORT, 0)) {
		return -1;
	}
	if (bpf_skb_store_bytes(skb, p->l4_off + XFW_ICMP6_CSUM_OFF, np->b6.l4, sizeof(__u16), 0) ||
	    bpf_skb_store_bytes(skb, aoff, np->b6.na, XFW_NAT6_ADDR_LEN, 0))
		return -1;
	p->src_hi = hi;
	p->src_lo = lo;
	return 0;
}

/* xfw_nat6_icmp_tc decides a forwarded ICMPv6 error (p) leaving by TC
 * egress whose quoted packet (TCP, UDP, an ICMPv6 echo, a protocol
 * without ports) belongs to a translated connection: one quoting a DNAT
 * connection's packet as it went (a DNATed server's port unreachable to
 * the client) is translated back (xfw_nat6_icmp_dnat_tc); one quoting an
 * SNAT connection's packet as its source sent it passes: it goes back to
 * that source, translated before routing (xfw_nat6_icmp_pre_xdp), as the
 * kernel's. The others are dropped (returns -1), since xfw does not
 * translate such a quoted packet as the kernel does
 * (docs/differences.md), and forwarding it untranslated would show the
 * translated address. Others pass (0). A global function. */
__attribute__((noinline)) int xfw_nat6_icmp_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0, order, reply;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_ct_entry *e;
	__u8 *q;

	if (!skb || !p || !np || p->fam != 1 || !p->l4_off || p->proto != IPPROTO_ICMPV6 ||
	    p->icmp > 0xffff || (p->icmp >> 8) >= XFW_NAT6_ICMP_INFO)
		return 0;
	q = np->icmp_old;
	if (bpf_skb_load_bytes(skb, p->l4_off + XFW_NAT6_ICMP_HLEN, q, XFW_NAT6_QUOTE_LEN))
		return 0;
	order = xfw_nat6_quote_key(np, q);
	if (order == XFW_NAT6_QK_NONE)
		return 0;
	e = xfw_nat_tracked(&np->fwd);
	if (!e || !(e->v.nat_flags & XFW_NAT_F_ANY))
		return 0;
	if (order >= XFW_NAT6_QK_ECHO)
		reply = order == XFW_NAT6_QK_ECHOREPLY;
	else
		reply = order != !!(e->v.status & XFW_CTST_ORIG_B);
	if (!(e->v.nat_flags & XFW_NAT_F_DST))
		return reply ? -1 : 0;
	return reply || order == XFW_NAT6_QK_ECHOREPLY ? -1 : xfw_nat6_icmp_dnat_tc(skb, p, np, e);
}

#endif /* XFW_NAT6_ICMP_H */
