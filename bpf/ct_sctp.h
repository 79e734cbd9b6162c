/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_sctp.h — SCTP connection tracking, as nf_conntrack_proto_sctp.c
 * (Linux 6.18) does it: the chunk checks (do_basic_checks), a new
 * association's first packet (sctp_new), the verification tag checks
 * (RFC 9260 8.5, 8.5.1), the kernel's transition table and its timeouts
 * per state.
 *
 * Scope: every chunk of the packet, as the kernel's for_each_sctp_chunk
 * walks them. The tracker has no access to the packet, so the hook walks
 * it first (xfw_sctp_scan_xdp / _tc, from xfw_ct_load_xdp / _tc): the
 * kernel's do_basic_checks, and a record (type, flags) of each chunk with
 * a row in the transition table, in order, for the passes of sctp_new and
 * of nf_conntrack_sctp_packet (xfw_ct_sctp). Bounds, both failing closed
 * (INVALID): XFW_SCTP_SCAN_MAX chunks (every packet of up to 64 KiB) and
 * XFW_SCTP_RECS recorded ones. The CRC32c is not verified (as no
 * transport checksum in xfw).
 *
 * The connection's SCTP facts live in xfw_ct_val's TCP fields, which an
 * SCTP connection does not use: tcp_state is the SCTP state (enum
 * sctp_conntrack), side[d].end the verification tag of direction d (as
 * the packet carries it, network order), side[d].flags bit 0 the kernel's
 * init[d], last_flags its SCTP_FLAG_HEARTBEAT_VTAG_FAILED and last_dir its
 * last_dir.
 *
 * Conventions: the walks run on the kernel's numeric iterator (iter.h),
 * their changing state in the scratch (cs->sc, cs->sw), indexes masked;
 * the scan is a global function per program type, a pass's step
 * (xfw_sctp_step) a global function, so each is verified once.
 *
 * Includes: common.h, xfw_structs.h, parse.h (xfw_load_bytes), iter.h,
 * ct_structs.h, ct_maps.h, ct_conn.h, ct_tcp.h (XFW_TCPR_*). Owns the read-only table xfw_sctp_trans (.rodata).
 */
#ifndef XFW_CT_SCTP_H
#define XFW_CT_SCTP_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "iter.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"
#include "ct_tcp.h"

/* SCTP chunk types (RFC 9260 3.2). */
#define XFW_SCTP_DATA 0
#define XFW_SCTP_INIT 1
#define XFW_SCTP_INIT_ACK 2
#define XFW_SCTP_HEARTBEAT 4
#define XFW_SCTP_HEARTBEAT_ACK 5
#define XFW_SCTP_ABORT 6
#define XFW_SCTP_SHUTDOWN 7
#define XFW_SCTP_SHUTDOWN_ACK 8
#define XFW_SCTP_ERROR 9
#define XFW_SCTP_COOKIE_ECHO 10
#define XFW_SCTP_COOKIE_ACK 11
#define XFW_SCTP_SHUTDOWN_COMPLETE 14

/* The T bit of ABORT and SHUTDOWN COMPLETE (SCTP_CHUNK_FLAG_T). */
#define XFW_SCTP_FLAG_T 0x01
/* xfw_ct_val.last_flags: SCTP_FLAG_HEARTBEAT_VTAG_FAILED. */
#define XFW_SCTP_HB_VTAG_FAILED 0x01

/* The common header (ports, verification tag, checksum) and a chunk's
 * header (type, flags, length). */
#define XFW_SCTP_HLEN 12
#define XFW_SCTP_CHLEN 4
/* An INIT or INIT ACK chunk's initiate tag follows the chunk header; the
 * kernel reads the whole 16-byte init header (sctp_inithdr). */
#define XFW_SCTP_INITHDR 16
/* What the hook copies into cs->buf: the common header and the first
 * chunk's init header (the tracker reads no more of the packet). */
#define XFW_SCTP_COPY (XFW_SCTP_HLEN + XFW_SCTP_CHLEN + XFW_SCTP_INITHDR)
/* Chunks the scan walks at most: a 64 KiB packet's of 4 bytes each, more
 * than any IPv4 or (non-jumbogram) IPv6 packet holds. */
#define XFW_SCTP_SCAN_MAX (65536 / XFW_SCTP_CHLEN)

/* States (enum sctp_conntrack), as the kernel numbers them. */
#define XFW_SCTP_NONE 0
#define XFW_SCTP_CLOSED 1
#define XFW_SCTP_COOKIE_WAIT 2
#define XFW_SCTP_COOKIE_ECHOED 3
#define XFW_SCTP_ESTABLISHED 4
#define XFW_SCTP_SHUTDOWN_SENT 5
#define XFW_SCTP_SHUTDOWN_RECD 6
#define XFW_SCTP_SHUTDOWN_ACK_SENT 7
#define XFW_SCTP_HEARTBEAT_SENT 8
#define XFW_SCTP_MAX 9 /* "invalid" in the table */

#define sNO XFW_SCTP_NONE
#define sCL XFW_SCTP_CLOSED
#define sCW XFW_SCTP_COOKIE_WAIT
#define sCE XFW_SCTP_COOKIE_ECHOED
#define sES XFW_SCTP_ESTABLISHED
#define sSS XFW_SCTP_SHUTDOWN_SENT
#define sSR XFW_SCTP_SHUTDOWN_RECD
#define sSA XFW_SCTP_SHUTDOWN_ACK_SENT
#define sHS XFW_SCTP_HEARTBEAT_SENT
#define sIV XFW_SCTP_MAX

/* The kernel's sctp_conntracks[dir][chunk index][state]; chunk indexes as
 * xfw_sctp_index gives them. */
static const volatile __u8 xfw_sctp_trans[2][11][9] = {
	{
		/*                  sNO, sCL, sCW, sCE, sES, sSS, sSR, sSA, sHS */
		/* init         */ {sCL, sCL, sCW, sCE, sES, sCL, sCL, sSA, sCW},
		/* init_ack     */ {sCL, sCL, sCW, sCE, sES, sSS, sSR, sSA, sCL},
		/* abort        */ {sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sCL},
		/* shutdown     */ {sCL, sCL, sCW, sCE, sSS, sSS, sSR, sSA, sCL},
		/* shutdown_ack */ {sSA, sCL, sCW, sCE, sES, sSA, sSA, sSA, sSA},
		/* error        */ {sCL, sCL, sCW, sCE, sES, sSS, sSR, sSA, sCL},
		/* cookie_echo  */ {sCL, sCL, sCE, sCE, sES, sSS, sSR, sSA, sCL},
		/* cookie_ack   */ {sCL, sCL, sCW, sES, sES, sSS, sSR, sSA, sCL},
		/* shutdown_comp*/ {sCL, sCL, sCW, sCE, sES, sSS, sSR, sCL, sCL},
		/* heartbeat    */ {sHS, sCL, sCW, sCE, sES, sSS, sSR, sSA, sHS},
		/* heartbeat_ack*/ {sCL, sCL, sCW, sCE, sES, sSS, sSR, sSA, sHS},
	},
	{
		/*                  sNO, sCL, sCW, sCE, sES, sSS, sSR, sSA, sHS */
		/* init         */ {sIV, sCL, sCW, sCE, sES, sSS, sSR, sSA, sIV},
		/* init_ack     */ {sIV, sCW, sCW, sCE, sES, sSS, sSR, sSA, sIV},
		/* abort        */ {sIV, sCL, sCL, sCL, sCL, sCL, sCL, sCL, sIV},
		/* shutdown     */ {sIV, sCL, sCW, sCE, sSR, sSS, sSR, sSA, sIV},
		/* shutdown_ack */ {sIV, sCL, sCW, sCE, sES, sSA, sSA, sSA, sIV},
		/* error        */ {sIV, sCL, sCW, sCL, sES, sSS, sSR, sSA, sIV},
		/* cookie_echo  */ {sIV, sCL, sCE, sCE, sES, sSS, sSR, sSA, sIV},
		/* cookie_ack   */ {sIV, sCL, sCW, sES, sES, sSS, sSR, sSA, sIV},
		/* shutdown_comp*/ {sIV, sCL, sCW, sCE, sES, sSS, sSR, sCL, sIV},
		/* heartbeat    */ {sIV, sCL, sCW, sCE, sES, sSS, sSR, sSA, sHS},
		/* heartbeat_ack*/ {sIV, sCL, sCW, sCE, sES, sSS, sSR, sSA, sES},
	},
};

#undef sNO
#undef sCL
#undef sCW
#undef sCE
#undef sES
#undef sSS
#undef sSR
#undef sSA
#undef sHS
#undef sIV

/* xfw_sctp_index returns the transition table's row of a chunk type, or
 * -1 for a chunk that changes no state (DATA, SACK, ...). */
static __always_inline int xfw_sctp_index(__u32 type)
{
	switch (type) {
	case XFW_SCTP_INIT: return 0;
	case XFW_SCTP_INIT_ACK: return 1;
	case XFW_SCTP_ABORT: return 2;
	case XFW_SCTP_SHUTDOWN: return 3;
	case XFW_SCTP_SHUTDOWN_ACK: return 4;
	case XFW_SCTP_ERROR: return 5;
	case XFW_SCTP_COOKIE_ECHO: return 6;
	case XFW_SCTP_COOKIE_ACK: return 7;
	case XFW_SCTP_SHUTDOWN_COMPLETE: return 8;
	case XFW_SCTP_HEARTBEAT: return 9;
	case XFW_SCTP_HEARTBEAT_ACK: return 10;
	}
	return -1;
}

#define XFW_SCTP_BIT(t) (1u << (t))

/* The passes over a packet's recorded chunks (struct xfw_sctp_walk.pass). */
#define XFW_SCTP_PASS_NEW 1   /* sctp_new */
#define XFW_SCTP_PASS_STATE 2 /* the chunk loop of nf_conntrack_sctp_packet */

/* xfw_sctp_scan1 is do_basic_checks for the chunk at sc->off of the SCTP
 * packet whose transport header is at l4off: 1 to go on, 0 at the
 * packet's end (sc->ok set unless it had no chunk), -1 for INVALID. */
static __always_inline int xfw_sctp_scan1(void *ctx, int is_xdp, struct xfw_ct_scratch *cs,
					  __u32 l4off)
{
	struct xfw_sctp_chunks *sc = &cs->sc;
	__u32 off = sc->off, type, len, n;
	__u8 h[XFW_SCTP_CHLEN];

	/* for_each_sctp_chunk: on while a chunk header is in the packet. */
	if (off + XFW_SCTP_CHLEN > cs->l4len) {
		sc->ok = sc->count != 0;
		return 0;
	}
	if (xfw_load_bytes(ctx, is_xdp, l4off + off, h, sizeof(h)) < 0)
		return -1;
	type = h[0];
	len = (__u32)h[2] << 8 | h[3];
	if (type == XFW_SCTP_INIT || type == XFW_SCTP_INIT_ACK || type == XFW_SCTP_SHUTDOWN_COMPLETE)
		sc->flag = 1;
	/* COOKIE ECHO/ACK not the first chunk, INIT, INIT ACK or SHUTDOWN
	 * COMPLETE not the only one, a chunk of length 0. */
	if (((type == XFW_SCTP_COOKIE_ACK || type == XFW_SCTP_COOKIE_ECHO || sc->flag) && sc->count) ||
	    len == 0)
		return -1;
	if (type < 32)
		sc->map |= XFW_SCTP_BIT(type);
	if (xfw_sctp_index(type) < 0) {
		sc->other = 1;
	} else {
		n = sc->n;
		if (n >= XFW_SCTP_RECS)
			return -1;
		sc->rec[n & XFW_SCTP_RECS_MASK][0] = type;
		sc->rec[n & XFW_SCTP_RECS_MASK][1] = h[1];
		sc->n = n + 1;
	}
	sc->count++;
	sc->off = off + ((len + 3) & ~3u); /* SCTP_PAD4 */
	return 1;
}

/* xfw_sctp_scan walks every chunk of the SCTP packet whose transport
 * header is at l4off into cs->sc; cs->sc.ok stays 0 when the packet is
 * INVALID to do_basic_checks or passes a bound. */
static __always_inline void xfw_sctp_scan(void *ctx, int is_xdp, struct xfw_ct_scratch *cs, __u32 l4off)
{
	struct xfw_sctp_chunks *sc = &cs->sc;
	struct bpf_iter_num it;

	sc->ok = 0;
	sc->map = 0;
	sc->other = 0;
	sc->n = 0;
	sc->off = XFW_SCTP_HLEN;
	sc->count = 0;
	sc->flag = 0;
	bpf_iter_num_new(&it, 0, XFW_SCTP_SCAN_MAX);
	while (bpf_iter_num_next(&it)) {
		if (xfw_sctp_scan1(ctx, is_xdp, cs, l4off) <= 0)
			break;
	}
	bpf_iter_num_destroy(&it);
}

/* xfw_sctp_scan_xdp and xfw_sctp_scan_tc are xfw_sctp_scan for a program
 * type. Global functions: the walk is verified once. */
__attribute__((noinline)) int xfw_sctp_scan_xdp(struct xdp_md *ctx, struct xfw_ct_scratch *cs, __u32 l4off)
{
	if (!ctx || !cs)
		return 0;
	xfw_sctp_scan(ctx, 1, cs, l4off);
	return 0;
}

__attribute__((noinline)) int xfw_sctp_scan_tc(struct __sk_buff *skb, struct xfw_ct_scratch *cs, __u32 l4off)
{
	if (!skb || !cs)
		return 0;
	xfw_sctp_scan(skb, 0, cs, l4off);
	return 0;
}

/* xfw_sctp_vtag returns the packet's verification tag, as it is on the
 * wire. */
static __always_inline __u32 xfw_sctp_vtag(struct xfw_ct_scratch *cs)
{
	return *(__u32 *)&cs->buf[4];
}

/* xfw_sctp_init_tag returns the initiate tag of the packet's INIT or INIT
 * ACK chunk (wire order) in *tag, or 0 when its init header is not in the
 * packet (the kernel's skb_header_pointer fails) or the buffer. Such a
 * chunk is the packet's only one (do_basic_checks), right after the
 * common header. */
static __always_inline int xfw_sctp_init_tag(struct xfw_ct_scratch *cs, __u32 *tag)
{
	__u32 t = XFW_SCTP_HLEN + XFW_SCTP_CHLEN;

	if (t + XFW_SCTP_INITHDR > cs->l4len || t + XFW_SCTP_INITHDR > cs->buflen)
		return 0;
	*tag = *(__u32 *)&cs->buf[t];
	return 1;
}

/* xfw_sctp_new1 is sctp_new for a chunk of type type (one with a row):
 * v's vtags for a new association's first packet (an INIT's initiate tag
 * for the reply, a HEARTBEAT's tag for its own direction, a SHUTDOWN
 * ACK's for the reply; the other chunks set none: TestConntrackSCTP-
 * ChunksAgainstKernel's HEARTBEAT ACK), or -1 when the chunk cannot open
 * one. */
static __always_inline int xfw_sctp_new1(struct xfw_ct_val *v, struct xfw_ct_scratch *cs, __u32 type)
{
	__u32 tag, vtag = xfw_sctp_vtag(cs);
	int idx = xfw_sctp_index(type), ns;

	if (idx < 0)
		return -1; /* stays NONE: invalid */
	ns = xfw_sctp_trans[0][idx & 0xf][XFW_SCTP_NONE];
	if (ns == XFW_SCTP_NONE || ns == XFW_SCTP_MAX)
		return -1;
	if (type == XFW_SCTP_INIT) {
		if (vtag || !xfw_sctp_init_tag(cs, &tag))
			return -1;
		v->side[1].end = tag;
	} else if (type == XFW_SCTP_HEARTBEAT) {
		v->side[0].end = vtag;
	} else if (type == XFW_SCTP_SHUTDOWN_ACK) {
		/* Out of the blue: a SHUTDOWN COMPLETE or ABORT comes back. */
		v->side[1].end = vtag;
	}
	v->tcp_state = XFW_SCTP_NONE;
	return 0;
}

/* xfw_sctp_heartbeat is the vtag special case of a HEARTBEAT (ack 0) or
 * HEARTBEAT ACK (ack 1) chunk: 0 to go on with the chunk, 1 to skip it
 * (w->ignore set), -1 for INVALID. map: the packet's chunk types. */
static __always_inline int xfw_sctp_heartbeat(struct xfw_ct_val *v, struct xfw_sctp_walk *w, __u32 vtag,
					      __u32 map, int ack)
{
	struct xfw_ct_tcp_side *me = &v->side[w->dir & 1], *peer = &v->side[(w->dir & 1) ^ 1];

	if (me->end == 0) {
		me->end = vtag;
		return 0;
	}
	if (vtag != me->end) {
		if ((map & XFW_SCTP_BIT(XFW_SCTP_DATA)) || w->ignore)
			return -1;
		if (!ack) {
			v->last_flags |= XFW_SCTP_HB_VTAG_FAILED;
			v->last_dir = w->dir;
			w->ignore = 1;
			return 1;
		}
		if (!(v->last_flags & XFW_SCTP_HB_VTAG_FAILED) || v->last_dir == w->dir)
			return -1;
		v->last_flags &= ~XFW_SCTP_HB_VTAG_FAILED;
		me->end = vtag;
		peer->end = 0;
		return 0;
	}
	v->last_flags &= ~XFW_SCTP_HB_VTAG_FAILED;
	return 0;
}

/* xfw_sctp_state1 applies a chunk of type type with flags flags to v (the
 * loop body of nf_conntrack_sctp_packet): 0, 1 to skip it, -1 for
 * INVALID. */
static __always_inline int xfw_sctp_state1(struct xfw_ct_val *v, struct xfw_ct_scratch *cs, __u32 type,
					   __u32 flags, struct xfw_sctp_walk *w)
{
	struct xfw_ct_tcp_side *me = &v->side[w->dir & 1], *peer = &v->side[(w->dir & 1) ^ 1];
	__u32 vtag = xfw_sctp_vtag(cs), old, ns, tag, want;
	int idx, r;

	if (type == XFW_SCTP_INIT) {
		if (vtag != 0)
			return -1;
	} else if (type == XFW_SCTP_ABORT || type == XFW_SCTP_SHUTDOWN_COMPLETE) {
		want = (flags & XFW_SCTP_FLAG_T) ? peer->end : me->end;
		if (vtag != want)
			return -1;
	} else if (type == XFW_SCTP_COOKIE_ECHO) {
		if (vtag != me->end)
			return -1;
	} else if (type == XFW_SCTP_COOKIE_ACK) {
		me->flags = 0;
		peer->flags = 0;
	} else if (type == XFW_SCTP_HEARTBEAT || type == XFW_SCTP_HEARTBEAT_ACK) {
		r = xfw_sctp_heartbeat(v, w, vtag, cs->sc.map, type == XFW_SCTP_HEARTBEAT_ACK);
		if (r)
			return r;
	}
	old = v->tcp_state;
	idx = xfw_sctp_index(type);
	if (idx < 0 || old >= XFW_SCTP_MAX)
		return 0; /* DATA, SACK, ...: the state stays */
	ns = xfw_sctp_trans[w->dir & 1][idx & 0xf][old];
	if (ns >= XFW_SCTP_MAX)
		return -1;
	if (type == XFW_SCTP_INIT) {
		if (!xfw_sctp_init_tag(cs, &tag))
			return -1;
		/* An INIT whose tag is the one recorded (retransmitted or
		 * stale) leaves the init flags alone. */
		if (old == XFW_SCTP_NONE || peer->end != tag) {
			if (me->flags && peer->flags)
				peer->flags = 0;
			me->flags = 1;
		}
		peer->end = tag;
		/* An INIT retransmitted in CLOSED does not renew the timeout. */
		if (ns == XFW_SCTP_CLOSED && old == XFW_SCTP_CLOSED && (v->status & XFW_CTST_CONFIRMED))
			w->ignore = 1;
	} else if (type == XFW_SCTP_INIT_ACK) {
		if (!xfw_sctp_init_tag(cs, &tag))
			return -1;
		want = peer->end;
		if (!peer->flags && want && want != tag)
			return -1;
		if (me->flags && peer->flags && want != tag)
			return -1; /* collision */
		peer->end = tag;
	}
	v->tcp_state = ns;
	if (ns != old && ns == XFW_SCTP_ESTABLISHED)
		v->status |= XFW_CTST_ASSURED;
	return 0;
}

/* xfw_sctp_step runs pass w->pass on recorded chunk i (cs->sc.rec): 0, or
 * -1 for INVALID. A global function: a walk's iterations each verify only
 * its call. */
__attribute__((noinline)) int xfw_sctp_step(struct xfw_ct_val *v, struct xfw_ct_scratch *cs, __u32 i)
{
	__u32 type, flags;
	int r;

	if (!v || !cs)
		return -1;
	type = cs->sc.rec[i & XFW_SCTP_RECS_MASK][0];
	flags = cs->sc.rec[i & XFW_SCTP_RECS_MASK][1];
	if (cs->sw.pass == XFW_SCTP_PASS_NEW)
		r = xfw_sctp_new1(v, cs, type);
	else
		r = xfw_sctp_state1(v, cs, type, flags, &cs->sw);
	return r < 0 ? -1 : 0;
}

/* xfw_sctp_walk runs pass on every recorded chunk, in the packet's order
 * (the chunks without a row change nothing in either pass but make
 * sctp_new fail, which xfw_ct_sctp checks); -1 when one is INVALID. On the
 * kernel's numeric iterator (iter.h): verified once, not per chunk. */
static __always_inline int xfw_sctp_walk(struct xfw_ct_val *v, struct xfw_ct_scratch *cs, __u32 pass)
{
	struct bpf_iter_num it;
	__u32 n = cs->sc.n;
	int r = 0, *ip;

	cs->sw.pass = pass;
	bpf_iter_num_new(&it, 0, XFW_SCTP_RECS);
	while ((ip = bpf_iter_num_next(&it))) {
		if ((__u32)*ip >= n)
			break;
		if (xfw_sctp_step(v, cs, *ip) < 0) {
			r = -1;
			break;
		}
	}
	bpf_iter_num_destroy(&it);
	return r;
}

/* Chunks that exempt a packet from the verification tag check (8.5.1). */
#define XFW_SCTP_VTAG_EXEMPT                                                                      \
	(XFW_SCTP_BIT(XFW_SCTP_INIT) | XFW_SCTP_BIT(XFW_SCTP_SHUTDOWN_COMPLETE) |                  \
	 XFW_SCTP_BIT(XFW_SCTP_COOKIE_ECHO) | XFW_SCTP_BIT(XFW_SCTP_ABORT) |                       \
	 XFW_SCTP_BIT(XFW_SCTP_SHUTDOWN_ACK) | XFW_SCTP_BIT(XFW_SCTP_HEARTBEAT) |                  \
	 XFW_SCTP_BIT(XFW_SCTP_HEARTBEAT_ACK))
/* Chunks that may not open an association (out of the blue, 8.4). */
#define XFW_SCTP_OOTB_DISCARD                                                                     \
	(XFW_SCTP_BIT(XFW_SCTP_ABORT) | XFW_SCTP_BIT(XFW_SCTP_SHUTDOWN_COMPLETE) |                 \
	 XFW_SCTP_BIT(XFW_SCTP_COOKIE_ACK))

/* xfw_ct_sctp is nf_conntrack_sctp_packet (after sctp_error's length
 * check, which the caller made) for the packet in cs of direction dir on
 * connection v; new: v is being opened by it. Returns XFW_TCPR_OK or
 * XFW_TCPR_INVALID. Inlined into xfw_ct_advance (a global function):
 * the tracker's call chain has no stack for another level. */
static __always_inline int xfw_ct_sctp(struct xfw_ct_val *v, struct xfw_ct_scratch *cs,
					  __u32 dir, __u32 new)
{
	struct xfw_sctp_walk *w;
	struct xfw_ct_cfg *cfg;
	__u32 zero = 0, st;

	if (!v || !cs)
		return XFW_TCPR_INVALID;
	cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &zero);
	if (!cfg)
		return XFW_TCPR_INVALID;
	w = &cs->sw;
	__builtin_memset(w, 0, sizeof(*w));
	w->dir = dir & 1;
	/* do_basic_checks (the hook's scan): a packet without a chunk is
	 * INVALID too, so is one past the scan's bounds. */
	if (!cs->sc.ok || XFW_SCTP_HLEN > cs->buflen)
		return XFW_TCPR_INVALID;
	/* sctp_new fails at a chunk without a row. */
	if (new && ((cs->sc.map & XFW_SCTP_OOTB_DISCARD) || cs->sc.other ||
		    xfw_sctp_walk(v, cs, XFW_SCTP_PASS_NEW)))
		return XFW_TCPR_INVALID;
	if (!(cs->sc.map & XFW_SCTP_VTAG_EXEMPT) && xfw_sctp_vtag(cs) != v->side[dir & 1].end)
		return XFW_TCPR_INVALID;
	if (xfw_sctp_walk(v, cs, XFW_SCTP_PASS_STATE))
		return XFW_TCPR_INVALID;
	if (w->ignore)
		return XFW_TCPR_OK; /* accepted, the timeout not renewed */
	st = v->tcp_state;
	st = XFW_CTT_SCTP + (st < XFW_SCTP_MAX ? st : XFW_SCTP_NONE);
	xfw_barrier_var(st); /* the bound below stays for the verifier */
	if (st >= XFW_CTT_N)
		return XFW_TCPR_INVALID;
	v->expires = bpf_jiffies64() + cfg->timeout[st];
	return XFW_TCPR_OK;
}

#endif /* XFW_CT_SCTP_H */
