/* SPDX-License-Identifier: GPL-2.0 */
/*
 * xfw_structs.h — every layout the data plane shares with user space: the
 * keys and values of the maps the control plane (internal/dataplane) fills
 * or reads, and the events it receives. Each has a Go mirror, field for
 * field (layout.go, conntrack.go, ctcfg.go, attach.go); TestLayoutMirrors
 * checks the mirrors against the BTF of the built objects (layouts.c puts
 * every struct of this file in BTF). A stage's private layouts live in its
 * own <stage>_structs.h.
 *
 * Includes: common.h (the constants that size these layouts) only.
 */
#ifndef XFW_STRUCTS_H
#define XFW_STRUCTS_H

#include <linux/types.h>
#include "common.h"

/* One set lookup of a generation (xfw_family_cfg.setlk). */
struct xfw_setlk {
	__u8 bit;     /* the XFW_F_SETS bit its answer is OR-ed into */
	__u8 flags;   /* XFW_SETLK_* */
	__u8 kind;    /* XFW_SETK_* */
	__u8 maxplen; /* hash kinds: longest prefix, 32 or 128 (0: no address) */
};

/* One IPv6 extension header condition (xfw_family_cfg.ext6, ip6ext.h). */
/* An sctp chunk type's flag test (struct xt_sctp_flag_info). */
struct xfw_h4flag {
	__u8 type, flag, mask, pad;
};

/* One XFW_F_HDR4 condition (hdr4.h): an sctp match with --chunk-types, a
 * dccp match with --dccp-types or --dccp-option, an esp or ah match, or
 * tcp's --tcp-option. */
struct xfw_h4cond {
	__u8 kind;        /* XFW_H4_SCTP … XFW_H4_TCPOPT */
	__u8 flags;       /* XFW_H4F_* tested */
	__u8 inv;         /* XFW_H4F_* inverted */
	__u8 mtype;       /* sctp: XFW_H4M_* */
	__u16 sport[2];   /* sctp, dccp: inclusive port ranges */
	__u16 dport[2];
	__u32 spi[2];     /* esp, ah: inclusive SPI range */
	__u8 option;      /* dccp, tcp: the option kind */
	__u8 nflags;      /* sctp: flag tests in fl */
	__u16 types;      /* dccp: bit t for packet type t */
	__u32 chunkmap[8];/* sctp: bit t for chunk type t */
	struct xfw_h4flag fl[4]; /* sctp: flag tests */
};

struct xfw_ext6cond {
	__u8 kind;    /* enum xfw_ext6 kind */
	__u8 flags;   /* XFW_E6_* */
	__u8 inv;     /* XFW_E6I_* */
	__u8 naddr;   /* rt: addresses, from ext6_addr[addr0]; hbh, dst:
		       * options, from ext6_opt[addr0] */
	__u8 addr0;
	__u8 pad[3];
	__u32 lo, hi; /* rt segments left, frag id, ah SPI, mh type: inclusive
		       * range; ipv6header: lo the header bits, hi inverted */
	__u32 type;   /* rt type */
	__u32 len;    /* rt, ah: header length in bytes */
};

/* Key of a hash set table (inner maps of xfw_o_sethash): the packet's parts
 * the set type has, the others 0. The prefix lengths present are kept
 * under meta keys: plen XFW_SETKEY_META, port w, value.expires = bits
 * 64w..64w+63 (bit i: prefix length 64w+i has entries). */
struct xfw_setkey {
	__u64 hi, lo;   /* address masked to plen (IPv4: lo) */
	__u32 ifindex;  /* XFW_SETK_IFACE */
	__u16 port;     /* XFW_SETK_PORT, XFW_SETK_TCPUDP */
	__u8 proto;     /* XFW_SETK_PORT */
	__u8 plen;
};
#define XFW_SETKEY_META 255

/* Value of a hash set table's entry. hash:net,iface also has a blocker per
 * network (key ifindex 0, answer 0): the kernel's test of a network stops
 * at the longest prefix length holding an entry of the packet's network,
 * whatever its interface (IP_SET_HASH_WITH_MULTI: mtype_test_cidrs leaves
 * its loop once an entry of the same network was seen); aux is then the
 * interface of the network's only entry (0: several, or none resolved),
 * which does not block (its own entry has expired). */
struct xfw_setval {
	__u64 expires; /* bpf_ktime_get_ns() time it times out at; 0: never */
	__u32 answer;  /* XFW_SET_MEMBER or XFW_SET_NOMATCH; blocker: 0 */
	__u32 aux;
	__u32 ctr;     /* 1 + the entry's counter in its table's counters
			* (xfw_o_setectr), 0: the set has no counters */
	__u32 pad;
};

/* One flattened entry (12 bytes). */
struct xfw_entry {
	__u32 rule;   /* counter index, or XFW_NO_RULE */
	__u8 action;  /* enum xfw_action */
	__u8 flags;   /* XFW_EF_* */
	__u16 aux;    /* reject type or log config index */
	__u32 next;   /* XFW_ACT_CONTINUE: entry index to search from */
};

/* One probe of a generation (XFW_EF_PROBE entries name it by index in the
 * slot's xfw_o_probe): what it evaluates (enum xfw_probe_kind) and the
 * kind's argument (XFW_PROBE_LIMIT: the bucket's index in xfw_o_limit). */
struct xfw_probe {
	__u32 kind;
	__u32 arg;
	__u32 val;   /* statistic, mark, MARK: their values (mark.h) */
	__u32 mask;
	__u64 count; /* statistic nth: the counter, shared by the CPUs */
};

/* The token bucket of one limit match (xt_limit's xt_limit_priv and the
 * parameters limit_mt_check computes), element .aux of a probe's slot's
 * xfw_o_limit map (limit.h). prev and credit change under packets
 * (atomics); the control plane writes the bucket full, prev the jiffies
 * of the fill. credit holds 32 bits, in 64 for the 64-bit compare-and-swap. */
struct xfw_limit {
	__u64 prev;   /* jiffies of the last token asked */
	__u64 credit; /* credits held, at most .cap */
	__u32 cost;   /* credits a packet takes */
	__u32 cap;    /* the full bucket: burst * cost */
	__u32 cpj;    /* credits gained per jiffy (CREDITS_PER_JIFFY) */
	__u32 pad;
};

/* Two __u32 values of an array map (the clsch map: class → chunk ids and
 * chunk masks): value i of the map is element i / 2's v[i % 2]. */
struct xfw_u32pair {
	__u32 v[2];
};

/* One chunk of a field's bit vector: summary word + 64 words. */
struct xfw_chunk {
	__u64 summary;
	__u64 words[XFW_CHUNK_WORDS];
};

/* The address fields' interval bounds as static search trees (one per
 * field, in the slot's bounds map; internal/compiler/boundtree.go): each
 * node holds XFW_BTREE_FANOUT sorted keys, a leaf's with their classes, a
 * parent's with the node index of the child each key starts. A search
 * reads one node per level (at most XFW_BTREE_LEVELS) instead of one
 * bound per binary search step: every read of a generation's map is a
 * helper call. */
#define XFW_BTREE_FANOUT 32
#define XFW_BTREE_LEVELS 5 /* XFW_BTREE_FANOUT^5 >= 2^22 bounds */

/* An address, high and low words: the key of a search tree node. */
struct xfw_bkey {
	__u64 hi;
	__u64 lo;
};

/* One search tree node. Slots past the node's last real key repeat it. */
struct xfw_bnode {
	struct xfw_bkey key[XFW_BTREE_FANOUT];
	__u32 cls[XFW_BTREE_FANOUT]; /* leaf: class; parent: child node */
};

/* Key of the hashed fields (interfaces, MAC). */
struct xfw_hkey {
	__u32 field;
	__u32 pad;
	__u64 value;
};

/* Per-rule counters (per CPU). */
struct xfw_counter {
	__u64 packets;
	__u64 bytes;
};

/* LOG target options, indexed by entry .aux. */
struct xfw_logcfg {
	char prefix[XFW_LOG_PREFIX_LEN];
	__u8 level;
	__u8 flags;
	__u16 nflog_group; /* NFLOG (flags XFW_LOG_NFLOG): --nflog-group */
	__u32 nflog_len;   /* NFLOG: bytes of the packet to pass on */
};

/* LOG event sent through the ring buffer: metadata and the first bytes of
 * the packet from its Ethernet header on. */
struct xfw_log_event {
	__u32 in_ifindex;
	__u32 out_ifindex;
	__u32 rule;
	__u16 snap_len;    /* bytes of .pkt that are valid */
	__u16 l3_off;      /* offset of the IP header in .pkt */
	__u32 pkt_len;     /* whole frame length */
	__u8 family;       /* 4 or 6 */
	__u8 chain;        /* enum xfw_chain */
	__u8 level;
	__u8 flags;
	__u8 has_mac;      /* 1 when .pkt starts with a real Ethernet header */
	__u8 has_uid;      /* 1 when .uid and .gid hold --log-uid's ids */
	__u16 nflog_group; /* NFLOG: the rule's group and copy length */
	__u32 nflog_len;
	__u32 mark;        /* the packet's mark at the LOG rule (MARK=) */
	__u32 uid, gid;    /* its socket's file's fsuid, fsgid (UID= GID=) */
	__u32 physin;      /* the packet's bridge ports (struct xfw_pkt's, */
	__u32 physout;     /* XFW_PHYS_*): PHYSIN= PHYSOUT= */
	__u32 view;        /* XFW_LOGV_*: what rewrites before the rule changed */
	char prefix[XFW_LOG_PREFIX_LEN];
	__u8 pkt[XFW_LOG_SNAP];
};

/* Configuration of one generation slot (map xfw_cfg). */
/* The counters a trivial walk bumps at most (compiler.MaxTrivialCounters:
 * FORWARD's walk has 8 tables' chains). */
#define XFW_TRIVIAL_CTRS 8

/* The leading address drops compared at most (compiler.MaxPreDrops). */
#define XFW_PREDROP_MAX 4

/* One leading address drop (predrop.h; compiler.PreDrop): the packet's
 * field (XFW_F_SRC or XFW_F_DST) in [lo, hi], as (high, low) 64-bit
 * halves, drops it, counted to counter ctr. */
struct xfw_predrop {
	__u64 lo_hi, lo_lo, hi_hi, hi_lo;
	__u32 field;
	__u32 ctr;
};

struct xfw_family_cfg {
	__u32 enabled;          /* 0: no ruleset loaded, accept everything */
	__u32 active;           /* bit mask of enum xfw_field */
	__u32 nchunks;          /* chunks per field vector (<= XFW_MAX_CHUNKS) */
	__u32 nentries;
	__u32 chain_start[XFW_NCHAINS];
	__u32 chain_end[XFW_NCHAINS];
	__u32 policy_drop[XFW_NCHAINS]; /* 1 = DROP, 0 = ACCEPT */
	__u32 small_base[XFW_NFIELDS];  /* offset in the slot's small map */
	__u32 default_cls[XFW_NFIELDS]; /* class of hashed values not in map */
	__u32 max_iters;                /* bpf_loop bound: nchunks + hops + 1 */
	__u32 addr_base[XFW_NADDR];     /* first interval bound of SRC, DST,
					 * CTOSRC, CTODST (flat, as the
					 * compiler numbers them) */
	__u32 addr_count[XFW_NADDR];    /* their interval bounds (the
					 * search reads .addr_root) */
	__u32 ncounters;                /* counters per CPU (policies + rules) */
	__u32 nfields;                  /* active fields, listed in .fields */
	__u8 fields[XFW_FIELD_LIST];    /* the active fields' enum xfw_field */
	__u32 nsetlk;                   /* set lookups (XFW_F_SETS bits) */
	struct xfw_setlk setlk[XFW_MAX_SETLOOKUPS];
	/* Set entry counters: 1 + the counter of the list:set entry naming
	 * lookup k's set in the slot's xfw_o_setctr array (0: none), and
	 * the size of that array, at least 1 when some set match counts (0:
	 * none does, the packet's set hits are not counted). */
	__u32 setlk_lctr[XFW_MAX_SETLOOKUPS];
	__u32 nsetctr;
	/* Established fast path (ct.h xfw_ct_fast): per chain, bit s set when
	 * a packet in connection state s is accepted by entry ct_fast_entry
	 * without classification (0: no fast path). */
	__u32 ct_fast_states[XFW_NCHAINS];
	__u32 ct_fast_entry[XFW_NCHAINS];
	/* IPv6 extension header conditions (XFW_F_EXT6 bits) and the rt
	 * addresses they compare. */
	__u32 next6;
	struct xfw_ext6cond ext6[XFW_MAX_EXT6CONDS];
	__u8 ext6_addr[XFW_EXT6_MAX_ADDRS][16];
	/* Predicates (pred.h: string, u32, time) in the slot's xfw_o_pred,
	 * answered at the hook before the walk (0: none). */
	__u32 npreds;
	/* Bit k: some condition is of kind k (enum xfw_ext6); the hbh and
	 * dst options (type << 8 | length, 0xff: any length). */
	__u32 ext6_kinds;
	__u16 ext6_opt[XFW_EXT6_MAX_OPTS];
	/* Transport header conditions (XFW_F_HDR4 bits, hdr4.h). */
	__u32 nh4;
	struct xfw_h4cond h4[XFW_MAX_HDR4CONDS];
	/* DNAT (nat.h): per chain, 1 + the entry after the walk's nat
	 * PREROUTING segment, where a walk resumes after a DNAT changed the
	 * route (0: no such segment). */
	__u32 nat_resume[XFW_NCHAINS];
	/* 1: some probe is an owner match; TC egress reads the packet's
	 * socket (owner.h). */
	__u32 owner;
	/* nat OUTPUT's DNAT (nat_out.h): per chain, 1 + the entry of the
	 * walk's first POSTROUTING segment (0: none), where a rerouted
	 * packet's new output device takes over. */
	__u32 post_start[XFW_NCHAINS];
	/* Routing by mark (xfw.c xfw_xdp_rerouted, xfw_tc_rerouted): per
	 * chain, 1 + the entry after the walk's PREROUTING segments (INPUT,
	 * FORWARD) or its mangle OUTPUT segment (OUTPUT), where the packet
	 * is routed again with the mark they left it (0: they change no
	 * mark). */
	__u32 reroute[XFW_NCHAINS];
	/* Trivial walks (trivial.h; compiler.Generation.TrivialWalk): per
	 * chain, 1 + the number of counters a walk that accepts every packet
	 * without classifying it bumps, listed in trivial_ctr in walk order
	 * (0: the walk classifies). */
	__u32 trivial[XFW_NCHAINS];
	__u32 trivial_ctr[XFW_NCHAINS][XFW_TRIVIAL_CTRS];
	/* The address fields' search trees (struct xfw_bnode): the root's
	 * node in the slot's bounds map and the levels a search reads (0:
	 * the field has no bounds). */
	__u32 addr_root[XFW_NADDR];
	__u32 addr_levels[XFW_NADDR];
	/* The classes' chunk masks (compiler.ChunkMasks), kept in the
	 * slot's clsch map after the class→chunk ids: word w of class c at
	 * index mask_base + c * mask_words + w (two an element, struct
	 * xfw_u32pair), bit b set when the class's chunk
	 * w * 32 + b is not empty. */
	__u32 mask_base;
	__u32 mask_words;
	/* PREROUTING before the route lookup (xfw.c xfw_xdp_rawpre;
	 * compiler.Layout.RawPre): per chain (INPUT, FORWARD), 1 + the entry
	 * after the walk's raw and mangle PREROUTING segments judged there;
	 * the INPUT walk's segments are judged before routing and the chosen
	 * walk resumes there (0: no pre-walk). */
	__u32 raw_pre[XFW_NCHAINS];
	/* 1: those chains only count (empty, policy ACCEPT): walked only for
	 * the packets the routing drops (compiler.Layout.PrePassive). */
	__u32 pre_passive;
	/* Per chain (INPUT, FORWARD), 1 + the entry after the walk's
	 * PREROUTING segments and the reroute entries after them
	 * (compiler.Layout.PreEnd; 0: none): a packet the routing drops is
	 * walked up to the INPUT walk's (xfw.c xfw_xdp_unrouted_walk). */
	__u32 pre_end[XFW_NCHAINS];
	/* 1: the port fields' small arrays end before XFW_V_SHORT (no
	 * condition tells a header cut short after its ports from one cut
	 * short before them): such a header's ports are classified as
	 * XFW_V_TRUNC (classify.h xfw_ports_view; compiler
	 * Generation.NoShortPorts). 0, a generation's of an older build
	 * too: the arrays have the cut-short part. */
	__u32 no_short_ports;
	/* XFW_MSST_* (compiler Generation.MSSTargets): some rule's target is
	 * TCPMSS, some clamps to the path MTU. The hooks then read every TCP
	 * packet's MSS option (tcpopt.h), which a walk adding one needs. */
	__u32 mss_targets;
	/* The leading address drops of the PREROUTING chains judged before
	 * routing, in walk order (predrop.h; compiler
	 * Generation.PreDrops), and how many there are (0: none, a
	 * generation's of an older build too). */
	__u32 predrop_n;
	__u32 predrop_pad;
	struct xfw_predrop predrop[XFW_PREDROP_MAX];
};

/* Interface facts the data plane needs, keyed by ifindex | vid << 32 (vid
 * 0 for the untagged device; a VLAN device is keyed by its parent's ifindex
 * and its VLAN id). */
struct xfw_ifinfo {
	__u8 mac[6];
	__u16 flags;     /* XFW_IF_* */
	__u32 ifindex;   /* the device netfilter sees (the VLAN device) */
	/* net.ipv6.conf.<device>.hop_limit of the device netfilter sees: the
	 * hop limit of the host's IPv6 packets leaving by it (ip6_dst_hoplimit
	 * without a route metric), REJECT's replies' (reject_route.h); 0
	 * when unknown (IPv6 off on the device). */
	__u8 hop_limit6;
	__u8 pad[3];
};

/* A cached xfw_ifinfo lookup of the XDP hook (ifinfo_cache.h): the key,
 * the interface facts' generation it was read in (xfw_bank's
 * XFW_BANK_IFGEN entry), and the facts. */
#define XFW_IFC_SLOTS 8  /* cached lookups per CPU, direct-mapped */
#define XFW_BANK_IFGEN 2 /* xfw_bank's entry: the interface facts' generation */
struct xfw_ifc_ent {
	__u64 key;
	__u32 gen;
	__u32 valid;
	struct xfw_ifinfo v;
};

/* Program runs begun and ended on one CPU (map xfw_inflight; see
 * Quiescence in generation.h). */
struct xfw_inflight {
	__u64 begun;
	__u64 ended;
};

/* One page of a generation's saved state or of the namespace's ipsets
 * (maps xfw_o_state, xfw_o_ipsets: xfw_maps.h). */
#define XFW_STATE_PAGE 4096
struct xfw_state_page {
	__u8 b[XFW_STATE_PAGE];
};

/* Keys of the local routing table (maps xfw_local4, xfw_local6: local.h):
 * a prefix length and the address in network byte order. */
struct xfw_lpm4_key {
	__u32 prefixlen;
	__u8 addr[4];
};
struct xfw_lpm6_key {
	__u32 prefixlen;
	__u8 addr[16];
};
/* Their values: the route's type (RTN_*: LOCAL, BROADCAST, ANYCAST,
 * MULTICAST; RTN_UNICAST for the table's other routes, which are not this
 * host's), its device (0: the type depends on no device, as for
 * 255.255.255.255 and 224.0.0.0/4), what -m addrtype sees of the address
 * where it differs from the routing type (at: for IPv6 XFW_AT6_LOCAL and
 * XFW_AT6_ANYCAST of common.h, of the route the kernel finds, not of the
 * type: an anycast-typed route added by hand is no anycast and a connected
 * prefix's network address is one; for IPv4 XFW_AT4_UNICAST, a main-table
 * route of this host's the local table alone does not show) and, for an
 * IPv6 multicast group some
 * device joined (a /128 entry of type MULTICAST), the group's number in
 * xfw_ifinfo's group keys (mcast.h; 0 for every other entry). */
struct xfw_local_val {
	__u8 type;
	__u8 at;
	__u8 pad[2];
	__u32 ifindex;
	__u32 group;
};
/* The values of xfw_rl_rt6 (route_main.h): a route of the main table,
 * IPv4 ones at their IPv4-mapped IPv6 prefix (::ffff:a.b.c.d). */
struct xfw_route_val {
	__u32 plen;    /* the IPv6 prefix length ICMPv6 rate limits charge by */
	__u32 mtu;     /* the route's mtu metric, locked or not (0: none) */
	__u32 ifindex; /* its device (0: several, a multipath route) */
	__u32 fam;     /* 4: an IPv4 route, 6: an IPv6 route */
	__u32 flags;   /* XFW_RT_PREFSRC */
};
/* xfw_route_val.flags: the route has a preferred source (RTA_PREFSRC). */
#define XFW_RT_PREFSRC 0x1

/* Connection key: one entry for both directions. The endpoints are
 * ordered (a <= b, comparing address then port) so both directions find
 * it; ports are host order. ICMP/ICMPv6 queries put the identifier in both
 * ports and the request's type and code in pad (xfw_ct_mkkey_icmp);
 * protocols without ports leave them 0. */
struct xfw_ct_key {
	__u64 a_hi, a_lo;
	__u64 b_hi, b_lo;
	__u16 a_port, b_port;
	__u8 proto;
	__u8 fam;           /* 0 IPv4, 1 IPv6 */
	__u16 pad;          /* ICMP queries: request type | code << 8 */
};

/* One direction's TCP window data (the kernel's ip_ct_tcp_state). */
struct xfw_ct_tcp_side {
	__u32 end;
	__u32 maxend;
	__u32 maxwin;
	__u32 maxack;
	__u8 scale;
	__u8 flags;         /* XFW_CT_TCPF_* */
	__u8 pad[2];
};

/* A connection (the part of the map value the data plane reads and
 * writes; both tables put 8 bytes before it, see xfw_ct_entry). Times are
 * jiffies (bpf_jiffies64, inlined by the JIT: no helper call). */
struct xfw_ct_val {
	__u64 expires;      /* jiffies when the entry dies */
	__u64 stream_ts;    /* UDP: jiffies after which a replied flow is a stream */
	__u64 packets[2];   /* per direction (0 original, 1 reply) */
	__u64 bytes[2];
	__u32 status;       /* XFW_CTST_* */
	__u8 tcp_state;     /* enum xfw_tcp_state */
	__u8 last_dir;
	__u8 last_index;
	__u8 last_wscale;
	__u8 last_flags;
	__u8 retrans;
	__u8 icmp_type;     /* ICMP queries: the original direction's type */
	__u8 icmp_code;
	__u8 lo_state[2];   /* loopback: the XFW_F_CT value OUTPUT gave the
			     * last packet of each direction, low byte */
	__u16 last_win;
	__u32 last_seq;
	__u32 last_ack;
	__u32 last_end;
	struct xfw_ct_tcp_side side[2]; /* [0] original, [1] reply */
	/* NAT (nat.h): with XFW_NAT_F_DST in nat_flags the connection's
	 * destination was translated (DNAT); the key holds the translated
	 * tuple, nat_addr_hi:nat_addr and nat_port (host order; IPv4: the
	 * address in nat_addr, nat_addr_hi 0) the original destination. */
	__u16 nat_port;
	__u8 nat_flags;
	__u8 nat_pad;
	/* With XFW_NAT_F_SRC: the translated source snat_addr_hi:snat_addr,
	 * snat_port (the key holds the original one). */
	__u16 snat_port;
	/* With XFW_NAT_F_CLASH: the original source port (the key holds the
	 * new one, nat_clash.h). */
	__u16 nat_sport;
	/* The connection's mark (ct->mark): CONNMARK sets it, -m connmark
	 * reads it (connmark.h); 0 when created. */
	__u32 mark;
	__u64 nat_addr_hi, nat_addr;
	__u64 snat_addr_hi, snat_addr;
};

/* Value of both connection tables (xfw_ct of assured connections, xfw_ct_new
 * of the others, ct.h). lock serialises the tracker's updates from the two
 * directions, as the kernel's ct->lock: a bounded compare-and-swap lock,
 * since bpf_spin_lock forbids the calls the tracker makes. */
struct xfw_ct_entry {
	__u64 lock;         /* XFW_CT_LOCK_* (ct_conn.h); 64 bits: BPF's
			     * 32-bit atomics need -mcpu=v3 */
	struct xfw_ct_val v;
};

/* Tracking settings, filled by the control plane (internal/dataplane). */
struct xfw_ct_cfg {
	__u64 timeout[XFW_CTT_N];     /* jiffies */
	__u32 tcp_loose;              /* nf_conntrack_tcp_loose (1) */
	__u32 tcp_liberal;            /* nf_conntrack_tcp_be_liberal (0) */
	__u32 tcp_max_retrans;        /* nf_conntrack_tcp_max_retrans (3) */
	__u32 tcp_ignore_invalid_rst; /* nf_conntrack_tcp_ignore_invalid_rst (0) */
	__u32 ready;                  /* 1 once filled */
	__u32 hz;                     /* jiffies per second (for user space) */
};

/* xfw_nat_ifaddr_val.flags6: which IPv6 addresses are set. */
#define XFW_NAT_IFA6_ANY 1u /* any_hi:any_lo */
#define XFW_NAT_IFA6_LL 2u  /* ll_hi:ll_lo */

/* Value of xfw_nat_ifaddr (nat.h): an interface's addresses REDIRECT (and
 * IPv4 MASQUERADE) take, filled by the control plane
 * (internal/dataplane/nat.go). IPv6 addresses hi:lo, host order. */
struct xfw_nat_ifaddr_val {
	__u32 addr4;          /* the primary IPv4 address (host order); 0: none */
	__u32 flags6;         /* XFW_NAT_IFA6_* */
	__u64 any_hi, any_lo; /* the first usable IPv6 address of the device's list
			       * (nf_nat_redirect_ipv6 for a destination of global scope) */
	__u64 ll_hi, ll_lo;   /* the first usable link-local one (a link-local destination) */
};

/* The host's IPv6 addresses as source address selection sees them (map
 * xfw_saddr6: reject_saddr.h), in the kernel's walk order (devices as the
 * address dump lists them, each device's addresses in its list's order),
 * filled by the control plane (internal/dataplane/saddr6.go). Entries:
 * the address (network order), its device, prefix length, source scope
 * (__ipv6_addr_src_scope), label (the default policy table) and
 * XFW_SA6_* bits. n entries are used; over is set when the host has more
 * than XFW_SADDR6_MAX candidates (then the lookup's source stands). */
#define XFW_SADDR6_MAX 32 /* a power of two: indexes are masked with it less 1 */
#define XFW_SA6_PREFERRED 0x1 /* neither deprecated nor (unless used) optimistic */
#define XFW_SA6_PUBLIC 0x2    /* rule 7 prefers it: public, or temporary with use_tempaddr >= 2 */
#define XFW_SA6_ORCHID 0x4    /* 2001:10::/28 */
#define XFW_SA6_OPTIMISTIC 0x8
#define XFW_SA6_OIF_ONLY 0x10 /* its device has use_oif_addrs_only */
struct xfw_saddr6_ent {
	__u8 addr[16]; /* read as four __u32 (the struct is 4-aligned) */
	__u32 ifindex;
	__u8 plen;
	__u8 scope;
	__u8 label;
	__u8 bits;
};
struct xfw_saddr6_tab {
	__u32 n;
	__u32 over;
	struct xfw_saddr6_ent e[XFW_SADDR6_MAX];
};

#endif /* XFW_STRUCTS_H */
