package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestExt6Conditions checks FieldExt6: distinct matches get their own
// bit, equal ones share it, a kind's hotdrop bit drops the packet at the
// rule uncounted, and the limits are refused.
func TestExt6Conditions(t *testing.T) {
	rt0 := func() ir.Match { return &ir.RTMatch{Type: 0, HasType: true, SegsLeft: [2]uint32{0, 0xffffffff}} }
	frag := &ir.FragMatch{IDs: [2]uint32{0, 0xffffffff}, More: true}
	rs := &ir.Ruleset{Family: ir.IPv6, Chains: []*ir.Chain{
		{Name: "INPUT", Builtin: true, Policy: ir.VerdictAccept, Rules: []*ir.Rule{
			{Matches: []ir.Match{rt0()}, Target: ir.Target{Kind: ir.TargetDrop}},
			{Matches: []ir.Match{frag}, Target: ir.Target{Kind: ir.TargetAccept}},
		}},
		{Name: "FORWARD", Builtin: true, Policy: ir.VerdictAccept, Rules: []*ir.Rule{
			{Matches: []ir.Match{rt0()}, Target: ir.Target{Kind: ir.TargetDrop}},
		}},
		{Name: "OUTPUT", Builtin: true, Policy: ir.VerdictAccept},
	}}
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Active&(1<<FieldExt6) == 0 || len(g.Ext6Conds()) != 2 {
		t.Fatalf("active %#x, %d conditions; want FieldExt6 and 2", g.Active, len(g.Ext6Conds()))
	}
	tests := []struct {
		name    string
		ext6    uint32
		rule    int // 1-based INPUT rule, 0: policy
		hotdrop bool
	}{
		{"routing header type 0", 1 << 0, 1, false},
		{"fragment with more", 1 << 1, 2, false},
		{"both", 1<<0 | 1<<1, 1, false},
		{"neither", 0, 0, false},
		{"routing header unreadable", 1 << (Ext6HotShift + Ext6KindRT), 0, true},
		{"fragment header cut short, rt rule first", 1 << (Ext6HotShift + Ext6KindFrag), 0, true},
	}
	for _, tc := range tests {
		p := &Packet{Src: U64(1), Dst: U64(2), Proto: 17, Sport: 1, Dport: 2, Ext6: tc.ext6, MAC: 1}
		checkInputVerdict(t, g, p, tc.name, tc.rule, tc.hotdrop)
	}

	var many []*ir.Rule
	for i := 0; i <= MaxExt6Conds; i++ {
		many = append(many, &ir.Rule{Matches: []ir.Match{&ir.RTMatch{Type: uint32(i), HasType: true, SegsLeft: [2]uint32{0, 0xffffffff}}}})
	}
	rs.Chains[0].Rules = many
	if _, err := Compile(rs, Options{}); err == nil {
		t.Errorf("%d distinct rt matches compiled; want a refusal", len(many))
	}
	rs.Chains[0].Rules = []*ir.Rule{{Matches: []ir.Match{frag}}}
	rs.Family = ir.IPv4
	rs.Chains[1].Rules, rs.Chains[0].Rules = nil, []*ir.Rule{{Matches: []ir.Match{frag}}}
	if _, err := Compile(rs, Options{}); err == nil {
		t.Errorf("frag match compiled in IPv4")
	}
}
