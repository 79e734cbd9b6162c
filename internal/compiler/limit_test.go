package compiler

import (
	"math/rand"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// limitOracle decides limit matches for a test: the n-th token asked of a
// match (a rule's position and the match's index) is given or refused by
// a fixed pseudo-random rule, so two walks that ask the same questions in
// the same order get the same answers. asked counts the questions.
type limitOracle struct {
	asked map[limitQ]int
}

// limitQ names a limit match by its rule's chain and index.
type limitQ struct {
	chain       string
	rule, match int
}

// take answers the next question to match q.
func (o *limitOracle) take(q limitQ) bool {
	n := o.asked[q]
	o.asked[q] = n + 1
	h := uint32(q.rule*7919+q.match*104729+n*15485863) ^ uint32(len(q.chain))*2654435761
	h ^= h >> 13
	return h%3 != 0
}

// refLimited is refRuleMatch with the limit matches asked of o in the
// order the kernel evaluates them: only when the rule's IP part and the
// matches before each one match.
func refLimited(rs *ir.Ruleset, o *limitOracle) func(ir.Family, *ir.Rule, *Packet) refResult {
	where := map[*ir.Rule]limitQ{}
	for _, c := range rs.Chains {
		for i, r := range c.Rules {
			where[r] = limitQ{chain: c.Name, rule: i}
		}
	}
	return func(fam ir.Family, r *ir.Rule, p *Packet) refResult {
		for i, m := range r.Matches {
			if _, ok := m.(*ir.LimitMatch); !ok {
				continue
			}
			before := *r
			before.Matches = r.Matches[:i]
			if res := refRuleMatch(fam, &before, p); res != refMatch {
				return res
			}
			q := where[r]
			q.match = i
			if !o.take(q) {
				return refNoMatch
			}
		}
		return refRuleMatch(fam, r, p) // limit matches are skipped there
	}
}

// withLimits adds limit matches to about a third of rs's rules, at random
// places among their matches (sometimes two).
func withLimits(rng *rand.Rand, rs *ir.Ruleset) {
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			for n := rng.Intn(5); n >= 3; n-- {
				at := rng.Intn(len(r.Matches) + 1)
				m := &ir.LimitMatch{Avg: uint32(1 + rng.Intn(1000)), Burst: uint32(1 + rng.Intn(10))}
				r.Matches = append(r.Matches[:at], append([]ir.Match{m}, r.Matches[at:]...)...)
			}
		}
	}
}

// TestLimitProbesMatchReference compiles random rulesets with limit
// matches and requires the walk to ask for tokens exactly when and as
// often as the kernel's evaluation order does (the same questions, in the
// same order, get the same answers on both sides), with the same
// decisions and counted rules.
func TestLimitProbesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	probes := 0
	for iter := 0; iter < 300; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, 1+rng.Intn(40), rng.Intn(4))
		withLimits(rng, rs)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		for _, e := range g.Entries {
			if e.Flags&EFProbe != 0 && g.Probes[e.Aux].Kind == ProbeLimit {
				probes++
			}
		}
		checkLimitPackets(t, rng, iter, rs, g, 200)
	}
	if probes == 0 {
		t.Fatal("no limit probe compiled")
	}
}

// TestLimitProbesAcrossChanges appends, inserts and deletes rules in place
// in generations with limit probes (rules with a limit match themselves
// are compiled in full) and checks every result as
// TestLimitProbesMatchReference does: a probe refused a token continues
// at the rule after its own, also when that rule was appended later.
func TestLimitProbesAcrossChanges(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	tally := &changeTally{}
	for iter := 0; iter < 100; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, 10+rng.Intn(30), rng.Intn(3))
		withLimits(rng, rs)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		for step := 0; step < 1+rng.Intn(12); step++ {
			ng, ok, err := randomChange(rng, rs, g, 3)
			if !ok {
				continue
			}
			g = tally.outcome(t, rs, ng, err, iter, step)
			checkLimitPackets(t, rng, iter*1000+step, rs, g, 60)
		}
	}
	tally.check(t, 100)
}

// checkLimitPackets judges n random packets in every base chain with g
// and with the reference interpreter on rs, each side asking its own
// limitOracle, and requires the same outcomes and the same questions.
func checkLimitPackets(t *testing.T, rng *rand.Rand, id int, rs *ir.Ruleset, g *Generation, n int) {
	t.Helper()
	ref, got := &limitOracle{asked: map[limitQ]int{}}, &limitOracle{asked: map[limitQ]int{}}
	refMatch := refLimited(rs, ref)
	for k := 0; k < n; k++ {
		p := genPacket(rng, rs.Family)
		for ch, name := range ir.BuiltinChains {
			q := *p
			if ch == ChainInput {
				q.OIF = 0
			}
			if ch == ChainOutput {
				q.IIF = 0
			}
			q.Sets = g.SetBits(func(c SetCond) bool { return refSetMember(c.Name, c.Dirs, c.ReturnNomatch, &q) })
			want := refRunWith(rs, name, &q, refMatch)
			q.Limit = func(k int) bool {
				l := g.Limits[k]
				rr := g.Rules[l.Rule-NumChains]
				return got.take(limitQ{chain: rr.Chain, rule: rr.Index, match: l.Match})
			}
			checkSame(t, id, name, rs, g, &q, want, g.Classify(&q, ch))
			for lq, n := range ref.asked {
				if got.asked[lq] != n {
					t.Fatalf("ruleset %d chain %s: limit %+v asked %d times, reference %d", id, name, lq, got.asked[lq], n)
				}
			}
			if len(got.asked) != len(ref.asked) {
				t.Fatalf("ruleset %d chain %s: %d limits asked, reference %d", id, name, len(got.asked), len(ref.asked))
			}
		}
	}
}
