/* SPDX-License-Identifier: GPL-2.0 */
/*
 * bridge.h — br_netfilter's iptables for bridged traffic: frames bridged
 * from port to port walk FORWARD, and -m physdev's ports
 * (internal/compiler physdev.go; internal/dataplane bridge.go).
 *
 * With bridge-nf-call-iptables (-ip6tables for IPv6) on in the namespace,
 * the kernel passes a bridge's IP frames to iptables: those it forwards
 * from port to port walk PREROUTING, FORWARD and POSTROUTING with -i and
 * -o the bridge device and the ports as --physdev-in / --physdev-out; those
 * it passes up (for the host, or to be routed) carry their input port for
 * -m physdev in the IP hooks. Where xfw sees them:
 *
 *  - Bridged frames: at the TC egress of the output port (the control
 *    plane attaches only that program to ports). A frame leaving a port
 *    that came in by a port of the same bridge (skb->ingress_ifindex, the
 *    input port: the bridge forwards it without another receive) is
 *    judged there in FORWARD (xfw_tc_bridged), with connection tracking
 *    as in the other hooks (the kernel tracks bridged connections).
 *    Everything else leaving a port came from the bridge device (the
 *    host's packets, or routed ones) and was judged on the bridge.
 *    A frame from a device xfw was not told about (a port created since
 *    the last load) is judged too, its input port unnamed.
 *  - Frames passed up: the bridge's XDP hook sees them after the port,
 *    in the same call chain on the same CPU (the port's receive hands
 *    the frame to the bridge, which hands it to its own receive). The
 *    port's TC ingress hook notes the frame it receives (its ifindex,
 *    length and first XFW_BR_NOTE bytes, in a per-CPU slot:
 *    xfw_br_note_tc); the bridge's XDP hook takes that port as the input
 *    port when the frame it sees is the one noted (xfw_br_port_xdp),
 *    else a port of that bridge it cannot name (XFW_PHYS_ANYPORT: the
 *    frame was steered to another CPU, or the port runs no program yet).
 *    The output port is none (XFW_PHYS_NULL; the kernel's hooks run
 *    before the bridge picks one) (xfw_phys_xdp).
 *  - Everything else has no bridge information (XFW_PHYS_NONE, both
 *    fields 0 as the parser leaves them).
 *
 * xfw_ifinfo says which devices are ports (XFW_IF_PORT; its .ifindex is
 * then the bridge, the device iptables sees) and whether the namespace's
 * sysctls are on (XFW_IF_BRNF4, XFW_IF_BRNF6 on bridges and ports): off,
 * bridged frames pass unjudged and nothing has ports, as in the kernel.
 * With bridge-nf-filter-vlan-tagged (XFW_IF_BRVLAN), VLAN-tagged IP
 * frames are judged too (bridge_tc.h; a tagged frame passed up:
 * xfw_phys_xdp); with bridge-nf-filter-pppoe-tagged (XFW_IF_BRPPPOE), the
 * IP datagrams of PPPoE session frames (parse.h XFW_PARSE_F_PPPOE);
 * non-IP frames (ARP: arptables) pass.
 *
 * The judgement of bridged frames is in bridge_tc.h (it uses xfw.c's
 * xfw_judge and xfw_tc_parse).
 *
 * Includes: common.h, parse.h, xfw_maps.h.
 */
#ifndef XFW_BRIDGE_H
#define XFW_BRIDGE_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_packet.h>
#include <bpf/bpf_helpers.h>
#include "common.h"
#include "parse.h"
#include "xfw_maps.h"

/* The Ethernet broadcast address as a 48-bit number. */
#define XFW_BR_MAC_BCAST 0xffffffffffffULL
/* Bytes of a frame a port notes: the Ethernet header and the start of
 * the IP header (IPv4's length, identification and checksum, IPv6's flow
 * label and payload length), as 8-byte words. */
#define XFW_BR_NOTE 32
#define XFW_BR_NOTE_WORDS (XFW_BR_NOTE / 8)

/* The frame the bridge's XDP hook sent back into the bridge last on this
 * CPU (bridge_redo.h): its input port (0: none), length and first bytes,
 * its flags (XFW_BR_REDO_*) and a first frame's DNAT verdict. */
struct xfw_br_redo {
	__u32 port;
	__u32 len;
	__u64 w[XFW_BR_NOTE_WORDS];
	__u32 flags;
	__u32 nat_addr, nat_port; /* xfw_pending's */
	__u32 mark;               /* the walk's mark */
	__u32 slot;               /* the generation's slot it was judged in */
	__u32 via;                /* the skb's ingress_ifindex expected */
};

/* The frame a port received last on this CPU, and the frame the bridge's
 * XDP hook sent back into its bridge last. */
struct xfw_br_note {
	__u32 ifindex; /* 0: none */
	__u32 len;
	__u64 w[XFW_BR_NOTE_WORDS];
	__u32 tagged;  /* its receive took a VLAN tag out of it */
	__u32 pad;
	struct xfw_br_redo redo;
};

/* xfw_br_port_xdp's bit for a frame noted with a tag (above the port). */
#define XFW_BR_PORT_TAGGED (1ULL << 32)
/* xfw_phys_xdp's answers besides 0: a frame its port received with a VLAN
 * tag, to pass unjudged, or to walk through PREROUTING before the stack
 * drops it (bridge-nf-filter-vlan-tagged on). */
#define XFW_BR_TAGGED_PASS 1
#define XFW_BR_TAGGED_PRE 2

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct xfw_br_note);
	__uint(max_entries, 1);
} xfw_br_notes SEC(".maps");

/* xfw_br_note_tc notes the frame a bridge port receives (TC ingress),
 * when its bridge passes IP to iptables. */
static __always_inline void xfw_br_note_tc(struct __sk_buff *skb)
{
	__u64 key = skb->ifindex;
	struct xfw_ifinfo *ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	struct xfw_br_note *n;
	__u32 zero = 0;

	if (!ifi || !(ifi->flags & XFW_IF_PORT) || !(ifi->flags & (XFW_IF_BRNF4 | XFW_IF_BRNF6)))
		return;
	n = bpf_map_lookup_elem(&xfw_br_notes, &zero);
	if (!n)
		return;
	n->ifindex = 0;
	if (skb->len >= XFW_BR_NOTE && bpf_skb_load_bytes(skb, 0, n->w, XFW_BR_NOTE) == 0) {
		n->len = skb->len;
		n->ifindex = skb->ifindex;
		n->tagged = skb->vlan_present;
	}
}

/* xfw_br_port_xdp returns the port the frame in ctx came in by, as its
 * TC ingress hook noted it, with XFW_BR_PORT_TAGGED when that frame came
 * with a VLAN tag, or XFW_PHYS_ANYPORT. A global function: its buffer
 * stays off the hook's frame. */
__attribute__((noinline)) __u64 xfw_br_port_xdp(struct xdp_md *ctx)
{
	__u64 w[XFW_BR_NOTE_WORDS], port;
	struct xfw_br_note *n;
	__u32 zero = 0, len;

	if (!ctx)
		return XFW_PHYS_ANYPORT;
	len = ctx->data_end - ctx->data;
	n = bpf_map_lookup_elem(&xfw_br_notes, &zero);
	if (!n || !n->ifindex || n->len != len ||
	    bpf_xdp_load_bytes(ctx, 0, w, XFW_BR_NOTE) != 0)
		return XFW_PHYS_ANYPORT;
	for (int i = 0; i < XFW_BR_NOTE_WORDS; i++)
		if (w[i] != n->w[i])
			return XFW_PHYS_ANYPORT;
	/* Taken: a later frame of the bridge's own is no port's. */
	port = n->ifindex | (n->tagged ? XFW_BR_PORT_TAGGED : 0);
	n->ifindex = 0;
	return port;
}

/* xfw_brnf_bit returns the XFW_IF_BRNF* bit of p's family. */
static __always_inline __u16 xfw_brnf_bit(const struct xfw_pkt *p)
{
	return p->fam ? XFW_IF_BRNF6 : XFW_IF_BRNF4;
}

/* xfw_phys_xdp sets p's ports for a packet the bridge device's XDP hook
 * received from one of its ports (ifi: the device's facts). A frame its
 * port received with a VLAN tag (out of the frame's data since, unseen by
 * generic XDP) is passed up tagged, and the stack hands it to the
 * bridge's VLAN device or drops it: none of the bridge's chains but
 * PREROUTING sees it, and that one only with bridge-nf-filter-vlan-tagged
 * (br_netfilter's hook, XFW_BR_TAGGED_PRE); else XFW_BR_TAGGED_PASS. A
 * PPPoE session frame's IP datagram (p->vlan XFW_VLAN_PPPOE) likewise,
 * tagged or not, with bridge-nf-filter-pppoe-tagged (the stack has no
 * PPPoE session of its own: it drops the frame); on a device that is no
 * bridge, 0 (the caller passes it). */
static __always_inline int xfw_phys_xdp(struct xdp_md *ctx, struct xfw_pkt *p,
					const struct xfw_ifinfo *ifi)
{
	__u64 in;

	if ((p->vlan && p->vlan != XFW_VLAN_PPPOE) || (ifi->flags & XFW_IF_PORT) ||
	    !(ifi->flags & xfw_brnf_bit(p)))
		return 0;
	in = xfw_br_port_xdp(ctx);
	p->physin = (__u32)in;
	p->physout = XFW_PHYS_NULL;
	if (p->vlan == XFW_VLAN_PPPOE)
		return ifi->flags & XFW_IF_BRPPPOE ? XFW_BR_TAGGED_PRE : XFW_BR_TAGGED_PASS;
	if (!(in & XFW_BR_PORT_TAGGED))
		return 0;
	return ifi->flags & XFW_IF_BRVLAN ? XFW_BR_TAGGED_PRE : XFW_BR_TAGGED_PASS;
}

/* xfw_br_port returns the bridge of port ifindex with its flags (bridge
 * << 16 | flags), 0 when ifindex is no port. */
static __always_inline __u64 xfw_br_port(__u32 ifindex)
{
	__u64 key = ifindex;
	struct xfw_ifinfo *ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);

	if (!ifi || !(ifi->flags & XFW_IF_PORT))
		return 0;
	return (__u64)ifi->ifindex << 16 | ifi->flags;
}

/* xfw_br_bridged reports whether a frame leaving port ifindex of bridge
 * br came in by a port of br (or by a device xfw was not told about). */
static __always_inline int xfw_br_bridged(__u32 in, __u32 br)
{
	__u64 key = in;
	struct xfw_ifinfo *ifi;

	if (in == 0)
		return 0; /* the host's own, through the bridge device */
	ifi = bpf_map_lookup_elem(&xfw_ifinfo, &key);
	if (!ifi)
		return 1;
	return (ifi->flags & XFW_IF_PORT) && ifi->ifindex == br;
}

#endif /* XFW_BRIDGE_H */
