package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestMarkWalks checks the mark in the walk: MARK rules change it in rule
// order across tables (their rules counted, the walk going on), -m mark
// reads it as the rules before it left it, in every spelling of MARK.
func TestMarkWalks(t *testing.T) {
	first := CtValue(CtsNew, false, 0, 6)
	tests := []struct {
		name  string
		rules []string
		mark  uint32
		chain int
		want  []string
	}{
		{name: "mangle PREROUTING's mark seen by filter INPUT", rules: []string{
			"-t mangle -A PREROUTING -j MARK --set-mark 0x11",
			"-A INPUT -m mark --mark 0x11", "-A INPUT -m mark --mark 0x10", "-A INPUT -m mark ! --mark 0x11",
		}, chain: ChainInput, want: []string{"mangle/PREROUTING/1", "mangle/PREROUTING/policy", "mangle/INPUT/policy",
			"filter/INPUT/1", "filter/INPUT/policy"}},
		{name: "or, xor, and in a row", rules: []string{
			"-A OUTPUT -j MARK --or-mark 0x4000", "-A OUTPUT -m mark --mark 0x4005",
			"-A OUTPUT -j MARK --xor-mark 0x4001", "-A OUTPUT -m mark --mark 0x4/0xffff",
			"-A OUTPUT -j MARK --and-mark 0xff00", "-A OUTPUT -m mark --mark 0",
		}, mark: 5, chain: ChainOutput, want: []string{"filter/OUTPUT/1", "filter/OUTPUT/2", "filter/OUTPUT/3",
			"filter/OUTPUT/4", "filter/OUTPUT/5", "filter/OUTPUT/6", "filter/OUTPUT/policy"}},
		{name: "a mark the walk starts with, set-xmark keeping bits", rules: []string{
			"-A OUTPUT -m mark --mark 0x7", "-A OUTPUT -j MARK --set-xmark 0x30/0xf0", "-A OUTPUT -m mark --mark 0x37",
		}, mark: 7, chain: ChainOutput, want: []string{"filter/OUTPUT/1", "filter/OUTPUT/2", "filter/OUTPUT/3",
			"filter/OUTPUT/policy"}},
		{name: "a MARK in a user chain, a RETURN on the mark", rules: []string{
			"-t nat -N KMM", "-t nat -A KMM -j MARK --or-mark 0x4000",
			"-t nat -A PREROUTING -p tcp -j KMM",
			"-t nat -N KPR", "-t nat -A KPR -m mark ! --mark 0x4000/0x4000 -j RETURN",
			"-t nat -A KPR -j MARK --xor-mark 0x4000", "-t nat -A POSTROUTING -j KPR",
			"-A FORWARD -m mark --mark 0x4000/0x4000", "-t mangle -A POSTROUTING -m mark --mark 0",
			// Connection tracking, which the nat chains need (ctpull.go).
			"-N TRACKING", "-A TRACKING -m conntrack --ctstate INVALID",
		}, chain: ChainForward, want: []string{"mangle/PREROUTING/policy", "nat/PREROUTING/1", "nat/KMM/1",
			"nat/PREROUTING/policy", "mangle/FORWARD/policy", "filter/FORWARD/1", "filter/FORWARD/policy",
			"mangle/POSTROUTING/policy", "nat/POSTROUTING/1", "nat/KPR/2", "nat/POSTROUTING/policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := parseRuleset(t, ir.IPv4, tt.rules...)
			g, err := Compile(rs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := tcpPacket(first, 64)
			p.Mark = tt.mark
			got := walk(g, p, tt.chain)
			if got.verdict != ActAccept || !slices.Equal(got.counted, tt.want) {
				t.Errorf("got %v %v\nwant %v", got.verdict, got.counted, tt.want)
			}
		})
	}
}

// TestStatisticProbes checks the statistic probes: one per nth match
// instance (a rule that two jumps flatten twice keeps one counter), one
// per random mode probability and inversion (stateless: shared), the
// values the data plane reads, and the nth counter's start.
func TestStatisticProbes(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-N S", "-A S -m statistic --mode nth --every 3 --packet 1",
		"-A S -m statistic --mode nth --every 3 --packet 1", "-A S -m statistic --mode random ! --probability 0.5",
		"-A S -p tcp -m statistic --mode random ! --probability 0.5",
		"-A S -m statistic --mode random --probability 0.5",
		"-A INPUT -p tcp -j S", "-A INPUT -p udp -j S")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var stats []Probe
	for _, pr := range g.Probes {
		if pr.Kind == ProbeStatistic {
			stats = append(stats, pr)
		}
	}
	want := []Probe{
		{Kind: ProbeStatistic, Arg: StatisticNth, Val: 2, Mask: 1, Inst: 0},
		{Kind: ProbeStatistic, Arg: StatisticNth, Val: 2, Mask: 1, Inst: 1},
		{Kind: ProbeStatistic, Arg: StatisticInvert, Val: 0x40000000},
		{Kind: ProbeStatistic, Val: 0x40000000},
	}
	if !slices.Equal(stats, want) {
		t.Fatalf("statistic probes %+v, want %+v", stats, want)
	}
	if c := NthInitialCount(stats[0]); c != 1 {
		t.Errorf("nth counter starts at %d, want every-1 - packet = 1", c)
	}
	// The simulator asks Packet.Statistic: none answering true for the
	// first probe only, the rule after it counts.
	p := tcpPacket(CtValue(CtsNew, false, 0, 6), 64)
	p.Statistic = func(pr Probe) bool { return pr.Arg == StatisticNth && pr.Inst == 0 }
	got := walk(g, p, ChainInput)
	wantCounted := []string{"filter/INPUT/1", "filter/S/1", "filter/INPUT/policy"}
	if !slices.Equal(got.counted, wantCounted) {
		t.Errorf("counted %v, want %v", got.counted, wantCounted)
	}
}

// TestMarkRuleDeletedInPlace checks that a MARK rule deleted in place no
// longer marks: a later -m mark rule stops counting.
func TestMarkRuleDeletedInPlace(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A OUTPUT -j MARK --set-mark 1", "-A OUTPUT -m mark --mark 1")
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	p := tcpPacket(0, 64)
	if got := walk(g, p, ChainOutput); !slices.Equal(got.counted, []string{"filter/OUTPUT/1", "filter/OUTPUT/2", "filter/OUTPUT/policy"}) {
		t.Fatalf("before: counted %v", got.counted)
	}
	chain := rs.Chain("OUTPUT")
	first := chain.Rules[0]
	chain.Rules = chain.Rules[1:]
	ng, err := DeleteRule(g, first, ChainOutput, uint32(NumChains), testIfaces)
	if err != nil {
		t.Fatal(err)
	}
	p = tcpPacket(0, 64)
	if got := walk(ng, p, ChainOutput); !slices.Equal(got.counted, []string{"filter/OUTPUT/policy"}) || p.Mark != 0 {
		t.Errorf("after the delete: counted %v, mark %#x", got.counted, p.Mark)
	}
}
