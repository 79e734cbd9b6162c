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
 * agent has seen running both of xfw's programs. At PRE_ROUTING it also
 * reads which XDP program the input device runs now (its xdp_state, generic
 * and native): a packet that arrived after xfw's program was removed, or
 * replaced by another, is dropped from the first one on, before the agent
 * even hears of the change. Packets of protected interfaces pass on to the
 * stack unchanged: the guard never judges a packet by the ruleset, it only
 * refuses the ones the ruleset could not have judged.
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

/* XDP attachment modes: indexes of net_device.xdp_state (enum
 * bpf_xdp_mode: XDP_MODE_SKB, XDP_MODE_DRV). */
#define XFW_XDP_MODE_SKB 0
#define XFW_XDP_MODE_DRV 1

struct bpf_prog_aux {
	__u32 id;
} __attribute__((preserve_access_index));

struct bpf_prog {
	struct bpf_prog_aux *aux;
} __attribute__((preserve_access_index));

struct bpf_xdp_entity {
	struct bpf_prog *prog;
} __attribute__((preserve_access_index));

/* veth keeps its own pointer to the program (the receive path reads it,
 * per queue); the device's, in its private area, is cleared first on
 * removal. */
struct veth_priv {
	struct bpf_prog *_xdp_prog;
} __attribute__((preserve_access_index));

/* struct xfw_guard_if.flags. */
#define XFW_GUARD_IF_VETH 1 /* a veth: its own program pointer decides */

/* NETDEV_ALIGN: a device's private area follows struct net_device at this
 * alignment (netdev_priv). */
#define XFW_NETDEV_ALIGN 32

struct net_device {
	int ifindex;
	struct bpf_prog *xdp_prog; /* generic XDP: what the receive path runs */
	struct bpf_xdp_entity xdp_state[3];
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

/* What the agent saw of a protected interface: the id of xfw's XDP program
 * it ran (with xfw's TCX egress program), and XFW_GUARD_IF_* flags. */
struct xfw_guard_if {
	__u32 prog_id;
	__u32 flags;
};

/* ifindex -> struct xfw_guard_if. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct xfw_guard_if);
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

/* xfw_prog_is reports whether prog is the program of id want. */
static __always_inline int xfw_prog_is(struct bpf_prog *prog, __u32 want)
{
	return prog && BPF_CORE_READ(prog, aux, id) == want;
}

/* xfw_guard_veth_runs reports whether the veth dev runs the program of id
 * want, by its own pointer; -1 when the kernel's types do not say where
 * that is (veth a module whose types the loader did not see). */
static __always_inline int xfw_guard_veth_runs(struct net_device *dev, __u32 want)
{
	struct bpf_prog *prog = 0;
	__u64 priv;

	if (!bpf_core_type_exists(struct veth_priv))
		return -1;
	priv = (__u64)dev + ((bpf_core_type_size(struct net_device) + XFW_NETDEV_ALIGN - 1) &
			     ~(__u64)(XFW_NETDEV_ALIGN - 1));
	if (bpf_probe_read_kernel(&prog, sizeof(prog),
				  (void *)(priv + bpf_core_field_offset(struct veth_priv, _xdp_prog))))
		return 0;
	return xfw_prog_is(prog, want);
}

/* xfw_guard_runs reports whether dev runs the XDP program of id want, in
 * generic or native mode. */
static __always_inline int xfw_guard_runs(struct net_device *dev, const struct xfw_guard_if *want)
{
	struct bpf_prog *prog;
	int veth;

	if (want->flags & XFW_GUARD_IF_VETH) {
		veth = xfw_guard_veth_runs(dev, want->prog_id);
		if (veth > 0)
			return 1;
		/* Not natively (the veth's own pointer is the one its receive
		 * path reads, xdp_state's may still name a program being
		 * removed): generically, then (--xdp-mode generic,
		 * veth-generic). */
		if (veth == 0)
			return xfw_prog_is(BPF_CORE_READ(dev, xdp_prog), want->prog_id);
	}

	/* Generic XDP: the pointer the receive path reads, which the kernel
	 * clears before it records the removal in xdp_state. */
	prog = BPF_CORE_READ(dev, xdp_prog);
	if (xfw_prog_is(prog, want->prog_id))
		return 1;
	prog = BPF_CORE_READ(dev, xdp_state[XFW_XDP_MODE_DRV].prog);
	return xfw_prog_is(prog, want->prog_id);
}

SEC("netfilter")
int xfw_guard(struct bpf_nf_ctx *ctx)
{
	const struct nf_hook_state *st = ctx->state;
	struct net_device *dev;
	struct xfw_guard_if *want;
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
	want = bpf_map_lookup_elem(&xfw_guard_ifs, &ifindex);
	if (!want)
		return xfw_guard_drop(count);
	if (count == XFW_GUARD_DROP_OUT || xfw_guard_runs(dev, want))
		return XFW_NF_ACCEPT;
	return xfw_guard_drop(count);
}

char LICENSE[] SEC("license") = "GPL";
