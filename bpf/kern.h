/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kern.h — the kernel structures more than one header reads through
 * bpf_cast_to_kern_ctx and CO-RE (preserve_access_index): only the
 * members used are declared (the object builds without vmlinux.h), each
 * type named with a ___xfw flavour so it does not clash with the UAPI
 * headers. A header declares the structures only it reads itself
 * (owner.h: the socket's file and credentials; netns.h: the device's
 * namespace).
 *
 * Includes: nothing of xfw's.
 */
#ifndef XFW_KERN_H
#define XFW_KERN_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* The kfunc giving the kernel's object behind a program's context
 * (struct sk_buff for a __sk_buff, struct xdp_buff for an xdp_md). */
extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

struct net_device___xfw;
struct sock___xfw;

/* struct sk_buff: its device (netns.h) and its socket (owner.h). */
struct sk_buff___xfw {
	struct net_device___xfw *dev;
	struct sock___xfw *sk;
} __attribute__((preserve_access_index));

#endif /* XFW_KERN_H */
