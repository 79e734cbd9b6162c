/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct.h — connection tracking: the state -m conntrack and -m state look at,
 * judged as netfilter's nf_conntrack judges it with default sysctls.
 *
 * Where it runs: once per packet, in the hook that judges it — XDP ingress
 * for INPUT and FORWARD, TC egress for OUTPUT — before classification, and
 * only while the family's active generation uses XFW_F_CT (the kernel
 * likewise tracks a family once a rule needs it). Loopback traffic passes
 * OUTPUT and then INPUT; as in the kernel it is tracked once, at OUTPUT, and
 * INPUT sees what OUTPUT saw (xfw_ct_val.lo_state).
 *
 * Tables (common.h for the layouts):
 *   xfw_ct_new  LRU hash of connections not yet assured. A flood of new
 *               connections evicts its oldest entries, never an assured
 *               connection (the kernel's early_drop of unassured entries).
 *   xfw_ct      hash of assured connections. An entry
 *               moves here when it becomes ASSURED; when this table is full
 *               it stays in xfw_ct_new.
 * A lookup tries xfw_ct, then xfw_ct_new. An expired entry is deleted by
 * the lookup that finds it.
 *
 * What changes state: as in the kernel, a packet of a known connection
 * advances it before the filter runs (nf_conntrack_in at PREROUTING/OUTPUT);
 * a new connection's entry is created only when the verdict is ACCEPT
 * (xfw_ct_confirm; the kernel confirms after the filter), so dropped
 * packets never take table space.
 *
 * Conventions:
 *  - Times are jiffies from bpf_jiffies64(), which the JIT inlines (a load,
 *    no helper call); timeouts come in jiffies from the control plane
 *    (xfw_ct_cfg), which knows HZ.
 *  - An entry is updated under its lock (xfw_ct_lock: compare-and-swap,
 *    bounded; XDP and TC do not nest on a CPU, so the holder always runs on
 *    another CPU and finishes in microseconds).
 *  - The tracker (xfw_ct_advance), the segment reader and the ICMP error
 *    path are global functions, each verified once.
 *  - Sequence arithmetic is modulo 2^32 (xfw_before/xfw_after as the
 *    kernel's before()/after()).
 *  - Deliberate differences, documented in README: SCTP, DCCP and GRE are
 *    tracked as generic protocols; an ICMPv6 error quoting a packet with
 *    more than XFW_CT_INNER_EXTS extension headers, or whose transport
 *    header lies beyond the XFW_CT_BUF quoted bytes, is INVALID; checksums
 *    are not verified.
 */
#ifndef XFW_CT_H
#define XFW_CT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"

/* Default table sizes; the control plane may resize before loading. */
#define XFW_CT_MAX 262144
#define XFW_CT_NEW_MAX 65536

/* Timeout slots of xfw_ct_cfg.timeout: the TCP states (enum
 * xfw_tcp_state, RETRANS and UNACK included), then these. */
#define XFW_CTT_UDP_UNREPLIED XFW_TCP_TIMEOUT_MAX
#define XFW_CTT_UDP_REPLIED (XFW_TCP_TIMEOUT_MAX + 1)
#define XFW_CTT_ICMP (XFW_TCP_TIMEOUT_MAX + 2)
#define XFW_CTT_GENERIC (XFW_TCP_TIMEOUT_MAX + 3)
#define XFW_CTT_UDP_STREAM (XFW_TCP_TIMEOUT_MAX + 4) /* 2 s: "still active" */
#define XFW_CTT_ICMPV6 (XFW_TCP_TIMEOUT_MAX + 5) /* nf_conntrack_icmpv6_timeout */
#define XFW_CTT_N (XFW_TCP_TIMEOUT_MAX + 6)

/* Tracking settings, filled by the control plane (internal/dataplane). */
struct xfw_ct_cfg {
	__u64 timeout[XFW_CTT_N];     /* jiffies */
	__u32 tcp_loose;              /* nf_conntrack_tcp_loose (1) */
	__u32 tcp_liberal;            /* nf_conntrack_tcp_be_liberal (0) */
	__u32 tcp_max_retrans;        /* nf_conntrack_tcp_max_retrans (3) */
	__u32 tcp_ignore_invalid_rst; /* nf_conntrack_tcp_ignore_invalid_rst (0) */
	__u32 ready;                  /* 1 once filled */
	__u32 hz;                     /* jiffies per second (for user space) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ct_cfg);
	__uint(max_entries, 1);
} xfw_ct_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct xfw_ct_key);
	__type(value, struct xfw_ct_entry);
	__uint(max_entries, XFW_CT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xfw_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_ct_key);
	__type(value, struct xfw_ct_entry);
	__uint(max_entries, XFW_CT_NEW_MAX);
} xfw_ct_new SEC(".maps");

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
	__u32 pad2;
	struct xfw_ct_lo_key lokey; /* the loopback handoff's key */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ct_scratch);
	__uint(max_entries, 2);
} xfw_ct_scratch SEC(".maps");

/* TCP flag bits (byte 13 of the header). */
#define XFW_TH_FIN 0x01
#define XFW_TH_SYN 0x02
#define XFW_TH_RST 0x04
#define XFW_TH_PSH 0x08
#define XFW_TH_ACK 0x10
#define XFW_TH_URG 0x20
#define XFW_TH_ECE 0x40
#define XFW_TH_CWR 0x80

/* Flag indexes of the transition table (the kernel's tcp_bit_set). */
#define XFW_TI_SYN 0
#define XFW_TI_SYNACK 1
#define XFW_TI_FIN 2
#define XFW_TI_ACK 3
#define XFW_TI_RST 4
#define XFW_TI_NONE 5

/* struct xfw_ct_tcp_side.flags (IP_CT_TCP_FLAG_*). */
#define XFW_CT_TCPF_WINDOW_SCALE 0x01
#define XFW_CT_TCPF_SACK_PERM 0x02
#define XFW_CT_TCPF_CLOSE_INIT 0x04
#define XFW_CT_TCPF_BE_LIBERAL 0x08
#define XFW_CT_TCPF_DATA_UNACKNOWLEDGED 0x10
#define XFW_CT_TCPF_MAXACK_SET 0x20
/* xfw_ct_val.last_flags only. */
#define XFW_CT_EXP_CHALLENGE_ACK 0x40
#define XFW_CT_SIMULTANEOUS_OPEN 0x80

/* TCP_MAX_WSCALE */
#define XFW_TCP_MAX_WSCALE 14
/* MAXACKWINCONST: the smallest window an ACK may lag behind. */
#define XFW_MAXACKWINCONST 66000

/* TCP option kinds. */
#define XFW_TCPOPT_EOL 0
#define XFW_TCPOPT_NOP 1
#define XFW_TCPOPT_WINDOW 3
#define XFW_TCPOPT_SACK_PERM 4
#define XFW_TCPOPT_SACK 5
/* Options parsed at most (40 bytes of options, 1 byte each at worst). */
#define XFW_TCP_MAX_OPTS 40

/* The kernel's transition table, tcp_conntracks[dir][index][state]:
 * XFW_TCP_MAX marks an invalid packet, XFW_TCP_IGNORE one to let through
 * without changing state. */
#define sNO XFW_TCP_NONE
#define sSS XFW_TCP_SYN_SENT
#define sSR XFW_TCP_SYN_RECV
#define sES XFW_TCP_ESTABLISHED
#define sFW XFW_TCP_FIN_WAIT
#define sCW XFW_TCP_CLOSE_WAIT
#define sLA XFW_TCP_LAST_ACK
#define sTW XFW_TCP_TIME_WAIT
#define sCL XFW_TCP_CLOSE
#define sS2 XFW_TCP_SYN_SENT2
#define sIV XFW_TCP_MAX
#define sIG XFW_TCP_IGNORE
static const volatile __u8 xfw_tcp_trans[2][6][10] = {
	{
		/* ORIGINAL: sNO, sSS, sSR, sES, sFW, sCW, sLA, sTW, sCL, sS2 */
		/* syn */ { sSS, sSS, sIG, sIG, sIG, sIG, sIG, sSS, sSS, sS2 },
		/* synack */ { sIV, sIV, sSR, sIV, sIV, sIV, sIV, sIV, sIV, sSR },
		/* fin */ { sIV, sIV, sFW, sFW, sLA, sLA, sLA, sTW, sCL, sIV },
		/* ack */ { sES, sIV, sES, sES, sCW, sCW, sTW, sTW, sCL, sIV },
		/* rst */ { sIV, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL },
		/* none */ { sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV },
	},
	{
		/* REPLY: sNO, sSS, sSR, sES, sFW, sCW, sLA, sTW, sCL, sS2 */
		/* syn */ { sIV, sS2, sIV, sIV, sIV, sIV, sIV, sSS, sIV, sS2 },
		/* synack */ { sIV, sSR, sIG, sIG, sIG, sIG, sIG, sIG, sIG, sSR },
		/* fin */ { sIV, sIV, sFW, sFW, sLA, sLA, sLA, sTW, sCL, sIV },
		/* ack */ { sIV, sIG, sSR, sES, sCW, sCW, sTW, sTW, sCL, sIG },
		/* rst */ { sIV, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL },
		/* none */ { sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV },
	},
};
#undef sNO
#undef sSS
#undef sSR
#undef sES
#undef sFW
#undef sCW
#undef sLA
#undef sTW
#undef sCL
#undef sS2
#undef sIV
#undef sIG

/* Valid combinations of FIN, SYN, RST, ACK and URG (tcp_valid_flags):
 * bit i set when combination i is valid. */
#define XFW_TCP_VALID_FLAGS ((1ULL << 0x02) | (1ULL << 0x22) | (1ULL << 0x12) | \
			     (1ULL << 0x04) | (1ULL << 0x14) | (1ULL << 0x11) | \
			     (1ULL << 0x31) | (1ULL << 0x10) | (1ULL << 0x30))

static __always_inline int xfw_before(__u32 a, __u32 b)
{
	return (__s32)(a - b) < 0;
}

static __always_inline int xfw_after(__u32 a, __u32 b)
{
	return (__s32)(b - a) < 0;
}

/* xfw_ix masks a buffer index in a way the compiler keeps (it would drop a
 * mask an earlier bound makes redundant, which the verifier may not have
 * followed). */
static __always_inline __u32 xfw_ix(__u32 i)
{
	xfw_barrier_var(i);
	return i & XFW_CT_BUF_MASK;
}

static __always_inline __u32 xfw_rd32(const __u8 *b, __u32 off)
{
	off &= XFW_CT_BUF_MASK - 3;
	return ((__u32)b[off] << 24) | ((__u32)b[off + 1] << 16) |
	       ((__u32)b[off + 2] << 8) | (__u32)b[off + 3];
}

static __always_inline __u32 xfw_rd16(const __u8 *b, __u32 off)
{
	off &= XFW_CT_BUF_MASK - 1;
	return ((__u32)b[off] << 8) | (__u32)b[off + 1];
}

static __always_inline __u8 xfw_tcp_index(__u8 f)
{
	if (f & XFW_TH_RST)
		return XFW_TI_RST;
	if (f & XFW_TH_SYN)
		return (f & XFW_TH_ACK) ? XFW_TI_SYNACK : XFW_TI_SYN;
	if (f & XFW_TH_FIN)
		return XFW_TI_FIN;
	if (f & XFW_TH_ACK)
		return XFW_TI_ACK;
	return XFW_TI_NONE;
}

/* State of the TCP option walk (bpf_loop context). */
struct xfw_opt_walk {
	__u32 hook; /* scratch index */
	__u32 i;    /* offset of the next option in the header */
	__u32 end;  /* end of the options */
};

/* xfw_tcp_opt_step reads the option at w->i: a bpf_loop callback, so the
 * verifier checks one option, not every path through forty. Returns 1 to
 * stop. */
static long xfw_tcp_opt_step(__u64 n, void *ctx)
{
	struct xfw_opt_walk *w = ctx;
	struct xfw_ct_scratch *cs = bpf_map_lookup_elem(&xfw_ct_scratch, &w->hook);
	struct xfw_tcp_seg *s;
	__u32 i = w->i, end = w->end;
	__u8 kind, len;

	if (!cs || i >= end || end > 60)
		return 1;
	s = &cs->seg;
	kind = cs->buf[i & 63];
	if (kind == XFW_TCPOPT_EOL)
		return 1;
	if (kind == XFW_TCPOPT_NOP) {
		w->i = i + 1;
		return 0;
	}
	if (end - i < 2)
		return 1;
	len = cs->buf[(i + 1) & 63];
	if (len < 2 || len > end - i)
		return 1;
	if (kind == XFW_TCPOPT_SACK_PERM && len == 2) {
		s->opt_flags |= XFW_CT_TCPF_SACK_PERM;
	} else if (kind == XFW_TCPOPT_WINDOW && len == 3) {
		__u8 ws = cs->buf[(i + 2) & 63];

		s->opt_wscale = ws > XFW_TCP_MAX_WSCALE ? XFW_TCP_MAX_WSCALE : ws;
		s->opt_flags |= XFW_CT_TCPF_WINDOW_SCALE;
	} else if (kind == XFW_TCPOPT_SACK && len >= 10 && ((len - 2) % 8) == 0 && !s->has_sack) {
		/* tcp_sack reads the first SACK option only: up to four
		 * blocks, the right edge the second word of each. */
		for (int b = 0; b < 4; b++) {
			__u32 edge;

			if (2 + b * 8 + 8 > len)
				break;
			edge = xfw_rd32(cs->buf, i + 2 + b * 8 + 4);
			if (!s->has_sack || xfw_after(edge, s->max_sack))
				s->max_sack = edge;
			s->has_sack = 1;
		}
	}
	w->i = i + len;
	return 0;
}

/* xfw_tcp_options walks the options once, as tcp_options() and tcp_sack()
 * do: window scale, SACK permitted and the SACK blocks' right edges. */
static __always_inline void xfw_tcp_options(struct xfw_ct_scratch *cs, struct xfw_tcp_seg *s)
{
	struct xfw_opt_walk w = { .hook = cs->hook, .i = 20, .end = s->doff };
	__u32 tsopt = 0x0101080a; /* NOP NOP TIMESTAMP 10: the fast path */

	s->opt_wscale = 0;
	s->opt_flags = 0;
	s->has_sack = 0;
	if (w.end > cs->buflen)
		w.end = cs->buflen;
	if (w.end > 60)
		w.end = 60;
	if (w.end <= 20)
		return;
	/* tcp_sack's fast path: a timestamp alone says nothing about SACK;
	 * tcp_options would find no window scale or SACK_PERM in it either. */
	if (w.end == 32 && xfw_rd32(cs->buf, 20) == tsopt)
		return;
	bpf_loop(XFW_TCP_MAX_OPTS, xfw_tcp_opt_step, &w, 0);
}

static __always_inline __u32 xfw_ct_maxackwin(struct xfw_ct_tcp_side *sender)
{
	return sender->maxwin > XFW_MAXACKWINCONST ? sender->maxwin : XFW_MAXACKWINCONST;
}

/* xfw_tcp_init_sender: a SYN-ACK answering a SYN, or a SYN from the reply
 * direction in a simultaneous open (tcp_init_sender). */
static __always_inline void xfw_tcp_init_sender(struct xfw_ct_tcp_side *sender,
						struct xfw_ct_tcp_side *receiver,
						struct xfw_tcp_seg *s, __u32 dir)
{
	sender->end = s->end;
	sender->maxend = s->end;
	sender->maxwin = s->win == 0 ? 1 : s->win;
	if (s->doff > 20) {
		sender->scale = s->opt_wscale;
		sender->flags = (sender->flags & XFW_CT_TCPF_BE_LIBERAL) | s->opt_flags;
	}
	if (dir == 1 && !((sender->flags & XFW_CT_TCPF_WINDOW_SCALE) &&
			  (receiver->flags & XFW_CT_TCPF_WINDOW_SCALE))) {
		sender->scale = 0;
		receiver->scale = 0;
	}
}

#define XFW_TCP_ACCEPT 0
#define XFW_TCP_IGNORE_PKT 1
#define XFW_TCP_INVALID 2

/* xfw_tcp_liberal applies nf_tcp_log_invalid: a liberal sender's bad
 * segments pass. */
static __always_inline int xfw_tcp_liberal(struct xfw_ct_tcp_side *sender, struct xfw_ct_cfg *cfg,
					   int res)
{
	if ((sender->flags & XFW_CT_TCPF_BE_LIBERAL) || cfg->tcp_liberal)
		return XFW_TCP_ACCEPT;
	return res;
}

/* xfw_tcp_in_window is the kernel's tcp_in_window. */
static __always_inline int xfw_tcp_in_window(struct xfw_ct_val *v, __u32 dir, struct xfw_tcp_seg *s,
					     struct xfw_ct_cfg *cfg)
{
	struct xfw_ct_tcp_side *sender = &v->side[dir & 1];
	struct xfw_ct_tcp_side *receiver = &v->side[(dir & 1) ^ 1];
	__u32 seq = s->seq, ack = s->ack, sack = s->ack, end = s->end, win = s->win, swin;
	int in_recv_win, seq_ok;

	if ((receiver->flags & XFW_CT_TCPF_SACK_PERM) && s->has_sack && xfw_after(s->max_sack, sack))
		sack = s->max_sack;

	if (sender->maxwin == 0) {
		if (s->flags & XFW_TH_SYN) {
			xfw_tcp_init_sender(sender, receiver, s, dir);
			if (!(s->flags & XFW_TH_ACK))
				return XFW_TCP_ACCEPT; /* simultaneous open */
		} else {
			/* Picked up mid-stream: use what the packet says. */
			sender->end = end;
			swin = win << sender->scale;
			sender->maxwin = swin == 0 ? 1 : swin;
			sender->maxend = end + sender->maxwin;
			if (receiver->maxwin == 0) {
				receiver->end = sack;
				receiver->maxend = sack;
			} else if (sack == receiver->end + 1) {
				receiver->end++; /* a reply to a keepalive */
			}
		}
	} else if ((s->flags & XFW_TH_SYN) && xfw_after(end, sender->end) &&
		   (v->tcp_state == XFW_TCP_SYN_SENT || v->tcp_state == XFW_TCP_SYN_RECV)) {
		/* Re-initialised SYN (RFC 793). */
		xfw_tcp_init_sender(sender, receiver, s, dir);
		if (dir == 1 && !(s->flags & XFW_TH_ACK))
			return XFW_TCP_ACCEPT;
	}

	if (!(s->flags & XFW_TH_ACK)) {
		ack = receiver->end;
		sack = receiver->end;
	} else if ((s->flags & (XFW_TH_ACK | XFW_TH_RST)) == (XFW_TH_ACK | XFW_TH_RST) && ack == 0) {
		/* Broken stacks send RST+ACK with ack 0. */
		ack = receiver->end;
		sack = receiver->end;
	}

	if ((s->flags & XFW_TH_RST) && seq == 0 && v->tcp_state == XFW_TCP_SYN_SENT) {
		/* RST answering a SYN. */
		seq = sender->end;
		end = sender->end;
	}

	seq_ok = xfw_before(seq, sender->maxend + 1);
	if (!seq_ok) {
		__u32 overshot = end - sender->maxend + 1;
		int ack_ok = xfw_after(sack, receiver->end - xfw_ct_maxackwin(sender) - 1);

		in_recv_win = receiver->maxwin && xfw_after(end, sender->end - receiver->maxwin - 1);
		if (in_recv_win && ack_ok && overshot <= receiver->maxwin &&
		    xfw_before(sack, receiver->end + 1)) {
			sender->end = end;
			sender->flags |= XFW_CT_TCPF_DATA_UNACKNOWLEDGED;
			return xfw_tcp_liberal(sender, cfg, XFW_TCP_IGNORE_PKT);
		}
		return xfw_tcp_liberal(sender, cfg, XFW_TCP_INVALID);
	}
	if (!xfw_before(sack, receiver->end + 1))
		return xfw_tcp_liberal(sender, cfg, XFW_TCP_INVALID); /* ACK over upper bound */
	in_recv_win = !receiver->maxwin || xfw_after(end, sender->end - receiver->maxwin - 1);
	if (!in_recv_win)
		return xfw_tcp_liberal(sender, cfg, XFW_TCP_IGNORE_PKT); /* SEQ under lower bound */
	if (!xfw_after(sack, receiver->end - xfw_ct_maxackwin(sender) - 1))
		return xfw_tcp_liberal(sender, cfg, XFW_TCP_IGNORE_PKT); /* ACK under lower bound */

	if (!(s->flags & XFW_TH_SYN))
		win <<= sender->scale;

	/* Update the sender. */
	swin = win + (sack - ack);
	if (sender->maxwin < swin)
		sender->maxwin = swin;
	if (xfw_after(end, sender->end)) {
		sender->end = end;
		sender->flags |= XFW_CT_TCPF_DATA_UNACKNOWLEDGED;
	}
	if (s->flags & XFW_TH_ACK) {
		if (!(sender->flags & XFW_CT_TCPF_MAXACK_SET)) {
			sender->maxack = ack;
			sender->flags |= XFW_CT_TCPF_MAXACK_SET;
		} else if (xfw_after(ack, sender->maxack)) {
			sender->maxack = ack;
		}
	}
	/* Update the receiver. */
	if (receiver->maxwin != 0 && xfw_after(end, sender->maxend))
		receiver->maxwin += end - sender->maxend;
	if (xfw_after(sack + win, receiver->maxend - 1)) {
		receiver->maxend = sack + win;
		if (win == 0)
			receiver->maxend++;
	}
	if (ack == receiver->end)
		receiver->flags &= ~XFW_CT_TCPF_DATA_UNACKNOWLEDGED;

	/* Retransmissions. */
	if (s->index == XFW_TI_ACK) {
		if (v->last_dir == dir && v->last_seq == seq && v->last_ack == ack &&
		    v->last_end == end && v->last_win == (__u16)s->win) {
			if (v->retrans < 255)
				v->retrans++;
		} else {
			v->last_dir = dir;
			v->last_seq = seq;
			v->last_ack = ack;
			v->last_end = end;
			v->last_win = s->win;
			v->retrans = 0;
		}
	}
	return XFW_TCP_ACCEPT;
}

/* Outcomes of xfw_tcp_packet. */
#define XFW_TCPR_OK 0      /* tracked; the packet belongs to the connection */
#define XFW_TCPR_INVALID 1 /* INVALID, state untouched */
#define XFW_TCPR_REPEAT 2  /* reopening a closed connection: start anew */
#define XFW_TCPR_KILL 3    /* tracked, then the entry dies (RST, no reply seen) */

static __always_inline int xfw_tcp_established(struct xfw_ct_val *v)
{
	return v->tcp_state == XFW_TCP_ESTABLISHED;
}

/* xfw_tcp_handle_invalid shortens an assured connection's timeout after
 * out-of-window FIN/RST answers (nf_tcp_handle_invalid). */
static __always_inline void xfw_tcp_handle_invalid(struct xfw_ct_val *v, __u32 dir, __u8 index,
						   struct xfw_ct_cfg *cfg, __u64 now)
{
	__u64 unack;

	if (!(v->status & XFW_CTST_ASSURED))
		return;
	if (index != XFW_TI_RST && index != XFW_TI_FIN)
		return;
	if (v->last_dir != dir && (v->last_index == XFW_TI_FIN || v->last_index == XFW_TI_RST)) {
		unack = cfg->timeout[XFW_TCP_UNACK];
		/* expires < 120 s: leave it; 120 s is the kernel's constant. */
		if (v->expires - now < cfg->timeout[XFW_TCP_TIME_WAIT])
			return;
		if (v->expires - now > unack)
			v->expires = now + unack;
	} else {
		v->last_index = index;
		v->last_dir = dir;
	}
}

/* xfw_tcp_packet is nf_conntrack_tcp_packet after tcp_error and tcp_new,
 * for a packet of direction dir. seen_reply is the status before this
 * packet. */
static __always_inline int xfw_tcp_packet(struct xfw_ct_val *v, __u32 dir, struct xfw_tcp_seg *s,
					  struct xfw_ct_cfg *cfg, __u64 now)
{
	__u32 old_state = v->tcp_state, new_state, idx = s->index;
	__u64 timeout, t_new;
	int res;

	if (old_state > XFW_TCP_SYN_SENT2 || idx > XFW_TI_NONE)
		return XFW_TCPR_INVALID;
	new_state = xfw_tcp_trans[dir & 1][idx][old_state];

	switch (new_state) {
	case XFW_TCP_SYN_SENT:
		if (old_state < XFW_TCP_TIME_WAIT)
			break;
		if (((v->side[dir & 1].flags | v->side[(dir & 1) ^ 1].flags) & XFW_CT_TCPF_CLOSE_INIT) ||
		    (v->last_dir == dir && v->last_index == XFW_TI_RST))
			return XFW_TCPR_REPEAT;
		/* fall through */
	case XFW_TCP_IGNORE:
		if (idx == XFW_TI_SYNACK && v->last_index == XFW_TI_SYN && v->last_dir != dir &&
		    s->ack == v->last_end) {
			/* The SYN/ACK answers a SYN we ignored: get in sync. */
			__u32 ld = v->last_dir & 1;

			old_state = XFW_TCP_SYN_SENT;
			new_state = XFW_TCP_SYN_RECV;
			v->side[ld].end = v->last_end;
			v->side[ld].maxend = v->last_end;
			v->side[ld].maxwin = v->last_win == 0 ? 1 : v->last_win;
			v->side[ld].scale = v->last_wscale;
			v->last_flags &= ~XFW_CT_EXP_CHALLENGE_ACK;
			v->side[ld].flags = v->last_flags & (XFW_CT_TCPF_WINDOW_SCALE | XFW_CT_TCPF_SACK_PERM);
			v->side[dir & 1].end = 0;
			v->side[dir & 1].maxend = 0;
			v->side[dir & 1].maxwin = 0;
			v->side[dir & 1].maxack = 0;
			v->side[dir & 1].scale = 0;
			v->side[dir & 1].flags &= XFW_CT_TCPF_BE_LIBERAL;
			break;
		}
		v->last_index = idx;
		v->last_dir = dir;
		v->last_seq = s->seq;
		v->last_end = s->end;
		v->last_win = s->win;
		if (idx == XFW_TI_SYN && dir == 0) {
			v->last_flags = 0;
			v->last_wscale = 0;
			if (s->opt_flags & XFW_CT_TCPF_WINDOW_SCALE) {
				v->last_flags |= XFW_CT_TCPF_WINDOW_SCALE;
				v->last_wscale = s->opt_wscale;
			}
			if (s->opt_flags & XFW_CT_TCPF_SACK_PERM)
				v->last_flags |= XFW_CT_TCPF_SACK_PERM;
			if (old_state == XFW_TCP_LAST_ACK)
				v->last_flags |= XFW_CT_EXP_CHALLENGE_ACK;
		}
		if (old_state == XFW_TCP_SYN_SENT && idx == XFW_TI_ACK && dir == 1)
			v->last_ack = s->ack;
		return XFW_TCPR_OK; /* ignored: passes, state unchanged */
	case XFW_TCP_MAX:
		return XFW_TCPR_INVALID;
	case XFW_TCP_TIME_WAIT:
		if (old_state == XFW_TCP_LAST_ACK && idx == XFW_TI_ACK && v->last_dir != dir &&
		    v->last_index == XFW_TI_SYN && (v->last_flags & XFW_CT_EXP_CHALLENGE_ACK)) {
			v->last_flags &= ~XFW_CT_EXP_CHALLENGE_ACK;
			return XFW_TCPR_OK; /* challenge ACK: state unchanged */
		}
		break;
	case XFW_TCP_SYN_SENT2:
		v->last_flags |= XFW_CT_SIMULTANEOUS_OPEN;
		break;
	case XFW_TCP_SYN_RECV:
		if (dir == 1 && idx == XFW_TI_ACK && (v->last_flags & XFW_CT_SIMULTANEOUS_OPEN))
			new_state = XFW_TCP_ESTABLISHED;
		break;
	case XFW_TCP_CLOSE:
		if (idx != XFW_TI_RST)
			break;
		if (old_state == XFW_TCP_FIN_WAIT || old_state == XFW_TCP_LAST_ACK ||
		    old_state == XFW_TCP_TIME_WAIT || old_state == XFW_TCP_CLOSE ||
		    old_state == XFW_TCP_CLOSE_WAIT)
			goto in_window; /* tcp_can_early_drop */
		if ((v->side[(dir & 1) ^ 1].flags & XFW_CT_TCPF_MAXACK_SET) &&
		    v->last_index != XFW_TI_SYN) {
			__u32 seq = s->seq, maxack = v->side[(dir & 1) ^ 1].maxack;

			if (seq == 0 && !xfw_tcp_established(v))
				break;
			if (xfw_before(seq, maxack) && !cfg->tcp_ignore_invalid_rst)
				return XFW_TCPR_INVALID; /* invalid RST */
			if (!xfw_tcp_established(v) || seq == maxack)
				break;
			if (v->last_index == XFW_TI_ACK && v->last_dir == dir && seq == v->last_end)
				break;
			new_state = old_state; /* keep state for a challenge ACK */
		}
		if ((((v->status & XFW_CTST_SEEN_REPLY) && v->last_index == XFW_TI_SYN) ||
		     (!(v->status & XFW_CTST_ASSURED) && v->last_index == XFW_TI_ACK)) &&
		    s->ack == v->last_end)
			goto in_window;
		if (old_state == XFW_TCP_SYN_SENT && v->last_index == XFW_TI_ACK && v->last_dir == 1 &&
		    s->seq == v->last_ack)
			goto in_window;
		break;
	default:
		break;
	}

	res = xfw_tcp_in_window(v, dir, s, cfg);
	if (res == XFW_TCP_IGNORE_PKT)
		return XFW_TCPR_OK;
	if (res == XFW_TCP_INVALID) {
		xfw_tcp_handle_invalid(v, dir, idx, cfg, now);
		return XFW_TCPR_INVALID;
	}
in_window:
	v->last_index = idx;
	v->last_dir = dir;
	v->tcp_state = new_state;
	if (old_state != new_state && new_state == XFW_TCP_FIN_WAIT)
		v->side[dir & 1].flags |= XFW_CT_TCPF_CLOSE_INIT;

	if (new_state > XFW_TCP_SYN_SENT2)
		return XFW_TCPR_INVALID;
	t_new = cfg->timeout[new_state];
	if (v->retrans >= cfg->tcp_max_retrans && t_new > cfg->timeout[XFW_TCP_RETRANS])
		timeout = cfg->timeout[XFW_TCP_RETRANS];
	else if (idx == XFW_TI_RST)
		timeout = cfg->timeout[XFW_TCP_CLOSE];
	else if (((v->side[0].flags | v->side[1].flags) & XFW_CT_TCPF_DATA_UNACKNOWLEDGED) &&
		 t_new > cfg->timeout[XFW_TCP_UNACK])
		timeout = cfg->timeout[XFW_TCP_UNACK];
	else if (v->last_win == 0 && t_new > cfg->timeout[XFW_TCP_RETRANS])
		timeout = cfg->timeout[XFW_TCP_RETRANS];
	else
		timeout = t_new;

	if (!(v->status & XFW_CTST_SEEN_REPLY)) {
		if (s->flags & XFW_TH_RST)
			return XFW_TCPR_KILL;
		/* A retransmitted SYN does not renew the timeout. */
		if (idx == XFW_TI_SYN && old_state == XFW_TCP_SYN_SENT)
			return XFW_TCPR_OK;
		/* Picked up mid-stream without a reply: no long timeout. */
		if (new_state == XFW_TCP_ESTABLISHED && timeout > cfg->timeout[XFW_TCP_UNACK])
			timeout = cfg->timeout[XFW_TCP_UNACK];
	} else if (!(v->status & XFW_CTST_ASSURED) &&
		   (old_state == XFW_TCP_SYN_RECV || old_state == XFW_TCP_ESTABLISHED) &&
		   new_state == XFW_TCP_ESTABLISHED) {
		v->status |= XFW_CTST_ASSURED;
	}
	v->expires = now + timeout;
	return XFW_TCPR_OK;
}

/* xfw_tcp_seg_read reads the segment's facts from the scratch buffer;
 * returns 0 when tcp_error would call the packet INVALID (truncated
 * header, bad flag combination). */
__attribute__((noinline)) int xfw_tcp_seg_read(struct xfw_ct_scratch *cs)
{
	struct xfw_tcp_seg *s;
	__u8 f;

	if (!cs)
		return 0;
	s = &cs->seg;
	if (cs->buflen < 20)
		return 0;
	s->doff = (cs->buf[12] >> 4) * 4;
	if (s->doff < 20 || cs->l4len < s->doff)
		return 0;
	f = cs->buf[13];
	/* PSH, ECE and CWR go with any combination. */
	if (!((XFW_TCP_VALID_FLAGS >> (f & ~(XFW_TH_PSH | XFW_TH_ECE | XFW_TH_CWR) & 0x3f)) & 1))
		return 0;
	s->flags = f;
	s->index = xfw_tcp_index(f);
	s->seq = xfw_rd32(cs->buf, 4);
	s->ack = xfw_rd32(cs->buf, 8);
	s->win = xfw_rd16(cs->buf, 14);
	s->end = s->seq + (cs->l4len - s->doff) + ((f & XFW_TH_SYN) ? 1 : 0) +
		 ((f & XFW_TH_FIN) ? 1 : 0);
	xfw_tcp_options(cs, s);
	return 1;
}

/* xfw_tcp_new initialises a new connection's TCP data from its first
 * packet (tcp_new); returns 0 when the packet cannot open one. */
static __always_inline int xfw_tcp_new(struct xfw_ct_val *v, struct xfw_tcp_seg *s,
				       struct xfw_ct_cfg *cfg)
{
	__u32 st;

	if (s->index > XFW_TI_NONE)
		return 0;
	st = xfw_tcp_trans[0][s->index][XFW_TCP_NONE];
	if (st == XFW_TCP_SYN_SENT) {
		v->side[0].end = s->end;
		v->side[0].maxwin = s->win == 0 ? 1 : s->win;
		v->side[0].maxend = s->end;
		if (s->doff > 20) {
			v->side[0].scale = s->opt_wscale;
			v->side[0].flags = s->opt_flags;
		}
	} else if (st == XFW_TCP_ESTABLISHED && cfg->tcp_loose) {
		v->side[0].end = s->end;
		v->side[0].maxwin = s->win == 0 ? 1 : s->win;
		v->side[0].maxend = s->end + v->side[0].maxwin;
		v->side[0].flags = XFW_CT_TCPF_SACK_PERM | XFW_CT_TCPF_BE_LIBERAL;
		v->side[1].flags = XFW_CT_TCPF_SACK_PERM | XFW_CT_TCPF_BE_LIBERAL;
	} else {
		return 0;
	}
	v->last_index = XFW_TI_NONE;
	return 1;
}

/* ICMP types (RFC 792) and ICMPv6 types (RFC 4443, 2710, 4861, 3810). */
#define XFW_ICMP_ECHOREPLY 0
#define XFW_ICMP_ECHO 8
#define XFW_ICMP_MAX_TYPE 18 /* NR_ICMP_TYPES */
#define XFW_ICMP6_ECHO 128
#define XFW_ICMP6_NI_QUERY 139
#define XFW_ICMP6_NI_REPLY 140

/* xfw_icmp_is_err: the ICMP (v4) error types: unreachable, source quench,
 * redirect, time exceeded, parameter problem. */
static __always_inline int xfw_icmp_is_err(__u32 t)
{
	return t == 3 || t == 4 || t == 5 || t == 11 || t == 12;
}

/* xfw_icmp_query returns the request type of a query or reply type (the
 * kernel's invmap), or -1 when the type is neither. *reply is set for a
 * reply type. */
static __always_inline int xfw_icmp_query(__u8 fam, __u32 t, int *reply)
{
	*reply = 0;
	if (fam == 0) {
		switch (t) {
		case 8: case 13: case 15: case 17:
			return t;
		case 0:
			*reply = 1;
			return 8;
		case 14: case 16: case 18:
			*reply = 1;
			return t - 1;
		}
		return -1;
	}
	switch (t) {
	case XFW_ICMP6_ECHO:
	case XFW_ICMP6_NI_QUERY:
		return t;
	case XFW_ICMP6_ECHO + 1:
	case XFW_ICMP6_NI_REPLY:
		*reply = 1;
		return t - 1;
	}
	return -1;
}

/* xfw_icmp6_untracked: MLD, neighbour discovery and multicast router
 * discovery advertisements and solicitations (151, 152) are never
 * tracked (noct_valid_new in nf_conntrack_proto_icmpv6.c). */
static __always_inline int xfw_icmp6_untracked(__u32 t)
{
	return (t >= 130 && t <= 136) || t == 143 || t == 151 || t == 152;
}

/* xfw_ct_ports reports whether the protocol's key carries ports (TCP,
 * UDP, UDP-Lite; SCTP and DCCP are tracked as generic). */
static __always_inline int xfw_ct_ports(__u32 proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE;
}

/* xfw_ct_mkkey fills k for a packet from (shi,slo,sport) to (dhi,dlo,dport)
 * and returns 1 when the source is endpoint b. Endpoints are ordered, so
 * both directions share the key. */
static __always_inline int xfw_ct_mkkey(struct xfw_ct_key *k, __u8 fam, __u8 proto,
					__u64 shi, __u64 slo, __u16 sport,
					__u64 dhi, __u64 dlo, __u16 dport)
{
	int swap = shi > dhi || (shi == dhi && (slo > dlo || (slo == dlo && sport > dport)));

	k->fam = fam;
	k->proto = proto;
	k->pad = 0;
	if (swap) {
		k->a_hi = dhi; k->a_lo = dlo; k->a_port = dport;
		k->b_hi = shi; k->b_lo = slo; k->b_port = sport;
	} else {
		k->a_hi = shi; k->a_lo = slo; k->a_port = sport;
		k->b_hi = dhi; k->b_lo = dlo; k->b_port = dport;
	}
	return swap;
}

/* xfw_ct_mkkey_icmp fills k for an ICMP query: endpoint a is always the
 * requester, and the request type and the code are part of the key (pad:
 * type in the low byte, code in the high one), so echo and timestamp
 * queries with one id, queries each way, or echo requests with different
 * codes are different connections, as in the kernel, whose tuples carry
 * type, code and id (icmp_pkt_to_tuple; a reply keeps the request's code,
 * icmp_invert_tuple). */
static __always_inline void xfw_ct_mkkey_icmp(struct xfw_ct_key *k, __u8 fam, __u8 proto,
					      __u64 rhi, __u64 rlo, __u64 thi, __u64 tlo,
					      __u16 id, __u8 reqtype, __u8 code)
{
	k->fam = fam;
	k->proto = proto;
	k->pad = reqtype | (__u16)code << 8;
	k->a_hi = rhi; k->a_lo = rlo;
	k->b_hi = thi; k->b_lo = tlo;
	k->a_port = id;
	k->b_port = id;
}

/* xfw_ct_self reports whether k's tuple is its own inverse: both
 * endpoints the same address and port (a host talking to itself). */
static __always_inline int xfw_ct_self(const struct xfw_ct_key *k)
{
	return k->a_hi == k->b_hi && k->a_lo == k->b_lo && k->a_port == k->b_port;
}

/* Which table holds a found entry. */
#define XFW_CTT_NONE 0
#define XFW_CTT_MAIN 1
#define XFW_CTT_EMB 2

/* xfw_ct_find looks k up in both tables; an expired entry is deleted and
 * not returned. */
static __always_inline struct xfw_ct_entry *xfw_ct_find(struct xfw_ct_key *k, __u64 now,
							int *table)
{
	struct xfw_ct_entry *e;

	*table = XFW_CTT_NONE;
	e = bpf_map_lookup_elem(&xfw_ct, k);
	if (e) {
		if ((__s64)(e->v.expires - now) > 0) {
			*table = XFW_CTT_MAIN;
			return e;
		}
		bpf_map_delete_elem(&xfw_ct, k);
	}
	e = bpf_map_lookup_elem(&xfw_ct_new, k);
	if (e) {
		if ((__s64)(e->v.expires - now) > 0) {
			*table = XFW_CTT_EMB;
			return e;
		}
		bpf_map_delete_elem(&xfw_ct_new, k);
	}
	return 0;
}

/* xfw_ct_peek looks k up in both tables, expired entries included (the
 * loopback INPUT reads what OUTPUT left, xfw_ct_track). */
static __always_inline struct xfw_ct_entry *xfw_ct_peek(struct xfw_ct_key *k, int *table)
{
	struct xfw_ct_entry *e;

	*table = XFW_CTT_MAIN;
	e = bpf_map_lookup_elem(&xfw_ct, k);
	if (e)
		return e;
	*table = XFW_CTT_EMB;
	e = bpf_map_lookup_elem(&xfw_ct_new, k);
	if (!e)
		*table = XFW_CTT_NONE;
	return e;
}

static __always_inline void xfw_ct_delete(struct xfw_ct_key *k, int table)
{
	if (table == XFW_CTT_MAIN)
		bpf_map_delete_elem(&xfw_ct, k);
	else
		bpf_map_delete_elem(&xfw_ct_new, k);
}

/* Compare-and-swap attempts before updating without the lock (the holder
 * runs on another CPU; a tracker run takes well under a microsecond). */
#define XFW_CT_LOCK_TRIES 64

static __always_inline int xfw_ct_lock(__u64 *lk)
{
#pragma unroll
	for (int i = 0; i < XFW_CT_LOCK_TRIES; i++) {
		if (__sync_val_compare_and_swap(lk, 0, 1) == 0)
			return 1;
	}
	return 0;
}

static __always_inline void xfw_ct_unlock(__u64 *lk)
{
	__sync_lock_test_and_set(lk, 0);
}

static __always_inline __u32 xfw_ctv(__u32 state, __u32 reply, __u32 status, __u32 proto)
{
	return state | (reply ? XFW_CTV_DIR_REPLY : 0) |
	       ((status & 0xf) << XFW_CTV_STATUS_SHIFT) | ((proto & 0xff) << XFW_CTV_PROTO_SHIFT);
}

/* xfw_ct_icmp_ports sets an ICMP connection's "ports" as the kernel's
 * tuples have them: the identifier as source both ways, type << 8 | code as
 * destination, the request's in the original tuple, the reply's (the
 * request's type + 1 for every query xfw tracks: 8/0 excepted) in the
 * reply tuple. */
static __always_inline void xfw_ct_icmp_ports(struct xfw_pkt *p, __u32 id, __u32 type, __u32 code)
{
	__u32 rtype = type == XFW_ICMP_ECHO ? XFW_ICMP_ECHOREPLY : type + 1;

	p->ct_osport = id;
	p->ct_odport = (type << 8) | code;
	p->ct_rsport = id;
	p->ct_rdport = ((rtype & 0xff) << 8) | code;
}

/* xfw_ct_tuple gives p its connection's original tuple (XFW_F_CTOSRC …):
 * the originator's end of key k first; ICMP queries: the identifier and
 * the request's type << 8 | code, as the kernel's tuple has them. */
static __always_inline void xfw_ct_tuple(struct xfw_pkt *p, struct xfw_ct_key *k,
					 struct xfw_ct_val *v)
{
	if (v->status & XFW_CTST_ORIG_B) {
		p->ct_osrc_hi = k->b_hi;
		p->ct_osrc_lo = k->b_lo;
		p->ct_odst_hi = k->a_hi;
		p->ct_odst_lo = k->a_lo;
		p->ct_osport = k->b_port;
		p->ct_odport = k->a_port;
	} else {
		p->ct_osrc_hi = k->a_hi;
		p->ct_osrc_lo = k->a_lo;
		p->ct_odst_hi = k->b_hi;
		p->ct_odst_lo = k->b_lo;
		p->ct_osport = k->a_port;
		p->ct_odport = k->b_port;
	}
	p->ct_rsport = p->ct_odport;
	p->ct_rdport = p->ct_osport;
	if (k->proto == IPPROTO_ICMP || k->proto == IPPROTO_ICMPV6)
		xfw_ct_icmp_ports(p, p->ct_osport, v->icmp_type, v->icmp_code);
}

/* xfw_ct_attached: the state of an ICMP error this host sends (OUTPUT: the
 * TC hook, cs->hook 1, judges only locally generated packets) quoting a
 * packet of no known connection. Such an error answers a packet the host
 * received and neither forwarded nor delivered (its TTL ended, no route,
 * too big...): the kernel had tracked that packet, as an unconfirmed new
 * connection, and icmp_send attached that connection to its error
 * (nf_ct_attach): RELATED, reply direction, no status bit, the quoted
 * protocol. A packet that could not open a connection (an echo reply, a
 * TCP segment tcp_new refuses) had none: INVALID. */
/* b_flags returns the flags byte of a quoted TCP header at hl. */
static __always_inline __u32 b_flags(__u8 *b, __u32 hl)
{
	return b[xfw_ix(hl + 13)];
}

static __always_inline __u32 xfw_ct_attached(struct xfw_ct_scratch *cs, __u32 proto,
					     __u32 hl, int icmp_reply, __u32 ol4)
{
	struct xfw_ct_cfg *cfg;
	__u32 zero = 0, f, ulen;

	/* Only the stack's own errors (its ICMP control socket: the TC hook
	 * sets cs->stack_icmp) carry an attached connection; one a process
	 * writes on a raw socket is tracked like any packet. */
	if (cs->hook != 1 || !cs->stack_icmp || icmp_reply)
		return XFW_CTS_INVALID;
	/* No transport header ("no next header"): no connection to attach. */
	if (proto == XFW_NH_NONE)
		return XFW_CTS_INVALID;
	/* The offending packet was tracked only if its own checks passed
	 * (ol4: its transport length, from the quoted IP header): tcp_error's
	 * header length, udp_error's length field, a whole ICMP header. */
	if ((proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE || proto == IPPROTO_ICMP ||
	     proto == IPPROTO_ICMPV6) && ol4 < 8)
		return XFW_CTS_INVALID;
	if (proto == IPPROTO_UDP) {
		if (cs->buflen < hl + 6)
			return XFW_CTS_INVALID;
		ulen = xfw_rd16(cs->buf, hl + 4);
		if (ulen < 8 || ulen > ol4)
			return XFW_CTS_INVALID;
	}
	if (proto == IPPROTO_TCP) {
		cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &zero);
		if (!cfg || cs->buflen < hl + 14)
			return XFW_CTS_INVALID;
		f = (cs->buf[xfw_ix(hl + 12)] >> 4) * 4;
		if (f < 20 || ol4 < f)
			return XFW_CTS_INVALID;
		/* tcp_error's flag check, then tcp_new: a SYN opens, an ACK
		 * is picked up mid-stream with nf_conntrack_tcp_loose. */
		f = b_flags(cs->buf, hl) & ~(XFW_TH_ECE | XFW_TH_CWR | XFW_TH_PSH | XFW_TH_URG);
		if (f != XFW_TH_SYN && !(f == XFW_TH_ACK && cfg->tcp_loose))
			return XFW_CTS_INVALID;
	}
	return xfw_ctv(XFW_CTS_RELATED, 1, 0, proto);
}

/* xfw_ct_related handles an ICMP or ICMPv6 error: RELATED when the packet
 * it quotes (in cs->buf) belongs to a tracked connection and the error goes
 * to that packet's source (nf_conntrack_inet_error); INVALID otherwise.
 * A global function: verified once. */
__attribute__((noinline)) __u32 xfw_ct_related(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	struct xfw_ct_entry *e;
	__u64 shi, slo, dhi, dlo, now = bpf_jiffies64();
	__u32 hl, proto, need, sport = 0, dport = 0, qdir, status, ol4;
	int table, srcb, reply = 0;
	__u8 *b;

	if (!p || !cs)
		return XFW_CTS_INVALID;
	b = cs->buf;
	if (p->fam == 0) {
		if (cs->buflen < 20 || (b[0] >> 4) != 4)
			return XFW_CTS_INVALID;
		hl = (b[0] & 0xf) * 4;
		if (hl < 20)
			return XFW_CTS_INVALID;
		/* A quoted later fragment has no transport header. */
		if (((b[6] & 0x1f) | b[7]) != 0)
			return XFW_CTS_INVALID;
		proto = b[9];
		ol4 = xfw_rd16(b, 2); /* total length */
		shi = 0;
		slo = xfw_rd32(b, 12);
		dhi = 0;
		dlo = xfw_rd32(b, 16);
	} else {
		if (cs->buflen < 40 || (b[0] >> 4) != 6)
			return XFW_CTS_INVALID;
		hl = 40;
		proto = b[6];
		ol4 = xfw_rd16(b, 4) + 40; /* payload length + header */
		/* Payload length 0 before a hop-by-hop header: ip6_rcv_core
		 * leaves the packet untrimmed (a jumbogram's form), so the
		 * kernel tracked it at its whole length: the quote's (found by
		 * the stateful campaign, IPv6 seed 705). */
		if (ol4 == 40 && proto == XFW_NH_HOP)
			ol4 = cs->l4len > XFW_CT_ICMP_HLEN ? cs->l4len - XFW_CT_ICMP_HLEN : 0;
		/* The quoted packet's extension headers, as ipv6_skip_exthdr
		 * walks them (a later fragment has no transport header). */
		for (int i = 0; i < XFW_CT_INNER_EXTS; i++) {
			__u32 nh, len;

			if (!xfw_ipv6_is_ext(proto))
				break;
			/* ipv6_skip_exthdr reads two bytes of a header (four
			 * of a fragment header) and walks on by its length,
			 * whatever follows. */
			if (cs->buflen < hl + (proto == XFW_NH_FRAGMENT ? 4 : 2) || hl > XFW_CT_BUF - 16)
				return XFW_CTS_INVALID;
			nh = b[xfw_ix(hl)];
			len = b[xfw_ix(hl + 1)];
			if (proto == XFW_NH_FRAGMENT) {
				if ((xfw_rd16(b, hl + 2) & 0xfff8) != 0)
					return XFW_CTS_INVALID;
				len = 8;
			} else if (proto == XFW_NH_AUTH) {
				len = (len + 2) * 4;
			} else {
				len = (len + 1) * 8;
			}
			proto = nh;
			/* It may walk past the quoted bytes: fine for a
			 * protocol without ports (the kernel's generic). */
			hl = hl + len > 0xff ? 0xff : hl + len;
		}
		if (xfw_ipv6_is_ext(proto) || proto == XFW_NH_NONE)
			return XFW_CTS_INVALID;
		shi = ((__u64)xfw_rd32(b, 8) << 32) | xfw_rd32(b, 12);
		slo = ((__u64)xfw_rd32(b, 16) << 32) | xfw_rd32(b, 20);
		dhi = ((__u64)xfw_rd32(b, 24) << 32) | xfw_rd32(b, 28);
		dlo = ((__u64)xfw_rd32(b, 32) << 32) | xfw_rd32(b, 36);
	}
	/* The error must go to the quoted packet's source. */
	if (p->dst_hi != shi || p->dst_lo != slo)
		return XFW_CTS_INVALID;
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		int req;
		__u32 t;

		if ((proto == IPPROTO_ICMP) != (p->fam == 0))
			return XFW_CTS_INVALID;
		if (hl > XFW_CT_BUF - 8 || cs->buflen < hl + 8)
			return XFW_CTS_INVALID;
		t = b[xfw_ix(hl)];
		req = xfw_icmp_query(p->fam, t, &reply);
		if (req < 0)
			return XFW_CTS_INVALID;
		if (reply)
			xfw_ct_mkkey_icmp(&cs->key, p->fam, proto, dhi, dlo, shi, slo,
					  xfw_rd16(b, hl + 4), req, b[xfw_ix(hl + 1)]);
		else
			xfw_ct_mkkey_icmp(&cs->key, p->fam, proto, shi, slo, dhi, dlo,
					  xfw_rd16(b, hl + 4), req, b[xfw_ix(hl + 1)]);
		e = xfw_ct_find(&cs->key, now, &table);
		if (!e) {
			/* The quoted packet's own (unconfirmed) connection. */
			sport = xfw_rd16(b, hl + 4);
			dport = (t << 8) | b[xfw_ix(hl + 1)];
			goto attached;
		}
		if (e->v.icmp_type != req)
			return XFW_CTS_INVALID;
		qdir = reply;
	} else {
		need = xfw_ct_ports(proto) ? 4 : 0;
		if (need && (hl > XFW_CT_BUF - 8 || cs->buflen < hl + need))
			return XFW_CTS_INVALID;
		if (need) {
			sport = xfw_rd16(b, hl);
			dport = xfw_rd16(b, hl + 2);
		}
		srcb = xfw_ct_mkkey(&cs->key, p->fam, proto, shi, slo, sport, dhi, dlo, dport);
		e = xfw_ct_find(&cs->key, now, &table);
		if (!e) {
			reply = 0;
			goto attached;
		}
		qdir = (srcb != !!(e->v.status & XFW_CTST_ORIG_B));
	}
	status = e->v.status;
	xfw_ct_tuple(p, &cs->key, &e->v);
	/* The error travels against the quoted packet. */
	return xfw_ctv(XFW_CTS_RELATED, !qdir, status | XFW_CTST_CONFIRMED, proto);

attached:
	status = xfw_ct_attached(cs, proto, hl, reply, ol4 > hl ? ol4 - hl : 0);
	if (status != XFW_CTS_INVALID) {
		cs->attached = 1;
		/* That connection's tuple is the quoted packet's. */
		p->ct_osrc_hi = shi;
		p->ct_osrc_lo = slo;
		p->ct_odst_hi = dhi;
		p->ct_odst_lo = dlo;
		p->ct_osport = sport;
		p->ct_odport = dport;
		p->ct_rsport = dport;
		p->ct_rdport = sport;
		if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
			xfw_ct_icmp_ports(p, sport, dport >> 8, dport & 0xff);
	}
	return status;
}

/* xfw_ct_udp: nf_conntrack_udp_packet. status is before this packet. */
static __always_inline void xfw_ct_udp(struct xfw_ct_val *v, struct xfw_ct_cfg *cfg, __u64 now)
{
	if (v->status & XFW_CTST_SEEN_REPLY) {
		__u64 extra = cfg->timeout[XFW_CTT_UDP_UNREPLIED];
		int stream = 0;

		if ((__s64)(now - v->stream_ts) > 0) {
			extra = cfg->timeout[XFW_CTT_UDP_REPLIED];
			stream = !(v->status & XFW_CTST_ASSURED);
		}
		v->expires = now + extra;
		if (stream)
			v->status |= XFW_CTST_ASSURED;
	} else {
		v->expires = now + cfg->timeout[XFW_CTT_UDP_UNREPLIED];
	}
}

/* xfw_ct_advance runs the protocol's tracker on connection v for a packet
 * of direction dir (TCP: the segment in cs->seg) and returns an XFW_TCPR_*
 * outcome. new: v is a connection being opened by this packet (tcp_new
 * first). A global function: the tracker is verified once for every
 * caller. */
__attribute__((noinline)) int xfw_ct_advance(struct xfw_ct_val *v, struct xfw_ct_scratch *cs,
					     __u32 proto, __u32 dir, __u32 new)
{
	struct xfw_ct_cfg *cfg;
	__u32 zero = 0;
	__u64 now;
	int r = XFW_TCPR_OK;

	if (!v || !cs)
		return XFW_TCPR_INVALID;
	cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &zero);
	if (!cfg)
		return XFW_TCPR_INVALID;
	now = bpf_jiffies64();
	dir &= 1;
	if (proto == IPPROTO_TCP) {
		if (new && !xfw_tcp_new(v, &cs->seg, cfg))
			return XFW_TCPR_INVALID;
		r = xfw_tcp_packet(v, dir, &cs->seg, cfg, now);
	} else if (proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE) {
		if (new)
			v->stream_ts = now + cfg->timeout[XFW_CTT_UDP_STREAM];
		xfw_ct_udp(v, cfg, now);
	} else if (proto == IPPROTO_ICMP) {
		v->expires = now + cfg->timeout[XFW_CTT_ICMP];
	} else if (proto == IPPROTO_ICMPV6) {
		v->expires = now + cfg->timeout[XFW_CTT_ICMPV6];
	} else {
		v->expires = now + cfg->timeout[XFW_CTT_GENERIC];
	}
	if ((r == XFW_TCPR_OK || r == XFW_TCPR_KILL) && dir == 1)
		v->status |= XFW_CTST_SEEN_REPLY;
	return r;
}

/* Clean-up of expired entries. A lookup deletes an expired entry it finds;
 * xfw_ct_new is an LRU hash, whose untouched (expired) entries are evicted
 * first when it is full. xfw_ct, of assured connections, never evicts: when
 * a promotion finds it full, one walk of the table deletes every expired
 * entry (at most once per second, XFW_CT_SWEEP_GAP), then the promotion is
 * tried again; if the table is full of live connections the entry stays in
 * xfw_ct_new; entries nobody looks up any more stay, dead, until then. A
 * timer of the data plane is not an option: bpf_timer needs maps held by
 * a process or pinned, and xfw keeps no daemon and no pins. */
struct xfw_ct_sweep {
	__u64 last;     /* jiffies of the last walk */
	__u64 deleted;  /* entries the walks deleted (statistics) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ct_sweep);
	__uint(max_entries, 1);
} xfw_ct_sweep SEC(".maps");

static long xfw_ct_sweep_one(void *map, struct xfw_ct_key *k, struct xfw_ct_entry *e,
			     __u64 *deleted)
{
	if ((__s64)(e->v.expires - bpf_jiffies64()) <= 0 && bpf_map_delete_elem(map, k) == 0)
		(*deleted)++;
	return 0;
}

/* xfw_ct_sweep_main deletes the expired entries of xfw_ct unless a walk ran
 * less than a second (hz jiffies) ago; returns 1 when it walked. */
static __always_inline int xfw_ct_sweep_main(__u64 now, __u64 hz)
{
	__u32 zero = 0;
	struct xfw_ct_sweep *sw = bpf_map_lookup_elem(&xfw_ct_sweep, &zero);
	__u64 last, deleted = 0;

	if (!sw)
		return 0;
	last = sw->last;
	if (last && now - last < hz)
		return 0;
	if (__sync_val_compare_and_swap(&sw->last, last, now) != last)
		return 0; /* another CPU walks */
	bpf_for_each_map_elem(&xfw_ct, xfw_ct_sweep_one, &deleted, 0);
	__sync_fetch_and_add(&sw->deleted, deleted);
	return 1;
}

/* xfw_ct_promote moves an entry that became ASSURED from the LRU table to
 * the table of assured connections (when that one has room). The value
 * image is built in the scratch: the stack has no room. */
static __always_inline void xfw_ct_promote(struct xfw_ct_scratch *cs, struct xfw_ct_val *v,
					   struct xfw_ct_cfg *cfg, __u64 now)
{
	long rc;

	cs->nv_pad = 0;
	__builtin_memcpy(&cs->nv, v, sizeof(cs->nv));
	rc = bpf_map_update_elem(&xfw_ct, &cs->key, &cs->nv_pad, BPF_NOEXIST);
	if (rc == -7 /* E2BIG: full */ && xfw_ct_sweep_main(now, cfg->hz))
		rc = bpf_map_update_elem(&xfw_ct, &cs->key, &cs->nv_pad, BPF_NOEXIST);
	if (rc == 0)
		bpf_map_delete_elem(&xfw_ct_new, &cs->key);
}

/* xfw_ct_save keeps p's connection facts in cs->orig (before p is reused
 * for REJECT's reply, xfw_ct_reply; or for the loopback handoff). */
static __always_inline void xfw_ct_save(struct xfw_ct_scratch *cs, const struct xfw_pkt *p)
{
	cs->orig.ct = p->ct;
	cs->orig.osrc_hi = p->ct_osrc_hi;
	cs->orig.osrc_lo = p->ct_osrc_lo;
	cs->orig.odst_hi = p->ct_odst_hi;
	cs->orig.odst_lo = p->ct_odst_lo;
	cs->orig.osport = p->ct_osport;
	cs->orig.odport = p->ct_odport;
	cs->orig.rsport = p->ct_rsport;
	cs->orig.rdport = p->ct_rdport;
}

/* xfw_ct_restore gives p the connection facts f (xfw_ct_save's). */
static __always_inline void xfw_ct_restore(struct xfw_pkt *p, const struct xfw_ct_facts *f)
{
	p->ct_osrc_hi = f->osrc_hi;
	p->ct_osrc_lo = f->osrc_lo;
	p->ct_odst_hi = f->odst_hi;
	p->ct_odst_lo = f->odst_lo;
	p->ct_osport = f->osport;
	p->ct_odport = f->odport;
	p->ct_rsport = f->rsport;
	p->ct_rdport = f->rdport;
}

/* The loopback handoff. A packet the host sends itself is tracked once, at
 * OUTPUT (the TC hook on lo), and its INPUT (the XDP hook on lo) reads
 * what OUTPUT decided: normally from the connection's entry (lo_state).
 * A state that no entry holds (an ICMP error or a REJECT reply that
 * carries an attached connection, nf_ct_attach) travels in this table
 * instead, keyed by the packet's fingerprint, and INPUT takes it out. */

/* Handoffs in flight: each lives from the TC hook to the XDP hook of one
 * loopback pass, so a few hundred cover any burst; LRU forgets a packet
 * the stack dropped in between. */
#define XFW_CT_LO_HANDOFFS 1024

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_ct_lo_key);
	__type(value, struct xfw_ct_facts);
	__uint(max_entries, XFW_CT_LO_HANDOFFS);
} xfw_ct_lo_handoff SEC(".maps");

/* xfw_ct_lo_key_of fills cs->lokey with p's fingerprint (cs->buf loaded)
 * and returns it. */
static __always_inline struct xfw_ct_lo_key *xfw_ct_lo_key_of(const struct xfw_pkt *p,
							      struct xfw_ct_scratch *cs)
{
	struct xfw_ct_lo_key *k = &cs->lokey;

	__builtin_memset(k, 0, sizeof(*k));
	k->src_hi = p->src_hi;
	k->src_lo = p->src_lo;
	k->dst_hi = p->dst_hi;
	k->dst_lo = p->dst_lo;
	for (int i = 0; i < 16; i++)
		k->head[i] = i < cs->buflen ? cs->buf[i] : 0;
	k->l4len = cs->l4len;
	k->icmp = p->icmp;
	k->proto = p->proto;
	k->fam = p->fam;
	return k;
}

/* xfw_ct_lo_put hands p's connection facts (an attached state) from the
 * loopback OUTPUT to INPUT. A global function: verified once. */
__attribute__((noinline)) int xfw_ct_lo_put(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	struct xfw_ct_lo_key *k;

	if (!p || !cs)
		return 0;
	k = xfw_ct_lo_key_of(p, cs);
	xfw_ct_save(cs, p);
	bpf_map_update_elem(&xfw_ct_lo_handoff, k, &cs->orig, BPF_ANY);
	return 0;
}

/* xfw_ct_lo_take gives p the facts OUTPUT handed over for it, if any, and
 * returns its XFW_F_CT value, or -1. */
static __always_inline int xfw_ct_lo_take(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	struct xfw_ct_lo_key *k = xfw_ct_lo_key_of(p, cs);
	struct xfw_ct_facts *f;
	int v;

	f = bpf_map_lookup_elem(&xfw_ct_lo_handoff, k);
	if (!f)
		return -1;
	xfw_ct_restore(p, f);
	v = f->ct;
	bpf_map_delete_elem(&xfw_ct_lo_handoff, k);
	return v;
}

/* Modes of xfw_ct_track. */
#define XFW_CTM_TRACK 0    /* track (INPUT, FORWARD, OUTPUT) */
#define XFW_CTM_LO_INPUT 1 /* loopback INPUT: read what OUTPUT decided */

/* xfw_ct_track returns the packet's XFW_F_CT value and leaves in cs what
 * waits for the verdict. The hook has copied the TCP header, UDP header,
 * ICMP header or the quoted packet of an ICMP error into cs->buf. A global
 * function: verified once. */
__attribute__((noinline)) __u32 xfw_ct_track(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					     __u32 mode)
{
	struct xfw_ct_entry *e;
	struct xfw_ct_cfg *cfg;
	__u32 zero = 0, proto, dir, value, st, status;
	__u64 now;
	int table, srcb, r, locked, reqtype = -1, reply = 0, lo = -1;

	if (!p || !cs)
		return XFW_CTS_INVALID;
	cs->pending = XFW_CTP_NONE;
	cs->attached = 0;
	if (mode == XFW_CTM_LO_INPUT) {
		r = xfw_ct_lo_take(p, cs);
		if (r >= 0)
			return r;
	}
	cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &zero);
	if (!cfg || !cfg->ready)
		return XFW_CTS_INVALID;
	now = bpf_jiffies64();
	proto = p->proto;
	if (proto > 255)
		return XFW_CTS_INVALID; /* extension headers not walkable */
	/* IPv6 "no next header": ipv6_skip_exthdr gives up at it, so
	 * nf_conntrack_in finds no transport protocol: no connection,
	 * INVALID (not generic). */
	if (p->fam == 1 && proto == 59)
		return XFW_CTS_INVALID;

	if (proto == IPPROTO_TCP) {
		if (!xfw_tcp_seg_read(cs))
			return XFW_CTS_INVALID;
	} else if (proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE) {
		__u32 ulen;

		/* udp_error: the length field must cover the header and fit. */
		if (p->sport > 0xffff || cs->buflen < 8)
			return XFW_CTS_INVALID;
		ulen = xfw_rd16(cs->buf, 4);
		if (proto == IPPROTO_UDP && (ulen < 8 || ulen > cs->l4len))
			return XFW_CTS_INVALID;
		/* udplite_error: the length field is the checksum coverage, 0
		 * (everything) or at least the header and within the packet;
		 * the checksum is mandatory (a zero field is INVALID: a check
		 * of the field, not a verification of the sum). */
		if (proto == IPPROTO_UDPLITE &&
		    ((ulen != 0 && (ulen < 8 || ulen > cs->l4len)) || xfw_rd16(cs->buf, 6) == 0))
			return XFW_CTS_INVALID;
	} else if ((proto == IPPROTO_ICMP && p->fam == 0) || (proto == IPPROTO_ICMPV6 && p->fam == 1)) {
		__u32 t = p->icmp >> 8;

		if (p->icmp > 0xffff || cs->buflen < 8)
			return XFW_CTS_INVALID;
		if (p->fam == 1 && xfw_icmp6_untracked(t))
			return XFW_CTS_UNTRACKED;
		if (p->fam == 0 && t > XFW_ICMP_MAX_TYPE)
			return XFW_CTS_INVALID;
		if ((p->fam == 0 && xfw_icmp_is_err(t)) || (p->fam == 1 && t < 128))
			return xfw_ct_related(p, cs);
		reqtype = xfw_icmp_query(p->fam, t, &reply);
		if (reqtype < 0)
			return XFW_CTS_INVALID; /* no inverse: cannot be tracked */
	} else if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		/* The other family's ICMP (IPv4 protocol 58, IPv6 protocol 1):
		 * the kernel picks the ICMP or ICMPv6 tracker by protocol
		 * alone, whose packet function then refuses a packet of the
		 * other family (nf_conntrack_icmp_packet,
		 * nf_conntrack_icmpv6_packet: "state->pf != NFPROTO_IPV4",
		 * -NF_ACCEPT): no connection, INVALID. Not generic. */
		return XFW_CTS_INVALID;
	}

	if (reqtype >= 0) {
		__u16 id = xfw_rd16(cs->buf, 4);

		if (reply)
			xfw_ct_mkkey_icmp(&cs->key, p->fam, proto, p->dst_hi, p->dst_lo, p->src_hi,
					  p->src_lo, id, reqtype, cs->buf[1]);
		else
			xfw_ct_mkkey_icmp(&cs->key, p->fam, proto, p->src_hi, p->src_lo, p->dst_hi,
					  p->dst_lo, id, reqtype, cs->buf[1]);
		srcb = 0;
	} else if (xfw_ct_ports(proto)) {
		srcb = xfw_ct_mkkey(&cs->key, p->fam, proto, p->src_hi, p->src_lo, p->sport,
				    p->dst_hi, p->dst_lo, p->dport);
	} else {
		srcb = xfw_ct_mkkey(&cs->key, p->fam, proto, p->src_hi, p->src_lo, 0,
				    p->dst_hi, p->dst_lo, 0);
	}
	if (mode == XFW_CTM_LO_INPUT) {
		e = xfw_ct_peek(&cs->key, &table);
		if (!e)
			return XFW_CTS_INVALID;
		dir = reqtype >= 0 ? reply : (srcb != !!(e->v.status & XFW_CTST_ORIG_B));
		st = e->v.lo_state[dir & 1];
		/* Killed at OUTPUT (expired there): read, then gone. */
		if ((__s64)(e->v.expires - now) <= 0)
			xfw_ct_delete(&cs->key, table);
		if ((st & 7) == XFW_CTS_INVALID || (st & 7) == XFW_CTS_UNTRACKED)
			return st & 7;
		xfw_ct_tuple(p, &cs->key, &e->v);
		return st | (XFW_CTST_CONFIRMED << XFW_CTV_STATUS_SHIFT) | (proto << XFW_CTV_PROTO_SHIFT);
	}

	e = xfw_ct_find(&cs->key, now, &table);
	if (e) {
		/* A connection we know. */
		if (reqtype >= 0) {
			if (e->v.icmp_type != reqtype)
				return XFW_CTS_INVALID;
			dir = reply;
		} else if (xfw_ct_self(&cs->key)) {
			/* A tuple that is its own inverse (same address and
			 * port at both ends): the kernel's hash holds the
			 * reply tuple in front of the original one, so every
			 * packet after the first is seen in the reply
			 * direction. Its loopback INPUT reads slot 0, where
			 * the first packet's state went. */
			dir = 1;
			lo = 0;
		} else {
			dir = (srcb != !!(e->v.status & XFW_CTST_ORIG_B));
		}
		if (lo < 0)
			lo = dir;
		locked = xfw_ct_lock(&e->lock);
		status = e->v.status;
		st = (dir == 1 || (status & XFW_CTST_SEEN_REPLY)) ? XFW_CTS_ESTABLISHED : XFW_CTS_NEW;
		r = xfw_ct_advance(&e->v, cs, proto, dir, 0);
		status = e->v.status;
		value = r == XFW_TCPR_INVALID ? XFW_CTS_INVALID : xfw_ctv(st, dir, status, proto);
		e->v.lo_state[lo & 1] = value & 0xff;
		/* nf_ct_kill (an RST as the first answer): the connection
		 * leaves the table but the packet keeps it, and a loopback
		 * packet brings it to INPUT, which sees what OUTPUT saw. So
		 * the entry expires now rather than going at once: lookups
		 * take it as gone (and delete it), the loopback INPUT still
		 * reads its lo_state (xfw_ct_peek). */
		if (r == XFW_TCPR_KILL)
			e->v.expires = now;
		if (locked)
			xfw_ct_unlock(&e->lock);
		if (r == XFW_TCPR_OK && table == XFW_CTT_EMB && (status & XFW_CTST_ASSURED))
			xfw_ct_promote(cs, &e->v, cfg, now);
		if (value != XFW_CTS_INVALID)
			xfw_ct_tuple(p, &cs->key, &e->v);
		if (r == XFW_TCPR_REPEAT)
			xfw_ct_delete(&cs->key, table);
		/* Reopening a closed connection (a SYN in TIME_WAIT or after
		 * an RST): the old entry is gone, the packet opens a new one. */
		if (r != XFW_TCPR_REPEAT)
			return value;
	}

	/* A new connection: its entry waits for the verdict. */
	__builtin_memset(&cs->nv, 0, sizeof(cs->nv));
	if (srcb)
		cs->nv.status = XFW_CTST_ORIG_B;
	if (reqtype >= 0) {
		if (reply)
			return XFW_CTS_INVALID; /* a reply opens nothing */
		cs->nv.icmp_type = reqtype;
		cs->nv.icmp_code = p->icmp & 0xff;
	}
	r = xfw_ct_advance(&cs->nv, cs, proto, 0, 1);
	if (r == XFW_TCPR_INVALID || r == XFW_TCPR_REPEAT)
		return XFW_CTS_INVALID;
	value = xfw_ctv(XFW_CTS_NEW, 0, cs->nv.status, proto);
	cs->nv.lo_state[0] = value & 0xff;
	xfw_ct_tuple(p, &cs->key, &cs->nv);
	cs->nv.status |= XFW_CTST_CONFIRMED;
	/* An unanswered RST kills its own connection at once. */
	if (r != XFW_TCPR_KILL)
		cs->pending = XFW_CTP_CREATE;
	return value;
}

/* xfw_ct_confirm creates the pending entry of an accepted packet (the
 * kernel's confirmation after the filter). An existing entry (another CPU
 * confirmed the same connection first) wins, as in the kernel. */
static __always_inline void xfw_ct_confirm(struct xfw_ct_scratch *cs)
{
	if (cs->pending != XFW_CTP_CREATE)
		return;
	cs->pending = XFW_CTP_NONE;
	cs->nv_pad = 0;
	bpf_map_update_elem(&xfw_ct_new, &cs->key, &cs->nv_pad, BPF_NOEXIST);
}

/* xfw_ct_confirm_out confirms a packet OUTPUT accepted; one leaving by
 * loopback (oif) whose state no entry holds (cs->attached) hands that
 * state to its INPUT (xfw_ct_lo_put). */
static __always_inline void xfw_ct_confirm_out(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					       __u32 oif)
{
	xfw_ct_confirm(cs);
	if (cs->attached && oif == XFW_LOOPBACK_IFINDEX)
		xfw_ct_lo_put(p, cs);
}

/* xfw_ct_track_rst tracks the TCP RST that REJECT --reject-with tcp-reset
 * has just sent (its facts are in this CPU's XDP reply scratch) in answer
 * to a packet without a connection (INVALID). The kernel's reply then has
 * no connection to carry (nf_send_reset's nf_ct_attach attaches the
 * offending packet's, RELATED, only when it has one) and is tracked like
 * any packet at OUTPUT: an RST within a connection's window closes it
 * (found by xfw difftest on the conformance dump ipt-save-filter.txt: a
 * reset out-of-window segment's RST closed fw's own connection). Like
 * every XDP reply, it is not judged by OUTPUT's rules (README, "Known
 * differences"). p is overwritten with the reply's facts. A global
 * function: verified once. */
__attribute__((noinline)) int xfw_ct_track_rst(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	__u32 slot = XFW_RJ_SLOT_XDP;
	struct xfw_rj_scratch *sc;
	struct xfw_rj *r;

	if (!p || !cs)
		return 0;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return 0;
	r = &sc->r;
	if (!r->tcpflags)
		return 0; /* not an RST */
	if (p->fam == 0) {
		p->src_hi = 0;
		p->src_lo = bpf_ntohl(r->saddr[0]);
		p->dst_hi = 0;
		p->dst_lo = bpf_ntohl(r->daddr[0]);
	} else {
		p->src_hi = ((__u64)bpf_ntohl(r->saddr[0]) << 32) | bpf_ntohl(r->saddr[1]);
		p->src_lo = ((__u64)bpf_ntohl(r->saddr[2]) << 32) | bpf_ntohl(r->saddr[3]);
		p->dst_hi = ((__u64)bpf_ntohl(r->daddr[0]) << 32) | bpf_ntohl(r->daddr[1]);
		p->dst_lo = ((__u64)bpf_ntohl(r->daddr[2]) << 32) | bpf_ntohl(r->daddr[3]);
	}
	p->proto = IPPROTO_TCP;
	p->sport = bpf_ntohs(r->sport);
	p->dport = bpf_ntohs(r->dport);
	/* The header as xfw_rj_put_rst wrote it: no options, no payload. */
	__builtin_memset(cs->buf, 0, XFW_RJ_TCP_HLEN);
	*(__u16 *)cs->buf = r->sport;
	*(__u16 *)(cs->buf + 2) = r->dport;
	*(__u32 *)(cs->buf + 4) = r->seq;
	*(__u32 *)(cs->buf + 8) = r->ack;
	cs->buf[12] = XFW_RJ_TCP_DOFF5;
	cs->buf[13] = r->tcpflags;
	cs->buflen = XFW_RJ_TCP_HLEN;
	cs->l4len = XFW_RJ_TCP_HLEN;
	xfw_ct_track(p, cs, XFW_CTM_TRACK);
	/* An RST opens nothing, but confirm as the kernel would. */
	xfw_ct_confirm(cs);
	return 0;
}

/* xfw_ct_scratch_get returns this CPU's scratch for a hook (0 XDP, 1 TC). */
static __always_inline struct xfw_ct_scratch *xfw_ct_scratch_get(__u32 hook)
{
	struct xfw_ct_scratch *cs = bpf_map_lookup_elem(&xfw_ct_scratch, &hook);

	if (cs)
		cs->hook = hook;
	return cs;
}

/* xfw_ct_copy_len returns how many bytes the hook copies into cs->buf for
 * p, and from which offset: the TCP header with options, or an ICMP
 * error's quoted packet. 0: nothing to copy. */
static __always_inline __u32 xfw_ct_copy_len(struct xfw_pkt *p, __u32 *off)
{
	__u32 avail, t;

	if (!p->l4_off || p->l4_end <= p->l4_off)
		return 0;
	avail = p->l4_end - p->l4_off;
	*off = p->l4_off;
	if (p->proto == IPPROTO_TCP)
		return avail < 60 ? avail : 60;
	if (p->proto == IPPROTO_UDP || p->proto == IPPROTO_UDPLITE)
		return avail < 8 ? avail : 8;
	if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6) {
		t = p->icmp >> 8;
		if (p->icmp > 0xffff)
			return 0;
		if ((p->fam == 0 && xfw_icmp_is_err(t)) || (p->fam == 1 && t < 128)) {
			if (avail <= 8)
				return 0;
			*off = p->l4_off + XFW_CT_ICMP_HLEN;
			avail -= 8;
			return avail < XFW_CT_BUF ? avail : XFW_CT_BUF;
		}
		/* Queries: the header (the identifier is at offset 4). */
		return avail < 8 ? avail : 8;
	}
	return 0;
}

/* xfw_ct_load_len prepares cs for a copy by xfw_ct_load_xdp or _tc: it
 * returns how many bytes to copy from *off (xfw_ct_copy_len) in bounds the
 * verifier follows, 1..XFW_CT_BUF, or 0 for none. */
static __always_inline __u32 xfw_ct_load_len(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					     __u32 *off)
{
	__u32 len = xfw_ct_copy_len(p, off);

	cs->buflen = 0;
	cs->l4len = p->l4_end > p->l4_off ? p->l4_end - p->l4_off : 0;
	if (len == 0 || len > XFW_CT_BUF)
		return 0;
	xfw_barrier_var(len);
	len &= XFW_CT_BUF * 2 - 1;
	if (len < 1 || len > XFW_CT_BUF)
		return 0;
	return len;
}

/* xfw_ct_load_xdp and xfw_ct_load_tc copy what tracking reads beyond the
 * parsed fields into cs. */
static __always_inline void xfw_ct_load_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					    struct xfw_ct_scratch *cs)
{
	__u32 off = 0, len = xfw_ct_load_len(p, cs, &off);

	if (len && bpf_xdp_load_bytes(ctx, off, cs->buf, len) == 0)
		cs->buflen = len;
}

static __always_inline void xfw_ct_load_tc(struct __sk_buff *skb, struct xfw_pkt *p,
					   struct xfw_ct_scratch *cs)
{
	__u32 off = 0, len = xfw_ct_load_len(p, cs, &off);

	if (len && bpf_skb_load_bytes(skb, off, cs->buf, len) == 0)
		cs->buflen = len;
}

/* xfw_ct_reply gives REJECT's reply for the host itself, parsed into p
 * from the skb, its connection state, as the kernel's reply has it when it
 * passes OUTPUT: attached to the offending packet's connection when that
 * packet had one (nf_send_reset and icmp_send: nf_ct_attach, RELATED, the
 * other direction), else tracked like any packet: an RST within a
 * connection's window closes it; an ICMP error comes from the stack's ICMP
 * socket (found by xfw difftest on the conformance dump ipt-save-filter.txt:
 * an OUTPUT REJECT of an out-of-window segment, whose RST closed the
 * connection). A global function: verified once. */
__attribute__((noinline)) int xfw_ct_reply(struct __sk_buff *skb, struct xfw_pkt *p,
					   struct xfw_ct_scratch *cs)
{
	__u32 st, v;

	if (!skb || !p || !cs)
		return 0;
	v = cs->orig.ct;
	st = v & 7;
	xfw_ct_load_tc(skb, p, cs);
	if (st == XFW_CTS_NEW || st == XFW_CTS_ESTABLISHED || st == XFW_CTS_RELATED) {
		cs->pending = XFW_CTP_NONE;
		cs->attached = 1;
		p->ct = (v & ~(7u | XFW_CTV_DIR_REPLY)) | XFW_CTS_RELATED |
			((v & XFW_CTV_DIR_REPLY) ^ XFW_CTV_DIR_REPLY);
		xfw_ct_restore(p, &cs->orig);
		return 0;
	}
	cs->stack_icmp = p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6;
	p->ct = xfw_ct_track(p, cs, XFW_CTM_TRACK);
	return 0;
}

/* xfw_ct_fast accepts, counting its rule, a packet whose connection state
 * the chain's first rule accepts unconditionally (the established fast
 * path, compiler.Generation.CtFastPath): classification would stop there.
 * Returns 1 when it did. */
static __always_inline int xfw_ct_fast(struct xfw_pkt *p, __u32 slot, __u32 chain)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	struct xfw_entry *ent;
	void *entries;
	__u32 e;

	if (!fc || chain >= XFW_NCHAINS)
		return 0;
	if (!((fc->ct_fast_states[chain] >> (p->ct & 7)) & 1))
		return 0;
	e = fc->ct_fast_entry[chain];
	entries = xfw_inner(&xfw_o_entries, slot);
	if (!entries)
		return 0;
	ent = bpf_map_lookup_elem(entries, &e);
	if (!ent)
		return 0;
	if (ent->flags & XFW_EF_COUNT)
		xfw_count(slot, ent->rule, p->l3len);
	return 1;
}

/* xfw_ct_active reports whether generation slot uses XFW_F_CT. */
static __always_inline int xfw_ct_active(__u32 slot)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	return fc && (fc->active & (1u << XFW_F_CT));
}

#endif /* XFW_CT_H */
