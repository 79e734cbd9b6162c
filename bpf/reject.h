/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject.h — stage 4: REJECT replies built in the data plane, byte for byte
 * as the kernel's ipt_REJECT / ip6t_REJECT build them (nf_reject_ipv4.c,
 * nf_reject_ipv6.c, icmp_send, icmp6_send).
 *
 * Conventions:
 *  - The offending frame is rewritten in place into the reply. XDP (INPUT,
 *    FORWARD): the reply is handed, marked in the XDP metadata, to xfw's
 *    TCX ingress program, which rate-limits it as the kernel's ICMP errors,
 *    routes it and sends it to the route's neighbour (reject_send.h,
 *    reject_rate.h), as icmp_send / nf_send_reset route and send theirs;
 *    on loopback (a packet the host sent itself) it judges a reply for
 *    the host in OUTPUT and sends it back through loopback, and one for
 *    another host, judged in OUTPUT with its route's device, out of
 *    that device (xfw_rj_lo_out). Without XDP
 *    metadata (a driver that lacks it) the reply leaves by the interface
 *    it came in on (XDP_TX) with the Ethernet addresses swapped and any
 *    VLAN tag kept.
 *    TC egress (OUTPUT): a reply for one of the host's addresses is handed
 *    to the local stack through lo, as the kernel's (xfw_rj_tc_via_lo),
 *    so the sending socket sees ECONNREFUSED as with the kernel's REJECT
 *    (xfw_rj_tc_deliver's bpf_redirect(BPF_F_INGRESS) onto the device
 *    remains for anything else); on loopback the rewritten skb simply goes on
 *    (TC_ACT_OK) and lo hands it back with its route. A reply for another
 *    host (the packet had a foreign source) is routed: bpf_fib_lookup, then
 *    bpf_redirect_neigh out of the route's device (xfw_rj_tc_route).
 *  - "No reply" (kernel sends nothing) is a plain drop, as REJECT always
 *    drops the offending packet.
 *  - Work is done in three steps: xfw_rj_plan reads everything the reply
 *    needs from the packet into struct xfw_rj and decides whether there is a
 *    reply at all; the hook reshapes the frame (XDP: adjust_tail/adjust_head,
 *    TC: change_tail/adjust_room/pull_data); xfw_rj_put_* write the headers
 *    over [data, data_end) and compute every checksum from scratch.
 *  - The entry points are global (noinline) functions, verified once on
 *    their own whatever the caller's state: they re-check every offset they
 *    take from struct xfw_pkt. Checksums run in bounded loops of
 *    bpf_csum_diff() over 64-byte chunks, then 4-, 2- and 1-byte steps.
 *  - Stack: the hook programs leave little room under the 512-byte limit,
 *    so the reply's facts live in a per-CPU scratch map (xfw_rj_scratch),
 *    and the XDP hook hands the REJECT type over in p->reject rather than
 *    keep it in a register across its LOG calls.
 *  - Addresses, ports and sequence numbers are kept in network byte order;
 *    checksums are one's complement sums of the bytes as stored, which is
 *    byte-order independent.
 *
 * Differences from the kernel, each checked by internal/dataplane/
 * reject_test.go against iptables-legacy in an identical topology:
 *  - Transport checksums are verified as the kernel's REJECT does
 *    (xfw_rj_csum_ok), but XDP and TC cannot see whether a device already
 *    verified one (CHECKSUM_COMPLETE, UNNECESSARY: the kernel then skips
 *    the check, in FORWARD too): a TCP or UDP checksum field holding just
 *    the pseudo-header sum (CHECKSUM_PARTIAL, local senders) counts as
 *    good, any other bad checksum gets no reply. A first fragment cannot
 *    be verified and gets nothing (as in the kernel), except in IPv4
 *    INPUT, where the kernel reassembles first and answers the whole
 *    datagram: xfw answers the first fragment, quoting it. Transport data
 *    beyond XFW_RJ_VERIFY_MAX bytes is not checked.
 *  - Every reply passes OUTPUT, as the kernel's does: replies to the host
 *    itself before they are delivered, INPUT and FORWARD replies (XDP) at
 *    TCX ingress (reject_send.h), those to packets the host sent itself
 *    through loopback too (lo's TCX ingress, then lo's INPUT), with the
 *    offending packet's connection when tracking (reject_ct.h), and a
 *    loopback reply for another host routed out of another device
 *    (xfw_rj_lo_route) at lo's TCX ingress with that output device (one
 *    without a route is not sent). OUTPUT ICMP
 *    errors for the host come from its own address, as the kernel's (they, and resets, through lo
 *    and its INPUT); such a reply OUTPUT REJECTs in turn is answered once
 *    (an ICMP error about a reset: xfw.c, XFW_RJ_TC_DEPTH). The sender's
 *    send() succeeds where the kernel's fails with EPERM (NF_DROP); the
 *    error then arrives all the same (ECONNREFUSED on the next call).
 *  - The kernel sends no error about an ICMP message its own ICMP socket
 *    sends (an echo reply REJECTed in OUTPUT: icmp_send finds the socket
 *    locked); neither does xfw (xfw.c xfw_tc_stack_reply: an echo,
 *    timestamp or extended echo reply from a raw ICMP socket without a
 *    file, owner.h xfw_sk_kernel). A process's raw socket, and the
 *    stack's neighbour discovery socket (an advertisement), are answered.
 *  - IPv4 options: ICMP errors echo record route and timestamp options
 *    as icmp_send does (reject_opts.h): in INPUT and FORWARD the
 *    packet's as the input path filled them in, in OUTPUT those the
 *    sending socket set (none for a raw socket's own header).
 *  - ICMP errors are rate-limited with the kernel's buckets and sysctls
 *    (reject_rate.h), whose random costs make counts agree statistically;
 *    as in the kernel, replies to packets that arrived on lo and IPv6
 *    OUTPUT replies are not (but those about the stack's neighbour
 *    discovery messages), and OUTPUT replies for the host itself only by
 *    the global bucket (xfw_rj_tc).
 *  - A packet to an IPv4 broadcast address (limited, or a subnet-directed
 *    one the local table has, also in a unicast frame) or a multicast one
 *    gets no ICMP error, as in the kernel.
 *  - INPUT and FORWARD replies are routed as for a packet forwarded from
 *    the input interface, or, when it does not forward, by
 *    bpf_redirect_neigh's own lookup bound to it (reject_send.h): on a host
 *    that does not forward, a reply whose route back leaves by another
 *    interface leaves by the input one, as if on-link. Replies to a packet
 *    the host sent itself through loopback, and OUTPUT replies for another
 *    host, are routed (bpf_fib_lookup, then a redirect); the latter are not
 *    sent from a device that does not forward.
 *  - TTL / hop limit: the namespace's ip_default_ttl, the IPv6 hop_limit
 *    of the device the reply leaves by (lo for the host itself), copied at
 *    sync; a route's hoplimit metric is not seen (bpf_fib_lookup does not
 *    return it).
 *  - The ICMPv6 flow label is a hash of the addresses, type and code, like
 *    the kernel's automatic one (auto_flowlabels) but not the same value.
 *
 * Deployment notes: a reply built in a CHECKSUM_PARTIAL skb (the offending
 * packet came from a local veth peer's stack: veth with native XDP keeps
 * the skb, as generic XDP does) keeps its offload offsets, which BPF cannot
 * clear: harmless when the reply leaves by a veth that offloads checksums
 * (the default: the peer's stack trusts it), wrong when it leaves by a
 * device that completes checksums itself (tx checksumming off, a NIC).
 * (XDP_TX, used only without XDP metadata, reaches a veth peer at once only
 * when the peer runs an XDP program itself.)
 *
 * Parts: reject_structs.h (constants, struct xfw_rj) and reject_maps.h
 * (its scratch); reject_plan.h (step 1: whether and what to answer);
 * reject_put.h (step 3: the headers); reject_csum.h (checksums, and the
 * check of the offending packet's); reject_route.h (where a reply goes);
 * reject_send.h (the XDP replies' way out: the TCX ingress program),
 * reject_rate.h (the ICMP rate limits) and reject_opts.h (IPv4 options).
 * This file holds the per-hook entry points, which reshape the frame
 * (step 2) between the two.
 *
 * Includes: common.h, parse.h, local.h, owner.h (xfw_sk_kernel) and the
 * parts above.
 */
#ifndef XFW_REJECT_H
#define XFW_REJECT_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"
#include "reject_structs.h"
#include "reject_maps.h"
#include "reject_csum.h"
#include "reject_plan.h"
#include "reject_put.h"
#include "reject_route.h"
#include "reject_send.h"
#include "reject_opts.h"
#include "owner.h"

/* xfw_rj_xdp_out hands the reply built in ctx's frame to xfw_tc_ingress
 * (reject_send.h), which judges it in OUTPUT before it leaves (on
 * loopback, the reply for the host itself, sent back through loopback; a
 * reply for another host routed out of device out, xfw_rj_lo_route,
 * judged with that output device and sent out of it). */
static __always_inline int xfw_rj_xdp_out(struct xdp_md *ctx, const struct xfw_rj *r, __u32 out,
					  __u16 vlan, int v6)
{
	return xfw_rj_xdp_handoff(ctx, r->l2len, vlan, v6, out, r->sel6);
}

/* xfw_rj_xdp's flags: the packet's DNAT was given back (xfw_nat_undo_xdp);
 * the kernel's connection tracking saw it at PREROUTING (it verifies TCP,
 * UDP and ICMP checksums there, nf_conntrack_checksum, and REJECT then
 * trusts them: skb->csum_valid). */
#define XFW_RJX_DNAT_UNDONE 1
#define XFW_RJX_CT_SEEN 2

/* xfw_rj_xdp builds the reply to a packet received on ctx and judged in
 * chain (INPUT or FORWARD); flags: XFW_RJX_*. */
__attribute__((noinline)) int xfw_rj_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 chain, __u32 flags)
{
	__u32 frame, keep, hdrs, off = 0, len = 0, cs, slot = XFW_RJ_SLOT_XDP, out = 0;
	struct xfw_rj_scratch *sc;
	void *data, *data_end;
	struct xfw_rj *r;
	__u64 sum = 0;
	__u8 *ih;
	int kind, v6;

	if (!ctx || !p)
		return XDP_DROP;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return XDP_DROP;
	r = &sc->r;
	__builtin_memset(r, 0, sizeof(*r));
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	kind = xfw_rj_plan(r, p, p->reject, data, data_end, 1,
			   ctx->ingress_ifindex == XFW_LOOPBACK_IFINDEX);
	if (kind == XFW_RJK_NONE)
		return XDP_DROP;
	v6 = kind == XFW_RJK_ICMP6 || kind == XFW_RJK_RST6;
	frame = (__u32)(data_end - data);
	if (ctx->ingress_ifindex != XFW_LOOPBACK_IFINDEX)
		xfw_rj_l2_route(ctx, r, &sc->fib, v6);
	/* A loopback reply for another host without a route: the kernel's
	 * has none either (and on a host that does not forward, where
	 * bpf_fib_lookup refuses lo, the kernel's leaves: not sent,
	 * docs/differences.md). XDP_TX would hand it back to the stack on
	 * lo, whose route for the offending packet delivers it to the host
	 * (found by xfw difftest, conntrack IPv6 seed 16). */
	else if (!xfw_rj_for_host(r->daddr, v6) && !(out = xfw_rj_lo_route(ctx, r, &sc->fib, v6)))
		return XDP_DROP;
	/* The TTL of the device it leaves by: the route's (a loopback reply
	 * routed out), else the input device's (lo for the host itself;
	 * XDP_TX; a reply handed off from another device gets its hop limit
	 * again from its route, xfw_rj_send). */
	r->ttl = v6 ? xfw_rj_hop_limit6(out ? out : (__u64)ctx->ingress_ifindex | (__u64)p->vlan << 32)
		    : xfw_rj_ttl4();
	/* An ICMP error about a forwarded packet comes from the route
	 * back's source; after a DNAT the kernel's nat translates that
	 * source to the original destination (nf_nat_icmp_reply_translation
	 * at POSTROUTING), which the packet given back carries: kept. */
	if (chain == XFW_CHAIN_FORWARD && (kind == XFW_RJK_ICMP4 || kind == XFW_RJK_ICMP6)) {
		r->fwd = 1;
		/* To one of the host's own addresses (a spoofed source of its
		 * own, IPv6: IPv4 drops it as a martian): the route back is
		 * local, whose source selection picks the destination itself
		 * (RFC 6724 rule 1); the lookup would refuse it. */
		if (xfw_rj_is_local(r->daddr, v6))
			__builtin_memcpy(r->saddr, r->daddr, 16);
		else if (!(flags & XFW_RJX_DNAT_UNDONE) && xfw_rj_fib_src(ctx, r, &sc->fib, v6))
			return XDP_DROP;
		/* ICMPv6: icmp6_send picks the source on the input device
		 * (unless the route back has a preferred source), not the
		 * route's: xfw_tc_ingress picks it again (reject_saddr.h). */
		else if (v6 && !(flags & XFW_RJX_DNAT_UNDONE))
			r->sel6 = 1;
	}
	/* IPv4 options: the input path fills them in (the quote's), an ICMP
	 * error echoes them (reject_opts.h); r->saddr is final here. A RST's
	 * source stands for the input path's address (in FORWARD the route
	 * back's would be: it only matters to r->hdelta, below). */
	if (!v6 && p->thoff != p->l3_off + XFW_RJ_IP4_HLEN &&
	    xfw_rj_opts4_xdp(ctx, p->l3_off, kind == XFW_RJK_ICMP4, p->opt_rr, p->opt_ts))
		return XDP_DROP;
	/* IPv4 INPUT reassembles before the hook: the datagram's checksum,
	 * not the first fragment's, decides. The IPv4 header the input path
	 * changed, its checksum stale, counts (r->hdelta), unless conntrack
	 * verified the checksum before that: the kernel's ICMP error then
	 * trusts it (skb->csum_valid), and so does its RST in INPUT (the
	 * packet's CHECKSUM_COMPLETE sum, taken before the change), not in
	 * FORWARD (ip_forward drops that sum: nf_ip_checksum sums again). */
	if ((flags & XFW_RJX_CT_SEEN) &&
	    (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP || p->proto == IPPROTO_ICMP) &&
	    !(kind == XFW_RJK_RST4 && chain == XFW_CHAIN_FORWARD))
		r->hdelta = 0;
	if (!xfw_rj_csum_ok_xdp(ctx, p, !v6 && chain == XFW_CHAIN_INPUT && p->fragmented, r->hdelta))
		return XDP_DROP;

	if (kind == XFW_RJK_RST4 || kind == XFW_RJK_RST6) {
		/* Shrink to the RST; it never outgrows the segment. */
		keep = r->l2len + (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_TCP_HLEN;
		if (keep > frame)
			return XDP_DROP;
		if (keep < frame && bpf_xdp_adjust_tail(ctx, (int)keep - (int)frame))
			return XDP_DROP;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		if (v6 ? xfw_rj_put_rst(data, data_end, r, 1) : xfw_rj_put_rst(data, data_end, r, 0))
			return XDP_DROP;
		return xfw_rj_xdp_out(ctx, r, out, p->vlan, v6);
	}

	/* Keep the L2 header and the quote (dropping any Ethernet padding
	 * past the IP packet), then make room for the new headers. */
	keep = r->l2len + r->qlen;
	if (keep > frame)
		return XDP_DROP;
	if (keep < frame && bpf_xdp_adjust_tail(ctx, (int)keep - (int)frame))
		return XDP_DROP;
	hdrs = (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN + r->optlen) + XFW_RJ_ICMP_HLEN;
	if (r->optlen > XFW_RJ_OPT_MAX || bpf_xdp_adjust_head(ctx, -(int)hdrs))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (v6 ? xfw_rj_put_icmp(data, data_end, r, 1, 0, &off, &len, &sum) :
		 xfw_rj_put_icmp(data, data_end, r, 0, 1, &off, &len, &sum))
		return XDP_DROP;
	if (!v6 && r->optlen && xfw_rj_opts4_put_xdp(ctx, r->l2len))
		return XDP_DROP;
	cs = xfw_rj_csum_xdp(ctx, off, len);
	if (cs >= XFW_RJ_CSUM_ERR)
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (off > XFW_RJ_OFF_MAX)
		return XDP_DROP;
	/* The ICMP header, its offset (options) checked in one register. */
	ih = data + off;
	xfw_barrier_var(ih);
	if ((void *)(ih + XFW_RJ_ICMP_HLEN) > data_end)
		return XDP_DROP;
	*(__u16 *)(ih + 2) = xfw_rj_finish(sum + cs);
	return xfw_rj_xdp_out(ctx, r, out, p->vlan, v6);
}

/* XFW_RJ_TC_LOCAL, returned by xfw_rj_tc: the skb now holds a reply for the host
 * itself, to be judged in OUTPUT, then handed to the local stack
 * (xfw_rj_tc_deliver). Not a TC action code. */
#define XFW_RJ_TC_LOCAL 0x100

/* xfw_rj_rst4_partial gives the IPv4 RST for the host itself in skb (its
 * headers written by xfw_rj_put_rst) the checksum field the kernel's has:
 * nf_reject_ip_tcphdr_put leaves the sum to the device (CHECKSUM_PARTIAL,
 * the field holding the pseudo-header sum), and lo, the way the kernel's
 * takes, never completes it (its checksum offload is fixed on), so the
 * host's packet sockets and raw sockets see that field (found by xfw
 * difftest, conntrack seed 14). The skb is marked verified (a checksum of
 * CHECKSUM_NONE becomes UNNECESSARY; a PARTIAL one already counts as
 * verified), so TCP takes the RST as the kernel's. IPv6's reset carries a
 * complete checksum (nf_reject_ip6_tcphdr_put). Returns 0, or -1 when the
 * headers are not there. */
static __always_inline int xfw_rj_rst4_partial(struct __sk_buff *skb, struct xfw_rj *r)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	__u64 l3 = xfw_rj_l3(r);
	__u8 *th;

	if (!l3)
		return -1;
	th = data + l3 + XFW_RJ_IP4_HLEN;
	if ((void *)(th + XFW_RJ_TCP_HLEN) > data_end)
		return -1;
	xfw_rj_rst4_psum(skb, th, r->saddr[0], r->daddr[0]);
	return 0;
}

/* ICMPv6 informational messages start at type 128 (errors below). */
#define XFW_RJ_ICMP6_INFO_MIN 128

/* xfw_rj_out_dev6 reports whether the IPv6 packet in skb (parsed into p),
 * judged in OUTPUT, had its device before OUTPUT, which exposes an ICMPv6
 * error about it to icmp6_send's rate limits (found against the kernel:
 * REJECTed neighbour advertisements): the stack's neighbour discovery
 * messages (ndisc_alloc_skb sets skb->dev), told by their kind, ICMPv6
 * informational messages from a kernel socket (of the others, the ICMPv6
 * socket's echo replies get no error at all, xfw.c xfw_tc_stack_reply,
 * and MLD's go to multicast groups, which get none either). A process's
 * socket's packets have no device there. */
static __always_inline int xfw_rj_out_dev6(struct __sk_buff *skb, const struct xfw_pkt *p)
{
	return p->proto == IPPROTO_ICMPV6 && p->icmp <= 0xffff &&
	       (p->icmp >> 8) >= XFW_RJ_ICMP6_INFO_MIN && xfw_sk_kernel(skb);
}

/* xfw_rj_tc_put_rst writes the TCP reset planned in r over the packet in
 * skb, at a TC hook: the packet is cut to the reset's length first
 * (change_tail linearizes, unclones and drops GSO state; it refuses to cut
 * into the headers up to the transport header, IPv6 extension headers
 * longer than 20 bytes: no reset). Returns 0, or -1. */
static __always_inline int xfw_rj_tc_put_rst(struct __sk_buff *skb, struct xfw_rj *r, int v6)
{
	__u32 keep = r->l2len + (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN) + XFW_RJ_TCP_HLEN;
	void *data, *data_end;

	if (bpf_skb_change_tail(skb, keep, 0) || bpf_skb_pull_data(skb, keep))
		return -1;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	return v6 ? xfw_rj_put_rst(data, data_end, r, 1) : xfw_rj_put_rst(data, data_end, r, 0);
}

/* xfw_rj_tc_put_icmp writes the ICMP or ICMPv6 error planned in r in front
 * of its quote of the packet in skb, at a TC hook: the packet cut to the
 * quote, room made between the Ethernet and the IP header, the headers
 * written and the ICMP checksum completed over the whole message. optlen
 * is r->optlen where the error echoes the IPv4 options reject_opts.h
 * collected, or a constant 0 where it echoes none (the compiler then
 * leaves the echo out). encap: the bytes between the packet's Ethernet
 * and IP headers (a bridged PPPoE frame's, XFW_RJ_PPPOE_HLEN; else a
 * constant 0), which the reply's headers overwrite: room is made in front
 * (bpf_skb_adjust_room takes IP packets only). Returns 0, or -1. */
static __always_inline int xfw_rj_tc_put_icmp(struct __sk_buff *skb, struct xfw_rj *r, int v6,
					      __u32 optlen, __u32 encap)
{
	__u32 keep = r->l2len + encap + r->qlen, hdrs, off = 0, len = 0, cs;
	void *data, *data_end;
	__u64 sum = 0;
	long rc;
	__u8 *ih;

	if (keep < skb->len && bpf_skb_change_tail(skb, keep, 0))
		return -1;
	hdrs = (v6 ? XFW_RJ_IP6_HLEN : XFW_RJ_IP4_HLEN + optlen) + XFW_RJ_ICMP_HLEN;
	if (optlen > XFW_RJ_OPT_MAX || encap > XFW_RJ_PPPOE_HLEN)
		return -1;
	rc = encap ? bpf_skb_change_head(skb, hdrs - encap, 0)
		   : bpf_skb_adjust_room(skb, hdrs, BPF_ADJ_ROOM_MAC, 0);
	if (rc || bpf_skb_pull_data(skb, keep - encap + hdrs))
		return -1;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (v6 ? xfw_rj_put_icmp(data, data_end, r, 1, 0, &off, &len, &sum) :
		 xfw_rj_put_icmp(data, data_end, r, 0, 1, &off, &len, &sum))
		return -1;
	if (!v6 && optlen && xfw_rj_opts4_put_tc(skb, r->l2len))
		return -1;
	cs = xfw_rj_csum_tc(skb, off, len);
	if (cs >= XFW_RJ_CSUM_ERR || off > XFW_RJ_OFF_MAX)
		return -1;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	ih = data + off;
	xfw_barrier_var(ih);
	if ((void *)(ih + XFW_RJ_ICMP_HLEN) > data_end)
		return -1;
	*(__u16 *)(ih + 2) = xfw_rj_finish(sum + cs);
	return 0;
}

/* xfw_rj_tc builds the reply to a locally generated packet judged in
 * OUTPUT: one for the host itself stays in the skb (XFW_RJ_TC_LOCAL); one
 * for another host is routed out (xfw_rj_tc_route). */
__attribute__((noinline)) int xfw_rj_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 type)
{
	__u32 slot = XFW_RJ_SLOT_TC;
	__u64 now = bpf_ktime_get_ns();
	struct xfw_rj_scratch *sc;
	struct xfw_rl_cfg *rl;
	void *data, *data_end;
	struct xfw_rj *r;
	int kind, v6, routed, whole;

	if (!skb || !p)
		return TC_ACT_SHOT;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return TC_ACT_SHOT;
	r = &sc->r;
	__builtin_memset(r, 0, sizeof(*r));
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	kind = xfw_rj_plan(r, p, type, data, data_end, 0,
			   skb->ifindex == XFW_LOOPBACK_IFINDEX);
	if (kind == XFW_RJK_NONE)
		return TC_ACT_SHOT;
	v6 = kind == XFW_RJK_ICMP6 || kind == XFW_RJK_RST6;
	/* OUTPUT judged the datagram before the stack fragmented it: a
	 * first fragment with more to come that fills the device's MTU (to
	 * 8 bytes) is the stack's. A packet sent with a fragment header of
	 * its own (a raw socket's) is what OUTPUT saw. */
	whole = 0;
	if (p->fragmented & XFW_FRAG_MORE) {
		__u32 mtu = 0;

		if (bpf_check_mtu(skb, skb->ifindex, &mtu, 0, 0) >= 0 || mtu)
			whole = p->l3len + XFW_RJ_FRAG_UNIT > mtu;
	}
	if (!xfw_rj_csum_ok_tc(skb, p, whole))
		return TC_ACT_SHOT;
	/* icmp_send's rate limits (reject_rate.h): an IPv4 error about a
	 * packet in OUTPUT (no device yet) asks the global bucket first; an
	 * IPv6 one only about a packet that has its device already
	 * (xfw_rj_out_dev6), else nf_send_unreach6 gives it the loopback
	 * device, which icmp6_send exempts. */
	rl = 0;
	if (kind == XFW_RJK_ICMP4 || (kind == XFW_RJK_ICMP6 && xfw_rj_out_dev6(skb, p)))
		rl = xfw_rl_limited(r->type, r->code, v6);
	if (rl && !xfw_rl_global_allow(rl, now))
		return TC_ACT_SHOT;
	routed = !xfw_rj_for_host(r->daddr, v6);
	if (routed && xfw_rj_tc_route(skb, r, &sc->fib, v6,
				      kind == XFW_RJK_ICMP4 || kind == XFW_RJK_ICMP6))
		return TC_ACT_SHOT;
	/* Then, its route found, the destination's bucket (a reply for the
	 * host itself leaves by lo: exempt; so does every IPv6 one here, the
	 * stack's message coming from the host's own address) and the
	 * global credit. */
	if (rl && !xfw_rl_spend(rl, r->daddr, 0, !routed || v6, now))
		return TC_ACT_SHOT;
	/* An ICMPv6 error for the host itself about a packet to another
	 * host: icmp6_send leaves the source to the route back, whose
	 * source selection picks the destination itself (RFC 6724 rule 1);
	 * about a packet to one of the host's anycast addresses it keeps
	 * that address (ipv6_chk_acast_addr_src; found by xfw difftest,
	 * conntrack seed 212).
	 * (IPv4 picks the same, but a frame from one of the host's own
	 * addresses handed to the stack on a device is a martian: there the
	 * source stays the packet's destination, docs/differences.md.) */
	if (!routed && kind == XFW_RJK_ICMP6 && !xfw_rj_for_host(r->saddr, v6))
		__builtin_memcpy(r->saddr, r->daddr, 16);
	/* An IPv4 one too: icmp_send keeps a local destination as the
	 * source (the offending packet's route is local), else routes the
	 * error to the packet's source, whose local route's preferred source
	 * is that address itself. The stack gets it through loopback, with
	 * an output route (xfw_rj_tc_via_lo): on another device its input
	 * routing would call the source a martian. */
	if (!routed && kind == XFW_RJK_ICMP4 && !xfw_rj_is_local(r->saddr, v6))
		r->saddr[0] = r->daddr[0];
	/* The route's device gives the TTL; a reply for the host itself
	 * leaves by lo. */
	r->ttl = !v6 ? xfw_rj_ttl4() : xfw_rj_hop_limit6(routed ? sc->fib.ifindex : XFW_LOOPBACK_IFINDEX);
	/* IPv4 options the sending socket set: an ICMP error echoes them
	 * (reject_opts.h); r->saddr is final here. */
	if (kind == XFW_RJK_ICMP4 && p->thoff != p->l3_off + XFW_RJ_IP4_HLEN &&
	    xfw_rj_opts4_tc(skb, p->l3_off))
		return TC_ACT_SHOT;

	if (kind == XFW_RJK_RST4 || kind == XFW_RJK_RST6) {
		if (xfw_rj_tc_put_rst(skb, r, v6))
			return TC_ACT_SHOT;
		if (!routed && !v6 && xfw_rj_rst4_partial(skb, r))
			return TC_ACT_SHOT;
	} else if (xfw_rj_tc_put_icmp(skb, r, v6, r->optlen, 0)) {
		return TC_ACT_SHOT;
	}
	if (routed)
		return xfw_rj_tc_out(&sc->fib);
	return XFW_RJ_TC_LOCAL;
}

/* xfw_rj_tc_via_lo reports whether a reply for the host itself in skb,
 * parsed into p, reaches the stack through loopback, as the kernel's
 * (its local route's device is lo): an ICMP or ICMPv6 error, from the
 * host's own address (xfw_rj_tc), or a TCP reset, so that it passes lo's
 * INPUT as the kernel's does (found by xfw difftest, conntrack seed 19,
 * where the kernel's INPUT dropped an IPv4 one), rather than on the
 * device its offending packet was leaving by (xfw_rj_tc_deliver). The
 * caller sends it (bpf_redirect_neigh to lo, whose route lookup, as
 * output from lo, finds the local route; marked judged for lo's TC
 * egress; lo's INPUT judges it, with the connection state OUTPUT handed
 * over). */
static __always_inline int xfw_rj_tc_via_lo(const struct __sk_buff *skb, const struct xfw_pkt *p)
{
	return skb->ifindex != XFW_LOOPBACK_IFINDEX &&
	       (p->proto == (p->fam ? IPPROTO_ICMPV6 : IPPROTO_ICMP) || p->proto == IPPROTO_TCP);
}

/* skb->tc_index of a reply xfw_rj_tc routed out of a device (xfw_rj_tc_out):
 * the skb keeps the offending packet's socket, which the kernel's reply
 * does not have (owner.h xfw_owner_reply). (nat_out.h's XFW_NAT_OUT_MARK
 * is 0x78f1, redirect.h's XFW_RD_MARK 0x78f2.) */
#define XFW_RJ_ROUTED_MARK 0x78f3

/* xfw_rj_tc_routed reports whether skb, at a device's TC egress, is such a
 * reply (and clears the mark). */
static __always_inline int xfw_rj_tc_routed(struct __sk_buff *skb)
{
	if (skb->tc_index != XFW_RJ_ROUTED_MARK)
		return 0;
	skb->tc_index = 0;
	return 1;
}

/* xfw_rj_tc_deliver hands a reply for the host itself (XFW_RJ_TC_LOCAL,
 * judged in OUTPUT since) to the local stack on the device it is on. */
static __always_inline int xfw_rj_tc_deliver(struct __sk_buff *skb)
{
	/* Loopback loops the skb back with its route, which delivers it
	 * locally (both addresses are the host's). */
	if (skb->ifindex == XFW_LOOPBACK_IFINDEX)
		return TC_ACT_OK;
	return bpf_redirect(skb->ifindex, BPF_F_INGRESS);
}

/* xfw_xdp_reject: the packet arrived on ingress and was judged REJECT
 * (type p->reject) in chain (INPUT or FORWARD), its DNAT given back when
 * dnat_undone, seen by connection tracking when ct_seen: returns XDP_PASS
 * with the reply, marked for xfw_tc_ingress, in place of the frame (XDP_TX
 * without XDP metadata), or XDP_DROP when the kernel would send nothing. */
static __always_inline int xfw_xdp_reject(struct xdp_md *ctx, struct xfw_pkt *p, __u32 chain,
					  __u32 dnat_undone, int ct_seen)
{
	return xfw_rj_xdp(ctx, p, chain, (dnat_undone ? XFW_RJX_DNAT_UNDONE : 0) |
					 (ct_seen ? XFW_RJX_CT_SEEN : 0));
}

/* xfw_tc_reject: the packet is locally generated and was judged REJECT in
 * OUTPUT: XFW_RJ_TC_LOCAL with the reply for the host itself in the skb,
 * or a TC action (the reply routed out; or a drop). */
static __always_inline int xfw_tc_reject(struct __sk_buff *skb, struct xfw_pkt *p, __u32 type)
{
	return xfw_rj_tc(skb, p, type);
}

#endif /* XFW_REJECT_H */
