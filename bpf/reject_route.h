/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_route.h — where a reply goes, as the kernel's routing would send
 * it: the FIB lookups (bpf_fib_lookup) for an ICMP error's source, for a
 * reply that leaves by another device than the offending packet's, and
 * for OUTPUT replies to another host (xfw_rj_tc_route, xfw_rj_tc_out);
 * whether a reply is for the host itself (the local table, local.h); the
 * TTL / hop limit its route gives it (xfw_rj_ttl4, xfw_rj_hop_limit6).
 *
 * Includes: common.h, local.h, xfw_maps.h (interface facts),
 * reject_structs.h, reject_rate.h (the namespace's sysctls).
 */
#ifndef XFW_REJECT_ROUTE_H
#define XFW_REJECT_ROUTE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "local.h"
#include "xfw_maps.h"
#include "reject_structs.h"
#include "reject_rate.h"

/* xfw_rj_ttl4 returns the TTL of an IPv4 reply: the namespace's
 * net.ipv4.ip_default_ttl, copied at sync (ip4_dst_hoplimit, which
 * nf_send_reset and icmp_send take, when the route has no hoplimit
 * metric: route metrics are not seen here, docs/differences.md). */
static __always_inline __u8 xfw_rj_ttl4(void)
{
	__u32 zero = 0;
	struct xfw_rl_cfg *c = bpf_map_lookup_elem(&xfw_rl_cfg, &zero);

	if (!c || !c->set || !c->ttl4 || c->ttl4 > 0xff)
		return XFW_RJ_TTL;
	return (__u8)c->ttl4;
}

/* xfw_rj_hop_limit6 returns the hop limit of an IPv6 reply leaving by the
 * device of key (xfw_ifinfo's: ifindex | VLAN id << 32): that device's
 * net.ipv6.conf.<device>.hop_limit, copied at sync (ip6_dst_hoplimit, which
 * nf_send_reset6 and icmp6_send take, when the route has no hoplimit
 * metric). A reply for the host itself leaves by lo (its local route's
 * device). */
static __always_inline __u8 xfw_rj_hop_limit6(__u64 key)
{
	struct xfw_ifinfo *ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);

	return ifi && ifi->hop_limit6 ? ifi->hop_limit6 : XFW_RJ_TTL;
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

/* xfw_rj_take_src sets r->saddr to the source the FIB lookup fib picked
 * (BPF_FIB_LOOKUP_SRC). */
static __always_inline void xfw_rj_take_src(struct xfw_rj *r, const struct bpf_fib_lookup *fib,
					    int v6)
{
	if (v6)
		__builtin_memcpy(r->saddr, fib->ipv6_src, 16);
	else
		r->saddr[0] = fib->ipv4_src;
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
	xfw_rj_take_src(r, fib, v6);
	return 0;
}

/* xfw_rj_local_route returns the local table's route covering the
 * address a (network byte order, IPv4 in a[0]), or NULL. */
static __always_inline struct xfw_local_val *xfw_rj_local_route(const __u32 *a, int v6)
{
	if (v6) {
		struct xfw_lpm6_key k = { .prefixlen = 128 };

		__builtin_memcpy(k.addr, a, 16);
		return bpf_map_lookup_elem(&xfw_local6, &k);
	} else {
		struct xfw_lpm4_key k = { .prefixlen = 32 };

		__builtin_memcpy(k.addr, a, 4);
		return bpf_map_lookup_elem(&xfw_local4, &k);
	}
}

/* xfw_rj_route_type returns the local table's route type of the address a
 * (network byte order, IPv4 in a[0]): XFW_RTN_LOCAL for the host's own
 * addresses, XFW_RTN_ANYCAST, …, or 0 when it has none. */
static __always_inline __u8 xfw_rj_route_type(const __u32 *a, int v6)
{
	return xfw_host_type(xfw_rj_local_route(a, v6));
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
 * the packet's destination, one of the host's addresses), through OUTPUT
 * and POSTROUTING with that route's device. XDP_TX would hand it back to
 * the stack on lo, whose route for the offending packet delivers it to
 * the host. Returns
 * the output device, or 0 (no route; a host that does not forward, whose
 * lo bpf_fib_lookup refuses: no reply, xfw_rj_xdp). The
 * reply is handed to lo's TCX ingress, which sends it out of that device
 * (reject_send.h xfw_rj_lo_out), resolving the neighbour. */
static __always_inline __u32 xfw_rj_lo_route(struct xdp_md *ctx, struct xfw_rj *r,
					     struct bpf_fib_lookup *fib, int v6)
{
	xfw_rj_fib_init(fib, r, ctx->ingress_ifindex, v6, 1, 0);
	if (bpf_fib_lookup(ctx, fib, sizeof(*fib), BPF_FIB_LOOKUP_SKIP_NEIGH) != BPF_FIB_LKUP_RET_SUCCESS)
		return 0;
	return fib->ifindex;
}

/* xfw_rj_l2_route addresses the reply to the neighbour the kernel's routing
 * picks for r->daddr (its icmp_send / nf_send_reset route and neighbour
 * entry) when that route leaves by the input interface: the offending
 * frame's source MAC may be another host's (found by xfw difftest). When
 * the route leaves elsewhere or the neighbour is unknown, the reply keeps
 * the swapped addresses (docs/differences.md). */
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

/* xfw_rj_tc_route finds the route of an OUTPUT reply whose destination is
 * not the host (a packet the host sent with another host's source
 * address): the kernel routes it as a locally generated packet (icmp_send,
 * nf_send_reset), and picks the source of an ICMP error by that route when
 * the offending packet's destination is not the host's (icmp_send's
 * RTCF_LOCAL test, icmp6_send's ipv6_chk_addr), else keeps that
 * destination. Handed to the local stack
 * instead, the reply would be forwarded and judged in FORWARD (found by
 * xfw difftest). The lookup is made as if the reply came in by the device
 * the offending packet was leaving by (the routing table as for
 * forwarding), else as leaving by it; from a device that does not
 * forward bpf_fib_lookup refuses both (the kernel checks forwarding
 * whatever the flags), and no reply is sent. Returns 0 with
 * the route in *fib (next hop in its destination fields) and, when the
 * neighbour is known, its addresses in r->l2; or -1: no route, no reply,
 * as in the kernel. */
static __always_inline int xfw_rj_tc_route(struct __sk_buff *skb, struct xfw_rj *r,
					   struct bpf_fib_lookup *fib, int v6, int icmp)
{
	__u32 flags = 0;
	int pick;
	long rc;

	/* An error about a packet to the host itself (one it sent with
	 * another host's source to one of its own addresses) keeps that
	 * destination as its source: icmp_send's RTCF_LOCAL test,
	 * icmp6_send's ipv6_chk_addr / ipv6_chk_acast_addr_src (found by
	 * xfw difftest, conntrack seed 212: IPv6, fw's own address and its
	 * subnet-router anycast address). r->saddr holds that destination. */
	pick = icmp && !xfw_rj_for_host(r->saddr, v6);
	if (pick)
		flags |= BPF_FIB_LOOKUP_SRC;
	xfw_rj_fib_init(fib, r, skb->ifindex, v6, !pick,
			icmp ? (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP) : IPPROTO_TCP);
	rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags);
	if (rc == BPF_FIB_LKUP_RET_FWD_DISABLED)
		rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags | BPF_FIB_LOOKUP_OUTPUT);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return -1;
	if (pick)
		xfw_rj_take_src(r, fib, v6);
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

#endif /* XFW_REJECT_ROUTE_H */
