package main

import (
	"context"
	"fmt"
	"strings"
)

// The XDP fast path for FORWARD (bpf/fastpath.h) measured against xfw with
// it off, the kernel with no firewall and iptables-nft, in the same run
// (`xfwbench -fastpath`, the rule counts of -quick-sizes, -reps each).
// sink runs an XDP program (topo.go), so fw's out0 takes XDP frames and is
// a fast-path target.

// fwXFWStack is xfw with the fast path off (XFW_FASTPATH=off at every
// command): every accepted packet forwarded by the stack.
const fwXFWStack = "xfw-stack"

// xfwStackFirewall is xfw whose commands run with XFW_FASTPATH=off.
func xfwStackFirewall(xfwBin string) *firewall {
	fw := xfwFirewall(xfwBin)
	fw.Name = fwXFWStack
	fw.load = func(ctx context.Context, ns string, rs *ruleset) error {
		_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.iptablesRestore(false)),
			"env", "XFW_FASTPATH=off", xfwBin, "iptables-restore", "-w")
		return err
	}
	return fw
}

// fwXFWRPF is xfw with strict reverse-path filtering on in fw (rp_filter 1
// for "all"): every forwarded packet also passes the reverse-path check
// (bpf/route.h xfw_rpf) before the fast path takes it.
const fwXFWRPF = "xfw-rp_filter"

// xfwRPFFirewall is xfw whose fw namespace has rp_filter 1 for "all" (set
// before the ruleset loads, which mirrors it).
func xfwRPFFirewall(xfwBin string) *firewall {
	fw := xfwFirewall(xfwBin)
	fw.Name = fwXFWRPF
	load := fw.load
	fw.load = func(ctx context.Context, ns string, rs *ruleset) error {
		if err := mustIn(ctx, ns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1"); err != nil {
			return err
		}
		return load(ctx, ns, rs)
	}
	return fw
}

// runFastPath runs the comparison and prints its table.
func runFastPath(ctx context.Context, o *options) error {
	fws := firewalls(o.xfwBin)
	systems := []*firewall{fws[fwNone], fws[fwXFW], xfwRPFFirewall(o.xfwBin), xfwStackFirewall(o.xfwBin), fws[fwIptNFT]}
	rigs, err := newRigs(ctx, systems)
	if err != nil {
		return err
	}
	defer closeRigs(rigs)
	sec, err := runScaling(ctx, o, rigs, quickForward("Scaling, FORWARD (fast path)"))
	if err != nil {
		return err
	}
	fmt.Print(fastPathTable(sec))
	return nil
}

// fastPathTable renders the section: per rule count and system, received
// pps and fw CPU ns per packet, medians (min–max), and the ratios the
// fast path is held to.
func fastPathTable(sec *throughputSection) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| rules | system | rx pps | fw CPU ns/pkt |\n|---|---|---|---|\n")
	for _, x := range sec.Xs {
		for _, name := range sec.Firewalls {
			p := sec.get(name, x)
			if p == nil {
				continue
			}
			if p.Error != "" {
				fmt.Fprintf(&b, "| %d | %s | %s | |\n", x, name, p.Error)
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) |\n", x, name,
				p.PPS.Median, p.PPS.Min, p.PPS.Max, p.NsPerPkt.Median, p.NsPerPkt.Min, p.NsPerPkt.Max)
		}
	}
	ratio := func(a, bName string, xa, xb int) string {
		pa, pb := sec.get(a, xa), sec.get(bName, xb)
		if pa == nil || pb == nil || pb.PPS.Median == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f×", pa.PPS.Median/pb.PPS.Median)
	}
	if len(sec.Xs) > 0 {
		x0 := sec.Xs[0]
		fmt.Fprintf(&b, "\nxfw / no firewall at %d rules: %s (stack path: %s)\n", x0,
			ratio(fwXFW, fwNone, x0, x0), ratio(fwXFWStack, fwNone, x0, x0))
		fmt.Fprintf(&b, "xfw with rp_filter 1 / xfw at %d rules: %s\n", x0, ratio(fwXFWRPF, fwXFW, x0, x0))
		for _, x := range sec.Xs[1:] {
			fmt.Fprintf(&b, "xfw at %d rules / xfw at %d: %s\n", x, x0, ratio(fwXFW, fwXFW, x, x0))
		}
	}
	return b.String()
}
