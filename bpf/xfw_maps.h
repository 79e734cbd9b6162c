/* SPDX-License-Identifier: GPL-2.0 */
/*
 * xfw_maps.h — the hooks' own maps (xfw.c): their per-CPU packet scratch,
 * the interfaces' facts, the LOG ring, the saved state of each generation
 * and of the namespace's ipsets, the counters' user-space offsets and the
 * object's build identity. The control plane (internal/dataplane) finds
 * them by these names; the state maps are only referenced, never read, by
 * the programs (xfw_touch_state, xfw.c).
 *
 * Includes: xfw_structs.h, parse.h (struct xfw_pkt), classify_structs.h
 * (struct xfw_pending), classify_maps.h (the map-template macros), route_cache.h
 * (struct xfw_rtc_ent).
 */
#ifndef XFW_MAPS_H
#define XFW_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xfw_structs.h"
#include "parse.h"
#include "classify_structs.h"
#include "classify_maps.h"
#include "route_cache.h"

/* Each hook's packet facts, pending LOG list and walk state, one per CPU
 * and hook (XDP and TC run to completion on their CPU and do not nest):
 * on the stack they would push the deepest call chain (the hook,
 * xfw_classify and its bit-vector walk) past 512 bytes. */
/* Bytes of a frame's headers, up to the end of its fixed TCP header,
 * that TCPMSS can move (a power of two, to mask with). */
#define XFW_MG_MOVE_MAX 256
struct xfw_xdp_scratch {
	struct xfw_pkt p;
	struct xfw_pending st;
	struct xfw_cls cls;     /* the walk's state (classify.h) */
	struct xfw_tcpopt opt; /* -m tcpmss's option walk (tcpopt.h) */
	struct xfw_tlv tlv;    /* the hop-by-hop option walk (route.h) */
	/* The headers TCPMSS moves to make room for an added option
	 * (mangle_apply.h xfw_mg_grow_head). */
	__u8 mv[XFW_MG_MOVE_MAX];
	/* IPv4 route lookups (route_cache.h; the XDP entry's only). */
	struct xfw_rtc_ent rtc[XFW_RTC_SLOTS];
	/* Interface facts (ifinfo_cache.h; the XDP entry's only). */
	struct xfw_ifc_ent ifc[XFW_IFC_SLOTS];
	/* The reverse-path check's route request (route.h xfw_rpf), here
	 * as it runs below xfw_route, whose chain has no stack to spare. */
	struct bpf_fib_lookup rpf_fib;
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_xdp_scratch);
	__uint(max_entries, 2);   /* XFW_SCRATCH_XDP, XFW_SCRATCH_TC */
} xfw_xdp_scratch SEC(".maps");
#define XFW_SCRATCH_XDP 0
#define XFW_SCRATCH_TC 1

/* Interface facts (struct xfw_ifinfo), filled by the control plane, and
 * the multicast groups the devices joined (mcast.h: the interfaces take a
 * few thousand keys, the groups a few per device). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u64);
	__type(value, struct xfw_ifinfo);
	__uint(max_entries, 16384);
} xfw_ifinfo SEC(".maps");

/* LOG and NFLOG events: a ring each (enum xfw_ring), 1 MiB (about 3,000
 * events in flight), so that xfw nflog and xfw log (the agent) read their
 * own. One map of the program for both (a program may use 64 maps): an
 * array of rings the control plane fills at load (internal/dataplane,
 * logrings.go). */
struct xfw_ring_m {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(key_size, sizeof(__u32));
	__uint(max_entries, XFW_NRINGS);
	__array(values, struct xfw_ring_m);
} xfw_logrings SEC(".maps");

/* The saved ruleset of each generation slot (iptables-save text in 4 KiB
 * pages) and the user-space counter offsets; read and written by the
 * control plane only. */
XFW_INNER_ARRAY(xfw_state_m, struct xfw_state_page);
XFW_INNER_ARRAY(xfw_cbase_m, struct xfw_counter);
XFW_OUTER(xfw_o_state, xfw_state_m);
/* The namespace's ipsets (xfw ipset), encoded by internal/ipset, in element
 * 0: pages of a little-endian 64-bit length, then the bytes. Kept here, in
 * the namespace, like the rulesets' text: they live as long as xfw's
 * programs do. */
XFW_OUTER(xfw_o_ipsets, xfw_state_m);
XFW_OUTER(xfw_o_cbase, xfw_cbase_m);

/* An 8-byte identity of the loaded object (written by the loader), so a
 * control plane of another build never reuses programs or maps whose
 * layout it does not know; then the handover format the state is kept in
 * and the layout fingerprints of the connection tables and of the
 * hashlimit tables and recent lists, which a takeover by another build
 * reads (internal/dataplane/handover.go). Entry 4 counts the commands of
 * processes that opened the running state under xfw's lock: a resident
 * process (the agent serving commands) keeps its opened state while it
 * is unchanged (internal/dataplane/keptsession.go). The programs only
 * reference the map (so the loader binds it), reading none of its values. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 5); /* identity, handover format, connection and rate state layouts, change count */
} xfw_build SEC(".maps");

#endif /* XFW_MAPS_H */
