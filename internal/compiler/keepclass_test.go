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

// scanRunStarts is where the runs of one class of small start, found
// entry by entry (what smallRuns scanned at every use before the index).
func scanRunStarts(small []uint32) []uint32 {
	st := []uint32{}
	for k := range small {
		if k == 0 || small[k-1] != small[k] {
			st = append(st, uint32(k))
		}
	}
	return st
}

// TestSmallRunIndex appends and deletes rules in place, port ranges among
// them (runs split, merged and rewritten), and checks after each change
// that the run starts a generation keeps (runStarts, brought up to date
// from the ranges written) are those of its entries as they are, and that
// the generation is the one the same changes make scanning every entry
// (a twin whose index is dropped before each change).
func TestSmallRunIndex(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	lines := []string{"-P FORWARD ACCEPT"}
	for i := range 50 {
		lines = append(lines, fmt.Sprintf("-A FORWARD -s 10.1.0.%d/32 -p udp -m udp --sport %d --dport 53 -j ACCEPT", i+1, 1024+i))
	}
	rs := parseRuleset(t, ir.IPv4, lines...)
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	twin, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		indexed := 0
		for f := Field(0); f < NumFields; f++ {
			if f.Kind() != KindSmall || g.Active&(1<<uint(f)) == 0 {
				continue
			}
			base, dom := int(g.SmallBase[f]), g.SmallDomain(f)
			small := g.Small[base : base+dom]
			if g.runs != nil && g.runs.starts[f] != nil {
				indexed++
			}
			if got, want := g.runStarts(f, small), scanRunStarts(small); !slices.Equal(got, want) {
				t.Fatalf("%s: field %s: %d run starts kept, %d in the entries", step, f, len(got), len(want))
			}
		}
		if indexed == 0 {
			t.Fatalf("%s: no field indexed by the changes in place", step)
		}
		if err := DiffGenerations(g, twin); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	chain := rs.Chain("FORWARD")
	for i := range 30 {
		lo := 900 + rng.Intn(300)
		spec := fmt.Sprint(lo)
		if i%3 == 0 {
			spec = fmt.Sprintf("%d:%d", lo, lo+rng.Intn(200))
		}
		line := fmt.Sprintf("-A FORWARD -s 10.99.0.%d/32 -p udp -m udp --sport %s --dport %d -j ACCEPT", i+1, spec, 50+rng.Intn(10))
		r := parseRuleset(t, ir.IPv4, line).Chain("FORWARD").Rules[0]
		chain.Rules = append(chain.Rules, r)
		k := len(chain.Rules) - 1
		ref := RuleRef{Chain: "FORWARD", Index: k}
		if g, err = AppendRule(g, r, ChainForward, counterIn(rs, chain, k), ref, testIfaces); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		twin.runs = nil
		if twin, err = AppendRule(twin, r, ChainForward, counterIn(rs, chain, k), ref, testIfaces); err != nil {
			t.Fatalf("append %d, twin: %v", i, err)
		}
		check(fmt.Sprintf("append %d (%s)", i, spec))
		if i%4 == 3 {
			k := rng.Intn(len(chain.Rules))
			r := chain.Rules[k]
			if g, err = DeleteRule(g, r, ChainForward, counterIn(rs, chain, k), testIfaces); err != nil {
				t.Fatalf("delete %d: %v", k, err)
			}
			twin.runs = nil
			if twin, err = DeleteRule(twin, r, ChainForward, counterIn(rs, chain, k), testIfaces); err != nil {
				t.Fatalf("delete %d, twin: %v", k, err)
			}
			chain.Rules = slices.Delete(chain.Rules, k, k+1)
			check(fmt.Sprintf("delete of rule %d after append %d", k, i))
		}
	}
}
