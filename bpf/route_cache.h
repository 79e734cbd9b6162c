/* SPDX-License-Identifier: GPL-2.0 */
/*
 * route_cache.h — a per-CPU cache of the XDP hook's IPv4 route lookups
 * (bpf_fib_lookup, route.h): the lookup is the largest fixed cost of a
 * packet (~90 ns of the kernel's FIB walk, MTU and device look-ups), and
 * consecutive packets of a flow ask it the same question.
 *
 * Validity: an entry holds the kernel's IPv4 route generation of the
 * receiving device's namespace (net->ipv4.rt_genid) read before its
 * lookup, and is used only while that generation is unchanged. The kernel
 * bumps it (rt_cache_flush) on every change that can alter an IPv4 route
 * lookup: a route inserted, or an alias that lookups used replaced or
 * deleted (fib_table_insert/delete), routing rules, nexthop objects,
 * addresses (their local routes), a device going down, up, changing its
 * carrier or MTU, and the forwarding sysctls — the validity test of the
 * kernel's own cached routes (rt_is_expired). A change racing with a
 * lookup leaves an entry tagged with the older generation, never used.
 *
 * Key: everything bpf_fib_lookup takes from the packet — input device,
 * addresses, protocol and ports (multipath hashing, ip rule ipproto /
 * sport / dport), TOS and the mark (ip rule fwmark). The MTU check of a
 * DF packet (tot_len) is not in the key: an entry records the largest DF
 * length its route took (mtu_ok); a longer DF packet asks the kernel (and
 * a "fragmentation needed" answer is never cached).
 *
 * The entry also keeps what the local table (local.h's xfw_local4, which
 * the control plane fills) says of its addresses; the control plane
 * flushes the kernel's route cache after a refill that changed it
 * (internal/dataplane), which bumps the generation.
 *
 * Not cached: IPv6 (its routes have no single generation number), a
 * kernel without the field (CO-RE: the lookup is made every time).
 *
 * Includes: common.h, netns.h (the kernel's device and namespace types).
 */
#ifndef XFW_ROUTE_CACHE_H
#define XFW_ROUTE_CACHE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "common.h"
#include "netns.h"

/* The kernel's atomic_t and the IPv4 part of struct net (CO-RE). */
struct atomic___xfwrtc {
	int counter;
} __attribute__((preserve_access_index));

struct netns_ipv4___xfwrtc {
	struct atomic___xfwrtc rt_genid;
} __attribute__((preserve_access_index));

struct net___xfwrtc {
	struct netns_ipv4___xfwrtc ipv4;
} __attribute__((preserve_access_index));

/* Entries per CPU, direct-mapped by a hash of the key (a power of two).
 * They live in the XDP hook's per-CPU scratch (xfw_maps.h): a program may
 * use no more than 64 maps, and xfw_xdp has them all. */
#define XFW_RTC_SLOTS 64
/* Multiplicative hash constants (golden ratio and murmur3's fmix). */
#define XFW_RTC_MUL1 0x9e3779b1u
#define XFW_RTC_MUL2 0x85ebca6bu
/* The hash's top bits index the slots: 32 - log2(XFW_RTC_SLOTS). */
#define XFW_RTC_SHIFT 26

/* What a route lookup was asked (struct bpf_fib_lookup's inputs). */
struct xfw_rtc_key {
	__u32 iif;
	__u32 src; /* network order, as in struct bpf_fib_lookup */
	__u32 dst;
	__u32 mark;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 tos;
	__u16 pad;
};

/* A cached answer: key, the generation it was valid in, and the result. */
struct xfw_rtc_ent {
	struct xfw_rtc_key key;
	__u32 genid;  /* net->ipv4.rt_genid when it was looked up */
	__u32 oif;    /* the output device (bpf_fib_lookup's ifindex) */
	__u32 mtu_ok; /* the largest DF length the route took (0: none) */
	__u8 rc;      /* bpf_fib_lookup's result */
	__u8 valid;
	/* The local table's answers for the key's addresses (local.h),
	 * filled on first use: 0 not asked yet, else 1 + the answer. */
	__u8 src_ours; /* the source is this host's (xfw_src_local) */
	__u8 dst_type; /* the destination's xfw_local_type */
};

/* xfw_rtc_genid reads the IPv4 route generation of the namespace of the
 * device ctx arrived on into *g; returns 0, or -1 when it cannot. */
static __always_inline int xfw_rtc_genid(struct xdp_md *ctx, __u32 *g)
{
	struct xdp_buff___xfw *xb = bpf_cast_to_kern_ctx(ctx);
	struct net_device___xfw *dev;
	struct net___xfwrtc *net;

	if (!bpf_core_field_exists(((struct net___xfwrtc *)0)->ipv4.rt_genid))
		return -1;
	if (!xb->rxq)
		return -1;
	dev = xb->rxq->dev;
	if (!dev)
		return -1;
	net = (struct net___xfwrtc *)dev->nd_net.net;
	if (!net)
		return -1;
	*g = (__u32)net->ipv4.rt_genid.counter;
	return 0;
}

/* xfw_rtc_slot returns the cache slot of key k. */
static __always_inline __u32 xfw_rtc_slot(const struct xfw_rtc_key *k)
{
	__u32 h = k->src * XFW_RTC_MUL1;

	h ^= k->dst * XFW_RTC_MUL2;
	h ^= ((__u32)k->sport << 16 | k->dport) * XFW_RTC_MUL1;
	h ^= (k->iif ^ k->mark ^ (__u32)k->proto << 8 ^ (__u32)k->tos << 16) * XFW_RTC_MUL2;
	return h >> XFW_RTC_SHIFT;
}

/* xfw_rtc_same reports whether two keys are equal. */
static __always_inline int xfw_rtc_same(const struct xfw_rtc_key *a, const struct xfw_rtc_key *b)
{
	return a->iif == b->iif && a->src == b->src && a->dst == b->dst && a->mark == b->mark &&
	       a->sport == b->sport && a->dport == b->dport && a->proto == b->proto &&
	       a->tos == b->tos;
}

/* xfw_fib_lookup_cached is bpf_fib_lookup(ctx, fib, flags) for an IPv4
 * request of the XDP hook (fam 0; others are looked up every time),
 * answered from the cache when it holds the same question in the current
 * route generation; afterwards only the result and fib->ifindex are
 * valid. cache: the CPU's entries (NULL: none); *hit is set to the entry
 * holding the answer (NULL: not cached). A kernel that refuses flags (before 6.5) is asked again without
 * (route.h). */
static __always_inline int xfw_fib_lookup_cached(struct xdp_md *ctx, struct bpf_fib_lookup *fib,
						 __u32 flags, __u8 fam, __u32 mark,
						 struct xfw_rtc_ent *cache, struct xfw_rtc_ent **hit)
{
	struct xfw_rtc_key k = {};
	struct xfw_rtc_ent *e = 0;
	__u32 g = 0, slot, len = fib->tot_len;
	int rc;

	if (cache && fam == 0 && xfw_rtc_genid(ctx, &g) == 0) {
		k.iif = fib->ifindex;
		k.src = fib->ipv4_src;
		k.dst = fib->ipv4_dst;
		k.mark = mark;
		k.sport = fib->sport;
		k.dport = fib->dport;
		k.proto = fib->l4_protocol;
		k.tos = fib->tos;
		slot = xfw_rtc_slot(&k) & (XFW_RTC_SLOTS - 1);
		e = &cache[slot];
		if (e->valid && e->genid == g && xfw_rtc_same(&e->key, &k) &&
		    len <= e->mtu_ok) {
			fib->ifindex = e->oif;
			*hit = e;
			return e->rc;
		}
	}
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), flags);
	if (rc < 0)
		rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
	if (!e || rc < 0 || rc == BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return rc;
	/* The same route found again for a longer DF packet raises the
	 * length it is known to take. */
	if (e->valid && e->genid == g && xfw_rtc_same(&e->key, &k) && e->rc == rc &&
	    e->oif == fib->ifindex && e->mtu_ok > len)
		len = e->mtu_ok;
	e->key = k;
	e->genid = g;
	e->oif = fib->ifindex;
	e->mtu_ok = len;
	e->rc = rc;
	e->valid = 1;
	e->src_ours = 0;
	e->dst_type = 0;
	*hit = e;
	return rc;
}

#endif /* XFW_ROUTE_CACHE_H */
