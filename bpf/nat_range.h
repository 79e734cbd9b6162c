/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nat_range.h — the NAT targets' address and port ranges and their
 * --random, --random-fully and --persistent flags, with the kernel's
 * choice (nf_nat_core.c get_unique_tuple, find_best_ips_proto,
 * nf_nat_l4proto_unique_tuple; nf_nat_masquerade.c and nf_nat_redirect.c
 * give MASQUERADE and REDIRECT the interface's address as a one-address
 * range):
 *
 *  - The address (a range: XFW_NATR_MAP_IPS): the original source's
 *    jhash2 with the original destination as initial value (0 with
 *    --persistent), scaled into the range (reciprocal_scale): one client
 *    (and server) keeps its address, as in the kernel, and xfw picks the
 *    address the kernel picks. IPv6: the four words of the source
 *    hashed, the address chosen word by word (xfw_natr_pick6).
 *  - SNAT without random flags first keeps the original tuple when its
 *    source is in the range and it is free (also without ports: an
 *    echo's identifier, a protocol without ports).
 *  - The port: without random flags the packet's own when it is in the
 *    range (or none is given) and the translated tuple is free (a range
 *    of one port is taken even when used, but a source's clash the
 *    kernel's confirmation drops is dropped); else searched in the range
 *    (none given: SNAT's 1-511, 600-1023 or 1024-65535 after the
 *    original port; DNAT keeps its port) from a random offset (DNAT
 *    without random flags: from the range's first port), at most
 *    128 tries, then halving the tries (down to 8) from a new random
 *    offset each round. None free: SNAT drops (the kernel's confirmation
 *    drops the clash); DNAT takes a port of the range and the clash a
 *    new source port (nat_clash.h).
 *  - SNAT then takes the source's current mapping (find_appropriate_src:
 *    xfw_nat_bysrc, the latest SNAT of that address, port and protocol)
 *    when it is in the range and free.
 *  - A shifted port map (DNAT's /BASE, XFW_NATR_OFFSET) never keeps the
 *    port: the search starts at the original port less the base.
 *  - Not done (docs/differences.md): the random offsets are not the
 *    kernel's.
 *
 * A ranged entry (XFW_EF_NATRANGE) names its range, an XFW_PROBE_NATRANGE
 * of the generation; xfw_judge packs the probe's index and the slot into
 * the port it hands the NAT functions (XFW_NAT_RANGED, nat.h).
 *
 * Conventions: xfw_natr_dnat and xfw_natr_snat are global functions; the
 * port search runs under bpf_loop (one candidate per step); the state
 * lives in the per-CPU NAT scratch (xfw_nat_pend.range).
 *
 * Includes: nat.h, classify_maps.h, generation.h.
 */
#ifndef XFW_NAT_RANGE_H
#define XFW_NAT_RANGE_H

#include "nat.h"
#include "nat_query.h"
#include "classify_maps.h"
#include "generation.h"

/* The range flags (NF_NAT_RANGE_*, the kernel's values: compiler
 * NatFlags). */
#define XFW_NATR_MAP_IPS 0x01
#define XFW_NATR_PROTO 0x02
#define XFW_NATR_RANDOM 0x04
#define XFW_NATR_PERSISTENT 0x08
#define XFW_NATR_RANDOM_FULLY 0x10
#define XFW_NATR_OFFSET 0x20 /* a shifted port map (DNAT's /BASE) */
#define XFW_NATR_RANDOM_ALL (XFW_NATR_RANDOM | XFW_NATR_RANDOM_FULLY)

/* Where a range probe's count holds a port map's base (compiler
 * natRangeBaseShift). */
#define XFW_NATR_BASE_SHIFT 32

/* What xfw_natr_dnat and xfw_natr_snat return for a packet to drop. */
#define XFW_NATR_NONE (~0ULL)

/* The kernel's source port ranges when none is given, after the original
 * port (nf_nat_l4proto_unique_tuple). */
#define XFW_SNAT_LOW_MIN 1
#define XFW_SNAT_LOW_SIZE 511    /* 1-511 for ports below 512 */
#define XFW_SNAT_MID_MIN 600
#define XFW_SNAT_MID_SIZE 424    /* 600-1023 for ports below 1024 */
#define XFW_SNAT_HIGH_MIN 1024
#define XFW_SNAT_HIGH_SIZE 64512 /* 1024-65535 */
#define XFW_SNAT_TRIES 128       /* the kernel's max_attempts */
#define XFW_SNAT_LAST_TRIES 16   /* no round after one of fewer tries */
#define XFW_NATR_ROUNDS 5        /* 128, 64, 32, 16, 8 tries */

#define XFW_JHASH_INITVAL 0xdeadbeef

static __always_inline __u32 xfw_rol32(__u32 w, __u32 s)
{
	return (w << s) | (w >> (32 - s));
}

/* xfw_natr_hash is find_best_ips_proto's jhash2 of a source address (the
 * four words of nf_inet_addr as the kernel's memory holds them: network
 * order; an IPv4 address is w0, the others 0) with initial value init. */
static __always_inline __u32 xfw_natr_hash(__u32 w0, __u32 w1, __u32 w2, __u32 w3, __u32 init)
{
	__u32 a, b, c;

	a = b = c = XFW_JHASH_INITVAL + (4 << 2) + init;
	a += w0;
	b += w1;
	c += w2;
	/* __jhash_mix */
	a -= c; a ^= xfw_rol32(c, 4); c += b;
	b -= a; b ^= xfw_rol32(a, 6); a += c;
	c -= b; c ^= xfw_rol32(b, 8); b += a;
	a -= c; a ^= xfw_rol32(c, 16); c += b;
	b -= a; b ^= xfw_rol32(a, 19); a += c;
	c -= b; c ^= xfw_rol32(b, 4); b += a;
	/* the fourth word, then __jhash_final */
	a += w3;
	c ^= b; c -= xfw_rol32(b, 14);
	a ^= c; a -= xfw_rol32(c, 11);
	b ^= a; b -= xfw_rol32(a, 25);
	c ^= b; c -= xfw_rol32(b, 16);
	a ^= c; a -= xfw_rol32(c, 4);
	b ^= a; b -= xfw_rol32(a, 14);
	c ^= b; c -= xfw_rol32(b, 24);
	return c;
}

/* xfw_natr_word returns 32-bit word i (0: the first) of address hi:lo, in
 * host order. */
static __always_inline __u32 xfw_natr_word(__u64 hi, __u64 lo, __u32 i)
{
	__u64 w = i < 2 ? hi : lo;

	return (i & 1) ? (__u32)w : (__u32)(w >> 32);
}

/* xfw_natr_pick6 sets the NAT scratch's range's chosen address for an
 * IPv6 connection of packet p, as find_best_ips_proto does: the source's
 * jhash2 with the destination's last word as initial value (0 with
 * --persistent); word by word, the range's first word plus the hash
 * scaled into the distance to its last (the whole 32 bits once a word
 * before was below the last's), the hash XORed with the destination's
 * word after each (but with --persistent; a DNAT's destination word is
 * the one just chosen). A global function. */
__attribute__((noinline)) int xfw_natr_pick6(struct xfw_pkt *p)
{
	__u32 zero = 0, j, init = 0, w, minw, dist, full = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_range *r;
	__u64 hi = 0, lo = 0;

	if (!p || !np)
		return -1;
	r = &np->range;
	if (!(r->flags & XFW_NATR_PERSISTENT))
		init = bpf_htonl((__u32)p->dst_lo);
	j = xfw_natr_hash(bpf_htonl(p->src_hi >> 32), bpf_htonl((__u32)p->src_hi), bpf_htonl(p->src_lo >> 32),
			  bpf_htonl((__u32)p->src_lo), init);
	for (__u32 i = 0; i < 4; i++) {
		minw = full ? 0 : xfw_natr_word(r->min_hi, r->min_addr, i);
		dist = full ? ~0u : xfw_natr_word(r->max_hi, r->max_addr, i) - minw + 1;
		w = minw + (__u32)(((__u64)j * dist) >> 32); /* reciprocal_scale */
		if (w != xfw_natr_word(r->max_hi, r->max_addr, i))
			full = 1;
		/* The kernel XORs tuple->dst's word, which a DNAT has just
		 * written (var_ipp is tuple->dst): the chosen word. */
		if (!(r->flags & XFW_NATR_PERSISTENT))
			j ^= bpf_htonl(r->dst ? w : xfw_natr_word(p->dst_hi, p->dst_lo, i));
		if (i < 2)
			hi = hi << 32 | w;
		else
			lo = lo << 32 | w;
	}
	r->addr_hi = hi;
	r->addr = lo;
	return 0;
}

/* xfw_natr_pick sets r's chosen address (addr_hi:addr) for a connection
 * of packet p, as find_best_ips_proto does: one address is it, a range's
 * by the hash of p's source and destination (IPv6: xfw_natr_pick6). */
static __always_inline void xfw_natr_pick(struct xfw_nat_range *r, struct xfw_pkt *p)
{
	__u32 src = p->src_lo, dst = p->dst_lo, init, j, dist;

	r->addr_hi = r->min_hi;
	r->addr = r->min_addr;
	if (r->min_hi == r->max_hi && r->min_addr == r->max_addr)
		return;
	if (p->fam != 0) {
		xfw_natr_pick6(p);
		return;
	}
	init = (r->flags & XFW_NATR_PERSISTENT) ? 0 : bpf_htonl(dst);
	j = xfw_natr_hash(bpf_htonl(src), 0, 0, 0, init);
	dist = (__u32)(r->max_addr - r->min_addr) + 1;
	r->addr = (__u32)r->min_addr + (__u32)(((__u64)j * dist) >> 32);
}

/* xfw_natr_inaddr reports whether address hi:lo is in r's addresses. */
static __always_inline int xfw_natr_inaddr(struct xfw_nat_range *r, __u64 hi, __u64 lo)
{
	if (hi < r->min_hi || (hi == r->min_hi && lo < r->min_addr))
		return 0;
	return hi < r->max_hi || (hi == r->max_hi && lo <= r->max_addr);
}

/* xfw_natr_addr6 reads the IPv6 address of XFW_PROBE_NATADDR6 k of probe
 * map m into *hi:*lo. Returns 0, or -1 when it is not there. */
static __always_inline int xfw_natr_addr6(void *m, __u32 k, __u64 *hi, __u64 *lo)
{
	struct xfw_probe *pr = bpf_map_lookup_elem(m, &k);

	if (!pr || pr->kind != XFW_PROBE_NATADDR6)
		return -1;
	*hi = (__u64)pr->val << 32 | pr->mask;
	*lo = pr->count;
	return 0;
}

/* xfw_natr_load reads the range of a ranged entry (packed: XFW_NAT_RANGED,
 * the slot and the probe's index, nat.h) into r; an IPv6 range (fam 1)
 * names its addresses' probes (XFW_PROBE_NATADDR6). Returns 0, or -1 when
 * it is not there. */
static __always_inline int xfw_natr_load(struct xfw_nat_range *r, __u32 packed, __u32 fam)
{
	void *m = xfw_inner(&xfw_o_probe, (packed >> XFW_NAT_RANGE_SLOT_SHIFT) & (XFW_NSLOTS - 1));
	__u32 k = packed & 0xffff;
	struct xfw_probe *pr;

	if (!m)
		return -1;
	pr = bpf_map_lookup_elem(m, &k);
	if (!pr || pr->kind != XFW_PROBE_NATRANGE)
		return -1;
	r->flags = pr->arg;
	r->min_hi = r->max_hi = 0;
	r->min_addr = pr->val;
	r->max_addr = pr->mask;
	if (fam != 0 && (r->flags & XFW_NATR_MAP_IPS) &&
	    (xfw_natr_addr6(m, pr->val, &r->min_hi, &r->min_addr) ||
	     xfw_natr_addr6(m, pr->mask, &r->max_hi, &r->max_addr)))
		return -1;
	r->min_port = (pr->count >> 16) & 0xffff;
	r->max_port = pr->count & 0xffff;
	r->shift = (pr->count >> XFW_NATR_BASE_SHIFT) & 0xffff; /* the base, for now */
	return 0;
}

/* xfw_snat_taken reports whether the reply tuple np->key[XFW_NAT_PS] with
 * destination port port is a live connection's: a translation's wire
 * tuple in xfw_nat, or a connection keyed by it. */
static __always_inline int xfw_snat_taken(struct xfw_nat_pend *np, __u32 port)
{
	struct xfw_nat_key *k = &np->key[XFW_NAT_PS];

	k->dport = port;
	if (xfw_nat_held(k, XFW_NAT_F_ANY, 0, 0))
		return 1;
	xfw_ct_mkkey(&np->fwd, k->fam, k->proto, k->daddr_hi, k->daddr, port, k->saddr_hi, k->saddr, k->sport);
	return xfw_nat_conn(&np->fwd) != 0;
}

/* xfw_snat_clash_drops reports whether the kernel's confirmation drops
 * the first packet of a connection whose reply tuple np->key[XFW_NAT_PS]
 * with destination port port is taken (nf_ct_resolve_clash): always,
 * but for UDP (allow_clash) whose rival is not translated
 * (__nf_ct_resolve_clash attaches the packet to it). */
static __always_inline int xfw_snat_clash_drops(struct xfw_nat_pend *np, __u32 port)
{
	struct xfw_nat_key *k = &np->key[XFW_NAT_PS];

	k->dport = port;
	if (xfw_nat_held(k, XFW_NAT_F_ANY, 0, 0))
		return 1;
	return k->proto != IPPROTO_UDP && xfw_snat_taken(np, port);
}

/* xfw_natr_taken reports whether the translated tuple with port port is a
 * live connection's: for SNAT (dst 0) the reply tuple np->key[XFW_NAT_PS]
 * (xfw_snat_taken); for DNAT the connection keyed by the translated
 * tuple from np->key[XFW_NAT_PD]'s source to r's chosen address. */
static __always_inline int xfw_natr_taken(struct xfw_nat_pend *np, __u32 port)
{
	struct xfw_nat_key *k = &np->key[XFW_NAT_PD];
	struct xfw_nat_range *r = &np->range;

	if (!r->dst)
		return xfw_snat_taken(np, port);
	xfw_ct_mkkey(&np->fwd, k->fam, k->proto, k->saddr_hi, k->saddr, k->sport, r->addr_hi, r->addr, port);
	return xfw_nat_conn(&np->fwd) != 0;
}

/* bpf_loop's context (on the stack, as the helper wants it). */
struct xfw_natr_ctx {
	struct xfw_nat_pend *np;
};

static long xfw_natr_try(__u32 i, struct xfw_natr_ctx *c)
{
	struct xfw_nat_pend *np = c->np;
	struct xfw_nat_range *r;
	__u32 port;

	if (!np)
		return 1;
	r = &np->range;
	if (!r->size)
		return 1;
	port = r->min + (__u16)(r->off + i) % r->size;
	r->found = port; /* the last one tried when none is free */
	if (!xfw_natr_taken(np, port)) {
		r->ok = 1;
		return 1;
	}
	return 0;
}

/* xfw_natr_search finds a free port in np->range's min..min+size-1 as
 * nf_nat_l4proto_unique_tuple does. Returns 1 with it in range.found. */
static __always_inline int xfw_natr_search(struct xfw_nat_pend *np)
{
	struct xfw_nat_range *r = &np->range;
	struct xfw_natr_ctx c = {.np = np};
	__u32 tries = r->size < XFW_SNAT_TRIES ? r->size : XFW_SNAT_TRIES;

	r->ok = 0;
	for (int round = 0; round < XFW_NATR_ROUNDS; round++) {
		/* get_random_u16, but a port map's first round starts at its
		 * shifted port, a destination's without random flags at the
		 * range's first port. */
		r->off = bpf_get_prandom_u32() & 0xffff;
		if (!round && (r->flags & XFW_NATR_OFFSET))
			r->off = r->shift;
		else if (!round && r->dst && !(r->flags & XFW_NATR_RANDOM_ALL))
			r->off = 0;
		bpf_loop(tries, xfw_natr_try, &c, 0);
		if (r->ok)
			return 1;
		if (tries >= r->size || tries < XFW_SNAT_LAST_TRIES)
			break;
		tries /= 2;
	}
	return 0;
}

/* xfw_natr_in reports whether port is in range r's ports. */
static __always_inline int xfw_natr_in(struct xfw_nat_range *r, __u32 port)
{
	return port >= r->min_port && port <= r->max_port;
}

/* xfw_natr_bysrc returns the port of the mapping of p's source (port
 * sport: an echo's identifier, 0 for a protocol without ports) that a
 * live connection holds, its address in np->range.addr_hi:addr, when it
 * is in np->range and its reply tuple to p's destination is free
 * (find_appropriate_src, whose same_src compares the identifier as a
 * port), else XFW_NATR_NONE. ports: p has ports to translate (else the
 * reply tuple is an echo's or an address pair, xfw_natq_taken).
 * np->key[XFW_NAT_PS] holds the reply tuple's source. */
static __always_inline __u64 xfw_natr_bysrc(struct xfw_nat_pend *np, struct xfw_pkt *p, __u32 sport, __u32 ports)
{
	struct xfw_nat_src_key sk = {.saddr_hi = p->src_hi, .saddr = p->src_lo, .sport = sport,
				     .proto = p->proto};
	struct xfw_nat_range *r = &np->range;
	struct xfw_nat_src_val *v = bpf_map_lookup_elem(&xfw_nat_bysrc, &sk);
	struct xfw_ct_entry *e;
	__u64 hi, addr;
	__u32 port;

	if (!v)
		return XFW_NATR_NONE;
	hi = v->addr_hi;
	addr = v->addr;
	port = v->port;
	if (!xfw_natr_inaddr(r, hi, addr) || ((r->flags & XFW_NATR_PROTO) && !xfw_natr_in(r, port)))
		return XFW_NATR_NONE;
	e = xfw_nat_conn(&v->ct);
	if (!e || !(e->v.nat_flags & XFW_NAT_F_SRC) || e->v.snat_addr_hi != hi || e->v.snat_addr != addr ||
	    e->v.snat_port != port)
		return XFW_NATR_NONE;
	np->key[XFW_NAT_PS].daddr_hi = hi;
	np->key[XFW_NAT_PS].daddr = addr;
	if (ports) {
		if (xfw_snat_taken(np, port))
			return XFW_NATR_NONE;
	} else {
		np->key[XFW_NAT_PS].dport = port;
		if (xfw_natq_taken(np, xfw_natq_kind(p), p->icmp & 0xff))
			return XFW_NATR_NONE;
	}
	r->addr_hi = hi;
	r->addr = addr;
	return port;
}

/* xfw_natr_port picks the port of the translated tuple (np->range.addr
 * chosen) for the packet's own port orig, as get_unique_tuple's step 3:
 * the port, or -1 when none is free. src: the source is translated
 * (SNAT's default ranges apply; DNAT keeps its port when none is given). */
static __always_inline int xfw_natr_port(struct xfw_nat_pend *np, __u32 orig, int src)
{
	struct xfw_nat_range *r = &np->range;
	__u32 flags = r->flags;

	/* A port map's offset: the original port less the base, in 16 bits
	 * (nf_nat_l4proto_unique_tuple's u16 off). */
	r->shift = (__u16)(orig - r->shift);
	if (!(flags & XFW_NATR_RANDOM_ALL) && !(flags & XFW_NATR_OFFSET)) {
		if (flags & XFW_NATR_PROTO) {
			/* A range of one port keeps it even when taken
			 * (get_unique_tuple); a source's clash is then
			 * dropped at confirmation (found by xfw difftest,
			 * nat seed 308: an SNAT to one port fw's own packet
			 * shared with a forwarded one). */
			if (xfw_natr_in(r, orig) &&
			    (r->min_port == r->max_port ? !src || !xfw_snat_clash_drops(np, orig)
							: !xfw_natr_taken(np, orig)))
				return orig;
		} else if (!xfw_natr_taken(np, orig)) {
			return orig;
		}
	}
	if (flags & XFW_NATR_PROTO) {
		r->min = r->min_port;
		r->size = r->max_port - r->min_port + 1;
	} else if (!src) {
		/* A destination's port is never changed: a clash gets another
		 * source port (nat_clash.h). */
		return (int)orig;
	} else if (orig < 512) {
		r->min = XFW_SNAT_LOW_MIN;
		r->size = XFW_SNAT_LOW_SIZE;
	} else if (orig < 1024) {
		r->min = XFW_SNAT_MID_MIN;
		r->size = XFW_SNAT_MID_SIZE;
	} else {
		r->min = XFW_SNAT_HIGH_MIN;
		r->size = XFW_SNAT_HIGH_SIZE;
	}
	if (xfw_natr_search(np))
		return (int)r->found;
	/* None free: a destination keeps the last port tried, as the kernel
	 * does, and the clash gets another source port (nat_clash.h); a
	 * source has none. */
	return src ? -1 : (int)r->found;
}

/* xfw_natr_dnat chooses a ranged DNAT's (or REDIRECT's) new destination
 * for p: np->range.addr_hi:addr holds the entry's address (REDIRECT's
 * interface address resolved, the packet's own to keep it), packed the
 * entry's range (nat.h). Returns the port, the address chosen in
 * np->range.addr_hi:addr, or XFW_NATR_NONE when the packet must be
 * dropped. A global function. */
__attribute__((noinline)) __u64 xfw_natr_dnat(struct xfw_pkt *p, __u32 packed)
{
	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_range *r;
	int port;

	if (!p || !np)
		return XFW_NATR_NONE;
	r = &np->range;
	if (xfw_natr_load(r, packed, p->fam))
		return XFW_NATR_NONE;
	r->dst = 1;
	if (r->flags & XFW_NATR_MAP_IPS)
		xfw_natr_pick(r, p);
	/* Without TCP or UDP ports (nat_query.h): the address alone; a
	 * range with ports names TCP or UDP (the compiler refuses others). */
	if (!xfw_nat_translatable(p))
		return (r->flags & XFW_NATR_PROTO) ? XFW_NATR_NONE : 0;
	xfw_nat_tuple_key(&np->key[XFW_NAT_PD], p);
	port = xfw_natr_port(np, p->dport, 0);
	if (port < 0)
		return XFW_NATR_NONE;
	return (__u32)port;
}

/* xfw_natr_snat chooses an SNAT's (or MASQUERADE's) new source for p:
 * np->range.addr_hi:addr holds the entry's address (MASQUERADE's
 * resolved, the packet's own to keep it), packed the entry's range
 * (without XFW_NAT_RANGED: that address alone, no flags), dport_sport the
 * packet's ports (dport << 16 | sport), ports 0 when it has none to
 * translate (an echo, a protocol without ports: the address only).
 * Returns the port (0 without ports), the address chosen in
 * np->range.addr_hi:addr, or XFW_NATR_NONE when the packet must be
 * dropped. A global function. */
__attribute__((noinline)) __u64 xfw_natr_snat(struct xfw_pkt *p, __u32 packed, __u32 dport_sport,
					      __u32 ports)
{
	__u32 sport = dport_sport & 0xffff;

	__u32 zero = 0;
	struct xfw_nat_pend *np = bpf_map_lookup_elem(&xfw_nat_scratch, &zero);
	struct xfw_nat_range *r;
	struct xfw_nat_key *k;
	__u64 to;
	int port;

	if (!p || !np)
		return XFW_NATR_NONE;
	r = &np->range;
	if (!(packed & XFW_NAT_RANGED))
		r->flags = 0;
	else if (xfw_natr_load(r, packed, p->fam))
		return XFW_NATR_NONE;
	if (!(r->flags & XFW_NATR_MAP_IPS)) {
		/* one address: SNAT's, MASQUERADE's */
		r->min_hi = r->max_hi = r->addr_hi;
		r->min_addr = r->max_addr = r->addr;
	}
	r->dst = 0;
	k = &np->key[XFW_NAT_PS];
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr_hi = p->dst_hi;
	k->saddr = p->dst_lo;
	k->sport = dport_sport >> 16;
	k->proto = p->proto;
	k->fam = p->fam;
	/* get_unique_tuple's step 1: the original tuple, in the range and
	 * free, is kept; else the source's current mapping, in the range and
	 * free (find_appropriate_src). Without ports (an echo, a protocol
	 * without ports) too: the source in the range is kept, the caller
	 * checks the tuple is free (difftest: an echo of the host's own
	 * address, inside the SNAT's range, had been given the hash's); and
	 * the source's mapping by its identifier (difftest seed 205: echoes
	 * of identifier 0 from one source kept the first one's address in
	 * the kernel, where xfw hashed each destination). */
	if (!(r->flags & XFW_NATR_RANDOM_ALL)) {
		if (xfw_natr_inaddr(r, p->src_hi, p->src_lo) &&
		    (!ports || !(r->flags & XFW_NATR_PROTO) || xfw_natr_in(r, sport))) {
			r->addr_hi = p->src_hi;
			r->addr = p->src_lo;
			if (!ports)
				return 0;
			k->daddr_hi = p->src_hi;
			k->daddr = p->src_lo;
			if (!xfw_snat_taken(np, sport))
				return sport;
		} else {
			to = xfw_natr_bysrc(np, p, sport, ports);
			if (to != XFW_NATR_NONE)
				return ports ? to : 0;
		}
	}
	xfw_natr_pick(r, p);
	if (!ports)
		return 0;
	k->daddr_hi = r->addr_hi;
	k->daddr = r->addr;
	port = xfw_natr_port(np, sport, 1);
	if (port < 0)
		return XFW_NATR_NONE;
	return (__u32)port;
}

#endif /* XFW_NAT_RANGE_H */
