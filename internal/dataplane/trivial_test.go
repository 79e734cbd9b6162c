package dataplane

import (
	"reflect"
	"testing"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// TestTrivialCfgRoundTrip checks that the trivial walks a slot's
// configuration carries (familyCfg) read back (trivialOfCfg, as
// RunningGeneration does) as the compiler decided them.
func TestTrivialCfgRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		build func(rs *ir.Ruleset)
		want  [compiler.NumChains]bool
	}{
		{"no rule", func(*ir.Ruleset) {}, [compiler.NumChains]bool{true, true, true}},
		{"FORWARD policy DROP", func(rs *ir.Ruleset) { rs.Chain("FORWARD").Policy = ir.VerdictDrop },
			[compiler.NumChains]bool{true, false, true}},
		{"empty raw, mangle and security", func(rs *ir.Ruleset) {
			for _, name := range []string{ir.TableRaw, ir.TableMangle, ir.TableSecurity} {
				rs.EnsureTable(name)
			}
		}, [compiler.NumChains]bool{true, true, true}},
		// Without a rule that asks for connection tracking the nat
		// chains see no packet (compiler/ctpull.go).
		{"empty nat", func(rs *ir.Ruleset) { rs.EnsureTable(ir.TableNat) },
			[compiler.NumChains]bool{true, true, true}},
		{"empty nat, connmark rule (connection tracking)", func(rs *ir.Ruleset) {
			rs.EnsureTable(ir.TableNat)
			c := rs.Chain("INPUT")
			c.Rules = append(c.Rules, &ir.Rule{Matches: []ir.Match{&ir.ConnmarkMatch{Value: 1, Mask: 1}}})
		}, [compiler.NumChains]bool{}},
	}
	for _, tc := range tests {
		rs := ir.NewRuleset(ir.IPv4)
		tc.build(rs)
		g, err := compiler.Compile(rs, compiler.Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		c := familyCfg(g, nil)
		back := trivialOfCfg(&c)
		for h := 0; h < compiler.NumChains; h++ {
			counters, ok := g.TrivialWalk(h)
			if ok != tc.want[h] {
				t.Errorf("%s: chain %d trivial %v, want %v", tc.name, h, ok, tc.want[h])
			}
			if back[h].OK != ok || (ok && !reflect.DeepEqual(back[h].Counters, counters)) {
				t.Errorf("%s: chain %d: read back %+v, compiled %v %v", tc.name, h, back[h], ok, counters)
			}
			if ok && c.Trivial[h] != uint32(1+len(counters)) {
				t.Errorf("%s: chain %d: cfg trivial %d for %d counters", tc.name, h, c.Trivial[h], len(counters))
			}
		}
	}
}
