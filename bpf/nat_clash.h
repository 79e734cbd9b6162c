/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_clash.h — a DNAT whose translated tuple is already another
 * connection's (one client port to two addresses translated to the same
 * server; a DNAT port range with no free port), with the kernel's outcome
 * (nf_nat_core.c): the kernel's nat hook after the chains gives the new
 * connection a null source binding (nf_nat_alloc_null_binding at
 * POSTROUTING, or LOCAL_IN for the host's own), whose get_unique_tuple
 * finds the reply tuple taken and picks another source port as SNAT does
 * without a range (nf_nat_l4proto_unique_tuple: 1-511, 600-1023 or
 * 1024-65535 after the original port, from a random offset). The
 * connection is then source-translated (--ctstate SNAT, `conntrack -L`'s
 * reply tuple to the new port).
 *
 *  - xfw keys a connection by its tuple after DNAT (nat.h): the clashing
 *    one takes the new source port in its key, and the packet is given it
 *    at XDP with the DNAT (the kernel changes it after POSTROUTING: filter
 *    chains see the new port, docs/differences.md). The port is chosen by
 *    xfw_natr_snat (nat_range.h) as for an SNAT to the packet's own
 *    address.
 *  - The connection keeps the original port (xfw_ct_val.nat_sport, with
 *    XFW_NAT_F_CLASH in nat_flags); the original direction's mapping
 *    (xfw_nat) carries the new port (xfw_nat_val.clash_sport), which
 *    xfw_nat_pre_xdp gives later packets; replies get their destination
 *    port back as they leave (nat.h xfw_nat_fwd_tc, xfw_nat_post_tc).
 *
 * Conventions: xfw_nat_clash_xdp is a global function.
 *
 * Includes: nat.h, nat_range.h.
 */
#ifndef XFW_NAT_CLASH_H
#define XFW_NAT_CLASH_H

#include "nat.h"
#include "nat_range.h"

/* xfw_nat_clash_xdp gives the first packet p of a DNAT whose translated
 * tuple is taken (translated already; np->val[XFW_NAT_PD] its mapping, cs
 * its pending connection) a free source port, in the packet, its mapping
 * and its connection's key, and marks the DNAT pending. Returns 0, or -1
 * when the packet must be dropped (no free port, a failed write). A
 * global function, called after xfw_nat_dnat_xdp returned 1. */
__attribute__((noinline)) int xfw_nat_clash_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
						struct xfw_ct_scratch *cs)
{
	__u32 zero = 0, orig, port;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	__u64 to;
	int srcb;

	if (!ctx || !p || !cs || !np || !xfw_nat_translatable(p))
		return -1;
	orig = p->sport;
	/* The kernel's null binding: an SNAT to the packet's own address,
	 * without a range or flags. */
	np->range.addr_hi = p->src_hi;
	np->range.addr = p->src_lo;
	to = xfw_natr_snat(p, 0, p->dport << 16 | orig, 1);
	if (to == XFW_NATR_NONE)
		return -1;
	port = to & 0xffff;
	if (port == orig || xfw_nat_rw_xdp(ctx, p, 0, p->src_hi, p->src_lo, port))
		return -1;
	srcb = xfw_ct_mkkey(&np->val[XFW_NAT_PD].ct, p->fam, p->proto, p->src_hi, p->src_lo, port,
			    p->dst_hi, p->dst_lo, p->dport);
	np->val[XFW_NAT_PD].clash_sport = port;
	cs->key = np->val[XFW_NAT_PD].ct;
	cs->nv.nat_sport = orig;
	cs->nv.nat_flags |= XFW_NAT_F_CLASH;
	if (srcb)
		cs->nv.status |= XFW_CTST_ORIG_B;
	else
		cs->nv.status &= ~XFW_CTST_ORIG_B;
	np->pending = XFW_NAT_F_DST; /* the DNAT's, now complete */
	return 0;
}

#endif /* XFW_NAT_CLASH_H */
