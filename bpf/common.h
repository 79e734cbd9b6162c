/* SPDX-License-Identifier: GPL-2.0 */
/*
 * common.h — constants shared by every stage of xfw's data plane and by
 * user space (internal/compiler and internal/dataplane mirror them).
 *
 * Conventions for all BPF files of xfw:
 *  - One .c file per BPF object: xfw.c (the XDP and TC hooks, one object
 *    loaded once per namespace), ct_clock.c (the connection tables' clock,
 *    loaded on its own by user space) and layouts.c (the BTF of the layouts
 *    user space shares, never loaded). Headers are split by concern: a
 *    stage's logic in <stage>.h (and its parts), its own layouts in
 *    <stage>_structs.h, its maps in <stage>_maps.h. Each header says at its
 *    top what it owns and what it includes; each includes what it uses.
 *  - Every map key and value layout user space reads or writes lives in
 *    xfw_structs.h; a change there is a change in its Go mirror
 *    (internal/dataplane: layout.go and the files that read the maps), which
 *    the Go test TestLayoutMirrors checks field by field against the BTF of
 *    the built objects.
 *  - Families: index 0 is IPv4 (iptables), index 1 is IPv6 (ip6tables). Each
 *    family has its own generation slots (classify_maps.h), so replacing one
 *    family's ruleset leaves the other's maps untouched.
 *  - Chains: index 0 INPUT, 1 FORWARD, 2 OUTPUT (XFW_CHAIN_*).
 *  - Addresses are kept as two host-order 64-bit halves (hi, lo) so IPv4 and
 *    IPv6 share the range search; an IPv4 address is hi = 0, lo = addr.
 *  - Loops are bounded by a compile-time constant or run under bpf_loop().
 *  - Field values that are not numbers of the field's domain use the
 *    sentinels XFW_V_NONE (the packet has no such header: non-TCP, later
 *    fragment) and XFW_V_TRUNC (the header is cut short: iptables "hotdrops"
 *    such a packet; the compiler emits uncounted DROP entries that match
 *    exactly where netfilter would hotdrop).
 */
#ifndef XFW_COMMON_H
#define XFW_COMMON_H

#include <linux/types.h>
#include <linux/bpf.h>

/* Address families of bpf_fib_lookup requests (linux/socket.h's values; a
 * BPF program cannot include the libc headers that define them). */
#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* Rules per chunk: a chunk is 64 words of 64 bits. Classification ANDs the
 * chunks of every active field; a per-chunk summary word (bit j set when
 * word j is non-zero) lets it skip empty words. */
#define XFW_CHUNK_WORDS 64
#define XFW_CHUNK_BITS (XFW_CHUNK_WORDS * 64)
/* At most 1024 chunks: 4,194,304 flattened entries per family. Nothing in
 * the walk is sized by it (it bounds a region walk's end); the walk's
 * steps are bounded by the generation's max_iters (bpf_loop's 2^23). */
#define XFW_MAX_CHUNKS 1024

/* Upper bound on non-terminal actions (LOG, jumps, RETURN, counters-only
 * rules) a packet may meet on one path; the compiler rejects rulesets that
 * could exceed it. */
#define XFW_MAX_HOPS 1024

enum xfw_chain {
	XFW_CHAIN_INPUT = 0,
	XFW_CHAIN_FORWARD = 1,
	XFW_CHAIN_OUTPUT = 2,
	XFW_NCHAINS = 3,
};

/* Classification fields. Bit i of xfw_family_cfg.active is set when field i
 * takes part in classification. */
enum xfw_field {
	XFW_F_SRC = 0,      /* source address (range search) */
	XFW_F_DST = 1,      /* destination address (range search) */
	XFW_F_PROTO = 2,    /* transport protocol (direct array, 256) */
	XFW_F_SPORT = 3,    /* source port (direct array) */
	XFW_F_DPORT = 4,    /* destination port (direct array) */
	XFW_F_TCPFLAGS = 5, /* TCP flags byte (direct array) */
	XFW_F_ICMP = 6,     /* ICMP type << 8 | code (direct array) */
	XFW_F_IIF = 7,      /* input interface (hash by ifindex) */
	XFW_F_OIF = 8,      /* output interface (hash by ifindex) */
	XFW_F_FRAG = 9,     /* 1 for second and later fragments (direct array) */
	XFW_F_LEN = 10,     /* layer-3 length (direct array) */
	XFW_F_TTL = 11,     /* IPv4 TTL / IPv6 hop limit (direct array) */
	XFW_F_MAC = 12,     /* Ethernet source address (hash) */
	XFW_F_SETS = 13,    /* -m set results, bit k for set condition k
			     * (direct array, 256: xfw_set_bits) */
	XFW_F_CT = 14,      /* connection tracking facts (direct array,
			     * 65536: XFW_CTV_*, ct.h) */
	XFW_F_CTOSRC = 15,  /* the connection's original source address
			     * (range search; 0 without a connection) */
	XFW_F_CTODST = 16,  /* its original destination address */
	XFW_F_CTOSPORT = 17, /* its original source port (ICMP: the id) */
	XFW_F_CTODPORT = 18, /* its original destination port (ICMP:
			      * type << 8 | code) */
	XFW_F_CTRSPORT = 19, /* its reply tuple's source port */
	XFW_F_CTRDPORT = 20, /* its reply tuple's destination port (ICMP:
			      * the reply's type << 8 | code) */
	XFW_F_ADDRTYPE = 21, /* route types of the addresses (direct array,
			      * 1024: enum xfw_addrtype, local.h) */
	XFW_F_PKTTYPE = 22,  /* skb->pkt_type: PACKET_HOST, _BROADCAST,
			      * _MULTICAST (direct array, 4) */
	XFW_F_TOS = 23,      /* IPv4 TOS / IPv6 traffic class byte (direct
			      * array, 256: -m dscp, tos, ecn) */
	XFW_F_TCPMSS = 24,   /* TCP MSS option value, XFW_V_NONE without
			      * one, XFW_V_TRUNC cut short (direct array:
			      * tcpopt.h) */
	XFW_F_EXT6 = 25,     /* IPv6 extension header matches' answers
			      * (direct array, 2048: enum xfw_ext6, ip6ext.h) */
	XFW_F_HDR4 = 26,     /* sctp, dccp, esp, ah, tcp option conditions'
			      * answers (direct array, 65536: enum
			      * xfw_hdr4, hdr4.h) */
	XFW_F_PHYSIN = 27,   /* bridge ports of -m physdev (hash by ifindex,
			      * XFW_PHYS_*: bridge.h) */
	XFW_F_PHYSOUT = 28,
	XFW_NFIELDS = 29,
};

/* XFW_F_PHYSIN / XFW_F_PHYSOUT values besides a port's ifindex
 * (internal/compiler physdev.go): no bridge information (both fields),
 * no port, a port the data plane cannot name. */
#define XFW_PHYS_NONE 0
#define XFW_PHYS_NULL 0xfffffffdu
#define XFW_PHYS_ANYPORT 0xfffffffeu

/* The XFW_F_HDR4 value (internal/compiler terms_hdr4.go): bit k the answer
 * of the generation's condition k (xfw_family_cfg.h4), bit
 * XFW_H4_HOT_SHIFT + k set when it hotdrops the packet, and the
 * short-header bits of sctp and dccp first fragments. */
enum xfw_hdr4 {
	XFW_H4_SCTP = 0,          /* condition kinds */
	XFW_H4_DCCP = 1,
	XFW_H4_ESP = 2,
	XFW_H4_AH = 3,
	XFW_H4_TCPOPT = 4,
	XFW_H4_HOT_SHIFT = 7,     /* = XFW_MAX_HDR4CONDS */
	XFW_H4_SHORT_SCTP = 14,
	XFW_H4_SHORT_DCCP = 15,
	/* struct xfw_h4cond.flags and .inv: what is tested (inverted) */
	XFW_H4F_SPORTS = 0x01,
	XFW_H4F_DPORTS = 0x02,
	XFW_H4F_TYPES = 0x04,     /* sctp chunk types, dccp packet types, SPI */
	XFW_H4F_OPTION = 0x08,    /* dccp, tcp option */
	/* struct xfw_h4cond.mtype: SCTP_CHUNK_MATCH_* */
	XFW_H4M_ANY = 1,
	XFW_H4M_ALL = 2,
	XFW_H4M_ONLY = 4,
};
/* Transport header conditions per generation (compiler.MaxHdr4Conds). */
#define XFW_MAX_HDR4CONDS 7

/* The XFW_F_EXT6 value: bit k the answer of the generation's IPv6
 * extension header condition k (-m rt, -m frag, -m ah; xfw_family_cfg.ext6),
 * bit XFW_EXT6_HOT_SHIFT + kind set when matches of that kind hotdrop the
 * packet (internal/compiler terms_ip6ext.go). */
enum xfw_ext6 {
	XFW_EXT6_RT = 0,          /* condition kinds */
	XFW_EXT6_FRAG = 1,
	XFW_EXT6_AH = 2,
	XFW_EXT6_HBH = 3,
	XFW_EXT6_DST = 4,
	XFW_EXT6_MH = 5,
	XFW_EXT6_IP6HDR = 6,      /* -m ipv6header */
	XFW_EXT6_NKINDS = 7,
	XFW_EXT6_NWALK = 5,       /* kinds found by the ipv6_find_hdr walk */
	XFW_EXT6_HOT_SHIFT = 8,   /* = XFW_MAX_EXT6CONDS */
	/* struct xfw_ext6cond.flags: what is tested */
	XFW_E6_TYPE = 0x01,       /* rt: the type */
	XFW_E6_LEN = 0x02,        /* rt: the length (ah: len != 0 or inverted) */
	XFW_E6_RES = 0x04,        /* rt, frag, ah: the reserved field */
	XFW_E6_ADDRS = 0x08,      /* rt: type-0 addresses */
	XFW_E6_NSTRICT = 0x10,    /* rt: not a strict list */
	XFW_E6_FIRST = 0x20,      /* frag: offset 0 */
	XFW_E6_MORE = 0x40,       /* frag: more fragments */
	XFW_E6_LAST = 0x80,       /* frag: no more fragments */
	XFW_E6_OPTS = 0x08,       /* hbh, dst: the options (ext6_opt[addr0]) */
	XFW_E6_SOFT = 0x10,       /* ipv6header: --soft */
	/* struct xfw_ext6cond.inv */
	XFW_E6I_RANGE = 0x1,      /* the range (segments left, id, SPI) */
	XFW_E6I_TYPE = 0x2,
	XFW_E6I_LEN = 0x4,
};
/* IPv6 extension header conditions per generation (compiler.MaxExt6Conds)
 * and -m rt addresses among them all. */
#define XFW_MAX_EXT6CONDS 8
#define XFW_EXT6_MAX_ADDRS 16
/* --hbh-opts / --dst-opts options among all conditions. */
#define XFW_EXT6_MAX_OPTS 32

/* The XFW_F_ADDRTYPE value (-m addrtype): the source address's facts in
 * bits 0-4, the destination's in bits 5-9 (internal/compiler
 * terms_type.go says what the compiler makes of them).
 *  IPv4: the route type inet_dev_addr_type gives (RTN_UNICAST for an
 *    address without a local-table route), and whether that route's
 *    device is the packet's input / output device (set for the types no
 *    route decides: 0.0.0.0, 255.255.255.255, 224.0.0.0/4).
 *  IPv6: the class ipv6_addr_type gives, and whether the local table's
 *    route is a local or an anycast one. */
enum xfw_addrtype {
	XFW_AT_BITS = 5,         /* bits of one address's facts */
	XFW_AT_DST_SHIFT = 5,    /* where the destination's start */
	XFW_AT_RTN = 0x7,        /* IPv4: the route type (RTN_*) */
	XFW_AT_VIA_IN = 0x8,     /* IPv4: through the input device */
	XFW_AT_VIA_OUT = 0x10,   /* IPv4: through the output device */
	XFW_AT_CLASS = 0x3,      /* IPv6: the address class: */
	XFW_AT_CLASS_OTHER = 0,  /*   IPv4-mapped: neither of the others */
	XFW_AT_CLASS_UNICAST = 1,
	XFW_AT_CLASS_MULTICAST = 2,
	XFW_AT_CLASS_ANY = 3,    /*   :: */
	XFW_AT6_LOCAL = 0x4,     /* IPv6: a local route (RTF_LOCAL) */
	XFW_AT6_ANYCAST = 0x8,   /* IPv6: an anycast route */
};

/* -m set: distinct set conditions (set, directions, --return-nomatch) of
 * one generation, each a bit of XFW_F_SETS (compiler.MaxSetConds). */
#define XFW_MAX_SETCONDS 8
/* Set lookups per generation: a condition is one lookup, or one per member
 * of a list:set, OR-ed into its bit (internal/dataplane maxSetLookups). */
#define XFW_MAX_SETLOOKUPS 16
/* struct xfw_setlk.flags. */
#define XFW_SETLK_DST1 1           /* first dimension: destination (else source) */
#define XFW_SETLK_RETURN_NOMATCH 2 /* a nomatch entry matches, a plain one not
				    * (set only for types with nomatch) */
#define XFW_SETLK_DST2 4           /* second dimension: destination / output
				    * interface (else source / input) */
#define XFW_SETLK_MEMBER 8         /* a member of a list:set: its element
				    * counters are sub-counters */
/* struct xfw_setlk.kind: 0 is a DXR table (bpf/lpm.h, hash:ip and hash:net
 * without timeouts); else a hash map (struct xfw_setkey) whose key holds
 * the parts these bits name. */
#define XFW_SETK_DXR 0
#define XFW_SETK_ADDR 1     /* the address, masked to each present prefix */
#define XFW_SETK_PORT 2     /* proto and port (ip_set_get_ip4/6_port) */
#define XFW_SETK_IFACE 4    /* the interface's ifindex (hash:net,iface) */
#define XFW_SETK_TCPUDP 8   /* port of TCP and UDP only, proto 0 in the key
			     * (bitmap:port: ip_set_get_ip_port) */
/* Values of the sets' tables (internal/dataplane: SetMember...). */
#define XFW_SET_MEMBER 1
#define XFW_SET_NOMATCH 2

/* -j SET (settarget.h; internal/compiler settarget.go). */
enum xfw_settarget_arg {
	/* XFW_PROBE_SETTARGET's .arg: 1 + the written set of --add-set in
	 * the low byte, of --del-set in the next (0: none), then: */
	XFW_SETT_DEL_SHIFT = 8,
	XFW_SETT_EXIST = 1 << 16,   /* --exist */
	XFW_SETT_ADD_DST = 1 << 17, /* --add-set's address: the destination */
	XFW_SETT_DEL_DST = 1 << 18, /* --del-set's address: the destination */
	XFW_SETT_ADD_DST2 = 1 << 19, /* --add-set's port: the destination's */
	XFW_SETT_DEL_DST2 = 1 << 20, /* --del-set's port: the destination's */
	XFW_SETT_ADD_DIM2 = 1 << 21, /* --add-set names two dimensions or more */
	XFW_SETT_DEL_DIM2 = 1 << 22, /* --del-set names two dimensions or more */
	/* XFW_PROBE_SETMATCH's .arg: 1 + the written set in the low byte,
	 * then: */
	XFW_SETM_DST = 1 << 8,            /* the destination (else the source) */
	XFW_SETM_RETURN_NOMATCH = 1 << 9, /* --return-nomatch */
	XFW_SETM_INVERT = 1 << 10,        /* ! --match-set */
	XFW_SETM_DST2 = 1 << 11,          /* the destination's port (else the source's) */
	XFW_SETM_DIM2 = 1 << 12,          /* the match names two dimensions or more */
};
/* A written set's table has a meta key of its own (plen XFW_SETKEY_META,
 * port XFW_SETW_META): value.expires the set's default timeout in seconds,
 * .aux hash:ip's prefix length (its netmask), .answer these bits
 * (internal/dataplane setwrite.go). */
enum xfw_setw_meta {
	XFW_SETW_META = 3,
	XFW_SETW_TIMEOUT = 1, /* the set has timeouts */
	XFW_SETW_NET = 2,     /* hash:net: the longest prefix length present */
	XFW_SETW_PORT = 4,    /* hash:ip,port, hash:net,port: a second dimension,
			       * the protocol and port (xfw_set_port) */
	/* A net type's counts of elements per prefix length (meta keys
	 * of port XFW_SETW_NDP + plen and XFW_SETW_NCP + plen, the count
	 * in value.expires, signed): the data plane's adds less its
	 * deletes, and the control plane's (settarget.h). */
	XFW_SETW_NDP = 0x100,
	XFW_SETW_NCP = 0x200,
	/* A written set's present prefix lengths marked by the data plane
	 * (meta keys of port XFW_SETW_MDP + w, w < XFW_SET_PLEN_WORDS,
	 * atomic ORs): the meta keys of port w are the control plane's,
	 * which it rewrites whole, so each writer has words of its own and
	 * neither can lose a bit the other sets; the written set's lookups
	 * OR the two (settarget.h xfw_setw_words). */
	XFW_SETW_MDP = 0x300,
};

/* Sentinel values of the port, TCP flags and ICMP fields. */
#define XFW_V_NONE 65536
#define XFW_V_TRUNC 65537
/* XFW_V_SHORT + port: the classification's view of a TCP or UDP header
 * cut short after its ports (xfw_ports_view, classify.h): multiport reads
 * the port, the tcp and udp matches hotdrop the packet. */
#define XFW_V_SHORT 65538
/* The Ethernet source of a packet received on a device that is not
 * Ethernet (loopback): beyond every 48-bit address, matched by no mac
 * condition, inverted or not, as in the kernel's mac match. */
#define XFW_MAC_NONE (1ULL << 48)
/* Sentinels of the 8-bit TCP flags field. */
#define XFW_FLAGS_NONE 256
#define XFW_FLAGS_TRUNC 257
/* XFW_FLAGS_LATER + b: a TCP later fragment whose bytes at the kernel's
 * transport offset give flags byte b (ecn reads it; parse.h). */
#define XFW_FLAGS_LATER 258

/* Entry actions. */
enum xfw_action {
	XFW_ACT_ACCEPT = 0,
	XFW_ACT_DROP = 1,
	XFW_ACT_REJECT = 2,
	/* Count (and log), then go on searching at entry .next. */
	XFW_ACT_CONTINUE = 3,
	/* nat PREROUTING's DNAT (nat.h): .next the new IPv4 address (host
	 * order), .aux the new port (0: unchanged). */
	XFW_ACT_DNAT = 4,
	/* nat POSTROUTING's SNAT and MASQUERADE (nat.h): accept, the source
	 * translated; .next the new IPv4 address (0: the output interface's,
	 * MASQUERADE), .aux the new port (0: chosen as the kernel does). */
	XFW_ACT_SNAT = 5,
	/* A jump or goto (classify.h): count (and log) like CONTINUE, push
	 * the position after the entry on the walk's call stack, search on
	 * from .next, the first entry of the user chain's region. .aux
	 * XFW_CALL_EXIT_NEXT: the entry after it is its XFW_ACT_EXIT, which
	 * a RETURN resumes past. */
	XFW_ACT_CALL = 6,
	/* A region's last entry (every packet matches it): pop the call
	 * stack and search on from the position popped. */
	XFW_ACT_RETURN = 7,
	/* ACCEPT in a region of a table's chain other tables follow in the
	 * walk: count, empty the call stack, search on from the position the
	 * outermost CALL pushed (its XFW_ACT_EXIT entry), unwinding. */
	XFW_ACT_UNWIND = 8,
	/* After a CALL of such a table's chain (every packet matches it,
	 * uncounted): an unwinding walk goes on at .next, the next table's
	 * chain; any other at the entry after it. */
	XFW_ACT_EXIT = 9,
	/* The point of a walk where the kernel routes the packet again (after
	 * PREROUTING; after mangle OUTPUT), reached by a packet whose mark
	 * changed since its route was made (a XFW_PROBE_MARKMOVED probe
	 * before it): the walk ends; the hook routes the packet with its mark
	 * and resumes at .next (xfw_family_cfg.reroute) in the chain that
	 * route picks (xfw.c, mark_kernel.h). */
	XFW_ACT_REROUTE = 10,
};

/* Depth of the walk's call stack (compiler.MaxCalls): jumps nesting
 * deeper are refused by the compiler. */
#define XFW_MAX_CALLS 64

/* Entry flags. */
/* An XFW_ACT_CALL's .aux: its XFW_ACT_EXIT entry follows it
 * (compiler.CallExitNext). The call stack then keeps the position after
 * the CALL with XFW_RET_PAST_EXIT: a RETURN resumes one entry further,
 * past the exit entry (which would only send a walk that is not
 * unwinding on to the next entry, one more step), an unwinding walk at
 * the exit entry itself. Positions are below 2^23 (XFW_MAX_CHUNKS *
 * XFW_CHUNK_BITS). */
#define XFW_CALL_EXIT_NEXT 1
#define XFW_RET_PAST_EXIT (1u << 31)

#define XFW_EF_COUNT 0x01   /* increment counters[.rule] */
#define XFW_EF_LOG 0x02     /* emit a LOG event (options at logcfg[.aux]) */
/* The rule's own entry drops, uncounted, a packet netfilter would hotdrop
 * there (the compiler merged the hotdrop into it): */
#define XFW_EF_HOTDROP_L4 0x04    /* transport header cut short */
#define XFW_EF_HOTDROP_PROTO 0x08 /* IPv6 extension headers unwalkable */
/* A set counting probe (a CONTINUE entry of no rule): the packet reached a
 * rule's set match .aux & XFW_SETCNT_COND (the set condition), so the set
 * entries its lookups found count it, as the kernel's set match updates
 * the counters of the element it finds (ip_set_match_extensions). */
#define XFW_EF_SETCOUNT 0x10
#define XFW_SETCNT_COND 0xff
#define XFW_SETCNT_SKIPSUB 0x100 /* "! --update-subcounters" */
/* A probe (a CONTINUE entry of no rule): the packet reached a rule's match
 * whose answer the walk must ask in order (it changes state, as a limit
 * match's token bucket, or is no classification field); .aux is the
 * probe's index in the slot's xfw_o_probe (struct xfw_probe, probe.h).
 * True, the search goes on at the next entry (the rule), false, at .next
 * (past the rule). */
#define XFW_EF_PROBE 0x20
/* The entry of a rule whose target changes the packet and continues (-j
 * MARK): the walk runs probe .aux for its effect (mark.h), counts the
 * rule and goes on at .next. */
#define XFW_EF_ACT 0x40
/* A NAT entry (XFW_ACT_DNAT, XFW_ACT_SNAT) with a range or random flags:
 * .aux is the index of its XFW_PROBE_NATRANGE in the slot's xfw_o_probe
 * (nat_range.h), .next the address as without the flag. */
#define XFW_EF_NATRANGE 0x80

/* What a probe evaluates (struct xfw_probe .kind; probe.h dispatches). */
enum xfw_probe_kind {
	XFW_PROBE_LIMIT = 0, /* -m limit: a token from bucket .arg (limit.h) */
	XFW_PROBE_RECENT,    /* -m recent: the slot's recent match .arg (recent.h) */
	XFW_PROBE_HASHLIMIT, /* -m hashlimit: table and rule bits in .arg
			      * (hashlimit.h) */
	XFW_PROBE_PRED,      /* string, u32, time: predicate .arg's answer (pred.h) */
	XFW_PROBE_CONNLIMIT, /* -m connlimit: .arg packs the match (connlimit.h) */
	XFW_PROBE_CTEXPIRE,  /* --ctexpire: range .arg (ctexpire.h) */
	XFW_PROBE_CPU,       /* -m cpu: .arg the CPU, bit 31 "!" (probe.h) */
	XFW_PROBE_STATISTIC, /* -m statistic: .arg XFW_STAT_*, .val, .mask, .count (mark.h) */
	XFW_PROBE_MARK,      /* -m mark: (mark & .mask) == .val, .arg inverts (mark.h) */
	XFW_PROBE_SETMARK,   /* -j MARK (an XFW_EF_ACT entry): mark = (mark & ~.mask) ^ .val */
	XFW_PROBE_CONNMARK,  /* -m connmark: (ctmark & .mask) == .val, .arg inverts (connmark.h) */
	XFW_PROBE_SETCONNMARK, /* -j CONNMARK (an XFW_EF_ACT entry): .arg XFW_CONNMARK_* (connmark.h) */
	XFW_PROBE_OWNER,     /* -m owner: .arg XFW_OWNER_*, uid range .val-.mask, gid range .count (owner.h) */
	XFW_PROBE_MANGLE,    /* TCPMSS, DSCP, TOS, TTL, HL, CT --notrack, NOTRACK (an
			      * XFW_EF_ACT entry): .arg XFW_MGOP_*, .val, .mask (mangle.h) */
	XFW_PROBE_MARKMOVED, /* mark != the mark the packet was routed with (xfw_pending.route_mark); or, per arg, the TTL, the TOS (XFW_REROUTE_*) */
	XFW_PROBE_NATRANGE,  /* never asked: a NAT entry's range (XFW_EF_NATRANGE): .arg the
			      * NF_NAT_RANGE_* flags, .val-.mask the addresses, .count
			      * min port << 16 | max port (nat_range.h) */
	XFW_PROBE_CTNAT,     /* --ctstate with SNAT or DNAT: .val the states, .arg inverts (ctnat.h) */
	XFW_PROBE_CTREPL,    /* --ctreplsrc, --ctrepldst with NAT: .arg XFW_CTREPL_*, .val/.mask the
			      * source, .count the destination << 32 | its mask (ctnat.h) */
	/* IPv6 NAT (nat_range.h). */
	XFW_PROBE_NATADDR6,  /* never asked: an IPv6 NAT range's address, named by its
			      * XFW_PROBE_NATRANGE's .val or .mask: .val:.mask the high 64
			      * bits, .count the low */
	XFW_PROBE_SETTARGET, /* -j SET (an XFW_EF_ACT entry): .arg XFW_SETT_*, .val the
			      * --timeout (settarget.h) */
	XFW_PROBE_SETMATCH,  /* -m set on a set SET targets write: .arg XFW_SETM_* (settarget.h) */
	XFW_NPROBE_KINDS,
};

/* xfw_probe's answer (besides 1 true and 0 false) that drops the packet at
 * once, uncounted: the kernel's hotdrop (a full hashlimit table, a
 * connlimit list that cannot be allocated). */
#define XFW_PROBE_HOTDROP 2

/* XFW_PROBE_MARKMOVED's .arg bits: the TTL, the TOS the walk began with
 * changed too (internal/compiler RerouteTTL, RerouteTOS). */
#define XFW_REROUTE_TTL (1u << 0)
#define XFW_REROUTE_TOS (1u << 1)

/* XFW_PROBE_SETCONNMARK's .arg: the mode (XT_CONNMARK_*) in the low byte,
 * the shift's direction and width above it (internal/compiler connmark.go). */
enum xfw_connmark_arg {
	XFW_CONNMARK_SET = 0,
	XFW_CONNMARK_SAVE = 1,
	XFW_CONNMARK_RESTORE = 2,
	XFW_CONNMARK_MODE = 0xff,
	XFW_CONNMARK_SHIFT_RIGHT = 0x100,
	XFW_CONNMARK_SHIFT_BITS = 31,   /* the width's mask, after the shift */
	XFW_CONNMARK_SHIFT_POS = 16,
};

/* XFW_PROBE_OWNER's .arg: the options given (XT_OWNER_* bits) in the low
 * byte, those inverted in the next (internal/compiler owner.go); and the
 * facts the TC hook read of the packet's socket (struct xfw_pkt .owner). */
enum xfw_owner_bits {
	XFW_OWNER_UID = 1,
	XFW_OWNER_GID = 2,
	XFW_OWNER_SOCKET = 4,
	XFW_OWNER_INV_SHIFT = 8,
	XFW_OWNER_F_SOCKET = 1, /* a full socket with a struct socket */
	XFW_OWNER_F_FILE = 2,   /* ... and a file: .owner_uid/.owner_gid hold */
};

/* XFW_PROBE_MANGLE's .arg: the rewrite in the low byte (internal/compiler
 * mangle.go), and for the TTL ops whether the rule sees the TTL before
 * ip_forward's decrement while the walk holds it after (PREROUTING of a
 * forwarded packet). */
enum xfw_mangle_op {
	XFW_MGOP_TOS = 0,      /* tos = (tos & ~.mask) ^ .val (DSCP, TOS) */
	XFW_MGOP_TTL_SET = 1,  /* TTL / hop limit = .val */
	XFW_MGOP_TTL_INC = 2,  /* + .val, at most 255 */
	XFW_MGOP_TTL_DEC = 3,  /* - .val, at least 0 */
	XFW_MGOP_MSS = 4,      /* TCPMSS --set-mss .val */
	XFW_MGOP_CLAMP = 5,    /* TCPMSS --clamp-mss-to-pmtu */
	XFW_MGOP_NOTRACK = 6,  /* CT --notrack, NOTRACK */
	XFW_MGOP_MASK = 0xff,
	XFW_MGOP_PREDEC = 0x100,
};

/* struct xfw_pkt .mangle: what the walk's rewrites leave for the hook to
 * write into the packet after an ACCEPT (mangle_apply.h). */
#define XFW_MG_TOS 0x1   /* .tos */
#define XFW_MG_TTL 0x2   /* .ttl (the walk's view: one below the wire's
			  * in a forwarded packet's walk) */
#define XFW_MG_MSS 0x4   /* lower the MSS option to .mss_new */
#define XFW_MG_CLAMP 0x8 /* ... and to the path MTU's */
#define XFW_MG_GROWN 0x10 /* the walk counts it with the MSS option the
			   * hook adds (mangle.h) */

/* struct xfw_log_event .view (and the walk's .log_views): the packet's
 * TOS and TTL as the walk's rewrites left them when a LOG entry was met,
 * which its line prints (the event's frame is the packet as it came):
 * set only when a rewrite came before the entry. */
#define XFW_LOGV_SET 0x80000000u   /* the fields below hold the walk's */
#define XFW_LOGV_GROWN 0x40000000u /* TCPMSS added an MSS option: 4 bytes more */
#define XFW_LOGV_TTL 0x20000000u   /* bits 0-7: the walk's TTL (hop limit) */
#define XFW_LOGV_TOS 0x10000000u   /* bits 8-15: its TOS (traffic class) */
#define XFW_LOGV_FWD 0x08000000u   /* FORWARD's walk: the TTL one below the wire's */

/* struct xfw_family_cfg .mss_targets. */
#define XFW_MSST_ANY 0x1   /* some rule's target is TCPMSS */
#define XFW_MSST_CLAMP 0x2 /* ... with --clamp-mss-to-pmtu */

/* XFW_PROBE_STATISTIC's .arg bits. */
#define XFW_STAT_INVERT 0x1 /* XT_STATISTIC_INVERT */
#define XFW_STAT_NTH 0x2    /* nth mode (else random) */

/* REJECT types (entry .aux for XFW_ACT_REJECT). */
enum xfw_reject {
	XFW_RJ_ICMP_NET_UNREACH = 0,
	XFW_RJ_ICMP_HOST_UNREACH,
	XFW_RJ_ICMP_PROT_UNREACH,
	XFW_RJ_ICMP_PORT_UNREACH,
	XFW_RJ_ICMP_NET_PROHIBITED,
	XFW_RJ_ICMP_HOST_PROHIBITED,
	XFW_RJ_ICMP_ADMIN_PROHIBITED,
	XFW_RJ_TCP_RESET,
	XFW_RJ_ICMP6_NO_ROUTE,
	XFW_RJ_ICMP6_ADM_PROHIBITED,
	XFW_RJ_ICMP6_ADDR_UNREACH,
	XFW_RJ_ICMP6_PORT_UNREACH,
	XFW_RJ_ICMP6_POLICY_FAIL,
	XFW_RJ_ICMP6_REJECT_ROUTE,
	XFW_RJ_COUNT,
};

#define XFW_NO_RULE 0xffffffffu

/* LOG: bytes of a rule's prefix (struct xfw_logcfg) and bytes of the frame
 * a LOG event carries (struct xfw_log_event). */
#define XFW_LOG_PREFIX_LEN 64
#define XFW_LOG_SNAP 256
/* NFLOG: an event passing more of its frame than XFW_LOG_SNAP bytes
 * reserves room for the smallest of these that holds it (the reservation's
 * size must be a constant; powers of two, so a mask bounds the copy): a
 * standard frame, a jumbo frame, and the most an event carries (a longer
 * packet, such as a GSO packet at TC, is passed on cut there). */
#define XFW_NFLOG_SNAP_STD 2048
#define XFW_NFLOG_SNAP_JUMBO 16384
#define XFW_NFLOG_SNAP_MAX 32768
/* struct xfw_logcfg .flags of an NFLOG rule (the kernel's XT_LOG_NFLOG
 * bit, which LOG never sets): its events go to the NFLOG ring. */
#define XFW_LOG_NFLOG 0x10
/* struct xfw_logcfg .flags: --log-uid (the kernel's XT_LOG_UID). */
#define XFW_LOG_UID 0x08
/* struct xfw_logcfg .flags: the entry is in a PREROUTING chain
 * (ir.LogViewPrerouting): the line is the packet's as received. */
#define XFW_LOG_VIEW_PRE 0x40
/* The event rings of xfw_logrings. */
enum xfw_ring {
	XFW_RING_LOG = 0,
	XFW_RING_NFLOG = 1,
	XFW_NRINGS,
};

/* Room for the list of active fields (XFW_NFIELDS rounded up to 4). */
#define XFW_FIELD_LIST 32
/* Address fields (range search): SRC, DST, CTOSRC, CTODST. */
#define XFW_NADDR 4

/* Generation slots: slot = family index * 2 + bank (see classify_maps.h). */
#define XFW_NSLOTS 4
#define XFW_NO_SLOT 0xffffffffu

/* struct xfw_ifinfo.flags. */
#define XFW_IF_NOL2 0x01 /* no Ethernet header (loopback keeps one) */
/* A bridge whose IPv4 (IPv6) packets br_netfilter passes to iptables
 * (bridge-nf-call-iptables, -ip6tables: bridge.h), and a port of one. */
#define XFW_IF_BRNF4 0x02
#define XFW_IF_BRNF6 0x04
#define XFW_IF_PORT 0x08
/* On bridges and ports, with XFW_IF_BRNF4 or _BRNF6: br_netfilter passes
 * the bridge's VLAN-tagged IP frames to iptables too
 * (bridge-nf-filter-vlan-tagged: bridge_tc.h). */
#define XFW_IF_BRVLAN 0x1000
/* Likewise, the IP datagrams of its PPPoE session frames
 * (bridge-nf-filter-pppoe-tagged: bridge_tc.h). */
#define XFW_IF_BRPPPOE 0x2000
/* The device takes XDP frames and nothing on its egress needs the skb:
 * the XDP fast path may redirect forwarded packets to it (fastpath.h). */
#define XFW_IF_FASTTX 0x10
/* Nothing of another user (a tc ingress filter, a TCX ingress program, an
 * nftables ingress chain) runs on the device's ingress, which a frame
 * redirected at XDP would skip: the fast path may take packets arriving
 * on it (fastpath.h). */
#define XFW_IF_FASTRX 0x20
/* The input device's sysctls the kernel's checks before any chain follow,
 * combined with "all" as the kernel combines them (IN_DEV_ACCEPT_LOCAL and
 * IN_DEV_ROUTE_LOCALNET: all or the device; IN_DEV_SOURCE_ROUTE: all and
 * the device), mirrored at each sync (internal/dataplane/insysctl.go). The
 * first two are copied into struct xfw_pkt's in_sys (shifted down by
 * XFW_IF_INSYS_SHIFT) for route.h. */
#define XFW_IF_ACCEPT_LOCAL 0x40    /* accept_local */
#define XFW_IF_ROUTE_LOCALNET 0x80  /* route_localnet */
#define XFW_IF_SRCROUTE 0x100       /* accept_source_route */
#define XFW_IF_INSYS_SHIFT 6
#define XFW_INSYS_ACCEPT_LOCAL (XFW_IF_ACCEPT_LOCAL >> XFW_IF_INSYS_SHIFT)
#define XFW_INSYS_ROUTE_LOCALNET (XFW_IF_ROUTE_LOCALNET >> XFW_IF_INSYS_SHIFT)
#define XFW_INSYS_MASK (XFW_INSYS_ACCEPT_LOCAL | XFW_INSYS_ROUTE_LOCALNET)
/* The input device's IPv4 reverse-path filter, as the kernel's
 * fib_validate_source applies it (IN_DEV_RPFILTER: the larger of "all"'s
 * and the device's rp_filter, 0 off, 1 strict, 2 and above loose), and
 * src_valid_mark (IN_DEV_SRC_VMARK: all or the device), mirrored at each
 * sync with the flags above. The XDP hook copies them into struct
 * xfw_pending's rpf (shifted down by XFW_IF_RPF_SHIFT) for route.h. */
#define XFW_IF_RPF_STRICT 0x200
#define XFW_IF_RPF_LOOSE 0x400
#define XFW_IF_SRC_VMARK 0x800
#define XFW_IF_RPF_SHIFT 9
#define XFW_RPF_STRICT (XFW_IF_RPF_STRICT >> XFW_IF_RPF_SHIFT)
#define XFW_RPF_LOOSE (XFW_IF_RPF_LOOSE >> XFW_IF_RPF_SHIFT)
#define XFW_RPF_VMARK (XFW_IF_SRC_VMARK >> XFW_IF_RPF_SHIFT)
#define XFW_RPF_IN_MASK (XFW_RPF_STRICT | XFW_RPF_LOOSE | XFW_RPF_VMARK)
/* Set by xfw_route: the reverse-path check could not be made (the lookup
 * refused: forwarding off for the device it asks from); the packet is
 * judged as if it passed and left to the stack, which checks it itself,
 * never to the fast path (fastpath.h). */
#define XFW_RPF_UNSURE 0x8

/*
 * Connection tracking (ct.h).
 *
 * The XFW_F_CT value of a packet packs what -m conntrack and -m state look
 * at: bits 0-2 the state (XFW_CTS_*), bit 3 the direction (1 = REPLY),
 * bits 4-7 the connection's status (XFW_CTST_*, the kernel's IPS_* bits
 * 0-3) and bits 8-15 its layer-4 protocol. A packet with no connection
 * (INVALID, UNTRACKED) has only its state bits set.
 */
#define XFW_CTS_INVALID 0
#define XFW_CTS_NEW 1
#define XFW_CTS_ESTABLISHED 2
#define XFW_CTS_RELATED 3
#define XFW_CTS_UNTRACKED 4
#define XFW_CTV_DIR_REPLY (1u << 3)
#define XFW_CTV_STATUS_SHIFT 4
#define XFW_CTV_PROTO_SHIFT 8

/* Status bits (IPS_* of the kernel, same bit numbers). */
#define XFW_CTST_EXPECTED 0x1
#define XFW_CTST_SEEN_REPLY 0x2
#define XFW_CTST_ASSURED 0x4
#define XFW_CTST_CONFIRMED 0x8
/* xfw's own bits of xfw_ct_val.status, above the kernel's. */
#define XFW_CTST_ORIG_B 0x100   /* the originator is endpoint b of the key */

/* xfw_ct_val.nat_flags (nat.h). */
#define XFW_NAT_F_DST 0x1 /* the destination was translated (DNAT) */
#define XFW_NAT_F_SRC 0x2 /* the source was translated (SNAT, MASQUERADE) */
/* A DNAT whose translated tuple was taken: the source port was changed
 * too (the kernel's null source binding, nat_clash.h). */
#define XFW_NAT_F_CLASH 0x4

/* Connection tracking statistics: the per-CPU counters of xfw_ct_stats
 * (ct_maps.h), read by internal/dataplane (CTTables.Stats). The tracker
 * counts what enters and leaves each table; user space counts what it
 * deletes itself (conntrack -D, -F) in the last two, which the programs
 * never write; what left xfw_ct_new uncounted was evicted by its LRU. */
enum xfw_ctstat {
	XFW_CTSTAT_INSERT = 0,       /* connections entered in xfw_ct_new */
	XFW_CTSTAT_NEW_GONE = 1,     /* removed from it by the tracker */
	XFW_CTSTAT_PROMOTE = 2,      /* moved to xfw_ct (assured) */
	XFW_CTSTAT_MAIN_GONE = 3,    /* removed from xfw_ct by the tracker */
	XFW_CTSTAT_PROMOTE_FULL = 4, /* promotions refused: xfw_ct full */
	XFW_CTSTAT_USER_NEW = 5,     /* removed from xfw_ct_new by user space */
	XFW_CTSTAT_USER_MAIN = 6,    /* removed from xfw_ct by user space */
	XFW_CTSTAT_LOCK_TIMEOUT = 7, /* entry locks given up (xfw_ct_lock) */
	XFW_NCTSTATS = 8,
};

/* TCP states, as the kernel numbers them (enum tcp_conntrack). */
enum xfw_tcp_state {
	XFW_TCP_NONE = 0,
	XFW_TCP_SYN_SENT,
	XFW_TCP_SYN_RECV,
	XFW_TCP_ESTABLISHED,
	XFW_TCP_FIN_WAIT,
	XFW_TCP_CLOSE_WAIT,
	XFW_TCP_LAST_ACK,
	XFW_TCP_TIME_WAIT,
	XFW_TCP_CLOSE,
	XFW_TCP_SYN_SENT2,
	XFW_TCP_MAX,        /* "invalid" in the transition table */
	XFW_TCP_IGNORE,
	XFW_TCP_RETRANS = XFW_TCP_MAX, /* timeout slots */
	XFW_TCP_UNACK,
	XFW_TCP_TIMEOUT_MAX,
};

/* Timeout slots of xfw_ct_cfg.timeout: the TCP states (enum
 * xfw_tcp_state, RETRANS and UNACK included), then these. */
#define XFW_CTT_UDP_UNREPLIED XFW_TCP_TIMEOUT_MAX
#define XFW_CTT_UDP_REPLIED (XFW_TCP_TIMEOUT_MAX + 1)
#define XFW_CTT_ICMP (XFW_TCP_TIMEOUT_MAX + 2)
#define XFW_CTT_GENERIC (XFW_TCP_TIMEOUT_MAX + 3)
#define XFW_CTT_UDP_STREAM (XFW_TCP_TIMEOUT_MAX + 4) /* 2 s: "still active" */
#define XFW_CTT_ICMPV6 (XFW_TCP_TIMEOUT_MAX + 5) /* nf_conntrack_icmpv6_timeout */
/* SCTP: one slot per state (enum sctp_conntrack, ct_sctp.h), NONE
 * (slot 0) holding CLOSED's timeout as the kernel's timeouts[0]. */
#define XFW_CTT_SCTP (XFW_TCP_TIMEOUT_MAX + 6)
#define XFW_CTT_SCTP_STATES 9
/* GRE (nf_conntrack_proto_gre.c): before a reply was seen, and after
 * (nf_conntrack_gre_timeout, nf_conntrack_gre_timeout_stream). */
#define XFW_CTT_GRE (XFW_CTT_SCTP + XFW_CTT_SCTP_STATES)
#define XFW_CTT_GRE_STREAM (XFW_CTT_GRE + 1)
#define XFW_CTT_N (XFW_CTT_GRE_STREAM + 1)

/* TCP flag bits (byte 13 of the header). */
#define XFW_TH_FIN 0x01
#define XFW_TH_SYN 0x02
#define XFW_TH_RST 0x04
#define XFW_TH_PSH 0x08
#define XFW_TH_ACK 0x10
#define XFW_TH_URG 0x20
#define XFW_TH_ECE 0x40
#define XFW_TH_CWR 0x80

#endif /* XFW_COMMON_H */
