/* SPDX-License-Identifier: GPL-2.0 */
/*
 * netns.h — xfw's programs judge the packets of their own network
 * namespace only.
 *
 * A device keeps its XDP and TCX programs when it moves to another
 * namespace: Docker creates a veth pair in the host's namespace, where xfw
 * may attach to both ends (a command or the agent running in that
 * moment), then moves one end into the container as its eth0. There the
 * programs would judge the container's traffic with the host's rulesets,
 * connections and translations (a DNAT reply's source translated at the
 * container's own egress: the connection breaks). The device's namespace
 * (its struct net's proc inode number, what /proc/PID/ns/net names) is
 * compared with the one xfw was loaded in (xfw_home_netns, set by the
 * loader: internal/dataplane/netns.go); a program on a device that left
 * passes every packet, as netfilter's hooks of the host's namespace never
 * see them either.
 *
 * Conventions: kernel structures are read through bpf_cast_to_kern_ctx
 * and CO-RE (preserve_access_index), declared here with only the members
 * used (the object builds without vmlinux.h); the type names carry the
 * xfw_k_ prefix with ___ flavours so they do not clash with the UAPI
 * headers. xfw_home_netns 0 (a loader that does not set it) turns the
 * check off.
 *
 * Includes: common.h, kern.h.
 */
#ifndef XFW_NETNS_H
#define XFW_NETNS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "kern.h"

/* The proc inode number of the namespace xfw was loaded in. */
volatile const __u32 xfw_home_netns = 0;

struct ns_common___xfw {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net___xfw {
	struct ns_common___xfw ns;
} __attribute__((preserve_access_index));

struct possible_net_t___xfw {
	struct net___xfw *net;
} __attribute__((preserve_access_index));

struct net_device___xfw {
	struct possible_net_t___xfw nd_net;
} __attribute__((preserve_access_index));

struct xdp_rxq_info___xfw {
	struct net_device___xfw *dev;
} __attribute__((preserve_access_index));

struct xdp_buff___xfw {
	struct xdp_rxq_info___xfw *rxq;
} __attribute__((preserve_access_index));

/* xfw_dev_away reports whether dev is in another namespace than xfw's. */
static __always_inline int xfw_dev_away(struct net_device___xfw *dev)
{
	__u32 home = xfw_home_netns;

	return home && dev && dev->nd_net.net && dev->nd_net.net->ns.inum != home;
}

/* xfw_xdp_away reports whether the frame's device left xfw's namespace. */
static __always_inline int xfw_xdp_away(struct xdp_md *ctx)
{
	struct xdp_buff___xfw *xb = bpf_cast_to_kern_ctx(ctx);

	return xfw_home_netns && xb->rxq && xfw_dev_away(xb->rxq->dev);
}

/* xfw_skb_away reports whether the skb's device left xfw's namespace. */
static __always_inline int xfw_skb_away(struct __sk_buff *skb)
{
	struct sk_buff___xfw *kskb = bpf_cast_to_kern_ctx(skb);

	return xfw_home_netns && xfw_dev_away(kskb->dev);
}

#endif /* XFW_NETNS_H */
