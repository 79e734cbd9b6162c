/* SPDX-License-Identifier: GPL-2.0 */
/*
 * route_main.h — the main routing table's routes as the data plane needs
 * them beyond bpf_fib_lookup: the prefix length of each IPv6 route (ICMPv6
 * rate limits, reject_rate.h) and the mtu metric of the routes that carry
 * one (TCPMSS --clamp-mss-to-pmtu, mangle_apply.h), which bpf_fib_lookup
 * reports only when it is locked.
 *
 * Conventions:
 *  - One LPM trie, xfw_rl_rt6, keyed by IPv6 prefix: every route of the
 *    main IPv6 table, and the IPv4 routes with an mtu metric with the
 *    routes inside their prefixes at their IPv4-mapped prefixes
 *    (::ffff:a.b.c.d, prefix length 96 + the route's); the value's fam
 *    tells them apart. Filled by the control plane at each sync and when
 *    the routes change (internal/dataplane/ratelimit.go, fillRoutes).
 *  - An IPv4 entry's plen is the IPv6 rate limit's answer for the
 *    IPv4-mapped addresses it covers (the IPv6 route over ::ffff:0:0/96),
 *    so its IPv6 readers see what the IPv6 routes alone would give.
 *
 * Includes: common.h, xfw_structs.h.
 */
#ifndef XFW_ROUTE_MAIN_H
#define XFW_ROUTE_MAIN_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"
#include "xfw_structs.h"

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct xfw_lpm6_key);
	__type(value, struct xfw_route_val);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
} xfw_rl_rt6 SEC(".maps");

/* Bytes 10 and 11 of an IPv4-mapped IPv6 address (::ffff:a.b.c.d). */
#define XFW_RT_V4MAPPED_FF 10

/* xfw_route_main returns the main table's longest route of family fam (4
 * or 6) to dst (network order, IPv4 in dst[0]), NULL when the map has
 * none (for IPv4: none with an mtu metric around it). */
static __always_inline struct xfw_route_val *xfw_route_main(const __u32 *dst, __u32 fam)
{
	struct xfw_lpm6_key k = { .prefixlen = 128 };
	struct xfw_route_val *rt;

	if (fam == 4) {
		k.addr[XFW_RT_V4MAPPED_FF] = 0xff;
		k.addr[XFW_RT_V4MAPPED_FF + 1] = 0xff;
		__builtin_memcpy(&k.addr[12], dst, 4);
	} else {
		__builtin_memcpy(k.addr, dst, 16);
	}
	rt = bpf_map_lookup_elem(&xfw_rl_rt6, &k);
	return rt && rt->fam == fam ? rt : NULL;
}

#endif /* XFW_ROUTE_MAIN_H */
