package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The trivial walks' counts (bpf/trivial.h): the data plane's minimal path
// counts a packet once per slot and chain, in map xfw_stats (per CPU:
// packets at statTrivial + (slot*NumChains + chain)*2, bytes after them),
// whichever counters the walk bumps; every reader of a slot's counters adds
// those counts to each counter the slot's configuration lists for the
// chain (Trivial, TrivialCtr), and a slot's counts are zeroed when a new
// generation is built into it.

// statTrivial, statFP and numStats are XFW_STAT_TRIVIAL, XFW_STAT_FP (the
// fast path's outcomes, fastpath.go) and XFW_NSTATS (enum xfw_stat).
const (
	statTrivial = 4
	statFP      = statTrivial + slots*compiler.NumChains*2
	numStats    = statFP + fpNumWhy
)

// trivialStat is the xfw_stats index of slot's chain's packet count (its
// byte count follows).
func trivialStat(slot uint32, chain int) uint32 {
	return statTrivial + (slot*compiler.NumChains+uint32(chain))*2
}

// statSummer returns a reader of one xfw_stats entry summed over CPUs.
func statSummer(stats *ebpf.Map) (func(idx uint32) (uint64, error), error) {
	if stats == nil {
		return nil, errors.New("the running program lacks map xfw_stats")
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	vals := make([]uint64, ncpu)
	return func(idx uint32) (uint64, error) {
		if err := stats.Lookup(idx, vals); err != nil {
			return 0, fmt.Errorf("read statistic %d: %w", idx, err)
		}
		var n uint64
		for _, v := range vals {
			n += v
		}
		return n, nil
	}, nil
}

// trivialCounts returns slot's trivial counts per chain, summed over CPUs.
func trivialCounts(stats *ebpf.Map, slot uint32) (out [compiler.NumChains]ir.Counters, err error) {
	sum, err := statSummer(stats)
	if err != nil {
		return out, err
	}
	for h := range out {
		if out[h].Packets, err = sum(trivialStat(slot, h)); err != nil {
			return out, err
		}
		if out[h].Bytes, err = sum(trivialStat(slot, h) + 1); err != nil {
			return out, err
		}
	}
	return out, nil
}

// trivialShare returns what slot's trivial counts t add to counter i under
// configuration cfg: the counts of every chain whose trivial walk bumps i.
func trivialShare(cfg *bpfFamilyCfg, t *[compiler.NumChains]ir.Counters, i uint32) (c ir.Counters) {
	for h, n := range cfg.Trivial {
		if n == 0 || n > compiler.MaxTrivialCounters+1 {
			continue
		}
		for _, k := range cfg.TrivialCtr[h][:n-1] {
			if k == i {
				c.Packets += t[h].Packets
				c.Bytes += t[h].Bytes
			}
		}
	}
	return c
}

// addTrivialCounts adds slot's trivial counts t to the counters cfg lists.
func addTrivialCounts(out []ir.Counters, cfg *bpfFamilyCfg, t *[compiler.NumChains]ir.Counters) {
	for h, n := range cfg.Trivial {
		if n == 0 || n > compiler.MaxTrivialCounters+1 {
			continue
		}
		for _, k := range cfg.TrivialCtr[h][:n-1] {
			if int(k) < len(out) {
				out[k].Packets += t[h].Packets
				out[k].Bytes += t[h].Bytes
			}
		}
	}
}

// withTrivialCounts adds slot's trivial counts (read from stats) to its
// counter totals out under configuration cfg.
func withTrivialCounts(out []ir.Counters, stats *ebpf.Map, slot uint32, cfg *bpfFamilyCfg) ([]ir.Counters, error) {
	t, err := trivialCounts(stats, slot)
	if err != nil {
		return nil, err
	}
	addTrivialCounts(out, cfg, &t)
	return out, nil
}

// resetTrivialCounts zeroes slot's trivial counts on every CPU: a new
// generation is built into the (idle) slot.
func resetTrivialCounts(stats *ebpf.Map, slot uint32) error {
	if stats == nil {
		return errors.New("the running program lacks map xfw_stats")
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("count CPUs: %w", err)
	}
	zeros := make([]uint64, ncpu)
	for h := 0; h < compiler.NumChains; h++ {
		for _, idx := range []uint32{trivialStat(slot, h), trivialStat(slot, h) + 1} {
			if err := stats.Put(idx, zeros); err != nil {
				return fmt.Errorf("zero the trivial walks' counts: %w", err)
			}
		}
	}
	return nil
}
