package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestSetTargetProbe checks the SET target's probe: the written sets by
// index, their directions (the first dimension's, and the second's when
// the flags name two), --exist and the timeout.
func TestSetTargetProbe(t *testing.T) {
	src, dst := ir.SetDirs{Dim: 1, Src: 1}, ir.SetDirs{Dim: 2, Src: 2}       // src; dst,src
	srcDst, dstDst := ir.SetDirs{Dim: 2, Src: 1}, ir.SetDirs{Dim: 3, Src: 4} // src,dst; dst,dst,src
	index := func(name string) (uint32, error) { return map[string]uint32{"a": 1, "b": 2}[name], nil }
	tests := []struct {
		name string
		t    ir.SetTarget
		arg  uint32
		val  uint32
	}{
		{"add src", ir.SetTarget{AddName: "a", AddDirs: src, Timeout: ir.SetTimeoutDefault}, 1, ir.SetTimeoutDefault},
		{"add dst --exist --timeout", ir.SetTarget{AddName: "b", AddDirs: dst, Exist: true, Timeout: 60},
			2 | SetTargetAddDst | SetTargetAddDim2 | SetTargetExist, 60},
		{"del dst", ir.SetTarget{DelName: "a", DelDirs: dst, Timeout: ir.SetTimeoutDefault},
			1<<SetTargetDelShift | SetTargetDelDst | SetTargetDelDim2, ir.SetTimeoutDefault},
		{"add src,dst del dst,dst,src", ir.SetTarget{AddName: "a", AddDirs: srcDst, DelName: "b", DelDirs: dstDst, Timeout: ir.SetTimeoutDefault},
			1 | SetTargetAddDim2 | SetTargetAddDst2 | 2<<SetTargetDelShift | SetTargetDelDst | SetTargetDelDim2 | SetTargetDelDst2, ir.SetTimeoutDefault},
		{"add and del", ir.SetTarget{AddName: "b", AddDirs: src, DelName: "a", DelDirs: src, Timeout: 0},
			2 | 1<<SetTargetDelShift, 0},
	}
	for _, tt := range tests {
		pr, err := SetTargetProbe(&tt.t, index)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if pr.Kind != ProbeSetTarget || pr.Arg != tt.arg || pr.Val != tt.val {
			t.Errorf("%s: probe %+v, want arg %#x val %d", tt.name, pr, tt.arg, tt.val)
		}
	}
}

// TestSetWritesCompile checks a ruleset writing sets: the written sets in
// the order their targets come, the SET rules action entries of
// ProbeSetTarget, a match of a written set a probe (ProbeSetMatch) rather
// than a set condition, a match of another set a set condition.
func TestSetWritesCompile(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	in := rs.Chain("INPUT")
	src := ir.SetDirs{Dim: 1, Src: 1}
	in.Rules = append(in.Rules,
		&ir.Rule{Matches: []ir.Match{&ir.SetMatch{Name: "banned", Dirs: src}}, Target: ir.Target{Kind: ir.TargetDrop}},
		&ir.Rule{Target: ir.Target{Kind: ir.TargetSet, Set: &ir.SetTarget{AddName: "banned", AddDirs: src, Exist: true, Timeout: 60}}},
		&ir.Rule{Target: ir.Target{Kind: ir.TargetSet, Set: &ir.SetTarget{DelName: "other", DelDirs: src, Timeout: ir.SetTimeoutDefault}}},
		&ir.Rule{Matches: []ir.Match{&ir.SetMatch{Name: "plain", Dirs: src}}, Target: ir.Target{Kind: ir.TargetAccept}},
	)
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"banned", "other"}; !slices.Equal(g.SetWrites, want) {
		t.Errorf("SetWrites %q, want %q", g.SetWrites, want)
	}
	if len(g.SetConds) != 1 || g.SetConds[0].Name != "plain" {
		t.Errorf("SetConds %+v, want plain's alone", g.SetConds)
	}
	kinds := map[ProbeKind]int{}
	for _, pr := range g.Probes {
		kinds[pr.Kind]++
	}
	if kinds[ProbeSetTarget] != 2 || kinds[ProbeSetMatch] != 1 {
		t.Errorf("probes %+v: want two SET targets and one written-set match", g.Probes)
	}
	for _, e := range g.Entries {
		if e.Flags&EFAct != 0 && (e.Action != ActContinue || g.Probes[e.Aux].Kind != ProbeSetTarget) {
			t.Errorf("action entry %+v: want a CONTINUE of a SET target's probe", e)
		}
	}
}
