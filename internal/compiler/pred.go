package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Predicates: the string, u32 and time matches. Their answer is no
// classification field (a search of the packet's bytes, a small program
// over them, the wall clock), so each is a probe of kind ProbePred before
// its rule, under the conditions before the match (probe.go). The data
// plane evaluates a generation's predicates once per packet it classifies,
// at the hook (bpf/pred.h: the packet's bytes from its network header are
// copied into a scratch buffer there), and the probe reads the answer.
// Arg is the predicate's index in Generation.Preds.

// MaxPreds bounds a generation's predicates (the data plane keeps their
// answers as the bits of one 64-bit word).
const MaxPreds = 64

// PredKind says what a predicate evaluates (XFW_PRED_* in bpf/pred.h).
type PredKind uint32

// Predicate kinds.
const (
	PredString PredKind = iota
	PredU32
	PredTime
)

// Pred is one predicate of a generation: its kind and the match.
type Pred struct {
	Kind PredKind
	// Match is the *ir.StringMatch, *ir.U32Match or *ir.TimeMatch.
	Match ir.Match
}

// predKey names a predicate: the rule and the match's index.
type predKey struct {
	rule  *ir.Rule
	match int
}

// isPred reports whether m is answered by a predicate probe.
func isPred(m ir.Match) bool {
	switch m.(type) {
	case *ir.StringMatch, *ir.U32Match, *ir.TimeMatch:
		return true
	}
	return false
}

// predIndex returns the predicate of match i (m) of rule r, numbered in
// the order flattening meets them (one per match, however often user
// chains flatten its rule).
func (fl *flattener) predIndex(r *ir.Rule, i int, m ir.Match) (uint32, error) {
	key := predKey{r, i}
	if k, ok := fl.predIDs[key]; ok {
		return k, nil
	}
	var kind PredKind
	switch m := m.(type) {
	case *ir.StringMatch:
		if m.Algo != "bm" && m.Algo != "kmp" {
			return 0, fmt.Errorf("-m string --algo %s is not supported by xfw's data plane", m.Algo)
		}
		kind = PredString
	case *ir.U32Match:
		kind = PredU32
	case *ir.TimeMatch:
		kind = PredTime
	default:
		return 0, fmt.Errorf("match %T is no predicate", m)
	}
	if len(fl.preds) >= MaxPreds {
		return 0, fmt.Errorf("more than %d string, u32 and time matches in a family's ruleset are not supported by xfw's data plane", MaxPreds)
	}
	if fl.predIDs == nil {
		fl.predIDs = map[predKey]uint32{}
	}
	k := uint32(len(fl.preds))
	fl.predIDs[key] = k
	fl.preds = append(fl.preds, Pred{Kind: kind, Match: m})
	return k, nil
}
