// SPDX-License-Identifier: GPL-2.0
/*
 * layouts.c — the BTF of every layout the data plane shares with user
 * space (xfw_structs.h) and of the enums user space mirrors (common.h), in
 * an object of its own (internal/dataplane/bpf/layouts.o) that is never
 * loaded. Clang puts a struct in an object's BTF only when a program's
 * arguments or a map's key or value reach it, which leaves out most of
 * the layouts xfw.o reaches through inner maps sized by hand
 * (classify_maps.h); here each is a member of one global variable. The Go
 * test TestLayoutMirrors (internal/dataplane) checks the Go mirrors
 * against this BTF field by field, and against xfw.o's where xfw.o has
 * the struct too; TestEnumMirrors checks the Go constants that mirror the
 * enums.
 *
 * Includes: common.h, xfw_structs.h, conn_structs.h. Add a member here for every struct
 * added there.
 */
#include <linux/types.h>
#include "common.h"
#include "xfw_structs.h"
#include "recent_structs.h"
#include "hashlimit_structs.h"
#include "pred_structs.h"
#include "conn_structs.h"
#include "classify_structs.h"

struct xfw_layouts {
	struct xfw_saddr6_ent saddr6_ent;
	struct xfw_saddr6_tab saddr6_tab;
	struct xfw_setlk setlk;
	struct xfw_setkey setkey;
	struct xfw_setval setval;
	struct xfw_entry entry;
	struct xfw_limit limit;
	struct xfw_probe probe;
	struct xfw_hl_table hl_table;
	struct xfw_hl_key hl_key;
	struct xfw_pred pred;
	struct xfw_u32_test u32_test;
	struct xfw_chunk chunk;
	struct xfw_u32pair u32pair;
	struct xfw_bnode bnode;
	struct xfw_hkey hkey;
	struct xfw_counter counter;
	struct xfw_logcfg logcfg;
	struct xfw_log_event log_event;
	struct xfw_family_cfg family_cfg;
	struct xfw_predrop predrop;
	struct xfw_ifinfo ifinfo;
	struct xfw_inflight inflight;
	struct xfw_state_page state_page;
	struct xfw_lpm4_key lpm4_key;
	struct xfw_lpm6_key lpm6_key;
	struct xfw_local_val local_val;
	struct xfw_route_val route_val;
	struct xfw_ext6cond ext6cond;
	struct xfw_h4cond h4cond;
	struct xfw_h4flag h4flag;
	struct xfw_ct_key ct_key;
	struct xfw_ct_tcp_side ct_tcp_side;
	struct xfw_ct_val ct_val;
	struct xfw_ct_entry ct_entry;
	struct xfw_ct_cfg ct_cfg;
	struct xfw_connlimit_key connlimit_key;
	struct xfw_ctexpire ctexpire;
	enum xfw_chain chain;
	enum xfw_field field;
	enum xfw_action action;
	enum xfw_reject reject;
	enum xfw_tcp_state tcp_state;
	enum xfw_ctstat ctstat;
	enum xfw_addrtype addrtype;
	enum xfw_probe_kind probe_kind;
	enum xfw_connmark_arg connmark_arg;
	enum xfw_settarget_arg settarget_arg;
	enum xfw_setw_meta setw_meta;
	enum xfw_owner_bits owner_bits;
	enum xfw_mangle_op mangle_op;
	enum xfw_ext6 ext6;
	enum xfw_hdr4 hdr4;
	enum xfw_stat stat;
	enum xfw_fp_why fp_why;
	struct xfw_rc_key rc_key;
	struct xfw_rc_ent rc_ent;
	struct xfw_rc_list rc_list;
	struct xfw_rc_rule rc_rule;
	struct xfw_nat_ifaddr_val nat_ifaddr_val;
};

struct xfw_layouts xfw_layouts;
