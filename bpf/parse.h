/* SPDX-License-Identifier: GPL-2.0 */
/*
 * parse.h — stage 1: parse a frame into struct xfw_pkt, the field values
 * classification looks at, exactly as netfilter would see them.
 *
 * Conventions:
 *  - Input is a [data, data_end) window starting at the Ethernet header (XDP,
 *    and TC after bpf_skb_pull_data). Every read is bounds-checked against
 *    data_end; the verifier insists.
 *  - xfw_parse() returns XFW_PARSE_JUDGE when netfilter would see the packet
 *    and classification must run, XFW_PARSE_PASS when the packet is none of
 *    iptables' business (ARP, …) or the stack drops it before netfilter
 *    (bad IPv4 header or checksum, length beyond the frame): such packets are
 *    passed on unjudged and uncounted, so the kernel does what it always does.
 *  - Field values follow iptables: ports and TCP flags only for the first
 *    fragment, ICMP type/code likewise; XFW_V_TRUNC where the header is cut
 *    short (iptables "hotdrops" such a packet when a tcp/udp/icmp match looks
 *    at it).
 *
 * Includes: common.h only. Owns struct xfw_pkt (the packet facts every
 * later stage reads) and the IPv4 option / IPv6 TLV walks route.h runs.
 */
#ifndef XFW_PARSE_H
#define XFW_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"

#define XFW_PARSE_JUDGE 0
#define XFW_PARSE_PASS 1

/* 802.1Q and 802.1ad tags. */
#define XFW_ETH_P_8021Q 0x8100
#define XFW_ETH_P_8021AD 0x88A8
/* A PPPoE session frame (RFC 2516): a 6-byte PPPoE header, then the PPP
 * protocol (2 bytes) of the datagram after it, IPv4's or IPv6's for the
 * ones br_netfilter judges (is_pppoe_ip, is_pppoe_ipv6). */
#define XFW_ETH_P_PPP_SES 0x8864
#define XFW_PPPOE_HLEN 6
#define XFW_PPPOE_SES_HLEN 8
#define XFW_PPP_IP 0x0021
#define XFW_PPP_IPV6 0x0057
/* xfw_pkt.vlan of an IP datagram parsed inside a PPPoE session frame
 * (above any 12-bit VLAN id). */
#define XFW_VLAN_PPPOE 0x10000
/* The VLAN id bits of a tag's TCI (and of xfw_pkt.vlan). */
#define XFW_VLAN_ID_MASK 0x0fff

/* xfw_parse's flags: verify the IPv4 header checksum (ingress: the stack
 * does); parse the IP datagram in a PPPoE session frame (a bridged one
 * with bridge-nf-filter-pppoe-tagged: bridge_tc.h), else it passes. */
#define XFW_PARSE_F_CSUM 1
#define XFW_PARSE_F_PPPOE 2

/* IPv6 extension header numbers (netinet/in.h IPPROTO_* values). */
#define XFW_NH_HOP 0
#define XFW_NH_ROUTING 43
#define XFW_NH_FRAGMENT 44
#define XFW_NH_AUTH 51
#define XFW_NH_NONE 59
#define XFW_NH_DEST 60
/* At most this many IPv6 extension headers are walked; a longer chain is
 * treated as malformed (kernel: ipv6_find_hdr has no bound but real
 * packets carry a handful). */
#define XFW_MAX_EXTHDRS 8

/* Protocol values of an IPv6 packet whose extension header chain could
 * not be walked. ERR: rules with -p hotdrop it, as ip6_packet_match does
 * when ipv6_find_hdr fails with the fragment offset at 0 (which it also
 * leaves there for a later fragment followed by another extension header);
 * NOMATCH: unused by the parser (a value rules with -p do not match). */
#define XFW_PROTO_ERR 256
#define XFW_PROTO_NOMATCH 257


/* xfw_pkt.fragmented: the "more fragments" flag is set. */
#define XFW_FRAG_MORE 2
/* xfw_pkt.fragmented: an IPv6 later fragment with "more fragments" whose
 * end is not a multiple of 8 bytes, which the kernel's reassembly for
 * connection tracking refuses to queue (nf_ct_frag6_queue: -EPROTO) and
 * passes on alone, with no connection (nf_conntrack_in finds no
 * transport header in it): judged alone, INVALID, not following its
 * datagram. */
#define XFW_FRAG_ALONE 4

/* xfw_pkt.nat_pre: not asked (TC, or no translated connection yet); a
 * packet without ports the XDP hook looked up in the translations before
 * routing and left as it came; one it translated (a DNAT's original
 * direction, an SNAT's reply); a packet with ports of a translated
 * connection the XDP hook tracked before routing, to translate it only
 * when the tracker does not find it INVALID (xfw.c xfw_xdp_nat_pre): not
 * tracked again. */
#define XFW_NATPRE_NONE 0
#define XFW_NATPRE_KEPT 1
#define XFW_NATPRE_DONE 2
#define XFW_NATPRE_TRACKED 3

struct xfw_pkt {
	__u64 src_hi, src_lo;
	__u64 dst_hi, dst_lo;
	__u64 mac_src;     /* Ethernet source as a 48-bit number */
	__u32 proto;       /* 0–255, or XFW_PROTO_ERR */
	__u32 sport, dport;
	__u32 tcpflags;    /* 0–255, XFW_FLAGS_NONE, XFW_FLAGS_TRUNC, or
			    * XFW_FLAGS_LATER + a later fragment's byte
			    * read as TCP flags (ecn) */
	__u32 icmp;        /* type << 8 | code, XFW_V_NONE or XFW_V_TRUNC */
	__u32 frag;        /* 1 for IPv4 second and later fragments */
	__u32 l3len;       /* layer-3 length: counters (and -m length) */
	__u32 lenm;        /* what -m length compares: l3len, except for
			    * an IPv6 payload length 0 (see xfw_parse_ipv6) */
	__u32 ttl;
	__u32 l3_off;      /* offset of the IP header from data */
	__u32 l4_off;      /* offset of the transport header, 0 if none */
	__u32 l4_end;      /* end of the layer-3 packet (offset) */
	__u32 vlan;        /* VLAN id of the (outer) tag, 0 when untagged;
			    * XFW_VLAN_PPPOE: in a PPPoE session frame */
	__u32 ct;          /* XFW_F_CT value (ct.h); 0 (INVALID) until tracked */
	__u32 ct_osport;   /* XFW_F_CTOSPORT, XFW_F_CTODPORT */
	__u32 ct_odport;
	__u32 ct_rsport;   /* XFW_F_CTRSPORT, XFW_F_CTRDPORT */
	__u32 ct_rdport;
	__u32 addrtype;    /* XFW_F_ADDRTYPE, set by xfw_classify when a
			    * rule uses it */
	__u32 tcpmss;      /* XFW_F_TCPMSS, set by the hooks when a rule
			    * uses it (tcpopt.h); XFW_V_NONE otherwise */
	__u32 thoff;       /* where netfilter's matches read the transport
			    * header (par->thoff), IPv6 later fragments
			    * included; 0 when none or an IPv4 later
			    * fragment (tcpopt.h finds it) */
	__u32 ext6;        /* XFW_F_EXT6, set by the hook (ip6ext.h) when
			    * a rule uses it */
	__u32 hdr4;        /* XFW_F_HDR4, set by the hook (hdr4.h) when a
			    * rule uses it */
	__u64 ct_osrc_hi, ct_osrc_lo; /* XFW_F_CTOSRC (0 without a connection) */
	__u64 ct_odst_hi, ct_odst_lo; /* XFW_F_CTODST */
	__u8 fam;          /* 0 IPv4, 1 IPv6 */
	__u8 fragmented;   /* a fragment, first or later (MF, offset, IPv6
			    * fragment header): bit 0; XFW_FRAG_MORE when
			    * "more fragments" is set; XFW_FRAG_ALONE */
	__u8 tos;          /* IPv4 TOS / IPv6 traffic class */
	__u8 dst_unicast;  /* destination MAC is unicast */
	__u8 dst_mac[6];
	__u8 df;           /* IPv4 "don't fragment" */
	__u8 reject;       /* REJECT type (enum xfw_reject), set by the XDP
			    * hook for xfw_xdp_reject; not by the parser */
	__u8 pkttype;      /* XFW_F_PKTTYPE: skb->pkt_type, set by the XDP
			    * hook (0, PACKET_HOST, on egress) */
	__u8 opt_rr;       /* IPv4: 1 + the offset of the record route and */
	__u8 opt_ts;       /* timestamp options among the options, or 0, as
			    * the XDP hook's check of them (xfw_ipv4_opts_ok)
			    * found them (REJECT echoes them: reject_opts.h);
			    * in the padding before mark, cleared with the
			    * rest, 0 at TC */
	/* The last byte of padding before mark holds seven small fields, 0
	 * where not set. */
	__u8 nat_pre : 2;  /* XFW_NATPRE_*: what the XDP hook's translation
			    * before routing (nat_icmp.h xfw_nat_pre) did to
			    * a packet without ports, or that it tracked one
			    * with ports; 0 at TC */
	__u8 nosock : 1;   /* at TC, a packet of OUTPUT without a socket
			    * (recent_mt's "no skb->sk": -m recent takes
			    * the TTL one higher, recent.h), set by the TC
			    * hooks; 0 at XDP */
	__u8 pre_drop : 1; /* at XDP, the stack drops the packet after
			    * PREROUTING, the hook at its end: multicast to
			    * a group its device has not joined (mcast.h), a
			    * source-routed packet whose route xfw does not
			    * follow (route.h); set by xfw_route */
	__u8 dst_bcast : 1; /* at XDP, the destination is a broadcast route
			    * of the local table (a subnet-directed
			    * broadcast): icmp_send answers nothing about it
			    * (RTCF_BROADCAST), reject_plan.h; set by
			    * xfw_route */
	__u8 in_sys : 2;   /* at XDP, XFW_INSYS_* (common.h): the input
			    * device's accept_local and route_localnet,
			    * which route.h's checks follow; 0 at TC */
	__u8 mss_room : 1; /* a SYN whose TCP header has no
			    * MSS option, no data after it and room for
			    * one: TCPMSS adds one (mangle.h); set with
			    * .tcpmss (tcpopt.h) */
	__u32 mark;        /* the packet's mark as the walk has it (mark.h):
			    * set by the hooks, changed by MARK entries */
	__u32 owner;       /* XFW_OWNER_F_* of the packet's socket (owner.h):
			    * set by the hooks, 0 at XDP */
	__u32 owner_uid;   /* its file's fsuid and fsgid (with F_FILE) */
	__u32 owner_gid;
	__u32 physin;      /* XFW_F_PHYSIN, XFW_F_PHYSOUT: the bridge ports
			    * (XFW_PHYS_*), set by the hooks (bridge.h) */
	__u32 physout;
	__u32 mangle;      /* XFW_MG_* (mangle.h): 0 from the parser */
	__u32 mss_new;     /* the lowest --set-mss of the walk (XFW_MG_MSS) */
	__u32 clamp_mtu;   /* the path MTU --clamp-mss-to-pmtu clamps to, set
			    * by the hooks before the walk only for a packet
			    * -m tcpmss reads an MSS of (mangle_apply.h) */
	__u32 ports4;      /* the four bytes at the transport offset that
			    * hashlimit (hashlimit_init_dst) reads as ports,
			    * first << 16 | second: a TCP, UDP, UDP-Lite,
			    * SCTP, DCCP or ESP header's first four (ESP: the
			    * SPI), AH's SPI (at 4); an IPv4 later fragment's
			    * payload read alike (xfw_read_ports4) */
	__u32 ports4_ok;   /* 1 when ports4 holds them, 0 when the packet
			    * is too short (hashlimit hotdrops) */
};

/* xfw_load_bytes copies len bytes at off of the packet: an XDP frame
 * (is_xdp) or an skb. For code shared by both program types, inlined into
 * one global function per type (the verifier checks the helper against
 * the context's real type there). */
static __always_inline long xfw_load_bytes(void *ctx, int is_xdp, __u32 off, void *buf, __u32 len)
{
	if (is_xdp)
		return bpf_xdp_load_bytes(ctx, off, buf, len);
	return bpf_skb_load_bytes(ctx, off, buf, len);
}

static __always_inline __u64 xfw_mac48(const __u8 *m)
{
	return ((__u64)m[0] << 40) | ((__u64)m[1] << 32) | ((__u64)m[2] << 24) |
	       ((__u64)m[3] << 16) | ((__u64)m[4] << 8) | (__u64)m[5];
}

static __always_inline __u64 xfw_be64(const __u8 *b)
{
	return ((__u64)b[0] << 56) | ((__u64)b[1] << 48) | ((__u64)b[2] << 40) |
	       ((__u64)b[3] << 32) | ((__u64)b[4] << 24) | ((__u64)b[5] << 16) |
	       ((__u64)b[6] << 8) | (__u64)b[7];
}

/* xfw_barrier_var stops clang from turning a packet-pointer comparison into
 * an integer one the verifier cannot use for bounds. */
#define xfw_barrier_var(v) asm volatile("" : "+r"(v))

/* XFW_IPV4_MIN_WORDS is the 16-bit words of an IPv4 header without
 * options (20 bytes). */
#define XFW_IPV4_MIN_WORDS 10

/* xfw_csum_fold folds a one's complement sum of 16- or 32-bit words,
 * accumulated in 64 bits, to 16 bits (end-around carries): the one fold
 * of the data plane's checksums (the parser's, REJECT's, NAT's). */
static __always_inline __u32 xfw_csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u32)sum;
}

/* xfw_ipv4_csum_ok verifies the IPv4 header checksum as ip_rcv does. A
 * header without options, nearly every packet's, is summed as five 32-bit
 * words (the same one's complement sum: each holds two 16-bit words, and
 * the fold adds the carries back) with one bounds check, not ten. */
static __always_inline int xfw_ipv4_csum_ok(const __u16 *hdr, __u32 words, void *data_end)
{
	const __u32 *w4 = (const __u32 *)hdr;
	__u32 sum = 0;

	if (words == XFW_IPV4_MIN_WORDS) {
		if ((void *)(w4 + XFW_IPV4_MIN_WORDS / 2) > data_end)
			return 0;
		return xfw_csum_fold((__u64)w4[0] + w4[1] + w4[2] + w4[3] + w4[4]) == 0xffff;
	}
	/* 30 16-bit words: the largest IPv4 header (60 bytes). */
	for (int i = 0; i < 30; i++) {
		const __u16 *w;

		if (i >= words)
			break;
		w = hdr + i;
		xfw_barrier_var(w);
		if ((void *)(w + 1) > data_end)
			return 0;
		sum += *w;
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff;
}

/* XFW_PARSE_L4: returned by xfw_parse when the transport header at
 * p->l4_off is still to be read (xfw_parse_l4, called by the hook's
 * parse function once every header path has joined). */
#define XFW_PARSE_L4 2
/* A bound on transport header offsets for the verifier: they are at most
 * 18 + 40 + 8 × 2,048 bytes (the IPv6 extension header walk's reach), so
 * the clamp to it in xfw_parse_l4 never acts. */
#define XFW_L4_OFF_LIMIT 0x8000

/* xfw_parse_l4_at records that the transport header is at l4 and returns
 * XFW_PARSE_L4 (xfw_parse_l4 reads it). */
static __always_inline int xfw_parse_l4_at(struct xfw_pkt *p, void *data, void *l4)
{
	p->l4_off = (__u32)(l4 - data);
	p->thoff = p->l4_off;
	return XFW_PARSE_L4;
}

/* xfw_read_ports4 sets p->ports4 (and ports4_ok) from the transport
 * header (or an IPv4 later fragment's payload) at l4, avail bytes of the
 * IP packet from there, as hashlimit_init_dst reads it: at
 * proto_ports_offset, 4 for AH (its SPI), 0 for the other protocols with
 * ports. */
static __always_inline void xfw_read_ports4(struct xfw_pkt *p, void *l4, void *data_end, __u32 avail)
{
	__u32 at = p->proto == IPPROTO_AH ? 4 : 0;
	void *q = l4 + at;

	if (avail < at + 4 || q + 4 > data_end)
		return;
	p->ports4 = (__u32)bpf_ntohs(*(__u16 *)q) << 16 | bpf_ntohs(*(__u16 *)(q + 2));
	p->ports4_ok = 1;
}

/* xfw_parse_later4 reads what the kernel's matches read of an IPv4 later
 * fragment's payload as if it were a transport header (par->thoff is the
 * payload's start): hashlimit's ports (ports4) and, of TCP, the flags
 * byte ecn tests (XFW_FLAGS_LATER + the byte, when the payload holds the
 * 20 bytes match_tcp needs; the tcp match never matches a later fragment,
 * which has no ports, and hotdrops one at offset 8, whose ports are
 * XFW_V_TRUNC). pl is the payload, at offset off. */
static __always_inline void xfw_parse_later4(struct xfw_pkt *p, void *pl, __u32 off, void *data_end)
{
	__u32 avail = off < p->l4_end ? p->l4_end - off : 0;

	xfw_read_ports4(p, pl, data_end, avail);
	if (p->proto == IPPROTO_TCP && avail >= 20 && pl + 20 <= data_end)
		p->tcpflags = XFW_FLAGS_LATER + *(__u8 *)(pl + 13);
}

/* xfw_parse_l4 fills ports, TCP flags and ICMP type/code from the transport
 * header at p->l4_off (first fragment only), checking what is inside the IP
 * packet (p->l4_end), not only the frame. It runs once after the header
 * walks (xfw_parse_frame): inlined at each of their exits, its branches
 * were verified once per exit. */
static __always_inline void xfw_parse_l4(struct xfw_pkt *p, void *data, void *data_end)
{
	/* Read back from p (not the value the inlined header walk left in
	 * a register, whose upper bits the verifier does not know). */
	__u32 off = *(volatile __u32 *)&p->l4_off;
	__u32 end = p->l4_end, len = (__u32)(data_end - data);
	__u32 avail;
	void *l4;

	if (end > len)
		end = len;
	avail = off < end ? end - off : 0;
	if (off > XFW_L4_OFF_LIMIT)
		off = XFW_L4_OFF_LIMIT;
	l4 = data + off;

	xfw_read_ports4(p, l4, data_end, avail);
	switch (p->proto) {
	case IPPROTO_TCP:
		/* tcp_mt reads a whole 20-byte header or hotdrops. */
		if (avail < 20 || l4 + 20 > data_end) {
			p->sport = p->dport = XFW_V_TRUNC;
			p->tcpflags = XFW_FLAGS_TRUNC;
			return;
		}
		p->sport = bpf_ntohs(*(__u16 *)l4);
		p->dport = bpf_ntohs(*(__u16 *)(l4 + 2));
		p->tcpflags = *(__u8 *)(l4 + 13);
		return;
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		if (avail < 8 || l4 + 8 > data_end) {
			p->sport = p->dport = XFW_V_TRUNC;
			return;
		}
		p->sport = bpf_ntohs(*(__u16 *)l4);
		p->dport = bpf_ntohs(*(__u16 *)(l4 + 2));
		return;
	case IPPROTO_SCTP:
	case IPPROTO_DCCP:
		/* multiport reads the first four bytes of these. */
		if (avail < 4 || l4 + 4 > data_end) {
			p->sport = p->dport = XFW_V_TRUNC;
			return;
		}
		p->sport = bpf_ntohs(*(__u16 *)l4);
		p->dport = bpf_ntohs(*(__u16 *)(l4 + 2));
		return;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		/* icmp_match / icmp6_match read an 8-byte header or hotdrop. */
		if (avail < 8 || l4 + 8 > data_end) {
			p->icmp = XFW_V_TRUNC;
			return;
		}
		p->icmp = ((__u32)(*(__u8 *)l4) << 8) | *(__u8 *)(l4 + 1);
		return;
	}
}

/* IPv4 options (linux/ip.h IPOPT_*). */
#define XFW_IPOPT_END 0
#define XFW_IPOPT_NOOP 1
#define XFW_IPOPT_RR 7
#define XFW_IPOPT_TS 68
#define XFW_IPOPT_LSRR 131
#define XFW_IPOPT_CIPSO 134
#define XFW_IPOPT_SSRR 137
#define XFW_IPOPT_RA 148
/* Timestamp option flags (the low nibble of its fourth byte). */
#define XFW_IPOPT_TS_TSANDADDR 1
#define XFW_IPOPT_TS_PRESPEC 3
/* The most option bytes an IPv4 header holds. */
#define XFW_IPOPT_MAX 40

/* IPv4 options being checked (xfw_ipv4_opts_ok in xfw.c): a copy of the
 * option bytes, and the walk's state, for one bpf_loop() step per option
 * (a plain loop over packet bytes is too much for the verifier). */
struct xfw_opts {
	__u8 b[64];   /* XFW_IPOPT_MAX bytes used; a power of two to mask */
	__u32 len;    /* option bytes */
	__u32 off;    /* next option */
	__u32 seen;   /* XFW_OPTS_* */
	__u32 bad;    /* the stack drops the packet */
	__u32 rr;     /* 1 + the record route option's offset, or 0 */
	__u32 ts;     /* 1 + the timestamp option's offset, or 0 */
	__u32 srr_ok; /* in: accept_source_route is on for the device */
	__u32 srr;    /* out: XFW_SRR_* of an accepted source route */
};
#define XFW_OPTS_RR 1
#define XFW_OPTS_TS 2
#define XFW_OPTS_SRR 4
/* A source route option accepted (accept_source_route on), as
 * ip_options_rcv_srr goes on to judge it by the packet's route (route.h
 * xfw_route): present; strict (SSRR); with addresses left to visit (its
 * pointer within its length); its pointer leaving less than an address
 * (ICMP parameter problem, dropped). */
#define XFW_SRR_ON 2 /* bit 0 is xfw_ipv4_opts_ok's "kept" */
#define XFW_SRR_STRICT 4
#define XFW_SRR_LEFT 8
#define XFW_SRR_BADPTR 16

/* xfw_ipv4_opt_step checks the option at o->off as ip_options_compile does
 * for a received packet, noting where the record route and timestamp
 * options are (o->rr, o->ts: REJECT's echo of them, reject_opts.h, walks
 * no options of its own), and (at the end) that there is no source route
 * unless accept_source_route is on for the device (o->srr_ok: set for
 * "all" and the device, IN_DEV_SOURCE_ROUTE; an accepted one is noted in
 * o->srr for xfw_route). A CIPSO option is an error too: no CIPSO domain is configured and
 * cipso_v4_validate refuses it. Returns 1 to stop the walk. Found by the
 * differential test, internal/testkit/difftest. */
static long xfw_ipv4_opt_step(__u64 i, void *arg)
{
	struct xfw_opts *o = arg;
	__u32 off = o->off, left, len, ptr = 0;
	__u8 type, flags;

	if (off >= o->len || off >= XFW_IPOPT_MAX)
		goto end;
	type = o->b[off & 63];
	if (type == XFW_IPOPT_END)
		goto end; /* the rest is padding */
	if (type == XFW_IPOPT_NOOP) {
		o->off = off + 1;
		return 0;
	}
	left = o->len - off;
	if (left < 2)
		goto bad;
	len = o->b[(off + 1) & 63];
	if (len < 2 || len > left)
		goto bad;
	if (len >= 3)
		ptr = o->b[(off + 2) & 63];
	switch (type) {
	case XFW_IPOPT_LSRR:
	case XFW_IPOPT_SSRR:
		if (len < 3 || ptr < 4 || (o->seen & XFW_OPTS_SRR))
			goto bad;
		o->seen |= XFW_OPTS_SRR;
		o->srr = XFW_SRR_ON;
		if (type == XFW_IPOPT_SSRR)
			o->srr |= XFW_SRR_STRICT;
		if (ptr <= len)
			o->srr |= ptr + 3 > len ? XFW_SRR_BADPTR : XFW_SRR_LEFT;
		break;
	case XFW_IPOPT_RR:
		if ((o->seen & XFW_OPTS_RR) || len < 3 || ptr < 4)
			goto bad;
		if (ptr <= len && ptr + 3 > len)
			goto bad;
		o->seen |= XFW_OPTS_RR;
		o->rr = off + 1;
		break;
	case XFW_IPOPT_TS:
		if ((o->seen & XFW_OPTS_TS) || len < 4 || ptr < 5)
			goto bad;
		flags = o->b[(off + 3) & 63];
		if (ptr <= len) {
			if (ptr + 3 > len)
				goto bad;
			if (((flags & 0xf) == XFW_IPOPT_TS_TSANDADDR || (flags & 0xf) == XFW_IPOPT_TS_PRESPEC) &&
			    ptr + 7 > len)
				goto bad;
		} else if ((flags & 0xf) != XFW_IPOPT_TS_PRESPEC && (flags >> 4) == 15) {
			goto bad; /* the overflow counter is full */
		}
		o->seen |= XFW_OPTS_TS;
		o->ts = off + 1;
		break;
	case XFW_IPOPT_RA:
		if (len < 4)
			goto bad;
		break;
	case XFW_IPOPT_CIPSO:
		goto bad;
	}
	o->off = off + len;
	return 0;
end:
	if ((o->seen & XFW_OPTS_SRR) && !o->srr_ok)
		o->bad = 1;
	return 1;
bad:
	o->bad = 1;
	return 1;
}

/* The TCP options -m tcpmss walks (tcpopt.h): a copy kept in the hooks'
 * per-CPU scratch. */
#define XFW_TCPOPT_BUF 64    /* 40 option bytes; a power of two to mask */
struct xfw_tcpopt {
	__u8 b[XFW_TCPOPT_BUF];
};

/* IPv6 hop-by-hop options being checked (xfw_ipv6_hbh_ok in route.h): a
 * copy of the header and the walk's state, for one bpf_loop() step per
 * option. It lives in a per-CPU map (the bpf_loop context is a pointer to
 * it): on the stack the verifier knew the walk's offsets and counts
 * exactly and checked the step again for every value (~20,000
 * instructions). */
/* The longest hop-by-hop header: its length byte counts 8-byte units after
 * the first eight, (255 + 1) * 8; a power of two to mask offsets with. */
#define XFW_HBH_MAX 2048
struct xfw_tlv {
	__u8 b[XFW_HBH_MAX];
	__u32 end;    /* end of the options (the header's length) */
	__u32 off;    /* next option */
	__u32 pad;    /* padding bytes in a row */
	__u32 count;  /* options other than padding */
	__u32 bad;    /* the stack drops the packet */
};
/* Hop-by-hop options (linux/ipv6.h IPV6_TLV_*) and ip6_parse_tlv's limit of
 * options (net.ipv6.max_hbh_opts_number, default 8). */
#define XFW_TLV_PAD1 0
#define XFW_TLV_PADN 1
#define XFW_TLV_ROUTERALERT 5
#define XFW_TLV_CALIPSO 7
#define XFW_TLV_IOAM 49
#define XFW_TLV_JUMBO 194
#define XFW_TLV_MAX_COUNT 8
/* Padding in a row beyond this is an error (RFC 4942). */
#define XFW_TLV_MAX_PAD 7

/* xfw_ipv6_tlv_step checks the option at t->off as ip6_parse_tlv does for
 * a hop-by-hop header, with the default sysctls: router alert of length 2,
 * no jumbo option (ipv6_hop_jumbo wants more than 64 KiB after the header,
 * which no frame here holds), no CALIPSO (no
 * domain configured), IOAM ignored (ioam6_enabled off), unknown options by
 * their two high bits (00 skip, anything else drop). Returns 1 to stop.
 * Found by the differential test, internal/testkit/difftest. */
static long xfw_ipv6_tlv_step(__u64 i, void *arg)
{
	struct xfw_tlv *t = *(struct xfw_tlv **)arg;
	__u32 off, len, k;
	__u8 type;

	if (!t)
		return 1;
	off = t->off;
	if (off >= t->end || off >= XFW_HBH_MAX)
		return 1;
	type = t->b[off & (XFW_HBH_MAX - 1)];
	if (type == XFW_TLV_PAD1) {
		if (++t->pad > XFW_TLV_MAX_PAD)
			goto bad;
		t->off = off + 1;
		return 0;
	}
	if (t->end - off < 2)
		goto bad;
	len = t->b[(off + 1) & (XFW_HBH_MAX - 1)] + 2;
	if (len > t->end - off)
		goto bad;
	if (type == XFW_TLV_PADN) {
		t->pad += len;
		if (t->pad > XFW_TLV_MAX_PAD)
			goto bad;
		/* PadN holds zeros only; len <= 7 here. */
		for (k = 2; k < XFW_TLV_MAX_PAD; k++) {
			if (k < len && t->b[(off + k) & (XFW_HBH_MAX - 1)])
				goto bad;
		}
	} else {
		if (++t->count > XFW_TLV_MAX_COUNT)
			goto bad;
		switch (type) {
		case XFW_TLV_ROUTERALERT:
			if (len != 4)
				goto bad;
			break;
		case XFW_TLV_IOAM:
			break;
		case XFW_TLV_JUMBO:
		case XFW_TLV_CALIPSO:
			goto bad;
		default:
			if (type >> 6)
				goto bad;
		}
		t->pad = 0;
	}
	t->off = off + len;
	return 0;
bad:
	t->bad = 1;
	return 1;
}

static __always_inline int xfw_parse_ipv4(struct xfw_pkt *p, void *data, void *data_end,
					  void *l3, __u32 frame_len, int check_csum)
{
	struct iphdr *iph = l3;
	__u32 hlen, tot, fo;

	if ((void *)(iph + 1) > data_end)
		return XFW_PARSE_PASS;
	if (iph->version != 4 || iph->ihl < 5)
		return XFW_PARSE_PASS;
	hlen = iph->ihl * 4;
	tot = bpf_ntohs(iph->tot_len);
	/* ip_rcv_core: the frame must hold tot_len bytes, tot_len >= ihl*4. */
	if (tot < hlen || (__u32)(l3 - data) + tot > frame_len)
		return XFW_PARSE_PASS;
	if (check_csum && !xfw_ipv4_csum_ok(l3, hlen / 2, data_end))
		return XFW_PARSE_PASS;

	p->fam = 0;
	p->src_hi = 0;
	p->src_lo = bpf_ntohl(iph->saddr);
	p->dst_hi = 0;
	p->dst_lo = bpf_ntohl(iph->daddr);
	p->proto = iph->protocol;
	p->ttl = iph->ttl;
	p->tos = iph->tos;
	p->l3len = tot;
	p->lenm = tot;
	p->l4_end = (__u32)(l3 - data) + tot;
	p->df = !!(iph->frag_off & bpf_htons(0x4000));
	p->fragmented = !!(iph->frag_off & bpf_htons(0x3fff)) |
			 (iph->frag_off & bpf_htons(0x2000) ? XFW_FRAG_MORE : 0);
	fo = bpf_ntohs(iph->frag_off) & 0x1fff;
	if (fo) {
		p->frag = 1;
		/* tcp_mt hotdrops a TCP fragment at offset 8 ("evil TCP
		 * offset=1 frag"); modelled as a truncated header, whose
		 * flags ecn reads from the payload all the same (a merged
		 * entry's flags take every XFW_FLAGS_LATER value). */
		if (fo == 1 && p->proto == IPPROTO_TCP) {
			p->sport = p->dport = XFW_V_TRUNC;
			p->tcpflags = XFW_FLAGS_TRUNC;
		}
		xfw_parse_later4(p, l3 + hlen, (__u32)(l3 - data) + hlen, data_end);
		return XFW_PARSE_JUDGE;
	}
	if (hlen > 60)
		return XFW_PARSE_PASS;
	return xfw_parse_l4_at(p, data, l3 + hlen);
}

static __always_inline int xfw_ipv6_is_ext(__u8 nh)
{
	return nh == XFW_NH_HOP || nh == XFW_NH_ROUTING || nh == XFW_NH_FRAGMENT ||
	       nh == XFW_NH_AUTH || nh == XFW_NH_DEST;
}

/* How an IPv6 extension header walk ended (struct xfw_ext_walk's rc):
 * still walking (or out of steps), at a transport or "no next header",
 * malformed, or at a later fragment (judged without its transport). */
#define XFW_EXTW_WALKING 0
#define XFW_EXTW_DONE 1
#define XFW_EXTW_BAD 2
#define XFW_EXTW_LATER_FRAG 3

/* The extension header walk's bpf_loop context (on the parser's stack).
 * The walk's position is in p, a per-CPU map value the verifier knows
 * nothing of: p->l4_off is the next header's offset, p->proto its type.
 * Unrolled, the walk's eight steps were verified again for every path
 * and offset (~35,000 instructions per program); as a callback, once. */
struct xfw_ext_walk {
	void *ctx;
	struct xfw_pkt *p;
	__u32 rc;
};

/* xfw_ext_step reads the extension header at p->l4_off as
 * ipv6_find_hdr(target = -1) does: only each header's first two bytes
 * (next header, length), four for a fragment header and for a routing
 * header (struct ipv6_rt_hdr: found by the differential test,
 * internal/testkit/difftest), walking on by the stated length even past
 * the packet's end; data and data_end are the hook's window. */
static __always_inline long xfw_ext_step(struct xfw_ext_walk *w, void *data, void *data_end)
{
	struct xfw_pkt *p = w->p;
	__u32 off, nh, hl;
	__u8 *h;

	if (!p)
		goto bad;
	off = p->l4_off;
	nh = p->proto;
	if (!xfw_ipv6_is_ext(nh)) {
		w->rc = XFW_EXTW_DONE;
		return 1;
	}
	if (off > XFW_L4_OFF_LIMIT)
		goto bad; /* past any frame's end */
	h = data + off;
	if ((void *)(h + 2) > data_end || off + 2 > p->l4_end)
		goto bad;
	if (nh == XFW_NH_ROUTING && ((void *)(h + 4) > data_end || off + 4 > p->l4_end))
		goto bad;
	if (nh == XFW_NH_FRAGMENT) {
		__u16 fo;

		if ((void *)(h + 4) > data_end || off + 4 > p->l4_end)
			goto bad;
		fo = ((__u16)h[2] << 8 | h[3]) & 0xfff8;

		/* XFW_FRAG_MORE: "more fragments" set. */
		p->fragmented = 1 | (h[3] & 1 ? XFW_FRAG_MORE : 0);
		if (fo) {
			/* A later fragment: ipv6_find_hdr returns the fragment
			 * header's next header when it is a transport or "no
			 * next header"; when it is another extension header it
			 * fails with the fragment offset left at 0, and rules
			 * with -p hotdrop the packet (found by the differential
			 * test, internal/testkit/difftest). */
			if (xfw_ipv6_is_ext(h[0]))
				goto bad;
			p->proto = h[0];
			p->frag = 1;
			p->thoff = off + 8;
			if ((h[3] & 1) && ((fo + p->l4_end - p->thoff) & 7))
				p->fragmented |= XFW_FRAG_ALONE;
			w->rc = XFW_EXTW_LATER_FRAG;
			return 1;
		}
		hl = 8;
	} else if (nh == XFW_NH_AUTH) {
		hl = ((__u32)h[1] + 2) * 4;
	} else {
		hl = ((__u32)h[1] + 1) * 8;
	}
	p->proto = h[0];
	p->l4_off = off + hl;
	return 0;
bad:
	w->rc = XFW_EXTW_BAD;
	return 1;
}

/* xfw_ext_stop ends the walk as malformed. */
static __always_inline long xfw_ext_stop(struct xfw_ext_walk *w)
{
	w->rc = XFW_EXTW_BAD;
	return 1;
}

/* The step for each hook's context: the window read afresh from it. */
static long xfw_ext_step_xdp(__u32 i, struct xfw_ext_walk *w)
{
	struct xdp_md *ctx = w->ctx;

	return ctx ? xfw_ext_step(w, (void *)(long)ctx->data, (void *)(long)ctx->data_end) : xfw_ext_stop(w);
}

static long xfw_ext_step_tc(__u32 i, struct xfw_ext_walk *w)
{
	struct __sk_buff *ctx = w->ctx;

	return ctx ? xfw_ext_step(w, (void *)(long)ctx->data, (void *)(long)ctx->data_end) : xfw_ext_stop(w);
}

static __always_inline int xfw_parse_ipv6(struct xfw_pkt *p, void *ctx, int xdp, void *data,
					  void *data_end, void *l3, __u32 frame_len)
{
	struct ipv6hdr *ip6 = l3;
	__u32 plen;
	struct xfw_ext_walk walk;

	if ((void *)(ip6 + 1) > data_end)
		return XFW_PARSE_PASS;
	if (ip6->version != 6)
		return XFW_PARSE_PASS;
	plen = bpf_ntohs(ip6->payload_len);
	/* ip6_rcv_core drops a packet shorter than its payload length. */
	if ((__u32)(l3 - data) + sizeof(*ip6) + plen > frame_len)
		return XFW_PARSE_PASS;

	p->fam = 1;
	p->src_hi = xfw_be64(ip6->saddr.in6_u.u6_addr8);
	p->src_lo = xfw_be64(ip6->saddr.in6_u.u6_addr8 + 8);
	p->dst_hi = xfw_be64(ip6->daddr.in6_u.u6_addr8);
	p->dst_lo = xfw_be64(ip6->daddr.in6_u.u6_addr8 + 8);
	p->ttl = ip6->hop_limit;
	p->tos = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
	p->l3len = plen + sizeof(*ip6);
	/* A zero payload length with a hop-by-hop header next is not
	 * checked against the packet (ip6_rcv_core: a jumbogram, whose
	 * length a jumbo option gives): the packet is all the frame holds
	 * after the header, and the kernel filters it as such. A jumbo
	 * option in a frame of our sizes is an error the kernel drops for
	 * before any chain; its options are not read here. */
	if (plen == 0 && ip6->nexthdr == XFW_NH_HOP)
		p->l3len = frame_len - (__u32)(l3 - data);
	/* -m length compares the packet's length (length_mt6 reads skb->len
	 * since Linux 6.3, for BIG TCP; before, the payload length field
	 * plus 40, which made such a packet 40 bytes long): the frame's
	 * bytes after the link header here too (difftest ipv6 seed 37). */
	p->lenm = p->l3len;
	p->l4_end = (__u32)(l3 - data) + p->l3len;

	/* Walk the extension headers as ipv6_find_hdr(target = -1) does
	 * (xfw_ext_step), from the header after the fixed one. */
	p->proto = ip6->nexthdr;
	p->l4_off = (__u32)(l3 - data) + sizeof(*ip6);
	walk.ctx = ctx;
	walk.p = p;
	walk.rc = XFW_EXTW_DONE;
	/* Most packets have none: no loop for them. */
	if (xfw_ipv6_is_ext(p->proto)) {
		walk.rc = XFW_EXTW_WALKING;
		bpf_loop(XFW_MAX_EXTHDRS, xdp ? xfw_ext_step_xdp : xfw_ext_step_tc, &walk, 0);
	}
	if (walk.rc == XFW_EXTW_LATER_FRAG) {
		p->l4_off = 0;
		/* ecn's match_tcp reads a later fragment's flags at
		 * par->thoff, 0 (ipv6_find_hdr leaves it there): byte 13 of
		 * the IPv6 header, the source address's sixth. */
		if (p->proto == IPPROTO_TCP)
			p->tcpflags = XFW_FLAGS_LATER + (__u32)((p->src_hi >> 16) & 0xff);
		return XFW_PARSE_JUDGE;
	}
	/* Still an extension header after XFW_MAX_EXTHDRS: malformed. */
	if (walk.rc != XFW_EXTW_DONE || xfw_ipv6_is_ext(p->proto))
		goto bad;
	if (p->proto != XFW_NH_NONE) {
		p->thoff = p->l4_off;
		return XFW_PARSE_L4;
	}
	p->l4_off = 0;
	return XFW_PARSE_JUDGE;

bad:
	/* Rules with -p hotdrop it; their transport sets take the cut-short
	 * sentinels, so the packet carries them in every transport field. */
	p->l4_off = 0;
	p->proto = XFW_PROTO_ERR;
	p->sport = p->dport = XFW_V_TRUNC;
	p->tcpflags = XFW_FLAGS_TRUNC;
	p->icmp = XFW_V_TRUNC;
	return XFW_PARSE_JUDGE;
}

/* xfw_parse_init clears p and sets the fields whose absence is not 0. */
static __always_inline void xfw_parse_init(struct xfw_pkt *p)
{
	__builtin_memset(p, 0, sizeof(*p));
	p->sport = p->dport = XFW_V_NONE;
	p->tcpflags = XFW_FLAGS_NONE;
	p->icmp = XFW_V_NONE;
	p->tcpmss = XFW_V_NONE;
}

/* xfw_parse_pppoe returns the EtherType of the datagram in the PPPoE
 * session frame whose PPPoE header is at l2 (ETH_P_IP, ETH_P_IPV6), or 0
 * for another PPP protocol. As br_netfilter, it reads the PPP protocol
 * alone (not the PPPoE version, code or length). */
static __always_inline __u16 xfw_parse_pppoe(void *l2, void *data_end)
{
	__u16 *ppp = l2 + XFW_PPPOE_HLEN;

	if ((void *)(ppp + 1) > data_end)
		return 0;
	if (*ppp == bpf_htons(XFW_PPP_IP))
		return ETH_P_IP;
	if (*ppp == bpf_htons(XFW_PPP_IPV6))
		return ETH_P_IPV6;
	return 0;
}

/* xfw_parse parses the frame in [data, data_end) up to the transport
 * header (XFW_PARSE_L4: xfw_parse_frame reads it); ctx is the hook's
 * context (xdp 1: struct xdp_md, 0: struct __sk_buff) for the extension
 * header walk, frame_len is the whole frame's length (on TC egress only
 * the headers are linear). flags are XFW_PARSE_F_*: the IPv4 header
 * checksum is verified on ingress (XFW_PARSE_F_CSUM), not on egress. */
static __always_inline int xfw_parse(struct xfw_pkt *p, void *ctx, int xdp, void *data, void *data_end,
				     __u32 frame_len, int flags)
{
	int check_csum = flags & XFW_PARSE_F_CSUM;

	struct ethhdr *eth = data;
	void *l3;
	__u16 proto;

	xfw_parse_init(p);
	if ((void *)(eth + 1) > data_end)
		return XFW_PARSE_PASS;
	p->mac_src = xfw_mac48(eth->h_source);
	__builtin_memcpy(p->dst_mac, eth->h_dest, 6);
	p->dst_unicast = !(eth->h_dest[0] & 1);
	proto = bpf_ntohs(eth->h_proto);
	l3 = eth + 1;
	if (proto == XFW_ETH_P_8021Q || proto == XFW_ETH_P_8021AD) {
		__u16 *tag = l3;

		if ((void *)(tag + 2) > data_end)
			return XFW_PARSE_PASS;
		p->vlan = bpf_ntohs(tag[0]) & XFW_VLAN_ID_MASK;
		proto = bpf_ntohs(tag[1]);
		l3 += 4;
		/* Only one tag: a QinQ frame goes to the stack unjudged. */
		if (proto == XFW_ETH_P_8021Q || proto == XFW_ETH_P_8021AD)
			return XFW_PARSE_PASS;
	} else if (proto == XFW_ETH_P_PPP_SES && (flags & XFW_PARSE_F_PPPOE)) {
		proto = xfw_parse_pppoe(l3, data_end);
		p->vlan = XFW_VLAN_PPPOE;
		l3 += XFW_PPPOE_SES_HLEN;
	}
	p->l3_off = (__u32)(l3 - data);
	if (proto == ETH_P_IP)
		return xfw_parse_ipv4(p, data, data_end, l3, frame_len, check_csum);
	if (proto == ETH_P_IPV6)
		return xfw_parse_ipv6(p, ctx, xdp, data, data_end, l3, frame_len);
	return XFW_PARSE_PASS;
}

/* xfw_parse_noeth parses, as xfw_parse, a TC packet without a link header:
 * [data, data_end) starts with the network header, whose protocol
 * (skb->protocol, host order) is proto. The copy of a broadcast or
 * multicast packet the host delivers to itself (dev_loopback_xmit) comes
 * so: no MAC header (-m mac matches nothing), the IP header at offset 0. */
static __always_inline int xfw_parse_noeth(struct xfw_pkt *p, void *ctx, void *data, void *data_end,
					   __u32 frame_len, __u16 proto)
{
	xfw_parse_init(p);
	p->mac_src = XFW_MAC_NONE;
	if (proto == ETH_P_IP)
		return xfw_parse_ipv4(p, data, data_end, data, frame_len, 1);
	if (proto == ETH_P_IPV6)
		return xfw_parse_ipv6(p, ctx, 0, data, data_end, data, frame_len);
	return XFW_PARSE_PASS;
}

/* xfw_parse_frame parses the frame as xfw_parse does, then its transport
 * header. ctx is the hook's (xdp 1: struct xdp_md, 0: struct __sk_buff, whose
 * data and data_end fields are read afresh for the transport header, so
 * that every header path reaches it in one verifier state). */
#define xfw_parse_frame(ctx, xdp, p, frame_len, flags)                                   \
	({                                                                               \
		int rc_ = xfw_parse(p, ctx, xdp, (void *)(long)(ctx)->data,              \
				    (void *)(long)(ctx)->data_end, frame_len, flags);    \
		if (rc_ == XFW_PARSE_L4) {                                               \
			xfw_parse_l4(p, (void *)(long)(ctx)->data,                       \
				     (void *)(long)(ctx)->data_end);                     \
			rc_ = XFW_PARSE_JUDGE;                                           \
		}                                                                        \
		rc_;                                                                     \
	})

#endif /* XFW_PARSE_H */
