/* SPDX-License-Identifier: GPL-2.0 */
/*
 * demux.h — the socket the kernel's early demux finds for a received
 * packet, whose ids LOG --log-uid prints in INPUT (xfw_demux_ids_xdp).
 *
 * The kernel sets a received packet's skb->sk in ip_rcv_finish_core /
 * ip6_rcv_finish_core, after PREROUTING and before INPUT, when
 * net.ipv4.ip_early_demux and the protocol's tcp_early_demux or
 * udp_early_demux are on (IPv6 reads the same sysctls), for a packet with
 * no route yet (loopback's keep theirs: none) that is not an IPv4
 * fragment and, in IPv6, whose transport header follows the fixed header
 * (a datagram connection tracking reassembled before PREROUTING,
 * nf_defrag, is whole there: its first fragment stands for it when the
 * generation tracks, XFW_F_CT; in IPv6 when the fragment header was the
 * only extension header, which reassembly removes):
 *  - TCP (tcp_v4_early_demux, tcp_v6_early_demux): a PACKET_HOST packet
 *    with a whole header (doff at least 5) and a socket of the
 *    established hash: a connection in any state but LISTEN; TIME_WAIT
 *    and request sockets are not full sockets, nothing is printed.
 *  - UDP (udp_v4_early_demux, udp_v6_early_demux): a PACKET_HOST packet
 *    and a connected socket of exactly its four-tuple.
 * nf_log_dump_sk_uid_gid then prints the fsuid and fsgid of that socket's
 * file (owner.h xfw_log_ids_of), none for a socket without one (a
 * connection not accepted yet).
 *
 * XDP looks the socket up as the kernel would (bpf_sk_lookup_tcp and
 * _udp, in the device's namespace) only for a LOG entry with --log-uid
 * in INPUT (log.h), once per packet. bpf_sk_lookup_tcp also searches the
 * listeners (and answers a request socket with its listener): a LISTEN
 * socket stands for "none". bpf_sk_lookup_udp finds unconnected sockets
 * too: only one connected to the packet's source counts. The kernel's UDP
 * demux looks at the first socket of the address's hash chain only, and
 * demuxes IPv4 multicast to a lone socket of the port: not followed
 * (docs/differences.md).
 *
 * The sysctls are read by the control plane at each sync (struct
 * xfw_rl_cfg .early_demux, XFW_DEMUX_*).
 *
 * Includes: common.h, parse.h, classify_maps.h, local.h, reject_rate.h,
 * owner.h.
 */
#ifndef XFW_DEMUX_H
#define XFW_DEMUX_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/if_packet.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "common.h"
#include "parse.h"
#include "classify_maps.h"
#include "local.h"
#include "reject_rate.h"
#include "owner.h"

/* struct xfw_rl_cfg .early_demux bits (the sysctls under net.ipv4). */
#define XFW_DEMUX_IP 1  /* ip_early_demux */
#define XFW_DEMUX_TCP 2 /* tcp_early_demux */
#define XFW_DEMUX_UDP 4 /* udp_early_demux */
/* The kernel's defaults, before the control plane wrote the sysctls. */
#define XFW_DEMUX_DEFAULT (XFW_DEMUX_IP | XFW_DEMUX_TCP | XFW_DEMUX_UDP)

/* The smallest TCP data offset, in 32-bit words (sizeof(struct tcphdr) / 4). */
#define XFW_TCP_MIN_DOFF 5
/* Offsets in the headers: IPv4's addresses, IPv6's, TCP's data offset. */
#define XFW_IP4_ADDRS_OFF 12
#define XFW_IP6_ADDRS_OFF 8
#define XFW_TCP_DOFF_OFF 12
#define XFW_IP6_HLEN 40
#define XFW_IP6_FRAG_HLEN 8

/* The kfunc casting a kernel pointer to a BTF type, for reads (Linux 6.2). */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* xfw_demux_whole says whether first fragment p of generation slot
 * stands for a datagram the kernel's demux sees whole (see above). */
static __always_inline int xfw_demux_whole(struct xfw_pkt *p, __u32 slot)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	if (p->frag || !fc || !(fc->active & (1u << XFW_F_CT)))
		return 0;
	return p->fam == 0 || p->l4_off == p->l3_off + XFW_IP6_HLEN + XFW_IP6_FRAG_HLEN;
}

/* xfw_demux_wanted says whether the kernel's early demux looks for the
 * socket of p, judged by generation slot (see above): the sysctls of c
 * (NULL or unset: the defaults), a PACKET_HOST packet not received on
 * loopback, TCP or UDP with a whole header, not a fragment but of a
 * datagram reassembled before PREROUTING, no other IPv6 extension
 * header. */
static __always_inline int xfw_demux_wanted(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_rl_cfg *c,
					    __u32 slot)
{
	__u32 on = c && c->set ? c->early_demux : XFW_DEMUX_DEFAULT;

	if (!(on & XFW_DEMUX_IP) || ctx->ingress_ifindex == XFW_LOOPBACK_IFINDEX)
		return 0;
	if (!p->dst_unicast || !p->l4_off || p->sport == XFW_V_TRUNC)
		return 0;
	if (p->fragmented && !xfw_demux_whole(p, slot))
		return 0;
	if (p->fam == 1 && !p->fragmented && p->l4_off != p->l3_off + XFW_IP6_HLEN)
		return 0;
	if (p->proto == IPPROTO_TCP)
		return (on & XFW_DEMUX_TCP) != 0;
	if (p->proto == IPPROTO_UDP)
		return (on & XFW_DEMUX_UDP) != 0;
	return 0;
}

/* xfw_demux_udp_ok says whether UDP socket sk is connected to exactly the
 * packet of tuple t (the kernel's inet_match / inet6_match). */
static __always_inline int xfw_demux_udp_ok(struct bpf_sock *sk, struct bpf_sock_tuple *t, int v6)
{
	if (!v6)
		return sk->dst_port == t->ipv4.sport && sk->dst_ip4 == t->ipv4.saddr &&
		       sk->src_ip4 == t->ipv4.daddr;
	if (sk->dst_port != t->ipv6.sport)
		return 0;
	for (int i = 0; i < 4; i++)
		if (sk->dst_ip6[i] != t->ipv6.saddr[i] || sk->src_ip6[i] != t->ipv6.daddr[i])
			return 0;
	return 1;
}

/* xfw_demux_ids_xdp fills ids with what LOG --log-uid prints in INPUT of
 * the packet in ctx (parsed into p, judged by generation slot): the ids
 * of the socket the kernel's early demux finds for it; 1 when there are
 * some, else 0. The tuple is read from the frame as it is (after a DNAT
 * at XDP, as the kernel's demux sees it). A global function: verified
 * once. */
__attribute__((noinline)) int xfw_demux_ids_xdp(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_log_ids *ids,
						__u32 slot)
{
	struct bpf_sock_tuple t = {};
	struct bpf_sock *sk;
	struct xfw_rl_cfg *c;
	__u32 zero = 0, len, l3, l4;
	int v6, ok = 0;
	__u8 doff = 0;

	if (!ctx || !p || !ids)
		return 0;
	c = bpf_map_lookup_elem(&xfw_rl_cfg, &zero);
	if (!xfw_demux_wanted(ctx, p, c, slot))
		return 0;
	v6 = p->fam == 1;
	l3 = p->l3_off;
	l4 = p->l4_off;
	if (v6) {
		len = sizeof(t.ipv6);
		if (bpf_xdp_load_bytes(ctx, l3 + XFW_IP6_ADDRS_OFF, t.ipv6.saddr, 2 * sizeof(t.ipv6.saddr)) ||
		    bpf_xdp_load_bytes(ctx, l4, &t.ipv6.sport, 2 * sizeof(t.ipv6.sport)))
			return 0;
	} else {
		len = sizeof(t.ipv4);
		if (bpf_xdp_load_bytes(ctx, l3 + XFW_IP4_ADDRS_OFF, &t.ipv4.saddr, 2 * sizeof(t.ipv4.saddr)) ||
		    bpf_xdp_load_bytes(ctx, l4, &t.ipv4.sport, 2 * sizeof(t.ipv4.sport)))
			return 0;
	}
	if (p->proto == IPPROTO_TCP) {
		if (bpf_xdp_load_bytes(ctx, l4 + XFW_TCP_DOFF_OFF, &doff, 1) || (doff >> 4) < XFW_TCP_MIN_DOFF)
			return 0;
		sk = bpf_sk_lookup_tcp(ctx, &t, len, BPF_F_CURRENT_NETNS, 0);
		if (!sk)
			return 0;
		ok = sk->state != XFW_SK_LISTEN; /* owner.h */
	} else {
		sk = bpf_sk_lookup_udp(ctx, &t, len, BPF_F_CURRENT_NETNS, 0);
		if (!sk)
			return 0;
		ok = xfw_demux_udp_ok(sk, &t, v6);
	}
	if (ok)
		ok = xfw_log_ids_of(bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct sock___xfw)), ids);
	bpf_sk_release(sk);
	return ok;
}

#endif /* XFW_DEMUX_H */
