/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_send.h — how an INPUT or FORWARD reply built at XDP leaves: as
 * the kernel's own (icmp_send, icmp6_send, nf_send_reset: routed as a
 * locally generated packet, to the route's neighbour, resolved if need
 * be; rate-limited as ICMP errors are: reject_rate.h).
 *
 * XDP cannot route or resolve a neighbour, and its XDP_TX only reaches a
 * veth peer that runs XDP itself. So the XDP hook builds the reply in
 * place (reject.h), marks it with XDP metadata (struct xfw_rj_meta: a
 * magic number and the device netfilter saw it arrive on) and passes it
 * (xfw_rj_xdp_handoff). xfw's TCX ingress program (xfw_tc_ingress, on every
 * interface with the XDP program) finds the mark before anything else sees
 * the frame, applies the rate limits, routes the reply (bpf_fib_lookup)
 * and sends it with bpf_redirect_neigh to the route's next hop
 * (xfw_rj_send): neighbour resolution as the kernel's output path does it
 * (queued while the neighbour is probed; dropped when it does not answer).
 *
 * Fail closed: the marked frame is addressed to Ethernet 00:00:00:00:00:00
 * (and untagged: a VLAN tag is removed at XDP, the mark names the VLAN
 * device). Without the TCX program the stack gets a frame for another host
 * (PACKET_OTHERHOST), which IP drops before any hook or socket.
 *
 * Conventions: the reply's headers are xfw's own (Ethernet, an IPv4 header
 * with at most the options an ICMP error echoes, or an extension-less IPv6
 * header, ICMP or TCP), so xfw_rj_send reads them at fixed offsets (the
 * IPv4 header's length aside). A driver without XDP metadata (bpf_xdp_adjust_meta
 * fails) gets the reply back with XDP_TX as before (docs/differences.md).
 * On loopback (generic XDP, whose metadata the skb keeps) a reply for the
 * host itself, to a packet the host sent itself, is marked too: lo's TCX
 * ingress judges it in OUTPUT with output device lo and sends it back
 * through loopback, where it passes PREROUTING and INPUT, as the kernel's
 * does (found by xfw difftest: where the kernel's OUTPUT dropped its
 * reply, xfw's, sent back at once with XDP_TX, reached the socket). Its
 * mark is addressed to 02:00:00:00:00:00 (loopback's own address is all
 * zeros). A reply for another host (a packet the host sent itself with
 * that host's source), which xfw_rj_lo_route routes out of another
 * device, is marked with that device instead of lo: lo's TCX ingress
 * judges it in OUTPUT and POSTROUTING with that device, as the kernel's
 * passes them, and sends it out of it (xfw_rj_lo_out). A reply marked on
 * another device for the host itself (a spoofed source of its own, IPv6)
 * is judged in OUTPUT with output device lo and delivered through lo
 * (XFW_RJ_SEND_LOCAL), as the kernel's; one for a link-local address of
 * the host's goes on, once lo's XDP hook judged it, to the input of that
 * address's device (xfw_rj_ll_address, xfw_rj_ll_deliver).
 *
 * Includes: common.h, xfw_maps.h (interface facts), reject_structs.h,
 * reject_csum.h (xfw_rj_rst4_psum),
 * reject_rate.h, reject_route.h (the hop limit), mark_route.h (the
 * packet's mark in the metadata).
 */
#ifndef XFW_REJECT_SEND_H
#define XFW_REJECT_SEND_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_maps.h"
#include "reject_structs.h"
#include "reject_csum.h"
#include "reject_rate.h"
#include "reject_route.h"
#include "mark_route.h"
#include "reject_saddr.h"

/* "xfwR": the mark of a reply in the XDP metadata. */
#define XFW_RJ_META_MAGIC 0x78667752
/* "xfwS": the mark of an ICMPv6 error about a forwarded packet, whose
 * source xfw_tc_ingress picks on the input device (reject_saddr.h). */
#define XFW_RJ_META_SEL6 0x78667753

/* "xfwN": a reply nat_out.h translated back, to deliver through loopback
 * (xfw_nat_in_send, defined there; it also sends REJECT's replies for the
 * host itself marked on loopback back through loopback). */
#define XFW_NAT_IN_META_MAGIC 0x7866774e
int xfw_nat_in_send(struct __sk_buff *skb);

/* The copy of a broadcast or multicast packet the host delivers to itself
 * (skb->pkt_type PACKET_LOOPBACK), judged in PREROUTING and INPUT
 * (loopcopy.h, defined there). */
int xfw_tc_loopcopy(struct __sk_buff *skb);

/* "xfwD": a packet FORWARD dropped, passed on for the kernel's ICMP
 * redirect (xfw_rd_tc_ingress, defined in redirect.h). */
#define XFW_RD_META_MAGIC 0x78667744
int xfw_rd_tc_ingress(struct __sk_buff *skb);

/* "xfwK": a forwarded packet without a connection (INVALID, UNTRACKED), which
 * POSTROUTING leaves as it came (nat_out.h xfw_nat_keep_xdp): marked
 * skb->tc_index XFW_NAT_KEEP_MARK for xfw_tc_egress. (nat_out.h's
 * XFW_NAT_OUT_MARK is 0x78f1, redirect.h's XFW_RD_MARK 0x78f2, reject.h's
 * XFW_RJ_ROUTED_MARK 0x78f3.) */
#define XFW_NAT_KEEP_META_MAGIC 0x7866774b
#define XFW_NAT_KEEP_MARK 0x78f4

/* A REJECT reply for one of the host's IPv6 link-local addresses, judged
 * in OUTPUT and sent into loopback (skb->tc_index, nat_out.h
 * xfw_nat_in_send), to hand to its device's input (xfw_rj_ll_deliver). */
#define XFW_NAT_LL_MARK 0x78f5

/* xfw_rj_out_judge judges the reply in skb in OUTPUT with output device
 * oif (defined in xfw.c): TC_ACT_OK when it may leave; sel_iif, when not
 * 0, the input device an ICMPv6 error's source is picked on first
 * (xfw_rj_saddr6), once the connection handed over is taken (its key is
 * the reply's bytes as the XDP hook built it). */
int xfw_rj_out_judge(struct __sk_buff *skb, __u32 oif, __u32 sel_iif);

/* The mark (a multiple of 4 bytes, as XDP metadata must be). */
struct xfw_rj_meta {
	__u32 magic;
	/* the device netfilter saw (a VLAN device); on loopback, for a reply
	 * to another host, the device its route leaves by */
	__u32 ifindex;
};

/* The first byte of the Ethernet destination of a reply marked on
 * loopback: 02:00:00:00:00:00, a locally administered unicast address
 * that is not loopback's (00:00:00:00:00:00), so that the stack, without
 * the TCX program, takes the frame for another host's. */
#define XFW_RJ_LO_OTHERHOST 0x02

/* TCX verdict "not mine: the next program decides" (TCX_NEXT). */
#define XFW_TCX_NEXT (-1)

/* Offsets in the reply frame (untagged Ethernet). */
#define XFW_RJ_SEND_L3 XFW_RJ_ETH_HLEN
#define XFW_RJ_SEND_L4_4 (XFW_RJ_ETH_HLEN + XFW_RJ_IP4_HLEN)
#define XFW_RJ_SEND_L4_6 (XFW_RJ_ETH_HLEN + XFW_RJ_IP6_HLEN)

/* xfw_rj_anchor_maps references the maps both REJECT programs must hold
 * (see xfw_anchor, never true): the XDP program holds the rate limiter's,
 * so the control plane finds them from it; the ingress program holds the
 * configuration and build maps, by which the control plane tells it is
 * xfw's of this namespace and this build. */
static __always_inline void xfw_rj_anchor_maps(void)
{
	struct xfw_rl_peer_key pk = { 0 };
	struct xfw_lpm6_key lk = { 0 };
	__u32 k = 0;

	if (xfw_anchor) {
		bpf_map_lookup_elem(&xfw_rl_cfg, &k);
		bpf_map_lookup_elem(&xfw_rl_global, &k);
		bpf_map_lookup_elem(&xfw_rl_rt6, &lk);
		bpf_map_lookup_elem(&xfw_rl_peers, &pk);
		bpf_map_lookup_elem(&xfw_cfg, &k);
		bpf_map_lookup_elem(&xfw_build, &k);
	}
}

/* xfw_rj_xdp_handoff marks the reply now in ctx's frame (L2 header of
 * l2len bytes) for xfw_tc_ingress and passes it; the reply is IPv6 when v6;
 * out, when not 0, the device a loopback reply for another host leaves by
 * (xfw_rj_lo_route); sel6 when its ICMPv6 source is to be picked on the
 * input device (XFW_RJ_META_SEL6). Returns the XDP action. */
static __always_inline int xfw_rj_xdp_handoff(struct xdp_md *ctx, __u32 l2len, __u16 vlan, int v6,
					      __u32 out, __u8 sel6)
{
	__u64 key = (__u64)ctx->ingress_ifindex | ((__u64)vlan << 32);
	struct xfw_ifinfo *ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	struct xfw_rj_meta *m;
	struct ethhdr *eth;
	void *data;

	xfw_rj_anchor_maps();
	if (!ifi)
		return XDP_DROP;
	/* Without metadata, the old way: back out of the input device. */
	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xfw_rj_meta)))
		return XDP_TX;
	if (l2len == XFW_RJ_VLAN_HLEN &&
	    bpf_xdp_adjust_head(ctx, XFW_RJ_VLAN_HLEN - XFW_RJ_ETH_HLEN))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	m = (void *)(long)ctx->data_meta;
	eth = data;
	if ((void *)(m + 1) > data || (void *)(eth + 1) > (void *)(long)ctx->data_end)
		return XDP_DROP;
	__builtin_memset(eth, 0, 2 * ETH_ALEN);
	/* Loopback's own address is 00:00:00:00:00:00: there the mark is
	 * addressed to another (locally administered) one. */
	if (ctx->ingress_ifindex == XFW_LOOPBACK_IFINDEX)
		eth->h_dest[0] = XFW_RJ_LO_OTHERHOST;
	eth->h_proto = bpf_htons(v6 ? ETH_P_IPV6 : ETH_P_IP);
	m->magic = sel6 ? XFW_RJ_META_SEL6 : XFW_RJ_META_MAGIC;
	m->ifindex = out ? out : ifi->ifindex;
	return XDP_PASS;
}

/* xfw_rj_ll6 reports whether a is an IPv6 link-local address (fe80::/10:
 * the first byte 0xfe, the top two bits of the second 10). */
static __always_inline int xfw_rj_ll6(const __u32 *a)
{
	const __u8 *b = (const __u8 *)a;

	return b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
}

/* xfw_rj_ll_elsewhere reports whether the IPv6 address a is a link-local
 * address of the host's held by another device than iif: an ICMPv6 error
 * to it is not for the host, as icmp6_send binds the route of a
 * link-local destination to the input device, where no local route
 * matches it: the error leaves by iif, to a neighbour that never answers
 * (found against the kernel, tests/e2e
 * TestRejectOwnLinkLocalSourceAgainstKernel: counted in OUTPUT and
 * POSTROUTING, not through lo; nf_send_reset6's reset, bound to no
 * device, is delivered). Not inlined: its key stays off xfw_rj_send's
 * frame, which the combined stack limit of the REJECT paths (512 bytes)
 * has no room for. */
static __attribute__((noinline)) int xfw_rj_ll_elsewhere(const __u32 *a, __u32 iif)
{
	struct xfw_local_val *v;

	if (!xfw_rj_ll6(a))
		return 0;
	v = xfw_rj_local_route(a, 1);
	return v && v->ifindex != iif;
}

/* xfw_rj_send_fib looks up the reply's route in fib: as if forwarded from
 * iif (the whole table); when that fails, the route out of iif (on a
 * device that does not forward both fail, BPF_FIB_LKUP_RET_FWD_DISABLED:
 * xfw_rj_send). bpf_fib_lookup answers nothing for IPv6 link-local
 * addresses ("never forwarded"): a link-local destination is on the link
 * the packet came from (icmp6_send sends out of the input device for an
 * address that needs a scope id), so the reply goes out of iif to the
 * destination itself, the neighbour resolved by bpf_redirect_neigh; a
 * reply from a link-local source to another address is routed as from no
 * source, out of iif. (Found by xfw difftest.) Returns the lookup's
 * result. */
static __always_inline long xfw_rj_send_fib(struct __sk_buff *skb, struct bpf_fib_lookup *fib)
{
	__u32 flags = BPF_FIB_LOOKUP_SKIP_NEIGH, iif = fib->ifindex;
	long rc = BPF_FIB_LKUP_RET_NOT_FWDED;

	if (fib->family == AF_INET6 && xfw_rj_ll6(fib->ipv6_dst))
		return BPF_FIB_LKUP_RET_SUCCESS; /* out of iif, to dst */
	if (fib->family == AF_INET6 && xfw_rj_ll6(fib->ipv6_src)) {
		__builtin_memset(fib->ipv6_src, 0, sizeof(fib->ipv6_src));
		flags |= BPF_FIB_LOOKUP_OUTPUT;
	} else {
		rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags);
	}
	if (rc != BPF_FIB_LKUP_RET_SUCCESS) {
		fib->ifindex = iif;
		rc = bpf_fib_lookup(skb, fib, sizeof(*fib), flags | BPF_FIB_LOOKUP_OUTPUT);
	}
	return rc;
}

/* XFW_RJ_SEND_LOCAL, returned by xfw_rj_send: the reply is for the host
 * itself (a spoofed source of its own), to be judged in OUTPUT with output
 * device lo and delivered through lo (xfw_tc_ingress). Not a TC action
 * code. */
#define XFW_RJ_SEND_LOCAL 0x101

/* xfw_rj_send rate-limits, routes and sends the reply in skb (marked by
 * the XDP hook on device iif); the route's device goes to *oif. A reply
 * for the host itself is left in skb (XFW_RJ_SEND_LOCAL). A global
 * function, verified once. */
__attribute__((noinline)) int xfw_rj_send(struct __sk_buff *skb, __u32 iif, __u32 *oif)
{
	struct bpf_fib_lookup fib;
	struct bpf_redir_neigh nh;
	struct xfw_rl_cfg *cfg;
	void *data, *data_end;
	__u32 dst[4] = { 0 };
	__u8 *l4;
	int v6, icmp, limited = 0;
	long rc;
	__u64 now = bpf_ktime_get_ns();
	__u16 proto;

	if (!skb || !oif)
		return TC_ACT_SHOT;
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (data + XFW_RJ_SEND_L4_6 + XFW_RJ_ICMP_HLEN > data_end &&
	    data + XFW_RJ_SEND_L4_4 + XFW_RJ_ICMP_HLEN > data_end)
		return TC_ACT_SHOT;
	proto = ((struct ethhdr *)data)->h_proto;
	__builtin_memset(&fib, 0, sizeof(fib));
	fib.ifindex = iif;
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = data + XFW_RJ_SEND_L3;

		if ((void *)(ip + 1) + XFW_RJ_ICMP_HLEN > data_end)
			return TC_ACT_SHOT;
		v6 = 0;
		fib.family = AF_INET;
		fib.l4_protocol = ip->protocol;
		fib.ipv4_src = ip->saddr;
		fib.ipv4_dst = dst[0] = ip->daddr;
		icmp = ip->protocol == IPPROTO_ICMP;
		/* An ICMP error may carry echoed options (reject_opts.h). */
		if (ip->ihl < XFW_RJ_IP4_HLEN / 4)
			return TC_ACT_SHOT;
		l4 = data + XFW_RJ_SEND_L3 + (ip->ihl & 0xf) * 4;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = data + XFW_RJ_SEND_L3;

		if ((void *)(ip6 + 1) + XFW_RJ_ICMP_HLEN > data_end)
			return TC_ACT_SHOT;
		v6 = 1;
		fib.family = AF_INET6;
		fib.l4_protocol = ip6->nexthdr;
		__builtin_memcpy(fib.ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(fib.ipv6_dst, &ip6->daddr, 16);
		__builtin_memcpy(dst, &ip6->daddr, 16);
		icmp = ip6->nexthdr == IPPROTO_ICMPV6;
		l4 = data + XFW_RJ_SEND_L4_6;
	} else {
		return TC_ACT_SHOT;
	}
	if ((void *)(l4 + 2) > data_end)
		return TC_ACT_SHOT;
	/* icmp_send / icmp6_send: the global bucket first (a message it
	 * refuses is not even routed), then the route, then the
	 * destination's bucket, and the global credit is spent last. */
	cfg = icmp ? xfw_rl_limited(l4[0], l4[1], v6) : 0;
	if (cfg) {
		if (!xfw_rl_global_allow(cfg, now))
			return TC_ACT_SHOT;
		limited = 1;
	}
	/* bpf_fib_lookup refuses every lookup, output ones too, from a
	 * device that does not forward (a host that is no router): then the
	 * reply is routed by bpf_redirect_neigh itself, as output from iif
	 * (the kernel's route lookup; on-link when no route leaves by iif).
	 * Found against the kernel: INPUT replies of a host that does not
	 * forward were never sent. */
	/* For the host itself (a packet with a source of its own, which
	 * IPv4 drops as a martian before any chain, IPv6 does not): the
	 * kernel's local route leaves by lo, which spares the destination's
	 * bucket (icmpv6_xrlim_allow), and gives lo's hop limit. */
	if (xfw_rj_for_host(dst, v6) && !(v6 && icmp && xfw_rj_ll_elsewhere(dst, iif))) {
		if (limited && !xfw_rl_spend(cfg, dst, v6, 1, now))
			return TC_ACT_SHOT;
		*oif = XFW_LOOPBACK_IFINDEX;
		if (v6) {
			struct ipv6hdr *ip6 = data + XFW_RJ_SEND_L3;

			if ((void *)(ip6 + 1) > data_end)
				return TC_ACT_SHOT;
			ip6->hop_limit = xfw_rj_hop_limit6(XFW_LOOPBACK_IFINDEX);
		}
		return XFW_RJ_SEND_LOCAL;
	}
	rc = xfw_rj_send_fib(skb, &fib);
	if (rc == BPF_FIB_LKUP_RET_FWD_DISABLED)
		fib.ifindex = iif;
	else if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return TC_ACT_SHOT;
	if (limited && !xfw_rl_spend(cfg, dst, v6, 0, now))
		return TC_ACT_SHOT;
	*oif = fib.ifindex;
	/* IPv6: the hop limit of the route's device (the XDP hook could
	 * only guess it); no checksum covers it. */
	if (v6) {
		struct ipv6hdr *ip6 = data + XFW_RJ_SEND_L3;

		if ((void *)(ip6 + 1) > data_end)
			return TC_ACT_SHOT;
		ip6->hop_limit = xfw_rj_hop_limit6(fib.ifindex);
	}
	if (rc == BPF_FIB_LKUP_RET_FWD_DISABLED)
		return bpf_redirect_neigh(iif, 0, 0, 0);
	__builtin_memset(&nh, 0, sizeof(nh));
	nh.nh_family = fib.family;
	if (v6)
		__builtin_memcpy(nh.ipv6_nh, fib.ipv6_dst, 16);
	else
		nh.ipv4_nh = fib.ipv4_dst;
	return bpf_redirect_neigh(fib.ifindex, &nh, sizeof(nh), 0);
}

/* xfw_rj_lo_rst4_partial gives an IPv4 RST in skb, REJECT's reply to a
 * packet the host sent itself through loopback (INPUT on lo), the
 * checksum field the kernel's has, as xfw_rj_rst4_partial does for
 * OUTPUT's (reject.h): nf_send_reset leaves the sum to the device
 * (CHECKSUM_PARTIAL, the field holding the pseudo-header sum) and lo
 * never completes it (found by xfw difftest, conntrack IPv4 seed 208).
 * The skb is marked verified. The frame is xfw's own reply (untagged
 * Ethernet, an IPv4 header without options, TCP); anything else is left
 * as it is. Returns 0, or -1 when the headers are not there. */
static __always_inline int xfw_rj_lo_rst4_partial(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *data_end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + XFW_RJ_ETH_HLEN;
	__u8 *th = (__u8 *)(ip + 1);

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return 0;
	if ((void *)(th + XFW_RJ_TCP_HLEN) > data_end)
		return -1;
	if (ip->protocol != IPPROTO_TCP || ip->ihl * 4 != XFW_RJ_IP4_HLEN)
		return 0;
	xfw_rj_rst4_psum(skb, th, ip->saddr, ip->daddr);
	return 0;
}

/* xfw_rj_to_host delivers the reply in skb to the host itself through
 * loopback, as the kernel's, which passes OUTPUT and POSTROUTING leaving
 * by lo, then lo's PREROUTING and INPUT (its XDP hook) on its way to the
 * host's sockets: judged in OUTPUT with output device lo first. */
static __always_inline int xfw_rj_to_host(struct __sk_buff *skb)
{
	if (xfw_rj_out_judge(skb, XFW_LOOPBACK_IFINDEX, 0) != TC_ACT_OK)
		return TC_ACT_SHOT;
	/* Loopback's eth_type_trans never sets PACKET_HOST back (it only
	 * marks other hosts' frames): the mark's PACKET_OTHERHOST would go
	 * along and IP drop it after lo's INPUT. */
	if (bpf_skb_change_type(skb, PACKET_HOST))
		return TC_ACT_SHOT;
	if (xfw_rj_lo_rst4_partial(skb))
		return TC_ACT_SHOT;
	return xfw_nat_in_send(skb);
}

/* The Ethernet source of a reply xfw_rj_ll_address addressed: two bytes
 * of tag (a locally administered address, "l"), then the ifindex of the
 * device to deliver it to (big-endian). */
#define XFW_RJ_LL_TAG0 0x02
#define XFW_RJ_LL_TAG1 0x6c
#define XFW_RJ_LL_TAG_LEN 2

/* xfw_rj_ll_address addresses the reply in skb, for one of the host's
 * IPv6 link-local addresses (XFW_NAT_LL_MARK, judged in OUTPUT already),
 * as it leaves by lo's TC egress: from a tagged source naming the device
 * holding that address, for lo's TCX ingress (xfw_rj_ll_deliver); its
 * destination stays lo's, whose XDP hook judges it in PREROUTING and
 * INPUT.
 * skb->tc_index does not survive loopback. Returns the TC verdict:
 * dropped when the address is not the host's or its device's facts are
 * unknown (a VLAN device's address). */
static __always_inline int xfw_rj_ll_address(struct __sk_buff *skb)
{
	__u8 src[ETH_ALEN] = { XFW_RJ_LL_TAG0, XFW_RJ_LL_TAG1 };
	struct xfw_local_val *v;
	struct xfw_ifinfo *ifi;
	struct ipv6hdr *ip6;
	__u32 dev;
	__u64 key;

	skb->tc_index = 0;
	ip6 = (void *)(long)skb->data + XFW_RJ_SEND_L3;
	if ((void *)(ip6 + 1) > (void *)(long)skb->data_end)
		return TC_ACT_SHOT;
	v = xfw_rj_local_route((const __u32 *)&ip6->daddr, 1);
	if (xfw_host_type(v) != XFW_RTN_LOCAL)
		return TC_ACT_SHOT;
	key = v->ifindex;
	ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	if (!ifi)
		return TC_ACT_SHOT;
	dev = bpf_htonl(ifi->ifindex);
	__builtin_memcpy(src + XFW_RJ_LL_TAG_LEN, &dev, sizeof(dev));
	if (bpf_skb_store_bytes(skb, ETH_ALEN, src, ETH_ALEN, 0))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

/* xfw_rj_ll_tagged reports whether the frame in skb is a reply
 * xfw_rj_ll_address addressed (its tagged source). */
static __always_inline int xfw_rj_ll_tagged(struct __sk_buff *skb)
{
	struct ethhdr *eth = (void *)(long)skb->data;

	return (void *)(eth + 1) <= (void *)(long)skb->data_end &&
	       eth->h_proto == bpf_htons(ETH_P_IPV6) && eth->h_source[0] == XFW_RJ_LL_TAG0 &&
	       eth->h_source[1] == XFW_RJ_LL_TAG1;
}

/* xfw_rj_ll_deliver hands the reply in skb, arriving on lo as
 * xfw_rj_ll_address addressed it (xfw_rj_ll_tagged; judged in lo's
 * PREROUTING and INPUT by its XDP hook, its mark handed over), to the
 * input of the device its source names, whose local route delivers it
 * to the host's sockets, as the kernel's (which carries that route
 * through lo; lo's own input finds none for a link-local destination).
 * Returns the TC verdict. */
static __always_inline int xfw_rj_ll_deliver(struct __sk_buff *skb)
{
	struct xfw_ifinfo *ifi;
	struct ethhdr *eth;
	__u64 key;
	__u32 dev;

	xfw_mark_meta_take(skb);
	eth = (void *)(long)skb->data;
	if ((void *)(eth + 1) > (void *)(long)skb->data_end)
		return TC_ACT_SHOT;
	__builtin_memcpy(&dev, eth->h_source + XFW_RJ_LL_TAG_LEN, sizeof(dev));
	key = bpf_ntohl(dev);
	ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	/* Addressed to that device, whose input would take it for another
	 * host's frame. */
	if (!ifi || bpf_skb_store_bytes(skb, 0, ifi->mac, ETH_ALEN, 0))
		return TC_ACT_SHOT;
	return bpf_redirect(ifi->ifindex, BPF_F_INGRESS);
}

/* xfw_rj_lo_out sends the reply in skb, marked on loopback for another
 * host, out of device out, its route's (xfw_rj_lo_route), as the kernel
 * sends it (icmp_send, icmp6_send, nf_send_reset: a locally generated
 * packet, no rate limit for a packet that arrived on lo): judged first in
 * OUTPUT and POSTROUTING with output device out, with the connection the
 * XDP hook handed over (xfw_rj_out_judge), as the INPUT and FORWARD
 * replies xfw_rj_send sends, then sent with bpf_redirect_neigh, whose own
 * route lookup finds the neighbour (resolved only for a reply OUTPUT let
 * through, as the kernel's: found against the kernel, a neighbour
 * solicitation for a reply OUTPUT dropped). The reply is unmarked, as the
 * kernel's (fwmark_reflect off; the offending packet's skb->mark stayed
 * on its skb through loopback); out's TC egress takes it for a forwarded
 * packet (it arrived on lo), as it does xfw_rj_send's. */
static __always_inline int xfw_rj_lo_out(struct __sk_buff *skb, __u32 out)
{
	skb->mark = 0;
	if (xfw_rj_out_judge(skb, out, 0) != TC_ACT_OK)
		return TC_ACT_SHOT;
	return bpf_redirect_neigh(out, 0, 0, 0);
}

/* xfw_tc_ingress: the copy of a broadcast or multicast packet the host
 * delivers to itself (PACKET_LOOPBACK) is judged (xfw_tc_loopcopy); a
 * frame marked by the XDP hook is a REJECT reply to
 * send (xfw_rj_send), a reply nat_out.h translated back, to deliver
 * (xfw_nat_in_send), a packet FORWARD dropped, for the kernel's
 * redirect (xfw_rd_tc_ingress), or a forwarded packet without a
 * connection, for POSTROUTING to leave as it came (XFW_NAT_KEEP_MARK);
 * anything else is left to the next
 * program, with the packet's mark the XDP hook handed over
 * (mark_route.h). */
SEC("tc")
int xfw_tc_ingress(struct __sk_buff *skb)
{
	struct xfw_rj_meta *m;
	__u32 oif = 0, sel;
	int rc;

	xfw_rj_anchor_maps();
	/* The host's copy of its own broadcast or multicast packet. */
	if (skb->pkt_type == PACKET_LOOPBACK)
		return xfw_tc_loopcopy(skb);
	/* A bridge port's frame, for -m physdev (bridge.h). */
	xfw_br_note_tc(skb);
	/* A REJECT reply for a link-local address of the host's, back
	 * from lo's PREROUTING and INPUT. */
	if (skb->ifindex == XFW_LOOPBACK_IFINDEX && xfw_rj_ll_tagged(skb))
		return xfw_rj_ll_deliver(skb);
	/* The packet's mark the XDP hook's walk left (mark_route.h): before
	 * the stack routes the packet. */
	m = xfw_mark_meta_take(skb);
	if ((void *)(m + 1) > (void *)(long)skb->data)
		return XFW_TCX_NEXT;
	/* The metadata goes along with the skb: the mark is taken off. */
	if (m->magic == XFW_NAT_IN_META_MAGIC) {
		m->magic = 0;
		return xfw_nat_in_send(skb);
	}
	if (m->magic == XFW_RD_META_MAGIC) {
		m->magic = 0;
		return xfw_rd_tc_ingress(skb);
	}
	/* Left untranslated at POSTROUTING; the next program decides
	 * (TCX_PASS would set tc_index from tc_classid: both set). */
	if (m->magic == XFW_NAT_KEEP_META_MAGIC) {
		m->magic = 0;
		skb->tc_classid = XFW_NAT_KEEP_MARK;
		skb->tc_index = XFW_NAT_KEEP_MARK;
		return XFW_TCX_NEXT;
	}
	sel = m->magic == XFW_RJ_META_SEL6;
	if (m->magic != XFW_RJ_META_MAGIC && !sel)
		return XFW_TCX_NEXT;
	/* Taken off at once: a reply for the host itself goes through
	 * loopback with its metadata, where lo's TCX ingress would take it
	 * for a reply still to send, out of the device the mark names
	 * (found by xfw difftest, ufw.v6.rules: a reset to a spoofed source
	 * of the host's own judged in OUTPUT again and sent out of the
	 * input device, its neighbour solicited, instead of delivered). */
	m->magic = 0;
	/* The reply to a packet the host sent itself through loopback,
	 * for the host itself: the kernel's leaves by lo, passing OUTPUT
	 * and POSTROUTING, and comes back through lo's PREROUTING and
	 * INPUT. Judged here, it is sent back through loopback, whose TC
	 * egress lets it pass and whose XDP hook judges it on its way in. */
	if (skb->ifindex == XFW_LOOPBACK_IFINDEX) {
		/* For another host: out by its route's device. */
		if (m->ifindex != XFW_LOOPBACK_IFINDEX)
			return xfw_rj_lo_out(skb, m->ifindex);
		return xfw_rj_to_host(skb);
	}
	rc = xfw_rj_send(skb, m->ifindex, &oif);
	/* For the host itself: the kernel's passes OUTPUT and POSTROUTING
	 * leaving by lo, then lo's PREROUTING and INPUT (its XDP hook) on
	 * its way to the host's sockets. */
	if (rc == XFW_RJ_SEND_LOCAL)
		return xfw_rj_to_host(skb);
	/* The kernel's reply passes OUTPUT (and POSTROUTING) with its
	 * route's device: judged before it leaves (the redirect is only
	 * recorded until the program returns TC_ACT_REDIRECT); a reply
	 * dropped after bpf_redirect_neigh would count as the device's
	 * drop. */
	if (rc == TC_ACT_REDIRECT && xfw_rj_out_judge(skb, oif, sel ? m->ifindex : 0) != TC_ACT_OK)
		return TC_ACT_SHOT;
	return rc;
}

#endif /* XFW_REJECT_SEND_H */
