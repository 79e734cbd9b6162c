/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct.h — connection tracking: the state -m conntrack and -m state look at,
 * judged as netfilter's nf_conntrack judges it with default sysctls.
 *
 * Where it runs: once per packet, in the hook that judges it — XDP ingress
 * for INPUT and FORWARD, TC egress for OUTPUT — before classification, and
 * only while the family's active generation uses XFW_F_CT (the kernel
 * likewise tracks a family once a rule needs it). Loopback traffic passes
 * OUTPUT and then INPUT; as in the kernel it is tracked once, at OUTPUT, and
 * INPUT sees what OUTPUT saw (xfw_ct_val.lo_state).
 *
 * Tables (xfw_structs.h for the layouts, ct_maps.h for the maps):
 *   xfw_ct_new  LRU hash of connections not yet assured. A flood of new
 *               connections evicts its oldest entries, never an assured
 *               connection (the kernel's early_drop of unassured entries).
 *   xfw_ct      hash of assured connections. An entry
 *               moves here when it becomes ASSURED; when this table is full
 *               it stays in xfw_ct_new.
 * A lookup tries xfw_ct, then xfw_ct_new (unless its entry is marked
 * moved), then xfw_ct again (a promotion under way: ct_track.h
 * xfw_ct_promote). An expired entry is deleted by the lookup that finds
 * it.
 *
 * What changes state: as in the kernel, a packet of a known connection
 * advances it before the filter runs (nf_conntrack_in at PREROUTING/OUTPUT);
 * a new connection's entry is created only when the verdict is ACCEPT
 * (xfw_ct_confirm; the kernel confirms after the filter), so dropped
 * packets never take table space.
 *
 * Conventions:
 *  - Times are jiffies from bpf_jiffies64(), which the JIT inlines (a load,
 *    no helper call); timeouts come in jiffies from the control plane
 *    (xfw_ct_cfg), which knows HZ.
 *  - An entry is updated under its lock (xfw_ct_lock: compare-and-swap,
 *    bounded, the wait in a bpf_loop; XDP and TC do not nest on a CPU, so
 *    the holder always runs on another CPU and finishes in microseconds).
 *    The lock word also marks an xfw_ct_new entry moved to xfw_ct
 *    (ct_track.h xfw_ct_promote).
 *  - The tracker (xfw_ct_advance), the segment reader and the ICMP error
 *    path are global functions, each verified once.
 *  - Sequence arithmetic is modulo 2^32 (xfw_before/xfw_after as the
 *    kernel's before()/after()).
 *  - Deliberate differences, documented in docs/differences.md: DCCP is
 *    tracked as a generic protocol (as by Linux 6.16 and later); GRE has
 *    no PPTP helper's keymap (version 1's source key is 0, as in a
 *    namespace without the helper); an ICMPv6 error quoting a packet with
 *    more than XFW_CT_INNER_EXTS extension headers, or whose transport
 *    header lies beyond the XFW_CT_BUF quoted bytes, is INVALID; checksums
 *    are not verified.
 *
 * Parts, in the order they build on each other: ct_structs.h and
 * ct_maps.h (layouts, maps); ct_conn.h (keys, lookups, lock, the XFW_F_CT
 * value); ct_tcp.h (the TCP state machine and windows); ct_related.h (ICMP
 * errors: RELATED); ct_track.h (tracking proper, confirmation, promotion,
 * sweep, loopback handoff); ct_hook.h (what the hooks call).
 *
 * Includes: its parts (ct_hook.h includes the others), nothing else.
 */
#ifndef XFW_CT_H
#define XFW_CT_H

#include "ct_structs.h"
#include "ct_maps.h"
#include "ct_conn.h"
#include "ct_tcp.h"
#include "ct_related.h"
#include "ct_track.h"
#include "ct_hook.h"

#endif /* XFW_CT_H */
