/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_structs.h — connection tracking's own layouts and limits (ct.h and
 * its parts): the per-packet tracking scratch (struct xfw_ct_scratch) with
 * the TCP segment's facts, the connection facts kept across REJECT's reply
 * and the loopback handoff, the sweep's bookkeeping, and the TCP flag bits
 * every part reads. The connection tables' key and value, shared with user
 * space, are in xfw_structs.h.
 *
 * Includes: common.h, xfw_structs.h.
 */
#ifndef XFW_CT_STRUCTS_H
#define XFW_CT_STRUCTS_H

#include <linux/types.h>
#include "common.h"
#include "xfw_structs.h"

/* Bytes of the transport header copied for TCP (header and options) or of
 * an ICMP error's quoted packet (IPv4 header with options, or IPv6 header,
 * and 8 bytes of its transport header). */
#define XFW_CT_BUF 128
/* The ICMP/ICMPv6 header before an error's quoted packet. */
#define XFW_CT_ICMP_HLEN 8
#define XFW_CT_BUF_MASK (XFW_CT_BUF - 1)

/* Extension headers of an ICMPv6 error's quoted packet walked at most. */
#define XFW_CT_INNER_EXTS 4

/* What waits for the verdict (xfw_ct_scratch.pending). */
#define XFW_CTP_NONE 0
#define XFW_CTP_CREATE 1 /* insert .nv under .key when accepted */

/* Facts of the TCP segment in the scratch buffer. */
struct xfw_tcp_seg {
	__u32 seq, ack, sack, end, win;
	__u32 doff;   /* header length in bytes */
	__u8 flags;
	__u8 index;   /* XFW_TI_* */
	__u8 opt_wscale;  /* window scale option (0 when absent) */
	__u8 opt_flags;   /* XFW_CT_TCPF_WINDOW_SCALE | _SACK_PERM seen */
	__u32 max_sack;   /* highest SACK block right edge (valid if has_sack) */
	__u8 has_sack;
};

/* A packet's connection facts (struct xfw_pkt's ct fields), kept across
 * the parse of REJECT's reply, which the offending packet's connection
 * may be attached to (xfw_ct_reply). */
struct xfw_ct_facts {
	__u64 osrc_hi, osrc_lo, odst_hi, odst_lo;
	__u32 ct, osport, odport, rsport, rdport;
	__u32 pad;
};

/* A loopback packet's fingerprint: the key of the loopback handoff
 * (xfw_ct_lo_handoff). */
struct xfw_ct_lo_key {
	__u64 src_hi, src_lo, dst_hi, dst_lo;
	__u8 head[16];   /* the first bytes copied into cs->buf (xfw_ct_copy_len) */
	__u32 l4len;
	__u16 icmp;      /* ICMP type << 8 | code */
	__u8 proto;
	__u8 fam;
};

/* An ICMP error's quoted packet, as xfw_ct_related decoded it for
 * xfw_ct_quoted. */
struct xfw_ct_quote {
	__u64 shi, slo, dhi, dlo; /* source and destination addresses */
	__u32 hl;                 /* offset of its transport header in buf */
	__u32 proto;              /* its transport protocol */
	__u32 ol4;                /* its length from its IP header */
	__u32 pad;
};

/* Chunks of an SCTP packet with a row in the kernel's transition table
 * (INIT, ABORT, HEARTBEAT, ...) that xfw_sctp_chunks records; a packet
 * with more is INVALID (fail closed). Any packet of a 2,048-byte transport
 * length or less fits (its chunks take 4 bytes each at least). */
#define XFW_SCTP_RECS 512
#define XFW_SCTP_RECS_MASK (XFW_SCTP_RECS - 1)

/* An SCTP packet's chunks as the hook's walk of the whole packet found
 * them (ct_sctp.h xfw_sctp_scan), for the tracker, which has no access to
 * the packet: do_basic_checks' outcome and the chunks the passes of
 * sctp_new and nf_conntrack_sctp_packet act on, in order. */
struct xfw_sctp_chunks {
	__u32 ok;     /* 1: walked to the end, do_basic_checks passed */
	__u32 map;    /* the chunk types seen (below 32) */
	__u32 other;  /* a chunk without a row (DATA, SACK, ...) seen */
	__u32 n;      /* records in rec */
	/* The scan's position while it runs. */
	__u32 off;    /* the next chunk's offset from the transport header */
	__u32 count;  /* chunks walked */
	__u32 flag;   /* an INIT, INIT ACK or SHUTDOWN COMPLETE seen */
	__u32 pad;
	__u8 rec[XFW_SCTP_RECS][2]; /* each recorded chunk's type and flags */
};

/* An SCTP packet's passes over its recorded chunks (ct_sctp.h): what they
 * keep from chunk to chunk. */
struct xfw_sctp_walk {
	__u32 pass;   /* XFW_SCTP_PASS_* */
	__u32 dir;    /* the packet's direction */
	__u32 ignore; /* PASS_STATE: accept without refreshing the timeout */
	__u32 pad;
};

/* Per-packet tracking state: one per CPU and hook (index 0 XDP, 1 TC). */
struct xfw_ct_scratch {
	struct xfw_ct_key key;
	__u64 nv_pad;     /* with nv: the image of an xfw_ct_emb/xfw_ct_main value */
	struct xfw_ct_val nv;
	__u8 buf[XFW_CT_BUF];
	__u32 buflen;     /* valid bytes of buf */
	__u32 l4len;      /* bytes from the transport header to the packet's end */
	__u32 pending;    /* XFW_CTP_* */
	__u32 hook;       /* this scratch's index (xfw_ct_scratch_get) */
	__u32 stack_icmp; /* TC: the packet comes from the stack's ICMP socket */
	struct xfw_tcp_seg seg; /* TCP: the segment's facts (xfw_tcp_seg_read) */
	struct xfw_ct_facts orig; /* TC REJECT: the offending packet's facts */
	__u32 attached;   /* TC: the state is an attached connection's (no entry) */
	__u32 amark;      /* an attached connection's mark (connmark.h), 0 per packet */
	__u32 pre_state;  /* xfw_ct_track: an entry's state before it advances,
			   * here as the tracker's chain has no stack to spare */
	struct xfw_ct_lo_key lokey; /* the loopback handoff's key */
	struct xfw_ct_quote quote; /* xfw_ct_related's decoded quote */
	struct xfw_sctp_walk sw;   /* SCTP: the passes over the chunks (ct_sctp.h) */
	struct xfw_sctp_chunks sc; /* SCTP: the packet's chunks (ct_sctp.h) */
};

/* The sweep's bookkeeping (map xfw_ct_sweep; see xfw_ct_sweep_main). */
struct xfw_ct_sweep {
	__u64 last;     /* jiffies of the last walk */
	__u64 deleted;  /* entries the walks deleted (statistics) */
};

#endif /* XFW_CT_STRUCTS_H */
