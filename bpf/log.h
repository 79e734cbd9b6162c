/* SPDX-License-Identifier: GPL-2.0 */
/*
 * log.h — the LOG target's events: for each LOG entry a packet met during
 * classification (struct xfw_pending .logs), an event with the rule's
 * options and the first XFW_LOG_SNAP bytes of the frame, sent through the
 * LOG ring buffer of xfw_logrings to user space (internal/dataplane,
 * logring.go), which formats the kernel's LOG line. NFLOG entries are LOG
 * entries whose options have XFW_LOG_NFLOG: their events go through the
 * NFLOG ring (xfw nflog reads them), with the group and copy length, and
 * carry as much of the packet as they pass on (up to XFW_NFLOG_SNAP_MAX
 * bytes, in records of a few constant sizes: xfw_log_reserve).
 *
 * Conventions: one emitter per hook, a global function around
 * xfw_emit_logs (XDP copies from the xdp_md, TC from
 * the skb); copy sizes are constants or masked in the very register the
 * helper gets, so the verifier keeps its bounds. An event the ring has no
 * room for is counted (XFW_STAT_LOG_LOST), not waited for.
 *
 * Includes: common.h, xfw_structs.h, parse.h, classify_structs.h,
 * classify_maps.h, generation.h, xfw_maps.h, owner.h, demux.h.
 */
#ifndef XFW_LOG_H
#define XFW_LOG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "generation.h"
#include "xfw_maps.h"
#include "owner.h"
#include "demux.h"
#include "iter.h"

/* xfw_nflog_want returns the bytes of a len-byte frame, from its Ethernet
 * header on, that an event of lc passes on: the LOG line's first
 * XFW_LOG_SNAP (its headers), for NFLOG the whole IP packet or its first
 * --nflog-size bytes (counted from the IP header at l3_off). */
static __always_inline __u32 xfw_nflog_want(const struct xfw_logcfg *lc, __u32 len, __u32 l3_off)
{
	__u64 want = len;

	if (!(lc->flags & XFW_LOG_NFLOG))
		return len < XFW_LOG_SNAP ? len : XFW_LOG_SNAP;
	if ((__u64)l3_off + lc->nflog_len < want)
		want = (__u64)l3_off + lc->nflog_len;
	return want;
}

/* xfw_log_reserve reserves in rb an event with room for want bytes of the
 * frame, at most XFW_NFLOG_SNAP_MAX: the smallest constant size that holds
 * them; *room is set to the bytes its .pkt holds. */
static __always_inline struct xfw_log_event *xfw_log_reserve(void *rb, __u32 want, __u32 *room)
{
	const __u32 head = sizeof(struct xfw_log_event) - XFW_LOG_SNAP;

	if (want <= XFW_LOG_SNAP) {
		*room = XFW_LOG_SNAP;
		return bpf_ringbuf_reserve(rb, sizeof(struct xfw_log_event), 0);
	}
	if (want <= XFW_NFLOG_SNAP_STD) {
		*room = XFW_NFLOG_SNAP_STD;
		return bpf_ringbuf_reserve(rb, head + XFW_NFLOG_SNAP_STD, 0);
	}
	if (want <= XFW_NFLOG_SNAP_JUMBO) {
		*room = XFW_NFLOG_SNAP_JUMBO;
		return bpf_ringbuf_reserve(rb, head + XFW_NFLOG_SNAP_JUMBO, 0);
	}
	*room = XFW_NFLOG_SNAP_MAX;
	return bpf_ringbuf_reserve(rb, head + XFW_NFLOG_SNAP_MAX, 0);
}

/* xfw_log_event reserves and fills a LOG event for entry e of generation
 * slot and a len-byte frame, or returns NULL; *room is set to the bytes of
 * the frame its .pkt has room for (XFW_LOG_SNAP, or more for NFLOG). */
static __always_inline struct xfw_log_event *xfw_log_event(__u32 slot, __u32 e,
		struct xfw_pkt *p, __u32 chain, __u32 iif, __u32 oif, __u32 len, __u32 *room)
{
	void *entries = xfw_inner(&xfw_o_entries, slot);
	void *logcfg = xfw_inner(&xfw_o_logcfg, slot);
	struct xfw_entry *ent;
	struct xfw_logcfg *lc;
	struct xfw_log_event *ev;
	__u32 aux, ring;
	void *rb;

	if (!entries || !logcfg)
		return NULL;
	ent = bpf_map_lookup_elem(entries, &e);
	if (!ent)
		return NULL;
	aux = ent->aux;
	lc = bpf_map_lookup_elem(logcfg, &aux);
	if (!lc)
		return NULL;
	ring = lc->flags & XFW_LOG_NFLOG ? XFW_RING_NFLOG : XFW_RING_LOG;
	rb = bpf_map_lookup_elem(&xfw_logrings, &ring);
	ev = rb ? xfw_log_reserve(rb, xfw_nflog_want(lc, len, p->l3_off), room) : NULL;
	if (!ev) {
		xfw_stat_inc(XFW_STAT_LOG_LOST);
		return NULL;
	}
	ev->in_ifindex = iif;
	ev->out_ifindex = oif;
	ev->rule = ent->rule;
	ev->l3_off = p->l3_off;
	ev->family = p->fam == 0 ? 4 : 6;
	ev->chain = chain;
	ev->level = lc->level;
	ev->flags = lc->flags;
	ev->has_mac = chain != XFW_CHAIN_OUTPUT;
	ev->has_uid = 0; /* the ring's memory is not cleared */
	ev->uid = 0;
	ev->gid = 0;
	ev->physin = p->physin;
	ev->physout = p->physout;
	ev->nflog_group = lc->nflog_group;
	ev->nflog_len = lc->nflog_len;
	__builtin_memcpy(ev->prefix, lc->prefix, XFW_LOG_PREFIX_LEN);
	return ev;
}

/* xfw_mask_snap masks a length below XFW_LOG_SNAP in the very register
 * passed to the helper (clang would otherwise reuse an unmasked copy and the
 * verifier would see an unbounded size). */
static __always_inline __u64 xfw_mask_snap(__u64 n)
{
	asm volatile("%[n] &= 255" : [n] "+r"(n));
	return n;
}

/* The masks of the NFLOG copy lengths, in the very register (as
 * xfw_mask_snap): one per size of xfw_log_reserve. */
static __always_inline __u64 xfw_mask_std(__u64 n)
{
	asm volatile("%[n] &= 2047" : [n] "+r"(n)); /* XFW_NFLOG_SNAP_STD - 1 */
	return n;
}

static __always_inline __u64 xfw_mask_jumbo(__u64 n)
{
	asm volatile("%[n] &= 16383" : [n] "+r"(n)); /* XFW_NFLOG_SNAP_JUMBO - 1 */
	return n;
}

static __always_inline __u64 xfw_mask_max(__u64 n)
{
	asm volatile("%[n] &= 32767" : [n] "+r"(n)); /* XFW_NFLOG_SNAP_MAX - 1 */
	return n;
}

/* xfw_copy_frame copies the first n bytes (1 ≤ n ≤ room) of the frame of
 * ctx (xdp: an xdp_md, else an skb) into ev->pkt, whose room is one of
 * xfw_log_reserve's sizes; returns the helper's result. */
static __always_inline long xfw_copy_frame(void *ctx, int xdp, struct xfw_log_event *ev, __u32 n, __u32 room)
{
	__u64 c;

	if (room == XFW_LOG_SNAP)
		c = n >= XFW_LOG_SNAP ? XFW_LOG_SNAP : xfw_mask_snap(n - 1) + 1;
	else if (room == XFW_NFLOG_SNAP_STD)
		c = xfw_mask_std(n - 1) + 1;
	else if (room == XFW_NFLOG_SNAP_JUMBO)
		c = xfw_mask_jumbo(n - 1) + 1;
	else
		c = xfw_mask_max(n - 1) + 1;
	return xdp ? bpf_xdp_load_bytes(ctx, 0, ev->pkt, c) : bpf_skb_load_bytes(ctx, 0, ev->pkt, c);
}

/* xfw_emit_one sends the event of pending LOG entry i of the hook's
 * scratch sc (sc->st) for its packet (sc->p) of len bytes: ctx is the XDP
 * hook's struct xdp_md when xdp, else the TC hook's struct __sk_buff (the
 * frame's bytes are copied by that hook's helper). *ids holds the
 * socket's ids when *has_ids; at XDP in INPUT, the first entry that prints
 * them looks them up (*demuxed then set). */
static __always_inline void xfw_emit_one(void *ctx, int xdp, struct xfw_xdp_scratch *sc, __u32 i,
					 __u32 len, __u32 chain, __u32 iif, __u32 oif,
					 struct xfw_log_ids *ids, int *has_ids, int *demuxed)
{
	struct xfw_pending *st = &sc->st;
	struct xfw_log_event *ev;
	__u32 room = 0, n;

	ev = xfw_log_event(st->slot, st->logs[i & (XFW_MAX_PENDING_LOGS - 1)], &sc->p, chain, iif, oif,
			   len, &room);
	if (!ev)
		return;
	ev->mark = st->log_marks[i & (XFW_MAX_PENDING_LOGS - 1)];
	ev->view = st->log_views[i & (XFW_MAX_PENDING_LOGS - 1)];
	if (ev->view && xdp && chain == XFW_CHAIN_FORWARD)
		ev->view |= XFW_LOGV_FWD;
	/* Early demux runs after PREROUTING: its entries print none. */
	if (xdp && chain == XFW_CHAIN_INPUT && !*demuxed &&
	    (ev->flags & (XFW_LOG_UID | XFW_LOG_VIEW_PRE)) == XFW_LOG_UID) {
		*has_ids = xfw_demux_ids_xdp(ctx, &sc->p, ids, st->slot);
		*demuxed = 1;
	}
	if (*has_ids && (ev->flags & XFW_LOG_UID) && !(ev->flags & XFW_LOG_VIEW_PRE)) {
		ev->has_uid = 1;
		ev->uid = ids->uid;
		ev->gid = ids->gid;
	}
	ev->pkt_len = len;
	/* The frame's bytes the event has room for; constant or masked
	 * sizes keep the verifier's bounds. */
	n = len < room ? len : room;
	ev->snap_len = n;
	if (n == 0 || xfw_copy_frame(ctx, xdp, ev, n, room) < 0)
		ev->snap_len = 0;
	bpf_ringbuf_submit(ev, 0);
}

/* xfw_emit_logs_xdp sends the events of the LOG entries the XDP hook's
 * scratch sc holds (xfw_emit_one). A global function, as
 * xfw_emit_logs_tc: verified once, not on every path of the hook that
 * reaches it (given the scratch, not p and st: five arguments at most). */
__attribute__((noinline)) int xfw_emit_logs_xdp(struct xdp_md *ctx, struct xfw_xdp_scratch *sc,
						__u32 chain, __u32 iif, __u32 oif)
{
	struct xfw_log_ids ids = {};
	int has_ids = 0, demuxed = 0, *ip;
	struct bpf_iter_num it;
	__u32 len, i;

	if (!ctx || !sc)
		return 0;
	len = ctx->data_end - ctx->data;
	/* On the numeric iterator (iter.h): the event is verified a few
	 * times, not once per pending entry. */
	bpf_iter_num_new(&it, 0, XFW_MAX_PENDING_LOGS);
	while ((ip = bpf_iter_num_next(&it))) {
		i = *ip;
		if (i >= XFW_MAX_PENDING_LOGS || i >= sc->st.nlogs)
			break;
		xfw_emit_one(ctx, 1, sc, i, len, chain, iif, oif, &ids, &has_ids, &demuxed);
	}
	bpf_iter_num_destroy(&it);
	return 0;
}

/* xfw_emit_log_tc sends the event of pending LOG entry i (i_chain's low
 * byte) of the TC hook's scratch sc in chain (its second byte) for the
 * packet from iif to oif (ifs: iif << 32 | oif); when i_chain's bit
 * XFW_LOG_HAS_IDS is set, ids (uid << 32 | gid) are its socket's. A
 * global function: inlined in xfw_emit_logs_tc's loop, the event was
 * verified again for every pending entry (~13,000 instructions per TC
 * program). */
#define XFW_LOG_HAS_IDS (1u << 16)
__attribute__((noinline)) int xfw_emit_log_tc(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					      __u32 i_chain, __u64 ifs, __u64 ids)
{
	struct xfw_log_ids li = { .uid = ids >> 32, .gid = (__u32)ids };
	int has_ids = !!(i_chain & XFW_LOG_HAS_IDS), demuxed = 1;

	if (!skb || !sc)
		return 0;
	xfw_emit_one(skb, 0, sc, i_chain & 0xff, skb->len, (i_chain >> 8) & 0xff, ifs >> 32, (__u32)ifs,
		     &li, &has_ids, &demuxed);
	return 0;
}

/* xfw_emit_logs_tc sends the events of the LOG entries the TC hook's
 * scratch sc holds (a global function). --log-uid: the socket of a packet
 * the host sends (OUTPUT and its POSTROUTING) is looked up once. */
__attribute__((noinline)) int xfw_emit_logs_tc(struct __sk_buff *skb, struct xfw_xdp_scratch *sc,
					       __u32 chain, __u32 iif, __u32 oif)
{
	struct xfw_log_ids ids = {};
	__u32 has_ids = 0;

	if (!skb || !sc)
		return 0;
	if (chain == XFW_CHAIN_OUTPUT && xfw_log_owner(skb, &ids))
		has_ids = XFW_LOG_HAS_IDS;
	for (int i = 0; i < XFW_MAX_PENDING_LOGS; i++) {
		if (i >= sc->st.nlogs)
			break;
		xfw_emit_log_tc(skb, sc, has_ids | (chain & 0xff) << 8 | i, (__u64)iif << 32 | oif,
				(__u64)ids.uid << 32 | ids.gid);
	}
	return 0;
}

#endif /* XFW_LOG_H */
