package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// setRule returns a rule "-m set [!] --match-set name dirs [--return-nomatch] -j target".
func setRule(name string, dirs ir.SetDirs, invert, returnNomatch bool, target ir.TargetKind) *ir.Rule {
	return &ir.Rule{
		Matches: []ir.Match{&ir.SetMatch{Invert: invert, Name: name, Dirs: dirs, ReturnNomatch: returnNomatch}},
		Target:  ir.Target{Kind: target},
	}
}

var (
	dirsSrc    = ir.SetDirs{Dim: 1, Src: 1}
	dirsSrcDst = ir.SetDirs{Dim: 2, Src: 1}
)

// ruleOfResult returns the 0-based rule index in INPUT of a classification
// result, or -1 for the policy.
func ruleOfResult(t *testing.T, g *Generation, r Result) int {
	t.Helper()
	if r.Entry < 0 {
		return -1
	}
	idx := g.Entries[r.Entry].Rule
	if idx == NoRule {
		t.Fatalf("entry %d belongs to no rule", r.Entry)
	}
	return g.Rules[idx-NumChains].Index
}

// TestSetConditions checks the allocation of FieldSets bits (one per
// distinct set, directions and --return-nomatch, shared by "!") and that
// the classifier honours them, negation included.
func TestSetConditions(t *testing.T) {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		rs := ir.NewRuleset(fam)
		in := rs.Chain("INPUT")
		tcp := &ir.Rule{Proto: ir.ProtoMatch{Set: true, Num: 6}, Target: ir.Target{Kind: ir.TargetDrop}}
		tcp.Matches = setRule("allow", dirsSrc, true, false, 0).Matches // ! allow src
		in.Rules = []*ir.Rule{
			setRule("allow", dirsSrc, false, false, ir.TargetAccept),   // 0: allow src → bit 0
			setRule("block", dirsSrcDst, true, false, ir.TargetAccept), // 1: ! block src,dst → bit 1
			setRule("allow", dirsSrc, false, true, ir.TargetDrop),      // 2: allow src --return-nomatch → bit 2
			tcp, // 3: -p tcp ! allow src → bit 0 again
		}
		g, err := Compile(rs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		wantConds := []SetCond{
			{Family: fam, Name: "allow", Dirs: dirsSrc},
			{Family: fam, Name: "block", Dirs: dirsSrcDst},
			{Family: fam, Name: "allow", Dirs: dirsSrc, ReturnNomatch: true},
		}
		if fmt.Sprint(g.SetConds) != fmt.Sprint(wantConds) {
			t.Fatalf("%s: set conditions %v, want %v", fam, g.SetConds, wantConds)
		}
		if g.Active&(1<<FieldSets) == 0 {
			t.Fatalf("%s: FieldSets not active (%#x)", fam, g.Active)
		}
		tests := []struct {
			name    string
			members map[SetCond]bool
			proto   uint32
			rule    int // -1: policy
		}{
			{"in allow", map[SetCond]bool{wantConds[0]: true, wantConds[1]: true}, 17, 0},
			{"in no set", nil, 17, 1},
			{"in block, nomatch entry of allow", map[SetCond]bool{wantConds[1]: true, wantConds[2]: true}, 17, 2},
			{"in block only, tcp", map[SetCond]bool{wantConds[1]: true}, 6, 3},
			{"in block only, udp", map[SetCond]bool{wantConds[1]: true}, 17, -1},
		}
		for _, tt := range tests {
			p := &Packet{Proto: tt.proto, Sport: 1, Dport: 2, TCPFlags: FlagsNone, ICMP: ValNone}
			p.Sets = g.SetBits(func(c SetCond) bool { return tt.members[c] })
			if got := ruleOfResult(t, g, g.Classify(p, ChainInput)); got != tt.rule {
				t.Errorf("%s %s (bits %#b): rule %d, want %d", fam, tt.name, p.Sets, got, tt.rule)
			}
		}
	}
}

// TestSetConditionLimit checks that a family's ruleset may use 8 distinct
// set conditions and no more, and that the limit counts distinct
// conditions, not rules.
func TestSetConditionLimit(t *testing.T) {
	build := func(distinct int) *ir.Ruleset {
		rs := ir.NewRuleset(ir.IPv4)
		in := rs.Chain("INPUT")
		for i := 0; i < distinct; i++ {
			for _, inv := range []bool{false, true} {
				in.Rules = append(in.Rules, setRule(fmt.Sprintf("s%d", i), dirsSrc, inv, false, ir.TargetAccept))
			}
		}
		return rs
	}
	g, err := Compile(build(MaxSetConds), Options{})
	if err != nil {
		t.Fatalf("%d conditions: %v", MaxSetConds, err)
	}
	if len(g.SetConds) != MaxSetConds {
		t.Errorf("%d conditions allocated, want %d", len(g.SetConds), MaxSetConds)
	}
	_, err = Compile(build(MaxSetConds+1), Options{})
	if err == nil || !strings.Contains(err.Error(), "at most 8 distinct set conditions") || !strings.Contains(err.Error(), "chain INPUT rule 17") {
		t.Errorf("9 conditions: got %v, want the 8-condition limit error at rule 17", err)
	}
}

// TestSetMatchOptions checks which set match options the compiler accepts:
// the counter-update flags change nothing (xfw never updates set entry
// counters), counter comparisons are refused, never ignored.
func TestSetMatchOptions(t *testing.T) {
	tests := []struct {
		name    string
		m       ir.SetMatch
		wantErr string
	}{
		{"plain", ir.SetMatch{Name: "s", Dirs: dirsSrc}, ""},
		{"! --update-counters ! --update-subcounters", ir.SetMatch{Name: "s", Dirs: dirsSrc, SkipCounterUpdate: true, SkipSubcounterUpdate: true}, ""},
		{"--packets-eq", ir.SetMatch{Name: "s", Dirs: dirsSrc, Packets: ir.SetCounterMatch{Op: ir.SetCounterEq, Value: 1}},
			"chain INPUT rule 1: set match s: --packets-eq/-lt/-gt are not supported by xfw: its data plane does not compare set entry counters"},
		{"! --packets-eq", ir.SetMatch{Name: "s", Dirs: dirsSrc, Packets: ir.SetCounterMatch{Op: ir.SetCounterNe}},
			"--packets-eq/-lt/-gt are not supported by xfw"},
		{"--bytes-gt", ir.SetMatch{Name: "s", Dirs: dirsSrc, Bytes: ir.SetCounterMatch{Op: ir.SetCounterGt, Value: 100}},
			"chain INPUT rule 1: set match s: --bytes-eq/-lt/-gt are not supported by xfw: its data plane does not compare set entry counters"},
		{"no directions", ir.SetMatch{Name: "s"}, "0 directions"},
	}
	for _, tt := range tests {
		rs := ir.NewRuleset(ir.IPv4)
		m := tt.m
		rs.Chain("INPUT").Rules = []*ir.Rule{{Matches: []ir.Match{&m}, Target: ir.Target{Kind: ir.TargetDrop}}}
		g, err := Compile(rs, Options{})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wantErr == "" && len(g.SetConds) != 1:
			t.Errorf("%s: %d set conditions, want 1", tt.name, len(g.SetConds))
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: got error %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

// TestNoSetConditions checks that rulesets without set matches leave
// FieldSets inactive and the table empty.
func TestNoSetConditions(t *testing.T) {
	rs := ir.NewRuleset(ir.IPv4)
	rs.Chain("INPUT").Rules = []*ir.Rule{{Proto: ir.ProtoMatch{Set: true, Num: 6}, Target: ir.Target{Kind: ir.TargetDrop}}}
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Active&(1<<FieldSets) != 0 || len(g.SetConds) != 0 {
		t.Errorf("active %#x, set conditions %v", g.Active, g.SetConds)
	}
}

// TestSetCountingProbes checks the counting probes (EFSetCount) emitted
// before rules whose set match updates set entry counters: one per such
// match, with the rule's conditions before the match (not the match's own
// bit, nor the matches after it), none for matches that do not count.
func TestSetCountingProbes(t *testing.T) {
	udp9 := &ir.UDPMatch{DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: 9, Last: 9}}}
	udp10 := &ir.UDPMatch{DstPort: ir.PortMatch{Set: true, Range: ir.PortRange{First: 10, Last: 10}}}
	counted := &ir.SetMatch{Name: "c", Dirs: dirsSrc}
	tests := []struct {
		name string
		rule *ir.Rule
		// probes wanted before the rule's entry: Aux, and whether its
		// condition constrains the destination port.
		probes []uint16
		dport  bool
	}{
		{"plain", &ir.Rule{Matches: []ir.Match{counted}, Target: ir.Target{Kind: ir.TargetAccept}}, []uint16{0}, false},
		{"match before", &ir.Rule{Proto: ir.ProtoMatch{Set: true, Num: 17}, Matches: []ir.Match{udp9, counted}, Target: ir.Target{Kind: ir.TargetDrop}}, []uint16{0}, true},
		{"match after", &ir.Rule{Proto: ir.ProtoMatch{Set: true, Num: 17}, Matches: []ir.Match{counted, udp10}, Target: ir.Target{Kind: ir.TargetDrop}}, []uint16{0}, false},
		{"inverted", &ir.Rule{Matches: []ir.Match{&ir.SetMatch{Invert: true, Name: "c", Dirs: dirsSrc}}, Target: ir.Target{Kind: ir.TargetDrop}}, []uint16{0}, false},
		{"no update", &ir.Rule{Matches: []ir.Match{&ir.SetMatch{Name: "c", Dirs: dirsSrc, SkipCounterUpdate: true}}}, nil, false},
		{"uncounted set", &ir.Rule{Matches: []ir.Match{&ir.SetMatch{Name: "plain", Dirs: dirsSrc}}}, nil, false},
		{"no subcounters", &ir.Rule{Matches: []ir.Match{&ir.SetMatch{Name: "l", Dirs: dirsSrc, SkipSubcounterUpdate: true}}}, []uint16{1 | SetCountSkipSub}, false},
		{"two sets", &ir.Rule{Matches: []ir.Match{counted, &ir.SetMatch{Name: "l", Dirs: dirsSrc}}}, []uint16{0, 1}, false},
	}
	counts := func(m *ir.SetMatch) bool { return (m.Name == "c" || m.Name == "l") && !m.SkipCounterUpdate }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := ir.NewRuleset(ir.IPv4)
			// A first rule allocates "c" bit 0 and "l" bit 1 whatever the
			// case's order.
			first := &ir.Rule{Matches: []ir.Match{&ir.SetMatch{Name: "c", Dirs: dirsSrc, SkipCounterUpdate: true}, &ir.SetMatch{Name: "l", Dirs: dirsSrc, SkipCounterUpdate: true}}}
			rs.Chain("INPUT").Rules = []*ir.Rule{first, tc.rule}
			g, err := Compile(rs, Options{SetCounts: counts})
			if err != nil {
				t.Fatal(err)
			}
			var probes []Entry
			var ruleEntry *Entry
			for i := g.ChainStart[ChainInput]; i < g.ChainEnd[ChainInput]; i++ {
				e := g.Entries[i]
				switch {
				case e.Flags&EFSetCount != 0:
					if e.Rule != NoRule || e.Action != ActContinue || e.Next != i+1 {
						t.Errorf("probe %d: rule %d action %d next %d, want no rule, CONTINUE to %d", i, e.Rule, e.Action, e.Next, i+1)
					}
					probes = append(probes, e)
				case e.Rule == NumChains+1:
					ruleEntry = &g.Entries[i]
					if len(probes) != len(tc.probes) {
						t.Fatalf("%d probes before the rule, want %d", len(probes), len(tc.probes))
					}
				}
			}
			if ruleEntry == nil {
				t.Fatal("the rule has no entry")
			}
			for i, p := range probes {
				if p.Aux != tc.probes[i] {
					t.Errorf("probe %d: aux %#x, want %#x", i, p.Aux, tc.probes[i])
				}
				if p.Cond.Get(FieldSets) != nil && i == 0 {
					t.Errorf("probe %d tests the set bits %v: the first set match is evaluated whatever it answers", i, p.Cond.Get(FieldSets))
				}
				if (p.Cond.Get(FieldDport) != nil) != tc.dport {
					t.Errorf("probe %d: destination port condition %v, want one: %v", i, p.Cond.Get(FieldDport), tc.dport)
				}
			}
			if len(tc.probes) == 2 && probes[1].Cond.Get(FieldSets) == nil {
				t.Errorf("the second set match's probe does not require the first match")
			}
		})
	}
}
