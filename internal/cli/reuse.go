package cli

import (
	"fmt"
	"os"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

// A restore whose result is, rule for rule, the running ruleset
// (kube-proxy's syncs with no service changed: the filter table and nat's
// fixed chains written again as they are; a full resync of the same
// rules) installs the running generation again instead of compiling: the
// compile is a function of the ruleset, the interfaces and the sets'
// counting, and none of them changed. It is still a new generation (the
// restore replaced its tables): counters, limit buckets and the other
// state go as after a compile (install's mode is the caller's).

// checkReuseEnv, when set, makes a reusing restore compile anyway and fail
// unless the compiled generation is the reused one (tests). A generation
// an append, insert or deletion changed in place behaves as the compile
// but is laid out otherwise (slack used, dead positions): the check
// reports it too. In the agent it also checks that a cached ruleset is the
// decoded one (cmdcache.go).
const checkReuseEnv = "XFW_CHECK_REUSE"

// reusableEncoding returns rs's binary form and whether rs is, rule for
// rule, the running ruleset enc was decoded from, or kept by the agent
// with (old). The form is made only when old and rs have as many chains
// and rules, or rs shares rules with old; install saves it
// (installMode.saved). With indexed, index is where rs's rules lie in it
// (ir.Ruleset.MarshalBinaryIndexed). A failure to encode is install's to
// report.
func reusableEncoding(old, rs *ir.Ruleset, enc *ir.Encoded, indexed bool) (saved []byte, index *ir.Encoded, same bool) {
	var err error
	switch {
	case !enc.SharedBy(rs) && !sameShape(old, enc, rs):
		return nil, nil, false
	case indexed:
		saved, index, err = rs.MarshalBinaryIndexed(enc)
	default:
		saved, err = rs.MarshalBinaryReusing(enc)
	}
	if err != nil {
		return nil, nil, false
	}
	return saved, index, sameShape(old, enc, rs) && enc.Encodes(saved)
}

// sameShape reports whether a, decoded from enc, and b have as many
// tables, chains and rules per chain: a cheap test before comparing their
// encodings. The rules per chain of a are enc's (ir.Encoded.RuleCounts):
// a restore decodes the tables it replaces without their rules.
func sameShape(a *ir.Ruleset, enc *ir.Encoded, b *ir.Ruleset) bool {
	counts := enc.RuleCounts()
	chains := 0
	for _, t := range append([]*ir.Ruleset{a}, a.Tables...) {
		chains += len(t.Chains)
	}
	if len(counts) != chains {
		counts = nil // not a's decode: a's own rules
	}
	k := 0
	return walkShape(a, b, func(ca, cb *ir.Chain) bool {
		n := len(ca.Rules)
		if n == 0 && counts != nil {
			n = counts[k] // skipped by the decode, or none
		}
		k++
		return n == len(cb.Rules)
	})
}

// walkShape reports whether a and b have as many tables and chains per
// table, and same says so of each pair of their chains.
func walkShape(a, b *ir.Ruleset, same func(ca, cb *ir.Chain) bool) bool {
	if len(a.Tables) != len(b.Tables) {
		return false
	}
	ta, tb := append([]*ir.Ruleset{a}, a.Tables...), append([]*ir.Ruleset{b}, b.Tables...)
	for i := range ta {
		if len(ta[i].Chains) != len(tb[i].Chains) {
			return false
		}
		for j, c := range ta[i].Chains {
			if !same(c, tb[i].Chains[j]) {
				return false
			}
		}
	}
	return true
}

// reuseRunning returns fam's running generation for rs, the running
// ruleset unchanged (reusableEncoding), with the interfaces it was compiled
// for; nil when it cannot stand for a compile of rs: none is loaded or
// readable, the interfaces changed, or rs looks sets up (the generation
// then depends on the sets' definitions too). The error is checkReuseEnv's
// only.
func reuseRunning(fam ir.Family, rs *ir.Ruleset, sets *ipsetLookup) (*compiler.Generation, []compiler.Interface, error) {
	t := time.Now()
	if compiler.UsesSetMatches(rs) {
		return nil, nil, nil
	}
	if loaded, err := dataplane.OpenRunning(); err != nil || !loaded {
		return nil, nil, nil
	}
	gen, ifaces, err := runningGeneration(fam, rs, nil)
	if err != nil || gen == nil {
		// Compiled instead: reading is an optimisation, never a failure.
		dataplane.TraceSince(fmt.Sprintf("commit: running generation not reused (%v)", err), t)
		return nil, nil, nil
	}
	t = dataplane.TraceSince("commit: read running generation (unchanged rules)", t)
	if os.Getenv(checkReuseEnv) != "" {
		want, err := compiler.Compile(rs, compiler.Options{Interfaces: ifaces, SetCounts: setCounts(sets)})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: compile: %w", checkReuseEnv, err)
		}
		if err := compiler.DiffGenerations(gen, want); err != nil {
			return nil, nil, fmt.Errorf("%s: the running generation is not the compiled one: %w", checkReuseEnv, err)
		}
		dataplane.TraceSince("commit: "+checkReuseEnv+": compiled, the same", t)
	}
	return gen, ifaces, nil
}
