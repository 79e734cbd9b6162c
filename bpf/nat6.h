/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat6.h — the IPv6 packet rewrites of NAT (nat.h translates both
 * families with the same tables; these are its IPv6 writes), with the
 * kernel's (nf_nat_ipv6.c nf_nat_ipv6_manip_pkt, nf_nat_proto.c):
 *
 *  - The address (16 bytes) and the TCP or UDP port are replaced; IPv6
 *    has no header checksum. The transport checksum's pseudo-header
 *    covers both 128-bit addresses: it is updated incrementally over the
 *    eight 16-bit words of the address (RFC 1624) and the port.
 *  - At XDP, as for IPv4 (nat.h), a checksum field holding exactly the
 *    pseudo-header sum is a partial checksum (CHECKSUM_PARTIAL of a veth
 *    peer) and is updated as one (it does not cover the port); at TC the
 *    kernel's helpers know (bpf_l4_csum_replace with BPF_F_PSEUDO_HDR,
 *    one 32-bit word at a time).
 *  - A UDP checksum is never 0 after the change (0xffff, as
 *    csum_replace's CSUM_MANGLED_0); IPv6 has no UDP packet without one.
 *
 * Conventions: xfw_nat6_rewrite_xdp and xfw_nat6_rewrite_tc are global
 * functions, verified once; addresses hi:lo in host order as struct
 * xfw_pkt holds them; the destination flag XFW_NAT_RW_DST above the port.
 *
 * Includes: nat.h.
 */
#ifndef XFW_NAT6_H
#define XFW_NAT6_H

#include "nat.h"

/* The IPv6 header's addresses: the source at 8, the destination at 24. */
#define XFW_NAT6_ADDRS_OFF 8
#define XFW_NAT6_ADDRS_LEN 32
#define XFW_NAT6_ADDR_LEN 16
#define XFW_NAT6_SADDR_OFF XFW_NAT6_ADDRS_OFF
#define XFW_NAT6_DADDR_OFF (XFW_NAT6_ADDRS_OFF + XFW_NAT6_ADDR_LEN)

/* xfw_nat6_set gives p's destination (dst 1) or source the translated
 * address and port. */
static __always_inline void xfw_nat6_set(struct xfw_pkt *p, __u32 dst, __u64 hi, __u64 lo, __u32 port)
{
	if (dst) {
		p->dst_hi = hi;
		p->dst_lo = lo;
		p->dport = port;
	} else {
		p->src_hi = hi;
		p->src_lo = lo;
		p->sport = port;
	}
}

/* xfw_nat6_put writes hi:lo at b in network order. */
static __always_inline void xfw_nat6_put(__u8 *b, __u64 hi, __u64 lo)
{
	*(__u32 *)b = bpf_htonl(hi >> 32);
	*(__u32 *)(b + 4) = bpf_htonl((__u32)hi);
	*(__u32 *)(b + 8) = bpf_htonl(lo >> 32);
	*(__u32 *)(b + 12) = bpf_htonl((__u32)lo);
}

/* xfw_nat6_csum_update returns the full checksum field f (as the packet
 * holds it) updated by delta, the one's complement sum of what the change
 * adds and removes (RFC 1624: HC' = ~(~HC + ~m + m')). */
static __always_inline __u32 xfw_nat6_csum_update(__u32 f, __u64 delta)
{
	return ~xfw_csum_fold((__u64)(~f & 0xffff) + delta) & 0xffff;
}

/* xfw_nat6_csum returns checksum field f (as the packet holds it, loaded
 * as is: every sum here is in the packet's byte order, which a one's
 * complement sum allows) updated for the address change whose sum diff
 * bpf_csum_diff gave and the port oldport → port (both as the packet holds
 * them). pseudo is the pseudo-header sum before the change: a partial
 * checksum holds exactly it, and does not cover the ports (RFC 1624). */
static __always_inline __u32 xfw_nat6_csum(__u32 f, __u32 pseudo, __u32 diff, __u32 oldport, __u32 port)
{
	if (f == pseudo)
		return xfw_csum_fold((__u64)f + diff);
	return xfw_nat6_csum_update(f, (__u64)diff + (~oldport & 0xffff) + port);
}

/* xfw_nat6_rewrite_xdp translates IPv6 p's destination (XFW_NAT_RW_DST in
 * dst_port) or source to hi:lo and the port in dst_port's low 16 bits, in
 * the packet and in p, the transport checksum included. Returns 0, or -1
 * when the headers cannot be read or written. A global function. */
__attribute__((noinline)) int xfw_nat6_rewrite_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst_port,
						   __u64 hi, __u64 lo)
{
	__u32 zero = 0, dst = !!(dst_port & XFW_NAT_RW_DST), port = bpf_htons(dst_port & 0xffff);
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	__u32 oldport, f, csoff, len, pseudo, diff;
	struct xfw_nat6_buf *b;
	__u8 *old;

	if (!ctx || !p || !np || p->fam != 1 || !p->l4_off || p->l4_end <= p->l4_off)
		return -1;
	b = &np->b6;
	if (p->proto == IPPROTO_TCP) {
		len = XFW_NAT_TCP_LEN;
		csoff = XFW_NAT_TCP_CSUM;
	} else if (xfw_nat_udp(p->proto)) {
		len = XFW_NAT_UDP_LEN;
		csoff = XFW_NAT_UDP_CSUM;
	} else {
		return -1;
	}
	if (bpf_xdp_load_bytes(ctx, p->l3_off + XFW_NAT6_ADDRS_OFF, b->ip, XFW_NAT6_ADDRS_LEN) ||
	    bpf_xdp_load_bytes(ctx, p->l4_off, b->l4, len))
		return -1;
	old = dst ? b->ip + XFW_NAT6_ADDR_LEN : b->ip;
	xfw_nat6_put(b->na, hi, lo);
	oldport = *(__u16 *)(b->l4 + (dst ? 2 : 0));
	f = *(__u16 *)(b->l4 + csoff);
	/* A UDP checksum of 0 is none (IPv6 has none without). */
	if (p->proto == IPPROTO_TCP || f != 0) {
		/* The pseudo-header: both addresses, the length and the
		 * protocol as 32-bit words in network order. */
		pseudo = xfw_csum_fold((__u64)(__u32)bpf_csum_diff(0, 0, (__be32 *)b->ip, XFW_NAT6_ADDRS_LEN, 0) +
				       bpf_htonl(p->l4_end - p->l4_off) + bpf_htonl(p->proto));
		diff = bpf_csum_diff((__be32 *)old, XFW_NAT6_ADDR_LEN, (__be32 *)b->na, XFW_NAT6_ADDR_LEN, 0);
		f = xfw_nat6_csum(f, pseudo, diff, oldport, port);
		if (xfw_nat_udp(p->proto) && f == 0)
			f = 0xffff;
		*(__u16 *)(b->l4 + csoff) = f;
	}
	__builtin_memcpy(old, b->na, XFW_NAT6_ADDR_LEN);
	*(__u16 *)(b->l4 + (dst ? 2 : 0)) = port;
	if (bpf_xdp_store_bytes(ctx, p->l3_off + XFW_NAT6_ADDRS_OFF, b->ip, XFW_NAT6_ADDRS_LEN) ||
	    bpf_xdp_store_bytes(ctx, p->l4_off, b->l4, len))
		return -1;
	xfw_nat6_set(p, dst, hi, lo, dst_port & 0xffff);
	return 0;
}

/* xfw_nat6_rewrite_tc is xfw_nat6_rewrite_xdp on an skb at TC egress,
 * with the kernel's checksum helpers (they follow ip_summed), one 32-bit
 * word of the address at a time. */
__attribute__((noinline)) int xfw_nat6_rewrite_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst_port,
						  __u64 hi, __u64 lo)
{
	__u32 zero = 0, dst = !!(dst_port & XFW_NAT_RW_DST), aoff, poff, csoff, mangled0 = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	__be16 oldp, newp = bpf_htons(dst_port & 0xffff);
	struct xfw_nat6_buf *b;

	if (!skb || !p || !np || p->fam != 1 || !p->l4_off)
		return -1;
	b = &np->b6;
	csoff = xfw_nat_tc_csoff(p, &mangled0);
	if (!csoff)
		return -1;
	aoff = p->l3_off + XFW_NAT6_ADDRS_OFF + (dst ? XFW_NAT6_ADDR_LEN : 0);
	poff = p->l4_off + (dst ? 2 : 0);
	xfw_nat6_put(b->na, hi, lo);
	if (bpf_skb_load_bytes(skb, aoff, b->ip, XFW_NAT6_ADDR_LEN) ||
	    bpf_skb_load_bytes(skb, poff, &oldp, sizeof(oldp)))
		return -1;
	for (int i = 0; i < XFW_NAT6_ADDR_LEN; i += 4)
		if (bpf_l4_csum_replace(skb, csoff, *(__u32 *)(b->ip + i), *(__u32 *)(b->na + i),
					BPF_F_PSEUDO_HDR | mangled0 | sizeof(__u32)))
			return -1;
	if (bpf_l4_csum_replace(skb, csoff, oldp, newp, mangled0 | sizeof(newp)) ||
	    bpf_skb_store_bytes(skb, aoff, b->na, XFW_NAT6_ADDR_LEN, 0) ||
	    bpf_skb_store_bytes(skb, poff, &newp, sizeof(newp), 0))
		return -1;
	xfw_nat6_set(p, dst, hi, lo, dst_port & 0xffff);
	return 0;
}

/* An ICMPv6 error's quoted packet: after the 8-byte ICMPv6 header, its
 * IPv6 header (40 bytes, next header at 6, addresses at 8) and its ports,
 * or a quoted ICMPv6 query's type (at 40) and identifier (at 44). */
#define XFW_NAT6_ICMP_HLEN 8
#define XFW_NAT6_QUOTE_LEN 48
#define XFW_NAT6_QUOTE_NEXT 6
#define XFW_NAT6_QUOTE_PORTS 40
#define XFW_NAT6_QUOTE_ID 44
/* ICMPv6 types below 128 are errors (RFC 4443). */
#define XFW_NAT6_ICMP_INFO 128
#define XFW_ICMP6_ECHO 128
#define XFW_ICMP6_ECHOREPLY 129

/* What xfw_nat6_quote_key returns besides a key's endpoint order (0, 1:
 * xfw_ct_mkkey's): a quoted echo request or reply (the requester is
 * always endpoint a), or no translatable connection. */
#define XFW_NAT6_QK_ECHO 2
#define XFW_NAT6_QK_ECHOREPLY 3
#define XFW_NAT6_QK_NONE 4

/* xfw_nat6_quote_key fills np->fwd with the connection key of an ICMPv6
 * error's quoted packet q: TCP and UDP with their ports, an ICMPv6 echo
 * request or reply by its requester, identifier and code, another
 * protocol without ports (GRE with its keys; the quote's extension
 * headers are not skipped). Returns the key's endpoint order, XFW_NAT6_QK_ECHO or
 * _ECHOREPLY, or XFW_NAT6_QK_NONE. */
static __always_inline __u32 xfw_nat6_quote_key(struct xfw_nat_pend *np, __u8 *q)
{
	__u32 proto = q[XFW_NAT6_QUOTE_NEXT], t = q[XFW_NAT6_QUOTE_PORTS];
	__u64 shi = xfw_be64(q + 8), slo = xfw_be64(q + 16), dhi = xfw_be64(q + 24), dlo = xfw_be64(q + 32);
	__u16 id = xfw_nat_rd16(q, XFW_NAT6_QUOTE_ID);
	__u8 code = q[XFW_NAT6_QUOTE_PORTS + 1];
	int key = 0;

	if (xfw_ct_ports(proto))
		return xfw_ct_mkkey(&np->fwd, 1, proto, shi, slo, xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS), dhi, dlo,
				    xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS + 2));
	if (proto == IPPROTO_ICMPV6 && t == XFW_ICMP6_ECHO) {
		xfw_ct_mkkey_icmp(&np->fwd, 1, proto, shi, slo, dhi, dlo, id, XFW_ICMP6_ECHO, code);
		return XFW_NAT6_QK_ECHO;
	}
	if (proto == IPPROTO_ICMPV6 && t == XFW_ICMP6_ECHOREPLY) {
		xfw_ct_mkkey_icmp(&np->fwd, 1, proto, dhi, dlo, shi, slo, id, XFW_ICMP6_ECHO, code);
		return XFW_NAT6_QK_ECHOREPLY;
	}
	if (xfw_ct_ports(proto) || proto == IPPROTO_ICMPV6 || proto == IPPROTO_ICMP)
		return XFW_NAT6_QK_NONE;
	if (proto == IPPROTO_GRE) {
		/* GRE's keys: version 1's call ID (ct_conn.h xfw_gre_key). */
		key = xfw_gre_key(XFW_GRE_V1_HLEN, q[XFW_NAT6_QUOTE_PORTS + 1], xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS + 2),
				  xfw_nat_rd16(q, XFW_NAT6_QUOTE_PORTS + XFW_GRE_CALL_ID));
		if (key < 0)
			return XFW_NAT6_QK_NONE;
	}
	return xfw_ct_mkkey(&np->fwd, 1, proto, shi, slo, 0, dhi, dlo, key);
}

#ifndef AF_INET6
#define AF_INET6 10 /* bpf_fib_lookup's family */
#endif

/* xfw_nat6_fib_init prepares the FIB request for IPv6 packet p leaving by
 * device oif: as output, to its destination. */
static __always_inline void xfw_nat6_fib_init(struct bpf_fib_lookup *fib, struct xfw_pkt *p, __u32 oif)
{
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->family = AF_INET6;
	fib->ifindex = oif;
	fib->l4_protocol = p->proto;
	fib->sport = bpf_htons(p->sport);
	fib->dport = bpf_htons(p->dport);
	fib->ipv6_dst[0] = bpf_htonl(p->dst_hi >> 32);
	fib->ipv6_dst[1] = bpf_htonl((__u32)p->dst_hi);
	fib->ipv6_dst[2] = bpf_htonl(p->dst_lo >> 32);
	fib->ipv6_dst[3] = bpf_htonl((__u32)p->dst_lo);
}

/* The FIB lookup of MASQUERADE's source: as output by the device, the
 * source derived (BPF_FIB_LOOKUP_SRC, kernel >= 6.7), no neighbour. */
#define XFW_NAT6_MASQ_FIB (BPF_FIB_LOOKUP_OUTPUT | BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH)

/* xfw_nat6_masq_put keeps the source a FIB lookup derived (rc its result)
 * for xfw_nat6_masq_src. */
static __always_inline int xfw_nat6_masq_put(struct xfw_nat_pend *np, struct bpf_fib_lookup *fib, long rc)
{
	np->masq_ok = 0;
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	np->masq_hi = (__u64)bpf_ntohl(fib->ipv6_src[0]) << 32 | bpf_ntohl(fib->ipv6_src[1]);
	np->masq_lo = (__u64)bpf_ntohl(fib->ipv6_src[2]) << 32 | bpf_ntohl(fib->ipv6_src[3]);
	np->masq_ok = 1;
	return 0;
}

/* xfw_nat6_masq_xdp finds the source an IPv6 MASQUERADE gives forwarded
 * packet p leaving by device oif: the kernel's nf_nat_masquerade_ipv6
 * takes ipv6_dev_get_saddr of the output device for the destination,
 * which bpf_fib_lookup's BPF_FIB_LOOKUP_SRC asks (a route's preferred
 * source aside: docs/differences.md). Kept in the NAT scratch for
 * xfw_nat_snat; none found: xfw_nat_snat drops the packet, as the kernel
 * drops a MASQUERADE without an address. A global function. */
__attribute__((noinline)) int xfw_nat6_masq_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 oif)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	if (!ctx || !p || !np)
		return -1;
	xfw_nat6_fib_init(&np->fib, p, oif);
	return xfw_nat6_masq_put(np, &np->fib, bpf_fib_lookup(ctx, &np->fib, sizeof(np->fib), XFW_NAT6_MASQ_FIB));
}

/* xfw_nat6_masq_tc is xfw_nat6_masq_xdp for the host's own packets at TC
 * egress. A global function. */
__attribute__((noinline)) int xfw_nat6_masq_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 oif)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);

	if (!skb || !p || !np)
		return -1;
	xfw_nat6_fib_init(&np->fib, p, oif);
	return xfw_nat6_masq_put(np, &np->fib, bpf_fib_lookup(skb, &np->fib, sizeof(np->fib), XFW_NAT6_MASQ_FIB));
}

/* xfw_nat6_masq_src gives np's range the source xfw_nat6_masq_xdp or _tc
 * found for this packet. Returns 0, or -1 when there is none. */
static __always_inline int xfw_nat6_masq_src(struct xfw_nat_pend *np, struct xfw_pkt *p)
{
	if (!np->masq_ok || p->fam != 1)
		return -1;
	np->masq_ok = 0;
	np->range.addr_hi = np->masq_hi;
	np->range.addr = np->masq_lo;
	return 0;
}

#endif /* XFW_NAT6_H */
