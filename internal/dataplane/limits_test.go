package dataplane

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
)

// TestKeepsLimits checks when a new generation takes the running limit
// buckets over: only for the same rules with the same limit matches, in
// the same order.
func TestKeepsLimits(t *testing.T) {
	a := compiler.Limit{Rule: 5, Match: 1, Avg: 100, Burst: 3}
	b := compiler.Limit{Rule: 6, Match: 0, Avg: 200, Burst: 5}
	tests := []struct {
		name      string
		sameRules bool
		running   *genMeta
		limits    []compiler.Limit
		want      bool
	}{
		{"same rules, same matches", true, &genMeta{Limits: []compiler.Limit{a, b}}, []compiler.Limit{a, b}, true},
		{"rules changed", false, &genMeta{Limits: []compiler.Limit{a, b}}, []compiler.Limit{a, b}, false},
		{"no running metadata", true, nil, []compiler.Limit{a}, false},
		{"no limit matches", true, &genMeta{}, nil, false},
		{"another order", true, &genMeta{Limits: []compiler.Limit{a, b}}, []compiler.Limit{b, a}, false},
		{"one match more", true, &genMeta{Limits: []compiler.Limit{a}}, []compiler.Limit{a, b}, false},
		{"another rate", true, &genMeta{Limits: []compiler.Limit{a}}, []compiler.Limit{{Rule: 5, Match: 1, Avg: 101, Burst: 3}}, false},
		{"another rule", true, &genMeta{Limits: []compiler.Limit{a}}, []compiler.Limit{{Rule: 4, Match: 1, Avg: 100, Burst: 3}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Update{Gen: &compiler.Generation{Limits: tt.limits}, SameRules: tt.sameRules}
			if got := keepsLimits(u, tt.running); got != tt.want {
				t.Errorf("keepsLimits = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCarriedLimits checks which buckets a command that left a rule's
// table alone carries over one by one: the rule's running bucket of the
// same match and parameters, nothing else.
func TestCarriedLimits(t *testing.T) {
	run := &genMeta{Limits: []compiler.Limit{{Rule: 9, Match: 1, Avg: 100, Burst: 2}, {Rule: 3, Match: 1, Avg: 100, Burst: 2}}}
	tests := []struct {
		name   string
		from   map[uint32]uint32
		limits []compiler.Limit
		want   [][2]uint32
	}{
		{"moved rule", map[uint32]uint32{4: 3}, []compiler.Limit{{Rule: 10, Match: 1, Avg: 100, Burst: 2}, {Rule: 4, Match: 1, Avg: 100, Burst: 2}}, [][2]uint32{{1, 1}}},
		{"not named", nil, []compiler.Limit{{Rule: 3, Match: 1, Avg: 100, Burst: 2}}, nil},
		{"another burst", map[uint32]uint32{3: 3}, []compiler.Limit{{Rule: 3, Match: 1, Avg: 100, Burst: 3}}, nil},
		{"another match", map[uint32]uint32{3: 3}, []compiler.Limit{{Rule: 3, Match: 2, Avg: 100, Burst: 2}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Update{Gen: &compiler.Generation{Limits: tt.limits}, LimitsFrom: tt.from}
			if got := carriedLimits(u, run); !slices.Equal(got, tt.want) {
				t.Errorf("carriedLimits = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCarriedNth checks which nth counters a command that left a rule's
// table alone carries over: the rule's running probe of the same match
// and values.
func TestCarriedNth(t *testing.T) {
	nth := func(inst, every uint32) compiler.Probe {
		return compiler.Probe{Kind: compiler.ProbeStatistic, Arg: compiler.StatisticNth, Val: every, Inst: inst}
	}
	mark := compiler.Probe{Kind: compiler.ProbeMark, Val: 1}
	run := &genMeta{
		Probes:     []compiler.Probe{mark, nth(0, 2), nth(1, 2)},
		Statistics: []compiler.StatisticInst{{Rule: 9, Match: 1}, {Rule: 3, Match: 1}},
	}
	tests := []struct {
		name   string
		from   map[uint32]uint32
		probes []compiler.Probe
		stats  []compiler.StatisticInst
		want   [][2]uint32
	}{
		{"moved rule", map[uint32]uint32{4: 3}, []compiler.Probe{nth(0, 2), mark, nth(1, 2)},
			[]compiler.StatisticInst{{Rule: 10, Match: 1}, {Rule: 4, Match: 1}}, [][2]uint32{{2, 2}}},
		{"another period", map[uint32]uint32{3: 3}, []compiler.Probe{nth(0, 3)},
			[]compiler.StatisticInst{{Rule: 3, Match: 1}}, nil},
		{"not named", nil, []compiler.Probe{nth(0, 2)}, []compiler.StatisticInst{{Rule: 3, Match: 1}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &Update{Gen: &compiler.Generation{Probes: tt.probes, Statistics: tt.stats}, LimitsFrom: tt.from}
			if got := carriedNth(u, run); !slices.Equal(got, tt.want) {
				t.Errorf("carriedNth = %v, want %v", got, tt.want)
			}
		})
	}
}
