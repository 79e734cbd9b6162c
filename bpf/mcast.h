/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mcast.h — the multicast groups this host's devices joined, as the
 * kernel's input routing checks them before INPUT: IPv4's
 * ip_route_input_rcu (ip_check_mc_rcu) and IPv6's ip6_mc_input
 * (ipv6_chk_mcast_addr) drop multicast to a group the receiving device
 * has not joined, after PREROUTING, and IPv4's multicast from a source
 * the group's source filter leaves out. The control plane mirrors the
 * groups (internal/dataplane/mcast.go, from /proc/net/igmp and
 * /proc/net/igmp6) and the IPv4 source filters (mcfilter.go, from
 * /proc/net/mcfilter) at each sync, on the agent's multicast
 * notifications and when the agent sees /proc/net/mcfilter change.
 *
 * Conventions: the groups live in xfw_ifinfo (a hash keyed by ifindex |
 * VLAN id << 32, the VLAN id below 4096), under keys whose high half is
 * far above any VLAN id, so xfw_xdp needs no map of its own (it has 64,
 * the kernel's limit):
 *   XFW_MC_KEY_MIRRORED4/6 << 32 | ifindex: the device's groups of that
 *     family are mirrored (absent: multicast forwarding is on there, a
 *     bridge, or too many groups to fit; every group is taken as joined);
 *   group << 32 | ifindex: IPv4 group (host order, 224.0.0.0/4) joined;
 *   (XFW_MC_KEY_GROUP6 + n) << 32 | ifindex: IPv6 group number n joined,
 *     n being the group's xfw_local6 entry's .group (a /128 entry of
 *     type MULTICAST the control plane adds for each joined group);
 *   (XFW_MC_KEY_SRC4 + f) << 32 | source (host order): IPv4 source
 *     filter number f lists the source (below).
 * The values are unused (zero interface facts), but for an IPv4 group's:
 * its .ifindex holds the number f of the group's source filter on the
 * device (0: none, every source passes) and its .flags XFW_MC_UNLISTED
 * when the sources the filter does not list pass (the filter's mode is
 * EXCLUDE); a listed source gets the other verdict. The control plane
 * works both out from /proc/net/mcfilter and /proc/net/igmp as
 * ip_check_mc_rcu decides: a source passes when a socket in INCLUDE mode
 * names it or not every socket in EXCLUDE mode blocks it. IPv6 has no
 * such filters to mirror: ip6_mc_input asks ipv6_chk_mcast_addr without
 * the source (the sockets filter it after INPUT).
 *
 * Includes: common.h, parse.h (struct xfw_pkt), local.h (xfw_local6),
 * xfw_maps.h (xfw_ifinfo).
 */
#ifndef XFW_MCAST_H
#define XFW_MCAST_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"
#include "xfw_maps.h"

/* The high halves of xfw_ifinfo's group keys (see above; mirrored in
 * internal/dataplane/mcast.go). */
#define XFW_MC_KEY_MIRRORED4 0x0f000004U
#define XFW_MC_KEY_MIRRORED6 0x0f000006U
#define XFW_MC_KEY_GROUP6 0x10000000U
#define XFW_MC_KEY_SRC4 0xf0000000U

/* An IPv4 group value's .flags: the sources its filter does not list
 * pass (mirrored in internal/dataplane/mcfilter.go). */
#define XFW_MC_UNLISTED 1

/* xfw_mc_key returns xfw_ifinfo's key of high half hi on device ifindex. */
static __always_inline __u64 xfw_mc_key(__u32 hi, __u32 ifindex)
{
	return (__u64)hi << 32 | ifindex;
}

/* xfw_mc_source_ok reports whether IPv4 group value g's source filter
 * lets p's source through (ip_check_mc_rcu: IGMP and the unspecified
 * source always pass). */
static __always_inline int xfw_mc_source_ok(struct xfw_pkt *p, struct xfw_ifinfo *g)
{
	__u32 src = (__u32)p->src_lo;
	int listed;
	__u64 key;

	if (!g->ifindex || !src || p->proto == IPPROTO_IGMP)
		return 1;
	key = xfw_mc_key(XFW_MC_KEY_SRC4 + g->ifindex, src);
	listed = bpf_map_lookup_elem(&xfw_ifinfo, &key) != 0;
	return listed != !!(g->flags & XFW_MC_UNLISTED);
}

/* xfw_mc_joined reports whether device iif (the device IP sees) joined
 * the group p is addressed to, with p's source passing the group's
 * source filter (IPv4), as the kernel's input routing asks it, or 1 when
 * its groups are not mirrored. */
static __always_inline int xfw_mc_joined(struct xfw_pkt *p, __u32 iif)
{
	struct xfw_local_val *v;
	struct xfw_ifinfo *g;
	__u32 hi;
	__u64 key;

	key = xfw_mc_key(p->fam ? XFW_MC_KEY_MIRRORED6 : XFW_MC_KEY_MIRRORED4, iif);
	if (!bpf_map_lookup_elem(&xfw_ifinfo, &key))
		return 1;
	if (p->fam == 0) {
		key = xfw_mc_key((__u32)p->dst_lo, iif);
		g = bpf_map_lookup_elem(&xfw_ifinfo, &key);
		return g && xfw_mc_source_ok(p, g);
	}
	v = xfw_local_lookup(1, p->dst_hi, p->dst_lo);
	if (!v || !v->group)
		return 0; /* no device joined it */
	hi = XFW_MC_KEY_GROUP6 + v->group;
	key = xfw_mc_key(hi, iif);
	return bpf_map_lookup_elem(&xfw_ifinfo, &key) != 0;
}

#endif /* XFW_MCAST_H */
