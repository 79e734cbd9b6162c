package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
)

// bpfProbe mirrors struct xfw_probe: one of a generation's probes
// (compiler.Generation.Probes), element k of the slot's xfw_o_probe.
type bpfProbe struct {
	Kind  uint32
	Arg   uint32
	Val   uint32
	Mask  uint32
	Count uint64
}

// fillProbes writes a generation's probes into its xfw_o_probe map. An
// nth statistic probe's counter starts where the kernel's does when
// iptables replaces the table (compiler.NthInitialCount): every generation
// has new counters.
func fillProbes(m *ebpf.Map, probes []compiler.Probe) error {
	err := putArray(m, len(probes), func(i int) bpfProbe {
		pr := probes[i]
		b := bpfProbe{Kind: uint32(pr.Kind), Arg: pr.Arg, Val: pr.Val, Mask: pr.Mask}
		if pr.Kind == compiler.ProbeStatistic && pr.Arg&compiler.StatisticNth != 0 {
			b.Count = compiler.NthInitialCount(pr)
		}
		switch pr.Kind {
		case compiler.ProbeOwner, compiler.ProbeNatRange, compiler.ProbeCtRepl, compiler.ProbeNatAddr6:
			// The gid range (bpf/owner.h), the NAT ports
			// (bpf/nat_range.h), --ctrepldst (bpf/ctnat.h), an IPv6
			// NAT address's low 64 bits.
			b.Count = pr.Wide
		}
		return b
	})
	if err != nil {
		return fmt.Errorf("fill probes: %w", err)
	}
	return nil
}
