/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject.h — stage 4: REJECT replies built in the data plane, byte for byte
 * as the kernel's ipt_REJECT / ip6t_REJECT build them (nf_reject_ipv4.c,
 * nf_reject_ipv6.c, icmp_send, icmp6_send).
 *
 * Conventions:
 *  - The offending frame is rewritten in place into the reply. XDP (INPUT,
 *    FORWARD): the reply leaves by the interface the packet came in on
 *    (XDP_TX) with the Ethernet addresses swapped and any VLAN tag kept.
 *    TC egress (OUTPUT): a reply for one of the host's addresses is handed
 *    to the local stack as if it had arrived on the device
 *    (bpf_redirect(BPF_F_INGRESS)), with the device's own MAC as Ethernet
 *    destination, so the sending socket sees ECONNREFUSED as with the
 *    kernel's REJECT; on loopback the rewritten skb simply goes on
 *    (TC_ACT_OK) and lo hands it back with its route. A reply for another
 *    host (the packet had a foreign source) is routed: bpf_fib_lookup, then
 *    bpf_redirect_neigh out of the route's device (xfw_rj_tc_route).
 *  - "No reply" (kernel sends nothing) is a plain drop, as REJECT always
 *    drops the offending packet.
 *  - Work is done in three steps: xfw_rj_plan reads everything the reply
 *    needs from the packet into struct xfw_rj and decides whether there is a
 *    reply at all; the hook reshapes the frame (XDP: adjust_tail/adjust_head,
 *    TC: change_tail/adjust_room/pull_data); xfw_rj_put_* write the headers
 *    over [data, data_end) and compute every checksum from scratch.
 *  - The entry points are global (noinline) functions, verified once on
 *    their own whatever the caller's state: they re-check every offset they
 *    take from struct xfw_pkt. Checksums run in bounded loops of
 *    bpf_csum_diff() over 64-byte chunks, then 4-, 2- and 1-byte steps.
 *  - Stack: the hook programs leave little room under the 512-byte limit,
 *    so the reply's facts live in a per-CPU scratch map (xfw_rj_scratch),
 *    and the XDP hook hands the REJECT type over in p->reject rather than
 *    keep it in a register across its LOG calls.
 *  - Addresses, ports and sequence numbers are kept in network byte order;
 *    checksums are one's complement sums of the bytes as stored, which is
 *    byte-order independent.
 *
 * Differences from the kernel, each checked by internal/dataplane/
 * reject_test.go against iptables-legacy in an identical topology:
 *  - Transport checksums are verified as the kernel's REJECT does
 *    (xfw_rj_csum_ok), but XDP and TC cannot see whether a device already
 *    verified one (CHECKSUM_COMPLETE, UNNECESSARY: the kernel then skips
 *    the check, in FORWARD too): a TCP or UDP checksum field holding just
 *    the pseudo-header sum (CHECKSUM_PARTIAL, local senders) counts as
 *    good, any other bad checksum gets no reply. A first fragment cannot
 *    be verified and gets nothing (as in the kernel), except in IPv4
 *    INPUT, where the kernel reassembles first and answers the whole
 *    datagram: xfw answers the first fragment, quoting it. Transport data
 *    beyond XFW_RJ_VERIFY_MAX bytes is not checked.
 *  - Replies to the host itself (OUTPUT) are judged in OUTPUT before they
 *    are delivered, as the kernel's are; INPUT and FORWARD replies (XDP)
 *    pass no chain. IPv4 OUTPUT ICMP errors come from the offending
 *    packet's destination, where the kernel's loop back through lo from
 *    the host's own address: a frame from a local address handed to the
 *    stack on an Ethernet device (or on lo without a route) is a martian.
 *    IPv6 ones come from the host's address, as the kernel's. The sender's
 *    send() succeeds where the kernel's fails with EPERM (NF_DROP); the
 *    error then arrives all the same (ECONNREFUSED on the next call).
 *  - The kernel sends no error about an ICMP message its own ICMP socket
 *    sends (an echo reply REJECTed in OUTPUT: icmp_send finds the socket
 *    locked); xfw cannot tell those from a raw socket's and answers them.
 *  - IPv4 options are not echoed in ICMP errors (icmp_send reverses record
 *    route / timestamp / source route options).
 *  - ICMP errors are not rate-limited (icmp_ratelimit, icmp_msgs_per_sec).
 *  - A unicast frame to an IPv4 subnet-directed broadcast address gets a
 *    reply (the route type is not known here); limited broadcast and
 *    multicast destinations get none, as in the kernel.
 *  - INPUT and FORWARD replies leave by the input interface (to the
 *    route's neighbour when the route back leaves there); the kernel routes
 *    them (the same interface unless routing is asymmetric). Replies to a
 *    packet the host sent itself through loopback, and OUTPUT replies for
 *    another host, are routed (bpf_fib_lookup, then a redirect).
 *  - TTL / hop limit 64: the defaults, not a changed sysctl or route metric.
 *  - The ICMPv6 flow label is a hash of the addresses, type and code, like
 *    the kernel's automatic one (auto_flowlabels) but not the same value.
 *
 * Deployment notes: with native XDP on a veth, XDP_TX frames reach the peer
 * at once only when the peer runs an XDP program itself (else they wait in
 * its ring for the next frame). Generic XDP transmits the received skb, so a
 * CHECKSUM_PARTIAL one (from a local veth peer) keeps its offload offsets:
 * harmless when the peer's stack receives it, wrong if it is forwarded on to
 * a device that completes checksums.
 */
#ifndef XFW_REJECT_H
#define XFW_REJECT_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"

/* Header sizes (bytes). */
#define XFW_RJ_ETH_HLEN 14
#define XFW_RJ_VLAN_HLEN 18 /* Ethernet header with one 802.1Q tag */
#define XFW_RJ_IP4_HLEN 20
#define XFW_RJ_IP6_HLEN 40
#define XFW_RJ_ICMP_HLEN 8
#define XFW_RJ_TCP_HLEN 20

/* Largest ICMP error, as an IP packet: icmp_send returns "as much as we can
 * without exceeding 576 bytes" (RFC 1812 4.3.2.3); icmp6_send up to the
 * IPv6 minimum MTU (IPV6_MIN_MTU, RFC 4443 2.4(c)). */
#define XFW_RJ_ICMP4_MAX 576
#define XFW_RJ_ICMP6_MAX 1280
#define XFW_RJ_QUOTE4_MAX (XFW_RJ_ICMP4_MAX - XFW_RJ_IP4_HLEN - XFW_RJ_ICMP_HLEN)
#define XFW_RJ_QUOTE6_MAX (XFW_RJ_ICMP6_MAX - XFW_RJ_IP6_HLEN - XFW_RJ_ICMP_HLEN)

/* TTL / hop limit of every reply: ip_default_ttl and the IPv6 hop_limit
 * default, which the kernel uses unless a route metric says otherwise. */
#define XFW_RJ_TTL 64

/* icmp_send: TOS of an ICMP error = (original TOS & IPTOS_TOS_MASK) |
 * IPTOS_PREC_INTERNETCONTROL. */
#define XFW_RJ_IPTOS_TOS_MASK 0x1e
#define XFW_RJ_IPTOS_PREC_INTERNETCONTROL 0xc0

#define XFW_RJ_IP_DF 0x4000     /* IPv4 "don't fragment" flag */
#define XFW_RJ_IP_VER_IHL5 0x45 /* version 4, 5 words of header */
#define XFW_RJ_IP6_VERSION 6

#define XFW_RJ_ICMP_DEST_UNREACH 3  /* ICMP_DEST_UNREACH */
#define XFW_RJ_ICMP6_DEST_UNREACH 1 /* ICMPV6_DEST_UNREACH */
/* ICMP types that are errors (icmp_pointers[].error): no error is sent
 * about them; types above NR_ICMP_TYPES count as errors too. */
#define XFW_RJ_ICMP_SOURCE_QUENCH 4
#define XFW_RJ_ICMP_REDIRECT 5
#define XFW_RJ_ICMP_TIME_EXCEEDED 11
#define XFW_RJ_ICMP_PARAMETERPROB 12
#define XFW_RJ_NR_ICMP_TYPES 18
/* The unassigned types 1, 2, 6, 7, 9 and 10 are errors too (icmp_discard,
 * .error = 1); as a bit mask of types 0..NR_ICMP_TYPES: */
#define XFW_RJ_ICMP_ERROR_TYPES                                                          \
	(1u << 1 | 1u << 2 | 1u << XFW_RJ_ICMP_DEST_UNREACH | 1u << XFW_RJ_ICMP_SOURCE_QUENCH | \
	 1u << XFW_RJ_ICMP_REDIRECT | 1u << 6 | 1u << 7 | 1u << 9 | 1u << 10 |                \
	 1u << XFW_RJ_ICMP_TIME_EXCEEDED | 1u << XFW_RJ_ICMP_PARAMETERPROB)
/* ICMPv6 types below 128 are errors (ICMPV6_INFOMSG_MASK clear). */
#define XFW_RJ_ICMP6_INFOMSG_MASK 0x80

/* TCP header byte 12 (data offset 5 words, no options) and flag bits. */
#define XFW_RJ_TCP_DOFF5 0x50
#define XFW_RJ_TCP_FIN 0x01
#define XFW_RJ_TCP_SYN 0x02
#define XFW_RJ_TCP_RST 0x04
#define XFW_RJ_TCP_ACK 0x10

/* IPv6 flow label bits of the first header word. */
#define XFW_RJ_FLOWLABEL_MASK 0x000fffff

/* Upper bound on the offsets taken from struct xfw_pkt: the parser never
 * goes beyond an Ethernet+VLAN header and IPv6 extension headers. Anything
 * larger is a bug; the reply is not built. */
#define XFW_RJ_OFF_MAX 1023
_Static_assert(XFW_RJ_OFF_MAX == 1023, "xfw_rj_sum's asm mask is XFW_RJ_OFF_MAX");
/* Checksummed span: at most an ICMPv6 header and its quote. */
#define XFW_RJ_SUM_MAX (XFW_RJ_ICMP6_MAX - XFW_RJ_IP6_HLEN)
#define XFW_RJ_CHUNK 64 /* bytes per bpf_csum_diff() call (<= 512) */
#define XFW_RJ_CSUM_ERR 0x10000 /* xfw_rj_csum_*: not a 16-bit sum */

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* What a reply is. */
enum xfw_rj_kind {
	XFW_RJK_NONE = 0, /* no reply: drop */
	XFW_RJK_ICMP4,
	XFW_RJK_ICMP6,
	XFW_RJK_RST4,
	XFW_RJK_RST6,
};

/* Everything the reply needs, read before the frame is reshaped. */
struct xfw_rj {
	__u8 l2[XFW_RJ_VLAN_HLEN]; /* the reply's L2 header: MACs swapped */
	__u8 type, code;           /* ICMP */
	__u32 l2len;               /* 14 or 18 */
	__u32 qlen;                /* ICMP: bytes of the offending packet quoted */
	__u32 saddr[4], daddr[4];  /* the reply's addresses (IPv4: [0]) */
	__u32 seq, ack;            /* RST */
	__u16 sport, dport;        /* RST: the reply's ports */
	__u8 tcpflags;             /* RST */
	__u8 tos;                  /* ICMPv4 */
	__u8 fwd;                  /* FORWARD: the quote shows TTL - 1 */
	__u8 pad[3];
};

/* Per-CPU scratch space for the reply's facts and the FIB request: the
 * hook programs' own stack leaves too little room below the 512-byte
 * limit. Slot XFW_RJ_SLOT_XDP serves XDP, XFW_RJ_SLOT_TC the TC program
 * (they never nest on one CPU, but separate slots cost nothing). */
struct xfw_rj_scratch {
	struct xfw_rj r;
	struct bpf_fib_lookup fib;
	__u8 buf[XFW_RJ_CHUNK]; /* packet bytes being checksummed */
};

#define XFW_RJ_SLOT_XDP 0
#define XFW_RJ_SLOT_TC 1

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rj_scratch);
	__uint(max_entries, 2);
} xfw_rj_scratch SEC(".maps");

/* xfw_rj_fold folds a 64-bit sum of 16/32-bit words into 16 bits. */
static __always_inline __u32 xfw_rj_fold(__u64 sum)
{
	/* Four folds bring any 64-bit value below 2^16. */
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u32)sum;
}

/* xfw_rj_sum adds up len bytes at data + off (off even relative to the
 * start of the checksummed span) and returns the folded sum, or
 * XFW_RJ_CSUM_ERR. */
static __always_inline __u32 xfw_rj_sum(void *data, void *data_end, __u32 off32, __u32 len32)
{
	__u64 sum = 0, off = off32, len = len32;
	void *ptr;

	if (off > XFW_RJ_OFF_MAX || len > XFW_RJ_SUM_MAX)
		return XFW_RJ_CSUM_ERR;
	/* Re-bound off in the register used for the pointer (clang tests a
	 * copy); the mask keeps the value, XFW_RJ_OFF_MAX being 2^n - 1. */
	asm volatile("%[o] &= 1023" : [o] "+r"(off));
	for (int i = 0; i < XFW_RJ_SUM_MAX / XFW_RJ_CHUNK; i++) {
		__s64 r;

		if (len < XFW_RJ_CHUNK)
			break;
		ptr = data + off;
		xfw_barrier_var(ptr);
		if (ptr + XFW_RJ_CHUNK > data_end)
			return XFW_RJ_CSUM_ERR;
		r = bpf_csum_diff(NULL, 0, ptr, XFW_RJ_CHUNK, 0);
		if (r < 0)
			return XFW_RJ_CSUM_ERR;
		sum += (__u32)r;
		off += XFW_RJ_CHUNK;
		len -= XFW_RJ_CHUNK;
	}
	/* Fewer than XFW_RJ_CHUNK bytes remain. */
	for (int i = 0; i < XFW_RJ_CHUNK / 4; i++) {
		if (len < 4)
			break;
		ptr = data + off;
		xfw_barrier_var(ptr);
		if (ptr + 4 > data_end)
			return XFW_RJ_CSUM_ERR;
		sum += *(__u32 *)ptr;
		off += 4;
		len -= 4;
	}
	ptr = data + off;
	xfw_barrier_var(ptr);
	if (len >= 2) {
		if (ptr + 2 > data_end)
			return XFW_RJ_CSUM_ERR;
		sum += *(__u16 *)ptr;
		ptr += 2;
		len -= 2;
	}
	if (len) {
		/* A last odd byte is the high-order byte of a zero-padded
		 * word: place it as it would sit in memory. */
		__u16 w = 0;

		xfw_barrier_var(ptr);
		if (ptr + 1 > data_end)
			return XFW_RJ_CSUM_ERR;
		*(__u8 *)&w = *(__u8 *)ptr;
		sum += w;
	}
	return xfw_rj_fold(sum);
}

/* Per-hook checksum functions: global, so the chunk loops are verified
 * once per program type rather than on every path of their callers. */
__attribute__((noinline)) __u32 xfw_rj_csum_xdp(struct xdp_md *ctx, __u32 off, __u32 len)
{
	if (!ctx)
		return XFW_RJ_CSUM_ERR;
	return xfw_rj_sum((void *)(long)ctx->data, (void *)(long)ctx->data_end, off, len);
}

__attribute__((noinline)) __u32 xfw_rj_csum_tc(struct __sk_buff *skb, __u32 off, __u32 len)
{
	if (!skb)
		return XFW_RJ_CSUM_ERR;
	return xfw_rj_sum((void *)(long)skb->data, (void *)(long)skb->data_end, off, len);
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

/* xfw_rj_csum_ok returns XFW_RJ_VERIFY_OK when the kernel's REJECT would
 * answer p as far as its transport checksum goes. whole: netfilter saw the
 * whole datagram where p is its first fragment (IPv4 INPUT reassembles
 * first; OUTPUT judges before the stack fragments): not checked. */
static __always_inline int xfw_rj_csum_ok(void *ctx, int xdp, const struct xfw_pkt *p,
					  int whole, __u8 *buf)
{
	__u32 l4 = p->l4_off, end = p->l4_end, proto = p->proto, len, off, n;
	__u64 sum = 0, pseudo;
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
		if (has_check && check == (__u16)xfw_rj_fold(pseudo))
			return XFW_RJ_VERIFY_OK; /* CHECKSUM_PARTIAL form */
	}
	sum = pseudo;
	off = l4;
	/* Whole chunks, then the rest (zero-padded: a last odd byte is the
	 * high-order byte of its word, as in memory). */
	for (int i = 0; i < XFW_RJ_VERIFY_MAX / XFW_RJ_CHUNK; i++) {
		__s64 r;

		if (len < XFW_RJ_CHUNK)
			break;
		if (xfw_rj_load(ctx, xdp, off, buf, XFW_RJ_CHUNK))
			return XFW_RJ_VERIFY_BAD;
		r = bpf_csum_diff(NULL, 0, (__be32 *)buf, XFW_RJ_CHUNK, 0);
		if (r < 0)
			return XFW_RJ_VERIFY_BAD;
		sum += (__u32)r;
		off += XFW_RJ_CHUNK;
		len -= XFW_RJ_CHUNK;
	}
	if (len) {
		__s64 r;

		if (xfw_rj_load(ctx, xdp, off, buf, len))
			return XFW_RJ_VERIFY_BAD;
		r = bpf_csum_diff(NULL, 0, (__be32 *)buf, XFW_RJ_CHUNK, 0);
		if (r < 0)
			return XFW_RJ_VERIFY_BAD;
		sum += (__u32)r;
	}
	n = xfw_rj_fold(sum);
	/* All ones: the checksum holds. Without a pseudo-header (IPv4, not
	 * TCP or UDP) an all-zero payload holds too, the header's own sum
	 * (all ones) being added. */
	return n == 0xffff || (!pseudo && n == 0) ? XFW_RJ_VERIFY_OK : XFW_RJ_VERIFY_BAD;
}

/* Per-hook entry points of xfw_rj_csum_ok: global, verified once. */
__attribute__((noinline)) int xfw_rj_csum_ok_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 whole)
{
	__u32 slot = XFW_RJ_SLOT_XDP;
	struct xfw_rj_scratch *sc;

	if (!ctx || !p)
		return XFW_RJ_VERIFY_BAD;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return XFW_RJ_VERIFY_BAD;
	return xfw_rj_csum_ok(ctx, 1, p, whole, sc->buf);
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
	return xfw_rj_csum_ok(skb, 0, p, whole, sc->buf);
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
	return (__u16)~xfw_rj_fold(sum);
}

/* xfw_rj_ip4_unicast reports whether a (network-order) IPv4 address can be
 * the source or destination of a reply: not 0.0.0.0 (the rest of 0/8 is
 * unicast since Linux 5.3, and answered: found by xfw difftest), multicast
 * (224/4), the limited broadcast, nor 127/8 unless the packet is on
 * loopback (lo). */
static __always_inline int xfw_rj_ip4_unicast(__u32 a, int lo)
{
	__u32 h = bpf_ntohl(a);

	if ((h >> 24) == 127) /* IN_LOOPBACKNET */
		return lo;
	return h != 0 && (h >> 28) != 0xe && h != 0xffffffff;
}

/* xfw_rj_ip6_multicast: ff00::/8. */
static __always_inline int xfw_rj_ip6_multicast(const __u32 *a)
{
	return (bpf_ntohl(a[0]) >> 24) == 0xff;
}

/* xfw_rj_ip6_unspec: ::. */
static __always_inline int xfw_rj_ip6_unspec(const __u32 *a)
{
	return (a[0] | a[1] | a[2] | a[3]) == 0;
}

/* xfw_rj_ip6_unicast: what nf_send_reset6 accepts (IPV6_ADDR_UNICAST): not
 * ::, multicast or v4-mapped (::ffff:0:0/96). */
static __always_inline int xfw_rj_ip6_unicast(const __u32 *a)
{
	if (xfw_rj_ip6_unspec(a) || xfw_rj_ip6_multicast(a))
		return 0;
	return !(a[0] == 0 && a[1] == 0 && a[2] == bpf_htonl(0x0000ffff));
}

/* xfw_rj_icmp_code maps an IPv4 reject type to its ICMP code, or -1. */
static __always_inline int xfw_rj_icmp_code(__u32 type)
{
	switch (type) {
	case XFW_RJ_ICMP_NET_UNREACH:
		return 0; /* ICMP_NET_UNREACH */
	case XFW_RJ_ICMP_HOST_UNREACH:
		return 1; /* ICMP_HOST_UNREACH */
	case XFW_RJ_ICMP_PROT_UNREACH:
		return 2; /* ICMP_PROT_UNREACH */
	case XFW_RJ_ICMP_PORT_UNREACH:
		return 3; /* ICMP_PORT_UNREACH */
	case XFW_RJ_ICMP_NET_PROHIBITED:
		return 9; /* ICMP_NET_ANO */
	case XFW_RJ_ICMP_HOST_PROHIBITED:
		return 10; /* ICMP_HOST_ANO */
	case XFW_RJ_ICMP_ADMIN_PROHIBITED:
		return 13; /* ICMP_PKT_FILTERED */
	}
	return -1;
}

/* xfw_rj_icmp6_code maps an IPv6 reject type to its ICMPv6 code, or -1. */
static __always_inline int xfw_rj_icmp6_code(__u32 type)
{
	switch (type) {
	case XFW_RJ_ICMP6_NO_ROUTE:
		return 0; /* ICMPV6_NOROUTE */
	case XFW_RJ_ICMP6_ADM_PROHIBITED:
		return 1; /* ICMPV6_ADM_PROHIBITED */
	case XFW_RJ_ICMP6_ADDR_UNREACH:
		return 3; /* ICMPV6_ADDR_UNREACH */
	case XFW_RJ_ICMP6_PORT_UNREACH:
		return 4; /* ICMPV6_PORT_UNREACH */
	case XFW_RJ_ICMP6_POLICY_FAIL:
		return 5; /* ICMPV6_POLICY_FAIL */
	case XFW_RJ_ICMP6_REJECT_ROUTE:
		return 6; /* ICMPV6_REJECT_ROUTE */
	}
	return -1;
}

/* xfw_rj_plan_rst fills the TCP part of a RST reply (nf_reject_ip_tcphdr_get
 * / nf_reject_ip6_tcphdr_get, then nf_reject_ip*_tcphdr_put) from the TCP
 * header at l4 of an IP packet whose l3len bytes start at l3. Returns 1 when
 * the kernel would send a RST, else 0. */
static __always_inline int xfw_rj_plan_rst(struct xfw_rj *r, struct xfw_pkt *p, void *data,
					   void *data_end, __u32 l3, __u32 l4)
{
	__u8 *th;
	__u32 flags, doff, payload;

	if (p->proto != IPPROTO_TCP || p->tcpflags > 0xff || l4 <= l3)
		return 0;
	th = data + l4;
	if ((void *)(th + XFW_RJ_TCP_HLEN) > data_end)
		return 0;
	flags = th[13];
	/* No RST for RST. */
	if (flags & XFW_RJ_TCP_RST)
		return 0;
	r->sport = *(__u16 *)(th + 2);
	r->dport = *(__u16 *)th;
	doff = ((__u32)th[12] >> 4) * 4;
	if (flags & XFW_RJ_TCP_ACK) {
		r->seq = *(__u32 *)(th + 8);
		r->ack = 0;
		r->tcpflags = XFW_RJ_TCP_RST;
	} else {
		/* The kernel's unsigned arithmetic: skb->len - thoff - doff. */
		payload = p->l3len - (l4 - l3) - doff;
		r->seq = 0;
		r->ack = bpf_htonl(bpf_ntohl(*(__u32 *)(th + 4)) + !!(flags & XFW_RJ_TCP_SYN) +
				   !!(flags & XFW_RJ_TCP_FIN) + payload);
		r->tcpflags = XFW_RJ_TCP_RST | XFW_RJ_TCP_ACK;
	}
	return 1;
}

/* xfw_rj_plan decides whether the kernel would answer p with a reply of
 * the given REJECT type and reads what the reply needs. ingress: the packet
 * was received (INPUT, FORWARD), else locally generated (OUTPUT); lo: it is
 * on the loopback device. Returns an enum xfw_rj_kind. */
static __always_inline int xfw_rj_plan(struct xfw_rj *r, struct xfw_pkt *p, __u32 type,
				       void *data, void *data_end, int ingress, int lo)
{
	__u32 l3 = p->l3_off, l4 = p->l4_off;
	__u8 *eth = data;
	int code;

	if (l3 != XFW_RJ_ETH_HLEN && l3 != XFW_RJ_VLAN_HLEN)
		return XFW_RJK_NONE;
	if (l4 > XFW_RJ_OFF_MAX)
		return XFW_RJK_NONE;
	/* At most an IPv6 header and a 65535-byte payload. */
	if (p->l3len > XFW_RJ_IP6_HLEN + 0xffff || p->l3len < XFW_RJ_IP4_HLEN)
		return XFW_RJK_NONE;
	r->l2len = l3;
	if (l3 == XFW_RJ_VLAN_HLEN) {
		if ((void *)(eth + XFW_RJ_VLAN_HLEN) > data_end)
			return XFW_RJK_NONE;
		__builtin_memcpy(r->l2 + 12, eth + 12, XFW_RJ_VLAN_HLEN - 12);
	} else {
		if ((void *)(eth + XFW_RJ_ETH_HLEN) > data_end)
			return XFW_RJK_NONE;
		__builtin_memcpy(r->l2 + 12, eth + 12, XFW_RJ_ETH_HLEN - 12);
	}
	__builtin_memcpy(r->l2, eth + 6, 6);
	__builtin_memcpy(r->l2 + 6, eth, 6);
	/* Non-first fragments get nothing: icmp_send answers fragment 0 only,
	 * nf_reject_ip_tcphdr_get has no TCP header, reject6_csum_ok and
	 * nf_reject_ip6_tcphdr_get refuse a fragment offset. */
	if (p->frag)
		return XFW_RJK_NONE;

	if (p->fam == 0) {
		struct iphdr *iph = data + l3;

		if ((void *)(iph + 1) > data_end)
			return XFW_RJK_NONE;
		r->saddr[0] = iph->daddr;
		r->daddr[0] = iph->saddr;
		/* The kernel's routing drops martian sources before netfilter
		 * and nothing answers a multicast or broadcast destination. */
		if (!xfw_rj_ip4_unicast(iph->saddr, lo) || !xfw_rj_ip4_unicast(iph->daddr, lo))
			return XFW_RJK_NONE;
		if (type == XFW_RJ_TCP_RESET) {
			if (!xfw_rj_plan_rst(r, p, data, data_end, l3, l4))
				return XFW_RJK_NONE;
			return XFW_RJK_RST4;
		}
		code = xfw_rj_icmp_code(type);
		if (code < 0)
			return XFW_RJK_NONE;
		/* icmp_send: "no replies to physical multicast/broadcast". */
		if (ingress && !p->dst_unicast)
			return XFW_RJK_NONE;
		/* No ICMP error about an ICMP error (or an unknown type). */
		if (p->proto == IPPROTO_ICMP) {
			__u8 *it = data + l4;
			__u8 t;

			if (l4 <= l3 || (void *)(it + 1) > data_end || l4 + 1 > p->l4_end)
				return XFW_RJK_NONE;
			t = *it;
			if (t > XFW_RJ_NR_ICMP_TYPES || (XFW_RJ_ICMP_ERROR_TYPES >> t) & 1)
				return XFW_RJK_NONE;
		}
		r->type = XFW_RJ_ICMP_DEST_UNREACH;
		r->code = code;
		r->tos = (p->tos & XFW_RJ_IPTOS_TOS_MASK) | XFW_RJ_IPTOS_PREC_INTERNETCONTROL;
		r->qlen = p->l3len < XFW_RJ_QUOTE4_MAX ? p->l3len : XFW_RJ_QUOTE4_MAX;
		return XFW_RJK_ICMP4;
	}

	{
		struct ipv6hdr *ip6 = data + l3;

		if ((void *)(ip6 + 1) > data_end)
			return XFW_RJK_NONE;
		__builtin_memcpy(r->saddr, &ip6->daddr, 16);
		__builtin_memcpy(r->daddr, &ip6->saddr, 16);
		/* An extension header chain that could not be walked:
		 * ipv6_skip_exthdr fails, reject6_csum_ok says no. */
		if (p->proto > 0xff)
			return XFW_RJK_NONE;
		if (type == XFW_RJ_TCP_RESET) {
			if (!xfw_rj_ip6_unicast(r->saddr) || !xfw_rj_ip6_unicast(r->daddr))
				return XFW_RJK_NONE;
			if (!xfw_rj_plan_rst(r, p, data, data_end, l3, l4))
				return XFW_RJK_NONE;
			return XFW_RJK_RST6;
		}
		code = xfw_rj_icmp6_code(type);
		if (code < 0)
			return XFW_RJK_NONE;
		/* icmp6_send: no error to a multicast destination or a frame
		 * not sent to this host, nor from :: or a multicast source. */
		if (xfw_rj_ip6_multicast(r->saddr) || (ingress && !p->dst_unicast))
			return XFW_RJK_NONE;
		if (xfw_rj_ip6_unspec(r->daddr) || xfw_rj_ip6_multicast(r->daddr))
			return XFW_RJK_NONE;
		/* Nor to an anycast source (RFC 4443 2.4: icmpv6_route_lookup
		 * refuses it), such as the subnet-router anycast address a
		 * forwarding host joins (found by xfw difftest). */
		if (xfw_local_type(1, p->src_hi, p->src_lo) == XFW_RTN_ANYCAST)
			return XFW_RJK_NONE;
		/* is_ineligible: never answer an ICMPv6 error, nor an ICMPv6
		 * packet whose type cannot be read. */
		if (p->proto == IPPROTO_ICMPV6) {
			__u8 *it = data + l4;

			if (l4 <= l3 || (void *)(it + 1) > data_end || l4 + 1 > p->l4_end)
				return XFW_RJK_NONE;
			if (!(*it & XFW_RJ_ICMP6_INFOMSG_MASK))
				return XFW_RJK_NONE;
		}
		r->type = XFW_RJ_ICMP6_DEST_UNREACH;
		r->code = code;
		r->qlen = p->l3len < XFW_RJ_QUOTE6_MAX ? p->l3len : XFW_RJ_QUOTE6_MAX;
		return XFW_RJK_ICMP6;
	}
}

/* xfw_rj_l3 returns the reply's L2 header length, 14 or 18, bounded in the
 * register that will offset packet pointers (clang may test a copy), or 0. */
static __always_inline __u64 xfw_rj_l3(struct xfw_rj *r)
{
	__u64 l3 = r->l2len;

	if (l3 != XFW_RJ_ETH_HLEN && l3 != XFW_RJ_VLAN_HLEN)
		return 0;
	/* The mask keeps 14 and 18. */
	asm volatile("%[l] &= 31" : [l] "+r"(l3));
	return l3;
}

/* xfw_rj_put_l2 writes the reply's L2 header at the start of the frame. */
static __always_inline int xfw_rj_put_l2(void *data, void *data_end, struct xfw_rj *r)
{
	if (r->l2len == XFW_RJ_VLAN_HLEN) {
		if (data + XFW_RJ_VLAN_HLEN > data_end)
			return -1;
		__builtin_memcpy(data, r->l2, XFW_RJ_VLAN_HLEN);
		return 0;
	}
	if (data + XFW_RJ_ETH_HLEN > data_end)
		return -1;
	__builtin_memcpy(data, r->l2, XFW_RJ_ETH_HLEN);
	return 0;
}

/* xfw_rj_put_ip4 writes a 20-byte IPv4 header with its checksum. */
static __always_inline void xfw_rj_put_ip4(struct iphdr *iph, __u8 tos, __u32 tot, __u16 id,
					   __u16 frag, __u8 proto, __u32 saddr, __u32 daddr)
{
	__u16 *w = (__u16 *)iph;
	__u64 sum = 0;

	*(__u8 *)iph = XFW_RJ_IP_VER_IHL5;
	iph->tos = tos;
	iph->tot_len = bpf_htons(tot);
	iph->id = id;
	iph->frag_off = bpf_htons(frag);
	iph->ttl = XFW_RJ_TTL;
	iph->protocol = proto;
	iph->check = 0;
	iph->saddr = saddr;
	iph->daddr = daddr;
	for (int i = 0; i < XFW_RJ_IP4_HLEN / 2; i++)
		sum += w[i];
	iph->check = xfw_rj_finish(sum);
}

/* xfw_rj_put_ip6 writes a 40-byte IPv6 header. */
static __always_inline void xfw_rj_put_ip6(struct ipv6hdr *ip6, __u32 flowlabel, __u32 plen,
					   __u8 nexthdr, const __u32 *saddr, const __u32 *daddr)
{
	*(__u32 *)ip6 = bpf_htonl((__u32)XFW_RJ_IP6_VERSION << 28 |
				  (flowlabel & XFW_RJ_FLOWLABEL_MASK));
	ip6->payload_len = bpf_htons(plen);
	ip6->nexthdr = nexthdr;
	ip6->hop_limit = XFW_RJ_TTL;
	__builtin_memcpy(&ip6->saddr, saddr, 16);
	__builtin_memcpy(&ip6->daddr, daddr, 16);
}

/* xfw_rj_flowlabel: icmp6_send's packets carry an automatic flow label (a
 * hash of the flow, auto_flowlabels=1); a deterministic mix of the
 * addresses plays that part. */
static __always_inline __u32 xfw_rj_flowlabel(struct xfw_rj *r)
{
	__u32 h = 0;

	for (int i = 0; i < 4; i++) {
		/* Multiplicative mixing constants of murmur3's fmix32. */
		h = (h ^ r->saddr[i]) * 0x85ebca6b;
		h = (h ^ r->daddr[i]) * 0xc2b2ae35;
		h ^= h >> 16;
	}
	h ^= ((__u32)r->type << 8 | r->code);
	h ^= h >> 13;
	return h & XFW_RJ_FLOWLABEL_MASK;
}

/* xfw_rj_put_rst writes the RST headers after the L2 header; the frame is
 * already l2len + IP header + 20 bytes long. */
static __always_inline int xfw_rj_put_rst(void *data, void *data_end, struct xfw_rj *r, int v6)
{
	__u32 iphl = v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN;
	__u64 l3 = xfw_rj_l3(r), sum;
	__u8 *ip, *th;

	if (!l3 || xfw_rj_put_l2(data, data_end, r))
		return -1;
	ip = data + l3;
	xfw_barrier_var(ip);
	th = ip + iphl;
	if ((void *)(th + XFW_RJ_TCP_HLEN) > data_end)
		return -1;
	if (v6) {
		/* nf_reject_ip6hdr_put: traffic class 0, flow label 0. */
		xfw_rj_put_ip6((void *)ip, 0, XFW_RJ_TCP_HLEN, IPPROTO_TCP, r->saddr, r->daddr);
		sum = xfw_rj_sum_words(r->saddr, 4) + xfw_rj_sum_words(r->daddr, 4);
	} else {
		/* nf_reject_iphdr_put: TOS 0, ID 0, DF. */
		xfw_rj_put_ip4((void *)ip, 0, XFW_RJ_IP4_HLEN + XFW_RJ_TCP_HLEN, 0, XFW_RJ_IP_DF,
			       IPPROTO_TCP, r->saddr[0], r->daddr[0]);
		sum = (__u64)r->saddr[0] + r->daddr[0];
	}
	*(__u16 *)th = r->sport;
	*(__u16 *)(th + 2) = r->dport;
	*(__u32 *)(th + 4) = r->seq;
	*(__u32 *)(th + 8) = r->ack;
	th[12] = XFW_RJ_TCP_DOFF5;
	th[13] = r->tcpflags;
	*(__u16 *)(th + 14) = 0; /* window */
	*(__u16 *)(th + 16) = 0; /* checksum */
	*(__u16 *)(th + 18) = 0; /* urgent pointer */
	/* Pseudo-header: addresses, protocol, TCP length. */
	sum += bpf_htons(IPPROTO_TCP) + bpf_htons(XFW_RJ_TCP_HLEN);
	for (int i = 0; i < XFW_RJ_TCP_HLEN / 2; i++)
		sum += ((__u16 *)th)[i];
	*(__u16 *)(th + 16) = xfw_rj_finish(sum);
	return 0;
}

/* xfw_rj_put_icmp writes the headers of an ICMP error in front of the
 * quote; the frame is l2len + hdrs + qlen long, the quote at l2len + hdrs.
 * Returns the offset and length of the span to checksum (ICMP header and
 * quote) through *off and *len, with *sum the pseudo-header sum (IPv6). */
static __always_inline int xfw_rj_put_icmp(void *data, void *data_end, struct xfw_rj *r, int v6,
					   __u32 *off, __u32 *len, __u64 *sum)
{
	__u32 iphl = v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN, qlen = r->qlen;
	__u64 l3 = xfw_rj_l3(r);
	__u8 *ip, *ih, *q;

	if (qlen > XFW_RJ_QUOTE6_MAX || qlen < XFW_RJ_IP4_HLEN)
		return -1;
	if (!l3 || xfw_rj_put_l2(data, data_end, r))
		return -1;
	ip = data + l3;
	xfw_barrier_var(ip);
	ih = ip + iphl;
	q = ih + XFW_RJ_ICMP_HLEN;
	/* At least 20 bytes are quoted (an IPv4 header, or the IPv6
	 * header's first half with the hop limit). */
	if ((void *)(q + XFW_RJ_IP4_HLEN) > data_end)
		return -1;
	if (v6) {
		xfw_rj_put_ip6((void *)ip, xfw_rj_flowlabel(r), XFW_RJ_ICMP_HLEN + qlen,
			       IPPROTO_ICMPV6, r->saddr, r->daddr);
		/* ip6_forward decremented the hop limit before FORWARD. */
		if (r->fwd)
			q[7] -= 1;
		*sum = xfw_rj_sum_words(r->saddr, 4) + xfw_rj_sum_words(r->daddr, 4) +
		       bpf_htonl(XFW_RJ_ICMP_HLEN + qlen) + bpf_htonl(IPPROTO_ICMPV6);
	} else {
		/* icmp_send: a fresh ID (ip_select_ident), no DF (the ICMP
		 * socket's pmtudisc is IP_PMTUDISC_DONT). */
		xfw_rj_put_ip4((void *)ip, r->tos, XFW_RJ_IP4_HLEN + XFW_RJ_ICMP_HLEN + qlen,
			       (__u16)bpf_get_prandom_u32(), 0, IPPROTO_ICMP, r->saddr[0],
			       r->daddr[0]);
		if (r->fwd) {
			/* ip_decrease_ttl, as ip_forward ran it before the
			 * FORWARD hook: TTL - 1, checksum + 0x0100. */
			__u16 *check = (__u16 *)(q + 10);
			__u32 c = (__u32)*check + bpf_htons(0x0100);

			*check = (__u16)(c + (c >= 0xffff));
			q[8] -= 1;
		}
		*sum = 0;
	}
	ih[0] = r->type;
	ih[1] = r->code;
	*(__u16 *)(ih + 2) = 0;
	*(__u32 *)(ih + 4) = 0; /* unused */
	*off = l3 + iphl;
	*len = XFW_RJ_ICMP_HLEN + qlen;
	return 0;
}

/* xfw_rj_fib_init prepares a FIB request for the reply r: to r->daddr, as
 * if on device ifindex; with r->saddr as source when with_src (else the
 * lookup may pick one, BPF_FIB_LOOKUP_SRC); l4 the reply's protocol (0:
 * none given). */
static __always_inline void xfw_rj_fib_init(struct bpf_fib_lookup *fib, const struct xfw_rj *r,
					    __u32 ifindex, int v6, int with_src, __u8 l4)
{
	__builtin_memset(fib, 0, sizeof(*fib));
	fib->ifindex = ifindex;
	fib->l4_protocol = l4;
	if (v6) {
		fib->family = AF_INET6;
		if (with_src)
			__builtin_memcpy(fib->ipv6_src, r->saddr, 16);
		__builtin_memcpy(fib->ipv6_dst, r->daddr, 16);
	} else {
		fib->family = AF_INET;
		if (with_src)
			fib->ipv4_src = r->saddr[0];
		fib->ipv4_dst = r->daddr[0];
	}
}

/* xfw_rj_fib_src sets r->saddr to the address the kernel's routing picks
 * for a packet to r->daddr (BPF_FIB_LOOKUP_SRC, kernel >= 6.7): the source
 * of an ICMP error about a forwarded packet. */
static __always_inline int xfw_rj_fib_src(struct xdp_md *ctx, struct xfw_rj *r,
					  struct bpf_fib_lookup *fib, int v6)
{
	int rc;

	xfw_rj_fib_init(fib, r, ctx->ingress_ifindex, v6, 0, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib),
			    BPF_FIB_LOOKUP_SRC | BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return -1;
	if (v6)
		__builtin_memcpy(r->saddr, fib->ipv6_src, 16);
	else
		r->saddr[0] = fib->ipv4_src;
	return 0;
}

/* xfw_rj_route_type returns the local table's route type of the address a
 * (network byte order, IPv4 in a[0]): XFW_RTN_LOCAL for the host's own
 * addresses, XFW_RTN_ANYCAST, …, or 0 when it has none. */
static __always_inline __u8 xfw_rj_route_type(const __u32 *a, int v6)
{
	__u8 *v;

	if (v6) {
		struct xfw_lpm6_key k = { .prefixlen = 128 };

		__builtin_memcpy(k.addr, a, 16);
		v = bpf_map_lookup_elem(&xfw_local6, &k);
	} else {
		struct xfw_lpm4_key k = { .prefixlen = 32 };

		__builtin_memcpy(k.addr, a, 4);
		v = bpf_map_lookup_elem(&xfw_local4, &k);
	}
	return v ? *v : 0;
}

/* xfw_rj_is_local reports whether the address a is one of the host's own
 * (a local route of the local table). */
static __always_inline int xfw_rj_is_local(const __u32 *a, int v6)
{
	return xfw_rj_route_type(a, v6) == XFW_RTN_LOCAL;
}

/* xfw_rj_for_host reports whether a reply to the address a is delivered
 * to the host itself: one of its own addresses, or for IPv6 one of its
 * anycast addresses (the local table's anycast routes, such as the
 * subnet-router anycast address a forwarding host joins: ip6_route_output
 * delivers to them; found by xfw difftest, a TCP RST to one). */
static __always_inline int xfw_rj_for_host(const __u32 *a, int v6)
{
	__u8 type = xfw_rj_route_type(a, v6);

	return type == XFW_RTN_LOCAL || (v6 && type == XFW_RTN_ANYCAST);
}

/* xfw_rj_lo_route finds where the kernel sends a reply to a packet the
 * host sent itself through loopback with another host's source address
 * (INPUT on lo): it routes the reply out (icmp6_send / icmp_send /
 * nf_send_reset route it as a locally generated packet; the source stays
 * the packet's destination, one of the host's addresses). XDP_TX would
 * hand it back to the stack on lo, which would forward it (judged in
 * FORWARD). Returns the output device with the frame addressed in r->l2,
 * or 0 (no route, or the neighbour unknown to the FIB: the stack gets it,
 * as before, and resolves it). Loopback runs generic XDP, so the redirect
 * works whatever the target device's driver. */
static __always_inline __u32 xfw_rj_lo_route(struct xdp_md *ctx, struct xfw_rj *r,
					     struct bpf_fib_lookup *fib, int v6)
{
	xfw_rj_fib_init(fib, r, ctx->ingress_ifindex, v6, 1, 0);
	if (bpf_fib_lookup(ctx, fib, sizeof(*fib), 0) != BPF_FIB_LKUP_RET_SUCCESS)
		return 0;
	__builtin_memcpy(r->l2, fib->dmac, ETH_ALEN);
	__builtin_memcpy(r->l2 + ETH_ALEN, fib->smac, ETH_ALEN);
	return fib->ifindex;
}

/* xfw_rj_l2_route addresses the reply to the neighbour the kernel's routing
 * picks for r->daddr (its icmp_send / nf_send_reset route and neighbour
 * entry) when that route leaves by the input interface: the offending
 * frame's source MAC may be another host's (found by xfw difftest). When
 * the route leaves elsewhere or the neighbour is unknown, the reply keeps
 * the swapped addresses (README, "Known differences"). */
static __always_inline void xfw_rj_l2_route(struct xdp_md *ctx, struct xfw_rj *r,
					    struct bpf_fib_lookup *fib, int v6)
{
	xfw_rj_fib_init(fib, r, ctx->ingress_ifindex, v6, 0, 0);
	/* As output: no forwarding check on the input device. */
	if (bpf_fib_lookup(ctx, fib, sizeof(*fib), BPF_FIB_LOOKUP_OUTPUT) != BPF_FIB_LKUP_RET_SUCCESS)
		return;
	if (fib->ifindex != ctx->ingress_ifindex)
		return;
	__builtin_memcpy(r->l2, fib->dmac, 6);
}

/* xfw_rj_xdp builds the reply to a packet received on ctx and judged in
 * chain (INPUT or FORWARD). */
__attribute__((noinline)) int xfw_rj_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 chain)
{
	__u32 frame, keep, hdrs, off = 0, len = 0, cs, slot = XFW_RJ_SLOT_XDP, out = 0;
	struct xfw_rj_scratch *sc;
	void *data, *data_end;
	struct xfw_rj *r;
	__u64 sum = 0;
	int kind, v6;

	if (!ctx || !p)
		return XDP_DROP;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return XDP_DROP;
	r = &sc->r;
	__builtin_memset(r, 0, sizeof(*r));
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	kind = xfw_rj_plan(r, p, p->reject, data, data_end, 1,
			   ctx->ingress_ifindex == XFW_LOOPBACK_IFINDEX);
	if (kind == XFW_RJK_NONE)
		return XDP_DROP;
	v6 = kind == XFW_RJK_ICMP6 || kind == XFW_RJK_RST6;
	/* IPv4 INPUT reassembles before the hook: the datagram's checksum,
	 * not the first fragment's, decides. */
	if (!xfw_rj_csum_ok_xdp(ctx, p, !v6 && chain == XFW_CHAIN_INPUT && p->fragmented))
		return XDP_DROP;
	frame = (__u32)(data_end - data);
	if (ctx->ingress_ifindex != XFW_LOOPBACK_IFINDEX)
		xfw_rj_l2_route(ctx, r, &sc->fib, v6);
	else if (!xfw_rj_for_host(r->daddr, v6))
		out = xfw_rj_lo_route(ctx, r, &sc->fib, v6);

	if (kind == XFW_RJK_RST4 || kind == XFW_RJK_RST6) {
		/* Shrink to the RST; it never outgrows the segment. */
		keep = r->l2len + (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_TCP_HLEN;
		if (keep > frame)
			return XDP_DROP;
		if (keep < frame && bpf_xdp_adjust_tail(ctx, (int)keep - (int)frame))
			return XDP_DROP;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (v6 ? xfw_rj_put_rst(data, data_end, r, 1) : xfw_rj_put_rst(data, data_end, r, 0))
			return XDP_DROP;
		return out ? bpf_redirect(out, 0) : XDP_TX;
	}

	if (chain == XFW_CHAIN_FORWARD) {
		r->fwd = 1;
		if (xfw_rj_fib_src(ctx, r, &sc->fib, v6))
			return XDP_DROP;
	}
	/* Keep the L2 header and the quote (dropping any Ethernet padding
	 * past the IP packet), then make room for the new headers. */
	keep = r->l2len + r->qlen;
	if (keep > frame)
		return XDP_DROP;
	if (keep < frame && bpf_xdp_adjust_tail(ctx, (int)keep - (int)frame))
		return XDP_DROP;
	hdrs = (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_ICMP_HLEN;
	if (bpf_xdp_adjust_head(ctx, -(int)hdrs))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (v6 ? xfw_rj_put_icmp(data, data_end, r, 1, &off, &len, &sum) :
		 xfw_rj_put_icmp(data, data_end, r, 0, &off, &len, &sum))
		return XDP_DROP;
	cs = xfw_rj_csum_xdp(ctx, off, len);
	if (cs >= XFW_RJ_CSUM_ERR)
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (off > XFW_RJ_OFF_MAX || data + off + XFW_RJ_ICMP_HLEN > data_end)
		return XDP_DROP;
	*(__u16 *)(data + off + 2) = xfw_rj_finish(sum + cs);
	return out ? bpf_redirect(out, 0) : XDP_TX;
}

/* xfw_rj_tc_route finds the route of an OUTPUT reply whose destination is
 * not the host (a packet the host sent with another host's source
 * address): the kernel routes it as a locally generated packet (icmp_send,
 * nf_send_reset), and picks the source of an ICMP error by that route, as
 * the offending packet's destination is not the host's (icmp_send's
 * RTCF_LOCAL test, icmp6_send's ipv6_chk_addr). Handed to the local stack
 * instead, the reply would be forwarded and judged in FORWARD (found by
 * xfw difftest). The lookup is made as if the reply came in by the device
 * the offending packet was leaving by (the routing table as for
 * forwarding); on a host that does not forward, bpf_fib_lookup refuses
 * that, and the route out of that same device is taken. Returns 0 with
 * the route in *fib (next hop in its destination fields) and, when the
 * neighbour is known, its addresses in r->l2; or -1: no route, no reply,
 * as in the kernel. */
static __always_inline int xfw_rj_tc_route(struct __sk_buff *skb, struct xfw_rj *r,
					   struct bpf_fib_lookup *fib, int v6, int icmp)
{
	__u32 flags = 0;
	long rc;

	if (icmp)
		flags |= BPF_FIB_LOOKUP_SRC;
	xfw_rj_fib_init(fib, r, skb->ifindex, v6, !icmp,
			icmp ? (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP) : IPPROTO_TCP);
	rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags);
	if (rc == BPF_FIB_LKUP_RET_FWD_DISABLED)
		rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags | BPF_FIB_LOOKUP_OUTPUT);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return -1;
	if (icmp) {
		if (v6)
			__builtin_memcpy(r->saddr, fib->ipv6_src, 16);
		else
			r->saddr[0] = fib->ipv4_src;
	}
	/* A known neighbour: address the frame now (xfw_rj_tc_out then sends
	 * it with a plain redirect). tot_len marks the case; the lookup does
	 * not read it back. */
	fib->tot_len = rc == BPF_FIB_LKUP_RET_SUCCESS;
	if (fib->tot_len) {
		__builtin_memcpy(r->l2, fib->dmac, ETH_ALEN);
		__builtin_memcpy(r->l2 + ETH_ALEN, fib->smac, ETH_ALEN);
	}
	return 0;
}

/* xfw_rj_tc_out sends the reply out of the device of the route
 * xfw_rj_tc_route found, to its next hop's neighbour. It leaves through
 * that device's TC egress, where it is judged in OUTPUT, as the kernel's
 * reply is. With the neighbour known, the frame is addressed already and
 * a plain redirect sends it; else bpf_redirect_neigh resolves it (which
 * counts a drop in OUTPUT as the device's tx_dropped). */
static __always_inline int xfw_rj_tc_out(const struct bpf_fib_lookup *fib)
{
	struct bpf_redir_neigh nh;

	if (fib->tot_len)
		return bpf_redirect(fib->ifindex, 0);
	__builtin_memset(&nh, 0, sizeof(nh));
	nh.nh_family = fib->family;
	if (fib->family == AF_INET6)
		__builtin_memcpy(nh.ipv6_nh, fib->ipv6_dst, 16);
	else
		nh.ipv4_nh = fib->ipv4_dst;
	return bpf_redirect_neigh(fib->ifindex, &nh, sizeof(nh), 0);
}

/* XFW_RJ_TC_LOCAL, returned by xfw_rj_tc: the skb now holds a reply for the host
 * itself, to be judged in OUTPUT, then handed to the local stack
 * (xfw_rj_tc_deliver). Not a TC action code. */
#define XFW_RJ_TC_LOCAL 0x100

/* xfw_rj_tc builds the reply to a locally generated packet judged in
 * OUTPUT: one for the host itself stays in the skb (XFW_RJ_TC_LOCAL); one
 * for another host is routed out (xfw_rj_tc_route). */
__attribute__((noinline)) int xfw_rj_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 type)
{
	__u32 keep, hdrs, off = 0, len = 0, cs, slot = XFW_RJ_SLOT_TC;
	struct xfw_rj_scratch *sc;
	void *data, *data_end;
	struct xfw_rj *r;
	__u64 sum = 0;
	int kind, v6, routed, whole;

	if (!skb || !p)
		return TC_ACT_SHOT;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return TC_ACT_SHOT;
	r = &sc->r;
	__builtin_memset(r, 0, sizeof(*r));
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	kind = xfw_rj_plan(r, p, type, data, data_end, 0,
			   skb->ifindex == XFW_LOOPBACK_IFINDEX);
	if (kind == XFW_RJK_NONE)
		return TC_ACT_SHOT;
	v6 = kind == XFW_RJK_ICMP6 || kind == XFW_RJK_RST6;
	/* OUTPUT judged the datagram before the stack fragmented it: a
	 * first fragment with more to come that fills the device's MTU (to
	 * 8 bytes) is the stack's. A packet sent with a fragment header of
	 * its own (a raw socket's) is what OUTPUT saw. */
	whole = 0;
	if (p->fragmented & XFW_FRAG_MORE) {
		__u32 mtu = 0;

		if (bpf_check_mtu(skb, skb->ifindex, &mtu, 0, 0) >= 0 || mtu)
			whole = p->l3len + XFW_RJ_FRAG_UNIT > mtu;
	}
	if (!xfw_rj_csum_ok_tc(skb, p, whole))
		return TC_ACT_SHOT;
	routed = !xfw_rj_for_host(r->daddr, v6);
	if (routed && xfw_rj_tc_route(skb, r, &sc->fib, v6,
				      kind == XFW_RJK_ICMP4 || kind == XFW_RJK_ICMP6))
		return TC_ACT_SHOT;
	/* An ICMPv6 error for the host itself about a packet to another
	 * host: icmp6_send leaves the source to the route back, whose
	 * source selection picks the destination itself (RFC 6724 rule 1).
	 * (IPv4 picks the same, but a frame from one of the host's own
	 * addresses handed to the stack on a device is a martian: there the
	 * source stays the packet's destination, README.) */
	if (!routed && kind == XFW_RJK_ICMP6 && !xfw_rj_is_local(r->saddr, v6))
		__builtin_memcpy(r->saddr, r->daddr, 16);

	if (kind == XFW_RJK_RST4 || kind == XFW_RJK_RST6) {
		keep = r->l2len + (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_TCP_HLEN;
		/* change_tail linearizes, unclones and drops GSO state; it
		 * refuses to cut into the headers up to the transport header
		 * (IPv6 extension headers longer than 20 bytes): dropped. */
		if (bpf_skb_change_tail(skb, keep, 0))
			return TC_ACT_SHOT;
		if (bpf_skb_pull_data(skb, keep))
			return TC_ACT_SHOT;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		if (v6 ? xfw_rj_put_rst(data, data_end, r, 1) : xfw_rj_put_rst(data, data_end, r, 0))
			return TC_ACT_SHOT;
	} else {
		keep = r->l2len + r->qlen;
		if (keep < skb->len && bpf_skb_change_tail(skb, keep, 0))
			return TC_ACT_SHOT;
		hdrs = (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_ICMP_HLEN;
		/* Room between the Ethernet and the IP header. */
		if (bpf_skb_adjust_room(skb, hdrs, BPF_ADJ_ROOM_MAC, 0))
			return TC_ACT_SHOT;
		if (bpf_skb_pull_data(skb, keep + hdrs))
			return TC_ACT_SHOT;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		if (v6 ? xfw_rj_put_icmp(data, data_end, r, 1, &off, &len, &sum) :
			 xfw_rj_put_icmp(data, data_end, r, 0, &off, &len, &sum))
			return TC_ACT_SHOT;
		cs = xfw_rj_csum_tc(skb, off, len);
		if (cs >= XFW_RJ_CSUM_ERR)
			return TC_ACT_SHOT;
		data = (void *)(long)skb->data;
		data_end = (void *)(long)skb->data_end;
		if (off > XFW_RJ_OFF_MAX || data + off + XFW_RJ_ICMP_HLEN > data_end)
			return TC_ACT_SHOT;
		*(__u16 *)(data + off + 2) = xfw_rj_finish(sum + cs);
	}
	if (routed)
		return xfw_rj_tc_out(&sc->fib);
	return XFW_RJ_TC_LOCAL;
}

/* xfw_rj_tc_deliver hands a reply for the host itself (XFW_RJ_TC_LOCAL,
 * judged in OUTPUT since) to the local stack. */
static __always_inline int xfw_rj_tc_deliver(struct __sk_buff *skb)
{
	/* Loopback loops the skb back with its route, which delivers it
	 * locally (both addresses are the host's). */
	if (skb->ifindex == XFW_LOOPBACK_IFINDEX)
		return TC_ACT_OK;
	return bpf_redirect(skb->ifindex, BPF_F_INGRESS);
}

/* xfw_xdp_reject: the packet arrived on ingress and was judged REJECT
 * (type p->reject) in chain (INPUT or FORWARD): returns XDP_TX with the
 * reply in place of the frame, or XDP_DROP when the kernel would send
 * nothing. */
static __always_inline int xfw_xdp_reject(struct xdp_md *ctx, struct xfw_pkt *p, __u32 chain)
{
	return xfw_rj_xdp(ctx, p, chain);
}

/* xfw_tc_reject: the packet is locally generated and was judged REJECT in
 * OUTPUT: XFW_RJ_TC_LOCAL with the reply for the host itself in the skb,
 * or a TC action (the reply routed out; or a drop). */
static __always_inline int xfw_tc_reject(struct __sk_buff *skb, struct xfw_pkt *p, __u32 type)
{
	return xfw_rj_tc(skb, p, type);
}

#endif /* XFW_REJECT_H */
