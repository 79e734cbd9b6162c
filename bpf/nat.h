/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat.h — destination NAT (nat PREROUTING's DNAT) for IPv4 and IPv6 TCP,
 * UDP and UDP-Lite (xfw_nat_udp), with the kernel's semantics
 * (nf_nat_core.c, nf_nat_proto.c); packets without those ports (ICMP
 * echo, SCTP, protocols without ports) by the address: nat_query.h:
 *
 *  - Only a connection's first packet traverses the nat chains. A DNAT
 *    verdict (entry action XFW_ACT_DNAT, from the walk's nat PREROUTING
 *    segment) translates its destination before the route lookup, as
 *    the kernel's PREROUTING does: the XDP hook routes the packet again
 *    and resumes the walk of the chain that route picks after the nat
 *    PREROUTING segment (xfw_family_cfg.nat_resume), so INPUT or FORWARD
 *    see the translated destination, as in the kernel.
 *  - The connection is tracked under its translated tuple (both
 *    directions look like it where the filter chains see them); its
 *    entry keeps the original destination (xfw_ct_val.nat_*), which
 *    --ctorigdst and --ctorigdstport read (ct_conn.h xfw_ct_tuple) and
 *    `xfw conntrack -L` prints. A DNAT whose translated tuple is
 *    already a connection gets another source port too, as the kernel's
 *    null source binding gives it (nat_clash.h).
 *  - Later packets: the original direction is translated before the
 *    route lookup (xfw_nat_pre_xdp, by the wire tuple in xfw_nat), the
 *    reply direction at TC egress after the verdict (xfw_nat_fwd_tc for
 *    forwarded replies, judged at ingress; xfw_nat_post_tc for the host's
 *    own after OUTPUT), where the kernel's source manipulation runs
 *    (POSTROUTING: the routing decision never sees the host's own
 *    address as a forwarded packet's source).
 *  - A packet the tracker finds INVALID has no connection in the kernel,
 *    whose nat hooks leave it as it came: the XDP hook tracks a packet it
 *    translated before routing and gives an INVALID one its wire tuple
 *    back (xfw.c xfw_xdp_nat_pre, xfw_nat_pre_undo_xdp; bridged frames
 *    xfw_nat_pre_undo_tc); a forwarded one, judged at XDP, is marked for
 *    TC egress to pass by (nat_out.h xfw_nat_keep_xdp).
 *  - Not translated (docs/differences.md): ICMP errors about a translated
 *    connection, fragments (dropped: no half translation).
 *  - Checksums are updated incrementally (RFC 1624). At XDP the skb's
 *    ip_summed is not visible: a transport checksum field holding
 *    exactly the pseudo-header sum is taken for a partial checksum
 *    (CHECKSUM_PARTIAL of a veth peer) and updated as one; at TC the
 *    kernel's helpers know.
 *
 * REDIRECT is a DNAT to the input interface's primary address
 * (xfw_nat_ifaddr; none: dropped, as the kernel drops it); IPv6 the
 * first usable one of the device's list (xfw_nat_redirect_addr).
 *
 * IPv6: the tables hold 128-bit addresses (hi:lo as struct xfw_pkt, an
 * IPv4 address in the low word), so both families share them and the
 * logic; the packet writes are nat6.h's (xfw_nat_rw_xdp and _tc pick
 * the family's). An IPv6 entry's address is its range probe's
 * (XFW_NAT_ADDR6).
 *
 * Tables: xfw_nat (LRU hash) maps the original direction's wire tuple to
 * the connection's key and translation; an entry whose connection is
 * gone is deleted by the lookup that finds it. xfw_nat_on turns the
 * lookups on once a translated connection exists (connections outlive
 * the rulesets that made them). xfw_nat_scratch holds a first packet's
 * translation until the verdict confirms it. xfw_nat_bysrc keeps each
 * source's latest SNAT mapping (nat_range.h).
 *
 * Conventions: the translations are global functions, verified once;
 * packet bytes go through bpf_xdp_load_bytes/bpf_xdp_store_bytes (XDP)
 * and the skb helpers (TC). Addresses and ports are host order, as in
 * struct xfw_pkt.
 *
 * Includes: common.h, parse.h, ct.h (its maps, keys and scratch),
 * xfw_maps.h (xfw_ifinfo); nat6.h at its end (the IPv6 writes).
 */
#ifndef XFW_NAT_H
#define XFW_NAT_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"
#include "parse.h"
#include "ct.h"
#include "xfw_maps.h"

/* The original direction's wire tuple of a translated connection.
 * Addresses are 128 bits, hi:lo as in struct xfw_pkt (IPv4: the address
 * in the low word, the high word 0); fam 0 IPv4, 1 IPv6. */
struct xfw_nat_key {
	__u64 saddr_hi, saddr;
	__u64 daddr_hi, daddr;
	__u16 sport, dport;
	__u8 proto;
	__u8 fam;
	__u8 pad[2];
};

/* Its translation: the connection's key and the new destination; kind
 * says whose: XFW_NAT_F_DST a DNAT's original direction, XFW_NAT_F_SRC
 * an SNAT's reply direction (the wire tuple is the reply's). */
struct xfw_nat_val {
	struct xfw_ct_key ct;
	__u64 to_hi, to_addr; /* the new address, hi:lo (xfw_nat_key) */
	__u16 to_port;
	__u8 kind;
	__u8 pad;
	/* A DNAT clash's new source port, 0 for none (nat_clash.h). */
	__u16 clash_sport;
};

/* xfw_nat_val_set fills v's translation (its connection key is the
 * caller's): the new address hi:addr and port, what is translated (kind,
 * XFW_NAT_F_*), no clash port yet. */
static __always_inline void xfw_nat_val_set(struct xfw_nat_val *v, __u64 hi, __u64 addr, __u16 port,
					    __u8 kind)
{
	v->to_hi = hi;
	v->to_addr = addr;
	v->to_port = port;
	v->kind = kind;
	v->pad = 0;
	v->clash_sport = 0;
}

/* The quoted headers an ICMP error's translation rewrites: the IPv4
 * header without options and a TCP header (a UDP header: 28 bytes). */
#define XFW_NAT_QUOTE 40
#define XFW_NAT_QUOTE_UDP 28
#define XFW_NAT_QUOTE_BUF 64 /* a power of two: offsets are masked into it */

/* A first packet's translations waiting for the verdict: [XFW_NAT_PD] the
 * DNAT's, [XFW_NAT_PS] the SNAT's; pending has XFW_NAT_F_DST and
 * XFW_NAT_F_SRC for those waiting. */
#define XFW_NAT_PD 0
#define XFW_NAT_PS 1

/* A NAT entry's range and the choice in progress (nat_range.h). */
struct xfw_nat_range {
	__u64 min_hi, min_addr;   /* host order, hi:lo (xfw_nat_key) */
	__u64 max_hi, max_addr;
	__u64 addr_hi, addr;      /* the address chosen */
	__u32 flags;              /* XFW_NATR_* (NF_NAT_RANGE_*) */
	__u32 min_port, max_port;
	__u32 dst;                /* the destination is translated (DNAT) */
	__u32 min, size, off;     /* the port search: its range and offset */
	__u32 shift;              /* a port map's first offset (XFW_NATR_OFFSET) */
	__u32 found, ok;          /* the free port found (ok 1) */
};

/* The latest source translation of an original source (address, port,
 * protocol): the kernel's nf_nat_bysource, which find_appropriate_src
 * asks so that one source keeps its mapping (nat_range.h). */
struct xfw_nat_src_key {
	__u64 saddr_hi, saddr; /* hi:lo (xfw_nat_key) */
	__u16 sport;
	__u8 proto;
	__u8 pad[5];
};

struct xfw_nat_src_val {
	struct xfw_ct_key ct; /* the connection that holds it */
	__u64 addr_hi, addr;
	__u16 port;
	__u16 pad[3];
};

/* The IPv6 rewrites' buffers (nat6.h): the addresses of the IPv6
 * header, the transport header, the new address. */
struct xfw_nat6_buf {
	__u8 ip[32];
	__u8 l4[20];
	__u8 na[16];
	__u8 pad[4];
};

struct xfw_nat_pend {
	struct xfw_nat_key key[2];
	struct xfw_nat_val val[2];
	struct xfw_ct_key fwd; /* xfw_nat_fwd_tc's key */
	/* An ICMP error's quoted headers before and after translation
	 * (nat_icmp.h). */
	__u8 icmp_old[XFW_NAT_QUOTE_BUF];
	__u8 icmp_new[XFW_NAT_QUOTE_BUF];
	__u32 pending;
	__u32 pad;
	struct xfw_nat_range range;
	/* An IPv6 MASQUERADE's source, as the kernel's routing picks it
	 * (nat6.h xfw_nat6_masq_xdp, _tc), with masq_ok 1. */
	__u64 masq_hi, masq_lo;
	__u32 masq_ok;
	__u32 masq_pad;
	struct bpf_fib_lookup fib; /* their FIB request (off the stack) */
	/* Off the stack too (a 128-bit tuple is big): a lookup's key and
	 * value (xfw_nat_pre_xdp, xfw_nat_lo_passed, ...), xfw_nat_confirm's
	 * source mapping, the IPv6 rewrites' buffers. */
	struct xfw_nat_key lk;
	struct xfw_nat_val lv;
	struct xfw_nat_src_key sk;
	struct xfw_nat_src_val sv;
	struct xfw_nat6_buf b6;
};

/* The port xfw_judge hands the NAT functions for an entry with a range
 * (XFW_EF_NATRANGE): XFW_NAT_RANGED, the slot above it, the index of the
 * range's probe in the low 16 bits (nat_range.h). */
#define XFW_NAT_RANGED (1u << 16)
#define XFW_NAT_RANGE_SLOT_SHIFT 17

/* nat_range.h: a ranged DNAT's choice: the port (the address in the NAT
 * scratch's range.addr_hi:addr), or ~0 to drop. */
__u64 xfw_natr_dnat(struct xfw_pkt *p, __u32 packed);
/* nat_query.h, nat6_query.h: the address rewrites of packets without
 * ports. */
int xfw_natq_addr_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst, __u32 addr);
int xfw_natq6_addr_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst, __u64 hi, __u64 lo);
/* nat_clash.h: a DNAT whose translated tuple is taken gets a new source
 * port (0, or -1 to drop). */
int xfw_nat_clash_xdp(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_ct_scratch *cs);

/* Translated connections tracked at most; past it the oldest mapping is
 * forgotten (its connection's later original-direction packets are then
 * new connections, dropped as clashes: docs/differences.md). */
#define XFW_NAT_MAX 65536

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_nat_key);
	__type(value, struct xfw_nat_val);
	__uint(max_entries, XFW_NAT_MAX);
} xfw_nat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_nat_pend);
	__uint(max_entries, 1);
} xfw_nat_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_nat_src_key);
	__type(value, struct xfw_nat_src_val);
	__uint(max_entries, XFW_NAT_MAX);
} xfw_nat_bysrc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} xfw_nat_on SEC(".maps");

/* REDIRECT's addresses: ifindex → the interface's addresses REDIRECT
 * (and IPv4 MASQUERADE) take, filled by the control plane with the local
 * addresses (internal/dataplane/nat.go fillNatAddrs); the value is
 * struct xfw_nat_ifaddr_val (xfw_structs.h). */
#define XFW_NAT_IFADDRS 4096

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct xfw_nat_ifaddr_val);
	__uint(max_entries, XFW_NAT_IFADDRS);
} xfw_nat_ifaddr SEC(".maps");

/* xfw_nat_redirect_addr leaves in r REDIRECT's address for p received on
 * interface iif: IPv4 the primary address (nf_nat_redirect_ipv4); IPv6
 * the first usable address of the device's list, a link-local one for a
 * link-local destination (nf_nat_redirect_ipv6's scope test). Returns 0,
 * or -1 when the interface has none (the kernel drops the packet). */
static __always_inline int xfw_nat_redirect_addr(struct xfw_nat_range *r, struct xfw_pkt *p, __u32 iif)
{
	struct xfw_nat_ifaddr_val *a = bpf_map_lookup_elem(&xfw_nat_ifaddr, &iif);

	if (!a)
		return -1;
	if (p->fam == 0) {
		r->addr_hi = 0;
		r->addr = a->addr4;
		return a->addr4 ? 0 : -1;
	}
	/* fe80::/10: ipv6_addr_scope gives link-local scope. */
	if ((p->dst_hi >> 54) == (0xfe80ULL >> 6)) {
		r->addr_hi = a->ll_hi;
		r->addr = a->ll_lo;
		return a->flags6 & XFW_NAT_IFA6_LL ? 0 : -1;
	}
	r->addr_hi = a->any_hi;
	r->addr = a->any_lo;
	return a->flags6 & XFW_NAT_IFA6_ANY ? 0 : -1;
}

/* An XFW_ACT_DNAT entry's address for REDIRECT: the input interface's
 * primary address (nf_nat_redirect_ipv4; compiler.RedirectAddr). */
#define XFW_NAT_REDIRECT 0

/* An XFW_ACT_DNAT or XFW_ACT_SNAT entry's address for a translation
 * without one (`--to-destination :PORT`, `--to-source :PORT`): the
 * packet's own destination or source is kept, as the kernel keeps it
 * without NF_NAT_RANGE_MAP_IPS (compiler.KeepAddr: 255.255.255.255,
 * which a translation to is refused). */
#define XFW_NAT_KEEP_ADDR 0xffffffff

/* An IPv6 XFW_ACT_DNAT or XFW_ACT_SNAT entry's address when it has one:
 * the address is its range probe's (XFW_EF_NATRANGE, nat_range.h; the
 * entry's 32 bits cannot hold it; compiler.Nat6Addr). */
#define XFW_NAT_ADDR6 1

/* Offsets in the IPv4 header (from its checksum) and the transport
 * headers. */
#define XFW_NAT_IP_OFF 10   /* the checksum, then source and destination */
#define XFW_NAT_IP_LEN 10
#define XFW_NAT_TCP_LEN 20  /* ports at 0 and 2, checksum at 16 */
#define XFW_NAT_TCP_CSUM 16
#define XFW_NAT_UDP_LEN 8   /* ports at 0 and 2, checksum at 6 */
#define XFW_NAT_UDP_CSUM 6

/* xfw_nat_enabled reports whether a translated connection may exist. */
static __always_inline int xfw_nat_enabled(void)
{
	__u32 zero = 0, *on = bpf_map_lookup_elem(&xfw_nat_on, &zero);

	return on && *on;
}

static __always_inline __u32 xfw_nat_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	return (s & 0xffff) + (s >> 16);
}

/* The one's complement sum that replaces old by new (RFC 1624). */
static __always_inline __u32 xfw_nat_diff32(__u32 old, __u32 new)
{
	return (~old >> 16) + (~old & 0xffff) + (new >> 16) + (new & 0xffff);
}

static __always_inline __u32 xfw_nat_rd16(const __u8 *b, __u32 off)
{
	return ((__u32)b[off] << 8) | b[off + 1];
}

static __always_inline void xfw_nat_wr16(__u8 *b, __u32 off, __u32 v)
{
	b[off] = v >> 8;
	b[off + 1] = v;
}

/* xfw_nat_l4csum returns transport checksum f updated for the address
 * old → addr and the port oldport → port; pseudo is the pseudo-header
 * sum before the change (a partial checksum holds exactly it, and does
 * not cover the ports). */
static __always_inline __u32 xfw_nat_l4csum(__u32 f, __u32 pseudo, __u32 old, __u32 addr,
					    __u32 oldport, __u32 port)
{
	__u32 sum;

	if (f == pseudo)
		return xfw_nat_fold(f + xfw_nat_diff32(old, addr));
	sum = (~f & 0xffff) + xfw_nat_diff32(old, addr) + (~oldport & 0xffff) + port;
	return ~xfw_nat_fold(sum) & 0xffff;
}

/* xfw_nat_set gives p's destination (dst 1) or source the translated
 * address and port. */
static __always_inline void xfw_nat_set(struct xfw_pkt *p, __u32 dst, __u32 addr, __u32 port)
{
	if (dst) {
		p->dst_lo = addr;
		p->dport = port;
	} else {
		p->src_lo = addr;
		p->sport = port;
	}
}

/* xfw_nat_udp reports whether protocol proto has UDP's header: UDP, and
 * UDP-Lite, whose checksum (covering the pseudo-header and at least the
 * header, RFC 3828) is updated as UDP's (the kernel's
 * udplite_manip_pkt). */
static __always_inline int xfw_nat_udp(__u32 proto)
{
	return proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE;
}

/* xfw_nat_tc_csoff returns where p's TCP, UDP or UDP-Lite checksum is (0
 * for another protocol), and in *mangled0 the flag the skb helpers need
 * for it (a UDP checksum is never 0: BPF_F_MARK_MANGLED_0). */
static __always_inline __u32 xfw_nat_tc_csoff(struct xfw_pkt *p, __u32 *mangled0)
{
	*mangled0 = 0;
	if (p->proto == IPPROTO_TCP)
		return p->l4_off + XFW_NAT_TCP_CSUM;
	if (!xfw_nat_udp(p->proto))
		return 0;
	*mangled0 = BPF_F_MARK_MANGLED_0;
	return p->l4_off + XFW_NAT_UDP_CSUM;
}

/* xfw_nat_rewrite_xdp translates p's destination (dst 1) or source (dst
 * 0) to addr:port in the packet and in p, checksums included. Returns 0,
 * or -1 when the headers cannot be read or written. A global function. */
__attribute__((noinline)) int xfw_nat_rewrite_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
						  __u32 dst, __u32 addr, __u32 port)
{
	__u8 ip[XFW_NAT_IP_LEN], l4[XFW_NAT_TCP_LEN];
	__u32 old, oldport, f, pseudo, csoff, aoff = dst ? 6 : 2, poff = dst ? 2 : 0;
	int tcp;

	if (!ctx || !p || p->fam != 0 || !p->l4_off || p->l4_end <= p->l4_off)
		return -1;
	tcp = p->proto == IPPROTO_TCP;
	if (!tcp && !xfw_nat_udp(p->proto))
		return -1;
	if (bpf_xdp_load_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, ip, XFW_NAT_IP_LEN))
		return -1;
	if (tcp) {
		if (bpf_xdp_load_bytes(ctx, p->l4_off, l4, XFW_NAT_TCP_LEN))
			return -1;
		csoff = XFW_NAT_TCP_CSUM;
	} else {
		if (bpf_xdp_load_bytes(ctx, p->l4_off, l4, XFW_NAT_UDP_LEN))
			return -1;
		csoff = XFW_NAT_UDP_CSUM;
	}
	old = xfw_nat_rd16(ip, aoff) << 16 | xfw_nat_rd16(ip, aoff + 2);
	oldport = xfw_nat_rd16(l4, poff);
	f = xfw_nat_rd16(l4, csoff);
	/* A UDP checksum of 0 is none. */
	if (tcp || f != 0) {
		pseudo = xfw_nat_fold(xfw_nat_rd16(ip, 2) + xfw_nat_rd16(ip, 4) + xfw_nat_rd16(ip, 6) +
				      xfw_nat_rd16(ip, 8) + p->proto + (p->l4_end - p->l4_off));
		f = xfw_nat_l4csum(f, pseudo, old, addr, oldport, port);
		if (!tcp && f == 0)
			f = 0xffff;
		xfw_nat_wr16(l4, csoff, f);
	}
	f = (~xfw_nat_rd16(ip, 0) & 0xffff) + xfw_nat_diff32(old, addr);
	xfw_nat_wr16(ip, 0, ~xfw_nat_fold(f));
	xfw_nat_wr16(ip, aoff, addr >> 16);
	xfw_nat_wr16(ip, aoff + 2, addr);
	xfw_nat_wr16(l4, poff, port);
	if (bpf_xdp_store_bytes(ctx, p->l3_off + XFW_NAT_IP_OFF, ip, XFW_NAT_IP_LEN))
		return -1;
	if (tcp) {
		if (bpf_xdp_store_bytes(ctx, p->l4_off, l4, XFW_NAT_TCP_LEN))
			return -1;
	} else if (bpf_xdp_store_bytes(ctx, p->l4_off, l4, XFW_NAT_UDP_LEN)) {
		return -1;
	}
	xfw_nat_set(p, dst, addr, port);
	return 0;
}

/* xfw_nat_rewrite_tc is xfw_nat_rewrite_xdp on an skb at TC egress, with
 * the kernel's checksum helpers (they follow ip_summed). */
__attribute__((noinline)) int xfw_nat_rewrite_tc(struct __sk_buff *skb, struct xfw_pkt *p,
						 __u32 dst, __u32 addr, __u32 port)
{
	__u32 aoff, poff, csoff, mangled0 = 0;
	__be32 olda, newa = bpf_htonl(addr);
	__be16 oldp, newp = bpf_htons(port);

	if (!skb || !p || p->fam != 0 || !p->l4_off)
		return -1;
	csoff = xfw_nat_tc_csoff(p, &mangled0);
	if (!csoff)
		return -1;
	aoff = p->l3_off + XFW_NAT_IP_OFF + (dst ? 6 : 2);
	poff = p->l4_off + (dst ? 2 : 0);
	if (bpf_skb_load_bytes(skb, aoff, &olda, sizeof(olda)) ||
	    bpf_skb_load_bytes(skb, poff, &oldp, sizeof(oldp)))
		return -1;
	if (bpf_l4_csum_replace(skb, csoff, olda, newa, BPF_F_PSEUDO_HDR | mangled0 | sizeof(newa)) ||
	    bpf_l4_csum_replace(skb, csoff, oldp, newp, mangled0 | sizeof(newp)) ||
	    bpf_l3_csum_replace(skb, p->l3_off + XFW_NAT_IP_OFF, olda, newa, sizeof(newa)) ||
	    bpf_skb_store_bytes(skb, aoff, &newa, sizeof(newa), 0) ||
	    bpf_skb_store_bytes(skb, poff, &newp, sizeof(newp), 0))
		return -1;
	xfw_nat_set(p, dst, addr, port);
	return 0;
}

/* The destination flag above the port in the argument of the IPv6
 * rewrites (nat6.h). */
#define XFW_NAT_RW_DST (1u << 16)

/* nat6.h: the IPv6 rewrites (global functions, verified once). */
int xfw_nat6_rewrite_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst_port, __u64 hi, __u64 lo);
int xfw_nat6_rewrite_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst_port, __u64 hi, __u64 lo);
/* sctp_nat.h: SCTP's, of either family (global functions). */
int xfw_sctp_rewrite_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst_port, __u64 hi, __u64 lo);
int xfw_sctp_rewrite_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst_port, __u64 hi, __u64 lo);

/* xfw_nat_rw_xdp translates p's destination (dst 1) or source to the
 * address hi:lo and port, for either family (xfw_nat_rewrite_xdp,
 * xfw_nat6_rewrite_xdp). Returns 0 or -1 as they do. */
static __always_inline int xfw_nat_rw_xdp(struct xdp_md *ctx, struct xfw_pkt *p, __u32 dst,
					  __u64 hi, __u64 lo, __u32 port)
{
	if (p->proto == IPPROTO_SCTP)
		return xfw_sctp_rewrite_xdp(ctx, p, (dst ? XFW_NAT_RW_DST : 0) | (port & 0xffff), hi, lo);
	if (p->fam == 1)
		return xfw_nat6_rewrite_xdp(ctx, p, (dst ? XFW_NAT_RW_DST : 0) | (port & 0xffff), hi, lo);
	return xfw_nat_rewrite_xdp(ctx, p, dst, (__u32)lo, port);
}

/* xfw_nat_rw_tc is xfw_nat_rw_xdp at TC egress. */
static __always_inline int xfw_nat_rw_tc(struct __sk_buff *skb, struct xfw_pkt *p, __u32 dst,
					 __u64 hi, __u64 lo, __u32 port)
{
	if (p->proto == IPPROTO_SCTP)
		return xfw_sctp_rewrite_tc(skb, p, (dst ? XFW_NAT_RW_DST : 0) | (port & 0xffff), hi, lo);
	if (p->fam == 1)
		return xfw_nat6_rewrite_tc(skb, p, (dst ? XFW_NAT_RW_DST : 0) | (port & 0xffff), hi, lo);
	return xfw_nat_rewrite_tc(skb, p, dst, (__u32)lo, port);
}

/* xfw_nat_conn returns the live connection of key k, or 0. */
static __always_inline struct xfw_ct_entry *xfw_nat_conn(struct xfw_ct_key *k)
{
	__u64 now = bpf_jiffies64();
	struct xfw_ct_entry *e = xfw_ct_lookup(k);

	if (e && (__s64)(e->v.expires - now) > 0)
		return e;
	return 0;
}

/* xfw_nat_tracked returns the connection of key k a packet accepted a
 * moment ago was tracked in, expired or not: an RST that kills its
 * connection still leaves translated, as the kernel's packet keeps its
 * connection (xfw_ct_track deletes entries that expired before). */
static __always_inline struct xfw_ct_entry *xfw_nat_tracked(struct xfw_ct_key *k)
{
	return xfw_ct_lookup(k);
}

/* xfw_nat_translatable reports whether p can be translated: IPv4 or IPv6
 * TCP, UDP, UDP-Lite or SCTP with its ports, not a fragment (a DNAT of a
 * fragment drops it). */
static __always_inline int xfw_nat_translatable(struct xfw_pkt *p)
{
	return p->fam <= 1 &&
	       (p->proto == IPPROTO_TCP || xfw_nat_udp(p->proto) || p->proto == IPPROTO_SCTP) &&
	       p->sport < 65536 && p->dport < 65536 && !p->fragmented;
}

/* xfw_nat_owns reports whether connection v still holds the translation
 * of kind whose wire destination is hi:lo, port (a mapping outliving its
 * connection is not). */
static __always_inline int xfw_nat_owns(struct xfw_ct_val *v, __u32 kind, __u64 hi, __u64 lo,
					__u32 port)
{
	if (!(v->nat_flags & kind))
		return 0;
	if (kind == XFW_NAT_F_DST)
		return v->nat_addr_hi == hi && v->nat_addr == lo && v->nat_port == port;
	return v->snat_addr_hi == hi && v->snat_addr == lo && v->snat_port == port;
}

/* Both kinds of translation, for xfw_nat_held. */
#define XFW_NAT_F_ANY (XFW_NAT_F_DST | XFW_NAT_F_SRC)

/* xfw_nat_held reports whether the translation under wire tuple k
 * (xfw_nat) is of a kind in kinds and its connection is alive and still
 * holds it (xfw_nat_owns: its kind, k's destination); it copies the
 * translation to out (when given). With prune a mapping outliving its
 * connection, or of another kind, is deleted (the packet opens a new
 * one). Every lookup of xfw_nat goes through it. A global function. */
__attribute__((noinline)) int xfw_nat_held(struct xfw_nat_key *k, __u32 kinds, __u32 prune,
					   struct xfw_nat_val *out)
{
	struct xfw_nat_val *v;
	struct xfw_ct_entry *e;

	if (!k)
		return 0;
	v = bpf_map_lookup_elem(&xfw_nat, k);
	if (!v)
		return 0;
	if (v->kind & kinds) {
		e = xfw_nat_conn(&v->ct);
		if (e && xfw_nat_owns(&e->v, v->kind, k->daddr_hi, k->daddr, k->dport)) {
			if (out)
				*out = *v;
			return 1;
		}
	}
	if (prune)
		bpf_map_delete_elem(&xfw_nat, k);
	return 0;
}

/* xfw_nat_tuple_key fills k with p's wire tuple. */
static __always_inline void xfw_nat_tuple_key(struct xfw_nat_key *k, struct xfw_pkt *p)
{
	k->saddr_hi = p->src_hi;
	k->saddr = p->src_lo;
	k->daddr_hi = p->dst_hi;
	k->daddr = p->dst_lo;
	k->sport = p->sport;
	k->dport = p->dport;
	k->proto = p->proto;
	k->fam = p->fam;
	k->pad[0] = 0;
	k->pad[1] = 0;
}

/* xfw_nat_live reports whether p's wire tuple (left in k) has a
 * translation whose connection still holds it, copied to v; a mapping
 * outliving its connection is deleted (the packet opens a new one). */
static __always_inline int xfw_nat_live(struct xfw_nat_key *k, struct xfw_pkt *p, struct xfw_nat_val *v)
{
	xfw_nat_tuple_key(k, p);
	return xfw_nat_held(k, XFW_NAT_F_ANY, 1, v);
}

/* xfw_nat_pre_xdp translates, before the route lookup, the destination of
 * a packet of a translated connection: a DNAT's original direction, an
 * SNAT's replies (the kernel's PREROUTING). Returns 1 when it did. A
 * global function. */
__attribute__((noinline)) int xfw_nat_pre_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_val *v;

	if (!ctx || !p || !np || !xfw_nat_enabled() || !xfw_nat_translatable(p))
		return 0;
	v = &np->lv;
	if (!xfw_nat_live(&np->lk, p, v))
		return 0;
	if (v->clash_sport && xfw_nat_rw_xdp(ctx, p, 0, p->src_hi, p->src_lo, v->clash_sport))
		return 0;
	return xfw_nat_rw_xdp(ctx, p, 1, v->to_hi, v->to_addr, v->to_port) == 0;
}

/* xfw_nat_pre_undo_xdp gives a packet xfw_nat_pre_xdp has just
 * translated (its wire tuple still in the scratch's lk, its clash port in
 * lv) its wire destination and source port back: the tracker found it
 * INVALID, a packet the kernel's conntrack attaches no connection to,
 * which its nat hook leaves as it came (nf_nat_inet_fn). Returns 0, or -1
 * when the packet must be dropped (a failed write). A global function. */
__attribute__((noinline)) int xfw_nat_pre_undo_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_key *k;

	if (!ctx || !p || !np)
		return -1;
	k = &np->lk;
	if (xfw_nat_rw_xdp(ctx, p, 1, k->daddr_hi, k->daddr, k->dport))
		return -1;
	if (np->lv.clash_sport && xfw_nat_rw_xdp(ctx, p, 0, k->saddr_hi, k->saddr, k->sport))
		return -1;
	return 0;
}

/* xfw_nat_pre_undo_tc is xfw_nat_pre_undo_xdp for a bridged frame
 * xfw_nat_pre_tc has just translated. */
__attribute__((noinline)) int xfw_nat_pre_undo_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_key *k;

	if (!skb || !p || !np)
		return -1;
	k = &np->lk;
	if (xfw_nat_rw_tc(skb, p, 1, k->daddr_hi, k->daddr, k->dport))
		return -1;
	if (np->lv.clash_sport && xfw_nat_rw_tc(skb, p, 0, k->saddr_hi, k->saddr, k->sport))
		return -1;
	return 0;
}

/* xfw_nat_pre_tc is xfw_nat_pre_xdp for a frame bridged from port to port,
 * at the output port's TC egress before FORWARD (bridge_tc.h), where
 * br_netfilter's PREROUTING translates it: a DNAT's original direction
 * gets the translated destination, an SNAT's reply the original source.
 * The frame stays on the port the bridge chose (its destination address
 * picked it). Returns 1 when it translated, 0 when not, -1 when the frame
 * must be dropped (a failed write). A global function. */
__attribute__((noinline)) int xfw_nat_pre_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_val *v;

	if (!skb || !p || !np || !xfw_nat_enabled() || !xfw_nat_translatable(p))
		return 0;
	v = &np->lv;
	if (!xfw_nat_live(&np->lk, p, v))
		return 0;
	if (v->clash_sport && xfw_nat_rw_tc(skb, p, 0, p->src_hi, p->src_lo, v->clash_sport))
		return -1;
	return xfw_nat_rw_tc(skb, p, 1, v->to_hi, v->to_addr, v->to_port) ? -1 : 1;
}

/* xfw_nat_dnat_prep readies the DNAT of a connection's first packet p (cs:
 * its tracking, a new connection pending) to hi:addr, port (port 0 keeps
 * the port): the mapping waits in np for xfw_nat_confirm, the connection is
 * rekeyed to the translated tuple, which keeps the original destination.
 * The caller rewrites the packet, then marks np pending. Returns 0, 1
 * when the translated tuple is already a connection's (a clash: the
 * connection needs another source port, nat_clash.h), or -1 when the
 * packet must be dropped (not translatable). */
static __always_inline int xfw_nat_dnat_prep(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					     struct xfw_nat_pend *np, __u64 hi, __u64 addr, __u32 port)
{
	int srcb;

	if (!xfw_nat_translatable(p) || cs->pending != XFW_CTP_CREATE)
		return -1;
	if (!port)
		port = p->dport;
	__builtin_memset(&np->key[XFW_NAT_PD], 0, sizeof(np->key[XFW_NAT_PD]));
	xfw_nat_tuple_key(&np->key[XFW_NAT_PD], p);
	srcb = xfw_ct_mkkey(&np->val[XFW_NAT_PD].ct, p->fam, p->proto, p->src_hi, p->src_lo, p->sport, hi,
			    addr, port);
	xfw_nat_val_set(&np->val[XFW_NAT_PD], hi, addr, port, XFW_NAT_F_DST);
	cs->nv.nat_addr_hi = p->dst_hi;
	cs->nv.nat_addr = p->dst_lo;
	cs->nv.nat_port = p->dport;
	cs->nv.nat_flags = XFW_NAT_F_DST;
	cs->key = np->val[XFW_NAT_PD].ct;
	p->ct_rsport = port; /* the reply tuple comes from the new port */
	if (srcb)
		cs->nv.status |= XFW_CTST_ORIG_B;
	else
		cs->nv.status &= ~XFW_CTST_ORIG_B;
	/* The translated tuple is taken: a clash. */
	return xfw_nat_conn(&np->val[XFW_NAT_PD].ct) ? 1 : 0;
}

/* xfw_nat_dnat_to leaves in r the new destination address of a DNAT
 * verdict for p (addr: the entry's, XFW_NAT_REDIRECT the input
 * interface's, XFW_NAT_KEEP_ADDR p's own; *port the entry's, a range's
 * chosen with XFW_NAT_RANGED, 0 for a packet without ports). Returns 0,
 * or -1 when the packet must be dropped (no address, no range). */
static __always_inline int xfw_nat_dnat_to(struct xdp_md *ctx, struct xfw_pkt *p, struct xfw_nat_range *r,
					   __u32 addr, __u32 *port)
{
	r->addr_hi = 0;
	r->addr = addr;
	if (addr == XFW_NAT_REDIRECT) {
		__u32 iif = ctx->ingress_ifindex;

		/* A VLAN's packets come in on its parent: the VLAN device is
		 * the input interface (xfw_ifinfo). */
		if (p->vlan) {
			__u64 key = (__u64)iif | ((__u64)p->vlan << 32);
			struct xfw_ifinfo *ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);

			if (!ifi)
				return -1;
			iif = ifi->ifindex;
		}
		if (xfw_nat_redirect_addr(r, p, iif))
			return -1; /* no address: the kernel drops it */
	}
	if (addr == XFW_NAT_KEEP_ADDR) {
		r->addr_hi = p->dst_hi;
		r->addr = p->dst_lo;
	}
	if (*port & XFW_NAT_RANGED) {
		__u64 to = xfw_natr_dnat(p, *port);

		if (to == ~0ULL)
			return -1;
		*port = to & 0xffff;
	} else if (p->fam != 0 && addr != XFW_NAT_KEEP_ADDR && addr != XFW_NAT_REDIRECT) {
		return -1; /* an IPv6 address is its range probe's (XFW_NAT_ADDR6) */
	}
	return 0;
}

/* xfw_nat_dnat_xdp applies a DNAT verdict to a connection's first packet
 * (cs: its tracking, a new connection pending): xfw_nat_dnat_prep, then
 * the packet translated. port 0 keeps the port. Returns 0, 1 when the
 * translated tuple is taken (a clash: the caller gives the packet a new
 * source port with xfw_nat_clash_xdp, nat_clash.h, outside this call
 * chain, whose stack is deep), or -1 when the packet must be dropped (not
 * translatable, a failed write). A global function. */
__attribute__((noinline)) int xfw_nat_dnat_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					       struct xfw_ct_scratch *cs, __u32 addr, __u32 port)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_range *r;
	int clash;

	if (!ctx || !p || !cs || !np)
		return -1;
	np->pending = 0; /* the first translation of the packet */
	r = &np->range;
	if (xfw_nat_dnat_to(ctx, p, r, addr, &port))
		return -1;
	if (!port)
		port = p->dport;
	clash = xfw_nat_dnat_prep(p, cs, np, r->addr_hi, r->addr, port);
	if (clash < 0)
		return -1;
	if (xfw_nat_rw_xdp(ctx, p, 1, np->val[XFW_NAT_PD].to_hi, np->val[XFW_NAT_PD].to_addr, port))
		return -1;
	if (clash)
		return 1; /* pending once xfw_nat_clash_xdp found a port */
	np->pending = XFW_NAT_F_DST;
	return 0;
}

/* xfw_nat_confirm records the translation of an accepted first packet
 * (with its connection, xfw_ct_confirm). */
static __always_inline void xfw_nat_confirm(void)
{
	__u32 zero = 0, one = 1;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);

	if (!np || !np->pending)
		return;
	if (np->pending & XFW_NAT_F_DST)
		bpf_map_update_elem(&xfw_nat, &np->key[XFW_NAT_PD], &np->val[XFW_NAT_PD], BPF_ANY);
	if (np->pending & XFW_NAT_F_SRC) {
		struct xfw_nat_src_key *sk = &np->sk;
		struct xfw_nat_src_val *sv = &np->sv;

		__builtin_memset(sk, 0, sizeof(*sk));
		__builtin_memset(sv, 0, sizeof(*sv));
		sk->saddr_hi = np->val[XFW_NAT_PS].to_hi;
		sk->saddr = np->val[XFW_NAT_PS].to_addr;
		sk->sport = np->val[XFW_NAT_PS].to_port;
		sk->proto = np->key[XFW_NAT_PS].proto;
		sv->ct = np->val[XFW_NAT_PS].ct;
		sv->addr_hi = np->key[XFW_NAT_PS].daddr_hi;
		sv->addr = np->key[XFW_NAT_PS].daddr;
		sv->port = np->key[XFW_NAT_PS].dport;
		bpf_map_update_elem(&xfw_nat, &np->key[XFW_NAT_PS], &np->val[XFW_NAT_PS], BPF_ANY);
		bpf_map_update_elem(&xfw_nat_bysrc, sk, sv, BPF_ANY);
	}
	np->pending = 0;
	if (!xfw_nat_enabled())
		bpf_map_update_elem(&xfw_nat_on, &zero, &one, BPF_ANY);
}

/* xfw_nat_cancel forgets a first packet's translation the kernel's
 * routing does not bring to netfilter. */
static __always_inline void xfw_nat_cancel(void)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);

	if (np)
		np->pending = 0;
}

/* xfw_nat_undo_xdp forgets a first packet's translation the verdict did
 * not accept and gives the packet its destination back (REJECT answers
 * it as it came, as the kernel's translation of the answer shows it).
 * Returns 1 when it gave a DNAT's destination back, else 0. A global
 * function: inlined, it was verified again on every path of the XDP hook
 * reaching either call (~3,000 instructions). */
__attribute__((noinline)) int xfw_nat_undo_xdp(struct xdp_md *ctx, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	int undone = 0;

	if (!ctx || !p || !np || !np->pending)
		return 0;
	if ((np->pending & XFW_NAT_F_DST) && !xfw_nat_translatable(p)) {
		/* Without ports (nat_query.h): the address alone. */
		if (p->fam)
			xfw_natq6_addr_xdp(ctx, p, 1, np->key[XFW_NAT_PD].daddr_hi, np->key[XFW_NAT_PD].daddr);
		else
			xfw_natq_addr_xdp(ctx, p, 1, (__u32)np->key[XFW_NAT_PD].daddr);
		undone = 1;
	} else if (np->pending & XFW_NAT_F_DST) {
		xfw_nat_rw_xdp(ctx, p, 1, np->key[XFW_NAT_PD].daddr_hi, np->key[XFW_NAT_PD].daddr,
			       np->key[XFW_NAT_PD].dport);
		if (np->val[XFW_NAT_PD].clash_sport)
			xfw_nat_rw_xdp(ctx, p, 0, p->src_hi, p->src_lo, np->key[XFW_NAT_PD].sport);
		undone = 1;
	}
	np->pending = 0;
	return undone;
}

/* The source a leaving packet of a translated connection takes
 * (xfw_nat_src_of): the address hi:lo and port; clash a clash's reply's
 * original destination port to give back first (0: none). */
struct xfw_nat_to {
	__u64 hi, lo;
	__u32 port;
	__u32 clash;
};

/* xfw_nat_src_of fills *to with the source a leaving packet of connection
 * e takes, in direction reply: a DNAT's replies its original destination,
 * an SNAT's original direction the translated source. Returns 1 when
 * there is one. */
static __always_inline int xfw_nat_src_of(struct xfw_ct_entry *e, int reply, struct xfw_nat_to *to)
{
	to->clash = 0;
	if (reply && (e->v.nat_flags & XFW_NAT_F_DST)) {
		to->hi = e->v.nat_addr_hi;
		to->lo = e->v.nat_addr;
		to->port = e->v.nat_port;
		return 1;
	}
	if (!reply && (e->v.nat_flags & XFW_NAT_F_SRC)) {
		to->hi = e->v.snat_addr_hi;
		to->lo = e->v.snat_addr;
		to->port = e->v.snat_port;
		return 1;
	}
	return 0;
}

/* xfw_nat_fwd_tc gives a forwarded packet of a translated connection its
 * source as it leaves (a DNAT's replies the original destination, an
 * SNAT's original direction the new source) (the kernel's POSTROUTING: after the
 * routing decision, which must not see a source of the host's own). p is
 * the parsed packet, judged at ingress. Returns -1 when the packet must
 * be dropped (the write failed). A global function. */
__attribute__((noinline)) int xfw_nat_fwd_tc(struct __sk_buff *skb, struct xfw_pkt *p)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_to to = {};
	struct xfw_ct_entry *e;
	int srcb, reply;

	if (!skb || !p || !np || !xfw_nat_translatable(p))
		return 0;
	srcb = xfw_ct_mkkey(&np->fwd, p->fam, p->proto, p->src_hi, p->src_lo, p->sport, p->dst_hi,
			    p->dst_lo, p->dport);
	e = xfw_nat_tracked(&np->fwd);
	reply = e && srcb != !!(e->v.status & XFW_CTST_ORIG_B);
	if (!e || !xfw_nat_src_of(e, reply, &to))
		return 0;
	/* A clash's reply: its destination port back (nat_clash.h). */
	if (reply && (e->v.nat_flags & XFW_NAT_F_CLASH) &&
	    xfw_nat_rw_tc(skb, p, 1, p->dst_hi, p->dst_lo, e->v.nat_sport))
		return -1;
	return xfw_nat_rw_tc(skb, p, 0, to.hi, to.lo, to.port);
}

/* xfw_nat_own_src fills *to with the source an accepted packet of the
 * host's own (p, tracked in cs) takes as it leaves after OUTPUT: a reply
 * in a DNAT connection its original destination, an SNAT connection's
 * packet the new source; a clash's reply its destination port back
 * (to->clash). Returns 1 when there is one. */
static __always_inline int xfw_nat_own_src(struct xfw_pkt *p, struct xfw_ct_scratch *cs,
					   struct xfw_nat_to *to)
{
	struct xfw_ct_entry *e;
	__u32 st = p->ct & 7;

	if (!xfw_nat_enabled() || (st != XFW_CTS_NEW && st != XFW_CTS_ESTABLISHED))
		return 0;
	e = xfw_nat_tracked(&cs->key);
	if (!e || !xfw_nat_src_of(e, !!(p->ct & XFW_CTV_DIR_REPLY), to))
		return 0;
	/* A clash's reply: its destination port back first (nat_clash.h). */
	if ((p->ct & XFW_CTV_DIR_REPLY) && (e->v.nat_flags & XFW_NAT_F_CLASH))
		to->clash = e->v.nat_sport;
	return 1;
}

/* xfw_nat_post_tc gives an accepted packet of the host's own, at TC egress
 * after OUTPUT, its translated source: a reply in a DNAT connection its
 * original destination, an SNAT connection's packet the new source.
 * Returns -1 when the packet must be dropped (the write failed). A global
 * function. */
__attribute__((noinline)) int xfw_nat_post_tc(struct __sk_buff *skb, struct xfw_pkt *p,
					      struct xfw_ct_scratch *cs)
{
	struct xfw_nat_to to = {};

	if (!skb || !p || !cs || !xfw_nat_translatable(p) || !xfw_nat_own_src(p, cs, &to))
		return 0;
	if (to.clash && xfw_nat_rw_tc(skb, p, 1, p->dst_hi, p->dst_lo, to.clash))
		return -1;
	if (xfw_nat_rw_tc(skb, p, 0, to.hi, to.lo, to.port))
		return -1;
	/* Loopback brings it in again under a tuple no connection is keyed
	 * by (the reply of a REDIRECT in nat OUTPUT): its connection facts go
	 * to loopback's INPUT by the loopback handoff (ct_track.h). */
	if (skb->ifindex == XFW_LOOPBACK_IFINDEX) {
		xfw_ct_load_tc(skb, p, cs);
		xfw_ct_lo_put(p, cs);
	}
	return 0;
}

#include "nat6.h"
#include "sctp_nat.h"

#endif /* XFW_NAT_H */
