/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject_maps.h — REJECT's map: the per-CPU scratch its replies are built
 * in (struct xfw_rj_scratch, one slot per hook).
 *
 * Includes: reject_structs.h.
 */
#ifndef XFW_REJECT_MAPS_H
#define XFW_REJECT_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "reject_structs.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_rj_scratch);
	__uint(max_entries, 2);
} xfw_rj_scratch SEC(".maps");

#endif /* XFW_REJECT_MAPS_H */
