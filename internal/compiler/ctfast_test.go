package compiler

import (
	"math/rand"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCtFastPath checks which chains get the established fast path and
// that, for every packet whose state the fast path accepts, classification
// reaches the same entry (the fast path only skips a search whose outcome
// is known).
func TestCtFastPath(t *testing.T) {
	est, rel, nw, inv, untr := uint8(1)<<CtsEstablished, uint8(1)<<CtsRelated, uint8(1)<<CtsNew,
		uint8(1)<<CtsInvalid, uint8(1)<<CtsUntracked
	tests := []struct {
		name   string
		rules  []string
		chain  int
		ok     bool
		states uint8
	}{
		{"est-rel", []string{"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT", "-A INPUT -p tcp --dport 22 -j ACCEPT"}, ChainInput, true, est | rel},
		{"state alias", []string{"-A FORWARD -m state --state ESTABLISHED -j ACCEPT"}, ChainForward, true, est},
		{"not invalid", []string{"-A OUTPUT -m conntrack ! --ctstate INVALID -j ACCEPT"}, ChainOutput, true, est | rel | nw | untr},
		{"other chain", []string{"-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT"}, ChainForward, false, 0},
		{"not first", []string{"-A INPUT -i lo -j ACCEPT", "-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT"}, ChainInput, false, 0},
		{"more than state", []string{"-A INPUT -m conntrack --ctstate ESTABLISHED --ctdir REPLY -j ACCEPT"}, ChainInput, false, 0},
		{"with protocol", []string{"-A INPUT -p tcp -m conntrack --ctstate ESTABLISHED -j ACCEPT"}, ChainInput, false, 0},
		{"drop", []string{"-A INPUT -m conntrack --ctstate INVALID -j DROP"}, ChainInput, false, 0},
		{"log", []string{"-A INPUT -m conntrack --ctstate ESTABLISHED -j LOG"}, ChainInput, false, 0},
		{"jump", []string{"-N x", "-A x -j ACCEPT", "-A INPUT -m conntrack --ctstate ESTABLISHED -j x"}, ChainInput, false, 0},
		{"invalid only", []string{"-A INPUT -m conntrack --ctstate INVALID -j ACCEPT"}, ChainInput, true, inv},
	}
	for _, tt := range tests {
		rs := parseRuleset(t, ir.IPv4, tt.rules...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		e, states, ok := g.CtFastPath(tt.chain)
		if ok != tt.ok || states != tt.states {
			t.Errorf("%s: fast path %v states %#x, want %v %#x", tt.name, ok, states, tt.ok, tt.states)
			continue
		}
		if ok {
			checkFastPath(t, tt.name, g, tt.chain, e, states)
		}
	}
}

// checkFastPath classifies packets of every state and a random rest and
// requires the fast path's entry wherever it applies.
func checkFastPath(t *testing.T, name string, g *Generation, chain int, entry uint32, states uint8) {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		p := genPacket(rng, g.Family)
		p.Ct = CtValue(uint8(rng.Intn(5)), rng.Intn(2) == 1, uint8(rng.Intn(16)), uint8(p.Proto))
		if states>>(p.Ct&CtValStateMask)&1 == 0 {
			continue
		}
		if got := g.Classify(p, chain); got.Entry != int(entry) || len(got.Path) != 0 {
			t.Fatalf("%s: packet %+v: classification reached entry %d (path %v), the fast path %d", name, p, got.Entry, got.Path, entry)
		}
	}
}

// TestCtFastPathAfterDelete checks that deleting the rules before the
// state rule in place gives the chain its fast path.
func TestCtFastPathAfterDelete(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-A INPUT -i lo -j ACCEPT",
		"-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT", "-A INPUT -j DROP")
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := g.CtFastPath(ChainInput); ok {
		t.Fatal("fast path with a rule before the state rule")
	}
	chain := rs.Chain("INPUT")
	first := chain.Rules[0]
	counter := uint32(NumChains) // the first rule of the first chain
	chain.Rules = chain.Rules[1:]
	ng, err := DeleteRule(g, first, ChainInput, counter, testIfaces)
	if err != nil {
		t.Fatal(err)
	}
	e, states, ok := ng.CtFastPath(ChainInput)
	if !ok || states != 1<<CtsEstablished|1<<CtsRelated {
		t.Fatalf("after deleting the first rule: fast path %v states %#x", ok, states)
	}
	checkFastPath(t, "after delete", ng, ChainInput, e, states)
}
