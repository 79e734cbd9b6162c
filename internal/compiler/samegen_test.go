package compiler

import (
	"reflect"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// sameGenRules is a ruleset with user chains, probes, LOG options, limits
// and --ctexpire: most of what a generation holds.
var sameGenRules = []string{
	"-N SVC",
	"-A SVC -m statistic --mode random --probability 0.5 -j ACCEPT",
	"-A SVC -s 10.0.0.0/8 -p tcp --dport 80 -j LOG --log-prefix web",
	"-A SVC -m limit --limit 3/s -j RETURN",
	"-A INPUT -d 10.1.0.1/32 -p tcp --dport 443 -j SVC",
	"-A INPUT -m conntrack --ctexpire 10:20 -j DROP",
	"-A FORWARD -i lo -j ACCEPT",
}

// TestDiffGenerations checks that two compiles of one ruleset are the same
// generation, that a generation with any field changed is not, naming the
// field, and that nil and empty slices and maps count as equal.
func TestDiffGenerations(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, sameGenRules...)
	compile := func() *Generation {
		g, err := Compile(rs, Options{Interfaces: []Interface{{Name: "lo", Index: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if err := DiffGenerations(compile(), compile()); err != nil {
		t.Fatalf("two compiles of one ruleset: %v", err)
	}
	tests := []struct {
		field  string
		change func(g *Generation)
	}{
		{"Active", func(g *Generation) { g.Active ^= 1 }},
		{"ChainStart", func(g *Generation) { g.ChainStart[1]++ }},
		{"Entries", func(g *Generation) { g.Entries[len(g.Entries)-1].Next++ }},
		{"Entries", func(g *Generation) { g.Entries = g.Entries[:len(g.Entries)-1] }},
		{"Chunks", func(g *Generation) { g.Chunks[len(g.Chunks)-1].Words[3] ^= 1 }},
		{"ClassChunks", func(g *Generation) { g.ClassChunks.Row(uint32(g.ClassChunks.Len() - 1))[0]++ }},
		{"Bounds", func(g *Generation) { g.Bounds[len(g.Bounds)-1].Class++ }},
		{"Hash", func(g *Generation) { g.Hash[HashKey{Field: 99}] = 1 }},
		{"LogConfigs", func(g *Generation) { g.LogConfigs[0].Prefix = "other" }},
		{"Probes", func(g *Generation) { g.Probes[0].Val++ }},
		{"Limits", func(g *Generation) { g.Limits[0].Burst++ }},
		{"CtExpires", func(g *Generation) { g.CtExpires[0].Max++ }},
		{"Layout", func(g *Generation) { g.Layout.SlackEnd[0]++ }},
		{"Layout", func(g *Generation) { g.Layout.EndRefs[0] = append(g.Layout.EndRefs[0], 7) }},
		{"Trivial", func(g *Generation) { g.Trivial[0].OK = !g.Trivial[0].OK }},
		{"hdr4", func(g *Generation) { g.hdr4 = append(g.hdr4, Hdr4Cond{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			a, b := compile(), compile()
			tt.change(b)
			err := DiffGenerations(a, b)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("changed %s: got %v", tt.field, err)
			}
		})
	}
	t.Run("nil and empty", func(t *testing.T) {
		a, b := compile(), compile()
		a.Recents, b.Recents = nil, []Recent{}
		a.Hash, b.Hash = nil, map[HashKey]uint32{}
		if err := DiffGenerations(a, b); err != nil {
			t.Errorf("nil and empty: %v", err)
		}
	})
	t.Run("class table in one block", func(t *testing.T) {
		a, b := compile(), compile()
		b.ClassChunks = ClassTableOf(b.ClassChunks.IDs(), int(b.NumChunks))
		if err := DiffGenerations(a, b); err != nil {
			t.Errorf("the class table read back in one block: %v", err)
		}
	})
	t.Run("conditions", func(t *testing.T) {
		a, b := compile(), compile()
		for i := range b.Entries {
			b.Entries[i].Cond = nil
		}
		if err := DiffGenerations(a, b); err != nil {
			t.Errorf("entries without their conditions: %v", err)
		}
	})
}

// TestEntryFieldsCompared fails when Entry gains a field diffEntries does
// not compare: add it there, then here.
func TestEntryFieldsCompared(t *testing.T) {
	var names []string
	for f := range reflect.TypeOf(Entry{}).Fields() {
		names = append(names, f.Name)
	}
	want := "Cond Rule Action Flags Aux Next nextLabel"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("Entry's fields are %q, diffEntries compares %q", got, want)
	}
}

// TestUsesSetMatches checks which rulesets depend on the sets'
// definitions.
func TestUsesSetMatches(t *testing.T) {
	if UsesSetMatches(parseRuleset(t, ir.IPv4, sameGenRules...)) {
		t.Error("a ruleset without set matches uses sets")
	}
	rs := parseRuleset(t, ir.IPv4, "-N X", "-A X -j DROP")
	rs.Chain("X").Rules[0].Matches = append(rs.Chain("X").Rules[0].Matches, &ir.SetMatch{})
	if !UsesSetMatches(rs) {
		t.Error("a set match in a user chain is not seen")
	}
}

// TestUsesSetMatchesSetTarget: a -j SET target makes the generation
// depend on the written set's definition too.
func TestUsesSetMatchesSetTarget(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-N X", "-A X -j DROP")
	rs.Chain("X").Rules[0].Target = ir.Target{Kind: ir.TargetSet}
	if !UsesSetMatches(rs) {
		t.Error("a -j SET target is not seen")
	}
}
