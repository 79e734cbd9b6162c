/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mark_route.h — the packet's mark outside the walk at XDP: the route
 * lookup with it (policy routing, ip rule fwmark) and its handover to the
 * kernel's skb.
 *
 * At XDP no skb exists: the mark the walk leaves the packet (struct
 * xfw_pkt .mark, mark.h) goes to the kernel in the XDP metadata (struct
 * xfw_mark_meta, in front of any other xfw metadata: reject_send.h, the
 * NAT reply of nat_out.h), and xfw's TCX ingress program, which runs
 * before the stack routes the packet, copies it into skb->mark
 * (xfw_mark_meta_take). A driver whose native XDP has no metadata
 * (bpf_xdp_adjust_meta fails) loses it: docs/differences.md.
 *
 * Route lookups with a mark: bpf_fib_lookup's BPF_FIB_LOOKUP_MARK (Linux
 * 6.10) and the mark field, which shares its bytes with the answer's
 * source MAC (struct bpf_fib_lookup); older uapi headers name neither.
 *
 * Includes: nothing of xfw's.
 */
#ifndef XFW_MARK_ROUTE_H
#define XFW_MARK_ROUTE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef BPF_FIB_LOOKUP_MARK
#define BPF_FIB_LOOKUP_MARK (1U << 5) /* Linux 6.10: use .mark */
#endif

/* "xfwM": the packet's mark in the XDP metadata. */
#define XFW_MARK_META_MAGIC 0x7866774d

/* The mark in the metadata (a multiple of 4 bytes, as XDP metadata must
 * be), the first struct of it (at data_meta). */
struct xfw_mark_meta {
	__u32 magic;
	__u32 mark;
};

/* xfw_fib_mark asks route lookup fib to use mark (the input mark of
 * policy routing, in the 4 bytes the answer's source MAC overwrites) and
 * returns the flag that says so. */
static __always_inline __u32 xfw_fib_mark(struct bpf_fib_lookup *fib, __u32 mark)
{
	__builtin_memcpy(fib->smac, &mark, sizeof(mark));
	return BPF_FIB_LOOKUP_MARK;
}

/* xfw_mark_meta_put puts mark in front of ctx's XDP metadata. Returns 0,
 * or -1 when the driver keeps no metadata. */
static __always_inline int xfw_mark_meta_put(struct xdp_md *ctx, __u32 mark)
{
	struct xfw_mark_meta *mm;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*mm)))
		return -1;
	mm = (void *)(long)ctx->data_meta;
	if ((void *)(mm + 1) > (void *)(long)ctx->data)
		return -1;
	mm->magic = XFW_MARK_META_MAGIC;
	mm->mark = mark;
	return 0;
}

/* xfw_mark_meta_take gives skb the mark the XDP hook left in front of its
 * metadata, if any (and takes it off), and returns where the rest of the
 * metadata starts. */
static __always_inline void *xfw_mark_meta_take(struct __sk_buff *skb)
{
	struct xfw_mark_meta *mm = (void *)(long)skb->data_meta;

	if ((void *)(mm + 1) > (void *)(long)skb->data || mm->magic != XFW_MARK_META_MAGIC)
		return mm;
	mm->magic = 0;
	skb->mark = mm->mark;
	return mm + 1;
}

#endif /* XFW_MARK_ROUTE_H */
