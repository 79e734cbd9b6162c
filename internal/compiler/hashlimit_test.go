package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// hashLimitRuleset is INPUT: -j hl twice, hl: -m hashlimit -j DROP, then a
// counters-only rule: the user chain is flattened twice.
func hashLimitRuleset(m *ir.HashLimitMatch) *ir.Ruleset {
	rs := ir.NewRuleset(ir.IPv4)
	rs.Chains = append(rs.Chains, &ir.Chain{Name: "hl", Rules: []*ir.Rule{
		{Matches: []ir.Match{m}, Target: ir.Target{Kind: ir.TargetDrop}},
	}})
	in := rs.Chain(ir.ChainInput)
	for i := 0; i < 2; i++ {
		in.Rules = append(in.Rules, &ir.Rule{Target: ir.Target{Kind: ir.TargetJump, Chain: "hl"}})
	}
	return rs
}

// TestHashLimitProbes checks that a hashlimit match is a probe before its
// rule, one match however often its rule is flattened, that the walk asks
// it and follows its answer, and that --hashlimit-rate-match compiles to
// such a probe too (the data plane keeps the rule's bit).
func TestHashLimitProbes(t *testing.T) {
	m := &ir.HashLimitMatch{Name: "a", Mode: ir.HashLimitSrcIP, Avg: ir.HashLimitScale, Burst: 3, GCInterval: 1000, Expire: 1000, SrcMask: 32, DstMask: 32}
	g, err := Compile(hashLimitRuleset(m), Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.HashLimits) != 1 || g.HashLimits[0].Match != *m {
		t.Fatalf("HashLimits = %+v, want the one match", g.HashLimits)
	}
	if len(g.Probes) != 1 || g.Probes[0] != (Probe{Kind: ProbeHashLimit}) {
		t.Fatalf("Probes = %+v", g.Probes)
	}
	for _, answer := range []bool{true, false} {
		asked := 0
		p := &Packet{Proto: 17, Sport: 1, Dport: 2, Len: 40, TTL: 64,
			HashLimit: func(k int) bool { asked++; return answer }}
		res := g.Classify(p, ChainInput)
		dropped := res.Entry >= 0 && g.Entries[res.Entry].Action == ActDrop
		if dropped != answer {
			t.Errorf("probe says %v: dropped %v", answer, dropped)
		}
		if want := map[bool]int{true: 1, false: 2}[answer]; asked != want {
			t.Errorf("probe says %v: asked %d times, want %d", answer, asked, want)
		}
	}
	m.Mode |= ir.HashLimitRateMatch
	m.Interval = 1
	g, err = Compile(hashLimitRuleset(m), Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatalf("rate-match: %v", err)
	}
	if len(g.HashLimits) != 1 || g.HashLimits[0].Match != *m {
		t.Errorf("rate-match: HashLimits = %+v, want the one match with its mode", g.HashLimits)
	}
}
