package difftest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Case is one ruleset and corpus to compare.
type Case struct {
	// Name identifies the case in reports ("random ipv4 seed 7", a file).
	Name string
	// Ruleset is iptables-restore text.
	Ruleset string
	// Corpus holds the probes.
	Corpus *Corpus
	// Rerun is the command that runs the case again (for reports).
	Rerun string
}

// Outcome is what checking a case found.
type Outcome struct {
	Case   Case
	Result *Result
	// Unconfirmed are differences of the first run that a second,
	// identical run did not show again (the kernel's own nondeterminism:
	// they are reported, not counted).
	Unconfirmed []Difference
	// RejectOnly is set when every difference is about REJECT: with each
	// REJECT replaced by DROP on both sides the firewalls agree. xfw's
	// REJECT replies are being finished (bpf/reject.h); docs/differences.md.
	RejectOnly bool
	// Known holds, when every difference of a RejectOnly outcome is one of
	// the documented differences of xfw's REJECT replies (known.go), the
	// explanation of each; it is nil otherwise.
	Known []string
	// FragmentsKnown is set when the differences are the documented ones
	// of fragments the kernel reassembles (known_frag.go), with those of
	// the case without them KNOWN or none: Known explains them all.
	FragmentsKnown bool
	// Held is, for the outcome of a case run without the fragment probes
	// the kernel reassembles (which still differs), how many were left
	// out.
	Held int
	// Unexplained is, for a RejectOnly outcome with no Known, the first
	// difference that is none of the documented ones.
	Unexplained *Difference
	// Twin is the run with REJECT replaced by DROP, when there was one.
	Twin *Result
	// Repro is the minimal reproduction of the first difference (when
	// shrinking was asked for and the difference showed again).
	Repro *Repro
	// ShrinkErr says why there is no Repro when reducing ran out of time.
	ShrinkErr error
}

// Failed reports whether the firewalls disagreed.
func (o *Outcome) Failed() bool { return len(o.Result.Differences) > 0 }

// OnlyKnown reports whether the firewalls disagreed only in the documented
// ways of xfw's REJECT replies and of fragments the kernel reassembles
// (docs/differences.md).
func (o *Outcome) OnlyKnown() bool {
	return o.Failed() && o.Known != nil && (o.RejectOnly || o.FragmentsKnown)
}

// maxListed bounds the differences a report lists in full.
const maxListed = 8

// diffKey identifies a difference across runs of the same case.
func diffKey(d Difference) string {
	return fmt.Sprintf("%s/%d/%s", d.Kind, d.Probe, d.Subject)
}

// rejectTarget matches a REJECT target with its options.
var rejectTarget = regexp.MustCompile(`(-j|--jump) REJECT( --reject-with \S+)?`)

// WithoutReject returns ruleset with every REJECT target replaced by DROP.
func WithoutReject(ruleset string) string {
	return rejectTarget.ReplaceAllString(ruleset, "-j DROP")
}

// confirmedRun runs ruleset and corpus, and when they differ, runs them
// again and keeps the differences both runs show (the others are returned
// apart: the kernel's own nondeterminism, such as an ICMP error it skips
// when its ICMP socket is busy).
func (s *Session) confirmedRun(ctx context.Context, ruleset string, c *Corpus) (*Result, []Difference, error) {
	res, err := s.Run(ctx, ruleset, c, RunOptions{})
	if err != nil || len(res.Differences) == 0 || res.Lossy != "" || res.Rejected != "" {
		return res, nil, err
	}
	again, err := s.Run(ctx, ruleset, c, RunOptions{})
	if err != nil || again.Lossy != "" {
		return res, nil, err
	}
	seen := map[string]bool{}
	for _, d := range again.Differences {
		seen[diffKey(d)] = true
	}
	var kept, gone []Difference
	for _, d := range res.Differences {
		if seen[diffKey(d)] {
			kept = append(kept, d)
		} else {
			gone = append(gone, d)
		}
	}
	res.Differences = kept
	return res, gone, nil
}

// CheckOptions say what Check does beyond comparing.
type CheckOptions struct {
	// Shrink reduces the first difference to a minimal reproduction.
	Shrink bool
	// ShrinkRejectOnly reduces it also when only REJECT differs.
	ShrinkRejectOnly bool
}

// Check runs a case. Differences are confirmed by a second run (those it
// does not show again are kept apart, as the kernel's own randomness); a
// ruleset with REJECT whose differences all vanish with REJECT replaced by
// DROP is marked RejectOnly, and its differences explained when they are
// the documented ones of xfw's REJECT replies (Known); a case whose
// ruleset makes the kernel reassemble fragments is checked again without
// the fragment probes that meet a documented difference of that
// (known_frag.go: FragmentsKnown when they explain it); as opts ask, the
// first remaining difference is reduced to a minimal reproduction (what
// differs without REJECT first).
func (s *Session) Check(ctx context.Context, c Case, opts CheckOptions) (*Outcome, error) {
	res, gone, err := s.confirmedRun(ctx, c.Ruleset, c.Corpus)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	o := &Outcome{Case: c, Result: res, Unconfirmed: gone}
	if len(res.Differences) == 0 {
		return o, nil
	}
	if held := heldProbes(c.Ruleset, c.Corpus, s.plan); len(held) > 0 {
		inner, err := s.checkWithoutHeld(ctx, c, opts, o, held)
		if err != nil || inner != nil {
			return inner, err
		}
	}
	return s.checkDifferent(ctx, c, opts, o)
}

// checkWithoutHeld checks case c, whose first run differed (o), again
// without the probes of held, fragments the kernel reassembles: it
// returns o marked FragmentsKnown when they explain what differed
// (known_frag.go), the outcome of the case without them when that one
// still differs in other ways, and nil when neither (c is then checked
// as a whole).
func (s *Session) checkWithoutHeld(ctx context.Context, c Case, opts CheckOptions, o *Outcome, held map[int]fragClass) (*Outcome, error) {
	ic := c
	ic.Name = fmt.Sprintf("%s, without the %d held probes (fragments the kernel reassembles, fw's own from link-local sources)", c.Name, len(held))
	var index []int
	ic.Corpus, index = withoutProbes(c.Corpus, held)
	inner, err := s.Check(ctx, ic, opts)
	if err != nil {
		return nil, err
	}
	outputSide := chainsReachedFrom(c.Ruleset, "OUTPUT")
	why, ok := explainFragments(o.Result.Differences, held, inner, index, outputSide)
	switch {
	case ok:
		o.Known, o.FragmentsKnown = append(why, inner.Known...), true
		return o, nil
	case inner.Failed() && !inner.OnlyKnown() || inner.Result.Lossy != "" || inner.Result.Rejected != "":
		inner.Held = len(held)
		return inner, nil
	}
	if d := unexplainedFragmentDiff(o.Result.Differences, held, inner, index, outputSide); d != nil {
		what := d.String()
		if d.Kind == DiffProbe && d.Probe >= 0 && d.Probe < len(c.Corpus.Probes) {
			what += "\n  probe: " + c.Corpus.Probes[d.Probe].String()
		}
		s.cfg.Logf("%s: not the documented differences of fragments the kernel reassembles: %s", c.Name, what)
	}
	return nil, nil
}

// checkDifferent goes on checking case c, whose first run differed (o):
// the twin without REJECT, the documented REJECT differences, and the
// reduction opts ask for.
func (s *Session) checkDifferent(ctx context.Context, c Case, opts CheckOptions, o *Outcome) (*Outcome, error) {
	res := o.Result
	var err error
	target := res.Differences[0]
	ruleset := c.Ruleset
	if twin := WithoutReject(c.Ruleset); twin != c.Ruleset {
		o.Twin, _, err = s.confirmedRun(ctx, twin, c.Corpus)
		if err != nil {
			return nil, fmt.Errorf("%s without REJECT: %w", c.Name, err)
		}
		o.RejectOnly = o.Twin.Lossy == "" && o.Twin.Rejected == "" && len(o.Twin.Differences) == 0
		if o.RejectOnly {
			o.Known, o.Unexplained = explainRejectOnly(res.Differences, c.Corpus, c.Ruleset, s.plan)
		}
		if !o.RejectOnly && len(o.Twin.Differences) > 0 {
			// Reduce what differs without REJECT: not REJECT's business.
			target, ruleset = o.Twin.Differences[0], twin
		}
	}
	if !opts.Shrink || o.OnlyKnown() && !opts.ShrinkRejectOnly {
		return o, nil
	}
	for _, d := range res.Differences {
		if ruleset == c.Ruleset && (d.Kind == DiffProbe || d.Kind == DiffRestore) {
			target = d
			break
		}
	}
	if ruleset != c.Ruleset {
		for _, d := range o.Twin.Differences {
			if d.Kind == DiffProbe {
				target = d
				break
			}
		}
	}
	rep, err := s.Shrink(ctx, ruleset, c.Corpus, target, 0)
	if err != nil {
		if ctx.Err() != nil {
			// Out of time: the differences are reported all the same.
			o.ShrinkErr = err
			return o, nil
		}
		return nil, fmt.Errorf("%s: shrink: %w", c.Name, err)
	}
	o.Repro = rep
	return o, nil
}

// Report describes the outcome: a summary line, and for a failure the
// differences, the minimal reproduction and how to run the case again.
func (o *Outcome) Report() string {
	var b strings.Builder
	r := o.Result
	switch {
	case r.Rejected != "":
		fmt.Fprintf(&b, "%s: both firewalls refused the ruleset (not compared):\n  %s\n", o.Case.Name, indent(r.Rejected, "  "))
		return b.String()
	case r.Lossy != "":
		fmt.Fprintf(&b, "%s: inconclusive, frames were lost: %s\n", o.Case.Name, r.Lossy)
		return b.String()
	case !o.Failed():
		fmt.Fprintf(&b, "%s: %d probes, same behaviour (observations: kernel %d, xfw %d)\n",
			o.Case.Name, r.Probes, r.Observed[0], r.Observed[1])
		for _, d := range o.Unconfirmed {
			fmt.Fprintf(&b, "  did not show again on a second run (not counted): %s\n", indent(d.String(), "  "))
		}
		return b.String()
	}
	counts := map[DiffKind]int{}
	for _, d := range r.Differences {
		counts[d.Kind]++
	}
	fmt.Fprintf(&b, "%s: %d probes, DIFFERENT: %d probes, %d counters, %d saved rules, %d loading\n",
		o.Case.Name, r.Probes, counts[DiffProbe], counts[DiffCounters], counts[DiffSave], counts[DiffRestore])
	switch {
	case o.OnlyKnown() && o.FragmentsKnown:
		b.WriteString("  KNOWN DIFFERENCES ONLY: without the held probes (fragments the kernel reassembles, fw's own from link-local sources), the same behaviour\n" +
			"  (or only KNOWN differences), and every difference is a documented one (docs/differences.md):\n")
		writeKnown(&b, o.Known)
	case o.OnlyKnown():
		b.WriteString("  KNOWN DIFFERENCES ONLY: with REJECT replaced by DROP on both sides, the same behaviour, and\n" +
			"  every difference is a documented one of xfw's REJECT replies (docs/differences.md):\n")
		writeKnown(&b, o.Known)
	case o.RejectOnly:
		b.WriteString("  only REJECT differs (with REJECT replaced by DROP on both sides, the same behaviour),\n" +
			"  but not only in the documented ways: xfw's REJECT replies are wrong, first:\n")
		if d := o.Unexplained; d != nil {
			fmt.Fprintf(&b, "    %s\n", indent(d.String(), "    "))
			if d.Kind == DiffProbe {
				p := o.Case.Corpus.Probes[d.Probe]
				fmt.Fprintf(&b, "      probe: %s\n      corpus line: %s\n", indent(p.String(), "      "), FormatProbe(p))
			}
		}
	case o.Twin != nil:
		fmt.Fprintf(&b, "  with REJECT replaced by DROP on both sides: still %d differences (reduced below), first:\n", len(o.Twin.Differences))
		for i, d := range o.Twin.Differences {
			if i == maxListed/2 {
				break
			}
			fmt.Fprintf(&b, "    %s\n", indent(d.String(), "    "))
			if d.Kind == DiffProbe {
				p := o.Case.Corpus.Probes[d.Probe]
				fmt.Fprintf(&b, "      probe: %s\n      corpus line: %s\n", indent(p.String(), "      "), FormatProbe(p))
			}
		}
	}
	if o.Held > 0 {
		fmt.Fprintf(&b, "  (%d held probes left out, fragments the kernel reassembles and fw's own from link-local sources: its probe numbers are of the corpus without them)\n", o.Held)
	}
	if len(o.Unconfirmed) > 0 {
		fmt.Fprintf(&b, "  (%d more did not show again on a second run: not counted)\n", len(o.Unconfirmed))
	}
	for i, d := range r.Differences {
		if i == maxListed {
			fmt.Fprintf(&b, "  … and %d more\n", len(r.Differences)-maxListed)
			break
		}
		fmt.Fprintf(&b, "  %s\n", indent(d.String(), "  "))
		if d.Kind == DiffProbe {
			p := o.Case.Corpus.Probes[d.Probe]
			fmt.Fprintf(&b, "    probe: %s\n    corpus line: %s\n", indent(p.String(), "    "), FormatProbe(p))
		}
	}
	if o.Repro != nil {
		b.WriteString(indent(FormatRepro(o.Repro), "  "))
	}
	if o.ShrinkErr != nil {
		fmt.Fprintf(&b, "  (no minimal reproduction: reducing stopped: %v)\n", o.ShrinkErr)
	}
	if o.Case.Rerun != "" {
		fmt.Fprintf(&b, "  run it again: %s\n", o.Case.Rerun)
	}
	return b.String()
}

// writeKnown writes the explanations of KNOWN differences, each once with
// how often it occurs, in the order first seen.
func writeKnown(b *strings.Builder, known []string) {
	seen := map[string]int{}
	var order []string
	for _, w := range known {
		if seen[w] == 0 {
			order = append(order, w)
		}
		seen[w]++
	}
	for _, w := range order {
		fmt.Fprintf(b, "    %d× %s\n", seen[w], w)
	}
}
