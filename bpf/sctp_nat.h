/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sctp_nat.h — an SCTP packet's port translated with its CRC32c updated
 * incrementally (the kernel's sctp_manip_pkt recomputes it over the whole
 * packet).
 *
 * The CRC32c (RFC 9260 appendix A; reflected, polynomial 0x82F63B78) is
 * linear over GF(2): for two packets of one length L that differ in their
 * first 4 bytes (the ports) by d, their CRCs differ by the CRC, with zero
 * initial value and no final xor, of d followed by L - 4 zero bytes:
 * d's 32 shifts through the polynomial, then a multiplication by
 * x^(8(L-4)) mod P, made of the precomputed x^(8·2^i) mod P
 * (xfw_crc32c_x2n) for each bit i of L - 4: at most 16 multiplications of
 * 32 steps, no packet byte read beyond the header. A correct CRC stays
 * correct, a wrong one stays wrong. A CRC field of 0 is left alone: the
 * stack leaves it 0 for the device to fill (CHECKSUM_PARTIAL with
 * csum_not_inet, which the kernel's sctp_manip_pkt leaves too); at XDP
 * ip_summed is not visible, so the field is the sign.
 *
 * Conventions: the field and d are read as little-endian 32-bit words,
 * byte by byte (the reflected CRC's order); the loops run on the
 * kernel's numeric iterator (iter.h, verified a few times each, not once
 * per step) and are branch-free; the translations and the multiplication
 * are global functions, verified once.
 *
 * Includes: nat.h, nat6.h (included at nat.h's end, after both). Owns
 * the read-only table
 * xfw_crc32c_x2n (.rodata).
 */
#ifndef XFW_SCTP_NAT_H
#define XFW_SCTP_NAT_H

#include "nat.h"
#include "nat6.h"
#include "iter.h"

/* The CRC32c polynomial, reflected. */
#define XFW_CRC32C_POLY 0x82F63B78u
/* The SCTP common header: ports at 0 and 2, the CRC32c at 8. */
#define XFW_SCTP_NAT_HLEN 12
#define XFW_SCTP_NAT_CRC 8
/* Bits of a length after the ports (below 65536). */
#define XFW_CRC32C_LEN_BITS 16

/* x^(8·2^i) mod P, reflected (i = 0 … 15): feeding 2^i zero bytes. */
static const volatile __u32 xfw_crc32c_x2n[XFW_CRC32C_LEN_BITS] = {
	0x00800000, 0x00008000, 0x82f63b78, 0x6ea2d55c, 0x18b8ea18, 0x510ac59a,
	0xb82be955, 0xb8fdb1e7, 0x88e56f72, 0x74c360a4, 0xe4172b16, 0x0d65762a,
	0x35d73a62, 0x28461564, 0xbf455269, 0xe2ea32dc,
};

/* xfw_crc32c_mulmod returns a·b mod P (reflected: bit 31 is x^0). A
 * global function: its 32 steps inlined were verified again for each of
 * xfw_crc32c_delta's 16 bits and each path into the rewrite (~24,000
 * instructions per program); a call is verified in a few. */
__attribute__((noinline)) __u32 xfw_crc32c_mulmod(__u32 a, __u32 b)
{
	struct bpf_iter_num it;
	__u32 p = 0;

	/* a's bits from bit 31 down, on the numeric iterator (iter.h). */
	bpf_iter_num_new(&it, 0, 32);
	while (bpf_iter_num_next(&it)) {
		p ^= b & -((a >> 31) & 1);
		a <<= 1;
		b = (b >> 1) ^ (XFW_CRC32C_POLY & -(b & 1));
	}
	bpf_iter_num_destroy(&it);
	return p;
}

/* xfw_crc32c_delta returns the CRC difference of a change d (the xor of
 * the old and new first 4 bytes, little-endian) followed by n unchanged
 * bytes. */
static __always_inline __u32 xfw_crc32c_delta(__u32 d, __u32 n)
{
	struct bpf_iter_num it;
	__u32 c = d, i;
	int *ip;

	bpf_iter_num_new(&it, 0, 32);
	while (bpf_iter_num_next(&it))
		c = (c >> 1) ^ (XFW_CRC32C_POLY & -(c & 1));
	bpf_iter_num_destroy(&it);
	bpf_iter_num_new(&it, 0, XFW_CRC32C_LEN_BITS);
	while ((ip = bpf_iter_num_next(&it))) {
		i = *ip;
		if (i >= XFW_CRC32C_LEN_BITS)
			break;
		if ((n >> i) & 1)
			c = xfw_crc32c_mulmod(xfw_crc32c_x2n[i], c);
	}
	bpf_iter_num_destroy(&it);
	return c;
}

static __always_inline __u32 xfw_le32(const __u8 *b)
{
	return (__u32)b[0] | ((__u32)b[1] << 8) | ((__u32)b[2] << 16) | ((__u32)b[3] << 24);
}

static __always_inline void xfw_put_le32(__u8 *b, __u32 v)
{
	b[0] = v;
	b[1] = v >> 8;
	b[2] = v >> 16;
	b[3] = v >> 24;
}

/* xfw_sctp_fix gives header h (the packet's first 12 SCTP bytes) the
 * destination (dst 1) or source port and the CRC32c that follows; len is
 * the SCTP packet's length. */
static __always_inline void xfw_sctp_fix(__u8 *h, __u32 dst, __u32 port, __u32 len)
{
	__u32 old = xfw_le32(h), crc = xfw_le32(h + XFW_SCTP_NAT_CRC), poff = dst ? 2 : 0;

	h[poff] = port >> 8;
	h[poff + 1] = port;
	if (crc)
		crc ^= xfw_crc32c_delta(old ^ xfw_le32(h), len - 4);
	xfw_put_le32(h + XFW_SCTP_NAT_CRC, crc);
}

/* xfw_sctp_rewrite_xdp translates SCTP packet p's destination
 * (XFW_NAT_RW_DST in dst_port) or source to the address hi:lo (IPv4: lo)
 * and the port in dst_port's low 16 bits, in the packet and in p: the
 * port with the CRC32c, the address with the IPv4 checksum (the CRC does
 * not cover the addresses). Returns 0, or -1 when the headers cannot be
 * read or written. A global function, called where the TCP and UDP
 * rewrites are (xfw_nat_rw_xdp), not below them: the call chain's stack
 * has no room for another level. */
__attribute__((noinline)) int xfw_sctp_rewrite_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst_port,
						   __u64 hi, __u64 lo)
{
	__u32 zero = 0, dst = !!(dst_port & XFW_NAT_RW_DST), port = dst_port & 0xffff, old, f;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	__u8 *h, *ip;

	if (!ctx || !p || !np || p->fam > 1 || !p->l4_off || p->l4_end < p->l4_off + XFW_SCTP_NAT_HLEN)
		return -1;
	h = np->b6.l4;
	if (bpf_xdp_load_bytes(ctx, p->l4_off, h, XFW_SCTP_NAT_HLEN))
		return -1;
	xfw_sctp_fix(h, dst, port, p->l4_end - p->l4_off);
	if (bpf_xdp_store_bytes(ctx, p->l4_off, h, XFW_SCTP_NAT_HLEN))
		return -1;
	if (p->fam == 1) {
		xfw_nat6_put(np->b6.na, hi, lo);
		if (bpf_xdp_store_bytes(ctx, p->l3_off + XFW_NAT6_ADDRS_OFF + (dst ? XFW_NAT6_ADDR_LEN : 0),
					np->b6.na, XFW_NAT6_ADDR_LEN))
			return -1;
		xfw_nat6_set(p, dst, hi, lo, port);
		return 0;
	}
	ip = np->b6.ip;
	if (bpf_xdp_load_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, ip, XFW_NAT_IP_LEN))
		return -1;
	old = xfw_nat_rd16(ip, dst ? 6 : 2) << 16 | xfw_nat_rd16(ip, dst ? 8 : 4);
	f = (~xfw_nat_rd16(ip, 0) & 0xffff) + xfw_nat_diff32(old, (__u32)lo);
	xfw_nat_wr16(ip, 0, ~xfw_nat_fold(f));
	xfw_nat_wr16(ip, dst ? 6 : 2, (__u32)lo >> 16);
	xfw_nat_wr16(ip, dst ? 8 : 4, (__u32)lo);
	if (bpf_xdp_store_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, ip, XFW_NAT_IP_LEN))
		return -1;
	xfw_nat_set(p, dst, (__u32)lo, port);
	return 0;
}

/* xfw_sctp_rewrite_tc is xfw_sctp_rewrite_xdp on an skb at TC egress (the
 * IPv4 checksum with the kernel's helper). */
__attribute__((noinline)) int xfw_sctp_rewrite_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst_port,
						  __u64 hi, __u64 lo)
{
	__u32 zero = 0, dst = !!(dst_port & XFW_NAT_RW_DST), port = dst_port & 0xffff, aoff;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	__be32 olda, newa = bpf_htonl((__u32)lo);
	__u8 *h;

	if (!skb || !p || !np || p->fam > 1 || !p->l4_off || p->l4_end < p->l4_off + XFW_SCTP_NAT_HLEN)
		return -1;
	h = np->b6.l4;
	if (bpf_skb_load_bytes(skb, p->l4_off, h, XFW_SCTP_NAT_HLEN))
		return -1;
	xfw_sctp_fix(h, dst, port, p->l4_end - p->l4_off);
	if (bpf_skb_store_bytes(skb, p->l4_off, h, XFW_SCTP_NAT_HLEN, 0))
		return -1;
	if (p->fam == 1) {
		xfw_nat6_put(np->b6.na, hi, lo);
		if (bpf_skb_store_bytes(skb, p->l3_off + XFW_NAT6_ADDRS_OFF + (dst ? XFW_NAT6_ADDR_LEN : 0),
					np->b6.na, XFW_NAT6_ADDR_LEN, 0))
			return -1;
		xfw_nat6_set(p, dst, hi, lo, port);
		return 0;
	}
	aoff = p->l3_off + XFW_NAT_IP_OFF + (dst ? 6 : 2);
	if (bpf_skb_load_bytes(skb, aoff, &olda, sizeof(olda)) ||
	    bpf_l3_csum_replace(skb, p->l3_off + XFW_NAT_IP_OFF, olda, newa, sizeof(newa)) ||
	    bpf_skb_store_bytes(skb, aoff, &newa, sizeof(newa), 0))
		return -1;
	xfw_nat_set(p, dst, (__u32)lo, port);
	return 0;
}

#endif /* XFW_SCTP_NAT_H */
