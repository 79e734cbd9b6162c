/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_hook.h — what the hooks (xfw.c) call of connection tracking: whether
 * the active generation tracks (xfw_ct_active), this CPU's scratch and the
 * copy of the headers tracking reads (xfw_ct_load_xdp / _tc), the
 * established fast path (xfw_ct_fast), and the state of REJECT's replies:
 * the XDP reply's RST tracked as it leaves (xfw_ct_track_rst), the TC
 * reply for the host itself given its connection (xfw_ct_reply), the
 * connection a RST answered closed (xfw_ct_rst_close).
 *
 * Includes: common.h, xfw_structs.h, parse.h, classify_maps.h,
 * generation.h, reject_structs.h, reject_maps.h, ct_structs.h, ct_maps.h,
 * ct_track.h.
 */
#ifndef XFW_CT_HOOK_H
#define XFW_CT_HOOK_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_maps.h"
#include "generation.h"
#include "reject_structs.h"
#include "reject_maps.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_track.h"

/* xfw_ct_track_rst tracks the TCP RST that REJECT --reject-with tcp-reset
 * has just sent (its facts are in this CPU's XDP reply scratch) in answer
 * to a packet without a connection (INVALID). The kernel's reply then has
 * no connection to carry (nf_send_reset's nf_ct_attach attaches the
 * offending packet's, RELATED, only when it has one) and is tracked like
 * any packet at OUTPUT: an RST within a connection's window closes it
 * (found by xfw difftest on the conformance dump ipt-save-filter.txt: a
 * reset out-of-window segment's RST closed fw's own connection). Used
 * for the RSTs sent at once (loopback, no XDP metadata), which pass no
 * chain; one handed to xfw_tc_ingress is tracked there as it passes
 * OUTPUT (reject_ct.h). p is overwritten with the reply's facts. A global
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

/* xfw_ct_rst_close closes the connection of the packet REJECT has just
 * answered with a TCP RST (its facts in this CPU's reply scratch of slot,
 * XFW_RJ_SLOT_XDP or _TC; state the packet's XFW_F_CT value), as the
 * kernel's nf_send_reset and nf_send_reset6 do once the reset is built
 * (nf_ct_set_closing: nf_conntrack_tcp_set_closing, Linux 6.18): a
 * confirmed TCP connection goes to CLOSE and, unless it was CLOSE
 * already, gets CLOSE's timeout. Without a connection (INVALID,
 * UNTRACKED), for one this packet would open (not confirmed: it dies with
 * the packet) and for an ICMP error nothing changes. Later packets of the
 * connection meet CLOSE's transitions (found by xfw difftest, IPv4
 * conntrack seed 233: a RST answering a SYN,FIN after the reset SYN,ACK
 * was ESTABLISHED in the kernel, INVALID in xfw). A global function:
 * verified once. */
__attribute__((noinline)) int xfw_ct_rst_close(struct xfw_ct_scratch *cs, __u32 slot, __u32 state)
{
	struct xfw_rj_scratch *sc;
	struct xfw_ct_entry *e;
	struct xfw_ct_cfg *cfg;
	__u32 zero = 0;
	int locked, table;

	state &= 7;
	if (!cs || cs->pending == XFW_CTP_CREATE || cs->key.proto != IPPROTO_TCP ||
	    (state != XFW_CTS_NEW && state != XFW_CTS_ESTABLISHED))
		return 0;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc || !(sc->r.tcpflags & XFW_RJ_TCP_RST))
		return 0;
	cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &zero);
	if (!cfg)
		return 0;
	e = xfw_ct_lookup_tab(&cs->key, &table);
	if (!e)
		return 0;
	/* Moved since the lookup: the copy in xfw_ct; gone: nothing to
	 * close (ct_conn.h xfw_ct_lock_found). */
	locked = xfw_ct_lock_found(&cs->key, &e, &table);
	if (!e || (locked != 1 && e->lock == XFW_CT_LOCK_MOVED))
		return 0;
	if (e->v.tcp_state != XFW_TCP_CLOSE) {
		e->v.tcp_state = XFW_TCP_CLOSE;
		e->v.expires = bpf_jiffies64() + cfg->timeout[XFW_TCP_CLOSE];
	}
	if (locked == 1)
		xfw_ct_unlock(&e->lock);
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
 * p, and from which offset: the TCP header with options, the UDP, SCTP,
 * GRE or ICMP query header, or an ICMP error's quoted packet. 0: nothing
 * to copy. */
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
	/* SCTP: the common header and an INIT's or INIT ACK's header after
	 * it (the load's scan walks the chunks: ct_sctp.h). */
	if (p->proto == IPPROTO_SCTP)
		return avail < XFW_SCTP_COPY ? avail : XFW_SCTP_COPY;
	/* GRE: up to version 1's call ID (xfw_ct_gre_key). */
	if (p->proto == IPPROTO_GRE)
		return avail < XFW_GRE_V1_HLEN ? avail : XFW_GRE_V1_HLEN;
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
	cs->sc.ok = 0;
	if (len == 0 || len > XFW_CT_BUF)
		return 0;
	xfw_barrier_var(len);
	len &= XFW_CT_BUF * 2 - 1;
	if (len < 1 || len > XFW_CT_BUF)
		return 0;
	return len;
}

/* xfw_ct_load_xdp and xfw_ct_load_tc copy what tracking reads beyond the
 * parsed fields into cs, and walk an SCTP packet's chunks (ct_sctp.h
 * xfw_sctp_scan). Global functions: inlined, the length's
 * per-protocol paths were verified again at every call site and for every
 * path before it (~1,500 instructions per call site). */
__attribute__((noinline)) int xfw_ct_load_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					      struct xfw_ct_scratch *cs)
{
	__u32 off = 0, len;

	if (!ctx || !p || !cs)
		return 0;
	len = xfw_ct_load_len(p, cs, &off);
	if (len && bpf_xdp_load_bytes(ctx, off, cs->buf, len) == 0)
		cs->buflen = len;
	if (p->proto == IPPROTO_SCTP && cs->buflen)
		xfw_sctp_scan_xdp(ctx, cs, off);
	return 0;
}

__attribute__((noinline)) int xfw_ct_load_tc(struct __sk_buff *skb, struct xfw_pkt *p,
					     struct xfw_ct_scratch *cs)
{
	__u32 off = 0, len;

	if (!skb || !p || !cs)
		return 0;
	len = xfw_ct_load_len(p, cs, &off);
	if (len && bpf_skb_load_bytes(skb, off, cs->buf, len) == 0)
		cs->buflen = len;
	if (p->proto == IPPROTO_SCTP && cs->buflen)
		xfw_sctp_scan_tc(skb, cs, off);
	return 0;
}

/* xfw_ct_reply gives REJECT's reply, parsed into p from the skb, its
 * connection state, as the kernel's reply has it when it passes OUTPUT:
 * attached to the offending packet's connection when that packet had one
 * (nf_send_reset and icmp_send: nf_ct_attach, RELATED, the other
 * direction), else tracked like any packet: an RST within a connection's
 * window closes it (found by xfw difftest on the conformance dump
 * ipt-save-filter.txt: an OUTPUT REJECT of an out-of-window segment, whose
 * RST closed the connection); an ICMP error is RELATED only to a
 * connection its quoted packet belongs to. A global function: verified
 * once. */
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
		cs->amark = 0;
		p->ct = (v & ~(7u | XFW_CTV_DIR_REPLY)) | XFW_CTS_RELATED |
			((v & XFW_CTV_DIR_REPLY) ^ XFW_CTV_DIR_REPLY);
		xfw_ct_restore(p, &cs->orig);
		return 0;
	}
	/* Nothing attached: an ICMP error quoting a packet of no known
	 * connection is INVALID, not RELATED to the offending packet's own
	 * unconfirmed connection as a stack's error about a packet it did
	 * not deliver is (ct_related.h xfw_ct_attached): REJECT's offending
	 * packet had none (found by xfw difftest, IPv4 conntrack seed 237:
	 * an INVALID UDP-Lite datagram's port unreachable was RELATED). */
	cs->stack_icmp = 0;
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

#endif /* XFW_CT_HOOK_H */
