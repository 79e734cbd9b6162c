/* SPDX-License-Identifier: GPL-2.0 */
/*
 * local.h — the namespace's local routing table as the data plane sees it:
 * which addresses are this host's (local, broadcast, anycast, multicast
 * routes), filled by the control plane (internal/dataplane/attach.go,
 * fillLocal). Used by chain selection (route.h) and by REJECT (reject.h).
 *
 * Conventions: addresses are passed as the two host-order halves of
 * common.h; lookups are exact-address (/32, /128) longest-prefix matches.
 *
 * Includes: common.h, xfw_structs.h (the keys, shared with user space).
 */
#ifndef XFW_LOCAL_H
#define XFW_LOCAL_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "common.h"
#include "xfw_structs.h"

/* The namespace's local routing table (table 255: local, broadcast,
 * multicast and anycast routes), keyed for longest-prefix match. Consulted
 * when forwarding is off on the receiving device: bpf_fib_lookup then
 * refuses to look up anything (BPF_FIB_LKUP_RET_FWD_DISABLED), and the
 * packet is either for this host (INPUT) or dropped by the kernel. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct xfw_lpm4_key);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
} xfw_local4 SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct xfw_lpm6_key);
	__type(value, __u8);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
} xfw_local6 SEC(".maps");

/* Types of the local table's routes, the values of xfw_local4/6 (RTN_* of
 * linux/rtnetlink.h, as the loader stores them). */
#define XFW_RTN_LOCAL 2
#define XFW_RTN_BROADCAST 3
#define XFW_RTN_ANYCAST 4
#define XFW_RTN_MULTICAST 5

/* The loopback device's index in every network namespace. */
#define XFW_LOOPBACK_IFINDEX 1

/* xfw_local_type returns the type of the local-table route covering the
 * address (hi, lo) of family fam (0 IPv4: lo holds the address), or 0 when
 * there is none. */
static __always_inline __u8 xfw_local_type(__u8 fam, __u64 hi, __u64 lo)
{
	__u8 *v;

	if (fam == 0) {
		struct xfw_lpm4_key k = { .prefixlen = 32 };
		__u32 a = bpf_htonl((__u32)lo);

		__builtin_memcpy(k.addr, &a, 4);
		v = bpf_map_lookup_elem(&xfw_local4, &k);
	} else {
		struct xfw_lpm6_key k = { .prefixlen = 128 };
		__u32 w[4] = { bpf_htonl(hi >> 32), bpf_htonl((__u32)hi),
			       bpf_htonl(lo >> 32), bpf_htonl((__u32)lo) };

		__builtin_memcpy(k.addr, w, 16);
		v = bpf_map_lookup_elem(&xfw_local6, &k);
	}
	return v ? *v : 0;
}

#endif /* XFW_LOCAL_H */
