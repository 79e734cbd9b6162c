package cli

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestShiftedCounterSources: for -A (one rule, several, with -c), -I and
// -D on a base chain of filter and -N in filter and in nat, beside a nat
// table, the counter sources found from the change's position are those
// counterSources finds from every rule's Handle.
func TestShiftedCounterSources(t *testing.T) {
	setup := []string{
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-A INPUT -p tcp --dport 23 -j DROP",
		"-A FORWARD -p udp --dport 53 -j ACCEPT",
		"-A FORWARD -p udp --dport 54 -j ACCEPT",
		"-A OUTPUT -p udp --dport 55 -j ACCEPT",
		"-t nat -A POSTROUTING -s 10.9.0.0/16 -j MASQUERADE",
		"-t nat -N DOCKER",
		"-t nat -A DOCKER -p tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",
	}
	changes := []struct {
		cmd       string
		committed string
	}{
		{"-A FORWARD -p udp --dport 60 -j DROP", ir.TableFilter},
		{"-A INPUT -s 10.0.0.1,10.0.0.2 -j DROP", ir.TableFilter},
		{"-A OUTPUT -c 7 700 -p udp --dport 61 -j DROP", ir.TableFilter},
		{"-I FORWARD -c 3 300 -p udp --dport 62 -j DROP", ir.TableFilter},
		{"-I INPUT 1 -p udp --dport 63 -j DROP", ir.TableFilter},
		{"-D FORWARD -p udp --dport 53 -j ACCEPT", ir.TableFilter},
		{"-D INPUT 2", ir.TableFilter},
		{"-D OUTPUT 1", ir.TableFilter},
		{"-N EMPTY", ir.TableFilter},
		{"-t nat -N EMPTY", ir.TableNat},
	}
	base := ir.NewRuleset(ir.IPv4)
	for _, line := range setup {
		cmd, err := iptables.ParseCommandWith(ir.IPv4, splitArgs(line), iptables.ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if _, err := cmd.Apply(base); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	orderChains(base)
	for _, ch := range changes {
		old := base.Clone()
		dataplane.ApplyCounters(old, nil)
		// Counters that differ everywhere, so that a carried counter
		// taken from the wrong place shows.
		n := uint64(1)
		for _, tbl := range append([]*ir.Ruleset{old}, old.Tables...) {
			for _, c := range tbl.Chains {
				c.Counters = ir.Counters{Packets: n, Bytes: 100 * n}
				n++
				for _, r := range c.Rules {
					r.Counters = ir.Counters{Packets: n, Bytes: 100 * n}
					n++
				}
			}
		}
		cmd, err := iptables.ParseCommandWith(ir.IPv4, splitArgs(ch.cmd), iptables.ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", ch.cmd, err)
		}
		rs := old.CloneChains()
		if _, err := cmd.Apply(rs); err != nil {
			t.Fatalf("%s: %v", ch.cmd, err)
		}
		orderChains(rs)
		var shift counterShift
		if cmd.Kind != iptables.CmdNewChain {
			first := 3
			for _, c := range rs.Chains {
				if c.Name == cmd.Chain {
					break
				}
				first += len(c.Rules)
			}
			shift = chainShift(old.Chain(cmd.Chain), rs.Chain(cmd.Chain), first)
		}
		committed := []string{ch.committed}
		got := shiftedCounterSources(rs, shift, committed)
		want := counterSources(old, rs, true, committed)
		if i := firstSourceDiffering(got, want); i >= 0 {
			t.Errorf("%s: counter %d: shifted %+v, counterSources %+v", ch.cmd, i, got[min(i, len(got)-1)], want[min(i, len(want)-1)])
		}
	}
}

// TestNumberHandlesFrom: numbering from counter index k gives every rule
// of a ruleset with other tables the Handle a decode gives it (index+1)
// when the rules before k had theirs, and touches none before k.
func TestNumberHandlesFrom(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	for _, line := range []string{
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-A FORWARD -p udp --dport 53 -j ACCEPT",
		"-A FORWARD -p udp --dport 54 -j ACCEPT",
		"-N USER",
		"-A USER -j DROP",
		"-t nat -A POSTROUTING -s 10.9.0.0/16 -j MASQUERADE",
		"-t nat -N DOCKER",
		"-t nat -A DOCKER -p tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",
	} {
		cmd, err := iptables.ParseCommandWith(ir.IPv4, splitArgs(line), iptables.ParseOptions{})
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if _, err := cmd.Apply(rs); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	orderChains(rs)
	n := numCounters(rs)
	walked := compiler.NumChains
	compiler.ForEachCounter(rs, func(int, compiler.RuleRef, *ir.Chain, *ir.Rule) { walked++ })
	if n != walked {
		t.Fatalf("numCounters %d, ForEachCounter's layout %d", n, walked)
	}
	for from := 0; from <= n+1; from++ {
		dataplane.ApplyCounters(rs, nil)
		const stale = 999
		compiler.ForEachCounter(rs, func(i int, _ compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
			if r != nil && i >= from {
				r.Handle = stale
			}
		})
		numberHandlesFrom(rs, from)
		if err := checkHandles(rs); err != nil {
			t.Errorf("from %d: %v", from, err)
		}
	}
}
