/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_put.h — REJECT's last step: writing the reply's headers over the
 * reshaped frame [data, data_end): the L2 header, the IPv4 or IPv6 header,
 * then the TCP RST (xfw_rj_put_rst) or the ICMP / ICMPv6 error header in
 * front of its quote (xfw_rj_put_icmp), every checksum computed from
 * scratch. The TTL / hop limit is r->ttl, chosen by the caller for the
 * device the reply leaves by (reject_route.h).
 *
 * Includes: common.h, parse.h, reject_structs.h, reject_csum.h.
 */
#ifndef XFW_REJECT_PUT_H
#define XFW_REJECT_PUT_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "reject_structs.h"
#include "reject_csum.h"

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
					   __u16 frag, __u8 ttl, __u8 proto, __u32 saddr,
					   __u32 daddr)
{
	__u16 *w = (__u16 *)iph;
	__u64 sum = 0;

	*(__u8 *)iph = XFW_RJ_IP_VER_IHL5;
	iph->tos = tos;
	iph->tot_len = bpf_htons(tot);
	iph->id = id;
	iph->frag_off = bpf_htons(frag);
	iph->ttl = ttl;
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
					   __u8 nexthdr, __u8 hop_limit, const __u32 *saddr,
					   const __u32 *daddr)
{
	*(__u32 *)ip6 = bpf_htonl((__u32)XFW_RJ_IP6_VERSION << 28 |
				  (flowlabel & XFW_RJ_FLOWLABEL_MASK));
	ip6->payload_len = bpf_htons(plen);
	ip6->nexthdr = nexthdr;
	ip6->hop_limit = hop_limit;
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
		xfw_rj_put_ip6((void *)ip, 0, XFW_RJ_TCP_HLEN, IPPROTO_TCP, r->ttl, r->saddr,
			       r->daddr);
		sum = xfw_rj_sum_words(r->saddr, 4) + xfw_rj_sum_words(r->daddr, 4);
	} else {
		/* nf_reject_iphdr_put: TOS 0, ID 0, DF. */
		xfw_rj_put_ip4((void *)ip, 0, XFW_RJ_IP4_HLEN + XFW_RJ_TCP_HLEN, 0, XFW_RJ_IP_DF,
			       r->ttl, IPPROTO_TCP, r->saddr[0], r->daddr[0]);
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
 * opts: an IPv4 header leaves room for r->optlen bytes of
 * options, its IHL and checksum still those of a 20-byte header.
 * Returns the offset and length of the span to checksum (ICMP header and
 * quote) through *off and *len, with *sum the pseudo-header sum (IPv6). */
static __always_inline int xfw_rj_put_icmp(void *data, void *data_end, struct xfw_rj *r, int v6,
					   int opts, __u32 *off, __u32 *len, __u64 *sum)
{
	__u32 iphl = v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN, qlen = r->qlen;
	__u64 l3 = xfw_rj_l3(r);
	__u8 *ip, *ih, *q;

	if (qlen > XFW_RJ_QUOTE6_MAX || qlen < XFW_RJ_IP4_HLEN)
		return -1;
	/* IPv4 with opts: room for the echoed options after the header,
	 * written by xfw_rj_opts4_put (reject_opts.h). */
	if (!v6 && opts) {
		if (r->optlen > XFW_RJ_OPT_MAX)
			return -1;
		iphl += r->optlen & XFW_RJ_OPT_MASK;
	}
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
	/* The same for the header's fixed part (ih's offset varies). */
	if ((void *)(ip + (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_ICMP_HLEN +
		     XFW_RJ_IP4_HLEN) > data_end)
		return -1;
	if (v6) {
		xfw_rj_put_ip6((void *)ip, xfw_rj_flowlabel(r), XFW_RJ_ICMP_HLEN + qlen,
			       IPPROTO_ICMPV6, r->ttl, r->saddr, r->daddr);
		/* ip6_forward decremented the hop limit before FORWARD. */
		if (r->fwd)
			q[7] -= 1;
		*sum = xfw_rj_sum_words(r->saddr, 4) + xfw_rj_sum_words(r->daddr, 4) +
		       bpf_htonl(XFW_RJ_ICMP_HLEN + qlen) + bpf_htonl(IPPROTO_ICMPV6);
	} else {
		/* icmp_send: a fresh ID (ip_select_ident), no DF (the ICMP
		 * socket's pmtudisc is IP_PMTUDISC_DONT). */
		xfw_rj_put_ip4((void *)ip, r->tos, iphl + XFW_RJ_ICMP_HLEN + qlen,
			       (__u16)bpf_get_prandom_u32(), 0, r->ttl, IPPROTO_ICMP,
			       r->saddr[0], r->daddr[0]);
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

#endif /* XFW_REJECT_PUT_H */
