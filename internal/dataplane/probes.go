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
// into m (the slot's xfw_o_probe), the running generation's counters where
// the kernel's go on: all of them when u compiles the same rules again
// (Update.SameRules: xfw sync, the agent, an ipset change that reloads
// the rules), the kernel's counters restarting only when iptables
// replaces the table; those of the tables a command did not commit
// (u.nthCarry). With SameRules a running probe's counter is taken at the
// same index with the same kind, arguments and values. The packets the
// running generation counts between this copy and the switch are not
// carried.
func carryNthCounts(cur *state, runSlot int64, m *ebpf.Map, u *Update) error {
	if runSlot < 0 || m == nil {
		return nil
	}
	var pairs [][2]uint32
	switch {
	case u.SameRules:
		for i, pr := range u.Gen.Probes {
			if isNth(pr) {
				pairs = append(pairs, [2]uint32{uint32(i), uint32(i)})
			}
		}
	default:
		pairs = u.nthCarry
	}
	if len(pairs) == 0 {
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
	for _, p := range pairs {
		var was, now bpfProbe
		if err := run.Lookup(p[1], &was); err != nil {
			continue // the running generation has fewer probes
		}
		if err := m.Lookup(p[0], &now); err != nil {
			return fmt.Errorf("nth counters: probe %d: %w", p[0], err)
		}
		if was.Kind != now.Kind || was.Arg != now.Arg || was.Val != now.Val || was.Mask != now.Mask {
			continue
		}
		now.Count = was.Count
		if err := m.Update(p[0], now, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("nth counters: probe %d: %w", p[0], err)
		}
	}
	return nil
}

// isNth reports whether pr is an nth statistic probe.
func isNth(pr compiler.Probe) bool {
	return pr.Kind == compiler.ProbeStatistic && pr.Arg&compiler.StatisticNth != 0
}

// carriedNth pairs the nth probes of u's generation with the running
// generation's (metadata running) whose counters go on one by one: the
// probe of a rule Update.LimitsFrom names, whose running rule has the
// same nth match (match index, every, packet, inversion).
func carriedNth(u *Update, running *genMeta) [][2]uint32 {
	if u.SameRules || running == nil || len(u.LimitsFrom) == 0 || len(u.Gen.Statistics) == 0 {
		return nil
	}
	type key struct {
		rule  uint32
		match int
	}
	was := map[key]uint32{} // the running probe of each instance
	for k, pr := range running.Probes {
		if isNth(pr) && int(pr.Inst) < len(running.Statistics) {
			in := running.Statistics[pr.Inst]
			was[key{in.Rule, in.Match}] = uint32(k)
		}
	}
	var pairs [][2]uint32
	for j, pr := range u.Gen.Probes {
		if !isNth(pr) || int(pr.Inst) >= len(u.Gen.Statistics) {
			continue
		}
		in := u.Gen.Statistics[pr.Inst]
		from, ok := u.LimitsFrom[in.Rule]
		if !ok {
			continue
		}
		k, ok := was[key{from, in.Match}]
		if !ok {
			continue
		}
		if old := running.Probes[k]; old.Arg != pr.Arg || old.Val != pr.Val || old.Mask != pr.Mask {
			continue
		}
		pairs = append(pairs, [2]uint32{uint32(j), k})
	}
	return pairs
}
