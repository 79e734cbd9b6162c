/* SPDX-License-Identifier: GPL-2.0 */
/*
 * limit.h — the limit match's token bucket (xt_limit revision 0,
 * net/netfilter/xt_limit.c), for the limit probes of the walk
 * (XFW_EF_LIMIT, classify.h).
 *
 * One bucket per limit match of the generation (struct xfw_limit, element
 * .aux of the slot's xfw_o_limit), shared by every CPU as the kernel's
 * is: per-CPU buckets would let N CPUs pass N times the rate. The update
 * is the kernel's lockless one: exchange prev for now and add the credits
 * the elapsed jiffies bring (in 32 bits, wrapping as the kernel's do),
 * cap them, take the cost if there is as much, and publish the new credit
 * with a compare-and-swap, again from the start when another CPU changed
 * it meanwhile (credits already gained are kept). The retries are bounded
 * (the verifier needs it); a packet that exhausts them is refused, never
 * given a token the bucket may not have.
 *
 * Includes: common.h, xfw_structs.h, classify_maps.h, generation.h.
 */
#ifndef XFW_LIMIT_H
#define XFW_LIMIT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_maps.h"
#include "generation.h"
#include "iter.h"

/* Compare-and-swap rounds before a packet is refused: each lost round
 * means another CPU updated the bucket in between, so this many need as
 * many CPUs hitting one rule within a few instructions. */
#define XFW_LIMIT_TRIES 32

/* One load of x, which other CPUs change (the kernel's READ_ONCE). */
#define XFW_READ_ONCE(x) (*(volatile __typeof__(x) *)&(x))

/* xfw_limit_take asks bucket k of slot for a token: 1 given, 0 refused
 * (also for a bucket the generation lacks). Inlined into the global
 * xfw_probe (probe.h), which is verified once: a frame of its own would
 * pass the 512 bytes of the deepest call chain (the hook, xfw_classify,
 * the walk's step, xfw_probe). */
static __always_inline int xfw_limit_take(__u32 slot, __u32 k)
{
	void *m = xfw_inner(&xfw_o_limit, slot);
	struct xfw_limit *b;
	__u32 gained = 0, old, credit;
	__u64 now, prev;
	struct bpf_iter_num it;

	if (!m)
		return 0;
	b = bpf_map_lookup_elem(m, &k);
	if (!b)
		return 0;
	/* Nothing to update: no credit since the last packet, this jiffy. */
	now = bpf_jiffies64();
	if ((__u32)XFW_READ_ONCE(b->credit) < b->cost && XFW_READ_ONCE(b->prev) == now)
		return 0;
	/* An iterator, not a counted loop: the verifier checks the body a
	 * few times, not XFW_LIMIT_TRIES times (iter.h). */
	bpf_iter_num_new(&it, 0, XFW_LIMIT_TRIES);
	while (bpf_iter_num_next(&it)) {
		int given = 0;

		now = bpf_jiffies64();
		prev = __sync_lock_test_and_set(&b->prev, now);
		gained += (__u32)((now - prev) * b->cpj);
		old = (__u32)XFW_READ_ONCE(b->credit);
		credit = old + gained;
		if (credit > b->cap)
			credit = b->cap;
		if (credit >= b->cost) {
			given = 1;
			credit -= b->cost;
		}
		if (__sync_val_compare_and_swap(&b->credit, (__u64)old, (__u64)credit) == old) {
			bpf_iter_num_destroy(&it);
			return given;
		}
	}
	bpf_iter_num_destroy(&it);
	return 0;
}

#endif /* XFW_LIMIT_H */
