package compiler

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestAppendKeepsClassNumbers appends 5-tuple rules (the served append of
// BenchmarkCmdLatency) to rulesets of such rules, in place, and requires
// each append to change only the small-field entries of the values the
// new rule names (their classes split off; every other class keeps its
// number, p added where it is), every changed entry to lie in a range
// SmallWritten lists, and the generation to judge packets as the ruleset
// compiled in full does (the appended rules' own packets and random ones).
func TestAppendKeepsClassNumbers(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for _, n := range []int{0, 1, 300} {
		lines := []string{"-P FORWARD ACCEPT"}
		for i := range n {
			lines = append(lines, fmt.Sprintf("-A FORWARD -s 10.1.%d.%d/32 -d 10.2.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT", i/250, i%250+1, 1024+i))
		}
		rs := parseRuleset(t, ir.IPv4, lines...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatal(err)
		}
		inPlace, most := 0, 0
		for i := range 40 {
			line := fmt.Sprintf("-A FORWARD -s 10.99.0.%d/32 -d 10.2.0.1/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT", i+1, 1000+i)
			r := parseRuleset(t, ir.IPv4, line).Chain("FORWARD").Rules[0]
			chain := rs.Chain("FORWARD")
			chain.Rules = append(chain.Rules, r)
			k := len(chain.Rules) - 1
			before := slices.Clone(g.Small)
			g.SmallWritten = nil
			ng, err := AppendRule(g, r, ChainForward, counterIn(rs, chain, k), RuleRef{Chain: "FORWARD", Index: k}, testIfaces)
			if err != nil {
				// The first append to an empty ruleset has no port
				// field to classify: compiled in full, as the
				// control plane does.
				if n == 0 && i == 0 {
					if g, err = Compile(rs, Options{Interfaces: testIfaces}); err != nil {
						t.Fatal(err)
					}
					continue
				}
				t.Fatalf("%d rules, append %d: %v", n, i, err)
			}
			g = ng
			inPlace++
			written := make([]bool, len(g.Small))
			for j := 0; j+1 < len(g.SmallWritten); j += 2 {
				for x := g.SmallWritten[j]; x < g.SmallWritten[j+1]; x++ {
					written[x] = true
				}
			}
			changed := 0
			for x := range g.Small {
				if g.Small[x] != before[x] {
					changed++
					if !written[x] {
						t.Fatalf("%d rules, append %d: entry %d changed (%d to %d), not in SmallWritten", n, i, x, before[x], g.Small[x])
					}
				}
			}
			// The new rule's port in each port field (and its cut-short
			// twin), its protocol: a few entries, not whole fields.
			most = max(most, changed)
			if changed > 8 {
				t.Errorf("%d rules, append %d: %d small-field entries changed", n, i, changed)
			}
			want, err := Compile(rs, Options{Interfaces: testIfaces})
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("%d rules, append %d", n, i)
			sameWalks(t, rng, id, ir.IPv4, g, want, 50)
			for j := 0; j <= i; j++ {
				p := &Packet{Proto: 17, Sport: uint32(1000 + j), Dport: 53, TTL: 64, IIF: 1, OIF: 2,
					Src: U64(0x0a630000 + uint64(j+1)), Dst: U64(0x0a020001)}
				if a, b := changedWalkOutcome(g, g.Classify(p, ChainForward)), changedWalkOutcome(want, want.Classify(p, ChainForward)); a != b {
					t.Fatalf("%s, rule %d's packet:\n in place: %s\n compiled: %s", id, j, a, b)
				}
			}
		}
		t.Logf("%d rules: %d appends in place, at most %d small-field entries changed by one", n, inPlace, most)
		if inPlace < 39 {
			t.Errorf("%d rules: %d appends in place of 40", n, inPlace)
		}
	}
}

// TestChangeInPlaceMatchesCompile is TestChangeInPlaceWithTablesMatchesCompile
// for filter tables alone: random appends, inserts and deletions in place,
// several in a row (the classes keeping their numbers through all of
// them), each generation judging random packets in every base chain as the
// ruleset compiled in full does.
func TestChangeInPlaceMatchesCompile(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	tally := &changeTally{}
	for iter := 0; iter < 150; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, rng.Intn(40), rng.Intn(3))
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		for step := 0; step < 1+rng.Intn(16); step++ {
			ng, ok, err := randomChange(rng, rs, g, 3)
			if !ok {
				continue
			}
			g = tally.outcome(t, rs, ng, err, iter, step)
			want, err := Compile(rs, Options{Interfaces: testIfaces})
			if err != nil {
				t.Fatalf("ruleset %d step %d: %v", iter, step, err)
			}
			sameWalks(t, rng, fmt.Sprintf("ruleset %d step %d", iter, step), rs.Family, g, want, 150)
		}
	}
	tally.check(t, 300)
}

// TestRunLen compares runLen with counting one entry at a time, for runs
// ending at every offset of an eight-entry block and at the slice's end.
func TestRunLen(t *testing.T) {
	for n := 0; n <= 20; n++ {
		for end := 0; end <= n; end++ {
			s := make([]uint32, n)
			for i := range s {
				s[i] = 5
			}
			if end < n {
				s[end] = 6
			}
			if got := runLen(s, 5); got != end {
				t.Errorf("len %d, first other at %d: runLen %d", n, end, got)
			}
		}
	}
	if got := runLen([]uint32{1, 5, 5}, 5); got != 0 {
		t.Errorf("runLen of a slice starting with another value: %d, want 0", got)
	}
}
