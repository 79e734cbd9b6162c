/* SPDX-License-Identifier: GPL-2.0 */
/*
 * iter.h — the kernel's numeric open-coded iterator (bpf_iter_num_*
 * kfuncs, Linux 6.4 on) for loops whose body the verifier would otherwise
 * check once per iteration.
 *
 * A bounded loop (for i < N) is verified by walking it: every iteration
 * again, as its counter differs. A loop driven by bpf_iter_num_next is
 * verified until the state at its head stops changing (the counter is a
 * value the verifier does not know), usually two or three passes of the
 * body. The body must then not need the counter's exact value (no index
 * from it without a mask or a bound check). Each iteration costs a kfunc
 * call: for loops that rarely run more than once, not per-packet walks.
 *
 * Includes: nothing of xfw's.
 */
#ifndef XFW_ITER_H
#define XFW_ITER_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

/* The kernel's struct bpf_iter_num (uapi linux/bpf.h since 6.4): the
 * verifier knows it by name and size. */
struct bpf_iter_num {
	__u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

#endif /* XFW_ITER_H */
