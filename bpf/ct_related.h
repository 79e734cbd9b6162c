/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_related.h — RELATED: an ICMP or ICMPv6 error's state, from the packet
 * it quotes (nf_conntrack_inet_error): the quoted packet's connection when
 * it is tracked, else the connection the stack attached to its own error
 * (nf_ct_attach), else INVALID (xfw_ct_related, a global function).
 *
 * Conventions: the quoted packet is read from the scratch buffer (cs->buf,
 * XFW_CT_BUF bytes at most); an ICMPv6 error's quoted extension headers are
 * walked up to XFW_CT_INNER_EXTS.
 *
 * Includes: common.h, xfw_structs.h, parse.h, ct_structs.h, ct_maps.h,
 * ct_conn.h.
 */
#ifndef XFW_CT_RELATED_H
#define XFW_CT_RELATED_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"

/* b_flags returns the flags byte of a quoted TCP header at hl. */
static __always_inline __u32 b_flags(__u8 *b, __u32 hl)
{
	return b[xfw_ix(hl + 13)];
}

/* xfw_ct_attached: the state of an ICMP error this host sends (OUTPUT: the
 * TC hook, cs->hook 1, judges only locally generated packets) quoting a
 * packet of no known connection. Such an error answers a packet the host
 * received and neither forwarded nor delivered (its TTL ended, no route,
 * too big...): the kernel had tracked that packet, as an unconfirmed new
 * connection, and icmp_send attached that connection to its error
 * (nf_ct_attach): RELATED, reply direction, no status bit, the quoted
 * protocol. A packet that could not open a connection (an echo reply, a
 * TCP segment tcp_new refuses) had none: INVALID. */
static __always_inline __u32 xfw_ct_attached(struct xfw_ct_scratch *cs, __u32 proto,
					     __u32 hl, int icmp_reply, __u32 ol4)
{
	struct xfw_ct_cfg *cfg;
	__u32 zero = 0, f, ulen;

	/* Only the stack's own errors (its ICMP control socket: the TC hook
	 * sets cs->stack_icmp) carry an attached connection; one a process
	 * writes on a raw socket is tracked like any packet. */
	if (cs->hook != 1 || !cs->stack_icmp || icmp_reply)
		return XFW_CTS_INVALID;
	/* No transport header ("no next header"): no connection to attach. */
	if (proto == XFW_NH_NONE)
		return XFW_CTS_INVALID;
	/* The offending packet was tracked only if its own checks passed
	 * (ol4: its transport length, from the quoted IP header): tcp_error's
	 * header length, udp_error's length field, a whole ICMP header. */
	if ((proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE || proto == IPPROTO_ICMP ||
	     proto == IPPROTO_ICMPV6) && ol4 < 8)
		return XFW_CTS_INVALID;
	if (proto == IPPROTO_UDP) {
		if (cs->buflen < hl + 6)
			return XFW_CTS_INVALID;
		ulen = xfw_rd16(cs->buf, hl + 4);
		if (ulen < 8 || ulen > ol4)
			return XFW_CTS_INVALID;
	}
	if (proto == IPPROTO_TCP) {
		cfg = bpf_map_lookup_elem(&xfw_ct_cfg, &zero);
		if (!cfg || cs->buflen < hl + 14)
			return XFW_CTS_INVALID;
		f = (cs->buf[xfw_ix(hl + 12)] >> 4) * 4;
		if (f < 20 || ol4 < f)
			return XFW_CTS_INVALID;
		/* tcp_error's flag check, then tcp_new: a SYN opens, an ACK
		 * is picked up mid-stream with nf_conntrack_tcp_loose. */
		f = b_flags(cs->buf, hl) & ~(XFW_TH_ECE | XFW_TH_CWR | XFW_TH_PSH | XFW_TH_URG);
		if (f != XFW_TH_SYN && !(f == XFW_TH_ACK && cfg->tcp_loose))
			return XFW_CTS_INVALID;
	}
	return xfw_ctv(XFW_CTS_RELATED, 1, 0, proto);
}

/* xfw_ct_quoted is xfw_ct_related's second half: the connection of the
 * quoted packet (cs->quote). A global function: verified once, not once
 * per way through the IPv6 extension header walk before it. */
__attribute__((noinline)) __u32 xfw_ct_quoted(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	struct xfw_ct_quote *q;
	struct xfw_ct_entry *e;
	__u64 shi, slo, dhi, dlo, now = bpf_jiffies64();
	__u32 hl, proto, sport = 0, dport = 0, qdir, status, ol4, need;
	int table, srcb, reply = 0;
	__u8 *b;

	if (!p || !cs)
		return XFW_CTS_INVALID;
	b = cs->buf;
	q = &cs->quote;
	shi = q->shi;
	slo = q->slo;
	dhi = q->dhi;
	dlo = q->dlo;
	hl = q->hl;
	proto = q->proto;
	ol4 = q->ol4;
	/* The error must go to the quoted packet's source. */
	if (p->dst_hi != shi || p->dst_lo != slo)
		return XFW_CTS_INVALID;
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
		int req;
		__u32 t;

		if ((proto == IPPROTO_ICMP) != (p->fam == 0))
			return XFW_CTS_INVALID;
		if (hl > XFW_CT_BUF - 8 || cs->buflen < hl + 8)
			return XFW_CTS_INVALID;
		t = b[xfw_ix(hl)];
		req = xfw_icmp_query(p->fam, t, &reply);
		if (req < 0)
			return XFW_CTS_INVALID;
		if (reply)
			xfw_ct_mkkey_icmp(&cs->key, p->fam, proto, dhi, dlo, shi, slo,
					  xfw_rd16(b, hl + 4), req, b[xfw_ix(hl + 1)]);
		else
			xfw_ct_mkkey_icmp(&cs->key, p->fam, proto, shi, slo, dhi, dlo,
					  xfw_rd16(b, hl + 4), req, b[xfw_ix(hl + 1)]);
		e = xfw_ct_find(&cs->key, now, &table);
		if (!e) {
			/* The quoted packet's own (unconfirmed) connection. */
			sport = xfw_rd16(b, hl + 4);
			dport = (t << 8) | b[xfw_ix(hl + 1)];
			goto attached;
		}
		if (e->v.icmp_type != req)
			return XFW_CTS_INVALID;
		qdir = reply;
	} else {
		need = xfw_ct_ports(proto) ? 4 : 0;
		if (need && (hl > XFW_CT_BUF - 8 || cs->buflen < hl + need))
			return XFW_CTS_INVALID;
		if (need) {
			sport = xfw_rd16(b, hl);
			dport = xfw_rd16(b, hl + 2);
		}
		if (proto == IPPROTO_GRE) {
			/* The quoted header's call ID (an IPv4 error quotes 8
			 * bytes at least); INVALID without a tuple. */
			if (hl > XFW_CT_BUF - XFW_GRE_V1_HLEN)
				return XFW_CTS_INVALID;
			srcb = xfw_ct_gre_key(b, hl, cs->buflen > hl ? cs->buflen - hl : 0);
			if (srcb < 0)
				return XFW_CTS_INVALID;
			dport = srcb;
		}
		srcb = xfw_ct_mkkey(&cs->key, p->fam, proto, shi, slo, sport, dhi, dlo, dport);
		e = xfw_ct_find(&cs->key, now, &table);
		if (!e) {
			reply = 0;
			goto attached;
		}
		qdir = (srcb != !!(e->v.status & XFW_CTST_ORIG_B));
	}
	status = e->v.status;
	xfw_ct_tuple(p, &cs->key, &e->v);
	/* The error travels against the quoted packet. */
	return xfw_ctv(XFW_CTS_RELATED, !qdir, status | XFW_CTST_CONFIRMED, proto);

attached:
	status = xfw_ct_attached(cs, proto, hl, reply, ol4 > hl ? ol4 - hl : 0);
	if (status != XFW_CTS_INVALID) {
		cs->attached = 1;
		/* That connection's tuple is the quoted packet's. */
		p->ct_osrc_hi = shi;
		p->ct_osrc_lo = slo;
		p->ct_odst_hi = dhi;
		p->ct_odst_lo = dlo;
		p->ct_osport = sport;
		p->ct_odport = dport;
		p->ct_rsport = dport;
		p->ct_rdport = sport;
		if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6)
			xfw_ct_icmp_ports(p, sport, dport >> 8, dport & 0xff);
	}
	return status;
}


/* xfw_ct_related handles an ICMP or ICMPv6 error: RELATED when the packet
 * it quotes (in cs->buf) belongs to a tracked connection and the error goes
 * to that packet's source (nf_conntrack_inet_error); INVALID otherwise.
 * A global function: verified once; the second half is another
 * (xfw_ct_quoted). */
__attribute__((noinline)) __u32 xfw_ct_related(struct xfw_pkt *p, struct xfw_ct_scratch *cs)
{
	__u64 shi, slo, dhi, dlo;
	__u32 hl, proto, ol4;
	__u8 *b;

	if (!p || !cs)
		return XFW_CTS_INVALID;
	b = cs->buf;
	if (p->fam == 0) {
		if (cs->buflen < 20 || (b[0] >> 4) != 4)
			return XFW_CTS_INVALID;
		hl = (b[0] & 0xf) * 4;
		if (hl < 20)
			return XFW_CTS_INVALID;
		/* A quoted later fragment has no transport header. */
		if (((b[6] & 0x1f) | b[7]) != 0)
			return XFW_CTS_INVALID;
		proto = b[9];
		ol4 = xfw_rd16(b, 2); /* total length */
		shi = 0;
		slo = xfw_rd32(b, 12);
		dhi = 0;
		dlo = xfw_rd32(b, 16);
	} else {
		if (cs->buflen < 40 || (b[0] >> 4) != 6)
			return XFW_CTS_INVALID;
		hl = 40;
		proto = b[6];
		ol4 = xfw_rd16(b, 4) + 40; /* payload length + header */
		/* Payload length 0 before a hop-by-hop header: ip6_rcv_core
		 * leaves the packet untrimmed (a jumbogram's form), so the
		 * kernel tracked it at its whole length: the quote's (found by
		 * the stateful campaign, IPv6 seed 705). */
		if (ol4 == 40 && proto == XFW_NH_HOP)
			ol4 = cs->l4len > XFW_CT_ICMP_HLEN ? cs->l4len - XFW_CT_ICMP_HLEN : 0;
		/* The quoted packet's extension headers, as ipv6_skip_exthdr
		 * walks them (a later fragment has no transport header). */
		for (int i = 0; i < XFW_CT_INNER_EXTS; i++) {
			__u32 nh, len;

			if (!xfw_ipv6_is_ext(proto))
				break;
			/* ipv6_skip_exthdr reads two bytes of a header (four
			 * of a fragment header) and walks on by its length,
			 * whatever follows. */
			if (cs->buflen < hl + (proto == XFW_NH_FRAGMENT ? 4 : 2) || hl > XFW_CT_BUF - 16)
				return XFW_CTS_INVALID;
			nh = b[xfw_ix(hl)];
			len = b[xfw_ix(hl + 1)];
			if (proto == XFW_NH_FRAGMENT) {
				if ((xfw_rd16(b, hl + 2) & 0xfff8) != 0)
					return XFW_CTS_INVALID;
				len = 8;
			} else if (proto == XFW_NH_AUTH) {
				len = (len + 2) * 4;
			} else {
				len = (len + 1) * 8;
			}
			proto = nh;
			/* It may walk past the quoted bytes: fine for a
			 * protocol without ports (the kernel's generic). */
			hl = hl + len > 0xff ? 0xff : hl + len;
		}
		if (xfw_ipv6_is_ext(proto) || proto == XFW_NH_NONE)
			return XFW_CTS_INVALID;
		shi = ((__u64)xfw_rd32(b, 8) << 32) | xfw_rd32(b, 12);
		slo = ((__u64)xfw_rd32(b, 16) << 32) | xfw_rd32(b, 20);
		dhi = ((__u64)xfw_rd32(b, 24) << 32) | xfw_rd32(b, 28);
		dlo = ((__u64)xfw_rd32(b, 32) << 32) | xfw_rd32(b, 36);
	}
	cs->quote.shi = shi;
	cs->quote.slo = slo;
	cs->quote.dhi = dhi;
	cs->quote.dlo = dlo;
	cs->quote.hl = hl;
	cs->quote.proto = proto;
	cs->quote.ol4 = ol4;
	return xfw_ct_quoted(p, cs);
}

#endif /* XFW_CT_RELATED_H */
