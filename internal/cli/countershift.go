package cli

import (
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/prefault"
)

// counterShift is how a change in place (changeInPlace, commitNewChain)
// moved the running ruleset's counters: the rules added at counter index
// at (the new ruleset's), in place of removed running rules; every other
// counter is the running one at the same place, or shifted past the
// change. The zero value moves nothing (-N).
type counterShift struct {
	at      int
	added   []*ir.Rule
	removed int
}

// numbered is the first counter index whose rule the change moved or
// added: none for a shift that moves nothing (-N).
func (s *counterShift) numbered() int {
	if len(s.added) == 0 && s.removed == 0 {
		return math.MaxInt
	}
	return s.at
}

// chainShift returns the counterShift of a change of one chain, from
// oldChain's rules to newChain's, whose first rule has counter index
// first: the rules both share (the same *ir.Rule: a command's copy
// shares the rules it keeps) at their start and at their end stay, those
// between are removed and added.
func chainShift(oldChain, newChain *ir.Chain, first int) counterShift {
	o, n := oldChain.Rules, newChain.Rules
	k := 0
	for k < len(o) && k < len(n) && o[k] == n[k] {
		k++
	}
	suf := 0
	for suf < len(o)-k && suf < len(n)-k && o[len(o)-1-suf] == n[len(n)-1-suf] {
		suf++
	}
	return counterShift{at: first + k, added: n[k : len(n)-suf], removed: len(o) - k - suf}
}

// keptCounterSources returns the counter sources of rs, the running
// ruleset old changed in place as shift says, committing the tables
// committed names: what counterSources gives, found from the positions
// alone instead of every rule's Handle (a walk over every rule, and the
// running rules' Handles and counters then need not be read). Without a
// shift it is counterSources. With checkReuseEnv it computes both and fails
// unless they are the same.
func keptCounterSources(old, rs *ir.Ruleset, shift *counterShift, committed []string) ([]dataplane.CounterSource, error) {
	if shift == nil {
		return counterSources(old, rs, true, committed), nil
	}
	src := shiftedCounterSources(rs, *shift, committed)
	if os.Getenv(checkReuseEnv) != "" {
		if i := firstSourceDiffering(src, counterSources(old, rs, true, committed)); i >= 0 {
			return nil, fmt.Errorf("%s: the shifted counter sources differ from counterSources' at counter %d", checkReuseEnv, i)
		}
	}
	return src, nil
}

// firstSourceDiffering returns the first counter whose source differs
// between a and b (where it is carried from, or, when it is not, its
// initial value), or -1; len(a) when their lengths differ.
func firstSourceDiffering(a, b []dataplane.CounterSource) int {
	if len(a) != len(b) {
		return len(a)
	}
	for i := range a {
		if a[i].From != b[i].From || (a[i].From < 0 && a[i].Initial != b[i].Initial) {
			return i
		}
	}
	return -1
}

// shiftedCounterSources is counterSources(old, rs, true, committed) for
// rs, old changed as s says: a rule counts on from the running counter at
// its place before the change, an added rule starts from its own counters
// (the command's -c, or zero), the policies of a committed table restart
// from zero and the others count on.
func shiftedCounterSources(rs *ir.Ruleset, s counterShift, committed []string) []dataplane.CounterSource {
	src := make([]dataplane.CounterSource, numCounters(rs))
	prefault.Slice(src)
	end := s.at + len(s.added)
	for i := range src {
		switch {
		case i < s.at:
			src[i].From = i
		case i < end:
			src[i] = dataplane.CounterSource{From: -1, Initial: s.added[i-s.at].Counters}
		default:
			src[i].From = i - len(s.added) + s.removed
		}
	}
	restarts := func(table string) bool { return slices.Contains(committed, table) }
	for hook, name := range ir.BuiltinChains {
		if rs.Chain(name) == nil || restarts(ir.TableFilter) {
			src[hook] = dataplane.CounterSource{From: -1}
		}
	}
	i := compiler.NumChains + rulesOf(rs)
	for _, t := range rs.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if t.Chain(name) == nil {
				continue
			}
			if restarts(t.Table) {
				src[i] = dataplane.CounterSource{From: -1}
			}
			i++
		}
		i += rulesOf(t)
	}
	return src
}

// rulesOf counts the rules of t's chains (not of its other tables).
func rulesOf(t *ir.Ruleset) int {
	n := 0
	for _, c := range t.Chains {
		n += len(c.Rules)
	}
	return n
}
