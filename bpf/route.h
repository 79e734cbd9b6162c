/* SPDX-License-Identifier: GPL-2.0 */
/*
 * route.h — chain selection on ingress (the XDP hook): INPUT or FORWARD,
 * as the kernel's routing decides (bpf_fib_lookup, the local table), and
 * the checks the kernel makes before any chain, whose packets netfilter
 * never sees and xfw passes unjudged: martian addresses (ip6_rcv_core,
 * ip_route_input_slow), IPv4 options and IPv6 hop-by-hop options the stack
 * refuses, packets ip_forward / ip6_forward drop before the FORWARD hook.
 *
 * Conventions: xfw_route, xfw_ipv4_opts_ok and xfw_ipv6_hbh_ok are global
 * functions with their own stacks (the FIB request, the options' copy),
 * not live while classification runs. The input device's accept_local,
 * route_localnet (p->in_sys) and accept_source_route (the XDP hook's
 * st->srr) and rp_filter with src_valid_mark (st->rpf, xfw_rpf) are
 * followed as the control plane mirrored them at the last sync
 * (docs/differences.md).
 *
 * Includes: common.h, parse.h (struct xfw_pkt, the option walks), local.h,
 * mark_route.h (the route lookup with the packet's mark), route_cache.h
 * (IPv4 lookups answered from a per-CPU cache), mcast.h (the groups the
 * devices joined).
 */
#ifndef XFW_ROUTE_H
#define XFW_ROUTE_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"
#include "bench.h"
#include "mark_route.h"
#include "route_cache.h"
#include "mcast.h"

/* xfw_src_local is xfw_src_is_ours before accept_local: the cached part
 * (the route cache outlives a change of the sysctl). */
static __always_inline int xfw_src_local(struct xfw_pkt *p)
{
	return p->fam == 0 && xfw_local_type(0, 0, p->src_lo) == XFW_RTN_LOCAL;
}

/* xfw_src_is_ours reports whether an IPv4 source is one of this host's
 * addresses and the input device refuses it: fib_validate_source calls
 * such a packet from outside a martian unless accept_local is on for "all"
 * or the device (IN_DEV_ACCEPT_LOCAL), in both the local and the
 * forwarding path. */
static __always_inline int xfw_src_is_ours(struct xfw_pkt *p)
{
	return !(p->in_sys & XFW_INSYS_ACCEPT_LOCAL) && xfw_src_local(p);
}

/* IPv4 address classes (host order), as ip_route_input_slow tests them. */
#define XFW_V4_MULTICAST(a) (((a) & 0xf0000000) == 0xe0000000)
#define XFW_V4_LOCAL_MC(a) (((a) & 0xffffff00) == 0xe0000000) /* 224.0.0.0/24 */
#define XFW_V4_LBCAST(a) ((a) == 0xffffffff)
/* ipv4_is_zeronet: 0.0.0.0 only since Linux 5.3 (0.0.0.0/8 is usable
 * unicast; found by the differential test, internal/testkit/difftest). */
#define XFW_V4_ZERONET(a) ((a) == 0)
#define XFW_V4_LOOPBACK(a) (((a) & 0xff000000) == 0x7f000000)

/* IPv6 address classes of the high half, as ip6_rcv_core and ip6_forward
 * test them. */
#define XFW_V6_MULTICAST(hi) (((hi) >> 56) == 0xff)
#define XFW_V6_MC_SCOPE(hi) (((hi) >> 48) & 0xf)
#define XFW_V6_LINKLOCAL(hi) (((hi) >> 54) == (0xfe80ULL >> 6))

/* xfw_v6_loopback reports whether (hi, lo) is ::1. */
static __always_inline int xfw_v6_loopback(__u64 hi, __u64 lo)
{
	return hi == 0 && lo == 1;
}

/* xfw_martian applies, to a packet received on another device than
 * loopback, the checks the kernel makes before any chain: ip6_rcv_core
 * (IPv6) and ip_route_input_slow with ip_route_input_mc (IPv4), with the
 * input device's route_localnet and accept_local (p->in_sys; 127.0.0.0/8
 * is a martian unless route_localnet is on for "all" or the device,
 * IN_DEV_NET_ROUTE_LOCALNET). It returns 1 when
 * the kernel drops the packet there, 2 for IPv4's limited broadcast (local
 * delivery without a route lookup), 0 otherwise. Whether the device
 * joined a multicast destination is xfw_route's (mcast.h). */
static __always_inline int xfw_martian(struct xfw_pkt *p)
{
	if (p->fam == 0) {
		__u32 s = (__u32)p->src_lo, d = (__u32)p->dst_lo;

		if (XFW_V4_MULTICAST(s) || XFW_V4_LBCAST(s))
			return 1;
		if (XFW_V4_LBCAST(d) || (s == 0 && d == 0))
			return s != 0 && xfw_src_is_ours(p) ? 1 : 2;
		if (XFW_V4_MULTICAST(d)) {
			/* ip_mc_validate_source */
			if (XFW_V4_LOOPBACK(s) && !(p->in_sys & XFW_INSYS_ROUTE_LOCALNET))
				return 1;
			if (XFW_V4_ZERONET(s))
				return !XFW_V4_LOCAL_MC(d) && p->proto != IPPROTO_IGMP;
			return xfw_src_is_ours(p);
		}
		if (XFW_V4_ZERONET(s) || XFW_V4_ZERONET(d))
			return 1;
		if (XFW_V4_LOOPBACK(d) || XFW_V4_LOOPBACK(s))
			return !(p->in_sys & XFW_INSYS_ROUTE_LOCALNET);
		return 0;
	}
	if (XFW_V6_MULTICAST(p->src_hi))
		return 1;
	if (xfw_v6_loopback(p->src_hi, p->src_lo) || xfw_v6_loopback(p->dst_hi, p->dst_lo))
		return 1;
	/* Multicast scopes 0 (reserved) and 1 (interface-local). */
	if (XFW_V6_MULTICAST(p->dst_hi) && XFW_V6_MC_SCOPE(p->dst_hi) <= 1)
		return 1;
	return 0;
}

/* xfw_src_is_ours_cached is xfw_src_is_ours, kept in the route cache's
 * entry rt for p's addresses (NULL: none). */
static __always_inline int xfw_src_is_ours_cached(struct xfw_pkt *p, struct xfw_rtc_ent *rt)
{
	if (!rt || (p->in_sys & XFW_INSYS_ACCEPT_LOCAL))
		return xfw_src_is_ours(p);
	if (!rt->src_ours)
		rt->src_ours = 1 + xfw_src_local(p);
	return rt->src_ours - 1;
}

/* xfw_dst_type_cached is xfw_local_type of p's destination, kept in rt
 * as xfw_src_is_ours_cached. */
static __always_inline __u8 xfw_dst_type_cached(struct xfw_pkt *p, struct xfw_rtc_ent *rt)
{
	if (!rt)
		return xfw_local_type(p->fam, p->dst_hi, p->dst_lo);
	if (!rt->dst_type)
		rt->dst_type = 1 + xfw_local_type(p->fam, p->dst_hi, p->dst_lo);
	return rt->dst_type - 1;
}

/* xfw_forward_dropped reports whether ip_forward / ip6_forward drop a
 * packet routed on before the FORWARD hook (besides TTL, MTU and the route
 * itself): a frame not addressed to this host's MAC (PACKET_BROADCAST,
 * PACKET_MULTICAST), an IPv4 source of this host (martian), an IPv6 source
 * that is unspecified, multicast, loopback or link-local. */
static __always_inline int xfw_forward_dropped(struct xfw_pkt *p, struct xfw_rtc_ent *rt)
{
	if (!p->dst_unicast)
		return 1;
	if (p->fam == 0)
		return xfw_src_is_ours_cached(p, rt);
	if (p->src_hi == 0 && p->src_lo == 0)
		return 1;
	return XFW_V6_LINKLOCAL(p->src_hi);
}

/* Where the traffic class sits in the first word of the IPv6 header. */
#define XFW_IPV6_TCLASS_SHIFT 20

/* xfw_fib_flow fills route lookup fib with p's flow: family, protocol,
 * ports, TOS, addresses (the caller sets the device and the length). */
static __always_inline void xfw_fib_flow(struct bpf_fib_lookup *fib, struct xfw_pkt *p)
{
	fib->l4_protocol = p->proto < 256 ? p->proto : 0;
	if (p->sport < 65536) {
		fib->sport = bpf_htons(p->sport);
		fib->dport = bpf_htons(p->dport);
	}
	if (p->fam == 0) {
		fib->family = AF_INET;
		fib->tos = p->tos;
		fib->ipv4_src = bpf_htonl((__u32)p->src_lo);
		fib->ipv4_dst = bpf_htonl((__u32)p->dst_lo);
		return;
	}
	fib->family = AF_INET6;
	/* The traffic class, as the kernel's flow (ip6_flowinfo) gives it to
	 * routing rules (ip -6 rule tos); the flow label is not kept. */
	fib->flowinfo = bpf_htonl((__u32)p->tos << XFW_IPV6_TCLASS_SHIFT);
	fib->ipv6_src[0] = bpf_htonl(p->src_hi >> 32);
	fib->ipv6_src[1] = bpf_htonl((__u32)p->src_hi);
	fib->ipv6_src[2] = bpf_htonl(p->src_lo >> 32);
	fib->ipv6_src[3] = bpf_htonl((__u32)p->src_lo);
	fib->ipv6_dst[0] = bpf_htonl(p->dst_hi >> 32);
	fib->ipv6_dst[1] = bpf_htonl((__u32)p->dst_hi);
	fib->ipv6_dst[2] = bpf_htonl(p->dst_lo >> 32);
	fib->ipv6_dst[3] = bpf_htonl((__u32)p->dst_lo);
}

/* xfw_out_hop is the route xfw_out_lookup found: device and next hop. */
struct xfw_out_hop {
	__u32 ifindex;
	__u32 nh[4];
};

/* xfw_out_lookup routes the host's packet p with mark (0: none) as the
 * kernel's output route lookup does (from loopback) into hop: the device
 * and next hop. Returns bpf_fib_lookup's answer (negative for a mark on a
 * kernel before 6.10, which refuses BPF_FIB_LOOKUP_MARK). */
static __always_inline int xfw_out_lookup(struct __sk_buff *skb, struct xfw_pkt *p, __u32 mark,
					       struct xfw_out_hop *hop)
{
	struct bpf_fib_lookup fib = {};
	__u32 flags = BPF_FIB_LOOKUP_SKIP_NEIGH;
	int rc;

	fib.ifindex = XFW_LOOPBACK_IFINDEX;
	xfw_fib_flow(&fib, p);
	if (mark)
		flags |= xfw_fib_mark(&fib, mark);
	rc = bpf_fib_lookup(skb, &fib, sizeof(fib), flags);
	hop->ifindex = fib.ifindex;
	__builtin_memcpy(hop->nh, fib.ipv6_dst, sizeof(hop->nh)); /* ipv4_dst is its first word */
	return rc;
}

/* xfw_route's answer for a packet it passes unjudged. */
#define XFW_ROUTE_PASS (~0ULL)

/* xfw_srr_route applies ip_options_rcv_srr to a packet whose source route
 * option the input device's accept_source_route let through (srr:
 * XFW_SRR_*, 0 for none), routed as route (chain << 32 | oif) to a
 * destination of local-table type type (0: forwarded). The kernel drops
 * it unless addressed to this host's MAC (PACKET_HOST) and routed on
 * loosely (a strict route that is not at its end: ICMP parameter problem,
 * which the stack sends itself), or local (RTN_LOCAL) with no address
 * left; a local one with addresses left the kernel routes on to the next
 * (rewriting its destination after FORWARD), which xfw does not follow: it
 * is dropped after PREROUTING (p->pre_drop), failing closed. */
static __always_inline __u64 xfw_srr_route(struct xfw_pkt *p, __u32 srr, __u64 route, __u8 type)
{
	if (!srr)
		return route;
	if (!p->dst_unicast)
		return XFW_ROUTE_PASS;
	if (!type)
		return (srr & XFW_SRR_STRICT) ? XFW_ROUTE_PASS : route;
	if (type != XFW_RTN_LOCAL || (srr & XFW_SRR_BADPTR))
		return XFW_ROUTE_PASS;
	if (srr & XFW_SRR_LEFT) {
		p->pre_drop = 1;
		return XFW_ROUTE_PASS;
	}
	return route;
}

/* xfw_rpf applies the reverse-path check of fib_validate_source
 * (__fib_validate_source) to IPv4 packet p received on device iif (ifs's
 * low half) and routed to dst (host order; 0 for a broadcast or
 * multicast destination, as brd_input and ip_mc_validate_source ask),
 * with the input device's rp_filter (rpf: XFW_RPF_*). The kernel looks the
 * source up as a destination, from dst, as if received on the route's
 * output device (ifs's high half) for a forwarded packet and on loopback
 * otherwise, with the packet's mark under src_valid_mark and the ports
 * swapped; a UNICAST answer by iif passes, by another device only in loose
 * mode (a multipath route gives one nexthop, where the kernel accepts any
 * of them: fib_info_nh_uses_dev); a LOCAL answer (a source of this host's
 * own) passes with accept_local; anything else (no route, unreachable,
 * prohibit, blackhole, broadcast) fails. Returns 1 when the check passes,
 * 0 when the kernel drops the packet, -1 when it cannot tell: the lookup
 * was refused (forwarding off for the device asked from) or the answer
 * was a LOCAL route in strict mode (its device is not told). A global
 * function; the request is in the XDP scratch sc (the call chain below
 * xfw_route has no stack for it) and goes through its route cache
 * (route_cache.h). */
__attribute__((noinline)) int xfw_rpf(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_xdp_scratch *sc,
				      __u64 ifs, __u32 dst)
{
	struct bpf_fib_lookup *fib;
	struct xfw_rtc_ent *rt = 0;
	__u32 flags = BPF_FIB_LOOKUP_SKIP_NEIGH, mark = 0, rpf;
	int rc;

	if (!ctx || !p || !sc)
		return -1;
	fib = &sc->rpf_fib;
	__builtin_memset(fib, 0, sizeof(*fib));
	rpf = sc->st.rpf;
	fib->family = AF_INET;
	fib->tos = p->tos;
	fib->l4_protocol = p->proto < 256 ? p->proto : 0;
	if (p->sport < 65536) {
		fib->sport = bpf_htons(p->dport);
		fib->dport = bpf_htons(p->sport);
	}
	fib->ipv4_src = bpf_htonl(dst);
	fib->ipv4_dst = bpf_htonl((__u32)p->src_lo);
	fib->ifindex = ifs >> 32;
	if ((rpf & XFW_RPF_VMARK) && p->mark) {
		mark = p->mark;
		flags |= xfw_fib_mark(fib, mark);
	}
	rc = xfw_fib_lookup_cached(ctx, fib, flags, 0, mark, sc->rtc, &rt);
	switch (rc) {
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return fib->ifindex == (__u32)ifs || !(rpf & XFW_RPF_STRICT);
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		/* No route, or not a unicast one: only a LOCAL one (the
		 * local table, looked up first) may pass. */
		if (!(p->in_sys & XFW_INSYS_ACCEPT_LOCAL) || !xfw_src_local(p))
			return 0;
		return (rpf & XFW_RPF_STRICT) ? -1 : 1;
	case BPF_FIB_LKUP_RET_BLACKHOLE:
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
		return 0;
	}
	return -1;
}

/* xfw_rpf_refused applies xfw_rpf to p, received on iif (not loopback,
 * whose packets the kernel does not check) and routed by device lkif (0:
 * not forwarded, asked from loopback) to dst, when the input device's
 * rp_filter is on (sc->st.rpf). It returns 1 when the kernel drops the
 * packet after PREROUTING (p->pre_drop set), else 0; a check it could not
 * make sets XFW_RPF_UNSURE (the fast path is then not taken, the stack
 * checks the packet itself). IPv6 has no rp_filter. A source of 0.0.0.0
 * is not checked (brd_input, ip_mc_validate_source). */
static __always_inline int xfw_rpf_refused(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_xdp_scratch *sc,
					   __u32 iif, __u32 lkif, __u32 dst)
{
	int ok;

	if (!sc || !(sc->st.rpf & (XFW_RPF_STRICT | XFW_RPF_LOOSE)) || p->fam != 0 ||
	    iif == XFW_LOOPBACK_IFINDEX || (__u32)p->src_lo == 0)
		return 0;
	ok = xfw_rpf(ctx, p, sc, (__u64)(lkif ? lkif : XFW_LOOPBACK_IFINDEX) << 32 | iif, dst);
	if (ok < 0) {
		sc->st.rpf |= XFW_RPF_UNSURE;
		return 0;
	}
	if (ok)
		return 0;
	p->pre_drop = 1;
	return 1;
}

/* xfw_route decides INPUT or FORWARD for a packet received on iif, as the
 * kernel's routing would with the packet's mark (p->mark). Returns XFW_ROUTE_PASS to pass the packet
 * unjudged (netfilter never sees it: martians, no route, dropped before
 * the FORWARD hook, a source route ip_options_rcv_srr refuses; multicast
 * to a group iif has not joined and a source route xfw does not follow
 * set p->pre_drop: the hook drops them after PREROUTING), else chain << 32 |
 * output ifindex. A global function, so its stack (the FIB request) is
 * not live while classification runs. */
__attribute__((noinline)) __u64 xfw_route(struct xdp_md *ctx, struct xfw_pkt *p, __u32 iif)
{
	struct bpf_fib_lookup fib = {};
	struct xfw_xdp_scratch *sc;
	struct xfw_rtc_ent *rt = 0;
	int rc, lo = iif == XFW_LOOPBACK_IFINDEX;
	__u32 flags, hook = XFW_SCRATCH_XDP, srr;
	__u8 type;

	if (!p)
		return XFW_ROUTE_PASS;
	p->pre_drop = 0;
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &hook);
	if (sc)
		sc->st.rpf &= XFW_RPF_IN_MASK; /* routed afresh */
	/* An accepted source route (XFW_SRR_*): judged with the route. A
	 * broadcast or multicast route is no local one (xfw_srr_route). */
	srr = sc && !lo ? sc->st.srr : 0;

	/* Loopback traffic was routed when it was sent; the kernel checks no
	 * martians on it. */
	if (!lo) {
		switch (xfw_martian(p)) {
		case 1:
			return XFW_ROUTE_PASS;
		case 2:
			if (srr || xfw_rpf_refused(ctx, p, sc, iif, 0, 0))
				return XFW_ROUTE_PASS;
			return (__u64)XFW_CHAIN_INPUT << 32;
		}
	}
	fib.ifindex = iif;
	xfw_fib_flow(&fib, p);
	if (p->fam == 0) {
		/* ip_forward answers "fragmentation needed" before the FORWARD
		 * hook only for DF packets; others are fragmented after it. */
		if (p->df)
			fib.tot_len = p->l3len;
		/* Multicast is delivered by ip_route_input_mc, without a route
		 * lookup, when the device joined the group (ip_check_mc_rcu);
		 * the rest is dropped. */
		if (XFW_V4_MULTICAST((__u32)p->dst_lo)) {
			if (lo || xfw_mc_joined(p, iif)) {
				if (srr || xfw_rpf_refused(ctx, p, sc, iif, 0, 0))
					return XFW_ROUTE_PASS;
				return (__u64)XFW_CHAIN_INPUT << 32;
			}
			p->pre_drop = 1;
			return XFW_ROUTE_PASS;
		}
	} else {
		fib.tot_len = p->l3len;
	}
	/* The neighbour entry does not matter (SUCCESS and NO_NEIGH are
	 * both forwarded): skip its lookup. A kernel before 6.5 refuses the
	 * flag (a negative result): ask it again without. The mark a
	 * PREROUTING rule gave the packet picks the route as in the kernel
	 * (ip rule fwmark; mark_route.h): Linux 6.10, older kernels refuse
	 * it too and route the packet unmarked (docs/install.md). */
	flags = BPF_FIB_LOOKUP_SKIP_NEIGH;
	if (p->mark)
		flags |= xfw_fib_mark(&fib, p->mark);
	rc = xfw_fib_lookup_cached(ctx, &fib, flags, p->fam, p->mark, sc ? sc->rtc : 0, &rt);
	XFW_BENCH_AT(XFW_BS_FIB, 0);
	/* An IPv6 link-local destination: the kernel's input route lookup is
	 * strict to the interface the packet came in on (rt6_need_strict),
	 * bpf_fib_lookup's is not. Unless it is this host's own address, a
	 * destination in fe80::/64 (the route every IPv6 interface has) is
	 * forwarded back out of that interface, and ip6_forward skips its
	 * source checks for such a hairpin; the rest of fe80::/10 has no route
	 * (found by the differential test, internal/testkit/difftest). */
	if (p->fam == 1 && !lo && XFW_V6_LINKLOCAL(p->dst_hi) && rc != BPF_FIB_LKUP_RET_FWD_DISABLED) {
		if (p->dst_hi != 0xfe80000000000000ULL)
			return xfw_local_type(p->fam, p->dst_hi, p->dst_lo) ?
				(__u64)XFW_CHAIN_INPUT << 32 : XFW_ROUTE_PASS;
		if (xfw_local_type(p->fam, p->dst_hi, p->dst_lo))
			return (__u64)XFW_CHAIN_INPUT << 32;
		if (p->ttl <= 1 || !p->dst_unicast)
			return XFW_ROUTE_PASS;
		return (__u64)XFW_CHAIN_FORWARD << 32 | iif;
	}
	switch (rc) {
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		/* Not forwarded: for this host (a local, broadcast, anycast or
		 * multicast route of the local table) or for nobody (no route:
		 * the kernel answers "unreachable" without a chain). With
		 * forwarding off, bpf_fib_lookup does not look at all. */
		if (lo)
			return (__u64)XFW_CHAIN_INPUT << 32;
		type = xfw_dst_type_cached(p, rt);
		if (!type)
			return XFW_ROUTE_PASS;
		p->dst_bcast = type == XFW_RTN_BROADCAST;
		if ((type == XFW_RTN_LOCAL || type == XFW_RTN_BROADCAST) && xfw_src_is_ours_cached(p, rt))
			return XFW_ROUTE_PASS;
		/* ip6_mc_input: delivered when the device joined the group. */
		if (type == XFW_RTN_MULTICAST && !xfw_mc_joined(p, iif)) {
			p->pre_drop = 1;
			return XFW_ROUTE_PASS;
		}
		/* fib_validate_source from the destination; a broadcast's
		 * from 0 (brd_input). */
		if (xfw_rpf_refused(ctx, p, sc, iif, 0, type == XFW_RTN_LOCAL ? (__u32)p->dst_lo : 0))
			return XFW_ROUTE_PASS;
		return xfw_srr_route(p, srr, (__u64)XFW_CHAIN_INPUT << 32, type);
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		/* ip_forward / ip6_forward send "time exceeded" before the
		 * FORWARD hook, and drop what they refuse to forward. */
		if (p->ttl <= 1 || xfw_forward_dropped(p, rt))
			return XFW_ROUTE_PASS;
		/* __mkroute_input: checked from the route's device. */
		if (xfw_rpf_refused(ctx, p, sc, iif, fib.ifindex, (__u32)p->dst_lo))
			return XFW_ROUTE_PASS;
		return xfw_srr_route(p, srr, (__u64)XFW_CHAIN_FORWARD << 32 | fib.ifindex, 0);
	}
	return XFW_ROUTE_PASS;
}

/* xfw_ipv4_opts_ok reports whether the stack keeps the received IPv4
 * packet p, whose header starts p->l3_off bytes into the frame, as far as
 * its options go (ip_rcv_options drops some before any chain; see
 * xfw_ipv4_opt_step; srr_ok: accept_source_route is on for the input
 * device), and notes where the walk found the record route and
 * timestamp options for REJECT's echo (p->opt_rr, p->opt_ts: 1 + their
 * offsets among the options, 0 for none). Returns 0 when the stack drops
 * the packet, else 1 with the XFW_SRR_* bits of a source route accepted.
 * A global function with its own stack for the copy of the options. */
#define XFW_MAX_L3_OFF 64 /* Ethernet and a VLAN tag take 18 bytes */
__attribute__((noinline)) int xfw_ipv4_opts_ok(struct xdp_md *ctx, struct xfw_pkt *p, __u32 srr_ok)
{
	struct xfw_opts o = { .srr_ok = srr_ok };
	struct iphdr ip;
	__u32 n, l3_off;

	if (!ctx || !p)
		return 1;
	l3_off = p->l3_off;
	if (l3_off > XFW_MAX_L3_OFF)
		return 1;
	if (bpf_xdp_load_bytes(ctx, l3_off, &ip, sizeof(ip)) < 0)
		return 1;
	n = ip.ihl * 4;
	if (n <= sizeof(ip))
		return 1;
	n -= sizeof(ip);
	if (n > XFW_IPOPT_MAX)
		return 1;
	if (bpf_xdp_load_bytes(ctx, l3_off + sizeof(ip), o.b, n) < 0)
		return 1; /* shorter than its header: the stack drops it anyway */
	o.len = n;
	bpf_loop(XFW_IPOPT_MAX, xfw_ipv4_opt_step, &o, 0);
	/* Both at most XFW_IPOPT_MAX: a byte each. */
	p->opt_rr = o.rr;
	p->opt_ts = o.ts;
	return o.bad ? 0 : 1 | o.srr;
}

/* xfw_ipv6_hbh_ok reports whether ip6_rcv_core keeps the received IPv6
 * packet whose header starts l3_off bytes into the frame, l3len bytes long,
 * as far as a hop-by-hop header goes (ipv6_parse_hopopts: the header must
 * be there whole, at least 8 bytes, and its options valid, see
 * xfw_ipv6_tlv_step; a payload length of 0 makes the header's jumbo option
 * the packet's length, which the walk refuses). A global function; the
 * copy and the walk's state are in t, the XDP hook's per-CPU scratch. */
__attribute__((noinline)) int xfw_ipv6_hbh_ok(struct xdp_md *ctx, __u32 l3_off, __u32 l3len,
					      struct xfw_tlv *t)
{
	struct ipv6hdr ip6;
	__u8 h[2];
	__u32 k, n;

	if (!ctx || !t || l3_off > XFW_MAX_L3_OFF)
		return 1;
	if (bpf_xdp_load_bytes(ctx, l3_off, &ip6, sizeof(ip6)) < 0 || ip6.nexthdr != XFW_NH_HOP)
		return 1;
	/* pskb_may_pull(40 + 8) and (40 + the header's length). */
	if (l3len < sizeof(ip6) + 8 || bpf_xdp_load_bytes(ctx, l3_off + sizeof(ip6), h, 2) < 0)
		return 0;
	k = h[1];
	if (l3len < sizeof(ip6) + (k + 1) * 8)
		return 0;
	/* The bound in the very register the helper gets (k < 256). */
	xfw_barrier_var(k);
	k &= XFW_HBH_MAX / 8 - 1;
	n = (k + 1) * 8;
	if (bpf_xdp_load_bytes(ctx, l3_off + sizeof(ip6), t->b, n) < 0)
		return 1;
	t->end = n;
	t->off = 2;
	t->pad = t->count = t->bad = 0;
	bpf_loop(XFW_HBH_MAX, xfw_ipv6_tlv_step, &t, 0);
	return !t->bad;
}

#endif /* XFW_ROUTE_H */
