// SPDX-License-Identifier: GPL-2.0
/*
 * ct_clock.c — the connection tables' clock for user space, an object of
 * its own (internal/dataplane/bpf/ct_clock.o).
 *
 * Connection expiry times are bpf_jiffies64() values, which user space
 * cannot read directly. xfw_ct_clock is never attached: the control plane
 * loads it on demand (with its own xfw_ct_now), runs it once with
 * BPF_PROG_TEST_RUN and reads the jiffies it stored (internal/dataplane,
 * conntrack.go). It shares nothing with xfw.o, so loading it needs no
 * running xfw and leaves xfw's programs alone.
 *
 * Includes: the kernel's UAPI and libbpf's helpers only.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 1);
} xfw_ct_now SEC(".maps");

SEC("xdp")
int xfw_ct_clock(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *now = bpf_map_lookup_elem(&xfw_ct_now, &zero);

	if (now)
		*now = bpf_jiffies64();
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
