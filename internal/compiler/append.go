package compiler

import (
	"fmt"
	"slices"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/prefault"
)

// Appending one rule to a compiled generation, without compiling the
// ruleset again: `iptables -A CHAIN …` on a base chain, the call scripts
// make thousands of times.
//
// Compile leaves AppendSlack never-matching positions after each base
// chain's entries (Layout.SlackEnd), in no class of any field. The appended
// rule takes the first of them, p = ChainEnd[h], so no other entry moves:
// its bit p is added to the classes of the values its condition covers,
// field by field (all of a field's classes where it has no condition). A
// class whose references all want p gets it where it is, keeping its
// number; one whose references disagree is split, the larger side
// keeping the number (keepclass.go). Base-chain RETURNs, which continued at the old end, now continue
// after p; the counter indexes after the new rule's shift by one, as
// Compile numbers them (chain order).
//
// AppendRule returns ErrNotAppendable when the rule or the generation is
// outside what this handles (no slack left, a set or probed match, a rule
// that is not one plain term with a verdict, a field the generation does
// not classify, an interface or MAC condition, too many classes to copy);
// the caller then compiles the whole ruleset, which also renews the slack.
// A limit probe refused a token continues at the position after its rule,
// the old end for the chain's last rule: an appended rule is its next.

// ErrNotAppendable says AppendRule cannot add the rule in place.
var ErrNotAppendable = fmt.Errorf("rule cannot be appended in place")

// maxAppendClasses bounds the classes one append may copy (each copies a
// chunk of 520 bytes): a rule matching values of many classes (e.g. any
// source address when thousands are named) is compiled in full instead.
const maxAppendClasses = 512

// AppendRule returns g with rule r appended to base chain hook. counter is
// the rule's counter index in the new ruleset (NumChains + its position in
// chain order, as Compile numbers them) and ref its RuleRef. Interfaces
// must be the ones g was compiled for. AppendRule changes g's arrays in
// place (writing them is most of the work an append saves): g must not be
// used afterwards, also when it returns an error.
func AppendRule(g *Generation, r *ir.Rule, hook int, counter uint32, ref RuleRef, ifaces []Interface) (*Generation, error) {
	return addRule(g, r, hook, counter, ref, ifaces, false)
}

// InsertRule returns g with rule r inserted at the head of base chain hook
// (iptables -I CHAIN [1]), in the slack before the chain's entries; counter
// (the chain's first counter index) and ref as for AppendRule, and, like
// it, InsertRule changes g in place (g must not be used afterwards).
func InsertRule(g *Generation, r *ir.Rule, hook int, counter uint32, ref RuleRef, ifaces []Interface) (*Generation, error) {
	return addRule(g, r, hook, counter, ref, ifaces, true)
}

// AppendRuleInChain is AppendRule for a user chain: r goes into the tail
// slack of each of chain's regions (Layout.Regions). It refuses a chain
// without regions with slack (not reached from a base chain, with other
// tables, a ruleset compiled before regions had slack) and, besides what
// AppendRule refuses, jumps and gotos; RETURN continues at the region's
// RETURN entry. Like AppendRule it changes g in place.
func AppendRuleInChain(g *Generation, r *ir.Rule, chain string, counter uint32, ref RuleRef, ifaces []Interface) (*Generation, error) {
	spans, err := g.regionSpans(chain)
	if err != nil {
		return nil, err
	}
	return g.addRuleAt(r, spans, counter, ref, ifaces, false)
}

// InsertRuleInChain is InsertRule for a user chain: r goes into the head
// slack of each of chain's regions, as AppendRuleInChain.
func InsertRuleInChain(g *Generation, r *ir.Rule, chain string, counter uint32, ref RuleRef, ifaces []Interface) (*Generation, error) {
	spans, err := g.regionSpans(chain)
	if err != nil {
		return nil, err
	}
	return g.addRuleAt(r, spans, counter, ref, ifaces, true)
}

// chainSpan is where an in-place change puts or finds a chain's entries:
// base chain hook's (region < 0) or region's (Layout.Regions; hook < 0).
type chainSpan struct {
	hook, region int
	// check is the hook the kernel's checks use.
	check int
	// slackStart, start, end, slackEnd: the head slack, the rules'
	// entries, the tail slack (to slackEnd).
	slackStart, start, end, slackEnd uint32
}

// baseSpan returns base chain hook's span.
func (g *Generation) baseSpan(hook int) chainSpan {
	return chainSpan{hook: hook, region: -1, check: hook, slackStart: g.Layout.SlackStart[hook],
		start: g.ChainStart[hook], end: g.ChainEnd[hook], slackEnd: g.Layout.SlackEnd[hook]}
}

// regionSpans returns the spans of chain's regions with slack.
func (g *Generation) regionSpans(chain string) ([]chainSpan, error) {
	if g.Walks() {
		return nil, fmt.Errorf("%w: regions in a walk of other tables", ErrNotAppendable)
	}
	var spans []chainSpan
	for i, rl := range g.Layout.Regions {
		if rl.Chain == chain {
			if rl.SlackStart > rl.Start || rl.Start > rl.End || rl.End > rl.Return || int(rl.Return) >= len(g.Entries) {
				return nil, fmt.Errorf("%w: region %d of chain %s out of order", ErrNotAppendable, i, chain)
			}
			spans = append(spans, chainSpan{hook: -1, region: i, check: rl.Check,
				slackStart: rl.SlackStart, start: rl.Start, end: rl.End, slackEnd: rl.Return})
		}
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("%w: chain %s has no region with slack", ErrNotAppendable, chain)
	}
	return spans, nil
}

// setSpan records sp's new start and end.
func (g *Generation) setSpan(sp chainSpan, start, end uint32) {
	if sp.region >= 0 {
		g.Layout.Regions[sp.region].Start, g.Layout.Regions[sp.region].End = start, end
		return
	}
	g.ChainStart[sp.hook], g.ChainEnd[sp.hook] = start, end
}

// addRule is AppendRule (at the chain's end) and InsertRule (atHead).
func addRule(g *Generation, r *ir.Rule, hook int, counter uint32, ref RuleRef, ifaces []Interface, atHead bool) (*Generation, error) {
	if hook < 0 || hook >= NumChains {
		return nil, fmt.Errorf("%w: hook %d", ErrNotAppendable, hook)
	}
	return g.addRuleAt(r, []chainSpan{g.baseSpan(hook)}, counter, ref, ifaces, atHead)
}

// addRuleAt puts rule r at the end (or atHead, the head) of each of spans,
// one base chain's or one user chain's regions.
func (g *Generation) addRuleAt(r *ir.Rule, spans []chainSpan, counter uint32, ref RuleRef, ifaces []Interface, atHead bool) (*Generation, error) {
	acceptTo := make([]uint32, len(spans))
	for i, sp := range spans {
		if sp.hook < 0 {
			continue // no walk of other tables (regionSpans)
		}
		var err error
		if acceptTo[i], err = g.walkAcceptTo(sp.hook); err != nil {
			return nil, err
		}
	}
	if g.Walks() && hasCtReplMatch(r) {
		// With NAT a compile splits the match (natReplRewrite).
		return nil, fmt.Errorf("%w: --ctreplsrc or --ctrepldst in a walk", ErrNotAppendable)
	}
	if counter < NumChains || int(counter-NumChains) > len(g.Rules) {
		return nil, fmt.Errorf("%w: counter index %d out of range", ErrNotAppendable, counter)
	}
	if hasSetMatch(r) || hasProbedMatch(r) {
		return nil, fmt.Errorf("%w: set or probed match", ErrNotAppendable)
	}
	for _, sp := range spans {
		if checkHook(r, sp.check) != nil {
			return nil, fmt.Errorf("%w: hook", ErrNotAppendable)
		}
	}
	terms, err := ruleTerms(g.Family, r, ifaces, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAppendable, err)
	}
	for _, sp := range spans {
		if atHead && sp.start < sp.slackStart+uint32(len(terms)) ||
			!atHead && (int(sp.end)+len(terms) > int(sp.slackEnd) || int(sp.slackEnd) > len(g.Entries)) {
			return nil, fmt.Errorf("%w: no slack left", ErrNotAppendable)
		}
	}
	for _, t := range terms {
		if t.counted || t.after {
			return nil, fmt.Errorf("%w: a match that hotdrops returning true", ErrNotAppendable)
		}
		if g.NoShortPorts && (!shortUniform(t.cond[FieldSport]) || !shortUniform(t.cond[FieldDport])) {
			return nil, fmt.Errorf("%w: the port fields have no cut-short part", ErrNotAppendable)
		}
		for f := Field(0); f < NumFields; f++ {
			switch s := t.cond[f]; {
			case s == nil:
			case g.Active&(1<<uint(f)) == 0:
				return nil, fmt.Errorf("%w: field %s not classified", ErrNotAppendable, f)
			case f == FieldMAC:
				// A MAC address no rule named yet has no hash entry.
				return nil, fmt.Errorf("%w: field %s hashed", ErrNotAppendable, f)
			}
		}
	}

	out := g // g is the caller's to give up: no copies of its arrays
	out.Rules = slices.Insert(g.Rules, int(counter-NumChains), ref)
	if atHead {
		// The chain's other rules move down one place.
		for i := range out.Rules {
			if rr := &out.Rules[i]; i != int(counter-NumChains) && rr.Table == ref.Table && rr.Chain == ref.Chain && rr.Index >= ref.Index {
				rr.Index++
			}
		}
	}
	for i := range out.Entries {
		if e := &out.Entries[i]; e.Rule != NoRule && e.Rule >= counter {
			e.Rule++
		}
	}
	out.shiftLimitRules(counter, 1)
	out.changeTrivial(spans[0].hook, counter, 1)
	out.reserveClasses(len(terms) * len(spans))
	classes := 0
	for si, sp := range spans {
		start := sp.end
		if atHead {
			start = sp.start - uint32(len(terms))
		}
		for i, t := range terms {
			p := start + uint32(i)
			n, err := out.place(p, t.cond, true)
			if err != nil {
				return nil, err
			}
			if classes += n; classes > maxAppendClasses {
				return nil, fmt.Errorf("%w: more than %d classes", ErrNotAppendable, maxAppendClasses)
			}
			if t.hotdrop {
				out.Entries[p] = Entry{Rule: NoRule, Action: ActDrop}
				continue
			}
			e := Entry{Rule: counter, Flags: EFCount | t.flags}
			if err := out.addedVerdict(&e, r.Target, sp, acceptTo[si], p); err != nil {
				return nil, err
			}
			out.Entries[p] = e
		}
		if atHead {
			out.setSpan(sp, start, sp.end)
			continue
		}
		end := start + uint32(len(terms))
		if sp.hook >= 0 {
			for _, i := range g.Layout.EndRefs[sp.hook] {
				out.Entries[i].Next = end
			}
			if out.Layout.WalkEnd[sp.hook] != 0 && out.Layout.WalkEnd[sp.hook] == out.ChainEnd[sp.hook] {
				// No table's chain follows filter's in this walk:
				// it ends with filter's chain (walkAfter).
				out.Layout.WalkEnd[sp.hook] = end
			}
		}
		out.setSpan(sp, sp.start, end)
	}
	return out, nil
}

// addedVerdict completes entry e, at position p of span sp, of an added
// rule with target t; acceptTo is walkAcceptTo's for a base chain.
func (g *Generation) addedVerdict(e *Entry, t ir.Target, sp chainSpan, acceptTo, p uint32) error {
	if t.Kind == ir.TargetReturn && sp.region >= 0 {
		// Continues at the region's RETURN entry, past its tail slack.
		e.Action, e.Next = ActContinue, sp.slackEnd
		g.MaxIters++
		return nil
	}
	ok, err := verdictEntry(e, t, g.logConfig)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotAppendable, err)
	}
	if !ok {
		return fmt.Errorf("%w: target", ErrNotAppendable)
	}
	switch {
	case e.Action == ActAccept && acceptTo != 0:
		// ACCEPT ends filter's chain only: the walk goes on with the
		// tables after it (walkAfter).
		e.Action, e.Next = ActContinue, acceptTo
		g.MaxIters++
	case e.Action == ActContinue:
		// Counts (and logs), then goes on with the next entry.
		e.Next = p + 1
		g.MaxIters++ // one more CONTINUE a packet may meet
	}
	return nil
}

// walkAcceptTo returns where an ACCEPT of filter's base chain hook
// continues when the generation walks other tables' chains after it: the
// position after filter's policy entry, which follows the chain's slack
// (walkAfter); 0 when ACCEPT is the verdict (no walk, or no table's chain
// after filter's in this one).
func (g *Generation) walkAcceptTo(hook int) (uint32, error) {
	walkEnd := g.Layout.WalkEnd[hook]
	if walkEnd == 0 || walkEnd == g.ChainEnd[hook] {
		return 0, nil
	}
	policy := g.Layout.SlackEnd[hook]
	if int(policy) >= len(g.Entries) || policy+1 >= walkEnd {
		return 0, fmt.Errorf("%w: walk without filter's policy entry", ErrNotAppendable)
	}
	if e := g.Entries[policy]; e.Rule != uint32(hook) || e.Flags != EFCount {
		return 0, fmt.Errorf("%w: walk without filter's policy entry", ErrNotAppendable)
	}
	return policy + 1, nil
}

// hasCtReplMatch reports whether r has a conntrack match with
// --ctreplsrc or --ctrepldst (natReplRewrite).
func hasCtReplMatch(r *ir.Rule) bool {
	return slices.ContainsFunc(r.Matches, hasCtReplAddr)
}

// logConfig returns the index of LOG options lc in g.LogConfigs, adding
// them when new (as the flattener numbers them).
func (g *Generation) logConfig(lc LogConfig) uint16 {
	if i := slices.Index(g.LogConfigs, lc); i >= 0 {
		return uint16(i)
	}
	g.LogConfigs = append(g.LogConfigs, lc)
	return uint16(len(g.LogConfigs) - 1)
}

// boundsRewrite writes the address fields' bounds, changed or not, into
// one new array for place.
type boundsRewrite struct {
	g                 *Generation
	oldBounds         []Bound
	oldBase, oldCount [NumAddrFields]uint32
	bounds            []Bound
	nextAddr          int // the first address field not in bounds yet
}

func newBoundsRewrite(g *Generation, cond Cond) *boundsRewrite {
	extra := 0
	for f := Field(0); f < NumFields; f++ {
		if s := cond[f]; f.Kind() == KindAddr && s != nil {
			extra += 2 * len(s.Ivs)
		}
	}
	bounds := make([]Bound, 0, len(g.Bounds)+extra)
	prefault.Slice(bounds[:cap(bounds)])
	return &boundsRewrite{g: g, oldBounds: g.Bounds, oldBase: g.AddrBase, oldCount: g.AddrCount, bounds: bounds}
}

// oldAddr returns address field a's bounds before the rewrite.
func (br *boundsRewrite) oldAddr(a int) []Bound {
	return br.oldBounds[br.oldBase[a] : br.oldBase[a]+br.oldCount[a]]
}

// copyAddr copies the bounds of the address fields before upTo unchanged.
func (br *boundsRewrite) copyAddr(upTo int) {
	for ; br.nextAddr < upTo; br.nextAddr++ {
		br.g.AddrBase[br.nextAddr] = uint32(len(br.bounds))
		br.bounds = append(br.bounds, br.oldAddr(br.nextAddr)...)
	}
}

// place writes address field f's bounds with p placed by s.
func (br *boundsRewrite) place(f Field, s *Set, setBit func(c uint32, want bool) uint32) error {
	a := f.AddrIndex()
	if a < br.nextAddr {
		return fmt.Errorf("%w: address field %s out of order", ErrNotAppendable, f)
	}
	br.copyAddr(a)
	start := len(br.bounds)
	br.bounds = appendSetBounds(br.bounds, br.oldAddr(a), s, setBit)
	br.g.AddrBase[a], br.g.AddrCount[a] = uint32(start), uint32(len(br.bounds)-start)
	br.nextAddr = a + 1
	if len(br.bounds)-start > MaxBounds {
		return fmt.Errorf("%w: too many bounds", ErrNotAppendable)
	}
	return nil
}

// finish copies the remaining address fields and installs the new array.
func (br *boundsRewrite) finish() {
	br.copyAddr(NumAddrFields)
	br.g.Bounds = br.bounds
}

// appendSetBounds appends to out the bounds of an address field with each
// interval's class replaced by set(class, whether s holds the interval's
// values); the intervals are split at s's ends first (s nil: every value).
func appendSetBounds(out, bounds []Bound, s *Set, set func(c uint32, want bool) uint32) []Bound {
	start := len(out)
	forSetPieces(bounds, s, func(v U128, class uint32, want bool) {
		c := set(class, want)
		if n := len(out); n > start && out[n-1].Class == c {
			return
		}
		out = append(out, Bound{Value: v, Class: c})
	})
	return out
}

// forSetPieces calls fn for the pieces of an address field's intervals
// (bounds) split at s's ends (s nil: every value), in order: where each
// starts, its class and whether s holds its values. Bounds and s's ends
// are both in ascending order: one merge, no search or sort.
func forSetPieces(bounds []Bound, s *Set, fn func(v U128, class uint32, want bool)) {
	// Cut points of s: where its intervals start, and just after they end.
	var cuts []U128
	if s != nil {
		cuts = make([]U128, 0, 2*len(s.Ivs))
		for _, iv := range s.Ivs {
			cuts = append(cuts, iv.Lo)
			if iv.Hi != maxU128 {
				cuts = append(cuts, iv.Hi.Inc())
			}
		}
		if !slices.IsSortedFunc(cuts, U128.Cmp) {
			// A normalised set's ends ascend; be safe with any other.
			slices.SortFunc(cuts, U128.Cmp)
		}
		cuts = slices.Compact(cuts)
	}
	class := uint32(0) // the class of the values below the first bound
	iv := 0            // the first interval of s not below the current value
	for i, j := 0, 0; i < len(bounds) || j < len(cuts); {
		var v U128
		if j == len(cuts) || i < len(bounds) && !cuts[j].Less(bounds[i].Value) {
			v, class = bounds[i].Value, bounds[i].Class
			if j < len(cuts) && cuts[j] == v {
				j++
			}
			i++
		} else {
			v = cuts[j] // inside the interval of the last bound: its class
			j++
		}
		want := true
		if s != nil {
			for iv < len(s.Ivs) && s.Ivs[iv].Hi.Less(v) {
				iv++
			}
			want = iv < len(s.Ivs) && !v.Less(s.Ivs[iv].Lo)
		}
		fn(v, class, want)
	}
}

// maxDeadEntries bounds the positions DeleteRule leaves dead in one base
// chain before the ruleset is compiled in full again.
const maxDeadEntries = 64

// DeleteRule returns g without rule r of base chain hook (iptables -D),
// done in place: r's entries leave every class (their positions become
// dead, like slack, but stay where they are) and the counter indexes after
// r's shift down by one. counter is r's counter index in g. It refuses
// (ErrNotAppendable) rules whose entries it cannot find alone — jumps and
// gotos (their target's entries are inlined after them) — and when too
// many classes would be copied or
// the chain has maxDeadEntries dead positions already. Like AppendRule it
// changes g in place: g must not be used afterwards, also on error.
func DeleteRule(g *Generation, r *ir.Rule, hook int, counter uint32, ifaces []Interface) (*Generation, error) {
	if hook < 0 || hook >= NumChains {
		return nil, fmt.Errorf("%w: hook %d", ErrNotAppendable, hook)
	}
	return g.deleteRuleAt(r, []chainSpan{g.baseSpan(hook)}, counter, ifaces)
}

// DeleteRuleInChain is DeleteRule for a user chain: r's entries leave
// each of chain's regions with slack (AppendRuleInChain). It refuses to
// leave a region without any rule's entry: a compile makes a jump to a
// chain without rules a counted CONTINUE, without a region (emptyJump).
func DeleteRuleInChain(g *Generation, r *ir.Rule, chain string, counter uint32, ifaces []Interface) (*Generation, error) {
	spans, err := g.regionSpans(chain)
	if err != nil {
		return nil, err
	}
	for _, sp := range spans {
		others := false
		for i := sp.start; i < sp.end && !others; i++ {
			others = g.Entries[i].Rule != NoRule && g.Entries[i].Rule != counter
		}
		if !others {
			return nil, fmt.Errorf("%w: chain %s would have no entries left", ErrNotAppendable, chain)
		}
	}
	return g.deleteRuleAt(r, spans, counter, ifaces)
}

// dead returns the dead positions of span sp.
func (g *Generation) dead(sp chainSpan) *uint32 {
	if sp.region >= 0 {
		return &g.Layout.Regions[sp.region].Dead
	}
	return &g.Layout.Dead[sp.hook]
}

// deleteRuleAt takes rule r's entries out of each of spans.
func (g *Generation) deleteRuleAt(r *ir.Rule, spans []chainSpan, counter uint32, ifaces []Interface) (*Generation, error) {
	if g.Walks() && hasCtReplMatch(r) {
		return nil, fmt.Errorf("%w: --ctreplsrc or --ctrepldst in a walk", ErrNotAppendable)
	}
	if counter < NumChains || int(counter-NumChains) >= len(g.Rules) {
		return nil, fmt.Errorf("%w: counter index %d out of range", ErrNotAppendable, counter)
	}
	switch r.Target.Kind {
	case ir.TargetJump, ir.TargetGoto, ir.TargetConnmark:
		// (CONNMARK's entries carry the tracking condition, not its terms.)
		return nil, fmt.Errorf("%w: target", ErrNotAppendable)
	}
	if hasSetMatch(r) || hasProbedMatch(r) {
		return nil, fmt.Errorf("%w: set or probed match", ErrNotAppendable)
	}
	terms, err := ruleTerms(g.Family, r, ifaces, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotAppendable, err)
	}
	// The flattener emitted, in a row, an entry per term that can match:
	// hotdrop terms first (no rule), then the rule's own.
	hot, own := 0, 0
	for _, t := range terms {
		if _, ok := (Cond{}).and(t.cond); !ok {
			continue
		}
		if t.counted || t.after {
			return nil, fmt.Errorf("%w: a match that hotdrops returning true", ErrNotAppendable)
		}
		if t.hotdrop {
			hot++
		} else {
			own++
		}
	}
	found := make([][]uint32, len(spans))
	for si, sp := range spans {
		positions, err := g.rulePositions(sp, counter, hot, own)
		if err != nil {
			return nil, err
		}
		if *g.dead(sp)+uint32(len(positions)) > maxDeadEntries {
			return nil, fmt.Errorf("%w: %d dead entries already", ErrNotAppendable, *g.dead(sp))
		}
		found[si] = positions
	}
	var none Cond
	for f := range none {
		none[f] = &Set{}
	}
	classes := 0
	for si, sp := range spans {
		for _, p := range found[si] {
			n, err := g.place(p, none, false)
			if err != nil {
				return nil, err
			}
			if classes += n; classes > maxAppendClasses {
				return nil, fmt.Errorf("%w: more than %d classes", ErrNotAppendable, maxAppendClasses)
			}
			g.Entries[p] = Entry{Rule: NoRule, Action: ActDrop}
		}
		*g.dead(sp) += uint32(len(found[si]))
	}
	for i := range g.Entries {
		if e := &g.Entries[i]; e.Rule != NoRule && e.Rule > counter {
			e.Rule--
		}
	}
	g.shiftLimitRules(counter+1, -1)
	g.changeTrivial(spans[0].hook, counter+1, -1)
	gone := g.Rules[counter-NumChains]
	g.Rules = slices.Delete(g.Rules, int(counter-NumChains), int(counter-NumChains)+1)
	for i := range g.Rules {
		if ref := &g.Rules[i]; ref.Table == gone.Table && ref.Chain == gone.Chain && ref.Index > gone.Index {
			ref.Index--
		}
	}
	return g, nil
}

// rulePositions returns the positions of the entries of the rule counted
// at counter in span sp: own entries of its own in a row, after hot
// hotdrop entries.
func (g *Generation) rulePositions(sp chainSpan, counter uint32, hot, own int) ([]uint32, error) {
	var positions []uint32
	for i := sp.start; i < sp.end; i++ {
		if g.Entries[i].Rule == counter {
			positions = append(positions, i)
		}
	}
	if len(positions) != own || own > 0 && positions[own-1]-positions[0] != uint32(own-1) || own == 0 && hot > 0 {
		return nil, fmt.Errorf("%w: %d entries for %d terms", ErrNotAppendable, len(positions), own)
	}
	if own > 0 && positions[0] < sp.start+uint32(hot) {
		return nil, fmt.Errorf("%w: hotdrop entries not found", ErrNotAppendable)
	}
	if own > 0 {
		first := positions[0]
		for i := first - uint32(hot); i < first; i++ {
			if e := g.Entries[i]; e.Rule != NoRule || e.Action != ActDrop || e.Flags != 0 {
				return nil, fmt.Errorf("%w: hotdrop entries not found", ErrNotAppendable)
			}
			positions = append(positions, i)
		}
	}
	return positions, nil
}
