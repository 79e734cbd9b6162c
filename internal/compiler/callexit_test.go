package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCallExitNext checks that a CALL of a table's chain that other
// tables follow is marked CallExitNext exactly when its ActExit entry
// follows it, and that the walk's RETURN resumes past that entry (one
// step less). (TestCompilerMatchesReference's rulesets have no other
// table; the e2e tests walk such CALLs with real packets.)
func TestCallExitNext(t *testing.T) {
	rs := parseRuleset(t, ir.IPv4, "-N U", "-A U -p tcp -j ACCEPT", "-A U -p udp -j RETURN",
		"-A INPUT -j U", "-A INPUT -p udp -j DROP", "-A FORWARD -p icmp -g U")
	rs.EnsureTable(ir.TableMangle)
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for i, e := range g.Entries {
		if e.Action != ActCall {
			continue
		}
		calls++
		exit := i+1 < len(g.Entries) && g.Entries[i+1].Action == ActExit
		if (e.Aux == CallExitNext) != exit {
			t.Errorf("CALL at %d: Aux %d, exit entry after it %v", i, e.Aux, exit)
		}
	}
	if calls == 0 {
		t.Fatal("no CALL entry")
	}
	// A UDP packet in INPUT: U returns, the walk goes on past the exit
	// entry to the DROP, never meeting the exit entry.
	p := &Packet{Proto: 17, Sport: 1, Dport: 2, TTL: 64, IIF: 1, Src: U64(0x0a000001), Dst: U64(0x0a000002)}
	res := g.Classify(p, ChainInput)
	if res.Entry < 0 || g.Entries[res.Entry].Action != ActDrop {
		t.Fatalf("UDP in INPUT: entry %d, want the DROP rule", res.Entry)
	}
	for _, e := range res.Path {
		if g.Entries[e].Action == ActExit {
			t.Errorf("UDP in INPUT met the exit entry at %d after RETURN", e)
		}
	}
}
