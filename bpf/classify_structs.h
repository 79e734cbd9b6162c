/* SPDX-License-Identifier: GPL-2.0 */
/*
 * classify_structs.h — the classifier's own layouts and limits (stages 2
 * and 3: classify.h, set_lookup.h): what the hook and the search share,
 * the search's state, the set lookups' walk and findings, the statistics
 * slots. None is seen by user space (those are in xfw_structs.h).
 *
 * Includes: common.h, xfw_structs.h.
 */
#ifndef XFW_CLASSIFY_STRUCTS_H
#define XFW_CLASSIFY_STRUCTS_H

#include <linux/types.h>
#include "common.h"
#include "xfw_structs.h"

/* Pending LOG events per packet; more LOG rules matching one packet than
 * this are counted in stats but not logged. */
#define XFW_MAX_PENDING_LOGS 8

/* Results of a search besides an entry index. */
#define XFW_RES_END 0xffffffffu     /* fell off the chain: policy */
#define XFW_RES_HOTDROP 0xfffffffeu /* hotdropped: DROP, uncounted */

/* Binary search steps for the address fields: 2^22 interval bounds. */
#define XFW_BSEARCH_STEPS 22
#define XFW_MAX_BOUNDS (1u << XFW_BSEARCH_STEPS)

/* What the hook and xfw_classify share: the generation slot the hook chose
 * (in), the LOG entries the packet met (out; the hook owns the context
 * needed to copy the packet). */
struct xfw_pending {
	__u32 slot;
	__u32 hook;    /* the xfw_xdp_scratch entry holding the packet
			* (XFW_SCRATCH_XDP or _TC, xfw_maps.h): the probes
			* read the packet there (probe.h) */
	__u32 nlogs;
	__u32 logs[XFW_MAX_PENDING_LOGS];
	/* The packet's mark when each of .logs was met (LOG prints it as
	 * MARK=, as the kernel prints skb->mark at the rule). */
	__u32 log_marks[XFW_MAX_PENDING_LOGS];
	/* The rewrites' view of the packet at each of .logs (XFW_LOGV_*). */
	__u32 log_views[XFW_MAX_PENDING_LOGS];
	/* DNAT (nat.h): 1 + the entry the walk starts from instead of the
	 * chain's start (0: the start), set by the hook; the DNAT entry's
	 * address and port, set by xfw_judge. */
	__u32 start;
	__u32 nat_addr;
	__u32 nat_port;
	/* nat OUTPUT's DNAT (nat_out.h): 1 + the entry the walk stops
	 * before (0: the chain's end), set by the hook. */
	__u32 end;
	/* The mark the packet was routed with at XDP (the one PREROUTING
	 * left it: xfw.c xfw_xdp_mark_out). */
	__u32 route_mark;
	/* The TTL (hop limit) and TOS the walk from the start at XDP began
	 * with, for the reroute probe of a walk whose PREROUTING has a TTL
	 * or HL, a TOS or DSCP rule (probe.h XFW_PROBE_MARKMOVED, arg
	 * XFW_REROUTE_TTL, XFW_REROUTE_TOS). */
	__u16 route_ttl;
	__u16 route_tos;
	/* XFW_RAWPRE_*: the PREROUTING chains judged before the route
	 * lookup (xfw.c xfw_xdp_rawpre) accepted the packet, and a notrack
	 * rule among them exempted it from tracking; the walk after routing
	 * resumes past them. Set by the XDP hook for every packet. */
	__u32 raw_done;
	/* XFW_SRR_* (parse.h): the IPv4 source route option the input
	 * device's accept_source_route let through, which xfw_route judges
	 * by the packet's route as ip_options_rcv_srr does (0: none). Set
	 * by the XDP hook for every packet. */
	__u32 srr;
	/* XFW_RPF_* (common.h): the input device's rp_filter and
	 * src_valid_mark, set by the XDP hook for every packet; xfw_route
	 * adds XFW_RPF_UNSURE when it could not make the reverse-path
	 * check (route.h xfw_rpf_refused). */
	__u32 rpf;
	/* The generation's positions after those chains, per walk (INPUT,
	 * FORWARD; xfw_family_cfg.raw_pre), copied by the XDP hook when it
	 * looks the generation up (xfw.c xfw_xdp_slot). */
	__u32 pre_at[2];
	/* The INPUT walk's position after them when they only count
	 * (xfw_family_cfg.pre_passive; pre_at[INPUT] then 0): walked for a
	 * packet the routing drops alone (xfw.c xfw_xdp_unrouted). */
	__u32 pre_lazy;
	/* 1 while the walk is that of a packet the routing dropped, up to
	 * the end of the INPUT walk's PREROUTING segments (xfw.c
	 * xfw_xdp_unrouted_walk); 0 once a DNAT or a mark routed it. */
	__u32 unrouted;
	/* The terminal entry's action, flags, .aux and .next, set by
	 * xfw_classify when the walk ends at one (xfw_judge reads them
	 * instead of the entry). */
	__u32 term_action;
	__u32 term_flags;
	__u32 term_aux;
	__u32 term_next;
};

/* The walk's state (classify.h): in the hook's per-CPU scratch
 * (xfw_xdp_scratch, xfw_maps.h), since one word per classification field
 * would not fit the deepest call chain's 512 bytes of stack; bpf_loop's
 * context on xfw_classify's stack is a struct xfw_walk pointing here. */
struct xfw_cls {
	__u32 cls[XFW_NFIELDS];
	__u32 pos;
	__u32 end;
	__u32 result;
	__u32 l3len;
	__u16 hotdrop; /* XFW_EF_HOTDROP_* defects of the packet */
	__u16 nlogs;   /* at most XFW_MAX_HOPS */
	__u16 hook;    /* xfw_pending.hook */
	__u32 logs[XFW_MAX_PENDING_LOGS];
	__u32 log_marks[XFW_MAX_PENDING_LOGS]; /* xfw_pending.log_marks */
	__u32 log_views[XFW_MAX_PENDING_LOGS]; /* xfw_pending.log_views */
	__u32 chunk;   /* chunk whose summary is cached, or ~0 */
	__u32 slot;    /* generation slot (family * 2 + bank) */
	__u64 summary; /* AND of the active fields' summaries of .chunk */
	/* What xfw_and_chunk read besides the summary: the chunk id of each
	 * active field (in the order of xfw_family_cfg.fields) for chunk
	 * .ids_chunk (~0: none), so a later word of that chunk reads one
	 * element per field, not two; and the AND of word .word_j of chunk
	 * .word_chunk (~0: none), the word the walk was at when it entered
	 * the chunk. A class changed by the walk (mangle.h
	 * xfw_mangle_reclass) forgets them, as it forgets .chunk. */
	__u32 ids_chunk;
	__u32 word_chunk;
	__u32 word_j;
	/* The AND of the active fields' chunk masks of mask word .mask_w
	 * (~0: none read), xfw_next_chunk's. */
	__u32 mask_w;
	__u64 word;
	__u32 mask;
	/* The terminal entry's action and flags, .aux and .next (xfw_step). */
	__u8 term_action;
	__u8 term_flags;
	__u16 term_aux;
	__u32 term_next;
	__u32 pad3;
	__u32 ids[XFW_FIELD_LIST];
	/* The user chains' calls (XFW_ACT_CALL): .depth return positions
	 * in .stack; .base_end is the walk's end, .end while in a region
	 * is past every entry (the region's RETURN stops the search). */
	__u32 depth;
	__u32 base_end;
	__u32 unwinding; /* an ACCEPT left the regions (XFW_ACT_UNWIND) */
	__u32 pad2;
	__u32 stack[XFW_MAX_CALLS];
	/* The caller's cached .chunk and .summary per call: a RETURN
	 * restores them instead of ANDing the summaries again. */
	__u32 ret_chunk[XFW_MAX_CALLS];
	__u64 ret_summary[XFW_MAX_CALLS];
};

/* bpf_loop's context (it must be on the caller's stack): the walk's
 * state. The pointer survives there because no global function is given
 * the context (the verifier forgets what such a function may write). */
struct xfw_walk {
	struct xfw_cls *st;
};

/* What became of a packet FORWARD accepted at XDP (fastpath.h): forwarded
 * there, or passed to the stack and why. */
enum xfw_fp_why {
	XFW_FP_TAKEN = 0,     /* rewritten and redirected */
	XFW_FP_NO_TARGET = 1, /* the output device is no target (or the fast path is off) */
	XFW_FP_NO_NEIGH = 2,  /* the next hop's neighbour is not resolved */
	XFW_FP_MTU = 3,       /* longer than the route's MTU */
	XFW_FP_FRAG = 4,      /* a fragment */
	XFW_FP_NAT = 5,       /* translated connections may exist */
	XFW_FP_HEADER = 6,    /* VLAN tag, IPv4 options, hop-by-hop, TTL, hairpin */
	XFW_FP_ROUTE = 7,     /* the full route lookup answered otherwise */
	XFW_FP_STACK = 8,     /* a mark or a mangle rewrite the stack needs */
	XFW_FP_CSUM = 9,      /* a checksum left to offload, or not TCP/UDP/ICMP */
	XFW_FP_NO_SOURCE = 10, /* another user's ingress hook on the input device */
	XFW_FP_NWHY = 11,
};

/* Statistics slots (stats map, per CPU). */
enum xfw_stat {
	XFW_STAT_LOG_LOST = 0, /* LOG events not sent (ring full, too many) */
	XFW_STAT_LOOP_EXHAUSTED = 1,
	/* The trivial walks' counts (trivial.h): packets, then bytes, of
	 * generation slot s's chain c at XFW_STAT_TRIVIAL + (s * XFW_NCHAINS
	 * + c) * 2; the control plane adds them to the counters the slot's
	 * configuration lists (trivial_ctr) and zeroes them with the slot. */
	XFW_STAT_TRIVIAL = 4,
	/* The XDP fast path's outcomes (fastpath.h): XFW_STAT_FP + enum
	 * xfw_fp_why, packets. */
	XFW_STAT_FP = 28, /* XFW_STAT_TRIVIAL + 4 slots * XFW_NCHAINS * 2 */
	XFW_NSTATS = XFW_STAT_FP + XFW_FP_NWHY,
};

/* Bits of xfw_set_hlookup's result that hold the answer (the counter
 * index is above them). */
#define XFW_SET_ANSWER_BITS 2

/* Prefix-length words of a hash set table's meta keys: 129 bits. */
#define XFW_SET_PLEN_WORDS 3

/* State of one hash set lookup's walk over prefix lengths (bpf_loop). */
struct xfw_hwalk {
	struct xfw_setkey key;
	__u64 hi, lo;         /* the address, unmasked */
	__u64 words[XFW_SET_PLEN_WORDS]; /* present prefix lengths */
	__u64 now;            /* bpf_ktime_get_ns(), 0 until needed */
	__u32 idx;            /* the table's element of xfw_o_sethash */
	__u32 maxplen;        /* 32 or 128 (0: no address) */
	__u32 answer;
	__u32 ctr;            /* the answering entry's xfw_setval.ctr */
	__u32 next;           /* 1 + the longest prefix length left to try
			       * (0: none) */
	__u32 pad;
	/* The key of a written set's prefix length counts (settarget.h
	 * xfw_setw_count), off the stack: the set's collection callback's
	 * chain has no room on it. */
	struct xfw_setkey gckey;
};

/* What a packet's set lookups found, for the counting probes the
 * classification meets later (xfw_set_count): per hash lookup k, the
 * answering entry's counter (xfw_setval.ctr) above XFW_SET_ANSWER_BITS and
 * its answer below (0: nothing found). xfw_set_bits clears it for every
 * packet before its lookups; runs of one CPU do not nest (see Quiescence,
 * generation.h). Lookups of a condition that counts are hash lookups: a DXR
 * table's answer is not recorded. */
struct xfw_sethits {
	__u32 hit[XFW_MAX_SETLOOKUPS];
	/* Counting probes met by the walk, per set condition: without and
	 * with "! --update-subcounters" (xfw_set_probe). */
	__u16 probes[XFW_MAX_SETCONDS];
	__u16 probes_nosub[XFW_MAX_SETCONDS];
};

#endif /* XFW_CLASSIFY_STRUCTS_H */
