/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_opts.h — the IPv4 options of an ICMP error REJECT sends about a
 * received packet, as the kernel's: the record route and timestamp options
 * of the offending packet, as the input path filled them in, echoed in the
 * error's own header with the entry its output adds.
 *
 * The kernel, for a received packet with options (ip_rcv_options, after
 * PREROUTING, before INPUT and FORWARD): ip_options_compile writes into
 * the packet's own header, at the option's pointer, the address the host
 * would answer from (spec_dst: the destination for a packet to the host,
 * the preferred source of the route back for one it forwards) and/or the
 * time (ms since midnight UTC, inet_current_timestamp), moves the pointer
 * on, or counts an overflow, and leaves the header checksum stale. The
 * chains, and the ICMP error's quote, see that header. icmp_send then
 * echoes the options (__ip_options_echo: record route and timestamp copied
 * as they now are, the pointer moved past the entry the reply will fill;
 * source routes and CIPSO never get this far, xfw_ipv4_opts_ok) and its
 * output fills the entry in (ip_options_build: the reply's source address,
 * the time). The quote shrinks by the options' length (icmp_send's room).
 *
 * The kernel, for a packet it sends itself with options a socket set
 * (IP_OPTIONS: ip_options_get compiles them as for no packet, moving
 * each pointer past the entry the output will fill and noting that in
 * the socket's options; ip_options_build copies them into the header,
 * fills the entries in and keeps the compiled options in the packet's
 * control block, IPCB): icmp_send echoes them the same way from the
 * header as sent, with the control block's offsets and flags. A raw
 * socket's own header (IP_HDRINCL) leaves the control block empty, and
 * its errors carry no options.
 *
 * Conventions: where the options are comes from the XDP hook's check of
 * them (xfw_ipv4_opts_ok: struct xfw_pkt's opt_rr and opt_ts), or, in
 * OUTPUT, from the control block; no option is walked here. The options
 * are copied into the REJECT scratch (struct xfw_rj_opt4), changed there
 * and written back over the packet (the quote) with bpf_xdp_store_bytes;
 * the echo is built in r->opt for xfw_rj_put_icmp. Offsets are 1 + the
 * option's offset among the options (0: none). Indices into the 64-byte
 * buffers are masked (XFW_RJ_OPT_MASK); copies are fixed windows of
 * XFW_RJ_OPT_MAX bytes, whose excess the next copy or the padding
 * overwrites. Addresses and times are kept in network byte order.
 *
 * Includes: common.h, parse.h (XFW_IPOPT_*), local.h (xfw_addrtype4),
 * reject_structs.h, reject_maps.h, reject_csum.h, reject_rate.h
 * (xfw_rl_cfg: the clock offset).
 */
#ifndef XFW_REJECT_OPTS_H
#define XFW_REJECT_OPTS_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "local.h"
#include "reject_structs.h"
#include "reject_maps.h"
#include "reject_csum.h"
#include "reject_rate.h"

/* Timestamp flags besides parse.h's (linux/ip.h IPOPT_TS_*). */
#define XFW_RJ_TS_TSONLY 0
#define XFW_RJ_TS_FLAGS 0xf /* low nibble of the flags byte */
#define XFW_RJ_TS_OVFL_SHIFT 4 /* high nibble: the overflow count */

/* Option pointers count from 1 and name the next free byte: an entry of 4
 * bytes filled last lies 5 bytes before it (the address of an address and
 * time pair 9), as ip_options_build writes them. */
#define XFW_RJ_OPT_LAST4 5
#define XFW_RJ_OPT_LAST8 9

#define XFW_RJ_NS_PER_MS 1000000ULL
#define XFW_RJ_MS_PER_DAY 86400000ULL

/* What the input path did to the options (ip_options: rr_needaddr,
 * ts_needaddr, ts_needtime). */
#define XFW_RJO_RR_ADDR 1
#define XFW_RJO_TS_ADDR 2
#define XFW_RJO_TS_TIME 4

/* xfw_rj_now_ms is inet_current_timestamp: ms since midnight UTC, in
 * network byte order. The data plane reads CLOCK_TAI; the control plane
 * stores CLOCK_TAI - CLOCK_REALTIME at each sync (xfw_rl_cfg.tai_off). */
static __always_inline __u32 xfw_rj_now_ms(void)
{
	__u32 zero = 0;
	struct xfw_rl_cfg *c = bpf_map_lookup_elem(&xfw_rl_cfg, &zero);
	__u64 ns = bpf_ktime_get_tai_ns() - (c ? c->tai_off : 0);

	return bpf_htonl((__u32)((ns / XFW_RJ_NS_PER_MS) % XFW_RJ_MS_PER_DAY));
}

/* xfw_rj_put4 stores the 4 bytes of v (as in memory) at b[off]. */
static __always_inline void xfw_rj_put4(__u8 *b, __u32 off, __u32 v)
{
	const __u8 *s = (const __u8 *)&v;

	for (int i = 0; i < 4; i++)
		b[(off + i) & XFW_RJ_OPT_MASK] = s[i];
}

/* xfw_rj_get4 loads the 4 bytes at b[off] (as in memory). */
static __always_inline __u32 xfw_rj_get4(const __u8 *b, __u32 off)
{
	__u32 v;
	__u8 *d = (__u8 *)&v;

	for (int i = 0; i < 4; i++)
		d[i] = b[(off + i) & XFW_RJ_OPT_MASK];
	return v;
}

/* xfw_rj_unicast4 reports whether inet_addr_type calls a (network byte
 * order) RTN_UNICAST: not one of the host's, not broadcast or multicast. */
static __always_inline int xfw_rj_unicast4(__u32 a)
{
	return (xfw_addrtype4(bpf_ntohl(a), 0, 0) & XFW_AT_RTN) == XFW_RTN_UNICAST;
}

/* xfw_rj_opt_input does to the options in b what ip_options_compile does
 * to a received packet's: spec is the address the host answers from,
 * now the time. Returns the XFW_RJO_* bits. */
static __always_inline __u32 xfw_rj_opt_input(__u8 *b, __u32 rr, __u32 ts, __u32 spec, __u32 now)
{
	__u32 need = 0, len, ptr, fl;

	if (rr) {
		rr -= 1;
		len = b[(rr + 1) & XFW_RJ_OPT_MASK];
		ptr = b[(rr + 2) & XFW_RJ_OPT_MASK];
		if (ptr <= len) {
			xfw_rj_put4(b, rr + ptr - 1, spec);
			b[(rr + 2) & XFW_RJ_OPT_MASK] = ptr + 4;
			need |= XFW_RJO_RR_ADDR;
		}
	}
	if (!ts)
		return need;
	ts -= 1;
	len = b[(ts + 1) & XFW_RJ_OPT_MASK];
	ptr = b[(ts + 2) & XFW_RJ_OPT_MASK];
	fl = b[(ts + 3) & XFW_RJ_OPT_MASK];
	if (ptr > len) {
		/* Full: the overflow count goes up (15 was refused). */
		if ((fl & XFW_RJ_TS_FLAGS) != XFW_IPOPT_TS_PRESPEC)
			b[(ts + 3) & XFW_RJ_OPT_MASK] =
				(fl & XFW_RJ_TS_FLAGS) |
				(((fl >> XFW_RJ_TS_OVFL_SHIFT) + 1) << XFW_RJ_TS_OVFL_SHIFT);
		return need;
	}
	switch (fl & XFW_RJ_TS_FLAGS) {
	case XFW_RJ_TS_TSONLY:
		xfw_rj_put4(b, ts + ptr - 1, now);
		b[(ts + 2) & XFW_RJ_OPT_MASK] = ptr + 4;
		need |= XFW_RJO_TS_TIME;
		break;
	case XFW_IPOPT_TS_TSANDADDR:
		xfw_rj_put4(b, ts + ptr - 1, spec);
		xfw_rj_put4(b, ts + ptr + 3, now);
		b[(ts + 2) & XFW_RJ_OPT_MASK] = ptr + 8;
		need |= XFW_RJO_TS_ADDR | XFW_RJO_TS_TIME;
		break;
	case XFW_IPOPT_TS_PRESPEC:
		/* Stamped only where the listed address is the host's. */
		if (xfw_rj_unicast4(xfw_rj_get4(b, ts + ptr - 1)))
			break;
		xfw_rj_put4(b, ts + ptr + 3, now);
		b[(ts + 2) & XFW_RJ_OPT_MASK] = ptr + 8;
		need |= XFW_RJO_TS_TIME;
		break;
	}
	return need;
}

/* xfw_rj_opt_copy copies the XFW_RJ_OPT_MAX bytes at sc->o.b[s] to
 * sc->r.opt[d]. A global function, as xfw_rj_opt_pad: the unrolled byte
 * loops were verified again for every path of the echo reaching them. */
__attribute__((noinline)) int xfw_rj_opt_copy(struct xfw_rj_scratch *sc, __u32 d, __u32 s)
{
	if (!sc)
		return 0;
	for (int i = 0; i < XFW_RJ_OPT_MAX; i++)
		sc->r.opt[(d + i) & XFW_RJ_OPT_MASK] = sc->o.b[(s + i) & XFW_RJ_OPT_MASK];
	return 0;
}

/* xfw_rj_opt_pad clears sc->r.opt from end on (IPOPT_END). */
__attribute__((noinline)) int xfw_rj_opt_pad(struct xfw_rj_scratch *sc, __u32 end)
{
	if (!sc)
		return 0;
	for (__u32 i = 0; i < XFW_RJ_OPT_MAX; i++)
		sc->r.opt[i] &= (__u8)(0 - ((i - end) >> 31)); /* 0 from end on (END) */
	return 0;
}

/* xfw_rj_opt_echo builds in sc->r.opt (e) the options of the reply, as
 * __ip_options_echo and then ip_options_build do, from the options in sc->o.b (b)
 * as the input path left them (need: what it did); saddr is the reply's
 * source. Returns their length (padded to 4 bytes), or -1 where the kernel
 * sends no error (__ip_options_echo's -EINVAL). */
static __always_inline int xfw_rj_opt_echo(struct xfw_rj_scratch *sc, __u32 rr, __u32 ts,
					   __u32 need, __u32 now)
{
	__u32 d = 0, ol, so, ets = 0, out = 0, end, saddr = sc->r.saddr[0];
	const __u8 *b = sc->o.b;
	__u8 *e = sc->r.opt;

	if (rr) {
		rr -= 1;
		ol = b[(rr + 1) & XFW_RJ_OPT_MASK];
		so = b[(rr + 2) & XFW_RJ_OPT_MASK];
		xfw_rj_opt_copy(sc, 0, rr);
		if ((need & XFW_RJO_RR_ADDR) && so <= ol) {
			if (so + 3 > ol)
				return -1;
			e[2] = so + 4;
			out |= XFW_RJO_RR_ADDR;
		}
		d = ol;
	}
	if (ts) {
		ts -= 1;
		ol = b[(ts + 1) & XFW_RJ_OPT_MASK];
		so = b[(ts + 2) & XFW_RJ_OPT_MASK];
		if (d > XFW_RJ_OPT_MAX)
			return -1;
		ets = d;
		xfw_rj_opt_copy(sc, d, ts);
		if (so <= ol) {
			if (need & XFW_RJO_TS_ADDR) {
				if (so + 3 > ol)
					return -1;
				out |= XFW_RJO_TS_ADDR;
				so += 4;
			}
			if (need & XFW_RJO_TS_TIME) {
				if (so + 3 > ol)
					return -1;
				if ((e[(d + 3) & XFW_RJ_OPT_MASK] & XFW_RJ_TS_FLAGS) != XFW_IPOPT_TS_PRESPEC) {
					out |= XFW_RJO_TS_TIME;
					so += 4;
				} else if (so + 7 <= ol &&
					   !xfw_rj_unicast4(xfw_rj_get4(e, d + so - 1))) {
					out |= XFW_RJO_TS_TIME;
					so += 8;
				}
			}
			e[(d + 2) & XFW_RJ_OPT_MASK] = so;
		}
		d += ol;
	}
	/* Padded with IPOPT_END to whole words (the copies' excess
	 * cleared). */
	end = d;
	d = (d + 3) & ~3u;
	if (d > XFW_RJ_OPT_MAX)
		return -1;
	xfw_rj_opt_pad(sc, end);
	/* ip_options_build: the entries the reply's output fills in (the
	 * record route option, when there is one, comes first: at 0). */
	if (out & XFW_RJO_RR_ADDR)
		xfw_rj_put4(e, e[2] - XFW_RJ_OPT_LAST4, saddr);
	if (out & XFW_RJO_TS_ADDR)
		xfw_rj_put4(e, ets + e[(ets + 2) & XFW_RJ_OPT_MASK] - XFW_RJ_OPT_LAST8, saddr);
	if (out & XFW_RJO_TS_TIME)
		xfw_rj_put4(e, ets + e[(ets + 2) & XFW_RJ_OPT_MASK] - XFW_RJ_OPT_LAST4, now);
	return d;
}

/* xfw_rj_opt_echo_sc is xfw_rj_opt_echo from scratch sc's options (its
 * o.b) to its reply's (r.opt), the reply's source r.saddr[0]. A global
 * function: inlined, the echo's byte copies were verified again for each
 * path through xfw_rj_opt_input before it. */
__attribute__((noinline)) int xfw_rj_opt_echo_sc(struct xfw_rj_scratch *sc, __u32 rr, __u32 ts,
						 __u32 need, __u32 now)
{
	if (!sc)
		return -1;
	return xfw_rj_opt_echo(sc, rr, ts, need, now);
}

/* xfw_rj_opts4_room shortens the quote of r to the room icmp_send leaves
 * it: 576 bytes less the headers, the echoed options included. */
static __always_inline void xfw_rj_opts4_room(struct xfw_rj *r)
{
	if (r->qlen > XFW_RJ_QUOTE4_MAX - r->optlen)
		r->qlen = XFW_RJ_QUOTE4_MAX - r->optlen;
}

/* xfw_rj_opts4_xdp gives the reply planned in the XDP scratch the
 * options of the offending packet at l3_off in ctx (an IPv4 header with
 * options, whose record route and timestamp options the XDP hook's check
 * found at 1 + rr and 1 + ts among them: struct xfw_pkt's opt_rr and
 * opt_ts, xfw_ipv4_opts_ok): the packet's (the quote's) options as the
 * input path changed them, with what that adds to its header's sum in
 * r->hdelta, and, when echo (an ICMP error), the reply's echo in r->opt,
 * r->optlen, and the quote shortened to fit. r->saddr is the reply's
 * source, the address the input path wrote (spec_dst: the packet's
 * destination in INPUT, the route back's source in FORWARD). Returns 0, or
 * -1 when the kernel sends no error. A global function, verified once. */
__attribute__((noinline)) int xfw_rj_opts4_xdp(struct xdp_md *ctx, __u32 l3_off, __u32 echo,
					       __u32 rr, __u32 ts)
{
	__u32 slot = XFW_RJ_SLOT_XDP, n, need, now;
	struct xfw_rj_scratch *sc;
	struct xfw_rj_opt4 *o;
	struct xfw_rj *r;
	__s64 delta;
	__u8 vihl;
	int d;

	if (!ctx || l3_off > XFW_RJ_OFF_MAX)
		return -1;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return -1;
	r = &sc->r;
	o = &sc->o;
	r->optlen = 0;
	if (!rr && !ts)
		return 0;
	if (bpf_xdp_load_bytes(ctx, l3_off, &vihl, 1) < 0)
		return -1;
	n = (vihl & 0xf) * 4;
	if (n <= XFW_RJ_IP4_HLEN)
		return 0;
	n -= XFW_RJ_IP4_HLEN;
	__builtin_memset(o, 0, sizeof(*o));
	/* n - 1 masked, plus one: a size the verifier knows is 1..64. */
	n = ((n - 1) & XFW_RJ_OPT_MASK) + 1;
	if (n > XFW_RJ_OPT_MAX)
		return -1;
	if (bpf_xdp_load_bytes(ctx, l3_off + XFW_RJ_IP4_HLEN, o->b, n) < 0)
		return -1;
	now = xfw_rj_now_ms();
	__builtin_memcpy(sc->buf, o->b, sizeof(sc->buf));
	need = xfw_rj_opt_input(o->b, rr, ts, r->saddr[0], now);
	n = ((n - 1) & XFW_RJ_OPT_MASK) + 1;
	if (bpf_xdp_store_bytes(ctx, l3_off + XFW_RJ_IP4_HLEN, o->b, n) < 0)
		return -1;
	/* What the changes add to the header's sum (n: whole words). */
	delta = bpf_csum_diff((__be32 *)sc->buf, n, (__be32 *)o->b, n, 0);
	if (delta < 0)
		return -1;
	r->hdelta = xfw_csum_fold((__u32)delta);
	if (!echo)
		return 0;
	d = xfw_rj_opt_echo_sc(sc, rr, ts, need, now);
	if (d < 0)
		return -1;
	r->optlen = d;
	xfw_rj_opts4_room(r);
	return 0;
}

/* The fields of the IPv4 control block (struct inet_skb_parm, IPCB) the
 * TC program sees: __sk_buff's cb[] is skb->cb from byte 8 on
 * (qdisc_skb_cb's data), and the control block's struct ip_options
 * starts at byte 4 (after iif): cb[1] holds its optlen, srr, rr and ts
 * bytes (offsets from the IPv4 header's start, 0 for none), cb[2]'s
 * first byte its flag bits. Nothing between ip_options_build and the
 * device's TC egress hook writes them. */
#define XFW_RJ_IPCB_OPTS 1  /* __sk_buff cb[] word: optlen, srr, rr, ts */
#define XFW_RJ_IPCB_FLAGS 2 /* __sk_buff cb[] word: the flag bits' byte */
#define XFW_RJ_IPCB_RR_NEEDADDR 0x08
#define XFW_RJ_IPCB_TS_NEEDTIME 0x10
#define XFW_RJ_IPCB_TS_NEEDADDR 0x20

/* xfw_rj_opts4_tc gives the ICMP error planned in the TC scratch about
 * the host's own packet at l3_off in skb (an IPv4 header with options,
 * judged in OUTPUT) the options icmp_send echoes: those the sending
 * socket set (IP_OPTIONS), as its output built them (ip_options_build:
 * its address and the time filled in, the pointers moved on), which the
 * kernel remembers in the packet's control block (IPCB: where the
 * record route and timestamp options are, which entries the output
 * filled). A raw socket's own header (IP_HDRINCL) leaves the control
 * block empty: no echo, as in the kernel. The echo goes to r->opt,
 * r->optlen, the quote shortened to fit; r->saddr is the reply's final
 * source. Returns 0, or -1 when the kernel sends no error. A global
 * function. */
__attribute__((noinline)) int xfw_rj_opts4_tc(struct __sk_buff *skb, __u32 l3_off)
{
	__u32 slot = XFW_RJ_SLOT_TC, n, optlen, rr, ts, fl, need = 0, cb;
	struct xfw_rj_scratch *sc;
	struct xfw_rj_opt4 *o;
	struct xfw_rj *r;
	__u8 vihl;
	int d;

	if (!skb || l3_off > XFW_RJ_OFF_MAX)
		return -1;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return -1;
	r = &sc->r;
	o = &sc->o;
	r->optlen = 0;
	if (bpf_skb_load_bytes(skb, l3_off, &vihl, 1) < 0)
		return -1;
	n = (vihl & 0xf) * 4;
	if (n <= XFW_RJ_IP4_HLEN)
		return 0;
	n -= XFW_RJ_IP4_HLEN;
	cb = skb->cb[XFW_RJ_IPCB_OPTS];
	fl = skb->cb[XFW_RJ_IPCB_FLAGS] & 0xff;
	optlen = cb & 0xff;
	rr = (cb >> 16) & 0xff;
	ts = cb >> 24;
	/* Options the control block does not describe (a raw socket's
	 * header, or nothing it echoes): none. */
	if (optlen != n || (!rr && !ts))
		return 0;
	/* The control block's offsets count from the IPv4 header: 1 + the
	 * offset among the options, as reject_opts.h counts, is 19 less. */
	if (rr) {
		if (rr <= XFW_RJ_IP4_HLEN - 1 || rr > XFW_RJ_IP4_HLEN - 1 + n)
			return 0;
		rr -= XFW_RJ_IP4_HLEN - 1;
	}
	if (ts) {
		if (ts <= XFW_RJ_IP4_HLEN - 1 || ts > XFW_RJ_IP4_HLEN - 1 + n)
			return 0;
		ts -= XFW_RJ_IP4_HLEN - 1;
	}
	if (fl & XFW_RJ_IPCB_RR_NEEDADDR)
		need |= XFW_RJO_RR_ADDR;
	if (fl & XFW_RJ_IPCB_TS_NEEDADDR)
		need |= XFW_RJO_TS_ADDR;
	if (fl & XFW_RJ_IPCB_TS_NEEDTIME)
		need |= XFW_RJO_TS_TIME;
	__builtin_memset(o, 0, sizeof(*o));
	n = ((n - 1) & XFW_RJ_OPT_MASK) + 1;
	if (n > XFW_RJ_OPT_MAX)
		return -1;
	if (bpf_skb_load_bytes(skb, l3_off + XFW_RJ_IP4_HLEN, o->b, n) < 0)
		return -1;
	d = xfw_rj_opt_echo_sc(sc, rr, ts, need, xfw_rj_now_ms());
	if (d < 0)
		return -1;
	r->optlen = d;
	xfw_rj_opts4_room(r);
	return 0;
}

/* xfw_rj_opts4_put writes the options of the ICMP error planned in
 * scratch slot (r->opt, r->optlen) after its IPv4 header at l3 in ctx (an
 * XDP frame when is_xdp, else an skb), which xfw_rj_put_icmp wrote with
 * room for them, and gives the header its length and checksum. Returns
 * 0, or -1. Inlined into one global function per program type. */
static __always_inline int xfw_rj_opts4_put(void *ctx, int is_xdp, __u32 slot, __u32 l3)
{
	struct xfw_rj_scratch *sc;
	__u8 h[XFW_RJ_IP4_HLEN];
	__s64 s1, s2;
	__u32 n;

	if (!ctx || l3 > XFW_RJ_OFF_MAX)
		return -1;
	sc = bpf_map_lookup_elem(&xfw_rj_scratch, &slot);
	if (!sc)
		return -1;
	n = sc->r.optlen;
	if (!n || n > XFW_RJ_OPT_MAX || (n & 3))
		return -1;
	if (xfw_load_bytes(ctx, is_xdp, l3, h, sizeof(h)) < 0)
		return -1;
	/* Version 4, the header's length in words. */
	h[0] = XFW_RJ_IP_VER_IHL5 + n / 4;
	h[10] = h[11] = 0;
	s1 = bpf_csum_diff(NULL, 0, (__be32 *)h, sizeof(h), 0);
	s2 = bpf_csum_diff(NULL, 0, (__be32 *)sc->r.opt, n, 0);
	if (s1 < 0 || s2 < 0)
		return -1;
	*(__u16 *)(h + 10) = xfw_rj_finish((__u64)(__u32)s1 + (__u32)s2);
	if (is_xdp)
		return bpf_xdp_store_bytes(ctx, l3, h, sizeof(h)) < 0 ||
		       bpf_xdp_store_bytes(ctx, l3 + XFW_RJ_IP4_HLEN, sc->r.opt, n) < 0 ? -1 : 0;
	return bpf_skb_store_bytes(ctx, l3, h, sizeof(h), 0) < 0 ||
	       bpf_skb_store_bytes(ctx, l3 + XFW_RJ_IP4_HLEN, sc->r.opt, n, 0) < 0 ? -1 : 0;
}

/* xfw_rj_opts4_put_xdp: xfw_rj_opts4_put for the XDP scratch's reply. A
 * global function. */
__attribute__((noinline)) int xfw_rj_opts4_put_xdp(struct xdp_md *ctx, __u32 l3)
{
	return xfw_rj_opts4_put(ctx, 1, XFW_RJ_SLOT_XDP, l3);
}

/* xfw_rj_opts4_put_tc: xfw_rj_opts4_put for the TC scratch's reply. A
 * global function. */
__attribute__((noinline)) int xfw_rj_opts4_put_tc(struct __sk_buff *skb, __u32 l3)
{
	return xfw_rj_opts4_put(skb, 0, XFW_RJ_SLOT_TC, l3);
}

#endif /* XFW_REJECT_OPTS_H */
