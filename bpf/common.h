/* SPDX-License-Identifier: GPL-2.0 */
/*
 * common.h — layouts and constants shared by every stage of xfw's data plane
 * and mirrored, field for field, by internal/dataplane/layout.go.
 *
 * Conventions for all BPF files of xfw:
 *  - Every map value and key layout lives here; a change here is a change in
 *    layout.go (the Go test TestLayoutSizes checks the sizes).
 *  - Families: index 0 is IPv4 (iptables), index 1 is IPv6 (ip6tables). Each
 *    family has its own generation slots (classify.h), so replacing one
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

/* Rules per chunk: a chunk is 64 words of 64 bits. Classification ANDs the
 * chunks of every active field; a per-chunk summary word (bit j set when
 * word j is non-zero) lets it skip empty words. */
#define XFW_CHUNK_WORDS 64
#define XFW_CHUNK_BITS (XFW_CHUNK_WORDS * 64)
/* At most 256 chunks: 1,048,576 flattened entries per family. */
#define XFW_MAX_CHUNKS 256

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
	XFW_NFIELDS = 21,
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

/* One set lookup of a generation (xfw_family_cfg.setlk). */
struct xfw_setlk {
	__u8 bit;     /* the XFW_F_SETS bit its answer is OR-ed into */
	__u8 flags;   /* XFW_SETLK_* */
	__u8 kind;    /* XFW_SETK_* */
	__u8 maxplen; /* hash kinds: longest prefix, 32 or 128 (0: no address) */
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

/* Sentinel values of the port, TCP flags and ICMP fields. */
#define XFW_V_NONE 65536
#define XFW_V_TRUNC 65537
/* The Ethernet source of a packet received on a device that is not
 * Ethernet (loopback): beyond every 48-bit address, matched by no mac
 * condition, inverted or not, as in the kernel's mac match. */
#define XFW_MAC_NONE (1ULL << 48)
/* Sentinels of the 8-bit TCP flags field. */
#define XFW_FLAGS_NONE 256
#define XFW_FLAGS_TRUNC 257

/* Entry actions. */
enum xfw_action {
	XFW_ACT_ACCEPT = 0,
	XFW_ACT_DROP = 1,
	XFW_ACT_REJECT = 2,
	/* Count (and log), then go on searching at entry .next. */
	XFW_ACT_CONTINUE = 3,
};

/* Entry flags. */
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

/* One flattened entry (12 bytes). */
struct xfw_entry {
	__u32 rule;   /* counter index, or XFW_NO_RULE */
	__u8 action;  /* enum xfw_action */
	__u8 flags;   /* XFW_EF_* */
	__u16 aux;    /* reject type or log config index */
	__u32 next;   /* XFW_ACT_CONTINUE: entry index to search from */
};

#define XFW_NO_RULE 0xffffffffu

/* One chunk of a field's bit vector: summary word + 64 words. */
struct xfw_chunk {
	__u64 summary;
	__u64 words[XFW_CHUNK_WORDS];
};

/* One interval lower bound of an address field. */
struct xfw_bound {
	__u64 hi;
	__u64 lo;
	__u32 cls;
	__u32 pad;
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
#define XFW_LOG_PREFIX_LEN 32
struct xfw_logcfg {
	char prefix[XFW_LOG_PREFIX_LEN];
	__u8 level;
	__u8 flags;
	__u8 pad[6];
};

/* LOG event sent through the ring buffer: metadata and the first bytes of
 * the packet from its Ethernet header on. */
#define XFW_LOG_SNAP 256
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
	__u8 pad[3];
	char prefix[XFW_LOG_PREFIX_LEN];
	__u8 pkt[XFW_LOG_SNAP];
};

/* Room for the list of active fields (XFW_NFIELDS rounded up to 4). */
#define XFW_FIELD_LIST 24
/* Address fields (range search): SRC, DST, CTOSRC, CTODST. */
#define XFW_NADDR 4

/* Generation slots: slot = family index * 2 + bank (see classify.h). */
#define XFW_NSLOTS 4
#define XFW_NO_SLOT 0xffffffffu

/* Configuration of one generation slot (map xfw_cfg). */
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
					 * CTOSRC, CTODST */
	__u32 addr_count[XFW_NADDR];    /* their interval bounds */
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
};

/* Interface facts the data plane needs, keyed by ifindex | vid << 32 (vid
 * 0 for the untagged device; a VLAN device is keyed by its parent's ifindex
 * and its VLAN id). */
struct xfw_ifinfo {
	__u8 mac[6];
	__u16 flags;     /* XFW_IF_* */
	__u32 ifindex;   /* the device netfilter sees (the VLAN device) */
};

#define XFW_IF_NOL2 0x01 /* no Ethernet header (loopback keeps one) */

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

/* A connection (the part of the map value the data plane reads and
 * writes; both tables put 8 bytes before it, see xfw_ct_main). Times are
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
};

/* Value of both connection tables (xfw_ct of assured connections, xfw_ct_new
 * of the others, ct.h). lock serialises the tracker's updates from the two
 * directions, as the kernel's ct->lock: a bounded compare-and-swap lock,
 * since bpf_spin_lock forbids the calls the tracker makes. */
struct xfw_ct_entry {
	__u64 lock;         /* 64 bits: BPF's 32-bit atomics need -mcpu=v3 */
	struct xfw_ct_val v;
};

#endif /* XFW_COMMON_H */
