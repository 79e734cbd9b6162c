package compiler

import (
	"github.com/xfw-dev/xfw/internal/ir"
)

// The hashlimit match (xt_hashlimit) in the walk. Its answer depends on a
// token bucket per key in a table the packet changes, so it is a probe of
// kind ProbeHashLimit (probe.go) whose Arg names one of the generation's
// HashLimits: the match as the rule has it. Which table it uses (the
// namespace's table of that name and family, created by the first rule
// that names it and kept while a rule does) is the data plane's business:
// the probe's argument there is the table's id and the rule's own bits
// (internal/dataplane/hashlimit.go, bpf/hashlimit.h).

// HashLimit is one hashlimit match of one rule.
type HashLimit struct {
	// Match is the match as the rule has it.
	Match ir.HashLimitMatch
}

// MaxHashLimits bounds a generation's hashlimit matches.
const MaxHashLimits = 1 << 16

// hashLimitIndex returns the index of match i (m) of rule r among the
// generation's hashlimit matches (matchIndex).
func (fl *flattener) hashLimitIndex(r *ir.Rule, i int, m *ir.HashLimitMatch) (uint32, error) {
	return fl.hashLimits.index(r, i, MaxHashLimits, "hashlimit matches", func() HashLimit {
		return HashLimit{Match: *m}
	})
}
