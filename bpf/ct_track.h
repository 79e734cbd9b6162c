/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_track.h — connection tracking proper: a packet's connection found or
 * opened, its state advanced by its protocol's tracker (xfw_ct_advance:
 * TCP in ct_tcp.h, SCTP in ct_sctp.h, UDP, ICMP, generic), its XFW_F_CT value returned
 * (xfw_ct_track); a new connection's entry created once the packet is
 * accepted (xfw_ct_confirm); assured connections promoted to xfw_ct, whose
 * expired entries are swept when it is full; the loopback handoff from
 * OUTPUT to INPUT.
 *
 * Conventions: the tracker, the handoff and xfw_ct_track are global
 * functions, each verified once; an entry is updated under its lock
 * (ct_conn.h).
 *
 * Includes: common.h, xfw_structs.h, parse.h, local.h, ct_structs.h,
 * ct_maps.h, ct_conn.h, ct_tcp.h, ct_sctp.h, ct_related.h.
 */
#ifndef XFW_CT_TRACK_H
#define XFW_CT_TRACK_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "local.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"
#include "ct_tcp.h"
#include "ct_sctp.h"
#include "ct_related.h"

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

/* xfw_ct_gre: nf_conntrack_gre_packet (GRE is keyed by its addresses and,
 * version 1, its call ID: ct_conn.h xfw_ct_gre_key). status is before this packet: a
 * connection that has seen a reply gets the stream timeout and is
 * assured. */
static __always_inline void xfw_ct_gre(struct xfw_ct_val *v, struct xfw_ct_cfg *cfg, __u64 now)
{
	if (v->status & XFW_CTST_SEEN_REPLY) {
		v->expires = now + cfg->timeout[XFW_CTT_GRE_STREAM];
		v->status |= XFW_CTST_ASSURED;
	} else {
		v->expires = now + cfg->timeout[XFW_CTT_GRE];
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
	} else if (proto == IPPROTO_SCTP) {
		r = xfw_ct_sctp(v, cs, dir, new);
	} else if (proto == IPPROTO_ICMP) {
		v->expires = now + cfg->timeout[XFW_CTT_ICMP];
	} else if (proto == IPPROTO_ICMPV6) {
		v->expires = now + cfg->timeout[XFW_CTT_ICMPV6];
	} else if (proto == IPPROTO_GRE) {
		xfw_ct_gre(v, cfg, now);
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
	xfw_ctstat_add(XFW_CTSTAT_MAIN_GONE, deleted);
	return 1;
}

/* Promotion: moving a connection that became ASSURED from xfw_ct_new to
 * xfw_ct without losing an update, with CPUs A (promoting) and B (another
 * packet of the connection, CONNMARK, a lookup, user space) racing.
 *
 * A holds the entry E of xfw_ct_new under its lock (the tracker's, taken
 * before advancing the connection) and, still holding it: (1) copies E;
 * (2) inserts the copy into xfw_ct (BPF_NOEXIST); (3) releases the lock
 * by writing XFW_CT_LOCK_MOVED into it, which no compare-and-swap from 0
 * ever takes again; (4) deletes E from xfw_ct_new.
 *
 * - Updates. Everything that writes E takes its lock first (the tracker,
 *   CONNMARK); an update of E is either before A took the lock, so in the
 *   copy, or after (3), where the writer's xfw_ct_lock returns MOVED and
 *   it looks the connection up in xfw_ct, which has held it since (2).
 *   Between (2) and (3) B cannot hold E's lock; a B that finds the copy
 *   in xfw_ct updates the copy, the connection from then on.
 * - Reuse. After (4) E's element is free, and the LRU table hands it to
 *   the next insert at once: a B that found E but reaches its lock only
 *   then would lock another connection's entry. The tracker checks a
 *   lock taken in xfw_ct_new against a new lookup of the key and goes to
 *   the copy when the element is not E any more (ct_conn.h
 *   xfw_ct_lock_found); A reads nothing of E after (3).
 * - Lookups (xfw_ct_find, xfw_ct_lookup) try xfw_ct, then xfw_ct_new,
 *   skipping an entry marked moved, then xfw_ct again: a lookup of
 *   xfw_ct_new that misses or finds E moved comes after (2), so the
 *   second lookup of xfw_ct finds the copy. A connection never looks
 *   absent while it is being moved (it would have opened a new one).
 * - Deletion (conntrack -D, -F, an expiry): user space deletes from
 *   xfw_ct_new, then from xfw_ct. If E left xfw_ct_new before (4), A's
 *   delete fails and A deletes its copy: a deletion racing the move wins,
 *   whichever table it reached first (if it reached xfw_ct after (2) the
 *   copy is gone already). A deletion after (4) finds the copy.
 * - The sweep of xfw_ct (when the insert finds it full) runs after the
 *   lock is released, and the move is tried again under the lock: the
 *   lock is held only for a copy and one insert.
 * - A lock given up (xfw_ct_lock's wait over, the holder on another CPU
 *   for milliseconds) means no promotion: the next packet tries. (The
 *   tracker's own fallback, updating without the lock, is as racy against
 *   a promotion as against another update; the wait makes it rare.)
 */

/* xfw_ct_move is steps (1) to (4) above for entry e, whose lock the caller
 * holds, under cs->key. Returns 0 when moved (the lock word says so, and
 * is not held any more), else the insert's error (the caller still holds
 * the lock). */
static __always_inline long xfw_ct_move(struct xfw_ct_scratch *cs, struct xfw_ct_entry *e)
{
	long rc;

	cs->nv_pad = XFW_CT_LOCK_FREE; /* the copy's lock word */
	__builtin_memcpy(&cs->nv, &e->v, sizeof(cs->nv));
	rc = bpf_map_update_elem(&xfw_ct, &cs->key, &cs->nv_pad, BPF_NOEXIST);
	if (rc != 0)
		return rc;
	__sync_lock_test_and_set(&e->lock, XFW_CT_LOCK_MOVED);
	xfw_ctstat_add(XFW_CTSTAT_PROMOTE, 1);
	if (bpf_map_delete_elem(&xfw_ct_new, &cs->key) == 0) {
		xfw_ct_gone(XFW_CTT_EMB);
	} else if (bpf_map_delete_elem(&xfw_ct, &cs->key) == 0) {
		/* E was deleted during the move: so is its copy. */
		xfw_ct_gone(XFW_CTT_MAIN);
	}
	return 0;
}

/* xfw_ct_promote moves entry e of xfw_ct_new, which became ASSURED and
 * whose lock the caller holds, to the table of assured connections (when
 * that one has room), and releases the lock either way. The value image
 * is built in the scratch: the stack has no room. A global function:
 * inlined, its copies and the sweep were verified on every path of the
 * tracker (~7,000 instructions per program). Returns 0. */
__attribute__((noinline)) int xfw_ct_promote(struct xfw_ct_scratch *cs, struct xfw_ct_entry *e,
					     struct xfw_ct_cfg *cfg, __u64 now)
{
	long rc;

	if (!cs || !e || !cfg)
		return 0;
	rc = xfw_ct_move(cs, e);
	if (rc == 0)
		return 0;
	xfw_ct_unlock(&e->lock);
	/* -EEXIST: xfw_ct has the key already (an entry opened while the
	 * connection was moving from another xfw_ct_new entry); lookups find
	 * that one first. */
	if (rc != -7 /* E2BIG: full */)
		return 0;
	if (!xfw_ct_sweep_main(now, cfg->hz)) {
		xfw_ctstat_add(XFW_CTSTAT_PROMOTE_FULL, 1);
		return 0;
	}
	if (xfw_ct_lock(&e->lock) != 1)
		return 0; /* moved meanwhile, or busy: the next packet tries */
	rc = xfw_ct_move(cs, e);
	if (rc == 0)
		return 0;
	xfw_ct_unlock(&e->lock);
	if (rc == -7)
		xfw_ctstat_add(XFW_CTSTAT_PROMOTE_FULL, 1);
	return 0;
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
#define XFW_CTM_LOOPCOPY 2 /* the host's copy of its broadcast or multicast
			    * packet (loopcopy.h): the connection OUTPUT
			    * gives the original, untouched */

/* xfw_ct_dnat_stranger reports whether p, a packet without ports that the
 * XDP hook's translation before routing left as it came
 * (XFW_NATPRE_KEPT), goes the original way of connection e (key k), which
 * a DNAT translated by the address. e is tracked under its translated
 * tuple, p's, but e's own packets come with the original destination and
 * are translated by then: p is another connection's. The kernel looks it
 * up by its own tuple, finds none and opens a new one (NEW in the chains)
 * whose reply tuple is e's; its null binding has no port to change, so
 * the confirmation drops it (nat_null.h xfw_nat_null_clash), unless nat
 * PREROUTING translates it elsewhere. */
static __always_inline int xfw_ct_dnat_stranger(const struct xfw_pkt *p, const struct xfw_ct_entry *e,
						struct xfw_ct_key *k, __u32 proto, int reqtype, int srcb)
{
	return p->nat_pre == XFW_NATPRE_KEPT && reqtype < 0 && !xfw_ct_ports(proto) &&
	       proto != IPPROTO_DCCP && (e->v.nat_flags & XFW_NAT_F_DST) &&
	       srcb == !!(e->v.status & XFW_CTST_ORIG_B) && !xfw_ct_self(k);
}

/* xfw_ct_loopcopy returns the XFW_F_CT value of the copy of a broadcast or
 * multicast packet the host delivers to itself (dev_loopback_xmit), whose
 * key cs->key holds (reply: an ICMP query's direction, else -1; srcb as
 * xfw_ct_mkkey returns it). The copy carries the connection OUTPUT gave
 * the original, confirmed at the copy's POSTROUTING (the kernel's
 * PREROUTING leaves a packet with a connection as it is): the state
 * OUTPUT gives the original, without tracking the packet a second time
 * (the original is tracked at TC egress). xfw's OUTPUT may judge the
 * original after the copy (netif_rx runs the backlog at once when it is
 * called with bottom halves on): without an entry the connection is a
 * new one, NEW (and CONFIRMED: nat's chains skip it). */
static __always_inline __u32 xfw_ct_loopcopy(struct xfw_pkt *p, struct xfw_ct_scratch *cs, int reply,
					     int srcb, __u64 now)
{
	struct xfw_ct_entry *e;
	__u32 dir, st, status;
	int table;

	e = xfw_ct_peek(&cs->key, &table);
	if (e && (__s64)(e->v.expires - now) > 0) {
		status = e->v.status;
		dir = reply >= 0 ? reply : (srcb != !!(status & XFW_CTST_ORIG_B));
		st = (dir == 1 || (status & XFW_CTST_SEEN_REPLY)) ? XFW_CTS_ESTABLISHED : XFW_CTS_NEW;
		xfw_ct_tuple(p, &cs->key, &e->v);
		return xfw_ctv(st, dir & 1, status, p->proto);
	}
	if (reply > 0)
		return XFW_CTS_INVALID; /* a reply opens nothing */
	__builtin_memset(&cs->nv, 0, sizeof(cs->nv));
	cs->nv.status = (srcb ? XFW_CTST_ORIG_B : 0) | XFW_CTST_CONFIRMED;
	xfw_ct_tuple(p, &cs->key, &cs->nv);
	return xfw_ctv(XFW_CTS_NEW, 0, cs->nv.status, p->proto);
}

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
	int table, srcb, r, locked, reqtype = -1, reply = 0, lo = -1, gre = 0;

	if (!p || !cs)
		return XFW_CTS_INVALID;
	cs->pending = XFW_CTP_NONE;
	cs->attached = 0;
	cs->amark = 0;
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

		/* udp_error: the length field must cover the header and fit
		 * (the reassembled datagram, of which a first fragment, "more
		 * fragments" set, is the start: frag.h). */
		if (p->sport > 0xffff || cs->buflen < 8)
			return XFW_CTS_INVALID;
		ulen = xfw_rd16(cs->buf, 4);
		if (proto == IPPROTO_UDP &&
		    (ulen < 8 || (ulen > cs->l4len && !(p->fragmented & XFW_FRAG_MORE))))
			return XFW_CTS_INVALID;
		/* udplite_error: the length field is the checksum coverage, 0
		 * (everything) or at least the header and within the packet;
		 * the checksum is mandatory (a zero field is INVALID: a check
		 * of the field, not a verification of the sum). */
		if (proto == IPPROTO_UDPLITE &&
		    ((ulen != 0 && (ulen < 8 || ulen > cs->l4len)) || xfw_rd16(cs->buf, 6) == 0))
			return XFW_CTS_INVALID;
	} else if (proto == IPPROTO_SCTP) {
		/* sctp_error: a packet shorter than the common header. */
		if (p->sport > 0xffff || cs->l4len < XFW_SCTP_HLEN || cs->buflen < XFW_SCTP_HLEN)
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
	} else if (proto == IPPROTO_GRE) {
		gre = xfw_ct_gre_key(cs->buf, 0, cs->buflen);
		if (gre < 0)
			return XFW_CTS_INVALID;
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
				    p->dst_hi, p->dst_lo, gre);
	}
	if (mode == XFW_CTM_LOOPCOPY)
		return xfw_ct_loopcopy(p, cs, reqtype >= 0 ? reply : -1, srcb, now);
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
	if (e && xfw_ct_dnat_stranger(p, e, &cs->key, proto, reqtype, srcb))
		e = 0; /* a new connection, dropped at confirmation */
	if (e) {
		/* A connection we know, locked before anything is read from
		 * it: found in xfw_ct_new, its element may have been moved
		 * and even reused meanwhile (xfw_ct_lock_found). */
		locked = xfw_ct_lock_found(&cs->key, &e, &table);
		if (!e)
			goto fresh; /* deleted meanwhile: a new connection */
		if (reqtype >= 0) {
			if (e->v.icmp_type != reqtype) {
				if (locked == 1)
					xfw_ct_unlock(&e->lock);
				return XFW_CTS_INVALID;
			}
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
		status = e->v.status;
		/* The state before the advance waits in the scratch: kept in
		 * a register across xfw_ct_advance it was spilled, and the
		 * tracker's frame overran the TC egress chain's 512 bytes of
		 * stack (xfw_tc_bridged's tracking). Read back as one of two
		 * constants, for the verifier's paths. */
		cs->pre_state = (dir == 1 || (status & XFW_CTST_SEEN_REPLY)) ? XFW_CTS_ESTABLISHED : XFW_CTS_NEW;
		r = xfw_ct_advance(&e->v, cs, proto, dir, 0);
		status = e->v.status;
		st = cs->pre_state == XFW_CTS_ESTABLISHED ? XFW_CTS_ESTABLISHED : XFW_CTS_NEW;
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
		/* Read while the entry is ours: a promoted one is deleted, and
		 * its element may be another connection's at once. */
		if (value != XFW_CTS_INVALID)
			xfw_ct_tuple(p, &cs->key, &e->v);
		/* The promotion releases the lock itself (xfw_ct_promote). */
		if (locked == 1 && r == XFW_TCPR_OK && table == XFW_CTT_EMB &&
		    (status & XFW_CTST_ASSURED))
			xfw_ct_promote(cs, e, cfg, now);
		else if (locked == 1)
			xfw_ct_unlock(&e->lock);
		if (r == XFW_TCPR_REPEAT)
			xfw_ct_delete(&cs->key, table);
		/* Reopening a closed connection (a SYN in TIME_WAIT or after
		 * an RST): the old entry is gone, the packet opens a new one. */
		if (r != XFW_TCPR_REPEAT)
			return value;
	}

	/* A new connection: its entry waits for the verdict. */
fresh:
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
	if (bpf_map_update_elem(&xfw_ct_new, &cs->key, &cs->nv_pad, BPF_NOEXIST) == 0)
		xfw_ctstat_add(XFW_CTSTAT_INSERT, 1);
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

#endif /* XFW_CT_TRACK_H */
