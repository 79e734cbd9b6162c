/* SPDX-License-Identifier: GPL-2.0 */
/*
 * probe.h — the walk's probes (XFW_EF_PROBE entries, classify.h): matches
 * whose answer the walk asks in rule order, because asking changes state
 * (a limit match's token bucket) or because the answer is no
 * classification field.
 *
 * A probe entry sits before its rule, under the conditions under which the
 * kernel evaluates the match (the rule's IP part and its matches before
 * it; internal/compiler/probe.go). Its .aux names a struct xfw_probe of
 * the slot's xfw_o_probe: the kind says which evaluator answers, .arg is
 * the kind's own (the limit bucket's index). True, the walk goes on at the
 * next entry (the rule, or the rule's next probe); false, past the rule.
 *
 * Adding a kind: a value of enum xfw_probe_kind (common.h), a case in
 * xfw_probe, the evaluator in a header of its own (as limit.h), the Go
 * side in internal/compiler/probe.go. An evaluator is given the parsed
 * packet (struct xfw_pkt, read-only: the hook's scratch copy, since a
 * pointer kept in the walk's state would not survive the verifier's view
 * of the global functions the walk calls) and the slot.
 *
 * Includes: common.h, xfw_structs.h, parse.h, classify_maps.h,
 * generation.h, xfw_maps.h (the hooks' scratch), limit.h, recent.h, hashlimit.h,
 * pred.h, connlimit.h, ctexpire.h, mark.h, connmark.h, owner.h, mangle.h,
 * ctnat.h, settarget.h.
 */
#ifndef XFW_PROBE_H
#define XFW_PROBE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "xfw_structs.h"
#include "parse.h"
#include "classify_maps.h"
#include "generation.h"
#include "xfw_maps.h"
#include "limit.h"
#include "recent.h"
#include "hashlimit.h"
#include "pred.h"
#include "connlimit.h"
#include "ctexpire.h"
#include "mark.h"
#include "connmark.h"
#include "owner.h"
#include "mangle.h"
#include "ctnat.h"
#include "settarget.h"

/* xfw_probe answers probe k of slot for the packet in the scratch of hook
 * (xfw_pending.hook): 1 true, 0 false, XFW_PROBE_HOTDROP (common.h) to
 * drop the packet at once (0 also for a probe or a kind the
 * generation lacks: nothing passes a rule whose probe cannot be asked). A
 * global function, verified once: it is called from the walk's step, the
 * deepest call chain. */
__attribute__((noinline)) int xfw_probe(__u32 hook, __u32 slot, __u32 k)
{
	void *m = xfw_inner(&xfw_o_probe, slot);
	struct xfw_xdp_scratch *sc;
	struct xfw_pkt *p;
	struct xfw_probe *pr;
	__u32 key = hook; /* one stack slot for both keys: the stack is short */

	sc = bpf_map_lookup_elem(&xfw_xdp_scratch, &key);
	if (!sc || !m)
		return 0;
	p = &sc->p;
	key = k;
	pr = bpf_map_lookup_elem(m, &key);
	if (!pr)
		return 0;
	switch (pr->kind) {
	case XFW_PROBE_LIMIT:
		return xfw_limit_take(slot, pr->arg);
	case XFW_PROBE_RECENT:
		return xfw_recent_match(slot, pr->arg, p);
	case XFW_PROBE_HASHLIMIT:
		return xfw_hashlimit(p, pr->arg);
	case XFW_PROBE_PRED:
		return xfw_pred_bit(hook, pr->arg);
	case XFW_PROBE_CONNLIMIT:
		return xfw_connlimit_probe(p, hook, slot, pr->arg);
	case XFW_PROBE_CTEXPIRE:
		return xfw_ctexpire_probe(p, hook, slot, pr->arg);
	case XFW_PROBE_CPU:
		/* xt_cpu: the CPU processing the packet; bit 31 inverts. */
		return (bpf_get_smp_processor_id() == (pr->arg & 0x7fffffff)) != (pr->arg >> 31);
	case XFW_PROBE_STATISTIC:
		return xfw_statistic(pr);
	case XFW_PROBE_MARK:
		return xfw_mark_match(pr, p);
	case XFW_PROBE_SETMARK:
		return xfw_mark_set(pr, p);
	case XFW_PROBE_CONNMARK:
		return xfw_connmark_match(pr, p, hook);
	case XFW_PROBE_SETCONNMARK:
		return xfw_connmark_set(pr, p, hook);
	case XFW_PROBE_OWNER:
		return xfw_owner_match(pr, p);
	case XFW_PROBE_MANGLE:
		return xfw_mangle_act(pr, p, &sc->cls, hook);
	case XFW_PROBE_MARKMOVED:
		/* A TTL or TOS PREROUTING changed routes anew too (XDP). */
		if (p->mark != sc->st.route_mark) /* mark_kernel.h */
			return 1;
		if (hook != XFW_SCRATCH_XDP)
			return 0;
		return ((pr->arg & XFW_REROUTE_TTL) && p->ttl != sc->st.route_ttl) ||
		       ((pr->arg & XFW_REROUTE_TOS) && p->tos != sc->st.route_tos);
	case XFW_PROBE_CTNAT:
		return xfw_ctnat_match(pr, p, hook);
	case XFW_PROBE_CTREPL:
		return xfw_ctrepl_match(pr, p, hook, m);
	case XFW_PROBE_SETTARGET:
		return xfw_set_target(p, slot, pr->arg, pr->val);
	case XFW_PROBE_SETMATCH:
		return xfw_set_written_match(p, slot, pr->arg);
	default:
		return 0;
	}
}

#endif /* XFW_PROBE_H */
