package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The conntrack match (and state, its older form); its conditions are
// built in ct.go.

// conntrack adds a conntrack match.
func (b *termBuilder) conntrack(m *ir.ConntrackMatch) error {
	m = ctNatTerms(m) // a --ctstate with SNAT or DNAT is a probe's
	s, err := ctCondition(m)
	if err != nil {
		return err
	}
	if !ctHasTuple(m) {
		b.and(FieldCt, s)
		b.ctOther = Intersect(b.ctOther, s)
		return nil
	}
	if b.alt != nil {
		return fmt.Errorf("conntrack match: one conntrack match per rule may test the connection's addresses or ports")
	}
	// A packet without a connection passes the match on its
	// state alone (conntrack_mt returns before the tuple
	// tests): that part becomes a term of its own (ctAlt).
	b.alt = &ctAlt{noConn: Intersect(s, ctNoConnKeys), hotFrom: len(b.hot)}
	b.and(FieldCt, Intersect(s, ctConnKeys))
	return ctTupleConds(b.fam, m, b.and)
}

// ctAlt is the second way through a conntrack match that tests the
// connection's tuple: a packet without a connection (INVALID, UNTRACKED)
// passes on its state alone, whatever the tuple options say.
type ctAlt struct {
	noConn  *Set // FieldCt keys without a connection that pass the match
	hotFrom int  // hotdrop terms before this index came before the match
}

// expand adds, for each term the match's tuple conditions reach, its twin
// for packets without a connection: FieldCt limited to alt.noConn (and the
// rule's other conntrack matches, other), no tuple condition. The twins
// are disjoint from their terms (no connection against a connection).
func (alt *ctAlt) expand(terms []term, other *Set) []term {
	if alt.noConn.Empty() {
		return terms
	}
	out := terms
	for i, t := range terms {
		if t.hotdrop && i < alt.hotFrom {
			continue // reached before the conntrack match
		}
		tw := t
		tw.cond[FieldCt] = Intersect(other, alt.noConn)
		for _, f := range ctTupleFields {
			tw.cond[f] = nil
		}
		out = append(out, tw)
	}
	return out
}
