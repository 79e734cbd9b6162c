/* SPDX-License-Identifier: GPL-2.0 */
/*
 * local.h — the namespace's local routing table as the data plane sees it:
 * which addresses are this host's (local, broadcast, anycast, multicast
 * routes), filled by the control plane (internal/dataplane/attach.go,
 * fillLocal). Used by chain selection (route.h), by REJECT (reject.h) and
 * by -m addrtype (xfw_addrtype_value, classify.h).
 *
 * Conventions: addresses are passed as the two host-order halves of
 * common.h; lookups are exact-address (/32, /128) longest-prefix matches.
 *
 * Includes: common.h, xfw_structs.h (the keys and values, shared with user
 * space).
 */
#ifndef XFW_LOCAL_H
#define XFW_LOCAL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"
#include "xfw_structs.h"

/* The namespace's local routing table (table 255: local, broadcast,
 * multicast and anycast routes), keyed for longest-prefix match. Consulted
 * when forwarding is off on the receiving device: bpf_fib_lookup then
 * refuses to look up anything (BPF_FIB_LKUP_RET_FWD_DISABLED), and the
 * packet is either for this host (INPUT) or dropped by the kernel. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct xfw_lpm4_key);
	__type(value, struct xfw_local_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
} xfw_local4 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct xfw_lpm6_key);
	__type(value, struct xfw_local_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
} xfw_local6 SEC(".maps");

/* Types of the local table's routes, the values of xfw_local4/6 (RTN_* of
 * linux/rtnetlink.h, as the loader stores them; UNICAST stands for the
 * table's routes that are not this host's). */
#define XFW_RTN_UNICAST 1
#define XFW_RTN_LOCAL 2
#define XFW_RTN_BROADCAST 3
#define XFW_RTN_ANYCAST 4
#define XFW_RTN_MULTICAST 5

/* An IPv4 entry's at: a route of this host's the main table holds, which
 * routing finds but -m addrtype, confined to the local table once the
 * kernel split it from main, does not (UNICAST). */
#define XFW_AT4_UNICAST 0x1

/* The loopback device's index in every network namespace. */
#define XFW_LOOPBACK_IFINDEX 1

/* xfw_local_lookup returns the local-table route covering the address
 * (hi, lo) of family fam (0 IPv4: lo holds the address), or NULL. */
static __always_inline struct xfw_local_val *xfw_local_lookup(__u8 fam, __u64 hi, __u64 lo)
{
	if (fam == 0) {
		struct xfw_lpm4_key k = { .prefixlen = 32 };
		__u32 a = bpf_htonl((__u32)lo);

		__builtin_memcpy(k.addr, &a, 4);
		return bpf_map_lookup_elem(&xfw_local4, &k);
	} else {
		struct xfw_lpm6_key k = { .prefixlen = 128 };
		__u32 w[4] = { bpf_htonl(hi >> 32), bpf_htonl((__u32)hi),
			       bpf_htonl(lo >> 32), bpf_htonl((__u32)lo) };

		__builtin_memcpy(k.addr, w, 16);
		return bpf_map_lookup_elem(&xfw_local6, &k);
	}
}

/* xfw_host_type returns a route's type when the route is this host's
 * (local, broadcast, anycast, multicast), else 0. */
static __always_inline __u8 xfw_host_type(const struct xfw_local_val *v)
{
	return v && v->type != XFW_RTN_UNICAST ? v->type : 0;
}

/* xfw_local_type returns the type of the local-table route covering the
 * address (hi, lo) of family fam when it is this host's, or 0. */
static __always_inline __u8 xfw_local_type(__u8 fam, __u64 hi, __u64 lo)
{
	return xfw_host_type(xfw_local_lookup(fam, hi, lo));
}

/* Both device bits of enum xfw_addrtype: the type depends on no route. */
#define XFW_AT_ANYDEV (XFW_AT_VIA_IN | XFW_AT_VIA_OUT)

/* xfw_addrtype4 returns the facts of IPv4 address a (host order) as
 * __inet_dev_addr_type sees them: 0.0.0.0 and 255.255.255.255 broadcast,
 * 224.0.0.0/4 multicast, else the type of the local-table route covering
 * it (UNICAST without one, or when the entry is main's and marked
 * XFW_AT4_UNICAST) and whether its device is iif / oif. */
static __always_inline __u32 xfw_addrtype4(__u32 a, __u32 iif, __u32 oif)
{
	struct xfw_local_val *v;
	__u32 facts;

	if (a == 0 || a == 0xffffffff)
		return XFW_RTN_BROADCAST | XFW_AT_ANYDEV;
	if ((a & 0xf0000000) == 0xe0000000)
		return XFW_RTN_MULTICAST | XFW_AT_ANYDEV;
	v = xfw_local_lookup(0, 0, a);
	if (!v || v->type == XFW_RTN_UNICAST || (v->at & XFW_AT4_UNICAST))
		return XFW_RTN_UNICAST | XFW_AT_ANYDEV;
	facts = v->type & XFW_AT_RTN;
	if (v->ifindex == 0 || v->ifindex == iif)
		facts |= XFW_AT_VIA_IN;
	if (v->ifindex == 0 || v->ifindex == oif)
		facts |= XFW_AT_VIA_OUT;
	return facts;
}

/* xfw_addrtype6 returns the facts of IPv6 address (hi, lo): its class as
 * __ipv6_addr_type gives it (multicast ff00::/8; :: unspecified;
 * ::ffff:0:0/96 IPv4-mapped, neither unicast nor multicast; all else
 * unicast) and whether the route the kernel finds for it is local or
 * anycast (the entry's at, computed by the loader from the local table,
 * looked up first, and the main table). */
static __always_inline __u32 xfw_addrtype6(__u64 hi, __u64 lo)
{
	__u32 facts = XFW_AT_CLASS_UNICAST;
	struct xfw_local_val *v;

	if ((hi >> 56) == 0xff)
		facts = XFW_AT_CLASS_MULTICAST;
	else if (hi == 0 && lo == 0)
		facts = XFW_AT_CLASS_ANY;
	else if (hi == 0 && (lo >> 32) == 0xffff)
		facts = XFW_AT_CLASS_OTHER;
	v = xfw_local_lookup(1, hi, lo);
	if (v)
		facts |= v->at & (XFW_AT6_LOCAL | XFW_AT6_ANYCAST);
	return facts;
}

#endif /* XFW_LOCAL_H */
