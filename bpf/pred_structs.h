/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pred_structs.h — the predicates' layouts and constants (pred.h), shared
 * with the control plane (internal/dataplane/preds.go mirrors them;
 * layouts.c exports them for its layout test).
 *
 * Includes: linux/types.h.
 */
#ifndef XFW_PRED_STRUCTS_H
#define XFW_PRED_STRUCTS_H

#include <linux/types.h>

#define XFW_PRED_MAX 64          /* answers in one 64-bit word */
#define XFW_PRED_PATMAX 128      /* XT_STRING_MAX_PATTERN_SIZE */
#define XFW_U32_MAX 10           /* XT_U32_MAXSIZE */
#define XFW_U32_SLOTS 16         /* test slots (a power of two) */
#define XFW_PKTBYTES_MAX 65536   /* bytes of a packet copied */
#define XFW_PKTBYTES_MASK 0xffff /* offsets within them */
#define XFW_PKTBYTES_CHUNK 4096  /* bytes copied per helper call */
#define XFW_SECONDS_PER_DAY 86400
#define XFW_NS_PER_SEC 1000000000ULL

/* struct xfw_pred .kind (compiler.PredKind). */
enum xfw_pred_kind {
	XFW_PRED_STRING = 0,
	XFW_PRED_U32,
	XFW_PRED_TIME,
};

/* struct xfw_pred .flags. */
#define XFW_PREDF_INVERT 1     /* string, u32: "!" */
#define XFW_PREDF_ICASE 2      /* string: --icase */
#define XFW_PREDF_CONTIGUOUS 4 /* time: --contiguous */
#define XFW_PREDF_KERNELTZ 8   /* time: --kerneltz */

/* u32 location operators (enum xt_u32_ops). */
#define XFW_U32_AND 0
#define XFW_U32_LSH 1
#define XFW_U32_RSH 2
#define XFW_U32_AT 3

/* One u32 test: location numbers with the operator before each (op[0]
 * unused), value ranges. */
struct xfw_u32_test {
	__u32 num[XFW_U32_MAX];
	__u32 min[XFW_U32_MAX];
	__u32 max[XFW_U32_MAX];
	__u8 op[XFW_U32_MAX];
	__u8 nnums, nvalues;
};

/* One predicate of a generation, element k of the slot's xfw_o_pred. */
struct xfw_pred {
	__u32 kind;  /* enum xfw_pred_kind */
	__u32 flags; /* XFW_PREDF_* */
	__u32 from, to;      /* string: offsets of the window */
	__u32 n;             /* string: pattern length; u32: tests */
	__u32 date_start, date_stop;   /* time: seconds since the epoch */
	__u32 daytime_start, daytime_stop;
	__u32 monthdays, weekdays;     /* time: bit masks */
	__s32 tz_west;       /* time: seconds west of UTC (--kerneltz) */
	__s64 tai_off;       /* time: CLOCK_TAI - CLOCK_REALTIME in ns */
	__u8 pattern[XFW_PRED_PATMAX]; /* string: folded under --icase */
	__u8 shift[256];     /* string: Horspool shift by raw byte */
	__u8 fold[256];      /* string: each byte as compared (the kernel's
			      * toupper under --icase, else itself) */
	/* u32: tests; 16 slots, 10 used: an index masked with 15 is one */
	struct xfw_u32_test tests[XFW_U32_SLOTS];
};

#endif /* XFW_PRED_STRUCTS_H */
