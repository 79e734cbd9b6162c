package compiler

// Leading address drops: the data plane's short path for a flood
// (docs/benchmarks.md, "Flood drop: where xfw's time goes"). When the
// PREROUTING chains judged before routing (Layout.RawPre) begin with rules
// that only match one address field against one range and DROP, such as
// `-t raw -A PREROUTING -s 10.100.0.0/16 -j DROP`, a packet they drop
// needs no classification: the data plane compares its address with each
// range in order and, at the first that holds it, counts that rule and
// drops, as the walk would have. A packet none of them holds is walked as
// before, from the chain's start (the leading rules match it nowhere, so
// they count nothing twice).

// PreDrop is one of those leading rules: the packet's Field (FieldSrc or
// FieldDst) in [Lo, Hi] drops it, counted to counter Rule.
type PreDrop struct {
	Field  Field
	Lo, Hi U128
	Rule   uint32
}

// MaxPreDrops bounds the leading drops the data plane compares (its
// XFW_PREDROP_MAX): a flood's few blocked networks; longer lists are the
// classifier's (or a set's) to search.
const MaxPreDrops = 4

// PreDrops returns the leading drops of the generation's walk before
// routing (nil when it has none); Compile decides them (decidePreDrops),
// an in-place change forgets them (changeTrivial) and the data plane
// restores them with the generation.
func (g *Generation) PreDrops() []PreDrop { return g.preDrops }

// SetPreDrops sets the leading drops of a generation read back from the
// data plane, which wrote them from PreDrops.
func (g *Generation) SetPreDrops(d []PreDrop) { g.preDrops = d }

// decidePreDrops sets g.preDrops from the INPUT walk's first entries up to
// the end of its PREROUTING segments judged before routing (the data
// plane walks that range for every packet before routing, whichever chain
// routing picks after): each must be a counted DROP whose only condition
// is one interval of one address field. It stops at the first entry that
// is not (entries that can match no packet are passed over, as the walk
// does) or at MaxPreDrops. (When some set match counts packets the data
// plane walks all the same: the walk's end counts them.)
func (g *Generation) decidePreDrops() {
	g.preDrops = nil
	end := g.Layout.RawPre[ChainInput]
	if end == 0 || g.Layout.PrePassive {
		return
	}
	start, _ := g.Walk(ChainInput)
	var out []PreDrop
	for i := start; i+1 < end && int(i) < len(g.Entries) && len(out) < MaxPreDrops; i++ {
		e := &g.Entries[i]
		if neverMatches(e) {
			continue
		}
		d, ok := preDropOf(e)
		if !ok {
			break
		}
		out = append(out, d)
	}
	g.preDrops = out
}

// preDropOf returns e as a leading drop, if it is one.
func preDropOf(e *Entry) (PreDrop, bool) {
	if e.Action != ActDrop || e.Flags != EFCount || e.Rule == NoRule || len(e.Cond) != 1 {
		return PreDrop{}, false
	}
	fs := e.Cond[0]
	if (fs.Field != FieldSrc && fs.Field != FieldDst) || fs.Set == nil || len(fs.Set.Ivs) != 1 {
		return PreDrop{}, false
	}
	iv := fs.Set.Ivs[0]
	return PreDrop{Field: fs.Field, Lo: iv.Lo, Hi: iv.Hi, Rule: e.Rule}, true
}
