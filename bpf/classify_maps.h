/* SPDX-License-Identifier: GPL-2.0 */
/*
 * classify_maps.h — the maps of the classifier (stages 2 and 3) and of the
 * generations it reads: the per-ruleset inner maps and their outer maps,
 * the slots' configuration and banks, the set lookups' tables, the
 * in-flight counts, statistics and per-CPU scratch. The control plane
 * (internal/dataplane) finds them by these names.
 *
 * Generations. Every per-ruleset map is an inner map of an ARRAY_OF_MAPS
 * outer map (xfw_o_*) with XFW_NSLOTS slots: slot = family * 2 + bank. The
 * control plane builds a new ruleset's inner maps in the family's idle bank,
 * writes that slot's xfw_cfg entry, then flips xfw_bank[family] — one 4-byte
 * write, so a packet sees either the old generation or the new one, never a
 * mix. The programs are loaded (and verified) once per namespace; a ruleset
 * change creates maps only. A packet reads its slot once (xfw_active_slot)
 * and carries it (struct xfw_pending .slot) through every later lookup.
 *
 * Inner array maps carry BPF_F_INNER_MAP so each generation sizes its own
 * (the verifier then calls the lookup instead of inlining it), and
 * BPF_F_MMAPABLE so the control plane fills them with one memory copy
 * instead of a syscall per batch.
 *
 * Includes: common.h, xfw_structs.h, classify_structs.h. Defines the
 * map-template macros (XFW_INNER_ARRAY, XFW_OUTER, XFW_SET_OUTER) other
 * maps headers use.
 */
#ifndef XFW_CLASSIFY_MAPS_H
#define XFW_CLASSIFY_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "classify_structs.h"

/* Statistics (enum xfw_stat), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, XFW_NSTATS);
} xfw_stats SEC(".maps");

/* Inner map templates: the loader creates one of each per generation with
 * the generation's own max_entries. Sizes, not BTF types: clang emits a
 * struct reached only through pointers as a bare declaration, which has no
 * size. */
#define XFW_INNER_ARRAY(name, vtype)                                               \
struct name {                                                                      \
	__uint(type, BPF_MAP_TYPE_ARRAY);                                          \
	__uint(key_size, sizeof(__u32));                                           \
	__uint(value_size, sizeof(vtype));                                         \
	__uint(max_entries, 1);                                                    \
	__uint(map_flags, BPF_F_INNER_MAP | BPF_F_MMAPABLE);                       \
}
XFW_INNER_ARRAY(xfw_small_m, __u32);
XFW_INNER_ARRAY(xfw_bounds_m, struct xfw_bnode);
/* Class → chunk ids, then the chunk masks: two __u32 an element (an
 * array's elements take 8 bytes whatever their value's size, so one
 * __u32 an element left half of the map padding: 61 MB of 122 at 10K
 * kube-proxy services). */
XFW_INNER_ARRAY(xfw_clsch_m, struct xfw_u32pair);
XFW_INNER_ARRAY(xfw_chunks_m, struct xfw_chunk);
XFW_INNER_ARRAY(xfw_entries_m, struct xfw_entry);
XFW_INNER_ARRAY(xfw_logcfg_m, struct xfw_logcfg);
XFW_INNER_ARRAY(xfw_limit_m, struct xfw_limit);
XFW_INNER_ARRAY(xfw_probe_m, struct xfw_probe);
struct xfw_hcls_m {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, sizeof(struct xfw_hkey));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 1);
};
/* Counters: per CPU by hand, since PERCPU_ARRAY refuses BPF_F_INNER_MAP.
 * Element cpu * ncounters + counter: each CPU's counters are contiguous, so
 * CPUs do not share cache lines, and no atomic operation is needed (XDP and
 * TC programs are not migrated while they run). */
XFW_INNER_ARRAY(xfw_counters_m, struct xfw_counter);

/* A set condition's LPM tables (bpf/lpm.h): direct entries and ranges, one
 * inner map each, __u64 words. */
XFW_INNER_ARRAY(xfw_lpm_m, __u64);

#define XFW_OUTER(name, inner)                                                     \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                  \
	__type(key, __u32);                                                        \
	__uint(max_entries, XFW_NSLOTS);                                           \
	__array(values, struct inner);                                             \
} name SEC(".maps")
XFW_OUTER(xfw_o_small, xfw_small_m);
XFW_OUTER(xfw_o_bounds, xfw_bounds_m);
XFW_OUTER(xfw_o_hcls, xfw_hcls_m);
XFW_OUTER(xfw_o_clsch, xfw_clsch_m);
XFW_OUTER(xfw_o_chunks, xfw_chunks_m);
XFW_OUTER(xfw_o_entries, xfw_entries_m);
XFW_OUTER(xfw_o_counters, xfw_counters_m);
XFW_OUTER(xfw_o_logcfg, xfw_logcfg_m);
/* Limit matches' token buckets (limit.h): shared by the CPUs, one per
 * match, written full with each generation (the kernel's buckets start
 * full whenever iptables replaces the table). */
XFW_OUTER(xfw_o_limit, xfw_limit_m);
/* The probes the walk's XFW_EF_PROBE entries name (probe.h). */
XFW_OUTER(xfw_o_probe, xfw_probe_m);
/* Set entry counters: shared by the CPUs and updated with atomic adds, as
 * the kernel's ipset counters are (one element is rarely hit by several
 * CPUs at once, and a set may hold millions of elements: per-CPU copies
 * would multiply that). The counters of a list:set's entries are the
 * generation's (xfw_o_setctr, by slot; xfw_family_cfg.setlk_lctr); those of
 * a set's elements belong to its hash table (xfw_o_setectr, by lookup, the
 * element at xfw_setval.ctr - 1) and go with it when a new generation
 * takes the table over unchanged. The control plane carries counts over
 * to rebuilt tables (atomic adds through its memory mapping) and folds
 * them into the stored sets. */
XFW_INNER_ARRAY(xfw_setctr_m, struct xfw_counter);
XFW_OUTER(xfw_o_setctr, xfw_setctr_m);

/* The set lookups' tables: element slot * XFW_MAX_SETLOOKUPS + lookup. */
#define XFW_SET_OUTER(name, inner)                                                 \
struct {                                                                           \
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                                  \
	__type(key, __u32);                                                        \
	__uint(max_entries, XFW_NSLOTS * XFW_MAX_SETLOOKUPS);                      \
	__array(values, struct inner);                                             \
} name SEC(".maps")
XFW_SET_OUTER(xfw_o_setdir, xfw_lpm_m);
XFW_SET_OUTER(xfw_o_setrng, xfw_lpm_m);

/* A hash set table (kinds other than XFW_SETK_DXR): allocated per element
 * (BPF_F_NO_PREALLOC), so a set created with a large maxelem costs what it
 * holds, and an update replaces an element as a whole (a lookup sees the
 * old value or the new one). Each generation sizes its own. */
struct xfw_sethash_m {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, sizeof(struct xfw_setkey));
	__uint(value_size, sizeof(struct xfw_setval));
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
};
XFW_SET_OUTER(xfw_o_sethash, xfw_sethash_m);
XFW_SET_OUTER(xfw_o_setectr, xfw_setctr_m);

/* Per-slot ruleset configuration (struct xfw_family_cfg), written by the
 * control plane before it flips the bank. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_family_cfg);
	__uint(max_entries, XFW_NSLOTS);
} xfw_cfg SEC(".maps");

/* Active bank (0 or 1) of each family. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 3); /* the families' banks, then XFW_BANK_IFGEN */
} xfw_bank SEC(".maps");

/* Program runs begun and ended on one CPU (see Quiescence, generation.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_inflight);
	__uint(max_entries, 1);
} xfw_inflight SEC(".maps");

/* The walk's state lives in a per-CPU scratch element, not on the stack:
 * the deepest call chain (program → xfw_classify → xfw_set_bits →
 * bpf_loop → xfw_hwalk_step) must fit in 512 bytes. Runs of one CPU
 * do not nest (see Quiescence, generation.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_hwalk);
	__uint(max_entries, 1);
} xfw_hwalk_scratch SEC(".maps");

/* What a packet's set lookups found (struct xfw_sethits), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_sethits);
	__uint(max_entries, 1);
} xfw_sethits_scratch SEC(".maps");

#endif /* XFW_CLASSIFY_MAPS_H */
