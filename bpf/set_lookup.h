/* SPDX-License-Identifier: GPL-2.0 */
/*
 * set_lookup.h — -m set: a packet's set lookups (XFW_F_SETS) and the
 * counting of the set entries they find, as the kernel's set match and
 * ipset's types answer and count (ip_set_test, mtype_test,
 * ip_set_match_extensions). Each lookup of a generation (struct xfw_setlk,
 * built by the control plane from its stored sets) answers one set: from a
 * DXR table (lpm.h: hash:ip and hash:net without timeouts) or from a hash
 * table keyed by the parts the set type has (struct xfw_setkey), walked
 * over the present prefix lengths from the longest (xfw_set_hlookup).
 *
 * Conventions: the lookups run once per packet, before the bit-vector walk
 * (xfw_classify calls xfw_set_bits), and record what they found in a
 * per-CPU scratch (struct xfw_sethits) that the walk's counting probes
 * (xfw_set_probe) and xfw_set_count read afterwards. Stack: the deepest
 * call chain must fit in 512 bytes, hence the scratch maps and the
 * global functions.
 *
 * Includes: common.h, xfw_structs.h, parse.h (struct xfw_pkt), lpm.h,
 * bits.h, classify_structs.h, classify_maps.h, generation.h.
 */
#ifndef XFW_SET_LOOKUP_H
#define XFW_SET_LOOKUP_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "lpm.h"
#include "bits.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "generation.h"

/* xfw_set_port finds the protocol and port ipset's set types see in p
 * (ip_set_get_ip4_port, ip_set_get_ip6_port; tcp_udp: bitmap:port's
 * ip_set_get_ip_port, TCP and UDP only): the port of the direction for
 * TCP, UDP, UDPLite and SCTP, type << 8 | code for ICMP and ICMPv6, 0 for
 * other protocols (DCCP too). Returns 0 when the kernel's test fails:
 * protocol 0 or cut short, a header that is not whole, an IPv4 non-first
 * fragment of a port protocol, any IPv6 non-first fragment, IPv6 "no next
 * header". */
static __always_inline int xfw_set_port(struct xfw_pkt *p, int dst, int tcp_udp,
					__u16 *port, __u8 *proto)
{
	__u32 pr = p->proto, v;

	if (pr == 0 || pr > 255)
		return 0;
	if (tcp_udp && pr != IPPROTO_TCP && pr != IPPROTO_UDP)
		return 0;
	*proto = (__u8)pr;
	*port = 0;
	if (p->frag) {
		if (p->fam)
			return 0; /* ipv6_skip_exthdr: offset != 0 */
		switch (pr) {
		case IPPROTO_TCP:
		case IPPROTO_SCTP:
		case IPPROTO_UDP:
		case IPPROTO_UDPLITE:
		case IPPROTO_ICMP:
			return 0;
		}
		return 1;
	}
	switch (pr) {
	case IPPROTO_SCTP:
		/* get_port reads a whole 12-byte SCTP header (the parser's
		 * ports need 4). */
		if (p->l4_off == 0 || p->l4_end < p->l4_off + 12)
			return 0;
		/* fall through */
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
		v = dst ? p->dport : p->sport;
		if (v > 0xffff)
			return 0;
		*port = (__u16)v;
		return 1;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (p->icmp > 0xffff)
			return 0;
		*port = (__u16)p->icmp;
		return 1;
	case 59: /* IPv6 "no next header": ipv6_skip_exthdr fails */
		return !p->fam;
	}
	return 1;
}

/* xfw_hwalk_expired says whether entry v has timed out
 * (ip_set_timeout_expired: gone once its time has come; a shorter prefix
 * may still answer, as in mtype_test_cidrs). */
static __always_inline int xfw_hwalk_expired(struct xfw_hwalk *c, struct xfw_setval *v)
{
	if (!v->expires)
		return 0;
	if (!c->now)
		c->now = bpf_ktime_get_ns();
	return c->now >= v->expires;
}

/* xfw_hwalk_next returns the longest prefix length present below c->next
 * (c->next ≥ 1), or ~0 when none is: the walk visits present lengths only
 * (a miss in a hash:ip set tries /32 alone, not 33 lengths). */
static __always_inline __u32 xfw_hwalk_next(struct xfw_hwalk *c)
{
	__u32 top = c->next - 1, base;
	__u64 w;

	for (int k = XFW_SET_PLEN_WORDS - 1; k >= 0; k--) {
		base = (__u32)k * 64;
		if (base > top)
			continue;
		w = c->words[k];
		if (top - base < 63)
			w &= ~0ULL >> (63 - (top - base));
		if (w)
			return base + xfw_msb64(w);
	}
	return ~0u;
}

/* xfw_hwalk_mask sets c->key's address and prefix length to c->hi:c->lo
 * (an address of c->maxplen bits) masked to plen. */
static __always_inline void xfw_hwalk_mask(struct xfw_hwalk *c, __u32 plen)
{
	c->key.plen = plen;
	if (c->maxplen <= 32) {
		c->key.hi = 0;
		c->key.lo = plen ? c->lo & (0xffffffffULL << (32 - plen)) & 0xffffffffULL : 0;
	} else if (plen <= 64) {
		c->key.hi = c->hi & xfw_mask64(plen);
		c->key.lo = 0;
	} else {
		c->key.hi = c->hi;
		c->key.lo = c->lo & xfw_mask64(plen - 64);
	}
}

/* xfw_hwalk_step tries the next present prefix length: 1 stops the walk
 * (an answer, or none left). */
static long xfw_hwalk_step(__u32 i, void *unused)
{
	struct xfw_setval *v;
	struct xfw_hwalk *c;
	__u32 plen, zero = 0;
	void *m;

	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!c || !c->next)
		return 1;
	plen = xfw_hwalk_next(c);
	if (plen > c->maxplen)
		return 1;
	c->next = plen;
	xfw_hwalk_mask(c, plen);
	m = bpf_map_lookup_elem(&xfw_o_sethash, &c->idx);
	if (!m)
		return 1;
	v = bpf_map_lookup_elem(m, &c->key);
	if (v && !xfw_hwalk_expired(c, v)) {
		c->answer = v->answer;
		c->ctr = v->ctr;
		return 1;
	}
	if (c->key.ifindex) {
		/* hash:net,iface: another entry of this network ends the
		 * walk (see struct xfw_setval). */
		__u32 ifi = c->key.ifindex;

		c->key.ifindex = 0;
		v = bpf_map_lookup_elem(m, &c->key);
		c->key.ifindex = ifi;
		if (v && !xfw_hwalk_expired(c, v) && v->aux != ifi)
			return 1;
	}
	return 0;
}

/* xfw_set_hlookup answers lookup desc (struct xfw_setlk as maxplen << 24 |
 * kind << 16 | flags << 8) in the hash set table at outer index idx, as the
 * kernel's hash types test an element (mtype_test, mtype_test_cidrs): the
 * present prefix lengths of the address are tried from the longest, an
 * expired entry is skipped as if absent, the first live entry decides.
 * Returns XFW_SET_MEMBER, XFW_SET_NOMATCH or 0, with the answering entry's
 * counter (xfw_setval.ctr) above XFW_SET_ANSWER_BITS. A global function,
 * verified once rather than once per lookup of xfw_set_bits' loop (its
 * frame fits since the hooks' parse and LOG emission left their frames);
 * the walk is a bpf_loop, its step verified once. */
__attribute__((noinline)) __u32 xfw_set_hlookup(struct xfw_pkt *p, __u32 idx, __u32 desc,
						__u32 iif, __u32 oif)
{
	struct xfw_sethits *hits;
	struct xfw_hwalk *c;
	struct xfw_setval *v;
	__u32 kind = (desc >> 16) & 0xff, flags = (desc >> 8) & 0xff;
	__u32 ifindex = 0, zero = 0;
	__u16 port = 0;
	__u8 proto = 0;
	void *m;

	if (!p || idx >= XFW_NSLOTS * XFW_MAX_SETLOOKUPS)
		return 0;
	c = bpf_map_lookup_elem(&xfw_hwalk_scratch, &zero);
	if (!c)
		return 0;
	__builtin_memset(c, 0, sizeof(*c));
	c->idx = idx;
	c->maxplen = desc >> 24;
	if (c->maxplen > 128)
		return 0;
	m = bpf_map_lookup_elem(&xfw_o_sethash, &idx);
	if (!m)
		return 0;
	if (kind & (XFW_SETK_PORT | XFW_SETK_TCPUDP)) {
		/* The port is the first dimension of bitmap:port, else the
		 * second. */
		int dst = (kind & XFW_SETK_ADDR) ? !!(flags & XFW_SETLK_DST2)
						 : !!(flags & XFW_SETLK_DST1);

		if (!xfw_set_port(p, dst, kind & XFW_SETK_TCPUDP, &port, &proto))
			return 0;
		if (!(kind & XFW_SETK_PORT))
			proto = 0;
	}
	if (kind & XFW_SETK_IFACE) {
		/* The input interface for src, the output one for dst; none
		 * (OUTPUT's input, INPUT's output): no match. */
		ifindex = (flags & XFW_SETLK_DST2) ? oif : iif;
		if (!ifindex)
			return 0;
	}
	if (kind & XFW_SETK_ADDR) {
		if (flags & XFW_SETLK_DST1) {
			c->hi = p->dst_hi;
			c->lo = p->dst_lo;
		} else {
			c->hi = p->src_hi;
			c->lo = p->src_lo;
		}
	}
	c->key.plen = XFW_SETKEY_META;
	c->key.port = 0;
	v = bpf_map_lookup_elem(m, &c->key);
	if (v)
		c->words[0] = v->expires;
	if (c->maxplen >= 64) {
		c->key.port = 1;
		v = bpf_map_lookup_elem(m, &c->key);
		if (v)
			c->words[1] = v->expires;
		c->key.port = 2;
		v = bpf_map_lookup_elem(m, &c->key);
		if (v)
			c->words[2] = v->expires;
	}
	c->key.port = port;
	c->key.proto = proto;
	c->key.ifindex = ifindex;
	c->next = c->maxplen + 1;
	/* 129 prefix lengths at most: /128 to /0. */
	bpf_loop(129, xfw_hwalk_step, NULL, 0);
	/* kind and flags are done with: reused for the answer and the hit
	 * (a new variable would grow the frame, which is at its limit). */
	kind = c->answer;
	flags = c->ctr << XFW_SET_ANSWER_BITS | kind;
	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (hits)
		hits->hit[idx & (XFW_MAX_SETLOOKUPS - 1)] = flags;
	return kind;
}

/* xfw_set_dxr answers lookup idx (of lookup flags XFW_SETLK_*) from its
 * DXR tables (lpm.h) for p's destination or source: the tables' value, or
 * 0 (neither member nor nomatch) when they are missing. A global function:
 * the binary searches are verified once, not once per lookup of
 * xfw_set_bits' loop. */
__attribute__((noinline)) __u32 xfw_set_dxr(struct xfw_pkt *p, __u32 idx, __u32 flags)
{
	void *dir, *rng;

	if (!p)
		return 0;
	dir = xfw_inner(&xfw_o_setdir, idx);
	rng = xfw_inner(&xfw_o_setrng, idx);
	if (!dir || !rng)
		return 0;
	if (p->fam == 0)
		return xfw_lpm4_lookup(dir, rng, (__u32)((flags & XFW_SETLK_DST1) ? p->dst_lo : p->src_lo));
	if (flags & XFW_SETLK_DST1)
		return xfw_lpm6_lookup(dir, rng, p->dst_hi, p->dst_lo);
	return xfw_lpm6_lookup(dir, rng, p->src_hi, p->src_lo);
}

/* xfw_set_bits returns the packet's -m set results in slot: bit k set when
 * set condition k matches, as the kernel's set match (ip_set_test) answers
 * before any "!". Each lookup answers one set (a list:set condition has one
 * per member, OR-ed into its bit, as list_set_ktest tests its members in
 * turn): in a DXR table (hash:ip, hash:net without timeouts) the longest
 * matching prefix decides; in a hash table, xfw_set_hlookup. A nomatch
 * entry answers no, a plain one yes, and --return-nomatch swaps the two
 * (not in the set: no either way). A global function, verified once;
 * xfw_classify calls it before xfw_resolve, so its stack is gone before
 * the bit-vector walk. */
__attribute__((noinline)) __u32 xfw_set_bits(struct xfw_pkt *p, __u32 slot, __u32 iif, __u32 oif)
{
	struct xfw_family_cfg *fc;
	__u32 bits = 0, n, idx, v, zero = 0;
	struct xfw_sethits *hits;
	struct xfw_setlk lk;

	if (!p || slot >= XFW_NSLOTS)
		return 0;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (!fc || !hits)
		return 0;
	__builtin_memset(hits, 0, sizeof(*hits));
	n = fc->nsetlk;
	for (__u32 k = 0; k < XFW_MAX_SETLOOKUPS; k++) {
		if (k >= n)
			break;
		idx = slot * XFW_MAX_SETLOOKUPS + k;
		lk = fc->setlk[k];
		if (lk.kind != XFW_SETK_DXR) {
			v = xfw_set_hlookup(p, idx, (__u32)lk.maxplen << 24 | (__u32)lk.kind << 16 |
						     (__u32)lk.flags << 8, iif, oif);
		} else {
			v = xfw_set_dxr(p, idx, lk.flags);
		}
		/* --return-nomatch reverses the answer of an element of a set
		 * type with nomatch entries: a nomatch one matches, a plain one
		 * does not (ip_set_test; found by tests/e2e and xfw difftest
		 * against the kernel). The flag is set only for such sets. */
		if (lk.flags & XFW_SETLK_RETURN_NOMATCH)
			v = v == XFW_SET_NOMATCH;
		else
			v = v == XFW_SET_MEMBER;
		bits |= v << (lk.bit & (XFW_MAX_SETCONDS - 1));
	}
	return bits;
}

/* xfw_setctr_add counts a packet of len bytes n times on set counter ctr
 * (1 + its index; 0 counts nothing) of counters m (an array map, which
 * bounds the index). */
static __always_inline void xfw_setctr_add(void *m, __u32 ctr, __u32 n, __u32 len)
{
	struct xfw_counter *c;
	__u32 key;

	if (!m || !ctr)
		return;
	key = ctr - 1;
	c = bpf_map_lookup_elem(m, &key);
	if (c && n) {
		__sync_fetch_and_add(&c->packets, n);
		__sync_fetch_and_add(&c->bytes, (__u64)n * len);
	}
}

/* xfw_set_probe records a counting probe (XFW_EF_SETCOUNT, aux its .aux)
 * the walk met: the packet reached a rule's set match of condition aux &
 * XFW_SETCNT_COND. xfw_set_count applies them once the walk is over. A
 * global function with a small frame: it is called from the walk's step,
 * the deepest call chain (512 bytes of stack in all). Saturates at 65535
 * probes of one condition met by one packet (that many rules testing one
 * set condition, all reached: beyond any real ruleset). */
__attribute__((noinline)) int xfw_set_probe(__u32 aux)
{
	struct xfw_sethits *hits;
	__u32 zero = 0, c = aux & (XFW_MAX_SETCONDS - 1);
	__u16 *n;

	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (!hits)
		return 0;
	n = (aux & XFW_SETCNT_SKIPSUB) ? &hits->probes_nosub[c] : &hits->probes[c];
	if (*n < 0xffff)
		*n += 1;
	return 0;
}

/* xfw_mask_lookup returns k, a lookup below XFW_MAX_SETLOOKUPS, masked in
 * the register the accesses use (clang would drop a plain mask it knows to
 * change nothing, and index with a copy whose bounds the verifier lacks). */
static __always_inline __u32 xfw_mask_lookup(__u64 k)
{
	asm volatile("%[k] &= %[m]" : [k] "+r"(k) : [m] "i"(XFW_MAX_SETLOOKUPS - 1));
	return k;
}

/* xfw_set_count_at is xfw_set_count's step for lookup k: it counts what
 * lookup k found and returns done (the list:set conditions a member of
 * which matched) updated. A global function: verified once, not once per
 * lookup. */
__attribute__((noinline)) __u32 xfw_set_count_at(__u32 slot, __u32 k, __u32 len, __u32 done)
{
	struct xfw_family_cfg *fc;
	struct xfw_sethits *hits;
	__u32 zero = 0, c, all, sub, hit, matched, idx;

	if (slot >= XFW_NSLOTS || k >= XFW_MAX_SETLOOKUPS)
		return done;
	k = xfw_mask_lookup(k);
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	hits = bpf_map_lookup_elem(&xfw_sethits_scratch, &zero);
	if (!fc || !hits)
		return done;
	c = fc->setlk[k].bit & (XFW_MAX_SETCONDS - 1);
	sub = hits->probes[c];
	all = sub + hits->probes_nosub[c];
	/* A later member of a list is tested only while no earlier
	 * one matched. */
	if (!all || ((done >> c) & 1))
		return done;
	if (!(fc->setlk[k].flags & XFW_SETLK_MEMBER))
		sub = all;
	hit = hits->hit[k];
	if (hit >> XFW_SET_ANSWER_BITS) {
		idx = slot * XFW_MAX_SETLOOKUPS + k;
		xfw_setctr_add(bpf_map_lookup_elem(&xfw_o_setectr, &idx),
			       hit >> XFW_SET_ANSWER_BITS, sub, len);
	}
	/* As xfw_set_bits answers. */
	hit &= (1u << XFW_SET_ANSWER_BITS) - 1;
	if (fc->setlk[k].flags & XFW_SETLK_RETURN_NOMATCH)
		matched = hit == XFW_SET_NOMATCH;
	else
		matched = hit == XFW_SET_MEMBER;
	if (matched) {
		if (fc->setlk_lctr[k])
			xfw_setctr_add(xfw_inner(&xfw_o_setctr, slot), fc->setlk_lctr[k], all, len);
		done |= 1u << c;
	}
	return done;
}

/* xfw_set_count counts the packet (len bytes) on the set entries its
 * lookups found, once per counting probe the walk met, as the kernel's set
 * match updates the counters of the element it finds each time a rule's
 * match is evaluated (ip_set_match_extensions): the element found, even a
 * nomatch one, even when "!" then fails the rule; for a list:set, the
 * members are tested in order up to the first that matches
 * (list_set_ktest), each member's found element counted unless "!
 * --update-subcounters", and the list's own entry of the member that
 * matched counted. A global function, verified once. */
__attribute__((noinline)) int xfw_set_count(__u32 slot, __u32 len)
{
	struct xfw_family_cfg *fc;
	__u32 done = 0;

	if (slot >= XFW_NSLOTS)
		return 0;
	fc = bpf_map_lookup_elem(&xfw_cfg, &slot);
	if (!fc)
		return 0;
	for (__u32 k = 0; k < XFW_MAX_SETLOOKUPS; k++) {
		if (k >= fc->nsetlk)
			break;
		done = xfw_set_count_at(slot, k, len, done);
	}
	return 0;
}

#endif /* XFW_SET_LOOKUP_H */
