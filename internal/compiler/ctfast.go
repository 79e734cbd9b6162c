package compiler

// The established fast path (bpf-iptables §4.4.2): most rulesets start a
// chain by accepting packets of known connections ("-m conntrack --ctstate
// ESTABLISHED,RELATED -j ACCEPT"). When a base chain's first rule that can
// match anything accepts by connection state alone, the data plane accepts
// packets in those states at once — counting that rule — without
// classifying them: the search would stop at that rule anyway.

// CtFastPath returns, for base chain h (ChainInput…), the entry of the
// chain's first live rule and the connection states (bit s for Cts* s)
// it accepts, when that rule is an ACCEPT whose only condition is on the
// connection state; ok is false otherwise.
func (g *Generation) CtFastPath(h int) (entry uint32, states uint8, ok bool) {
	// A walk through other tables first (or after) is no shortcut.
	if g.Active&(1<<FieldCt) == 0 || h < 0 || h >= NumChains || g.Walks() {
		return 0, 0, false
	}
	for i := g.ChainStart[h]; i < g.ChainEnd[h] && int(i) < len(g.Entries); i++ {
		e := &g.Entries[i]
		if neverMatches(e) {
			continue
		}
		if e.Rule == NoRule || e.Action != ActAccept || e.Flags&^EFCount != 0 {
			return 0, 0, false
		}
		for _, fs := range e.Cond {
			if fs.Field != FieldCt {
				return 0, 0, false
			}
		}
		states, ok := ctStatesOnly(e.Cond.Get(FieldCt))
		if !ok || states == 0 {
			return 0, 0, false
		}
		return i, states, true
	}
	return 0, 0, false
}

// neverMatches reports whether e can match no packet: a slack position
// (an empty set in some field) or a position DeleteRule emptied (a
// condition-less uncounted DROP that is in no class).
func neverMatches(e *Entry) bool {
	empty := true
	for _, fs := range e.Cond {
		if fs.Set.Empty() {
			return true
		}
		empty = false
	}
	return empty && e.Rule == NoRule && e.Action == ActDrop && e.Flags == 0
}

// ctStatesOnly returns the states of a FieldCt condition (kept in key
// order, where the state is the top bits) when membership depends on the
// state alone: each state's keys are all in the set or all out.
func ctStatesOnly(s *Set) (uint8, bool) {
	if s == nil {
		return 0, false
	}
	var states uint8
	for st := uint32(0); st <= uint32(CtsUntracked); st++ {
		lo, hi := st<<ctKeyStateShift, (st+1)<<ctKeyStateShift-1
		whole := Range(U64(uint64(lo)), U64(uint64(hi)))
		in := Intersect(s, whole)
		switch {
		case in.Empty():
		case len(in.Ivs) == 1 && in.Ivs[0] == whole.Ivs[0]:
			states |= 1 << st
		default:
			return 0, false
		}
	}
	return states, true
}
