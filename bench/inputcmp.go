package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// fwXFWBase is a second xfw build (-input-base), measured beside xfw in the
// same run.
const fwXFWBase = "xfw-base"

// fwXFWGeneric is xfw attached in generic XDP mode.
const fwXFWGeneric = "xfw-generic"

// Bare programs on fw's ingress veth, no firewall: what a hook costs by
// itself (an XDP program that returns XDP_PASS in native mode, a TCX
// ingress program that returns TCX_NEXT, both).
const (
	fwXDPPass  = "xdp-pass"
	fwTCXPass  = "tcx-pass"
	fwBothPass = "xdp+tcx-pass"
	fwXDPRead  = "xdp-read"
	// xdp-spin, xdp-spin-generic: spinFirewall.
	fwXDPSpin        = "xdp-spin"
	fwXDPSpinGeneric = "xdp-spin-generic"
)

// tcxNext is TCX_NEXT, a TCX program's "go on" verdict.
const tcxNext = -1

// barePassFirewall attaches bare pass programs to fw's ingress veth at
// load (xdp: native XDP, tcx: TCX ingress) and detaches them at reset.
func barePassFirewall(name string, xdp, tcx bool) *firewall {
	return barePassFirewallRead(name, xdp, tcx, false)
}

// spinAdds is the length of the xdp-spin programs' chain of dependent
// additions: about as long as xfw_xdp's run for an INPUT packet with no
// rules (~50 ns), with no memory access.
const spinAdds = 200

// spinFirewall attaches an XDP program that runs spinAdds dependent
// additions and returns XDP_PASS, natively or generically: whether a
// program's length alone, without memory accesses, costs more in native
// mode on the veth's frames.
func spinFirewall(name string, generic bool) *firewall {
	fw := barePassFirewall(name, false, false)
	var closers []func()
	fw.load = func(ctx context.Context, ns string, _ *ruleset) error {
		if len(closers) > 0 {
			return nil
		}
		insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0)}
		for i := 0; i < spinAdds; i++ {
			insns = append(insns, asm.Add.Imm(asm.R0, 1))
		}
		insns = append(insns, asm.And.Imm(asm.R0, 0), asm.Add.Imm(asm.R0, xdpPass), asm.Return())
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xb_spin", Type: ebpf.XDP, License: "GPL", Instructions: insns})
		if err != nil {
			return fmt.Errorf("load XDP spin: %w", err)
		}
		flags := link.XDPDriverMode
		if generic {
			flags = link.XDPGenericMode
		}
		return nettest.InNamespace(ns, func() error {
			l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: fwInIfindex, Flags: flags})
			if err != nil {
				prog.Close()
				return fmt.Errorf("attach XDP spin: %w", err)
			}
			closers = append(closers, func() { l.Close(); prog.Close() })
			return nil
		})
	}
	return fw
}

// barePassFirewallRead is barePassFirewall whose XDP program, if read,
// loads a word of the frame's IPv4 header before returning XDP_PASS.
func barePassFirewallRead(name string, xdp, tcx, read bool) *firewall {
	var closers []func()
	reset := func(context.Context, string) error {
		for _, c := range closers {
			c()
		}
		closers = nil
		return nil
	}
	load := func(ctx context.Context, ns string, _ *ruleset) error {
		if len(closers) > 0 {
			return nil
		}
		return nettest.InNamespace(ns, func() error {
			if xdp {
				insns := asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()}
				if read {
					const ipSrc = 26 // IPv4 source address: Ethernet header + 12
					insns = asm.Instructions{
						asm.LoadMem(asm.R2, asm.R1, 0, asm.Word), // data
						asm.LoadMem(asm.R3, asm.R1, 4, asm.Word), // data_end
						asm.Mov.Reg(asm.R4, asm.R2),
						asm.Add.Imm(asm.R4, ipSrc+4),
						asm.Mov.Imm(asm.R0, xdpPass),
						asm.JGT.Reg(asm.R4, asm.R3, "out"),
						asm.LoadMem(asm.R5, asm.R2, ipSrc, asm.Word),
						asm.JEq.Imm(asm.R5, 0, "out"),
						asm.Mov.Imm(asm.R0, xdpPass),
						asm.Return().WithSymbol("out"),
					}
				}
				prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xb_pass", Type: ebpf.XDP, License: "GPL",
					Instructions: insns})
				if err != nil {
					return fmt.Errorf("load XDP pass: %w", err)
				}
				l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: fwInIfindex, Flags: link.XDPDriverMode})
				if err != nil {
					prog.Close()
					return fmt.Errorf("attach XDP pass: %w", err)
				}
				closers = append(closers, func() { l.Close(); prog.Close() })
			}
			if tcx {
				prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "xb_tcxpass", Type: ebpf.SchedCLS, License: "GPL",
					Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, tcxNext), asm.Return()}})
				if err != nil {
					return fmt.Errorf("load TCX pass: %w", err)
				}
				l, err := link.AttachTCX(link.TCXOptions{Program: prog, Interface: fwInIfindex, Attach: ebpf.AttachTCXIngress})
				if err != nil {
					prog.Close()
					return fmt.Errorf("attach TCX pass: %w", err)
				}
				closers = append(closers, func() { l.Close(); prog.Close() })
			}
			return nil
		})
	}
	return &firewall{Name: name, load: load, reset: reset}
}

// runInputCompare measures INPUT at the -quick-sizes rule counts in one
// run: the kernel with no firewall, the xfw build at baseBin, xfw,
// iptables-nft and nftables, alternating within each repetition, and
// prints received pps and fw's CPU per packet.
func runInputCompare(ctx context.Context, o *options, baseBin, only string) error {
	fws := firewalls(o.xfwBin)
	base := xfwFirewall(baseBin)
	base.Name = fwXFWBase
	fws[fwXFWBase] = base
	// xfw with generic XDP (XFW_XDP_MODE=generic at every command): the
	// program runs on the skb the stack built, after the driver.
	gen := xfwFirewall(o.xfwBin)
	gen.Name = fwXFWGeneric
	gen.load = func(ctx context.Context, ns string, rs *ruleset) error {
		_, err := runIn(ctx, loadTimeout, ns, strings.NewReader(rs.iptablesRestore(false)),
			"env", "XFW_XDP_MODE=generic", o.xfwBin, "iptables-restore", "-w")
		return err
	}
	fws[fwXFWGeneric] = gen
	// Further builds: name=path pairs (-input-xfws).
	for _, kv := range strings.Split(o.inputXFWs, ",") {
		name, path, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			continue
		}
		fw := xfwFirewall(path)
		fw.Name = name
		fws[name] = fw
	}
	fws[fwXDPPass] = barePassFirewall(fwXDPPass, true, false)
	fws[fwTCXPass] = barePassFirewall(fwTCXPass, false, true)
	fws[fwBothPass] = barePassFirewall(fwBothPass, true, true)
	fws[fwXDPRead] = barePassFirewallRead(fwXDPRead, true, false, true)
	fws[fwXDPSpin] = spinFirewall(fwXDPSpin, false)
	fws[fwXDPSpinGeneric] = spinFirewall(fwXDPSpinGeneric, true)
	var systems []*firewall
	for _, n := range strings.Split(only, ",") {
		fw := fws[strings.TrimSpace(n)]
		if fw == nil {
			return fmt.Errorf("-input-systems: no system %q", n)
		}
		systems = append(systems, fw)
	}
	rigs, err := newRigs(ctx, systems)
	if err != nil {
		return err
	}
	defer closeRigs(rigs)
	input, chain := !o.compareForward, "INPUT"
	if o.compareForward {
		chain = "FORWARD"
	}
	sec, err := runScaling(ctx, o, rigs, scaleConfig{
		title: "Scaling, " + chain + " (compare)", xLabel: "5-tuple rules", xs: quickSizes, input: input,
		rulesets: func(x int) (*ruleset, []flow) {
			flows := fiveTupleFlows(max(x, 1), input)
			return fiveTupleRuleset(chain, flows[:x]), flows
		},
	})
	if err != nil {
		return err
	}
	fmt.Print(inputCompareTable(sec))
	return nil
}

// inputCompareTable renders the section: per rule count and system,
// received pps and fw CPU ns per packet, medians (min–max).
func inputCompareTable(sec *throughputSection) string {
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
	return b.String()
}
