/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat6_query.h — the IPv6 rewrites of source NAT without ports
 * (nat_query.h decides and keeps them for both families), as the
 * kernel's nf_nat_ipv6_manip_pkt and nf_nat_proto.c do:
 *
 *  - The address (16 bytes) is replaced; IPv6 has no header checksum.
 *  - ICMPv6 echo (icmpv6_manip_pkt): the ICMPv6 checksum covers the
 *    pseudo-header, so it is updated for the address change (RFC 1624;
 *    the identifier is kept, nat_query.h). ICMPv6 computes its checksum
 *    in full (no partial checksum from a veth peer).
 *  - Other protocols without ports (the kernel's l4proto_manip_pkt
 *    default): the address only, their own checksums untouched.
 *
 * Conventions: the rewrites are global functions, verified once.
 * Addresses hi:lo in host order, as struct xfw_pkt holds them.
 *
 * Includes: nat.h (whose nat6.h gives the IPv6 header's layout and the
 * echo types).
 */
#ifndef XFW_NAT6_QUERY_H
#define XFW_NAT6_QUERY_H

#include "nat.h"

#define XFW_ICMP6_CSUM_OFF 2 /* the checksum in the ICMPv6 header */

/* xfw_natq6_set gives p its translated destination (dst 1) or source,
 * its ports as they were. */
static __always_inline void xfw_natq6_set(struct xfw_pkt *p, __u32 dst, __u64 hi, __u64 lo)
{
	xfw_nat6_set(p, dst, hi, lo, dst ? p->dport : p->sport);
}

/* xfw_natq6_addr_xdp rewrites IPv6 p's destination (dst 1) or source
 * address to hi:lo, and an ICMPv6 checksum for it. Returns 0, or -1 when
 * the headers cannot be read or written. A global function. */
__attribute__((noinline)) int xfw_natq6_addr_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst, __u64 hi,
						 __u64 lo)
{
	__u32 zero = 0, aoff, diff, f;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat6_buf *b;

	if (!ctx || !p || !np || p->fam != 1)
		return -1;
	b = &np->b6;
	aoff = p->l3_off + XFW_NAT6_ADDRS_OFF + (dst ? XFW_NAT6_ADDR_LEN : 0);
	if (bpf_xdp_load_bytes(ctx, aoff, b->ip, XFW_NAT6_ADDR_LEN))
		return -1;
	xfw_nat6_put(b->na, hi, lo);
	if (p->proto == IPPROTO_ICMPV6) {
		if (!p->l4_off || bpf_xdp_load_bytes(ctx, p->l4_off + XFW_ICMP6_CSUM_OFF, b->l4, sizeof(__u16)))
			return -1;
		diff = bpf_csum_diff((__be32 *)b->ip, XFW_NAT6_ADDR_LEN, (__be32 *)b->na, XFW_NAT6_ADDR_LEN, 0);
		f = *(__u16 *)b->l4;
		*(__u16 *)b->l4 = xfw_nat6_csum_update(f, diff);
		if (bpf_xdp_store_bytes(ctx, p->l4_off + XFW_ICMP6_CSUM_OFF, b->l4, sizeof(__u16)))
			return -1;
	}
	if (bpf_xdp_store_bytes(ctx, aoff, b->na, XFW_NAT6_ADDR_LEN))
		return -1;
	xfw_natq6_set(p, dst, hi, lo);
	return 0;
}

/* xfw_natq6_addr_tc is xfw_natq6_addr_xdp on an skb at TC egress, with
 * the kernel's checksum helper (it follows ip_summed), one 32-bit word of
 * the address at a time. A global function. */
__attribute__((noinline)) int xfw_natq6_addr_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst, __u64 hi,
						__u64 lo)
{
	__u32 zero = 0, aoff;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat6_buf *b;

	if (!skb || !p || !np || p->fam != 1)
		return -1;
	b = &np->b6;
	aoff = p->l3_off + XFW_NAT6_ADDRS_OFF + (dst ? XFW_NAT6_ADDR_LEN : 0);
	if (bpf_skb_load_bytes(skb, aoff, b->ip, XFW_NAT6_ADDR_LEN))
		return -1;
	xfw_nat6_put(b->na, hi, lo);
	if (p->proto == IPPROTO_ICMPV6) {
		if (!p->l4_off)
			return -1;
		for (int i = 0; i < XFW_NAT6_ADDR_LEN; i += 4)
			if (bpf_l4_csum_replace(skb, p->l4_off + XFW_ICMP6_CSUM_OFF, *(__u32 *)(b->ip + i),
						*(__u32 *)(b->na + i), BPF_F_PSEUDO_HDR | sizeof(__u32)))
				return -1;
	}
	if (bpf_skb_store_bytes(skb, aoff, b->na, XFW_NAT6_ADDR_LEN, 0))
		return -1;
	xfw_natq6_set(p, dst, hi, lo);
	return 0;
}

#endif /* XFW_NAT6_QUERY_H */
