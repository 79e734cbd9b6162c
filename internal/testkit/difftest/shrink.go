package difftest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Shrinking: given a ruleset and corpus on which the firewalls disagree,
// find a small ruleset and as few probes as possible on which they still
// disagree the same way (a difference of the same kind, and for a probe
// difference, on that probe). Rules are deleted from the text, so what is
// left is spelled as the user (or the generator) wrote it.

// DefaultShrinkRuns bounds the runs one shrink may take.
const DefaultShrinkRuns = 150

// Repro is a minimal reproduction of a difference.
type Repro struct {
	// Ruleset is the reduced ruleset text.
	Ruleset string
	// Corpus holds the reduced probes.
	Corpus *Corpus
	// Differences are what the reduced case shows.
	Differences []Difference
	// Runs is how many runs the reduction took.
	Runs int
}

// reproducer runs candidates and says whether the difference persists.
type reproducer struct {
	s      *Session
	ctx    context.Context
	runs   int
	budget int
	last   *Result
	// want says whether a run's differences still show the one sought.
	want func([]Difference) bool
}

// ofKind returns a want function: a difference of kind k (for a probe
// difference, on the first probe: the one being reduced).
func ofKind(k DiffKind) func([]Difference) bool {
	return func(ds []Difference) bool {
		for _, d := range ds {
			if d.Kind == k && (k != DiffProbe || d.Probe == 0) {
				return true
			}
		}
		return false
	}
}

// anyPacketDifference wants a difference packets caused: a probe or
// counters.
func anyPacketDifference(ds []Difference) bool {
	for _, d := range ds {
		if d.Kind == DiffProbe || d.Kind == DiffCounters {
			return true
		}
	}
	return false
}

// try runs ruleset with probes and reports whether the difference shows.
func (r *reproducer) try(ruleset string, probes []Probe) (bool, error) {
	if r.runs >= r.budget {
		return false, nil
	}
	r.runs++
	res, err := r.s.Run(r.ctx, ruleset, &Corpus{Probes: probes}, RunOptions{})
	if err != nil {
		return false, err
	}
	if res.Lossy != "" || res.Rejected != "" {
		return false, nil
	}
	if r.want(res.Differences) {
		r.last = res
		return true, nil
	}
	return false, nil
}

// Shrink reduces ruleset and corpus c, on which difference d showed, to a
// minimal reproduction, within maxRuns runs (0: DefaultShrinkRuns). It
// returns nil when even the whole case no longer shows the difference
// (a flaky one).
func (s *Session) Shrink(ctx context.Context, ruleset string, c *Corpus, d Difference, maxRuns int) (*Repro, error) {
	if maxRuns <= 0 {
		maxRuns = DefaultShrinkRuns
	}
	r := &reproducer{s: s, ctx: ctx, budget: maxRuns, want: ofKind(d.Kind)}
	probes, err := r.shrinkProbes(ruleset, c, d)
	if err != nil || probes == nil {
		return nil, err
	}
	ruleset, err = r.shrinkRules(ruleset, probes)
	if err != nil {
		return nil, err
	}
	// The final state, shown by one more run.
	r.budget++
	ok, err := r.try(ruleset, probes)
	if err != nil {
		return nil, err
	}
	rep := &Repro{Ruleset: ruleset, Corpus: &Corpus{Probes: probes}, Runs: r.runs}
	if ok {
		rep.Differences = r.last.Differences
	}
	return rep, nil
}

// shrinkProbes finds the probes that keep the difference: the differing
// probe alone when it shows it alone, else halves of the corpus while one
// shows a difference. nil means the difference did not show again.
func (r *reproducer) shrinkProbes(ruleset string, c *Corpus, d Difference) ([]Probe, error) {
	switch d.Kind {
	case DiffRestore, DiffSave:
		// The ruleset alone shows it.
		if ok, err := r.try(ruleset, nil); err != nil || ok {
			return []Probe{}, err
		}
		return nil, nil
	case DiffProbe:
		one := []Probe{c.Probes[d.Probe]}
		if ok, err := r.try(ruleset, one); err != nil || ok {
			return one, err
		}
		// It needs company (a reassembly queue, say): look in halves for
		// any difference packets cause.
		r.want = anyPacketDifference
	}
	probes := c.Probes
	if ok, err := r.try(ruleset, probes); err != nil || !ok {
		return nil, err
	}
	return r.ddmin(ruleset, probes)
}

// ddmin reduces probes with delta debugging (Zeller's ddmin): it tries
// each of n chunks alone, then each complement, and refines n when
// neither keeps the difference, so differences that need several probes
// together (a route's MTU learnt from one, a packet too big for it in
// another) are reduced too.
func (r *reproducer) ddmin(ruleset string, probes []Probe) ([]Probe, error) {
	n := 2
	for len(probes) >= 2 && r.runs < r.budget {
		size := (len(probes) + n - 1) / n
		var chunks [][]Probe
		for i := 0; i < len(probes); i += size {
			chunks = append(chunks, probes[i:min(i+size, len(probes))])
		}
		reduced := false
		for _, ch := range chunks {
			ok, err := r.try(ruleset, ch)
			if err != nil {
				return nil, err
			}
			if ok {
				probes, n, reduced = ch, 2, true
				break
			}
		}
		if !reduced && len(chunks) > 2 {
			for i := range chunks {
				var rest []Probe
				for j, ch := range chunks {
					if j != i {
						rest = append(rest, ch...)
					}
				}
				ok, err := r.try(ruleset, rest)
				if err != nil {
					return nil, err
				}
				if ok {
					probes, n, reduced = rest, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(probes) {
				break
			}
			n = min(2*n, len(probes))
		}
	}
	return probes, nil
}

// ruleLine matches a rule line of restore text.
var ruleLine = regexp.MustCompile(`^-[AI] `)

// shrinkRules deletes rule lines while the difference persists: chunks of
// decreasing size, then single lines; then built-in policies become ACCEPT
// and unreferenced user chains go.
func (r *reproducer) shrinkRules(ruleset string, probes []Probe) (string, error) {
	lines := strings.Split(strings.TrimRight(ruleset, "\n"), "\n")
	var rules []int
	for i, l := range lines {
		if ruleLine.MatchString(l) {
			rules = append(rules, i)
		}
	}
	drop := map[int]bool{}
	text := func(extra map[int]bool) string {
		var b strings.Builder
		for i, l := range lines {
			if drop[i] || extra[i] {
				continue
			}
			b.WriteString(l)
			b.WriteByte('\n')
		}
		return b.String()
	}
	for size := len(rules) / 2; size >= 1; size /= 2 {
		for start := 0; start < len(rules); start += size {
			extra := map[int]bool{}
			for _, i := range rules[start:min(start+size, len(rules))] {
				if !drop[i] {
					extra[i] = true
				}
			}
			if len(extra) == 0 {
				continue
			}
			ok, err := r.try(text(extra), probes)
			if err != nil {
				return "", err
			}
			if ok {
				for i := range extra {
					drop[i] = true
				}
			}
		}
	}
	// Policies to ACCEPT, one at a time.
	policy := regexp.MustCompile(`^:(INPUT|FORWARD|OUTPUT) DROP `)
	for i, l := range lines {
		if drop[i] || !policy.MatchString(l) {
			continue
		}
		old := l
		lines[i] = strings.Replace(l, " DROP ", " ACCEPT ", 1)
		ok, err := r.try(text(nil), probes)
		if err != nil {
			return "", err
		}
		if !ok {
			lines[i] = old
		}
	}
	// User chains nothing refers to any more.
	out := text(nil)
	chainDecl := regexp.MustCompile(`^:(\S+) - `)
	for i, l := range lines {
		m := chainDecl.FindStringSubmatch(l)
		if m == nil || drop[i] {
			continue
		}
		used := false
		for j, other := range lines {
			if j == i || drop[j] {
				continue
			}
			f := strings.Fields(other)
			for k, w := range f {
				if w == m[1] && (k == 1 && f[0] == "-A" || k > 0 && (f[k-1] == "-j" || f[k-1] == "-g" || f[k-1] == "--jump" || f[k-1] == "--goto")) {
					used = true
				}
			}
		}
		if !used {
			drop[i] = true
		}
	}
	if t := text(nil); t != out {
		ok, err := r.try(t, probes)
		if err != nil {
			return "", err
		}
		if ok {
			out = t
		}
	}
	return out, nil
}

// FormatRepro describes a reproduction for the user: the rules, the
// packets, what each firewall did, and how to run it again.
func FormatRepro(rep *Repro) string {
	var b strings.Builder
	fmt.Fprintf(&b, "minimal reproduction (%d runs to find):\n  ruleset:\n", rep.Runs)
	for _, l := range strings.Split(strings.TrimRight(rep.Ruleset, "\n"), "\n") {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	if len(rep.Corpus.Probes) == 0 {
		b.WriteString("  packets: none needed\n")
	}
	for i, p := range rep.Corpus.Probes {
		fmt.Fprintf(&b, "  packet %d: %s\n    corpus line: %s\n", i+1, indent(p.String(), "    "), FormatProbe(p))
	}
	if len(rep.Differences) == 0 {
		b.WriteString("  (the difference did not show again on the last run)\n")
	}
	for _, d := range rep.Differences {
		fmt.Fprintf(&b, "  %s\n", indent(d.String(), "  "))
	}
	return b.String()
}

// indent indents every line after the first.
func indent(s, by string) string {
	return strings.ReplaceAll(s, "\n", "\n"+by)
}
