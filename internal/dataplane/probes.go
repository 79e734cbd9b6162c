package dataplane

import (
	"errors"
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
// iptables replaces the table (compiler.NthInitialCount); a recompile of
// the same rules then carries the running ones over (carryNthCounts).
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

// carryNthCounts gives the nth statistic probes of u's generation, written
// into m (the slot's xfw_o_probe), the running generation's counters when
// u compiles the same rules again (Update.SameRules: xfw sync, the agent,
// an ipset change that reloads the rules): the kernel's counters restart
// only when iptables replaces the table, which such a recompile is not. A
// running probe's counter is taken only at the same index with the same
// kind, arguments and values; the packets the running generation counts
// between this copy and the switch are not carried.
func carryNthCounts(cur *state, runSlot int64, m *ebpf.Map, u *Update) error {
	if !u.SameRules || runSlot < 0 || m == nil {
		return nil
	}
	var nth []uint32
	for i, pr := range u.Gen.Probes {
		if pr.Kind == compiler.ProbeStatistic && pr.Arg&compiler.StatisticNth != 0 {
			nth = append(nth, uint32(i))
		}
	}
	if len(nth) == 0 {
		return nil
	}
	run, err := cur.inner("probe", uint32(runSlot))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("nth counters: the running probes: %w", err)
	}
	defer run.Close()
	for _, k := range nth {
		var was, now bpfProbe
		if err := run.Lookup(k, &was); err != nil {
			continue // the running generation has fewer probes
		}
		if err := m.Lookup(k, &now); err != nil {
			return fmt.Errorf("nth counters: probe %d: %w", k, err)
		}
		if was.Kind != now.Kind || was.Arg != now.Arg || was.Val != now.Val || was.Mask != now.Mask {
			continue
		}
		now.Count = was.Count
		if err := m.Update(k, now, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("nth counters: probe %d: %w", k, err)
		}
	}
	return nil
}
