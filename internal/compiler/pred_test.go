package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestPredicateProbes compiles string, u32 and time matches into predicate
// probes: one predicate per match (a rule flattened twice shares its
// own), asked in rule order with the conditions before them, the answer
// deciding whether the walk reaches the rule.
func TestPredicateProbes(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4,
		"-N twice",
		"-A twice -p udp -m u32 --u32 0=0:0xffffffff -m time --weekdays Mon -j DROP",
		"-A FORWARD -p udp -m string --algo bm --string a -j REJECT",
		"-A FORWARD -j twice",
		"-A FORWARD -p tcp -j twice",
		"-A FORWARD -p udp -j ACCEPT",
		"-P FORWARD DROP",
	)
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Preds) != 3 || g.Preds[0].Kind != PredString || g.Preds[1].Kind != PredU32 || g.Preds[2].Kind != PredTime {
		t.Fatalf("predicates: %+v", g.Preds)
	}
	tests := []struct {
		proto uint32
		preds uint64
		want  Action
	}{
		{17, 0b001, ActReject},
		{17, 0b000, ActAccept},
		{17, 0b110, ActDrop},
		{17, 0b010, ActAccept},
		{17, 0b100, ActAccept},
		{6, 0b111, ActDrop},
		{6, 0b000, ActDrop}, // the policy
	}
	for _, tt := range tests {
		p := &Packet{Proto: tt.proto, Sport: 1, Dport: 2, TCPFlags: FlagsNone, ICMP: ValNone, Preds: tt.preds}
		if tt.proto == 6 {
			p.TCPFlags = 0x02
		}
		res := g.Classify(p, ChainForward)
		got := ActDrop // the policy
		if res.Entry >= 0 {
			got = g.Entries[res.Entry].Action
		}
		if got != tt.want {
			t.Errorf("proto %d, predicates %03b: %v, want %v", tt.proto, tt.preds, got, tt.want)
		}
	}
}

// TestPredicateRefusals checks what the data plane refuses: the fsm
// algorithm and more than MaxPreds predicates.
func TestPredicateRefusals(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A INPUT -m string --algo fsm --hex-string |0000000000000000|")
	if _, err := Compile(rs, Options{}); err == nil {
		t.Error("--algo fsm compiled")
	}
	var rules []string
	for i := 0; i <= MaxPreds; i++ {
		rules = append(rules, "-A INPUT -m u32 --u32 0=1")
	}
	if _, err := Compile(parseRuleset(t, ir.IPv4, rules...), Options{}); err == nil {
		t.Errorf("%d predicates compiled", MaxPreds+1)
	}
}
