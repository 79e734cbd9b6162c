/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_rate.h — the kernel's rate limits of ICMP errors, applied to
 * REJECT's replies as icmp_send and icmp6_send apply them to the kernel's
 * (net/ipv4/icmp.c, net/ipv6/icmp.c, net/ipv4/inetpeer.c):
 *  - the namespace's global token bucket (icmp_global_allow, then
 *    icmp_global_consume once the message is allowed): refilled by
 *    net.ipv4.icmp_msgs_per_sec per second, at most every 20 ms (HZ / 50),
 *    up to net.ipv4.icmp_msgs_burst; each message takes 0, 1 or 2 credits
 *    at random. IPv6 shares IPv4's bucket and sysctls.
 *  - a bucket per destination (inet_peer_xrlim_allow): one message costs
 *    net.ipv4.icmp_ratelimit (IPv6: net.ipv6.icmp.ratelimit, shifted
 *    right by (128 - plen) / 32 for a route of prefix length plen: "more
 *    bandwidth to wider prefixes"), the bucket fills with elapsed time up
 *    to six messages' worth (XRLIM_BURST_FACTOR) and a new destination
 *    starts full.
 *  - only the types of net.ipv4.icmp_ratemask / net.ipv6.icmp.ratemask are
 *    limited (IPv4: never "fragmentation needed", nor types above
 *    NR_ICMP_TYPES); TCP resets are never limited (nf_send_reset, like
 *    tcp_v4_send_reset, has no limit).
 *  - which replies (icmp_send skips every limit, and takes no credit, when
 *    the offending packet's device is loopback; icmpv4_xrlim_allow and
 *    icmpv6_xrlim_allow skip the destination's bucket, not the global
 *    credit, when the reply's route leaves by loopback). Measured on
 *    Linux 6.18 with iptables-legacy (tests/e2e/rejectcredit_test.go):
 *     - INPUT and FORWARD replies (reject_send.h): both buckets.
 *     - replies to packets that arrived on lo (an INPUT REJECT of the
 *       host's own packet; reject.h xfw_rj_xdp): none, no credit taken.
 *     - IPv4 OUTPUT replies (reject.h xfw_rj_tc; the packet has no device
 *       yet at LOCAL_OUT): the global bucket, and the destination's too
 *       when the reply is routed out (a packet the host sent with
 *       another host's source); one for the host itself leaves by lo.
 *     - IPv6 OUTPUT replies: none, no credit taken (nf_send_unreach6
 *       gives a packet without a device the loopback device, which
 *       icmp6_send exempts like one that arrived on lo), but for packets
 *       that have their device before OUTPUT, the stack's neighbour
 *       discovery messages (ndisc_alloc_skb): the global bucket (the
 *       error, for the host itself, leaves by lo; reject.h
 *       xfw_rj_out_dev6).
 *
 * Conventions:
 *  - Time is bpf_ktime_get_ns(): the kernel counts jiffies; the buckets
 *    hold nanoseconds where it holds jiffies (same rates, finer grain).
 *  - The buckets are updated without a lock, as the kernel's (READ_ONCE,
 *    WRITE_ONCE and one compare-and-swap on the global stamp): two CPUs may
 *    both spend the last credit, which the kernel accepts as well.
 *  - The sysctls are copied into xfw_rl_cfg by the control plane at each
 *    sync (internal/dataplane/ratelimit.go); while it holds nothing
 *    (set == 0) nothing is limited. The IPv6 routes' prefix lengths are in
 *    xfw_rl_rt6 (route_main.h: the main table's, filled with the local
 *    table).
 *
 * Includes: common.h, local.h (its LPM key), route_main.h.
 */
#ifndef XFW_REJECT_RATE_H
#define XFW_REJECT_RATE_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "local.h"
#include "route_main.h"

#define XFW_RL_NSEC_PER_SEC 1000000000ULL
/* icmp_global_allow refills at most every HZ / 50: 20 ms. */
#define XFW_RL_REFILL_MIN (XFW_RL_NSEC_PER_SEC / 50)
/* XRLIM_BURST_FACTOR: a destination's bucket holds six messages. */
#define XFW_RL_BURST_FACTOR 6
/* inet_getpeer starts a new peer's clock 60 s back: its bucket is full. */
#define XFW_RL_NEW_PEER_AGE (60 * XFW_RL_NSEC_PER_SEC)
/* icmp_global_consume takes get_random_u32_below(3) credits. */
#define XFW_RL_CONSUME_SPREAD 3
/* ICMP type 3 code 4 (fragmentation needed) is never limited. */
#define XFW_RL_ICMP_DEST_UNREACH 3
#define XFW_RL_ICMP_FRAG_NEEDED 4
#define XFW_RL_NR_ICMP_TYPES 18
/* Bits of the ratemasks kept: ICMP types 0..31 (REJECT sends 3, or 1). */
#define XFW_RL_MASK_TYPES 32
/* icmpv6_xrlim_allow: tmo >>= (128 - plen) >> 5. */
#define XFW_RL_V6_PLEN_SHIFT 5
#define XFW_RL_V6_HOST_PLEN 128
/* Destinations remembered (inet_peer has no fixed bound; one forgotten
 * starts full again, as one the kernel's collector freed). */
#define XFW_RL_PEERS 16384

/* The namespace's sysctls (one entry). */
struct xfw_rl_cfg {
	__u64 msgs_per_sec;  /* net.ipv4.icmp_msgs_per_sec */
	__u64 msgs_burst;    /* net.ipv4.icmp_msgs_burst */
	__u64 ratelimit4_ns; /* net.ipv4.icmp_ratelimit (ms), in ns */
	__u64 ratelimit6_ns; /* net.ipv6.icmp.ratelimit (ms), in ns */
	__u32 ratemask4;     /* net.ipv4.icmp_ratemask */
	__u32 ratemask6;     /* net.ipv6.icmp.ratemask, types 0..31 */
	__u32 set;           /* written by the control plane */
	__u32 rp_filter;     /* nonzero: net.ipv4.conf's rp_filter is on for
			      * some device (all, default or its own):
			      * nat_out.h's xfw_nat_in_direct */
	__u32 ttl4;          /* net.ipv4.ip_default_ttl: REJECT's IPv4
			      * replies' TTL (reject_route.h) */
	__u32 early_demux;   /* net.ipv4.ip_early_demux, tcp_early_demux,
			      * udp_early_demux: XFW_DEMUX_* (demux.h) */
	__s64 tai_off;       /* CLOCK_TAI - CLOCK_REALTIME in ns: the time
			      * REJECT's IPv4 timestamp options carry
			      * (reject_opts.h) */
};

/* The global bucket (net->ipv4.icmp_global_credit, _stamp). */
struct xfw_rl_global {
	__s64 credit;
	__u64 stamp;
};

/* A destination (inet_peer: IPv4 in addr[0]). */
struct xfw_rl_peer_key {
	__u32 fam; /* 4 or 6 */
	__u32 addr[4];
};

/* Its bucket (inet_peer.rate_tokens, rate_last). */
struct xfw_rl_peer {
	__u64 tokens;
	__u64 last;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rl_cfg);
	__uint(max_entries, 1);
} xfw_rl_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rl_global);
	__uint(max_entries, 1);
} xfw_rl_global SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_rl_peer_key);
	__type(value, struct xfw_rl_peer);
	__uint(max_entries, XFW_RL_PEERS);
} xfw_rl_peers SEC(".maps");


/* xfw_rl_config returns the sysctls, or 0 when nothing is limited. */
static __always_inline struct xfw_rl_cfg *xfw_rl_config(void)
{
	__u32 zero = 0;
	struct xfw_rl_cfg *c = bpf_map_lookup_elem(&xfw_rl_cfg, &zero);

	return c && c->set ? c : 0;
}

/* xfw_rl_masked reports whether an ICMP error of type/code is limited at
 * all (icmpv4_mask_allow, icmpv6_mask_allow return the opposite). */
static __always_inline int xfw_rl_masked(const struct xfw_rl_cfg *c, __u8 type, __u8 code, int v6)
{
	if (type >= XFW_RL_MASK_TYPES)
		return 0; /* REJECT sends none of those */
	if (v6)
		return (c->ratemask6 >> type) & 1;
	if (type > XFW_RL_NR_ICMP_TYPES)
		return 0;
	if (type == XFW_RL_ICMP_DEST_UNREACH && code == XFW_RL_ICMP_FRAG_NEEDED)
		return 0;
	return (c->ratemask4 >> type) & 1;
}

/* xfw_rl_global_allow is icmp_global_allow: whether the global bucket has
 * a credit, refilling it when 20 ms have passed. */
static __always_inline int xfw_rl_global_allow(const struct xfw_rl_cfg *c, __u64 now)
{
	struct xfw_rl_global *g;
	__u64 old, delta, incr;
	__s64 credit;
	__u32 zero = 0;

	g = bpf_map_lookup_elem(&xfw_rl_global, &zero);
	if (!g)
		return 1;
	if (g->credit > 0)
		return 1;
	old = g->stamp;
	delta = now - old;
	if (delta > XFW_RL_NSEC_PER_SEC)
		delta = XFW_RL_NSEC_PER_SEC;
	if (delta < XFW_RL_REFILL_MIN)
		return 0;
	/* msgs_per_sec is an int sysctl: the product stays below 2^62. */
	incr = c->msgs_per_sec * delta / XFW_RL_NSEC_PER_SEC;
	if (!incr)
		return 0;
	if (__sync_val_compare_and_swap(&g->stamp, old, now) == old) {
		credit = g->credit + (__s64)incr;
		if (credit > (__s64)c->msgs_burst)
			credit = (__s64)c->msgs_burst;
		g->credit = credit;
	}
	return 1;
}

/* xfw_rl_global_consume is icmp_global_consume: 0, 1 or 2 credits (the
 * credit may go negative). */
static __always_inline void xfw_rl_global_consume(void)
{
	struct xfw_rl_global *g;
	__u32 zero = 0;
	__s64 n = bpf_get_prandom_u32() % XFW_RL_CONSUME_SPREAD;

	g = bpf_map_lookup_elem(&xfw_rl_global, &zero);
	if (g && n)
		__sync_fetch_and_add(&g->credit, -n);
}

/* xfw_rl_limited returns the sysctls when an ICMP error of type/code is
 * rate-limited at all (xfw_rl_masked), else 0. */
static __always_inline struct xfw_rl_cfg *xfw_rl_limited(__u8 type, __u8 code, int v6)
{
	struct xfw_rl_cfg *c = xfw_rl_config();

	return c && xfw_rl_masked(c, type, code, v6) ? c : 0;
}

/* xfw_rl_v6_cost returns an ICMPv6 error's cost to the destination a:
 * net.ipv6.icmp.ratelimit, less for a destination on a wider route. */
static __always_inline __u64 xfw_rl_v6_cost(const struct xfw_rl_cfg *c, const __u32 *a)
{
	struct xfw_lpm6_key k = { .prefixlen = XFW_RL_V6_HOST_PLEN };
	struct xfw_route_val *rt;
	__u32 p = XFW_RL_V6_HOST_PLEN;

	__builtin_memcpy(k.addr, a, 16);
	rt = bpf_map_lookup_elem(&xfw_rl_rt6, &k);
	if (rt && rt->plen < XFW_RL_V6_HOST_PLEN)
		p = rt->plen;
	return c->ratelimit6_ns >> ((XFW_RL_V6_HOST_PLEN - p) >> XFW_RL_V6_PLEN_SHIFT);
}

/* xfw_rl_peer_allow is inet_peer_xrlim_allow for the destination a
 * (network byte order; IPv4 in a[0]). */
static __always_inline int xfw_rl_peer_allow(const struct xfw_rl_cfg *c, const __u32 *a, int v6,
					     __u64 now)
{
	struct xfw_rl_peer_key k = { .fam = v6 ? 6 : 4 };
	struct xfw_rl_peer *p, fresh = { 0 };
	__u64 tmo, token, delta;
	int rc = 0;

	if (v6) {
		__builtin_memcpy(k.addr, a, 16);
		tmo = xfw_rl_v6_cost(c, a);
	} else {
		k.addr[0] = a[0];
		tmo = c->ratelimit4_ns;
	}
	p = bpf_map_lookup_elem(&xfw_rl_peers, &k);
	if (!p) {
		fresh.last = now - XFW_RL_NEW_PEER_AGE;
		bpf_map_update_elem(&xfw_rl_peers, &k, &fresh, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&xfw_rl_peers, &k);
		if (!p)
			return 1; /* as the kernel without a peer entry */
	}
	token = p->tokens;
	delta = now - p->last;
	if (delta) {
		p->last = now;
		token += delta;
		if (token > XFW_RL_BURST_FACTOR * tmo)
			token = XFW_RL_BURST_FACTOR * tmo;
	}
	if (token >= tmo) {
		token -= tmo;
		rc = 1;
	}
	p->tokens = token;
	return rc;
}

/* xfw_rl_spend is the rest of icmpv4_xrlim_allow / icmpv6_xrlim_allow once
 * the global bucket allowed a limited message (xfw_rl_global_allow) and
 * its route was found: the bucket of its destination a (network byte
 * order; IPv4 in a[0]) unless the route leaves by loopback (lo), then the
 * global credit. Returns whether the message may be sent. */
static __always_inline int xfw_rl_spend(const struct xfw_rl_cfg *c, const __u32 *a, int v6, int lo,
					__u64 now)
{
	if (!lo && !xfw_rl_peer_allow(c, a, v6, now))
		return 0;
	xfw_rl_global_consume();
	return 1;
}

#endif /* XFW_REJECT_RATE_H */
