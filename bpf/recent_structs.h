/* SPDX-License-Identifier: GPL-2.0 */
/*
 * recent_structs.h — the recent match's constants and the layouts of its
 * maps (recent.h), shared with the control plane
 * (internal/dataplane/recent.go mirrors them; layouts.c exports them).
 *
 * Includes: linux/bpf.h.
 */
#ifndef XFW_RECENT_STRUCTS_H
#define XFW_RECENT_STRUCTS_H

#include <linux/bpf.h>

#define XFW_RECENT_LISTS 64     /* lists a namespace may have */
#define XFW_RECENT_LIST_TOT 100 /* xt_recent's ip_list_tot */
#define XFW_RECENT_STAMPS 256   /* timestamps an entry can keep */
#define XFW_RECENT_RULES 256    /* recent matches of one slot */
#define XFW_RECENT_NAME 200     /* XT_RECENT_NAME_LEN */

/* A recent probe's argument: the match's index in its slot, and this bit
 * for a probe met in FORWARD (compiler.RecentArgForward): the TTL
 * recent_mt records and compares is the one before forwarding. */
#define XFW_RC_ARG_FWD (1u << 31)

/* check_set bits (XT_RECENT_*). */
#define XFW_RC_CHECK 0x01
#define XFW_RC_SET 0x02
#define XFW_RC_UPDATE 0x04
#define XFW_RC_REMOVE 0x08
#define XFW_RC_TTL 0x10
#define XFW_RC_REAP 0x20

/* An entry's key: the list, the family (0 IPv4, 1 IPv6) and the masked
 * address (IPv4: hi 0, lo the address as a number, as struct xfw_pkt). */
struct xfw_rc_key {
	__u32 list;
	__u32 fam;
	__u64 hi, lo;
};

/* An entry (struct recent_entry): the ring of timestamps, index the next
 * slot to stamp (1 to the list's ring size), nstamps how many hold one. */
#define XFW_RC_ENT_BODY                                                         \
	__u8 ttl;                                                              \
	__u8 pad;                                                              \
	__u16 index;                                                           \
	__u16 nstamps;                                                         \
	__u16 pad2;                                                            \
	__u64 lru; /* the list's clock when last stamped: the LRU order */     \
	__u64 stamps[XFW_RECENT_STAMPS];
struct xfw_rc_ent {
	struct bpf_spin_lock lock;
	XFW_RC_ENT_BODY
};

/* The same layout with the lock as a plain word: the value a new entry is
 * written from (per-CPU maps may not hold a struct bpf_spin_lock). */
struct xfw_rc_ent_init {
	__u32 lock;
	XFW_RC_ENT_BODY
};

/* A list (struct recent_table). name[0] == 0: free. */
struct xfw_rc_list {
	__u64 clock;       /* LRU stamps handed out */
	__u64 mask_hi, mask_lo; /* the mask's bytes 0-7 and 8-15 as numbers */
	__u32 mask4;       /* its bytes 0-3 as a number (IPv4 addresses) */
	__u32 entries;     /* entries held */
	__u32 ring;        /* nstamps_max_mask: ring size less one */
	__u8 used[2];      /* the families whose running rules name it */
	__u8 pad[2];
	char name[XFW_RECENT_NAME];
};

/* A recent match of a slot's generation (struct xt_recent_mtinfo_v1). */
struct xfw_rc_rule {
	__u32 list;
	__u32 window;      /* seconds * HZ, in 32 bits as the kernel's */
	__u32 hits;        /* --hitcount */
	__u8 flags;        /* check_set */
	__u8 invert;
	__u8 dest;         /* --rdest */
	__u8 seconds;      /* --seconds given */
};

/* Per-CPU working space of the evaluator (its frame is short). */
struct xfw_rc_scratch {
	struct xfw_rc_key key;
	struct xfw_rc_key oldest;
	__u64 oldest_lru;
	__u32 list;
	__u32 found;
	struct xfw_rc_ent_init fresh;
	/* The timestamp walk of xfw_rc_hits (its bpf_loop): stamps older
	 * than since do not count; n stamps to read, hits counted, held 1
	 * when the entry has enough. */
	__u64 since;
	__u32 n, hits, held, pad;
};

#endif /* XFW_RECENT_STRUCTS_H */
