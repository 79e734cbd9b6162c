package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestHdr4Conditions checks FieldHdr4: sctp ports with the short-header
// hotdrop, conditions for esp and tcp options (each its own bit, the
// hotdrop bit dropping the packet where the rule reaches the match), and
// the limit.
func TestHdr4Conditions(t *testing.T) {
	proto := func(n uint8) ir.ProtoMatch { return ir.ProtoMatch{Set: true, Num: n} }
	any := ir.PortMatch{Range: ir.PortRange{First: 0, Last: 65535}}
	port := func(p uint16) ir.PortMatch { return ir.PortMatch{Set: true, Range: ir.PortRange{First: p, Last: p}} }
	tcpOpt := func(dport ir.PortMatch, inv bool) *ir.TCPMatch {
		return &ir.TCPMatch{SrcPort: any, DstPort: dport, Option: ir.TCPOptionMatch{Set: true, Kind: 8, Invert: inv}}
	}
	rs := &ir.Ruleset{Family: ir.IPv4, Chains: []*ir.Chain{
		{Name: "INPUT", Builtin: true, Policy: ir.VerdictAccept, Rules: []*ir.Rule{
			{Proto: proto(132), Matches: []ir.Match{&ir.SCTPMatch{DstPort: port(80)}}, Target: ir.Target{Kind: ir.TargetAccept}},
			{Proto: proto(50), Matches: []ir.Match{&ir.ESPMatch{SPIs: [2]uint32{5, 5}}}, Target: ir.Target{Kind: ir.TargetDrop}},
			{Proto: proto(6), Matches: []ir.Match{tcpOpt(any, false)}, Target: ir.Target{Kind: ir.TargetDrop}},
			{Proto: proto(6), Matches: []ir.Match{tcpOpt(port(22), true)}, Target: ir.Target{Kind: ir.TargetAccept}},
		}},
		{Name: "FORWARD", Builtin: true, Policy: ir.VerdictAccept},
		{Name: "OUTPUT", Builtin: true, Policy: ir.VerdictAccept},
	}}
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Active&(1<<FieldHdr4) == 0 || len(g.Hdr4Conds()) != 3 {
		t.Fatalf("active %#x, %d conditions; want FieldHdr4 and 3", g.Active, len(g.Hdr4Conds()))
	}
	tests := []struct {
		name         string
		proto, dport uint32
		hdr4         uint32
		rule         int // 1-based INPUT rule, 0: policy
		hotdrop      bool
	}{
		{"sctp to 80", 132, 80, 0, 1, false},
		{"sctp to 81", 132, 81, 0, 0, false},
		{"sctp header cut short", 132, 81, 1 << Hdr4ShortSCTP, 0, true},
		{"esp spi 5", 50, ValNone, 1 << 0, 2, false},
		{"esp other spi", 50, ValNone, 0, 0, false},
		{"esp header cut short", 50, ValNone, 1 << Hdr4HotShift, 0, true},
		{"tcp with option 8", 6, 22, 1 << 1, 3, false},
		{"tcp to 22 without it", 6, 22, 1 << 2, 4, false},
		{"tcp to 23 without it", 6, 23, 1 << 2, 0, false},
		{"tcp options cut short", 6, 22, 1<<(Hdr4HotShift+1) | 1<<(Hdr4HotShift+2), 0, true},
	}
	for _, tc := range tests {
		p := &Packet{Src: U64(1), Dst: U64(2), Proto: tc.proto, Sport: 1, Dport: tc.dport, Hdr4: tc.hdr4, MAC: 1}
		if tc.dport == ValNone {
			p.Sport = ValNone
		}
		checkInputVerdict(t, g, p, tc.name, tc.rule, tc.hotdrop)
	}

	var many []*ir.Rule
	for i := 0; i <= MaxHdr4Conds; i++ {
		many = append(many, &ir.Rule{Proto: proto(50), Matches: []ir.Match{&ir.ESPMatch{SPIs: [2]uint32{uint32(i), uint32(i)}}}})
	}
	rs.Chains[0].Rules = many
	if _, err := Compile(rs, Options{}); err == nil {
		t.Errorf("%d distinct esp matches compiled; want a refusal", len(many))
	}
}

// checkInputVerdict classifies p in INPUT and checks that it hotdrops
// (hotdrop) or that INPUT's 1-based rule (0: the policy) takes it.
func checkInputVerdict(t *testing.T, g *Generation, p *Packet, name string, rule int, hotdrop bool) {
	t.Helper()
	res := g.Classify(p, ChainInput)
	hot := res.Hotdrop || (res.Entry >= 0 && g.Entries[res.Entry].Rule == NoRule)
	if hot != hotdrop {
		t.Errorf("%s: hotdrop %v, want %v", name, hot, hotdrop)
		return
	}
	if hotdrop {
		return
	}
	got := 0
	if res.Entry >= 0 {
		got = int(g.Entries[res.Entry].Rule) - NumChains + 1
	}
	if got != rule {
		t.Errorf("%s: rule %d, want %d", name, got, rule)
	}
}
