/* SPDX-License-Identifier: GPL-2.0 */
/*
 * reject.h — stage 4: REJECT replies built in the data plane.
 * (Being written; until then REJECT drops.)
 */
#ifndef XFW_REJECT_H
#define XFW_REJECT_H

#include "common.h"
#include "parse.h"

static __always_inline int xfw_xdp_reject(struct xdp_md *ctx, struct xfw_pkt *p, __u32 type)
{
	return XDP_DROP;
}

static __always_inline int xfw_tc_reject(struct __sk_buff *skb, struct xfw_pkt *p, __u32 type)
{
	return TC_ACT_SHOT;
}

#endif
