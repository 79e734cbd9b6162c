/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hashlimit_structs.h — the layouts of the hashlimit match's tables
 * (hashlimit.h), shared with the control plane
 * (internal/dataplane/hashlimit.go mirrors them).
 *
 * Includes: linux/types.h, bpf/bpf_helpers.h.
 */
#ifndef XFW_HASHLIMIT_STRUCTS_H
#define XFW_HASHLIMIT_STRUCTS_H

#include <linux/types.h>
#include <linux/bpf.h>

/* The longest table name (NAME_MAX - 1) and its field's size. */
#define XFW_HL_NAME 256

/* A probe's .arg for a hashlimit match: the table's id in the low bits,
 * the rule's own XT_HASHLIMIT_RATE_MATCH, _INVERT and _BYTES bits at the
 * top (the kernel takes those from the rule, the rest from the table). */
#define XFW_HL_ARG_TABLE 0xffffu
#define XFW_HL_ARG_RATE_MATCH (1u << 29)
#define XFW_HL_ARG_INVERT (1u << 30)
#define XFW_HL_ARG_BYTES (1u << 31)

/* Table mode bits (XT_HASHLIMIT_*). */
#define XFW_HL_DIP (1u << 0)
#define XFW_HL_DPT (1u << 1)
#define XFW_HL_SIP (1u << 2)
#define XFW_HL_SPT (1u << 3)
#define XFW_HL_BYTES (1u << 5)
#define XFW_HL_RATE_MATCH (1u << 6)

/* One table (xt_hashlimit_htable: the configuration of the rule that
 * created it), element <id> of xfw_hl_tab, written by the control plane;
 * .count changes under packets (atomics). */
struct xfw_hl_table {
	__u64 src_hi, src_lo; /* the source address mask (0: not in the key) */
	__u64 dst_hi, dst_lo; /* the destination address mask */
	__u64 credit;  /* a new entry's credit (rateinfo_init) */
	__u64 cap;     /* a packet-rate entry's credit_cap; for byte rates the
			* full bucket, CREDITS_PER_JIFFY_BYTES * HZ */
	__u64 cost;    /* credits per packet, or per chunk of a byte rate */
	__u64 cpj;     /* credits a jiffy brings */
	__u64 bfull;   /* CREDITS_PER_JIFFY_BYTES * HZ: a full byte bucket */
	__u64 refills; /* a byte-rate entry's first credit_cap (its burst) */
	__u64 expire;  /* idle jiffies before an entry expires */
	__u64 gc;      /* jiffies between garbage collections */
	__u64 born;    /* jiffies of the table's creation (its collections
			* run every gc jiffies from then: hashlimit.h) */
	__u64 count;   /* entries of the table */
	/* --hashlimit-rate-match (XFW_HL_RATE_MATCH; rateinfo_init): */
	__u64 rate;     /* user2rate or user2rate_bytes of the average */
	__u64 burst;    /* the count a window may reach */
	__u64 interval; /* the window, jiffies (interval * HZ, 32 bits) */
	__u32 max;     /* the most entries the table holds */
	__u32 mode;    /* XFW_HL_* of the table */
	__u32 fam;     /* 0 IPv4, 1 IPv6 */
	__u32 gc_done; /* the collection a full table last made up for (its
			* number from born, modulo 2^32; 0: none) */
	char name[XFW_HL_NAME];
};

/* An entry's key (dsthash_dst): the table's id, the ports and the masked
 * addresses the table's mode keeps (the rest zero). */
struct xfw_hl_key {
	__u32 table;
	__u32 ports; /* source port << 16 | destination port */
	__u64 src_hi, src_lo;
	__u64 dst_hi, dst_lo;
};

/* An entry's bucket (dsthash_ent's rateinfo and expiry), under .lock as
 * the kernel's is under its entry's spin lock. An entry of a rate-match
 * table keeps its window's count (current_rate) in .credit and whether
 * the last window went over the rate (prev_window) in .cost. */
struct xfw_hl_entry {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 expires;    /* jiffies after which it is gone */
	__u64 prev;       /* jiffies of the last packet */
	__u64 credit;
	__u64 credit_cap; /* packets: the cap; bytes: refills left */
	__u64 cost;
};

/* A new entry as written by the evaluator (struct xfw_hl_entry without
 * the lock's type: a per-CPU map may not hold a spin lock). */
struct xfw_hl_init {
	__u32 lock;
	__u32 pad;
	__u64 expires, prev, credit, credit_cap, cost;
};

#endif /* XFW_HASHLIMIT_STRUCTS_H */
