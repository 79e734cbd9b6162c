/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_icmp.h — ICMP errors about a DNAT connection, translated back as the
 * kernel's nf_nat_icmp_reply_translation does: an error forwarded toward
 * the client (from the translated destination, or a router on the way)
 * quotes the translated packet; as it leaves (POSTROUTING, xfw_tc_forwarded)
 * the quoted packet gets its original destination back (address, port,
 * the quoted IPv4 and transport checksums) and the error its source: the
 * original destination, whoever sent it, as the kernel's outer manip.
 *
 * Scope: IPv4 errors quoting an IPv4 header without options and a TCP,
 * UDP or UDP-Lite header (a TCP header cut short keeps its checksum, as
 * the kernel's tcp_manip_pkt does); a forwarded error about a DNAT
 * connection without ports (an echo request, a protocol without ports:
 * nat_query.h) gets the quoted destination address back alone. An error coming back to the host about its own
 * packet nat OUTPUT translated, or about its reply in a connection nat
 * INPUT's SNAT translated, is translated after INPUT
 * (xfw_nat_icmp_in_xdp, delivered by nat_out.h). The host's own error
 * about a packet nat INPUT's SNAT translated is translated at TC egress
 * before tracking and routed again (xfw_nat_icmp_out_tc, called by
 * nat_out.h's xfw_nat_out_pre_tc); the host's errors about other
 * translated packets are not translated (docs/differences.md).
 *
 * Conventions: the quoted bytes are copied into the per-CPU scratch
 * (xfw_nat_pend), rewritten there, and the ICMP checksum updated by their
 * difference (bpf_csum_diff).
 *
 * IPv6's errors (an SNAT connection's, a forwarded one about a DNAT): nat6_icmp.h.
 *
 * Includes: nat.h, nat_query.h, nat6_icmp.h.
 */
#ifndef XFW_NAT_ICMP_H
#define XFW_NAT_ICMP_H

#include "nat.h"
#include "nat_query.h"
#include "nat6_icmp.h"

/* Offsets in the quoted headers. */
#define XFW_NQ_CSUM 10      /* the quoted IPv4 checksum */
#define XFW_NQ_SADDR 12
#define XFW_NQ_DADDR 16
#define XFW_NQ_L4 20        /* the quoted transport header */
#define XFW_NQ_ICMP_CSUM 2  /* the ICMP checksum in the error's header */
#define XFW_NQ_ICMP_HLEN 8

/* A pseudo-header sum no 16-bit checksum field equals: xfw_nat_l4csum
 * then updates the field as a full checksum. */
#define XFW_NQ_NO_PSEUDO 0x10000

/* The mask keeping an even offset inside the quote buffer. */
#define XFW_NQ_MASK (XFW_NAT_QUOTE_BUF - 2)

/* xfw_nat_quote_fix rewrites the quoted packet in np->icmp_new (a copy of
 * icmp_old) to destination (dst 1) or source addr:port, checksums
 * included; csum is the quoted transport checksum's offset in the buffer
 * (0: none present). */
static __always_inline void xfw_nat_quote_fix(struct xfw_nat_pend *np, __u32 csum, __u32 dst,
					      __u32 addr, __u32 port)
{
	__u8 *b = np->icmp_new;
	__u32 old, oldport, f;
	__u32 aoff = dst ? XFW_NQ_DADDR : XFW_NQ_SADDR, poff = XFW_NQ_L4 + (dst ? 2 : 0);

	old = xfw_nat_rd16(b, aoff) << 16 | xfw_nat_rd16(b, aoff + 2);
	oldport = xfw_nat_rd16(b, poff);
	if (csum) {
		f = xfw_nat_rd16(b, csum & XFW_NQ_MASK);
		/* A UDP checksum of 0 is none. */
		if (f != 0 || b[9] == IPPROTO_TCP) {
			/* Updated as a full checksum, whatever it holds, as the
			 * kernel's manipulation of the quoted packet (the error
			 * is no partial checksum): pseudo never matches. */
			f = xfw_nat_l4csum(f, XFW_NQ_NO_PSEUDO, old, addr, oldport, port);
			if (xfw_nat_udp(b[9]) && f == 0)
				f = 0xffff;
			xfw_nat_wr16(b, csum & XFW_NQ_MASK, f);
		}
	}
	f = (~xfw_nat_rd16(b, XFW_NQ_CSUM) & 0xffff) + xfw_nat_diff32(old, addr);
	xfw_nat_wr16(b, XFW_NQ_CSUM, ~xfw_nat_fold(f));
	xfw_nat_wr16(b, aoff, addr >> 16);
	xfw_nat_wr16(b, aoff + 2, addr);
	xfw_nat_wr16(b, poff, port);
}

/* xfw_nat_quote_proto returns the quoted packet's protocol when it can be
 * translated (an IPv4 header without options, TCP, UDP or UDP-Lite), else 0. */
static __always_inline __u32 xfw_nat_quote_proto(struct xfw_nat_pend *np)
{
	__u32 proto = np->icmp_old[9];

	if (np->icmp_old[0] != 0x45) /* version 4, 20-byte header */
		return 0;
	return proto == IPPROTO_TCP || xfw_nat_udp(proto) || proto == IPPROTO_SCTP ? proto : 0;
}

/* xfw_nat_quote_short reports whether a quote of proto is translated in
 * its first 28 bytes (IPv4 header and 8 transport bytes): UDP, UDP-Lite
 * and SCTP, whose quoted CRC32c is left as it is (the kernel's
 * sctp_manip_pkt recomputes it over the quoted bytes). */
static __always_inline int xfw_nat_quote_short(__u32 proto)
{
	return xfw_nat_udp(proto) || proto == IPPROTO_SCTP;
}

/* xfw_nat_quote_csum returns the offset of the quoted transport checksum
 * in the buffer for proto (TCP: when its whole header is quoted, full),
 * 0 for none. */
static __always_inline __u32 xfw_nat_quote_csum(__u32 proto, int full)
{
	if (xfw_nat_udp(proto))
		return XFW_NQ_L4 + XFW_NAT_UDP_CSUM;
	if (proto != IPPROTO_TCP)
		return 0;
	return full ? XFW_NQ_L4 + XFW_NAT_TCP_CSUM : 0;
}

/* xfw_nat_quote_gre returns the key of the GRE header quoted in
 * np->icmp_old (ct_conn.h xfw_gre_key: version 1's call ID, else 0; 8
 * bytes quoted), 0 for another protocol, -1 for a quote without a
 * connection. */
static __always_inline int xfw_nat_quote_gre(struct xfw_nat_pend *np)
{
	__u8 *q = np->icmp_old;

	if (q[9] != IPPROTO_GRE)
		return 0;
	return xfw_gre_key(XFW_GRE_V1_HLEN, q[XFW_NQ_L4 + 1], xfw_nat_rd16(q, XFW_NQ_L4 + 2),
			   xfw_nat_rd16(q, XFW_NQ_L4 + XFW_GRE_CALL_ID));
}

/* xfw_nat_quote_noports returns the translated connection the packet
 * without ports quoted in np->icmp_old (from isrc to idst: an ICMP echo
 * request, a protocol tracked by its addresses) belongs to: a DNAT
 * connection's (nat_query.h's xfw_natq_dnat_xdp) that went the original
 * way, or with reply_ok an SNAT connection's (nat INPUT's) that went the
 * reply way; *reply tells which. Else 0. */
static __always_inline struct xfw_ct_entry *xfw_nat_quote_noports(struct xfw_nat_pend *np, __u32 isrc,
								   __u32 idst, int reply_ok, int *reply)
{
	__u8 *q = np->icmp_old;
	__u32 proto = q[9];
	struct xfw_ct_entry *e;
	int srcb = 0, key;

	if (q[0] != 0x45) /* version 4, 20-byte header */
		return 0;
	if (proto == IPPROTO_ICMP) {
		if (q[XFW_NQ_L4] != XFW_ICMP_ECHO)
			return 0;
		xfw_ct_mkkey_icmp(&np->fwd, 0, IPPROTO_ICMP, 0, isrc, 0, idst, xfw_nat_rd16(q, XFW_NQ_L4 + 4),
				  XFW_ICMP_ECHO, q[XFW_NQ_L4 + 1]);
	} else if (xfw_ct_ports(proto) || proto == IPPROTO_ICMPV6) {
		return 0;
	} else {
		key = xfw_nat_quote_gre(np);
		if (key < 0)
			return 0;
		srcb = xfw_ct_mkkey(&np->fwd, 0, proto, 0, isrc, 0, 0, idst, key);
	}
	e = xfw_nat_tracked(&np->fwd);
	if (!e)
		return 0;
	*reply = proto != IPPROTO_ICMP && srcb != !!(e->v.status & XFW_CTST_ORIG_B);
	if (!*reply)
		return e->v.nat_flags & XFW_NAT_F_DST ? e : 0;
	return reply_ok && (e->v.nat_flags & XFW_NAT_F_SRC) ? e : 0;
}

/* xfw_nat_quote_store_tc writes the n quoted bytes np->icmp_new holds at
 * in, over np->icmp_old, and updates the ICMP checksum by their change.
 * Returns -1 when a write failed. */
static __always_inline int xfw_nat_quote_store_tc(struct __sk_buff *skb, struct xfw_pkt *p,
						  struct xfw_nat_pend *np, __u32 in, __u32 n)
{
	__s64 diff;

	if (n == XFW_NAT_QUOTE) {
		diff = bpf_csum_diff((__be32 *)np->icmp_old, XFW_NAT_QUOTE, (__be32 *)np->icmp_new,
				     XFW_NAT_QUOTE, 0);
		if (bpf_skb_store_bytes(skb, in, np->icmp_new, XFW_NAT_QUOTE, 0))
			return -1;
	} else {
		diff = bpf_csum_diff((__be32 *)np->icmp_old, XFW_NAT_QUOTE_UDP, (__be32 *)np->icmp_new,
				     XFW_NAT_QUOTE_UDP, 0);
		if (bpf_skb_store_bytes(skb, in, np->icmp_new, XFW_NAT_QUOTE_UDP, 0))
			return -1;
	}
	if (diff < 0 || bpf_l4_csum_replace(skb, p->l4_off + XFW_NQ_ICMP_CSUM, 0, diff, 0))
		return -1;
	return 0;
}

/* xfw_nat_icmp_tc translates a forwarded ICMP error (p) about a DNAT
 * connection as it leaves. Returns -1 when the packet must be dropped (a
 * failed write). A global function. */
__attribute__((noinline)) int xfw_nat_icmp_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0, in, n = XFW_NAT_QUOTE, csum, proto, isrc, idst, port;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_ct_entry *e;
	__be32 olda, newa;
	int srcb;

	if (!skb || !p || !np || p->fam != 0 || p->icmp > 0xffff || !p->l4_off ||
	    !xfw_icmp_is_err(p->icmp >> 8))
		return 0;
	in = p->l4_off + XFW_NQ_ICMP_HLEN;
	if (bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_NAT_QUOTE_UDP))
		return 0;
	isrc = xfw_nat_rd16(np->icmp_old, 12) << 16 | xfw_nat_rd16(np->icmp_old, 14);
	idst = xfw_nat_rd16(np->icmp_old, 16) << 16 | xfw_nat_rd16(np->icmp_old, 18);
	proto = xfw_nat_quote_proto(np);
	if (!proto) {
		/* Without ports (an echo request, a protocol without ports):
		 * the address only, the quoted bytes after it as they are. */
		e = xfw_nat_quote_noports(np, isrc, idst, 0, &srcb);
		if (!e)
			return 0;
		n = XFW_NAT_QUOTE_UDP;
		csum = 0;
		port = xfw_nat_rd16(np->icmp_old, XFW_NQ_L4 + 2);
	} else {
		/* A TCP header cut short: the ports only. */
		if (xfw_nat_quote_short(proto) || bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_NAT_QUOTE))
			n = XFW_NAT_QUOTE_UDP;
		csum = xfw_nat_quote_csum(proto, n == XFW_NAT_QUOTE);
		srcb = xfw_ct_mkkey(&np->fwd, 0, proto, 0, isrc, xfw_nat_rd16(np->icmp_old, XFW_NQ_L4), 0, idst,
				    xfw_nat_rd16(np->icmp_old, XFW_NQ_L4 + 2));
		e = xfw_nat_tracked(&np->fwd);
		/* The quoted packet went the original way, translated. */
		if (!e || !(e->v.nat_flags & XFW_NAT_F_DST) || srcb != !!(e->v.status & XFW_CTST_ORIG_B))
			return 0;
		port = e->v.nat_port;
	}
	__builtin_memcpy(np->icmp_new, np->icmp_old, XFW_NAT_QUOTE);
	xfw_nat_quote_fix(np, csum, 1, e->v.nat_addr, port);
	if (xfw_nat_quote_store_tc(skb, p, np, in, n))
		return -1;
	/* The error comes from the original destination. */
	olda = bpf_htonl(p->src_lo);
	newa = bpf_htonl(e->v.nat_addr);
	if (bpf_l3_csum_replace(skb, p->l3_off + XFW_NAT_IP_OFF, olda, newa, sizeof(newa)) ||
	    bpf_skb_store_bytes(skb, p->l3_off + XFW_NAT_IP_OFF + 2, &newa, sizeof(newa), 0))
		return -1;
	p->src_lo = e->v.nat_addr;
	return 0;
}

/* xfw_nat_quote_store_xdp writes the translated quote of n bytes
 * (np->icmp_new) into the ICMP error p and updates its checksum by the
 * change. Returns 0, or -1 when a write failed. */
static __always_inline int xfw_nat_quote_store_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
						   struct xfw_nat_pend *np, __u32 n)
{
	__u32 in = p->l4_off + XFW_NQ_ICMP_HLEN, f;
	__u8 hdr[4];
	__s64 diff;

	if (n == XFW_NAT_QUOTE) {
		diff = bpf_csum_diff((__be32 *)np->icmp_old, XFW_NAT_QUOTE, (__be32 *)np->icmp_new,
				     XFW_NAT_QUOTE, 0);
		if (bpf_xdp_store_bytes(ctx, in, np->icmp_new, XFW_NAT_QUOTE))
			return -1;
	} else {
		diff = bpf_csum_diff((__be32 *)np->icmp_old, XFW_NAT_QUOTE_UDP, (__be32 *)np->icmp_new,
				     XFW_NAT_QUOTE_UDP, 0);
		if (bpf_xdp_store_bytes(ctx, in, np->icmp_new, XFW_NAT_QUOTE_UDP))
			return -1;
	}
	/* The ICMP checksum (no pseudo-header) by the quoted bytes' change:
	 * bpf_csum_diff sums the bytes as the host reads 16-bit words, so
	 * its folded sum is in host byte order. */
	if (diff < 0 || bpf_xdp_load_bytes(ctx, p->l4_off, hdr, 4))
		return -1;
	f = (~xfw_nat_rd16(hdr, XFW_NQ_ICMP_CSUM) & 0xffff) + bpf_ntohs(xfw_nat_fold((__u32)diff));
	xfw_nat_wr16(hdr, XFW_NQ_ICMP_CSUM, ~xfw_nat_fold(f));
	return bpf_xdp_store_bytes(ctx, p->l4_off, hdr, 4) ? -1 : 0;
}

/* xfw_nat_quote_load_xdp copies the quoted headers of ICMP error p into
 * np->icmp_old (n: the bytes, a TCP header cut short: the UDP length) and
 * returns the quoted protocol, or 0 when p is no IPv4 error quoting TCP
 * or UDP. */
static __always_inline __u32 xfw_nat_quote_load_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
						    struct xfw_nat_pend *np, __u32 *n)
{
	__u32 in = p->l4_off + XFW_NQ_ICMP_HLEN, proto;

	if (p->fam != 0 || p->icmp > 0xffff || !p->l4_off || !xfw_icmp_is_err(p->icmp >> 8) ||
	    p->fragmented)
		return 0;
	if (bpf_xdp_load_bytes(ctx, in, np->icmp_old, XFW_NAT_QUOTE_UDP))
		return 0;
	proto = xfw_nat_quote_proto(np);
	if (!proto)
		return 0;
	*n = XFW_NAT_QUOTE;
	if (xfw_nat_quote_short(proto) || bpf_xdp_load_bytes(ctx, in, np->icmp_old, XFW_NAT_QUOTE))
		*n = XFW_NAT_QUOTE_UDP;
	return proto;
}

/* xfw_nat_addr_xdp gives p its destination (dst 1) or source address
 * addr, the IPv4 checksum updated. Returns 0, or -1 when a write failed. */
static __always_inline int xfw_nat_addr_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst,
					    __u32 addr)
{
	__u32 off = dst ? 6 : 2, old = dst ? p->dst_lo : p->src_lo, f;
	__u8 hdr[XFW_NAT_IP_LEN];

	if (bpf_xdp_load_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, hdr, XFW_NAT_IP_LEN))
		return -1;
	f = (~xfw_nat_rd16(hdr, 0) & 0xffff) + xfw_nat_diff32(old, addr);
	xfw_nat_wr16(hdr, 0, ~xfw_nat_fold(f));
	xfw_nat_wr16(hdr, off, addr >> 16);
	xfw_nat_wr16(hdr, off + 2, addr);
	if (bpf_xdp_store_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, hdr, XFW_NAT_IP_LEN))
		return -1;
	if (dst)
		p->dst_lo = addr;
	else
		p->src_lo = addr;
	return 0;
}

/* xfw_nat_icmp_pre_noports is xfw_nat_icmp_pre_xdp for an error quoting
 * a packet of a protocol without ports (GRE with its keys: the mapping's
 * key, the reply's wire tuple, has the quoted destination key as its
 * source port) that an SNAT translated: the quoted source and the error's
 * destination get the original address back, the quoted bytes after the
 * IP header stay as they are. Returns 1 when it did. */
static __always_inline int xfw_nat_icmp_pre_noports(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_nat_pend *np)
{
	struct xfw_nat_key k = {};
	struct xfw_nat_val v;
	__u32 proto;
	int key;

	if (p->fam != 0 || p->icmp > 0xffff || !p->l4_off || !xfw_icmp_is_err(p->icmp >> 8) || p->fragmented ||
	    bpf_xdp_load_bytes(ctx, p->l4_off + XFW_NQ_ICMP_HLEN, np->icmp_old, XFW_NAT_QUOTE_UDP))
		return 0;
	proto = np->icmp_old[9];
	/* Echo requests, the other ICMP, DCCP: not translated by the address
	 * alone (nat_query.h xfw_natq_kind). */
	if (np->icmp_old[0] != 0x45 || xfw_ct_ports(proto) || proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6 ||
	    proto == IPPROTO_DCCP)
		return 0;
	key = xfw_nat_quote_gre(np);
	if (key < 0)
		return 0;
	k.saddr = xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR + 2);
	k.daddr = xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR + 2);
	k.sport = key;
	k.proto = proto;
	if (!xfw_nat_held(&k, XFW_NAT_F_SRC, 0, &v))
		return 0;
	__builtin_memcpy(np->icmp_new, np->icmp_old, XFW_NAT_QUOTE);
	/* The quoted bytes after the header kept: their first two as the
	 * "port". */
	xfw_nat_quote_fix(np, 0, 0, v.to_addr, xfw_nat_rd16(np->icmp_old, XFW_NQ_L4));
	if (xfw_nat_quote_store_xdp(ctx, p, np, XFW_NAT_QUOTE_UDP) || xfw_nat_addr_xdp(ctx, p, 1, v.to_addr))
		return 0;
	return 1;
}

/* xfw_nat_icmp_pre_xdp translates, before the route lookup, an ICMP
 * error (p) about an SNAT connection coming back to the translated
 * source: the quoted packet gets its original source back, the error its
 * original destination (the kernel's PREROUTING). Returns 1 when it did.
 * A global function. */
__attribute__((noinline)) int xfw_nat_icmp_pre_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0, n, csum, proto;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_key k = {};
	struct xfw_nat_val v;

	if (!ctx || !p || !np || !xfw_nat_enabled())
		return 0;
	proto = xfw_nat_quote_load_xdp(ctx, p, np, &n);
	if (!proto)
		return xfw_nat_icmp_pre_noports(ctx, p, np);
	csum = xfw_nat_quote_csum(proto, n == XFW_NAT_QUOTE);
	/* The quoted packet left translated: its reply's wire tuple is the
	 * mapping's key. */
	k.saddr = xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR + 2);
	k.daddr = xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR + 2);
	k.sport = xfw_nat_rd16(np->icmp_old, XFW_NQ_L4 + 2);
	k.dport = xfw_nat_rd16(np->icmp_old, XFW_NQ_L4);
	k.proto = proto;
	if (!xfw_nat_held(&k, XFW_NAT_F_SRC, 0, &v))
		return 0;
	__builtin_memcpy(np->icmp_new, np->icmp_old, XFW_NAT_QUOTE);
	xfw_nat_quote_fix(np, csum, 0, v.to_addr, v.to_port);
	/* The error goes to the original source. */
	if (xfw_nat_quote_store_xdp(ctx, p, np, n) || xfw_nat_addr_xdp(ctx, p, 1, v.to_addr))
		return 0;
	return 1;
}

/* xfw_nat_icmp_out_tc translates, at TC egress before tracking, an ICMP
 * error the host sends (p) about a packet of a connection nat INPUT's
 * SNAT translated (a port unreachable to a datagram whose source it
 * changed): the quoted packet, as the host's socket saw it, gets its
 * original source back and the error goes to it, as the kernel's nat
 * OUTPUT hook does (nf_nat_icmp_reply_translation at LOCAL_OUT, then
 * ip_route_me_harder): the caller routes it again. IPv6: nat6_icmp.h.
 * k and v are the caller's room for the mapping's key and value (the
 * call chain's stack is short). Returns 1 when it did, 0 when p is no such error, -1 when a write
 * failed. A global function. */
__attribute__((noinline)) int xfw_nat_icmp_out_tc(struct __sk_buff *skb, struct xfw_pkt *p,
						  struct xfw_nat_key *k, struct xfw_nat_val *v)
{
	__u32 zero = 0, in, n = XFW_NAT_QUOTE_UDP, csum, proto, ported, port;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	__be32 olda, newa;

	if (!skb || !p || !np || !k || !v)
		return 0;
	if (p->fam != 0 || p->proto != IPPROTO_ICMP || p->icmp > 0xffff || !p->l4_off ||
	    !xfw_icmp_is_err(p->icmp >> 8))
		return 0;
	in = p->l4_off + XFW_NQ_ICMP_HLEN;
	if (bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_NAT_QUOTE_UDP))
		return 0;
	__builtin_memset(k, 0, sizeof(*k));
	ported = xfw_nat_quote_proto(np);
	proto = np->icmp_old[9];
	if (ported) {
		/* A TCP header cut short: the ports only. */
		if (!xfw_nat_quote_short(proto) && !bpf_skb_load_bytes(skb, in, np->icmp_old, XFW_NAT_QUOTE))
			n = XFW_NAT_QUOTE;
		k->sport = xfw_nat_rd16(np->icmp_old, XFW_NQ_L4 + 2);
		k->dport = xfw_nat_rd16(np->icmp_old, XFW_NQ_L4);
	} else if (np->icmp_old[0] != 0x45 || xfw_ct_ports(proto) || proto == IPPROTO_ICMP ||
		   proto == IPPROTO_ICMPV6) {
		/* Only a protocol without ports (nat_query.h: its mapping's
		 * ports 0, GRE's keys) besides: the address alone. */
		return 0;
	} else if (xfw_nat_quote_gre(np) < 0) {
		return 0;
	} else {
		k->sport = xfw_nat_quote_gre(np);
	}
	csum = xfw_nat_quote_csum(proto, n == XFW_NAT_QUOTE);
	/* The quoted packet came from the new source to the host: the
	 * host's reply's wire tuple, the mapping's key. */
	k->saddr = xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR + 2);
	k->daddr = xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR + 2);
	k->proto = proto;
	if (!xfw_nat_held(k, XFW_NAT_F_SRC, 0, v))
		return 0;
	/* Without ports the quoted bytes after the header stay as they are. */
	port = ported ? v->to_port : xfw_nat_rd16(np->icmp_old, XFW_NQ_L4);
	__builtin_memcpy(np->icmp_new, np->icmp_old, XFW_NAT_QUOTE);
	xfw_nat_quote_fix(np, csum, 0, v->to_addr, port);
	/* The host's ICMP error carries its full checksum (no offload). */
	if (xfw_nat_quote_store_tc(skb, p, np, in, n))
		return -1;
	/* The error goes to the original source. */
	olda = bpf_htonl(p->dst_lo);
	newa = bpf_htonl(v->to_addr);
	if (bpf_l3_csum_replace(skb, p->l3_off + XFW_NAT_IP_OFF, olda, newa, sizeof(newa)) ||
	    bpf_skb_store_bytes(skb, p->l3_off + XFW_NAT_IP_OFF + 6, &newa, sizeof(newa), 0))
		return -1;
	p->dst_lo = v->to_addr;
	return 1;
}

/* xfw_nat_icmp_in_xdp translates, after INPUT accepted it, an ICMP error
 * (p) about a connection of the host's own that nat OUTPUT translated (a
 * DNAT connection whose quoted packet went the original way): the quoted
 * packet gets its original destination back, the error its source, as
 * the kernel's nat INPUT hook (nf_nat_icmp_reply_translation). Returns 1
 * when it did, 0 when p is no such error, -1 when a write failed. A
 * global function (nat_out.h delivers the error). */
__attribute__((noinline)) int xfw_nat_icmp_in_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0, n, csum, proto, isrc, idst;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_to to = {};
	struct xfw_ct_entry *e;
	int srcb, reply;

	if (!ctx || !p || !np)
		return 0;
	proto = xfw_nat_quote_load_xdp(ctx, p, np, &n);
	if (!proto) {
		/* Without ports (an echo request, a protocol without ports:
		 * nat OUTPUT's DNAT by the address, nat_query.h): the address
		 * only, the quoted bytes after it as they are, as
		 * xfw_nat_icmp_tc translates a forwarded one. */
		if (p->fam != 0 || p->icmp > 0xffff || !p->l4_off || !xfw_icmp_is_err(p->icmp >> 8) ||
		    p->fragmented ||
		    bpf_xdp_load_bytes(ctx, p->l4_off + XFW_NQ_ICMP_HLEN, np->icmp_old, XFW_NAT_QUOTE_UDP))
			return 0;
	}
	isrc = xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_SADDR + 2);
	idst = xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR) << 16 | xfw_nat_rd16(np->icmp_old, XFW_NQ_DADDR + 2);
	if (!proto) {
		e = xfw_nat_quote_noports(np, isrc, idst, 1, &reply);
		if (!e)
			return 0;
		n = XFW_NAT_QUOTE_UDP;
		csum = 0;
	} else {
		csum = xfw_nat_quote_csum(proto, n == XFW_NAT_QUOTE);
		srcb = xfw_ct_mkkey(&np->fwd, 0, proto, 0, isrc, xfw_nat_rd16(np->icmp_old, XFW_NQ_L4), 0, idst,
				    xfw_nat_rd16(np->icmp_old, XFW_NQ_L4 + 2));
		e = xfw_nat_tracked(&np->fwd);
		if (!e)
			return 0;
		reply = srcb != !!(e->v.status & XFW_CTST_ORIG_B);
	}
	/* The quoted packet's destination as its sender's peer knows it: a
	 * DNAT's original direction the original destination, the host's
	 * reply in a connection nat INPUT's SNAT translated the new source
	 * (xfw_nat_src_of of the other direction). */
	if (!xfw_nat_src_of(e, !reply, &to))
		return 0;
	if (!proto)
		to.port = xfw_nat_rd16(np->icmp_old, XFW_NQ_L4 + 2);
	__builtin_memcpy(np->icmp_new, np->icmp_old, XFW_NAT_QUOTE);
	xfw_nat_quote_fix(np, csum, 1, (__u32)to.lo, to.port);
	/* The error comes from that address. */
	if (xfw_nat_quote_store_xdp(ctx, p, np, n) || xfw_nat_addr_xdp(ctx, p, 0, (__u32)to.lo))
		return -1;
	return 1;
}

/* xfw_nat_pre translates a packet of a translated connection before the
 * route lookup (the kernel's PREROUTING): xfw_nat_pre_xdp, or for an ICMP
 * error xfw_nat_icmp_pre_xdp; a packet without TCP or UDP ports
 * xfw_nat_query_pre_xdp, which p->nat_pre records (xfw_ct_track tells a
 * DNAT connection's packet from a new one with its translated tuple by
 * it). Before the first translated connection (xfw_nat_enabled) none of
 * them is called. Returns 1 when xfw_nat_pre_xdp translated a packet with
 * ports (xfw_nat_pre_undo_xdp gives its wire tuple back), else 0. */
static __always_inline int xfw_nat_pre(struct xdp_md *ctx, struct xfw_pkt *p)
{
	if (!xfw_nat_enabled())
		return 0;
	if (xfw_nat_translatable(p))
		return xfw_nat_pre_xdp(ctx, p);
	if (p->proto == IPPROTO_ICMP && p->icmp <= 0xffff && xfw_icmp_is_err(p->icmp >> 8))
		xfw_nat_icmp_pre_xdp(ctx, p);
	else if (p->proto == IPPROTO_ICMPV6 && p->icmp <= 0xffff && (p->icmp >> 8) < XFW_NAT6_ICMP_INFO)
		xfw_nat6_icmp_pre_xdp(ctx, p); /* nat6_icmp.h */
	else
		p->nat_pre = xfw_nat_query_pre_xdp(ctx, p) ? XFW_NATPRE_DONE : XFW_NATPRE_KEPT; /* nat_query.h */
	return 0;
}

#endif /* XFW_NAT_ICMP_H */
