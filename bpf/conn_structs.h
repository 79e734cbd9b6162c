/* SPDX-License-Identifier: GPL-2.0 */
/*
 * conn_structs.h — the layouts of the connection matches' state: the
 * connlimit lists (connlimit.h) and the --ctexpire ranges (ctexpire.h),
 * shared with user space (internal/dataplane connlimit.go, ctexpire.go).
 *
 * Includes: xfw_structs.h.
 */
#ifndef XFW_CONN_STRUCTS_H
#define XFW_CONN_STRUCTS_H

#include <linux/types.h>
#include "xfw_structs.h"

/* Connections one list holds (internal/compiler ConnlimitSlots). */
#define XFW_CONNLIMIT_SLOTS 64

struct xfw_connlimit_key {
	__u64 hi, lo;  /* the masked address (IPv4 in lo's low 32 bits) */
	__u32 slot;    /* generation slot */
	__u16 index;   /* the match's index in the generation */
	__u8 fam;
	__u8 pad;
};

/* A connection counted: its key in the connection tables, and when and
 * where it was added. */
struct xfw_connlimit_conn {
	struct xfw_ct_key key;
	__u32 added;   /* jiffies, low 32 bits */
	__u32 cpu;
};

struct xfw_connlimit_list {
	__u64 lock;    /* xfw_ct_lock */
	__u32 n;       /* connections in conn[0..n), in the order added */
	__u32 pad;
	struct xfw_connlimit_conn conn[XFW_CONNLIMIT_SLOTS];
};

/* The evaluator's state (per CPU): the stack of xfw_probe is short. */
struct xfw_connlimit_scratch {
	struct xfw_connlimit_key key;
	__u32 kept;    /* connections kept so far (the write index) */
	__u32 found;   /* the packet's connection is in the list */
	__u32 now32;
	__u32 cpu;
	__u32 hook;
	__u32 has_own; /* the packet has a connection: own is its key */
	struct xfw_ct_key own;
	struct xfw_connlimit_list empty; /* a new list's image */
};

struct xfw_ctexpire {
	__u32 min, max; /* seconds, inclusive */
	__u32 invert;   /* ! --ctexpire */
	__u32 pad;
};

#endif /* XFW_CONN_STRUCTS_H */
