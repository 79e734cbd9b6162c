/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_plan.h — REJECT's first step: whether the kernel would answer a
 * packet at all, and with what (ICMP or ICMPv6 error, TCP RST), read into
 * struct xfw_rj before the frame is reshaped (xfw_rj_plan): the address
 * checks nf_send_unreach / nf_send_reset make, the ICMP codes of each
 * REJECT type, the RST's sequence numbers.
 *
 * Includes: common.h, parse.h, local.h, reject_structs.h.
 */
#ifndef XFW_REJECT_PLAN_H
#define XFW_REJECT_PLAN_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"
#include "reject_structs.h"

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

/* The MSS option a TCPMSS rule adds to a bare SYN (TCPOLEN_MSS; mangle.h
 * XFW_MG_OPTLEN). */
#define XFW_RJ_MSS_OPTLEN 4

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
		/* The kernel's unsigned arithmetic: skb->len - thoff - doff,
		 * of the packet as the rules before left it: a TCPMSS rule
		 * that gave a bare SYN an MSS option grew both (p->l3len
		 * counts the option, doff, read from the unchanged header,
		 * does not: found by xfw difftest, the conformance dump
		 * ipt-save-filter.txt with seed 4, the ack 4 too far). */
		payload = p->l3len - (l4 - l3) - doff;
		if (p->mangle & XFW_MG_GROWN)
			payload -= XFW_RJ_MSS_OPTLEN;
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

	/* A bridged PPPoE frame's datagram (bridge_reject.h): its caller
	 * makes the reply's L2 header an Ethernet one. */
	if (l3 != XFW_RJ_ETH_HLEN && l3 != XFW_RJ_VLAN_HLEN && l3 != XFW_RJ_PPPOE_L3)
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
		 * and nothing answers a multicast or broadcast destination:
		 * nf_send_reset and icmp_send refuse a packet whose route is
		 * a broadcast one (a subnet-directed broadcast, in a unicast
		 * frame too, or sent by the host itself; found by xfw
		 * difftest: a TCP segment to one got xfw's reset). */
		if (!xfw_rj_ip4_unicast(iph->saddr, lo) || !xfw_rj_ip4_unicast(iph->daddr, lo))
			return XFW_RJK_NONE;
		if (ingress ? p->dst_bcast : xfw_local_type(0, 0, p->dst_lo) == XFW_RTN_BROADCAST)
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

#endif /* XFW_REJECT_PLAN_H */
