/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_csum.h — REJECT's checksums: the sums of the replies it writes
 * (xfw_rj_csum_*, folded and finished), and the check of the offending
 * packet's transport checksum the kernel makes before it answers
 * (xfw_rj_csum_ok).
 *
 * Conventions: sums run in a bpf_loop of bpf_csum_diff() over
 * XFW_RJ_CHUNK-byte chunks copied into the REJECT scratch, then one
 * zero-padded chunk for the rest; the per-hook entry points are global
 * functions, verified once per program type.
 *
 * Includes: common.h, parse.h (struct xfw_pkt), reject_structs.h,
 * reject_maps.h.
 */
#ifndef XFW_REJECT_CSUM_H
#define XFW_REJECT_CSUM_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "reject_structs.h"
#include "reject_maps.h"

/* xfw_rj_rst4_psum writes into the IPv4 RST whose TCP header is at th
 * (20 bytes, checked by the caller) the checksum field the kernel's has
 * where lo never completes it: the pseudo-header sum of saddr, daddr
 * (network order), TCP and its length (nf_reject_ip_tcphdr_put leaves the
 * rest to the device, CHECKSUM_PARTIAL); skb is marked verified, so TCP
 * takes the RST as the kernel's. */
static __always_inline void xfw_rj_rst4_psum(struct __sk_buff *skb, __u8 *th, __u32 saddr, __u32 daddr)
{
	__u64 sum = (__u64)saddr + daddr + bpf_htons(IPPROTO_TCP) + bpf_htons(XFW_RJ_TCP_HLEN);

	*(__u16 *)(th + 16) = (__u16)xfw_csum_fold(sum);
	bpf_csum_level(skb, BPF_CSUM_LEVEL_INC);
}

/* Checking the offending packet's transport checksum, as the kernel's
 * REJECT does before it answers (nf_send_unreach: nf_reject_verify_csum
 * and nf_ip_checksum; reject6_csum_ok; nf_reject_ip_tcphdr_get and
 * nf_reject_ip6_tcphdr_get for RSTs): a packet whose checksum is wrong
 * gets no reply (REJECT still drops it). The kernel trusts a checksum the
 * device verified or one still to be filled in (CHECKSUM_UNNECESSARY,
 * CHECKSUM_PARTIAL), which XDP and TC cannot see: a TCP or UDP checksum
 * field holding just the pseudo-header sum (the CHECKSUM_PARTIAL form of
 * local senders, veth peers included) counts as good. */

/* Bytes of transport data checked at most (a jumbo frame); a longer
 * packet (a GSO one on egress) is not checked. */
#define XFW_RJ_VERIFY_MAX 9216
/* The chunk walk's bound covers the replies' sums too. */
_Static_assert(XFW_RJ_SUM_MAX <= XFW_RJ_VERIFY_MAX, "xfw_rj_sum_chunks walks XFW_RJ_VERIFY_MAX bytes");
_Static_assert(XFW_RJ_CHUNK - 1 == 63, "xfw_rj_load's mask is XFW_RJ_CHUNK - 1");
#define XFW_RJ_VERIFY_OK 1
#define XFW_RJ_FRAG_UNIT 8 /* fragment payloads are multiples of 8 bytes */
#define XFW_RJ_VERIFY_BAD 0

/* IP protocols nf_reject_verify_csum does not check. */
#define XFW_RJ_PROTO_GRE 47
#define XFW_RJ_PROTO_ESP 50
#define XFW_RJ_PROTO_AH 51
#define XFW_RJ_PROTO_SCTP 132
#define XFW_RJ_PROTO_UDPLITE 136
#define XFW_RJ_PROTO_NONE6 59 /* IPv6 "no next header" */
#define XFW_RJ_GRE_CSUM 0x80  /* GRE flags, first byte: checksum present */
#define XFW_RJ_TCP_CHECK 16   /* offset of the TCP checksum field */
#define XFW_RJ_UDP_CHECK 6    /* offset of the UDP checksum field */
#define XFW_RJ_UDP_HLEN 8

/* xfw_rj_load copies n (1..XFW_RJ_CHUNK) bytes at off of the packet into
 * buf, zero-padded to XFW_RJ_CHUNK bytes. */
static __always_inline int xfw_rj_load(void *ctx, int xdp, __u32 off, __u8 *buf, __u32 n)
{
	__u64 *w = (__u64 *)buf;

	if (n < XFW_RJ_CHUNK)
		for (int i = 0; i < XFW_RJ_CHUNK / 8; i++)
			w[i] = 0;
	/* n - 1 masked, plus one: a size the verifier knows is 1..64
	 * (XFW_RJ_CHUNK - 1 == 63). */
	n = ((n - 1) & 63) + 1;
	if (xdp)
		return bpf_xdp_load_bytes(ctx, off, buf, n);
	return bpf_skb_load_bytes(ctx, off, buf, n);
}

/* The chunk walk's bpf_loop context (on the caller's stack): the hook's
 * context and the per-CPU scratch holding the walk's state (in the map
 * value, so the verifier knows nothing of it and checks the step once). */
struct xfw_rj_sum_walk {
	void *ctx;
	struct xfw_rj_scratch *sc;
};

/* XFW_RJ_SUM_STEP defines name, a bpf_loop callback adding the
 * XFW_RJ_CHUNK bytes at sc->off to sc->sum until fewer are left (xdp: the
 * hook is XDP). Verified once, not once per chunk (as an inlined loop,
 * ~20,000 instructions per program). */
#define XFW_RJ_SUM_STEP(name, xdp)                                                       \
	static long name(__u32 i, struct xfw_rj_sum_walk *w)                             \
	{                                                                                \
		struct xfw_rj_scratch *sc = w->sc;                                       \
		__s64 r;                                                                 \
                                                                                         \
		if (!sc || !w->ctx || sc->len < XFW_RJ_CHUNK)                            \
			return 1;                                                        \
		if (xfw_rj_load(w->ctx, xdp, sc->off, sc->buf, XFW_RJ_CHUNK)) {           \
			sc->bad = 1;                                                     \
			return 1;                                                        \
		}                                                                        \
		r = bpf_csum_diff(NULL, 0, (__be32 *)sc->buf, XFW_RJ_CHUNK, 0);           \
		if (r < 0) {                                                             \
			sc->bad = 1;                                                     \
			return 1;                                                        \
		}                                                                        \
		sc->sum += (__u32)r;                                                     \
		sc->off += XFW_RJ_CHUNK;                                                 \
		sc->len -= XFW_RJ_CHUNK;                                                 \
		return 0;                                                                \
	}
XFW_RJ_SUM_STEP(xfw_rj_sum_step_xdp, 1)
XFW_RJ_SUM_STEP(xfw_rj_sum_step_tc, 0)

/* xfw_rj_sum_chunks adds the whole chunks of the len bytes at off to sum
 * (xfw_rj_sum_step_*); it leaves the offset and length of the rest in
 * sc. Returns -1 when a read failed. */
static __always_inline int xfw_rj_sum_chunks(void *ctx, int xdp, struct xfw_rj_scratch *sc,
					     __u32 off, __u32 len, __u64 *sum)
{
	struct xfw_rj_sum_walk w = {.ctx = ctx, .sc = sc};

	sc->sum = 0;
	sc->off = off;
	sc->len = len;
	sc->bad = 0;
	bpf_loop(XFW_RJ_VERIFY_MAX / XFW_RJ_CHUNK, xdp ? xfw_rj_sum_step_xdp : xfw_rj_sum_step_tc, &w, 0);
	if (sc->bad)
		return -1;
	*sum += sc->sum;
	return 0;
}

/* xfw_rj_sum_span returns the folded sum of sum and the len bytes at off
 * (a last odd byte is the high-order byte of a zero-padded word, as in
 * memory), or XFW_RJ_CSUM_ERR when a read failed. */
static __always_inline __u32 xfw_rj_sum_span(void *ctx, int xdp, struct xfw_rj_scratch *sc,
					     __u32 off, __u32 len, __u64 sum)
{
	__s64 r;

	if (xfw_rj_sum_chunks(ctx, xdp, sc, off, len, &sum))
		return XFW_RJ_CSUM_ERR;
	/* The rest, read back from the scratch: less than a chunk. */
	off = sc->off;
	len = sc->len;
	if (len >= XFW_RJ_CHUNK)
		return XFW_RJ_CSUM_ERR;
	if (len) {
		if (xfw_rj_load(ctx, xdp, off, sc->buf, len))
			return XFW_RJ_CSUM_ERR;
		r = bpf_csum_diff(NULL, 0, (__be32 *)sc->buf, XFW_RJ_CHUNK, 0);
		if (r < 0)
			return XFW_RJ_CSUM_ERR;
		sum += (__u32)r;
	}
	return xfw_csum_fold(sum);
}

/* xfw_rj_csum returns the folded sum of the reply REJECT writes (len
 * bytes at off), its walk in the hook's REJECT scratch. */
static __always_inline __u32 xfw_rj_csum(void *ctx, int xdp, __u32 off, __u32 len)
{
	__u32 slot = xdp ? XFW_RJ_SLOT_XDP : XFW_RJ_SLOT_TC;
	struct xfw_rj_scratch *sc;

	if (!ctx || off > XFW_RJ_OFF_MAX || len > XFW_RJ_SUM_MAX)
		return XFW_RJ_CSUM_ERR;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return XFW_RJ_CSUM_ERR;
	return xfw_rj_sum_span(ctx, xdp, sc, off, len, 0);
}

/* Per-hook entry points of xfw_rj_csum: global, verified once. */
__attribute__((noinline)) __u32 xfw_rj_csum_xdp(struct xdp_md *ctx, __u32 off, __u32 len)
{
	return xfw_rj_csum(ctx, 1, off, len);
}

__attribute__((noinline)) __u32 xfw_rj_csum_tc(struct __sk_buff *skb, __u32 off, __u32 len)
{
	return xfw_rj_csum(skb, 0, off, len);
}

/* xfw_rj_csum_ok returns XFW_RJ_VERIFY_OK when the kernel's REJECT would
 * answer p as far as its transport checksum goes. whole: netfilter saw the
 * whole datagram where p is its first fragment (IPv4 INPUT reassembles
 * first; OUTPUT judges before the stack fragments): not checked. hdelta:
 * a sum added to the packet's (nf_ip_checksum sums from the IPv4 header,
 * which adds nothing when its checksum holds: the stale header of a
 * packet whose options the input path changed adds hdelta). */
static __always_inline int xfw_rj_csum_ok(void *ctx, int xdp, const struct xfw_pkt *p,
					  int whole, struct xfw_rj_scratch *sc, __u32 hdelta)
{
	__u8 *buf = sc->buf;
	__u32 l4 = p->l4_off, end = p->l4_end, proto = p->proto, len, n;
	__u64 pseudo;
	__u16 check = 0;
	int v6 = p->fam, has_check = 0;

	if (whole)
		return XFW_RJ_VERIFY_OK;
	if (v6) {
		/* ipv6_skip_exthdr fails on "no next header"; reject6_csum_ok
		 * wants transport data. */
		if (proto == XFW_RJ_PROTO_NONE6 || !l4 || l4 >= end)
			return XFW_RJ_VERIFY_BAD;
	} else if (!l4 || l4 > end) {
		return XFW_RJ_VERIFY_BAD;
	}
	len = end - l4;
	switch (proto) {
	case IPPROTO_UDP:
		if (len < XFW_RJ_UDP_HLEN)
			break;
		if (xfw_rj_load(ctx, xdp, l4, buf, XFW_RJ_UDP_HLEN))
			return XFW_RJ_VERIFY_BAD;
		check = *(__u16 *)(buf + XFW_RJ_UDP_CHECK);
		if (!check) /* no checksum */
			return XFW_RJ_VERIFY_OK;
		has_check = 1;
		break;
	case IPPROTO_TCP:
		if (len < XFW_RJ_TCP_HLEN)
			break;
		if (xfw_rj_load(ctx, xdp, l4, buf, XFW_RJ_TCP_HLEN))
			return XFW_RJ_VERIFY_BAD;
		check = *(__u16 *)(buf + XFW_RJ_TCP_CHECK);
		has_check = 1;
		break;
	case XFW_RJ_PROTO_GRE:
		if (len < 1 || xfw_rj_load(ctx, xdp, l4, buf, 1))
			return XFW_RJ_VERIFY_OK;
		if (!(buf[0] & XFW_RJ_GRE_CSUM))
			return XFW_RJ_VERIFY_OK;
		break;
	case XFW_RJ_PROTO_AH:
	case XFW_RJ_PROTO_ESP:
	case XFW_RJ_PROTO_SCTP:
	case XFW_RJ_PROTO_UDPLITE:
		/* (DCCP was on this list until the kernel dropped DCCP,
		 * 6.16: xfw difftest shows 6.18 checking it.) */
		return XFW_RJ_VERIFY_OK;
	}
	if (len > XFW_RJ_VERIFY_MAX)
		return XFW_RJ_VERIFY_OK;

	/* The pseudo-header: IPv6 always; IPv4 for TCP and UDP only (for
	 * other protocols nf_ip_checksum sums the whole packet, whose valid
	 * IPv4 header adds nothing). */
	pseudo = 0;
	if (v6 || proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		__s64 r;

		if (v6) {
			if (xfw_rj_load(ctx, xdp, p->l3_off + 8, buf, 32))
				return XFW_RJ_VERIFY_BAD;
			r = bpf_csum_diff(NULL, 0, (__be32 *)buf, 32, 0);
			/* In 64 bits: two 32-bit words can carry (a TCP
			 * length whose low byte is 0xfa or more). */
			pseudo = (__u64)bpf_htonl(len) + bpf_htonl(proto);
		} else {
			if (xfw_rj_load(ctx, xdp, p->l3_off + 12, buf, 8))
				return XFW_RJ_VERIFY_BAD;
			r = bpf_csum_diff(NULL, 0, (__be32 *)buf, 8, 0);
			pseudo = bpf_htons(len) + bpf_htons(proto);
		}
		if (r < 0)
			return XFW_RJ_VERIFY_BAD;
		pseudo += (__u32)r;
		if (has_check && check == (__u16)xfw_csum_fold(pseudo))
			return XFW_RJ_VERIFY_OK; /* CHECKSUM_PARTIAL form */
	}
	n = xfw_rj_sum_span(ctx, xdp, sc, l4, len, pseudo);
	if (n >= XFW_RJ_CSUM_ERR)
		return XFW_RJ_VERIFY_BAD;
	if (hdelta)
		n = xfw_csum_fold((__u64)n + hdelta);
	/* All ones: the checksum holds. Without a pseudo-header (IPv4, not
	 * TCP or UDP) an all-zero payload holds too, the header's own sum
	 * (all ones) being added. */
	return n == 0xffff || (!pseudo && n == 0) ? XFW_RJ_VERIFY_OK : XFW_RJ_VERIFY_BAD;
}

/* Per-hook entry points of xfw_rj_csum_ok: global, verified once. */
__attribute__((noinline)) int xfw_rj_csum_ok_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 whole,
						 __u32 hdelta)
{
	__u32 slot = XFW_RJ_SLOT_XDP;
	struct xfw_rj_scratch *sc;

	if (!ctx || !p)
		return XFW_RJ_VERIFY_BAD;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return XFW_RJ_VERIFY_BAD;
	return xfw_rj_csum_ok(ctx, 1, p, whole, sc, hdelta);
}

__attribute__((noinline)) int xfw_rj_csum_ok_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 whole)
{
	__u32 slot = XFW_RJ_SLOT_TC;
	struct xfw_rj_scratch *sc;

	if (!skb || !p)
		return XFW_RJ_VERIFY_BAD;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return XFW_RJ_VERIFY_BAD;
	return xfw_rj_csum_ok(skb, 0, p, whole, sc, 0);
}

/* xfw_rj_sum_words adds n 32-bit words of an array (addresses). */
static __always_inline __u64 xfw_rj_sum_words(const __u32 *w, int n)
{
	__u64 sum = 0;

	for (int i = 0; i < n; i++)
		sum += w[i];
	return sum;
}

/* xfw_rj_finish turns a folded sum into the checksum field's value: the
 * complement, stored as is. */
static __always_inline __u16 xfw_rj_finish(__u64 sum)
{
	return (__u16)~xfw_csum_fold(sum);
}

#endif /* XFW_REJECT_CSUM_H */
