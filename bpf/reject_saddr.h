/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_saddr.h — the source of an ICMPv6 error about a forwarded packet,
 * as the kernel picks it: icmp6_send, when the route back has no preferred
 * source, runs ipv6_dev_get_saddr on the INPUT device (RFC 6724's source
 * address selection over the host's addresses), where bpf_fib_lookup's
 * BPF_FIB_LOOKUP_SRC runs it on the route's device. The XDP hook builds
 * the error with the lookup's source and marks it (XFW_RJ_META_SEL6,
 * reject_send.h); xfw_tc_ingress picks the source here, over the host's
 * addresses the control plane copied (xfw_saddr6, filled at each sync and
 * address change: internal/dataplane/saddr6.go), and rewrites it before
 * OUTPUT judges the reply.
 *
 * The rules, in the kernel's order (net/ipv6/addrconf.c
 * ipv6_get_saddr_eval; Linux 6.18 without CONFIG_IPV6_MIP6): the same
 * address as the destination; the appropriate scope (the smallest that
 * is enough, else the largest); not deprecated (nor optimistic); on the
 * input device; the destination's label; public (or temporary, by the
 * device's use_tempaddr); ORCHID with ORCHID; the longest prefix matched
 * (at most the address's prefix length); not optimistic. A candidate
 * replaces the best so far only when better at the first rule they
 * differ in: a lexicographic maximum, the first one found winning ties,
 * in the kernel's walk order (devices as the address dump lists them, each
 * device's addresses in its list's order). A multicast or link-local
 * (or narrower) destination, or an input device with use_oif_addrs_only,
 * takes the input device's addresses alone.
 *
 * Bound: XFW_SADDR6_MAX addresses. With more (xfw_saddr6_tab.over) the
 * source stays the lookup's (a documented limit); with no candidate it
 * stays too, as the kernel's, whose ipv6_dev_get_saddr failing leaves the
 * source to the route lookup.
 * Labels are the kernel's default policy table (`ip addrlabel` changes
 * are not seen: docs/differences.md).
 *
 * Includes: common.h, xfw_structs.h (the table, shared with user space),
 * reject_structs.h (the reply's header lengths), route_main.h (whether
 * the route back has a preferred source).
 */
#ifndef XFW_REJECT_SADDR_H
#define XFW_REJECT_SADDR_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "reject_structs.h"
#include "route_main.h"

/* The host's IPv6 addresses, candidates of source selection (one entry). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_saddr6_tab);
	__uint(max_entries, 1);
} xfw_saddr6 SEC(".maps");

/* Scopes (the kernel's IPV6_ADDR_SCOPE_*, __ipv6_addr_src_scope). */
#define XFW_SA6_SCOPE_LINK 0x2
#define XFW_SA6_SCOPE_SITE 0x5
#define XFW_SA6_SCOPE_GLOBAL 0xe

/* Bits of the score key (most significant rule first): rule 0 (a
 * candidate at all), 1 (same address), 2 (scope, 8 bits), 3 (preferred),
 * 5 (input device), 6 (label), 7 (public), 8- (ORCHID), 8 (matched
 * prefix, 8 bits), and the last (not optimistic). */
#define XFW_SA6_K_ANY 31
#define XFW_SA6_K_SAME 30
#define XFW_SA6_K_SCOPE 22
#define XFW_SA6_K_PREF 21
#define XFW_SA6_K_OIF 20
#define XFW_SA6_K_LABEL 19
#define XFW_SA6_K_PUBLIC 18
#define XFW_SA6_K_ORCHID 17
#define XFW_SA6_K_MATCH 9
#define XFW_SA6_K_NOTOPT 8
/* The scope rule's value for a scope large enough: 128 - scope (the
 * kernel's -scope), above every scope too small (scope - 128 there). */
#define XFW_SA6_SCOPE_ENOUGH 128

/* Offsets in the reply frame (untagged Ethernet, IPv6, ICMPv6): the
 * IPv6 source (8 bytes into its header), the ICMPv6 checksum (2 bytes
 * into its header). */
#define XFW_SA6_SADDR_OFF (XFW_RJ_ETH_HLEN + 8)
#define XFW_SA6_CSUM_OFF (XFW_RJ_ETH_HLEN + XFW_RJ_IP6_HLEN + 2)

/* xfw_sa6_scope returns the source scope of the IPv6 address a (network
 * order words) as __ipv6_addr_type gives it: multicast its scope field,
 * fe80::/10 link, fec0::/10 site, ::1 link (RFC 6724 3.4), :: 0 (none),
 * all else global (ULAs too). */
static __always_inline __u32 xfw_sa6_scope(const __u32 *a)
{
	__u32 w = bpf_ntohl(a[0]);

	if ((w & 0xe0000000) != 0 && (w & 0xe0000000) != 0xe0000000)
		return XFW_SA6_SCOPE_GLOBAL;
	if ((w >> 24) == 0xff)
		return (w >> 16) & 0xf;
	if ((w & 0xffc00000) == 0xfe800000)
		return XFW_SA6_SCOPE_LINK;
	if ((w & 0xffc00000) == 0xfec00000)
		return XFW_SA6_SCOPE_SITE;
	if (w == 0 && a[1] == 0 && a[2] == 0) {
		if (a[3] == 0)
			return 0;
		if (a[3] == bpf_htonl(1))
			return XFW_SA6_SCOPE_LINK;
	}
	return XFW_SA6_SCOPE_GLOBAL;
}

/* xfw_sa6_label returns the label of IPv6 address a in the kernel's
 * default policy table (ipv6_addr_label_init_table: the longest prefix
 * of ::1/128 0, ::ffff:0:0/96 4, ::/96 3, 2001::/32 6, 2001:10::/28 7,
 * 2002::/16 2, 3ffe::/16 12, fec0::/10 11, fc00::/7 5, ::/0 1). */
static __always_inline __u32 xfw_sa6_label(const __u32 *a)
{
	__u32 w = bpf_ntohl(a[0]);

	if (w == 0 && a[1] == 0) {
		if (a[2] == 0)
			return a[3] == bpf_htonl(1) ? 0 : 3;
		if (a[2] == bpf_htonl(0xffff))
			return 4;
	}
	if (w == 0x20010000)
		return 6;
	if ((w & 0xfffffff0) == 0x20010010)
		return 7;
	if ((w >> 16) == 0x2002)
		return 2;
	if ((w >> 16) == 0x3ffe)
		return 12;
	if ((w & 0xffc00000) == 0xfec00000)
		return 11;
	if ((w & 0xfe000000) == 0xfc000000)
		return 5;
	return 1;
}

/* xfw_sa6_orchid reports whether a is an ORCHID (2001:10::/28). */
static __always_inline __u32 xfw_sa6_orchid(const __u32 *a)
{
	return (bpf_ntohl(a[0]) & 0xfffffff0) == 0x20010010;
}

/* xfw_sa6_clz returns the leading zero bits of x (32 for 0), without a
 * loop. */
static __always_inline __u32 xfw_sa6_clz(__u32 x)
{
	__u32 n = 0;

	if (!x)
		return 32;
	if (!(x & 0xffff0000)) {
		n += 16;
		x <<= 16;
	}
	if (!(x & 0xff000000)) {
		n += 8;
		x <<= 8;
	}
	if (!(x & 0xf0000000)) {
		n += 4;
		x <<= 4;
	}
	if (!(x & 0xc0000000)) {
		n += 2;
		x <<= 2;
	}
	if (!(x & 0x80000000))
		n += 1;
	return n;
}

/* xfw_sa6_common returns how many leading bits a and b share
 * (ipv6_addr_diff: 128 when equal). */
static __always_inline __u32 xfw_sa6_common(const __u32 *a, const __u32 *b)
{
	__u32 x;

	if ((x = a[0] ^ b[0]))
		return xfw_sa6_clz(bpf_ntohl(x));
	if ((x = a[1] ^ b[1]))
		return 32 + xfw_sa6_clz(bpf_ntohl(x));
	if ((x = a[2] ^ b[2]))
		return 64 + xfw_sa6_clz(bpf_ntohl(x));
	if ((x = a[3] ^ b[3]))
		return 96 + xfw_sa6_clz(bpf_ntohl(x));
	return 128;
}

/* The walk over the table (bpf_loop: each step verified once): the
 * destination's facts, the input device, and the best entry so far. */
struct xfw_sa6_walk {
	__u32 d[4];
	__u32 dscope, dlabel, dorchid, iif;
	__u32 oif_only; /* candidates: the input device's addresses alone */
	__u32 pass;     /* 0: find use_oif_addrs_only; 1: score */
	__u64 best;     /* the best key so far (0: none) */
	__u32 addr[4];  /* its address (no index: the verifier would track
			 * it precisely, and walk every step's outcome) */
};

/* xfw_sa6_key returns entry e's score for the walk's destination: the
 * rules' answers packed most significant first (XFW_SA6_K_*); 0 without
 * e or w. A global function, verified once: inlined into the walk's step,
 * its branches multiply the states the verifier walks. */
__attribute__((noinline)) __u64 xfw_sa6_key(const struct xfw_saddr6_ent *e, const struct xfw_sa6_walk *w)
{
	__u32 match;
	__u32 scope;
	__u64 k = 1ULL << XFW_SA6_K_ANY;

	if (!e || !w)
		return 0;
	match = xfw_sa6_common((const __u32 *)e->addr, w->d);
	scope = e->scope;
	if (match == 128)
		k |= 1ULL << XFW_SA6_K_SAME;
	k |= (__u64)(scope >= w->dscope ? XFW_SA6_SCOPE_ENOUGH - scope : scope) << XFW_SA6_K_SCOPE;
	if (e->bits & XFW_SA6_PREFERRED)
		k |= 1ULL << XFW_SA6_K_PREF;
	if (e->ifindex == w->iif)
		k |= 1ULL << XFW_SA6_K_OIF;
	if (e->label == w->dlabel)
		k |= 1ULL << XFW_SA6_K_LABEL;
	if (e->bits & XFW_SA6_PUBLIC)
		k |= 1ULL << XFW_SA6_K_PUBLIC;
	if (!(e->bits & XFW_SA6_ORCHID) == !w->dorchid)
		k |= 1ULL << XFW_SA6_K_ORCHID;
	if (match > e->plen)
		match = e->plen;
	k |= (__u64)(match & 0xff) << XFW_SA6_K_MATCH;
	if (!(e->bits & XFW_SA6_OPTIMISTIC))
		k |= 1ULL << XFW_SA6_K_NOTOPT;
	return k;
}

/* xfw_sa6_step is one step of the walk over entry i: pass 0 notes the
 * input device's use_oif_addrs_only, pass 1 keeps the best candidate (a
 * strictly better one replaces it: the first found wins ties, as the
 * kernel's hiscore). Returns 1 to stop (past the table's end). */
static long xfw_sa6_step(__u32 i, struct xfw_sa6_walk *w)
{
	struct xfw_saddr6_tab *t;
	struct xfw_saddr6_ent *e;
	__u32 zero = 0;
	__u64 k;

	t = bpf_map_lookup_elem(&xfw_saddr6, &zero);
	if (!t || i >= t->n || i >= XFW_SADDR6_MAX)
		return 1;
	/* The bound again, where the verifier sees it (a power of two;
	 * the barrier keeps clang from dropping the mask). */
	asm volatile("" : "+r"(i));
	e = &t->e[i & (XFW_SADDR6_MAX - 1)];
	if (w->pass == 0) {
		if (e->ifindex == w->iif && (e->bits & XFW_SA6_OIF_ONLY))
			w->oif_only = 1;
		return 0;
	}
	if (w->oif_only && e->ifindex != w->iif)
		return 0;
	k = xfw_sa6_key(e, w);
	if (k > w->best) {
		w->best = k;
		__builtin_memcpy(w->addr, e->addr, 16);
	}
	return 0;
}

/* xfw_sa6_pick sets w->addr to the source the kernel picks for the
 * destination w->d from the input device w->iif (ipv6_dev_get_saddr),
 * w->best to 0 when there is none. */
static __always_inline void xfw_sa6_pick(struct xfw_sa6_walk *w)
{
	w->dscope = xfw_sa6_scope(w->d);
	w->dlabel = xfw_sa6_label(w->d);
	w->dorchid = xfw_sa6_orchid(w->d);
	/* A multicast or link-local (or narrower) destination: the input
	 * device's addresses alone. */
	w->oif_only = (bpf_ntohl(w->d[0]) >> 24) == 0xff || w->dscope <= XFW_SA6_SCOPE_LINK;
	w->best = 0;
	w->pass = 0;
	bpf_loop(XFW_SADDR6_MAX, xfw_sa6_step, w, 0);
	w->pass = 1;
	bpf_loop(XFW_SADDR6_MAX, xfw_sa6_step, w, 0);
}

/* xfw_rj_saddr6 gives the ICMPv6 error in skb (xfw's own reply frame:
 * untagged Ethernet, IPv6, ICMPv6) the source the kernel's icmp6_send
 * picks on the input device iif, with its checksum. Leaves the source
 * as it is when the table is over its bound or has no candidate.
 * Returns 0, or -1 when the frame could not be rewritten (then the reply
 * is dropped: never sent with a wrong checksum). A global function,
 * verified once. */
__attribute__((noinline)) int xfw_rj_saddr6(struct __sk_buff *skb, __u32 iif)
{
	struct xfw_saddr6_tab *t;
	struct xfw_route_val *rt;
	struct xfw_sa6_walk w;
	struct ipv6hdr *ip6;
	__u32 zero = 0, s[4];
	__s64 diff;

	if (!skb)
		return -1;
	t = bpf_map_lookup_elem(&xfw_saddr6, &zero);
	if (!t || t->over)
		return 0;
	ip6 = (void *)(long)skb->data + XFW_RJ_ETH_HLEN;
	if ((void *)(ip6 + 1) > (void *)(long)skb->data_end || ip6->nexthdr != IPPROTO_ICMPV6)
		return 0;
	__builtin_memset(&w, 0, sizeof(w));
	__builtin_memcpy(w.d, &ip6->daddr, 16);
	__builtin_memcpy(s, &ip6->saddr, 16);
	w.iif = iif;
	/* The route back's preferred source stands (icmpv6_rt_has_prefsrc):
	 * the lookup's source is it (the main table's route, route_main.h). */
	rt = xfw_route_main(w.d, 6);
	if (rt && (rt->flags & XFW_RT_PREFSRC))
		return 0;
	xfw_sa6_pick(&w);
	if (!w.best)
		return 0;
	diff = bpf_csum_diff(s, 16, w.addr, 16, 0);
	if (diff < 0)
		return -1;
	if (bpf_skb_store_bytes(skb, XFW_SA6_SADDR_OFF, w.addr, 16, 0))
		return -1;
	if (bpf_l4_csum_replace(skb, XFW_SA6_CSUM_OFF, 0, (__u32)diff, BPF_F_PSEUDO_HDR))
		return -1;
	return 0;
}

#endif /* XFW_REJECT_SADDR_H */
