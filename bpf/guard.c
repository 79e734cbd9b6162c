/* SPDX-License-Identifier: GPL-2.0 */
/*
 * guard.c — the namespace-wide guard: no interface carries a packet before
 * xfw's programs run on it.
 *
 * XDP and TCX programs are per interface: an interface that appears in the
 * namespace (every container's veth, every pod's) runs nothing of xfw's
 * until the agent attaches the programs, and one whose program an
 * administrator removed runs nothing until they are put back. The guard
 * closes that window: a netfilter program (BPF_PROG_TYPE_NETFILTER, Linux
 * 6.4) linked at PRE_ROUTING and POST_ROUTING of both families, before
 * every other hook, that drops a packet whose input (PRE_ROUTING) or
 * output (POST_ROUTING) device is not in xfw_guard_ifs, the interfaces the
 * agent has seen running both of xfw's programs. Packets of protected
 * interfaces pass on to the stack unchanged: the guard never judges a
 * packet by the ruleset, it only refuses the ones the ruleset could not
 * have judged.
 *
 * Conventions: one map of facts the agent writes (xfw_guard_ifs), one
 * per-CPU array of counts the agent reads (xfw_guard_drops); kernel
 * structures are read with CO-RE (preserve_access_index), declared here
 * with only the members used, so the object builds without vmlinux.h.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* Verdicts of a netfilter hook (linux/netfilter.h). */
#define XFW_NF_DROP 0
#define XFW_NF_ACCEPT 1

/* Hooks of the inet families (enum nf_inet_hooks). */
#define XFW_NF_PRE_ROUTING 0
#define XFW_NF_POST_ROUTING 4

/* How many interfaces the guard can know: the agent writes one entry per
 * protected interface. */
#define XFW_GUARD_MAX_IFS 65536

/* Indexes of xfw_guard_drops: packets dropped at each hook. */
#define XFW_GUARD_DROP_IN 0
#define XFW_GUARD_DROP_OUT 1
#define XFW_GUARD_NCOUNTS 2

struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));

struct nf_hook_state {
	__u8 hook;
	__u8 pf;
	struct net_device *in;
	struct net_device *out;
} __attribute__((preserve_access_index));

struct sk_buff;

struct bpf_nf_ctx {
	const struct nf_hook_state *state;
	struct sk_buff *skb;
} __attribute__((preserve_access_index));

/* ifindex -> 1: the interface runs xfw's XDP and TCX egress programs. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, XFW_GUARD_MAX_IFS);
} xfw_guard_ifs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_GUARD_NCOUNTS);
} xfw_guard_drops SEC(".maps");

/* xfw_guard_drop counts a drop at index i and returns the verdict. */
static __always_inline int xfw_guard_drop(__u32 i)
{
	__u64 *n = bpf_map_lookup_elem(&xfw_guard_drops, &i);

	if (n)
		*n += 1;
	return XFW_NF_DROP;
}

SEC("netfilter")
int xfw_guard(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *st = ctx->state;
	struct net_device *dev;
	__u32 ifindex, count;

	if (st->hook == XFW_NF_PRE_ROUTING) {
		dev = st->in;
		count = XFW_GUARD_DROP_IN;
	} else {
		dev = st->out;
		count = XFW_GUARD_DROP_OUT;
	}
	if (!dev)
		return XFW_NF_ACCEPT; /* no device to answer for */
	ifindex = (__u32)BPF_CORE_READ(dev, ifindex);
	if (bpf_map_lookup_elem(&xfw_guard_ifs, &ifindex))
		return XFW_NF_ACCEPT;
	return xfw_guard_drop(count);
}

char LICENSE[] SEC("license") = "GPL";
