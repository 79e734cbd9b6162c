/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_structs.h — REJECT's constants (header sizes, ICMP types, limits
 * of the replies) and its own layouts: what a reply is (enum xfw_rj_kind),
 * what it needs (struct xfw_rj) and the per-CPU scratch it is built in
 * (struct xfw_rj_scratch, map xfw_rj_scratch: reject_maps.h). Shared by
 * the parts of reject.h and by connection tracking, which tracks an XDP
 * reply's RST (ct_hook.h).
 *
 * Includes: common.h only (and the kernel's UAPI for bpf_fib_lookup).
 */
#ifndef XFW_REJECT_STRUCTS_H
#define XFW_REJECT_STRUCTS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include "common.h"

/* Header sizes (bytes). */
#define XFW_RJ_ETH_HLEN 14
#define XFW_RJ_VLAN_HLEN 18 /* Ethernet header with one 802.1Q tag */
/* Ethernet and PPPoE session headers (a bridged PPPoE frame's IP header
 * offset, bridge_reject.h): the PPPoE header and PPP protocol's bytes. */
#define XFW_RJ_PPPOE_HLEN 8
#define XFW_RJ_PPPOE_L3 (XFW_RJ_ETH_HLEN + XFW_RJ_PPPOE_HLEN)
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

/* TTL / hop limit of a reply when the control plane has not said (the
 * kernel's defaults of ip_default_ttl and the IPv6 hop_limit): replies
 * take the namespace's ip_default_ttl, or the IPv6 hop_limit of the device
 * they leave by (xfw_rj_ttl4, xfw_rj_hop_limit6 in reject_route.h). */
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
/* Checksummed span: at most an ICMPv6 header and its quote. */
#define XFW_RJ_SUM_MAX (XFW_RJ_ICMP6_MAX - XFW_RJ_IP6_HLEN)
#define XFW_RJ_CHUNK 64 /* bytes per bpf_csum_diff() call (<= 512) */
#define XFW_RJ_CSUM_ERR 0x10000 /* xfw_rj_csum_*: not a 16-bit sum */

/* IPv4 options: at most 40 bytes (a 15-word header); copies are kept in
 * 64-byte buffers, a power of two to mask indices with. */
#define XFW_RJ_OPT_MAX 40
#define XFW_RJ_OPT_BUF 64
#define XFW_RJ_OPT_MASK (XFW_RJ_OPT_BUF - 1)

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
	__u8 ttl;                  /* the reply's TTL / hop limit */
	__u8 sel6;                 /* FORWARD ICMPv6: the source to pick on the input device (reject_saddr.h) */
	__u8 pad;
	/* ICMPv4: the reply's IPv4 options (ip_options_echo, then
	 * ip_options_build: reject_opts.h), optlen bytes, a multiple of 4. */
	__u32 optlen;
	/* What the input path's changes to the options add to the IPv4
	 * header's sum (its checksum left stale): the kernel's REJECT
	 * counts it when it verifies the transport checksum. */
	__u32 hdelta;
	__u8 opt[XFW_RJ_OPT_BUF];
};

/* The offending packet's IPv4 options, copied by reject_opts.h
 * (XFW_RJ_OPT_MAX bytes used). */
struct xfw_rj_opt4 {
	__u8 b[XFW_RJ_OPT_BUF];
};

/* Per-CPU scratch space for the reply's facts and the FIB request: the
 * hook programs' own stack leaves too little room below the 512-byte
 * limit. Slot XFW_RJ_SLOT_XDP serves XDP, XFW_RJ_SLOT_TC the TC program
 * (they never nest on one CPU, but separate slots cost nothing). */
struct xfw_rj_scratch {
	struct xfw_rj r;
	struct bpf_fib_lookup fib;
	__u8 buf[XFW_RJ_CHUNK]; /* packet bytes being checksummed */
	/* The chunk walk of xfw_rj_csum_ok (its bpf_loop): the sum so far,
	 * the next chunk's offset, the bytes left, 1 when a read failed. */
	__u64 sum;
	__u32 off, len, bad, pad;
	struct xfw_rj_opt4 o;
};

#define XFW_RJ_SLOT_XDP 0
#define XFW_RJ_SLOT_TC 1

/* How many replies an OUTPUT REJECT in TC egress builds for one packet:
 * its reply for the host itself, and the answer to that reply when OUTPUT
 * REJECTs it in turn (an ICMP error about a RST, which no REJECT answers:
 * no error about an ICMP error). */
#define XFW_RJ_TC_DEPTH 2

#endif /* XFW_REJECT_STRUCTS_H */
