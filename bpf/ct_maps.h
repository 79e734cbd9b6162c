/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ct_maps.h — connection tracking's maps: its settings (xfw_ct_cfg), the
 * two connection tables (xfw_ct of assured connections, xfw_ct_new of the
 * others: see ct.h), the per-CPU tracking scratch, the sweep's bookkeeping
 * and the loopback handoff. The control plane (internal/dataplane) finds
 * them by these names, sizes the tables before loading and reads them for
 * `xfw conntrack`.
 *
 * Includes: xfw_structs.h, ct_structs.h.
 */
#ifndef XFW_CT_MAPS_H
#define XFW_CT_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "xfw_structs.h"
#include "ct_structs.h"

/* Default table sizes; the control plane may resize before loading. */
#define XFW_CT_MAX 262144
#define XFW_CT_NEW_MAX 65536

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ct_cfg);
	__uint(max_entries, 1);
} xfw_ct_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, struct xfw_ct_key);
	__type(value, struct xfw_ct_entry);
	__uint(max_entries, XFW_CT_MAX);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} xfw_ct SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_ct_key);
	__type(value, struct xfw_ct_entry);
	__uint(max_entries, XFW_CT_NEW_MAX);
} xfw_ct_new SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ct_scratch);
	__uint(max_entries, 2);
} xfw_ct_scratch SEC(".maps");

/* Statistics (enum xfw_ctstat), per CPU: xfw_ctstat_add. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_NCTSTATS);
} xfw_ct_stats SEC(".maps");

/* The sweep's bookkeeping: one element (xfw_ct_sweep_main, ct_track.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_ct_sweep);
	__uint(max_entries, 1);
} xfw_ct_sweep SEC(".maps");

/* The loopback handoff's table (ct_track.h): attached states in flight
 * from a loopback packet's OUTPUT to its INPUT. */

/* Handoffs in flight: each lives from the TC hook to the XDP hook of one
 * loopback pass, so a few hundred cover any burst; LRU forgets a packet
 * the stack dropped in between. */
#define XFW_CT_LO_HANDOFFS 1024

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__type(key, struct xfw_ct_lo_key);
	__type(value, struct xfw_ct_facts);
	__uint(max_entries, XFW_CT_LO_HANDOFFS);
} xfw_ct_lo_handoff SEC(".maps");

#endif /* XFW_CT_MAPS_H */
