/* SPDX-License-Identifier: GPL-2.0 */
/*
 * frag.h — later fragments (IPv4 fragment offset > 0, IPv6 fragment
 * header offset > 0) where the kernel's chains judge their datagram rather
 * than each fragment:
 *  - with connection tracking, nf_defrag reassembles before any chain, at
 *    PREROUTING and at OUTPUT (ipv4_defrag_ops, nf_ct_frag6_gather): xfw
 *    judges the first fragment for its datagram and records the verdict
 *    here; a later fragment follows it, and one whose first fragment was
 *    not seen is dropped (the kernel holds it until its reassembly times
 *    out, and never delivers it alone), but for an IPv6 one the kernel
 *    refuses to queue (XFW_FRAG_ALONE: judged alone, as it passes it);
 *  - in OUTPUT without connection tracking, the stack fragments a
 *    datagram after the hook (ip_finish_output, ip6_finish_output): the
 *    later fragments of a datagram whose first fragment passed pass, those
 *    of one it dropped are dropped. A socket that writes its own IP
 *    headers (SOCK_RAW, IPPROTO_RAW: raw_send_hdrinc and rawv6_send_hdrinc
 *    refuse more than the MTU, so the stack never fragments for it) sends
 *    fragments that OUTPUT judges one by one, as xfw then does.
 * Without connection tracking, INPUT and FORWARD need nothing here: IPv4
 * INPUT is reassembled by the stack after XDP passed the later fragments
 * (the first one's verdict decides), and FORWARD and IPv6 INPUT judge each
 * fragment.
 *
 * Conventions:
 *  - A datagram is known, as ip_defrag and nf_ct_frag6_gather key their
 *    queues, by its addresses, its identification and (IPv4) protocol;
 *    xfw_frag_dg is an LRU hash of the verdicts of first fragments seen
 *    (XFW_FRAG_DATAGRAMS of them: the kernel's reassembly memory,
 *    ipfrag_high_thresh, holds a few thousand small datagrams).
 *  - A first fragment arriving after its later ones (reordering) cannot be
 *    waited for: the later ones were dropped (docs/differences.md).
 *  - The global functions are per program type (verified once each); the
 *    key lives on their stack (40 bytes), called from the hooks' top
 *    level, never from the walk.
 *
 * Includes: common.h, parse.h.
 */
#ifndef XFW_FRAG_H
#define XFW_FRAG_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"

/* First fragments whose verdict is remembered at once. */
#define XFW_FRAG_DATAGRAMS 4096
/* A datagram's verdict (xfw_frag_dg's value); 0: no record. */
#define XFW_FRAG_DG_PASS 1
#define XFW_FRAG_DG_DROP 2
/* xfw_frag_later_tc's answer when the fragment is judged by the rules. */
#define XFW_FRAG_JUDGE (-1)
/* Where IPv4's identification and an IPv6 fragment header's lie. */
#define XFW_FRAG_ID4_OFF 4
#define XFW_FRAG_ID6_OFF 4
/* A socket writing whole IP packets (SOCK_RAW with IPPROTO_RAW). */
#define XFW_FRAG_SOCK_RAW 3
#define XFW_FRAG_IPPROTO_RAW 255

/* xfw_frag_follows reports whether p is a later fragment that follows
 * its datagram under connection tracking: not one the kernel's reassembly
 * passes on alone (parse.h XFW_FRAG_ALONE). */
static __always_inline int xfw_frag_follows(const struct xfw_pkt *p)
{
	return p->frag && !(p->fragmented & XFW_FRAG_ALONE);
}

struct xfw_frag_key {
	__u64 src_hi, src_lo;
	__u64 dst_hi, dst_lo;
	__u32 id;    /* IPv4 identification (16 bits) or IPv6's (32) */
	__u8 fam;    /* 0 IPv4, 1 IPv6 */
	__u8 proto;  /* IPv4 protocol; 0 in IPv6 */
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_frag_key);
	__type(value, __u32);
	__uint(max_entries, XFW_FRAG_DATAGRAMS);
} xfw_frag_dg SEC(".maps");

/* xfw_frag_hdr6 finds the fragment header of IPv6 fragment p, walking the
 * chain as parse.h did (at most XFW_MAX_EXTHDRS headers); 0 when none. A
 * walk of its own rather than an offset the parser keeps: a store in the
 * parser's unrolled walk costs the verifier more than this loop, which
 * runs for fragments only. */
static __always_inline __u32 xfw_frag_hdr6(void *ctx, int is_xdp, const struct xfw_pkt *p)
{
	__u32 off = p->l3_off + sizeof(struct ipv6hdr);
	__u8 h[2], nh;

	if (xfw_load_bytes(ctx, is_xdp, p->l3_off + 6, &nh, 1) < 0) /* ipv6hdr.nexthdr */
		return 0;
	for (int i = 0; i < XFW_MAX_EXTHDRS; i++) {
		if (nh == XFW_NH_FRAGMENT)
			return off;
		if (!xfw_ipv6_is_ext(nh) || off + 2 > p->l4_end ||
		    xfw_load_bytes(ctx, is_xdp, off, h, 2) < 0)
			return 0;
		off += nh == XFW_NH_AUTH ? ((__u32)h[1] + 2) * 4 : ((__u32)h[1] + 1) * 8;
		nh = h[0];
	}
	return 0;
}

/* xfw_frag_key_of fills k for fragment p; -1 when its identification
 * cannot be read. */
static __always_inline int xfw_frag_key_of(void *ctx, int is_xdp, const struct xfw_pkt *p,
					   struct xfw_frag_key *k)
{
	__u32 id = 0, off;

	__builtin_memset(k, 0, sizeof(*k));
	k->src_hi = p->src_hi;
	k->src_lo = p->src_lo;
	k->dst_hi = p->dst_hi;
	k->dst_lo = p->dst_lo;
	k->fam = p->fam;
	if (p->fam == 0) {
		if (xfw_load_bytes(ctx, is_xdp, p->l3_off + XFW_FRAG_ID4_OFF, &id, 2) < 0)
			return -1;
		k->proto = (__u8)p->proto;
	} else {
		off = xfw_frag_hdr6(ctx, is_xdp, p);
		if (!off || xfw_load_bytes(ctx, is_xdp, off + XFW_FRAG_ID6_OFF, &id, 4) < 0)
			return -1;
	}
	k->id = id;
	return 0;
}

/* xfw_frag_note records the verdict of first fragment p (pass: it goes
 * on). */
static __always_inline void xfw_frag_note(void *ctx, int is_xdp, const struct xfw_pkt *p, __u32 pass)
{
	struct xfw_frag_key k;
	__u32 v = pass ? XFW_FRAG_DG_PASS : XFW_FRAG_DG_DROP;

	if (xfw_frag_key_of(ctx, is_xdp, p, &k) == 0)
		bpf_map_update_elem(&xfw_frag_dg, &k, &v, BPF_ANY);
}

/* xfw_frag_seen returns the recorded verdict of later fragment p's
 * datagram, 0 when none. */
static __always_inline __u32 xfw_frag_seen(void *ctx, int is_xdp, const struct xfw_pkt *p)
{
	struct xfw_frag_key k;
	__u32 *v;

	if (xfw_frag_key_of(ctx, is_xdp, p, &k) < 0)
		return 0;
	v = bpf_map_lookup_elem(&xfw_frag_dg, &k);
	return v ? *v : 0;
}

/* xfw_sk_kind returns skb's socket as XFW_SK_KIND(type, protocol), 0
 * when it has no full socket. */
#define XFW_SK_KIND(type, proto) ((__u32)(type) << 16 | (__u32)(proto))
static __always_inline __u32 xfw_sk_kind(struct __sk_buff *skb)
{
	struct bpf_sock *sk = skb->sk;

	if (!sk)
		return 0;
	sk = bpf_sk_fullsock(sk);
	if (!sk)
		return 0;
	return XFW_SK_KIND(sk->type, sk->protocol);
}

/* xfw_frag_hdrincl reports whether skb comes from a socket writing whole
 * IP packets (OUTPUT judged it as it is; the stack never fragments it). */
static __always_inline int xfw_frag_hdrincl(struct __sk_buff *skb)
{
	return xfw_sk_kind(skb) == XFW_SK_KIND(XFW_FRAG_SOCK_RAW, XFW_FRAG_IPPROTO_RAW);
}

/* xfw_frag_later_xdp decides a later fragment at ingress while connection
 * tracking is active: XDP_PASS when its datagram's first fragment passed,
 * else XDP_DROP. */
__attribute__((noinline)) int xfw_frag_later_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	if (!ctx || !p)
		return XDP_DROP;
	return xfw_frag_seen(ctx, 1, p) == XFW_FRAG_DG_PASS ? XDP_PASS : XDP_DROP;
}

/* xfw_frag_note_xdp records p's verdict at ingress when p is a first
 * fragment. */
__attribute__((noinline)) int xfw_frag_note_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 verdict)
{
	if (ctx && p && p->fragmented && !p->frag)
		xfw_frag_note(ctx, 1, p, verdict == XFW_ACT_ACCEPT);
	return 0;
}

/* xfw_frag_later_tc decides a later fragment in OUTPUT (ct: connection
 * tracking is active): TC_ACT_OK or TC_ACT_SHOT by its datagram's
 * verdict, or XFW_FRAG_JUDGE when the rules judge it on its own (a socket
 * writing whole packets without connection tracking; a datagram not seen,
 * without connection tracking: fail closed). */
__attribute__((noinline)) int xfw_frag_later_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 ct)
{
	__u32 v;

	if (!skb || !p)
		return TC_ACT_SHOT;
	if (!ct && xfw_frag_hdrincl(skb))
		return XFW_FRAG_JUDGE;
	v = xfw_frag_seen(skb, 0, p);
	if (v == XFW_FRAG_DG_PASS)
		return TC_ACT_OK;
	if (v == XFW_FRAG_DG_DROP || ct)
		return TC_ACT_SHOT;
	return XFW_FRAG_JUDGE;
}

/* xfw_frag_note_tc records p's verdict in OUTPUT when p is a first
 * fragment, unless the rules judge its datagram's later fragments on
 * their own (a socket writing whole packets, without connection
 * tracking). */
__attribute__((noinline)) int xfw_frag_note_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 ct,
					       __u32 verdict)
{
	if (!skb || !p || !p->fragmented || p->frag || (!ct && xfw_frag_hdrincl(skb)))
		return 0;
	xfw_frag_note(skb, 0, p, verdict == XFW_ACT_ACCEPT);
	return 0;
}

#endif /* XFW_FRAG_H */
