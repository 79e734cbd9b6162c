/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_tcp.h — TCP connection tracking, as nf_conntrack_proto_tcp.c does it:
 * the segment's facts read from the scratch buffer (xfw_tcp_seg_read, with
 * its options), the state machine (the kernel's transition table,
 * xfw_tcp_packet), the window checks (xfw_tcp_in_window) and a new
 * connection's first segment (xfw_tcp_new).
 *
 * Conventions: sequence arithmetic is modulo 2^32 (xfw_before/xfw_after as
 * the kernel's before()/after()); the option walk is a bpf_loop, its step
 * verified once; the segment reader is a global function.
 *
 * Includes: common.h, xfw_structs.h, ct_structs.h, ct_maps.h, ct_conn.h.
 * Owns the read-only transition table xfw_tcp_trans (.rodata).
 */
#ifndef XFW_CT_TCP_H
#define XFW_CT_TCP_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"

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

/* xfw_tcp_in_window is the kernel's tcp_in_window. A global function:
 * inlined, it was verified again for every path through xfw_tcp_packet's
 * state switch that reaches it (about 10,000 instructions per program). */
__attribute__((noinline)) int xfw_tcp_in_window(struct xfw_ct_val *v, __u32 dir, struct xfw_tcp_seg *s,
						struct xfw_ct_cfg *cfg)
{
	struct xfw_ct_tcp_side *sender, *receiver;
	__u32 seq, ack, sack, end, win, swin;
	int in_recv_win, seq_ok;

	if (!v || !s || !cfg)
		return XFW_TCP_INVALID;
	sender = &v->side[dir & 1];
	receiver = &v->side[(dir & 1) ^ 1];
	seq = s->seq;
	ack = s->ack;
	sack = s->ack;
	end = s->end;
	win = s->win;
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
		/* A RST answering a SYN or ACK let through (the ignored
		 * packets a) and c)): no window check. The answer to a SYN
		 * comes from the other side: Linux 6.18 does not take a RST
		 * from the SYN's own side this way (fw's SYN, a SYN,ACK
		 * ignored for its ACK, fw's stack's RST to it, ACK field 0 =
		 * last_end: the connection stays), while the answer to an
		 * ignored ACK may come from either (both observed). */
		if ((((v->status & XFW_CTST_SEEN_REPLY) && v->last_index == XFW_TI_SYN &&
		      v->last_dir != dir) ||
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

#endif /* XFW_CT_TCP_H */
