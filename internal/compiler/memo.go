package compiler

import (
	"slices"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Compiling again a ruleset that shares most rules with the last one
// (kube-proxy's partial sync replaces a few of 110,000 chains): a Memo
// carries what a compile worked out per rule from the rule alone, its
// terms (the rule's condition as sets of field values, ruleTerms), to the
// next compile, keyed by the rule's identity (the same *ir.Rule). Rules
// are not changed in place once in a committed ruleset (the saved form's
// reuse, ir.Ruleset.MarshalBinaryReusing, rests on it too), and terms
// depend on nothing else but the family and the interfaces, which the
// memo compares. Compile stays a function of its inputs: the generation is
// the one a compile without the memo makes (TestMemoSameGeneration). The
// caller keeps the memo (the agent, cli/cmdcache.go); rules with set or
// extension header matches are not memoised (their terms number set
// conditions in the order flattening meets them).

// Memo is what one compile leaves for the next (see above). A Memo is
// used by one compile at a time.
type Memo struct {
	fam    ir.Family
	ifaces []Interface
	// chains are the last compile's chains' memoised rules, by first rule.
	chains map[*ir.Rule]*memoChain
	// Hits and Misses count the last compile's rules found and not found
	// (tests, traces).
	Hits, Misses int
}

// memoChain is one chain's rules and their terms, as last compiled.
type memoChain struct {
	rules []*ir.Rule
	terms []memoTerms
}

// memoTerms are a rule's terms, or the reason it was refused; ok is false
// for a rule not memoised.
type memoTerms struct {
	terms []term
	err   error
	ok    bool
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{} }

// usable reports whether m's terms hold for a compile of fam for ifaces,
// and forgets them when not.
func (m *Memo) usable(fam ir.Family, ifaces []Interface) bool {
	if m.chains != nil && m.fam == fam && slices.Equal(m.ifaces, ifaces) {
		return true
	}
	m.chains = nil
	m.fam, m.ifaces = fam, slices.Clone(ifaces)
	return false
}

// lookup gives the rules of chain c the memo knows their terms.
func (m *Memo) lookup(c *ir.Chain, infos []*ruleInfo) {
	if len(c.Rules) == 0 {
		return
	}
	mc := m.chains[c.Rules[0]]
	for i, r := range c.Rules {
		if mc == nil || i >= len(mc.rules) || mc.rules[i] != r || !mc.terms[i].ok {
			m.Misses++
			continue
		}
		t := mc.terms[i]
		infos[i].terms, infos[i].err, infos[i].hasTerms = t.terms, t.err, true
		m.Hits++
	}
}

// record replaces the memo's contents by the terms of rs's rules, as
// flattening computed them (chainInfos): what the next compile can reuse.
func (m *Memo) record(rs *ir.Ruleset, chainInfos map[*ir.Chain][]*ruleInfo) {
	m.chains = make(map[*ir.Rule]*memoChain, len(m.chains))
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		for _, c := range t.Chains {
			infos := chainInfos[c]
			if len(c.Rules) == 0 || len(infos) != len(c.Rules) {
				continue
			}
			mc := &memoChain{rules: slices.Clone(c.Rules), terms: make([]memoTerms, len(c.Rules))}
			for i, inf := range infos {
				if inf.hasTerms && !hasSetMatch(c.Rules[i]) {
					mc.terms[i] = memoTerms{terms: inf.terms, err: inf.err, ok: true}
				}
			}
			m.chains[c.Rules[0]] = mc
		}
	}
}
