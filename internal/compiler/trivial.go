package compiler

// Trivial walks: the data plane's minimal path (docs/design.md, "Trivial
// walks"). A host whose chains hold no rule still pays, per packet, for
// the walk's set-up in the data plane: the classifier's call, its scratch,
// the policy lookups. When every entry a base chain's walk can reach
// matches every packet and only counts (a table's empty chain and its
// ACCEPT policy, in every table of the walk), the verdict is ACCEPT for
// every packet and the counters it bumps are known at compile time: the
// data plane then counts them and accepts without classifying.

// TrivialInfo says whether a base chain's walk is trivial and, if so,
// which counters it bumps (Generation.TrivialWalk).
type TrivialInfo struct {
	OK       bool
	Counters []uint32
}

// MaxTrivialCounters bounds the counters of a trivial walk (the data
// plane's XFW_TRIVIAL_CTRS): FORWARD's walk has 8 segments, nat's two
// among them (a nat segment needs connection tracking: never trivial).
const MaxTrivialCounters = 8

// TrivialWalk returns the counter indexes base chain h's walk bumps for
// every packet, in walk order, when the walk accepts every packet without
// classifying it (ok); Compile decides it (trivialWalk), the in-place
// changes keep it (a changed chain's walk is no longer trivial: its
// entries' conditions are not known in a generation read back from the
// data plane) and the data plane restores it with the generation.
func (g *Generation) TrivialWalk(h int) (counters []uint32, ok bool) {
	if h < 0 || h >= NumChains || !g.Trivial[h].OK {
		return nil, false
	}
	return g.Trivial[h].Counters, true
}

// trivialWalk decides TrivialWalk from the entries' conditions: a walk is
// trivial when the generation tracks no connection and every entry of the
// walk that can match is unconditional and either a counted
// CONTINUE to the next position (a policy ACCEPT of a table's chain, a
// rule without target) or an ACCEPT that ends the walk; a walk that
// reaches its end takes filter's policy, which must be ACCEPT (counter h).
// ok is false for any other walk, or one bumping more than
// MaxTrivialCounters counters.
func (g *Generation) trivialWalk(h int) (counters []uint32, ok bool) {
	if h < 0 || h >= NumChains || g.Active&(1<<FieldCt) != 0 {
		return nil, false
	}
	// Positions the data plane resumes a walk at belong to walks that
	// translate, route again or are judged in part before routing (raw
	// and mangle PREROUTING, rawpre.go, unless they only count): never
	// trivial. (PostStart only marks
	// where POSTROUTING begins, for packets nat OUTPUT routed again,
	// which the data plane never takes on the minimal path.)
	if g.Layout.NatResume[h] != 0 || g.Layout.Reroute[h] != 0 || (g.Layout.RawPre[h] != 0 && !g.Layout.PrePassive) {
		return nil, false
	}
	start, end := g.Walk(h)
	for i := start; i < end; i++ {
		if int(i) >= len(g.Entries) {
			return nil, false
		}
		e := &g.Entries[i]
		if neverMatches(e) {
			continue
		}
		if len(e.Cond) != 0 || e.Flags&^EFCount != 0 {
			return nil, false
		}
		if e.Flags&EFCount != 0 {
			if e.Rule == NoRule {
				return nil, false
			}
			counters = append(counters, e.Rule)
		}
		switch {
		case e.Action == ActAccept:
			return trivialResult(counters)
		case e.Action != ActContinue || e.Next != i+1:
			return nil, false
		}
	}
	// The walk's end: filter's policy decides, counted to counter h.
	if g.PolicyDrop[h] {
		return nil, false
	}
	return trivialResult(append(counters, uint32(h)))
}

// trivialResult is TrivialWalk's answer for a walk bumping counters.
func trivialResult(counters []uint32) ([]uint32, bool) {
	if len(counters) > MaxTrivialCounters {
		return nil, false
	}
	return counters, true
}

// decideTrivial sets g.Trivial from the entries (Compile).
func (g *Generation) decideTrivial() {
	for h := range g.Trivial {
		counters, ok := g.trivialWalk(h)
		g.Trivial[h] = TrivialInfo{OK: ok, Counters: counters}
	}
}

// changeTrivial keeps g.Trivial across an in-place change of base chain
// hook: that walk is no longer known to be trivial, and the counter
// indexes from `from` on move by delta in the others. hook < 0 is a
// change of a user chain's regions, which no trivial walk reaches (a
// CALL is not among a trivial walk's entries): only the indexes move.
//
// The leading drops (predrop.go) are forgotten: the walk they stand for
// may have changed, and their counters moved.
func (g *Generation) changeTrivial(hook int, from uint32, delta int) {
	g.preDrops = nil
	if hook >= 0 {
		g.Trivial[hook] = TrivialInfo{}
	}
	for h := range g.Trivial {
		for i, c := range g.Trivial[h].Counters {
			if c >= from {
				g.Trivial[h].Counters[i] = uint32(int(c) + delta)
			}
		}
	}
}
