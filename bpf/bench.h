/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bench.h — stop points for the benchmark's per-stage cost table (bench:
 * xfwbench -progrun-stages). Compiled out of every build the product
 * ships: only a build with -DXFW_BENCH_STOP=n (the benchmark compiles one
 * object per stage) returns at stop point n, so BPF_PROG_TEST_RUN times
 * the hook up to that stage; differences of consecutive stops are each
 * stage's cost. The stop points, in the order a packet meets them, are
 * enum xfw_bench_stop.
 *
 * Includes: nothing.
 */
#ifndef XFW_BENCH_H
#define XFW_BENCH_H

/* Stop points of the XDP hook (bench/stages.go names them). */
enum xfw_bench_stop {
	XFW_BS_ENTER = 1, /* quiescence count and the scratch lookup */
	XFW_BS_PARSE,     /* the parser */
	XFW_BS_SLOT,      /* the generation lookup */
	XFW_BS_OPTS,      /* -m tcpmss value, IPv4 options, IPv6 hop-by-hop */
	XFW_BS_DEVICE,    /* the device (xfw_ifinfo), MAC checks */
	XFW_BS_NATPRE,    /* a translated connection's DNAT before routing */
	XFW_BS_FIB,       /* martian checks and bpf_fib_lookup (route.h) */
	XFW_BS_ROUTE,     /* the rest of the chain choice: INPUT or FORWARD */
	XFW_BS_FIELDS,    /* conntrack, IPv6 headers, predicates, IPv4 header */
	XFW_BS_WALKSETUP, /* xfw_classify's set-up */
	XFW_BS_RESOLVE,   /* value → class of the active fields */
	XFW_BS_WALK,      /* the bpf_loop walk */
	XFW_BS_JUDGE,     /* counters and the verdict's entry or policy */
	XFW_BS_BARE,      /* nothing: the test-run harness alone (checked
			   * first, before XFW_BS_ENTER's work) */
};

#ifdef XFW_BENCH_STOP
/* -DXFW_BENCH_DROP: the XDP hook's stops return XDP_DROP, not XDP_PASS,
 * so a flood (bench: xfwbench -sections xdpdrop) is dropped at the stop
 * and the rig times the hook up to it (the stops inside the classifier
 * return its own results, unchanged). */
#ifdef XFW_BENCH_DROP
#define XFW_BENCH_RET(ret) ((ret) == XDP_PASS ? XDP_DROP : (ret))
#else
#define XFW_BENCH_RET(ret) (ret)
#endif
#define XFW_BENCH_AT(stop, ret)                  \
	do {                                     \
		if (XFW_BENCH_STOP == (stop))    \
			return XFW_BENCH_RET(ret); \
	} while (0)
/* XFW_BENCH_AFTER returns ret at stop point stop when the build stops
 * there or at an earlier point inside a function it called (which
 * returned early to it). */
#define XFW_BENCH_AFTER(first, stop, ret)                                     \
	do {                                                                  \
		if (XFW_BENCH_STOP >= (first) && XFW_BENCH_STOP <= (stop))    \
			return XFW_BENCH_RET(ret);                            \
	} while (0)
#else
#define XFW_BENCH_AFTER(first, stop, ret) \
	do {                              \
	} while (0)
#define XFW_BENCH_AT(stop, ret) \
	do {                    \
	} while (0)
#endif

#endif /* XFW_BENCH_H */
