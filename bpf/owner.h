/* SPDX-License-Identifier: GPL-2.0 */
/*
 * owner.h — the owner match (xt_owner.c): what the TC egress hook reads
 * of the packet's socket (xfw_owner_tc, before the walk, only when the
 * generation has owner probes) and the probe answering from it
 * (xfw_owner_match).
 *
 * The socket is the kernel's skb_to_full_sk: skb->sk, a request socket's
 * listener, none for a TIME_WAIT socket. The match then needs its struct
 * socket (kernel sockets without a file: owned by nobody) and the file's
 * credentials (fsuid, fsgid), which no helper gives: the hook reads them
 * from the kernel's structures, the skb through bpf_cast_to_kern_ctx and
 * the rest with CO-RE reads (BPF_CORE_READ: bpf_probe_read_kernel at the
 * offsets of the running kernel; only the members used are declared, the
 * object builds without vmlinux.h). A read that faults gives 0.
 *
 * The ids are the kernel's (the initial user namespace's), as xt_owner
 * compares them for a network namespace of the initial user namespace:
 * the only one whose --uid-owner and --gid-owner rules xfw loads (the
 * writer's user namespace must own the network namespace,
 * internal/iptables/match_owner.go, and only the initial one's may load
 * BPF programs).
 * XDP has no socket (forwarded packets in POSTROUTING have none in the
 * kernel either): the hooks set .owner to 0.
 *
 * Includes: common.h, kern.h, xfw_structs.h, parse.h, classify_maps.h.
 */
#ifndef XFW_OWNER_H
#define XFW_OWNER_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "common.h"
#include "kern.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_maps.h"

/* Socket states (include/net/tcp_states.h; not enum xfw_tcp_state, the
 * tracker's). */
#define XFW_SK_TIME_WAIT 6
#define XFW_SK_LISTEN 10
#define XFW_SK_NEW_SYN_RECV 12

struct xfw_kid {
	__u32 val;
};

struct cred___xfw {
	struct xfw_kid fsuid;
	struct xfw_kid fsgid;
} __attribute__((preserve_access_index));

struct file___xfw {
	const struct cred___xfw *f_cred;
} __attribute__((preserve_access_index));

struct socket___xfw {
	struct file___xfw *file;
} __attribute__((preserve_access_index));

struct sock___xfw {
	struct socket___xfw *sk_socket;
} __attribute__((preserve_access_index));

/* A request socket's listener is its sock_common's skc_listener
 * (request_sock.h's rsk_listener). */
struct sock_common___xfw {
	struct sock___xfw *skc_listener;
} __attribute__((preserve_access_index));

/* xfw_owner_read fills p's owner facts from skb's socket. A global
 * function: verified once. */
__attribute__((noinline)) int xfw_owner_read(struct __sk_buff *skb, struct xfw_pkt *p)
{
	struct sk_buff___xfw *k;
	struct sock___xfw *sk;
	struct socket___xfw *so;
	struct file___xfw *f;
	const struct cred___xfw *cr;
	struct bpf_sock *bs;
	__u32 state;

	if (!skb || !p)
		return 0;
	p->owner = 0;
	/* The socket's state from the context's view of it (struct
	 * bpf_sock), the rest from the kernel's structures. */
	bs = skb->sk;
	if (!bs)
		return 0;
	state = bs->state;
	if (state == XFW_SK_TIME_WAIT)
		return 0;
	k = bpf_cast_to_kern_ctx(skb);
	sk = BPF_CORE_READ(k, sk);
	if (state == XFW_SK_NEW_SYN_RECV)
		sk = BPF_CORE_READ((struct sock_common___xfw *)sk, skc_listener);
	if (!sk)
		return 0;
	so = BPF_CORE_READ(sk, sk_socket);
	if (!so)
		return 0;
	p->owner = XFW_OWNER_F_SOCKET;
	f = BPF_CORE_READ(so, file);
	if (!f)
		return 0;
	cr = BPF_CORE_READ(f, f_cred);
	if (!cr)
		return 0;
	p->owner_uid = BPF_CORE_READ(cr, fsuid.val);
	p->owner_gid = BPF_CORE_READ(cr, fsgid.val);
	p->owner |= XFW_OWNER_F_FILE;
	return 0;
}

/* xfw_sk_kernel reports whether skb's socket is one the kernel made for
 * itself (sock_create_kern: a struct socket without a file), as the
 * stack's per-CPU ICMP and ICMPv6 sockets are (inet_ctl_sock_create);
 * a process's socket has a file. 0 without a socket. */
static __always_inline int xfw_sk_kernel(struct __sk_buff *skb)
{
	struct sk_buff___xfw *k = bpf_cast_to_kern_ctx(skb);
	struct sock___xfw *sk = BPF_CORE_READ(k, sk);
	struct socket___xfw *so;

	if (!sk)
		return 0;
	so = BPF_CORE_READ(sk, sk_socket);
	return so && !BPF_CORE_READ(so, file);
}

/* What LOG's --log-uid prints of a packet's socket (xfw_log_owner). */
struct xfw_log_ids {
	__u32 uid, gid;
};

/* xfw_log_ids_of reads what nf_log_dump_sk_uid_gid prints of full
 * socket sk: its struct socket's file's fsuid and fsgid into ids; 1 when
 * it has them (a socket with a file), else 0. */
static __always_inline int xfw_log_ids_of(struct sock___xfw *sk, struct xfw_log_ids *ids)
{
	struct socket___xfw *so;
	struct file___xfw *f;
	const struct cred___xfw *cr;

	if (!sk)
		return 0;
	so = BPF_CORE_READ(sk, sk_socket);
	f = so ? BPF_CORE_READ(so, file) : NULL;
	cr = f ? BPF_CORE_READ(f, f_cred) : NULL;
	if (!cr)
		return 0;
	ids->uid = BPF_CORE_READ(cr, fsuid.val);
	ids->gid = BPF_CORE_READ(cr, fsgid.val);
	return 1;
}

/* xfw_log_owner reads what LOG's --log-uid prints of skb's socket
 * (nf_log_dump_sk_uid_gid): skb->sk itself, when a full socket (not a
 * request or TIME_WAIT one), its ids (xfw_log_ids_of); 1 when it found
 * them, else 0. A global function: verified once (its pointer argument
 * is a struct, whose size the verifier checks). */
__attribute__((noinline)) int xfw_log_owner(struct __sk_buff *skb, struct xfw_log_ids *ids)
{
	struct sk_buff___xfw *k;
	struct bpf_sock *bs;

	if (!skb || !ids)
		return 0;
	bs = skb->sk;
	if (!bs || bs->state == XFW_SK_TIME_WAIT || bs->state == XFW_SK_NEW_SYN_RECV)
		return 0;
	k = bpf_cast_to_kern_ctx(skb);
	return xfw_log_ids_of(BPF_CORE_READ(k, sk), ids);
}

/* xfw_owner_tc reads the socket of a packet TC egress judges when
 * generation slot has owner probes; else it leaves no facts. */
static __always_inline void xfw_owner_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 slot)
{
	struct xfw_family_cfg *fc = bpf_map_lookup_elem(&xfw_cfg, &slot);

	p->owner = 0;
	if (fc && fc->owner)
		xfw_owner_read(skb, p);
}

/* xfw_owner_reply gives p, a REJECT reply xfw built (parsed from it),
 * the socket the kernel's reply has: a TCP reset none (nf_send_reset,
 * nf_send_reset6 allocate it without one), an ICMP or ICMPv6 error the
 * namespace's ICMP socket (icmp_send, icmp6_send: a kernel socket, with
 * no file), which --socket-exists and ! --uid-owner match and --uid-owner
 * and --gid-owner do not (owner_mt). -m recent's TTL follows the same
 * socket (p->nosock, recent.h). */
static __always_inline void xfw_owner_reply(struct xfw_pkt *p)
{
	p->owner = p->proto == IPPROTO_TCP ? 0 : XFW_OWNER_F_SOCKET;
	p->nosock = p->proto == IPPROTO_TCP;
}

/* xfw_owner_in says whether id lies in [lo, hi]. */
static __always_inline int xfw_owner_in(__u32 id, __u32 lo, __u32 hi)
{
	return id >= lo && id <= hi;
}

/* xfw_owner_match answers owner probe pr (owner_mt). */
static __always_inline int xfw_owner_match(struct xfw_probe *pr, struct xfw_pkt *p)
{
	__u32 match = pr->arg & 0xff, inv = (pr->arg >> XFW_OWNER_INV_SHIFT) & 0xff;

	if (!(p->owner & XFW_OWNER_F_SOCKET))
		return (match ^ inv) == 0;
	if (match & inv & XFW_OWNER_SOCKET)
		return 0;
	if (!(p->owner & XFW_OWNER_F_FILE))
		return ((match ^ inv) & (XFW_OWNER_UID | XFW_OWNER_GID)) == 0;
	if ((match & XFW_OWNER_UID) &&
	    xfw_owner_in(p->owner_uid, pr->val, pr->mask) == !!(inv & XFW_OWNER_UID))
		return 0;
	if ((match & XFW_OWNER_GID) &&
	    xfw_owner_in(p->owner_gid, (__u32)pr->count, (__u32)(pr->count >> 32)) == !!(inv & XFW_OWNER_GID))
		return 0;
	return 1;
}

#endif /* XFW_OWNER_H */
