/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_ct.h — the connection a REJECT reply carries, handed from the hook
 * that built the reply to the hook that judges it in OUTPUT.
 *
 * The kernel attaches the offending packet's connection to its reply
 * (nf_ct_attach: nf_send_reset, nf_send_reset6, and icmp_send /
 * icmp6_send), so the reply passes OUTPUT as RELATED, in the other
 * direction. xfw builds the reply in one hook and judges it in another:
 *  - INPUT and FORWARD replies are built at XDP and judged at the input
 *    device's TCX ingress (xfw_rj_out_judge, reject_send.h); the 32 bytes
 *    of XDP metadata hold the mark and the input device, not the
 *    connection's facts;
 *  - OUTPUT replies for another host are built at the offending packet's
 *    TC egress and judged at the TC egress of the device their route
 *    leaves by (xfw_rj_tc_out), as a packet of their own.
 * The builder puts the offending packet's connection facts (struct
 * xfw_ct_facts, the same as the loopback handoff's) into the loopback
 * handoff's table, xfw_ct_lo_handoff (ct_maps.h: xfw_xdp already holds
 * the most maps a program may, and both ends already reference this one),
 * keyed by the reply's own bytes; the judge takes them out by the same key
 * and gives the reply the attached state (xfw_ct_reply, ct_hook.h).
 *
 * The key (struct xfw_ct_lo_key, filled otherwise than a loopback
 * packet's): the reply's addresses as they stand in its IP header, its
 * first 16 transport bytes (an ICMP error's header and the start of the
 * quote; a RST's ports, sequence and acknowledgement numbers), its
 * transport length and protocol, and fam 2 (IPv4) or 3 (IPv6), which no
 * loopback key has (0, 1). Only replies xfw builds are looked for: an
 * option-less IPv4 or extension-less IPv6 header followed by an ICMP error
 * or a TCP RST.
 *
 * Only an offending packet with a connection (NEW, ESTABLISHED, RELATED)
 * hands anything over: without one (INVALID, UNTRACKED) the kernel attaches
 * nothing and its reply is tracked at OUTPUT like any packet, which the
 * judge does when it finds no facts. A reply dropped before its judge (the
 * ICMP rate limit, no route) leaves its entry to the LRU.
 *
 * Conventions: the entry points are global functions, verified once; keys
 * and facts live in the ct scratch (cs->lokey, cs->orig).
 *
 * Includes: common.h, parse.h, ct_structs.h, ct_maps.h, ct_track.h.
 */
#ifndef XFW_REJECT_CT_H
#define XFW_REJECT_CT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_track.h"

/* The key's fam for a reply handoff: this plus 1 for IPv6. */
#define XFW_RJCT_FAM 2

/* The bytes of the reply's IP header the key reads: all of an option-less
 * IPv4 header; IPv6's first 8 (payload length, next header). */
#define XFW_RJCT_IP4_READ 20
#define XFW_RJCT_IP6_READ 8
/* IPv4 version 4 with a 5-word header: no options (the least). */
#define XFW_RJCT_IP4_PLAIN 0x45
/* Where the addresses start: IPv4 source at 12 (8 bytes with the
 * destination), IPv6 source at 8 (32 bytes with the destination). */
#define XFW_RJCT_IP4_ADDRS 12
#define XFW_RJCT_IP6_ADDRS 8
/* The transport bytes the key keeps. */
#define XFW_RJCT_HEAD 16
/* The RST flag in a TCP header's byte 13. */
#define XFW_RJCT_TH_RST 0x04

/* xfw_rjct_key fills k from the reply at l3 in ctx (an XDP frame when
 * is_xdp, else an skb); returns 0, or -1 when the packet is not shaped as
 * xfw's replies are. */
static __always_inline int xfw_rjct_key(void *ctx, int is_xdp, __u32 l3, __u32 v6,
					struct xfw_ct_lo_key *k)
{
	__u8 h[XFW_RJCT_IP4_READ];
	__u32 l4, len, proto;

	__builtin_memset(k, 0, sizeof(*k));
	if (l3 > XFW_RJ_OFF_MAX)
		return -1;
	if (v6) {
		if (xfw_load_bytes(ctx, is_xdp, l3, h, XFW_RJCT_IP6_READ) ||
		    xfw_load_bytes(ctx, is_xdp, l3 + XFW_RJCT_IP6_ADDRS, &k->src_hi, 32))
			return -1;
		len = (__u32)h[4] << 8 | h[5];
		proto = h[6];
		l4 = l3 + XFW_RJ_IP6_HLEN;
	} else {
		__u32 hl;

		/* Version 4; options only as an ICMP error echoes them
		 * (reject_opts.h). */
		if (xfw_load_bytes(ctx, is_xdp, l3, h, XFW_RJCT_IP4_READ) ||
		    (h[0] & 0xf0) != (XFW_RJCT_IP4_PLAIN & 0xf0) || (h[0] & 0xf) < (XFW_RJCT_IP4_PLAIN & 0xf))
			return -1;
		hl = (h[0] & 0xf) * 4;
		__builtin_memcpy(&k->src_hi, h + XFW_RJCT_IP4_ADDRS, 8);
		len = ((__u32)h[2] << 8 | h[3]) - hl;
		proto = h[9];
		l4 = l3 + hl;
	}
	if (proto != IPPROTO_TCP && proto != (v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP))
		return -1;
	if (xfw_load_bytes(ctx, is_xdp, l4, k->head, XFW_RJCT_HEAD))
		return -1;
	if (proto == IPPROTO_TCP && !(k->head[13] & XFW_RJCT_TH_RST))
		return -1;
	k->l4len = len;
	k->proto = proto;
	k->fam = XFW_RJCT_FAM + (v6 ? 1 : 0);
	return 0;
}

/* xfw_rjct_attachable reports whether a connection state v (XFW_F_CT) is
 * one the kernel attaches to its reply: a packet with a connection. */
static __always_inline int xfw_rjct_attachable(__u32 v)
{
	__u32 st = v & 7;

	return st == XFW_CTS_NEW || st == XFW_CTS_ESTABLISHED || st == XFW_CTS_RELATED;
}

/* xfw_rjct_put_xdp hands the connection of p, REJECTed at XDP, to the
 * judge of the reply now in ctx's frame (untagged Ethernet: marked for
 * xfw_tc_ingress by xfw_rj_xdp_handoff). A global function. */
__attribute__((noinline)) int xfw_rjct_put_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					       struct xfw_ct_scratch *cs)
{
	if (!ctx || !p || !cs || !xfw_rjct_attachable(p->ct))
		return 0;
	if (xfw_rjct_key(ctx, 1, XFW_RJ_ETH_HLEN, p->fam, &cs->lokey))
		return 0;
	xfw_ct_save(cs, p);
	bpf_map_update_elem(&xfw_ct_lo_handoff, &cs->lokey, &cs->orig, BPF_ANY);
	return 0;
}

/* xfw_rjct_put_tc hands the connection saved in cs->orig (xfw_ct_save of
 * the packet REJECTed in OUTPUT, parsed into p) to the judge of the reply
 * now in skb, routed out of another device's TC egress. A global
 * function. */
__attribute__((noinline)) int xfw_rjct_put_tc(struct __sk_buff *skb, struct xfw_pkt *p,
					      struct xfw_ct_scratch *cs)
{
	if (!skb || !p || !cs || !xfw_rjct_attachable(cs->orig.ct))
		return 0;
	if (xfw_rjct_key(skb, 0, p->l3_off, p->fam, &cs->lokey))
		return 0;
	bpf_map_update_elem(&xfw_ct_lo_handoff, &cs->lokey, &cs->orig, BPF_ANY);
	return 0;
}

/* xfw_rjct_take_tc looks for the connection handed over for the reply at
 * l3 in skb (IPv6 when v6): found, it is moved into cs->orig and 1
 * returned; else cs->orig says INVALID (no connection: the judge tracks the
 * reply itself) and 0 is returned. A global function. */
__attribute__((noinline)) int xfw_rjct_take_tc(struct __sk_buff *skb, __u32 l3, __u32 v6,
					       struct xfw_ct_scratch *cs)
{
	struct xfw_ct_facts *f;

	if (!skb || !cs)
		return 0;
	__builtin_memset(&cs->orig, 0, sizeof(cs->orig));
	if (xfw_rjct_key(skb, 0, l3, v6, &cs->lokey))
		return 0;
	f = bpf_map_lookup_elem(&xfw_ct_lo_handoff, &cs->lokey);
	if (!f)
		return 0;
	__builtin_memcpy(&cs->orig, f, sizeof(cs->orig));
	bpf_map_delete_elem(&xfw_ct_lo_handoff, &cs->lokey);
	return 1;
}

/* xfw_rjct_maybe reports whether p, leaving by TC egress, may be a REJECT
 * reply routed there with a connection handed over: an ICMP error or a TCP
 * RST. */
static __always_inline int xfw_rjct_maybe(const struct xfw_pkt *p)
{
	if (p->proto == IPPROTO_TCP)
		return p->tcpflags <= 0xff && (p->tcpflags & XFW_RJCT_TH_RST);
	if (p->icmp > 0xffff)
		return 0;
	if (p->fam == 0)
		return p->proto == IPPROTO_ICMP && xfw_icmp_is_err(p->icmp >> 8);
	return p->proto == IPPROTO_ICMPV6 && (p->icmp >> 8) < 128;
}

#endif /* XFW_REJECT_CT_H */
