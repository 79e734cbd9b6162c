package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNFLogCompiles checks that NFLOG rules become LOG entries whose
// options carry the NFLOG mark, the group, the prefix and the copy length
// (the whole packet without --nflog-size, --nflog-range ignored as the
// kernel ignores it), that the walk goes on after them, and that they
// count as LOG entries of a table's PREROUTING chain do (hook view bit).
func TestNFLogCompiles(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-A INPUT -p tcp --dport 22 -j NFLOG --nflog-group 5 --nflog-prefix x",
		"-A INPUT -j NFLOG --nflog-size 40",
		"-A INPUT -j NFLOG --nflog-range 40 --nflog-group 2",
		"-A INPUT -j LOG --log-prefix x",
		"-t raw -A PREROUTING -j NFLOG --nflog-group 9",
	)
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []LogConfig{
		{Prefix: "x", Flags: ir.LogFlagNFLog, NFLogGroup: 5, NFLogLen: NFLogWhole},
		{Flags: ir.LogFlagNFLog, NFLogLen: 40},
		{Flags: ir.LogFlagNFLog, NFLogGroup: 2, NFLogLen: NFLogWhole},
		{Prefix: "x", Level: defaultLogLevel},
		{Flags: ir.LogFlagNFLog | ir.LogViewPrerouting, NFLogGroup: 9, NFLogLen: NFLogWhole},
	}
	for _, w := range want {
		if !slices.Contains(g.LogConfigs, w) {
			t.Errorf("LOG options %+v missing from %+v", w, g.LogConfigs)
		}
	}
	logs := 0
	for _, e := range g.Entries {
		if e.Flags&EFLog != 0 {
			logs++
			if e.Action != ActContinue {
				t.Errorf("NFLOG/LOG entry %+v does not continue", e)
			}
		}
	}
	// raw's PREROUTING entries are in the INPUT and the FORWARD walks.
	if wantLogs := len(want) + 1; logs != wantLogs {
		t.Errorf("%d LOG entries, want %d", logs, wantLogs)
	}
}

// TestNFLogAppends checks that appending an NFLOG rule to a compiled
// generation adds its options as the full compile numbers them.
func TestNFLogAppends(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A INPUT -j ACCEPT")
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := parseRuleset(t, ir.IPv4, "-A INPUT -j NFLOG --nflog-group 3 --nflog-size 0").Chain(ir.ChainInput).Rules[0]
	// The counters: one per built-in chain's policy, then INPUT's rules.
	counter := uint32(NumChains + 1)
	out, err := AppendRule(g, r, ChainInput, counter, RuleRef{Chain: ir.ChainInput, Index: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := LogConfig{Flags: ir.LogFlagNFLog, NFLogGroup: 3}
	if !slices.Contains(out.LogConfigs, w) {
		t.Errorf("appended NFLOG options %+v missing from %+v", w, out.LogConfigs)
	}
}
