// SPDX-License-Identifier: GPL-2.0
/*
 * xfw.c — entry points of xfw's data plane: XDP on ingress of every
 * interface, TCX on egress. One object serves both families. It is loaded
 * and verified once per namespace; rulesets are swapped by replacing inner
 * maps and flipping a bank index (classify.h), never by reloading code.
 *
 * Hook → chain (as netfilter's filter table):
 *   XDP ingress: bpf_fib_lookup() asks the kernel's routing. Local delivery
 *     (NOT_FWDED) → INPUT; forwarded (SUCCESS / NO_NEIGH) → FORWARD with the
 *     route's output interface; anything the kernel drops or answers before
 *     the FORWARD hook (no route, forwarding off, TTL ≤ 1, too big with DF)
 *     is passed unjudged, as netfilter never sees it.
 *   TC egress: only locally generated packets (skb->ingress_ifindex == 0)
 *     → OUTPUT; forwarded packets were judged once, at ingress.
 *
 * Stages: parse.h (fields) → classify.h (LBVS, counters) → reject.h (REJECT
 * replies) → log events to the ring buffer (LOG).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "common.h"

/* Set only to keep every state map referenced by the program, so the control
 * plane finds them from the attached program's map ids. Never true. */
const volatile __u32 xfw_anchor = 0;

#include "parse.h"
#include "classify.h"
#include "local.h"
#include "reject.h"
#include "ct.h"

/* Each hook's packet facts and pending LOG list, one per CPU and hook (XDP
 * and TC run to completion on their CPU and do not nest): on the stack
 * they would push the deepest call chain (the hook, xfw_classify and its
 * bit-vector walk) past 512 bytes. */
struct xfw_xdp_scratch {
	struct xfw_pkt p;
	struct xfw_pending st;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_xdp_scratch);
	__uint(max_entries, 2);   /* 0: XDP, 1: TC */
} xfw_xdp_scratch SEC(".maps");

#ifndef AF_INET
#define AF_INET 2
#endif
#define XFW_SOCK_RAW 3 /* SOCK_RAW */
#ifndef AF_INET6
#define AF_INET6 10
#endif

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, struct xfw_ifinfo);
	__uint(max_entries, 4096);
} xfw_ifinfo SEC(".maps");

/* LOG events: 1 MiB of ring (about 3,000 events in flight). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} xfw_logring SEC(".maps");

/* The saved ruleset of each generation slot (iptables-save text in 4 KiB
 * pages) and the user-space counter offsets; read and written by the
 * control plane only. */
#define XFW_STATE_PAGE 4096
struct xfw_state_page {
	__u8 b[XFW_STATE_PAGE];
};
XFW_INNER_ARRAY(xfw_state_m, struct xfw_state_page);
XFW_INNER_ARRAY(xfw_cbase_m, struct xfw_counter);
XFW_OUTER(xfw_o_state, xfw_state_m);
/* The namespace's ipsets (xfw ipset), encoded by internal/ipset, in element
 * 0: pages of a little-endian 64-bit length, then the bytes. Kept here, in
 * the namespace, like the rulesets' text: they live as long as xfw's
 * programs do. */
XFW_OUTER(xfw_o_ipsets, xfw_state_m);
XFW_OUTER(xfw_o_cbase, xfw_cbase_m);

/* An 8-byte identity of the loaded object (written by the loader), so a
 * control plane of another build never reuses programs or maps whose
 * layout it does not know. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} xfw_build SEC(".maps");

static __always_inline void xfw_touch_state(void)
{
	__u32 k = 0;

	if (xfw_anchor) {
		bpf_map_lookup_elem(&xfw_o_state, &k);
		bpf_map_lookup_elem(&xfw_o_ipsets, &k);
		bpf_map_lookup_elem(&xfw_o_cbase, &k);
		bpf_map_lookup_elem(&xfw_build, &k);
	}
}

/* xfw_log_event reserves and fills a LOG event for entry e of generation
 * slot, or returns NULL. */
static __always_inline struct xfw_log_event *xfw_log_event(__u32 slot, __u32 e,
		struct xfw_pkt *p, __u32 chain, __u32 iif, __u32 oif)
{
	void *entries = xfw_inner(&xfw_o_entries, slot);
	void *logcfg = xfw_inner(&xfw_o_logcfg, slot);
	struct xfw_entry *ent;
	struct xfw_logcfg *lc;
	struct xfw_log_event *ev;
	__u32 aux;

	if (!entries || !logcfg)
		return NULL;
	ent = bpf_map_lookup_elem(entries, &e);
	if (!ent)
		return NULL;
	aux = ent->aux;
	lc = bpf_map_lookup_elem(logcfg, &aux);
	if (!lc)
		return NULL;
	ev = bpf_ringbuf_reserve(&xfw_logring, sizeof(*ev), 0);
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

/* xfw_snap_len bounds the bytes of a frame copied into a LOG event. */
static __always_inline __u32 xfw_snap_len(__u32 len)
{
	if (len > XFW_LOG_SNAP)
		len = XFW_LOG_SNAP;
	return len;
}

static __always_inline void xfw_emit_logs_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					      struct xfw_pending *st, __u32 chain,
					      __u32 iif, __u32 oif)
{
	__u32 frame = (__u32)(ctx->data_end - ctx->data);

	for (int i = 0; i < XFW_MAX_PENDING_LOGS; i++) {
		struct xfw_log_event *ev;
		__u32 n;

		if (i >= st->nlogs)
			break;
		ev = xfw_log_event(st->slot, st->logs[i], p, chain, iif, oif);
		if (!ev)
			continue;
		ev->pkt_len = frame;
		ev->snap_len = xfw_snap_len(frame);
		/* Constant or masked sizes keep the verifier's bounds. */
		if (frame >= XFW_LOG_SNAP)
			n = bpf_xdp_load_bytes(ctx, 0, ev->pkt, XFW_LOG_SNAP);
		else if ((frame & (XFW_LOG_SNAP - 1)) > 0)
			n = bpf_xdp_load_bytes(ctx, 0, ev->pkt, xfw_mask_snap(frame - 1) + 1);
		else
			n = -1;
		if ((int)n < 0)
			ev->snap_len = 0;
		bpf_ringbuf_submit(ev, 0);
	}
}

static __always_inline void xfw_emit_logs_tc(struct __sk_buff *skb, struct xfw_pkt *p,
					     struct xfw_pending *st, __u32 chain,
					     __u32 iif, __u32 oif)
{
	for (int i = 0; i < XFW_MAX_PENDING_LOGS; i++) {
		struct xfw_log_event *ev;
		__u32 n;

		if (i >= st->nlogs)
			break;
		ev = xfw_log_event(st->slot, st->logs[i], p, chain, iif, oif);
		if (!ev)
			continue;
		__u32 len = skb->len;

		ev->pkt_len = len;
		ev->snap_len = xfw_snap_len(len);
		if (len >= XFW_LOG_SNAP)
			n = bpf_skb_load_bytes(skb, 0, ev->pkt, XFW_LOG_SNAP);
		else if ((len & (XFW_LOG_SNAP - 1)) > 0)
			n = bpf_skb_load_bytes(skb, 0, ev->pkt, xfw_mask_snap(len - 1) + 1);
		else
			n = -1;
		if ((int)n < 0)
			ev->snap_len = 0;
		bpf_ringbuf_submit(ev, 0);
	}
}

/* xfw_policy returns the verdict of a built-in chain's policy in slot. */
static __always_inline __u32 xfw_policy(__u32 slot, __u32 chain)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	if (!fc || chain >= XFW_NCHAINS)
		return XFW_ACT_DROP;
	return fc->policy_drop[chain] ? XFW_ACT_DROP : XFW_ACT_ACCEPT;
}

/* xfw_judge classifies p in chain of generation slot st->slot and returns
 * the verdict as XFW_ACT_ACCEPT, XFW_ACT_DROP or XFW_ACT_REJECT (*reject =
 * type). */
static __always_inline __u32 xfw_judge(struct xfw_pkt *p, __u32 chain, __u32 iif,
				       __u32 oif, struct xfw_pending *st, __u32 *reject)
{
	struct xfw_entry *ent;
	void *entries;
	__u32 res;

	res = xfw_classify(p, chain, iif, oif, st);
	if (res == XFW_RES_HOTDROP)
		return XFW_ACT_DROP;
	if (res == XFW_RES_END)
		return xfw_policy(st->slot, chain);
	entries = xfw_inner(&xfw_o_entries, st->slot);
	if (!entries)
		return XFW_ACT_DROP;
	ent = bpf_map_lookup_elem(entries, &res);
	if (!ent)
		return XFW_ACT_DROP;
	*reject = ent->aux;
	return ent->action;
}

/* xfw_src_is_ours reports whether an IPv4 source is one of this host's
 * addresses: fib_validate_source calls such a packet from outside a martian
 * (accept_local off), in both the local and the forwarding path. */
static __always_inline int xfw_src_is_ours(struct xfw_pkt *p)
{
	return p->fam == 0 && xfw_local_type(0, 0, p->src_lo) == XFW_RTN_LOCAL;
}

/* IPv4 address classes (host order), as ip_route_input_slow tests them. */
#define XFW_V4_MULTICAST(a) (((a) & 0xf0000000) == 0xe0000000)
#define XFW_V4_LOCAL_MC(a) (((a) & 0xffffff00) == 0xe0000000) /* 224.0.0.0/24 */
#define XFW_V4_LBCAST(a) ((a) == 0xffffffff)
/* ipv4_is_zeronet: 0.0.0.0 only since Linux 5.3 (0.0.0.0/8 is usable
 * unicast; found by the differential test, internal/difftest). */
#define XFW_V4_ZERONET(a) ((a) == 0)
#define XFW_V4_LOOPBACK(a) (((a) & 0xff000000) == 0x7f000000)

/* IPv6 address classes of the high half, as ip6_rcv_core and ip6_forward
 * test them. */
#define XFW_V6_MULTICAST(hi) (((hi) >> 56) == 0xff)
#define XFW_V6_MC_SCOPE(hi) (((hi) >> 48) & 0xf)
#define XFW_V6_LINKLOCAL(hi) (((hi) >> 54) == (0xfe80ULL >> 6))

/* xfw_v6_loopback reports whether (hi, lo) is ::1. */
static __always_inline int xfw_v6_loopback(__u64 hi, __u64 lo)
{
	return hi == 0 && lo == 1;
}

/* xfw_martian applies, to a packet received on another device than
 * loopback, the checks the kernel makes before any chain: ip6_rcv_core
 * (IPv6) and ip_route_input_slow with ip_route_input_mc (IPv4), with the
 * default sysctls (route_localnet, accept_local off). It returns 1 when
 * the kernel drops the packet there, 2 for IPv4's limited broadcast (local
 * delivery without a route lookup), 0 otherwise. Multicast destinations
 * are taken as joined: README, "Known differences". */
static __always_inline int xfw_martian(struct xfw_pkt *p)
{
	if (p->fam == 0) {
		__u32 s = (__u32)p->src_lo, d = (__u32)p->dst_lo;

		if (XFW_V4_MULTICAST(s) || XFW_V4_LBCAST(s))
			return 1;
		if (XFW_V4_LBCAST(d) || (s == 0 && d == 0))
			return s != 0 && xfw_src_is_ours(p) ? 1 : 2;
		if (XFW_V4_MULTICAST(d)) {
			/* ip_mc_validate_source */
			if (XFW_V4_LOOPBACK(s))
				return 1;
			if (XFW_V4_ZERONET(s))
				return !XFW_V4_LOCAL_MC(d) && p->proto != IPPROTO_IGMP;
			return xfw_src_is_ours(p);
		}
		if (XFW_V4_ZERONET(s) || XFW_V4_ZERONET(d) || XFW_V4_LOOPBACK(d) || XFW_V4_LOOPBACK(s))
			return 1;
		return 0;
	}
	if (XFW_V6_MULTICAST(p->src_hi))
		return 1;
	if (xfw_v6_loopback(p->src_hi, p->src_lo) || xfw_v6_loopback(p->dst_hi, p->dst_lo))
		return 1;
	/* Multicast scopes 0 (reserved) and 1 (interface-local). */
	if (XFW_V6_MULTICAST(p->dst_hi) && XFW_V6_MC_SCOPE(p->dst_hi) <= 1)
		return 1;
	return 0;
}

/* xfw_forward_dropped reports whether ip_forward / ip6_forward drop a
 * packet routed on before the FORWARD hook (besides TTL, MTU and the route
 * itself): a frame not addressed to this host's MAC (PACKET_BROADCAST,
 * PACKET_MULTICAST), an IPv4 source of this host (martian), an IPv6 source
 * that is unspecified, multicast, loopback or link-local. */
static __always_inline int xfw_forward_dropped(struct xfw_pkt *p)
{
	if (!p->dst_unicast)
		return 1;
	if (p->fam == 0)
		return xfw_src_is_ours(p);
	if (p->src_hi == 0 && p->src_lo == 0)
		return 1;
	return XFW_V6_LINKLOCAL(p->src_hi);
}

/* xfw_route decides INPUT or FORWARD for a packet received on iif, as the
 * kernel's routing would. Returns XFW_ROUTE_PASS to pass the packet
 * unjudged (netfilter never sees it: martians, no route, dropped before
 * the FORWARD hook), else chain << 32 | output ifindex. A global function,
 * so its stack (the FIB request) is not live while classification runs. */
#define XFW_ROUTE_PASS (~0ULL)
__attribute__((noinline)) __u64 xfw_route(struct xdp_md *ctx, struct xfw_pkt *p, __u32 iif)
{
	struct bpf_fib_lookup fib = {};
	int rc, lo = iif == XFW_LOOPBACK_IFINDEX;
	__u8 type;

	if (!p)
		return XFW_ROUTE_PASS;

	/* Loopback traffic was routed when it was sent; the kernel checks no
	 * martians on it. */
	if (!lo) {
		switch (xfw_martian(p)) {
		case 1:
			return XFW_ROUTE_PASS;
		case 2:
			return (__u64)XFW_CHAIN_INPUT << 32;
		}
	}
	fib.ifindex = iif;
	fib.l4_protocol = p->proto < 256 ? p->proto : 0;
	if (p->sport < 65536) {
		fib.sport = bpf_htons(p->sport);
		fib.dport = bpf_htons(p->dport);
	}
	if (p->fam == 0) {
		fib.family = AF_INET;
		fib.tos = p->tos;
		fib.ipv4_src = bpf_htonl((__u32)p->src_lo);
		fib.ipv4_dst = bpf_htonl((__u32)p->dst_lo);
		/* ip_forward answers "fragmentation needed" before the FORWARD
		 * hook only for DF packets; others are fragmented after it. */
		if (p->df)
			fib.tot_len = p->l3len;
		/* Multicast is delivered by ip_route_input_mc, without a route
		 * lookup (the group taken as joined). */
		if (XFW_V4_MULTICAST((__u32)p->dst_lo))
			return (__u64)XFW_CHAIN_INPUT << 32;
	} else {
		fib.family = AF_INET6;
		fib.flowinfo = 0;
		fib.ipv6_src[0] = bpf_htonl(p->src_hi >> 32);
		fib.ipv6_src[1] = bpf_htonl((__u32)p->src_hi);
		fib.ipv6_src[2] = bpf_htonl(p->src_lo >> 32);
		fib.ipv6_src[3] = bpf_htonl((__u32)p->src_lo);
		fib.ipv6_dst[0] = bpf_htonl(p->dst_hi >> 32);
		fib.ipv6_dst[1] = bpf_htonl((__u32)p->dst_hi);
		fib.ipv6_dst[2] = bpf_htonl(p->dst_lo >> 32);
		fib.ipv6_dst[3] = bpf_htonl((__u32)p->dst_lo);
		fib.tot_len = p->l3len;
	}
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	/* An IPv6 link-local destination: the kernel's input route lookup is
	 * strict to the interface the packet came in on (rt6_need_strict),
	 * bpf_fib_lookup's is not. Unless it is this host's own address, a
	 * destination in fe80::/64 (the route every IPv6 interface has) is
	 * forwarded back out of that interface, and ip6_forward skips its
	 * source checks for such a hairpin; the rest of fe80::/10 has no route
	 * (found by the differential test, internal/difftest). */
	if (p->fam == 1 && !lo && XFW_V6_LINKLOCAL(p->dst_hi) && rc != BPF_FIB_LKUP_RET_FWD_DISABLED) {
		if (p->dst_hi != 0xfe80000000000000ULL)
			return xfw_local_type(p->fam, p->dst_hi, p->dst_lo) ?
				(__u64)XFW_CHAIN_INPUT << 32 : XFW_ROUTE_PASS;
		if (xfw_local_type(p->fam, p->dst_hi, p->dst_lo))
			return (__u64)XFW_CHAIN_INPUT << 32;
		if (p->ttl <= 1 || !p->dst_unicast)
			return XFW_ROUTE_PASS;
		return (__u64)XFW_CHAIN_FORWARD << 32 | iif;
	}
	switch (rc) {
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		/* Not forwarded: for this host (a local, broadcast, anycast or
		 * multicast route of the local table) or for nobody (no route:
		 * the kernel answers "unreachable" without a chain). With
		 * forwarding off, bpf_fib_lookup does not look at all. */
		if (lo)
			return (__u64)XFW_CHAIN_INPUT << 32;
		type = xfw_local_type(p->fam, p->dst_hi, p->dst_lo);
		if (!type)
			return XFW_ROUTE_PASS;
		if ((type == XFW_RTN_LOCAL || type == XFW_RTN_BROADCAST) && xfw_src_is_ours(p))
			return XFW_ROUTE_PASS;
		return (__u64)XFW_CHAIN_INPUT << 32;
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		/* ip_forward / ip6_forward send "time exceeded" before the
		 * FORWARD hook, and drop what they refuse to forward. */
		if (p->ttl <= 1 || xfw_forward_dropped(p))
			return XFW_ROUTE_PASS;
		return (__u64)XFW_CHAIN_FORWARD << 32 | fib.ifindex;
	}
	return XFW_ROUTE_PASS;
}

/* xfw_ipv4_opts_ok reports whether the stack keeps the received IPv4
 * packet whose header starts l3_off bytes into the frame, as far as its
 * options go (ip_rcv_options drops some before any chain; see
 * xfw_ipv4_opt_step). A global function with its own stack for the copy
 * of the options. */
#define XFW_MAX_L3_OFF 64 /* Ethernet and a VLAN tag take 18 bytes */
__attribute__((noinline)) int xfw_ipv4_opts_ok(struct xdp_md *ctx, __u32 l3_off)
{
	struct xfw_opts o = {};
	struct iphdr ip;
	__u32 n;

	if (!ctx || l3_off > XFW_MAX_L3_OFF)
		return 1;
	if (bpf_xdp_load_bytes(ctx, l3_off, &ip, sizeof(ip)) < 0)
		return 1;
	n = ip.ihl * 4;
	if (n <= sizeof(ip))
		return 1;
	n -= sizeof(ip);
	if (n > XFW_IPOPT_MAX)
		return 1;
	if (bpf_xdp_load_bytes(ctx, l3_off + sizeof(ip), o.b, n) < 0)
		return 1; /* shorter than its header: the stack drops it anyway */
	o.len = n;
	bpf_loop(XFW_IPOPT_MAX, xfw_ipv4_opt_step, &o, 0);
	return !o.bad;
}

/* xfw_ipv6_hbh_ok reports whether ip6_rcv_core keeps the received IPv6
 * packet whose header starts l3_off bytes into the frame, l3len bytes long,
 * as far as a hop-by-hop header goes (ipv6_parse_hopopts: the header must
 * be there whole, at least 8 bytes, and its options valid, see
 * xfw_ipv6_tlv_step; the options of a header longer than XFW_HBH_MAX are
 * not checked). A global function with its own stack for the copy. */
__attribute__((noinline)) int xfw_ipv6_hbh_ok(struct xdp_md *ctx, __u32 l3_off, __u32 l3len)
{
	struct xfw_tlv t = {};
	struct ipv6hdr ip6;
	__u8 h[2];
	__u32 k, n;

	if (!ctx || l3_off > XFW_MAX_L3_OFF)
		return 1;
	if (bpf_xdp_load_bytes(ctx, l3_off, &ip6, sizeof(ip6)) < 0 || ip6.nexthdr != XFW_NH_HOP)
		return 1;
	/* pskb_may_pull(40 + 8) and (40 + the header's length). */
	if (l3len < sizeof(ip6) + 8 || bpf_xdp_load_bytes(ctx, l3_off + sizeof(ip6), h, 2) < 0)
		return 0;
	k = h[1];
	if (l3len < sizeof(ip6) + (k + 1) * 8)
		return 0;
	if (k >= XFW_HBH_MAX / 8)
		return 1;
	/* The bound in the very register the helper gets. */
	xfw_barrier_var(k);
	k &= XFW_HBH_MAX / 8 - 1;
	n = (k + 1) * 8;
	if (bpf_xdp_load_bytes(ctx, l3_off + sizeof(ip6), t.b, n) < 0)
		return 1;
	t.end = n;
	t.off = 2;
	bpf_loop(XFW_HBH_MAX, xfw_ipv6_tlv_step, &t, 0);
	return !t.bad;
}

/* xfw_xdp_judged is the XDP hook's work; xfw_xdp brackets it for
 * quiescence (classify.h). */
static __always_inline int xfw_xdp_judged(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct xfw_ifinfo *ifi;
	struct xfw_ct_scratch *cs = 0;
	struct xfw_xdp_scratch *sc;
	struct xfw_pkt *p;
	struct xfw_pending *st;
	__u32 zero = 0;
	__u32 chain, iif, oif = 0, rj = 0, verdict;
	int rc;
	__u64 key, route;

	xfw_touch_state();
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &zero);
	if (!sc)
		return XDP_PASS;
	p = &sc->p;
	st = &sc->st;
	if (xfw_parse(p, data, data_end, (__u32)(data_end - data), 1) != XFW_PARSE_JUDGE)
		return XDP_PASS;
	st->slot = xfw_active_slot(p->fam ? 1 : 0);
	if (st->slot == XFW_NO_SLOT)
		return XDP_PASS;
	/* Options the stack refuses: dropped before any chain. */
	if (p->fam == 0 && !xfw_ipv4_opts_ok(ctx, p->l3_off))
		return XDP_PASS;
	if (p->fam == 1 && !xfw_ipv6_hbh_ok(ctx, p->l3_off, p->l3len))
		return XDP_PASS;
	key = (__u64)ctx->ingress_ifindex | ((__u64)p->vlan << 32);
	ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	if (!ifi)
		return XDP_PASS; /* a VLAN with no device: the stack drops it */
	/* Frames for another host (PACKET_OTHERHOST) never reach IP. */
	if (p->dst_unicast && xfw_mac48(p->dst_mac) != xfw_mac48(ifi->mac))
		return XDP_PASS;
	iif = ifi->ifindex;
	/* mac_mt matches nothing on a device that is not Ethernet. */
	if (iif == XFW_LOOPBACK_IFINDEX)
		p->mac_src = XFW_MAC_NONE;
	route = xfw_route(ctx, p, iif);
	if (route == XFW_ROUTE_PASS)
		return XDP_PASS;
	chain = route >> 32;
	oif = (__u32)route;
	/* ip_forward and ip6_forward decrement the TTL / hop limit before
	 * the FORWARD hook: -m ttl / -m hl see the decremented value. */
	if (chain == XFW_CHAIN_FORWARD)
		p->ttl -= 1;
	/* ip_local_deliver reassembles IPv4 before the INPUT hook: INPUT sees
	 * whole datagrams. The first fragment stands for its datagram (its
	 * verdict decides whether reassembly can complete); later fragments
	 * are left to the kernel, unjudged. IPv6 reassembles after INPUT. */
	if (chain == XFW_CHAIN_INPUT && p->fam == 0 && p->fragmented) {
		if (p->frag)
			return XDP_PASS;
	}
	if (xfw_ct_active(st->slot)) {
		/* Connection tracking reassembles (nf_defrag) before any
		 * chain, in both families and both paths: the first fragment
		 * stands for its datagram, later ones go on unjudged. */
		if (p->frag)
			return XDP_PASS;
		cs = xfw_ct_scratch_get(0);
		if (cs) {
			xfw_ct_load_xdp(ctx, p, cs);
			p->ct = xfw_ct_track(p, cs, iif == XFW_LOOPBACK_IFINDEX ? XFW_CTM_LO_INPUT
									    : XFW_CTM_TRACK);
		}
	}

	if (cs && xfw_ct_fast(p, st->slot, chain)) {
		st->nlogs = 0;
		verdict = XFW_ACT_ACCEPT;
	} else {
		verdict = xfw_judge(p, chain, iif, oif, st, &rj);
	}
	if (verdict == XFW_ACT_ACCEPT && cs)
		xfw_ct_confirm(cs);
	/* The REJECT type waits in p, not in a register spilled across the
	 * LOG calls: the stack has no slot to spare. */
	p->reject = rj;
	if (st->nlogs)
		xfw_emit_logs_xdp(ctx, p, st, chain, iif, oif);
	switch (verdict) {
	case XFW_ACT_ACCEPT:
		return XDP_PASS;
	case XFW_ACT_REJECT:
		rc = xfw_xdp_reject(ctx, p, chain);
		/* A reset sent for a packet without a connection is tracked. */
		if (cs && rc != XDP_DROP && (p->ct & 7) == XFW_CTS_INVALID &&
		    p->proto == IPPROTO_TCP)
			xfw_ct_track_rst(p, cs);
		return rc;
	}
	return XDP_DROP;
}

SEC("xdp")
int xfw_xdp(struct xdp_md *ctx)
{
	struct xfw_inflight *f = xfw_enter();
	int rc = xfw_xdp_judged(ctx);

	xfw_leave(f);
	return rc;
}

/* Bytes of headers made linear before parsing on egress: Ethernet, a VLAN
 * tag, IPv6 with extension headers and a TCP header fit. */
#define XFW_TC_PULL 256

/* xfw_tc_reparse parses the skb again into p (REJECT's reply, built in
 * place). A global function: its stack is gone before classifying. */
__attribute__((noinline)) int xfw_tc_reparse(struct __sk_buff *skb, struct xfw_pkt *p)
{
	void *data, *data_end;
	__u32 pull;

	if (!skb || !p)
		return XFW_PARSE_PASS;
	pull = skb->len < XFW_TC_PULL ? skb->len : XFW_TC_PULL;
	bpf_skb_pull_data(skb, pull);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	return xfw_parse(p, data, data_end, skb->len, 0);
}

/* xfw_tc_reply_judge judges, in OUTPUT, REJECT's reply for the host itself
 * that xfw_tc_reject left in the skb (the kernel's reply passes OUTPUT,
 * leaving by lo, where rules count, log and may drop it). p and st are the
 * caller's, reused; the caller emits the LOG lines. A global function: the
 * second parse and judgement are verified once, on their own. */
__attribute__((noinline)) int xfw_tc_reply_judge(struct __sk_buff *skb, struct xfw_pkt *p,
						 struct xfw_pending *st, struct xfw_ct_scratch *cs)
{
	__u32 rj = 0, verdict;

	if (!skb || !p || !st)
		return XFW_ACT_DROP;
	st->nlogs = 0;
	if (xfw_tc_reparse(skb, p) != XFW_PARSE_JUDGE)
		return XFW_ACT_DROP;
	st->slot = xfw_active_slot(p->fam ? 1 : 0);
	if (st->slot == XFW_NO_SLOT)
		return XFW_ACT_ACCEPT;
	/* cs is set when the offending packet was tracked. */
	if (cs)
		xfw_ct_reply(skb, p, cs);
	verdict = xfw_judge(p, XFW_CHAIN_OUTPUT, 0, XFW_LOOPBACK_IFINDEX, st, &rj);
	if (verdict == XFW_ACT_ACCEPT && cs)
		xfw_ct_confirm_out(p, cs, skb->ifindex);
	return verdict;
}

/* xfw_tc_stack_icmp reports whether skb comes from the stack's own ICMP
 * or ICMPv6 socket (icmp_send, icmp6_send: a raw socket of that protocol)
 * rather than from a process's raw socket writing whole packets. */
static __always_inline __u32 xfw_tc_stack_icmp(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;

	if (!sk)
		return 0;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 0;
	return sk->type == XFW_SOCK_RAW &&
	       (sk->protocol == IPPROTO_ICMP || sk->protocol == IPPROTO_ICMPV6);
}

/* xfw_tc_judged is the TC hook's work; xfw_tc_egress brackets it for
 * quiescence (classify.h). */
static __always_inline int xfw_tc_judged(struct __sk_buff *skb)
{
	void *data, *data_end;
	struct xfw_xdp_scratch *sc;
	struct xfw_pkt *p;
	struct xfw_pending *st;
	struct xfw_ct_scratch *cs = 0;
	__u32 one = 1;
	__u32 oif, rj = 0, verdict, pull;
	int rc;

	xfw_touch_state();
	/* The packet facts live in this CPU's scratch (entry 1, TC's): on
	 * the stack they would push the deepest call chain past 512 bytes. */
	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &one);
	if (!sc)
		return TC_ACT_OK;
	p = &sc->p;
	st = &sc->st;
	/* Forwarded packets were judged at ingress (FORWARD). */
	if (skb->ingress_ifindex != 0)
		return TC_ACT_OK;
	/* A VLAN device's traffic was judged on the VLAN device itself. */
	if (skb->vlan_present)
		return TC_ACT_OK;
	pull = skb->len < XFW_TC_PULL ? skb->len : XFW_TC_PULL;
	bpf_skb_pull_data(skb, pull);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	if (xfw_parse(p, data, data_end, skb->len, 0) != XFW_PARSE_JUDGE)
		return TC_ACT_OK;
	if (p->vlan)
		return TC_ACT_OK;
	/* The stack fragments after the OUTPUT hook (ip_finish_output,
	 * ip6_finish_output): OUTPUT saw the whole datagram. Judge the first
	 * fragment for it; later ones go out unjudged (without the first the
	 * datagram cannot be reassembled anyway). */
	if (p->fragmented && p->frag)
		return TC_ACT_OK;
	st->slot = xfw_active_slot(p->fam ? 1 : 0);
	if (st->slot == XFW_NO_SLOT)
		return TC_ACT_OK;
	oif = skb->ifindex;
	if (xfw_ct_active(st->slot)) {
		cs = xfw_ct_scratch_get(1);
		if (cs) {
			xfw_ct_load_tc(skb, p, cs);
			cs->stack_icmp = xfw_tc_stack_icmp(skb);
			p->ct = xfw_ct_track(p, cs, XFW_CTM_TRACK);
		}
	}

	if (cs && xfw_ct_fast(p, st->slot, XFW_CHAIN_OUTPUT)) {
		st->nlogs = 0;
		verdict = XFW_ACT_ACCEPT;
	} else {
		verdict = xfw_judge(p, XFW_CHAIN_OUTPUT, 0, oif, st, &rj);
	}
	if (verdict == XFW_ACT_ACCEPT && cs)
		xfw_ct_confirm_out(p, cs, oif);
	if (st->nlogs)
		xfw_emit_logs_tc(skb, p, st, XFW_CHAIN_OUTPUT, 0, oif);
	switch (verdict) {
	case XFW_ACT_ACCEPT:
		return TC_ACT_OK;
	case XFW_ACT_REJECT:
		if (cs)
			xfw_ct_save(cs, p);
		rc = xfw_tc_reject(skb, p, rj);
		if (rc != XFW_RJ_TC_LOCAL)
			return rc;
		verdict = xfw_tc_reply_judge(skb, p, st, cs);
		if (st->nlogs)
			xfw_emit_logs_tc(skb, p, st, XFW_CHAIN_OUTPUT, 0, XFW_LOOPBACK_IFINDEX);
		/* A reply is never answered (no error about an ICMP error
		 * or a RST): REJECT drops it. */
		if (verdict != XFW_ACT_ACCEPT)
			return TC_ACT_SHOT;
		return xfw_rj_tc_deliver(skb);
	}
	return TC_ACT_SHOT;
}

SEC("tc")
int xfw_tc_egress(struct __sk_buff *skb)
{
	struct xfw_inflight *f = xfw_enter();
	int rc = xfw_tc_judged(skb);

	xfw_leave(f);
	return rc;
}

#include "ct_clock.h"

char _license[] SEC("license") = "GPL";
