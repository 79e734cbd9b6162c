package dataplane

import (
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
