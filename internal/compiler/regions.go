package compiler

import (
	"fmt"
	"slices"

	"github.com/xfw-dev/xfw/internal/ir"
)

// User chains as regions of the entry list.
//
// A user chain's rules are compiled once per view (below), not once per
// jump into it: the chain's *region* is its entries followed by a RETURN
// entry of universal condition. A jump or goto rule is a CALL entry (the
// rule's condition and counter): the walk pushes the position after it on
// a small call stack (XFW_MAX_CALLS, in the hook's per-CPU scratch) and
// searches from the region's first entry; the search cannot pass the
// region's RETURN, which every packet matches, and which pops the stack.
// RETURN rules and a region's end continue at that RETURN entry; a goto is
// a CALL followed by an entry of the goto rule's condition continuing at
// the caller's own RETURN (or the base chain's end), so that falling off
// the goto'd chain returns from the chain that went to it, as in the
// kernel. Regions are placed after every walk's entries.
//
// An ACCEPT in a region of a table's chain that other tables follow in
// the walk (a segment, tables.go) ends that chain only: an ActUnwind entry
// (counted) empties the call stack and resumes at the position the
// outermost CALL pushed, an ActExit entry (universal, uncounted) that
// sends an unwinding walk to the next table's chain and any other on to
// the next entry. A region thus names no position of its walk.
//
// A view is what the chain sees: the table's chain of the walk it is
// reached from (its conditions are rewritten for the segment), whether its
// ACCEPT unwinds, and the hook the kernel's checks use. Walks share a
// region where its entries are the same (regionKey): the PREROUTING
// chains of the INPUT and FORWARD walks unless a TTL match is reached,
// filter's user chains reached under the same checks, and nat PREROUTING
// and nat OUTPUT for a nat chain that flattens the same in both
// (natViewFree). Any other chain reached from several views has one
// region per view, so entries are linear in rules times views, whatever
// the jumps.

// viewCtx is the flattening context of a view (see above).
type viewCtx struct {
	rs *ir.Ruleset
	// walk is the walk's base chain, check the hook the kernel's checks
	// use (checkHook); seg the segment (nil: filter's own chain, no
	// rewrite).
	walk, check int
	seg         *tableChain
	// acceptTo is where ACCEPT continues (nil: ACCEPT is a verdict).
	acceptTo *label
	logView  uint8
	// natPrerouting, natPostrouting, natOutput, natInput: the segment is
	// nat's (natEntry).
	natPrerouting, natPostrouting, natOutput, natInput bool
}

// Slack. In a ruleset of the filter table alone, a region has slack
// (Layout.Regions): RegionSlack never-matching positions before its rules'
// entries, where its CALLs start their search, and as many after them,
// before its RETURN entry, so that a rule inserted at the head of its
// chain, appended to it or deleted from it (fail2ban's bans and unbans:
// `iptables -I f2b-sshd 1 …`, `-D`) changes the running generation in
// place (InsertRuleInChain, AppendRuleInChain, DeleteRuleInChain), as
// for a base chain. A slack position is in no class: the search passes
// it. With other tables, whose segments and unwinding ACCEPTs the
// in-place changes do not follow into regions, or past maxSlackRegions,
// regions have none and a change of their chain compiles in full.

// RegionSlack is the number of never-matching positions before and after
// a region's rules (Layout.Regions).
const RegionSlack = 16

// maxSlackRegions bounds the regions with slack (the first ones emitted,
// filter's): each costs 2*RegionSlack entries.
const maxSlackRegions = 256

// emitSlack emits n never-matching positions.
func (fl *flattener) emitSlack(n int) {
	for i := 0; i < n && len(fl.entries) < MaxEntries; i++ {
		fl.emit(Entry{Cond: neverList, Rule: NoRule, Action: ActDrop})
	}
}

// regionKey names one region: a chain in a view.
type regionKey struct {
	walk, check int
	seg         tableChain
	// unwinds: ACCEPT continues with the walk's next table (ActUnwind)
	// rather than ending it.
	unwinds bool
	chain   *ir.Chain
}

// pendingRegion is a region to emit: its chain, view and start label,
// and the chain's chainState (found when the region was queued: a map
// lookup per region saved while emitting).
type pendingRegion struct {
	chain *ir.Chain
	view  viewCtx
	start *label
	state *chainState
}

// regionSpan is an emitted region's range of entries [start, end), end
// past its RETURN entry.
type regionSpan struct {
	start, end uint32
}

// sharedWalk is regionKey.walk of a region every walk shares.
const sharedWalk = -1

// regionKey returns the key of chain c's region in view v. Walks share it
// (their PREROUTING or POSTROUTING segments, filter's user chains reached
// from their chains under the same checks): the entries are the same,
// but for a TTL condition in FORWARD's PREROUTING (segmentView).
func (fl *flattener) regionKey(v *viewCtx, c *ir.Chain, st *chainState) regionKey {
	k := regionKey{walk: sharedWalk, check: v.check, unwinds: v.acceptTo != nil, chain: c}
	if v.seg != nil {
		k.seg = *v.seg
		if shareNatViews && k.unwinds && v.seg.table == ir.TableNat &&
			(v.seg.chain == ir.ChainPrerouting || v.seg.chain == ir.ChainOutput) && fl.natViewFree(c, st) {
			// No TTL match either (natViewFree): the walks share it.
			k.seg, k.check = natSharedSeg, sharedCheck
			return k
		}
		if v.seg.chain == ir.ChainPrerouting && v.walk == ChainForward && fl.reachesTTLOf(c, st) {
			k.walk = v.walk
		}
	}
	return k
}

// natSharedSeg and sharedCheck are regionKey.seg and .check of a nat
// chain's region that the nat PREROUTING and nat OUTPUT views share
// (natViewFree).
var natSharedSeg = tableChain{table: ir.TableNat, chain: ir.ChainPrerouting + "+" + ir.ChainOutput}

const sharedCheck = -1

// shareNatViews enables natViewFree's sharing; tests turn it off to
// compare the walks with those of a region per view.
var shareNatViews = true

// natViewFree reports whether chain c of the nat table, and every chain
// it reaches, flattens to the same entries in the nat PREROUTING and the
// nat OUTPUT views, so that one region serves both (kube-proxy's
// KUBE-SERVICES, KUBE-SVC-*, KUBE-SEP-*, KUBE-MARK-MASQ: half the entries
// of flattening each per view). The views differ in the output device
// (PREROUTING has none: segmentView pins -o), the LOG view bits, the
// hook the kernel's checks use (checkHook, the recent probe's FORWARD
// bit), REDIRECT's address and IPv6 NAT; a rule is view-free when it
// touches none of those: no -i or -o, only matches whose entries and
// probes do not depend on the hook (viewFreeMatch), and a target among
// the jumps, RETURN, ACCEPT, DROP, none, MARK and an IPv4 DNAT both
// contexts accept (checkNatRule). The counters are the rules' own
// whichever view reaches them, as the kernel counts a user chain's rule
// once per pass whichever base chain reached it. Memoised in st (the
// chain graph has no loops: checkNesting ran first).
func (fl *flattener) natViewFree(c *ir.Chain, st *chainState) bool {
	if st.natShare != 0 {
		return st.natShare == ttlYes
	}
	st.natShare = ttlNo
	infos := st.infos
	for i, r := range c.Rules {
		if !fl.viewFreeAt(infos, c, i, r) {
			return false
		}
		if r.Target.Jumps() {
			t, tst := fl.jumpStateOf(infos, c, i, r)
			if t == nil || t.Builtin || !fl.natViewFree(t, tst) {
				return false
			}
		}
	}
	// Nothing it reaches has a TTL match or target (viewFreeRule):
	// reachesTTLOf need not walk it again.
	st.natShare, st.ttl = ttlYes, ttlNo
	return true
}

// ruleInfo.viewFree values.
const (
	viewFreeUnknown = iota
	viewFreeNo
	viewFreeYes
)

// viewFreeAt is viewFreeRule of rule i (r) of chain c: from its ruleInfo
// when c's are indexed (infos) and it is known (precomputeTerms).
func (fl *flattener) viewFreeAt(infos []*ruleInfo, c *ir.Chain, i int, r *ir.Rule) bool {
	if len(infos) == len(c.Rules) && infos[i].viewFree != viewFreeUnknown {
		return infos[i].viewFree == viewFreeYes
	}
	return viewFreeRule(fl.rs.Family, r)
}

// viewFreeRule reports whether rule r of the nat table (of family fam)
// flattens to the same entries in the nat PREROUTING and OUTPUT views,
// leaving its jumps aside (natViewFree).
func viewFreeRule(fam ir.Family, r *ir.Rule) bool {
	if r.InIface.Set || r.OutIface.Set {
		return false
	}
	for _, m := range r.Matches {
		if !viewFreeMatch(m) {
			return false
		}
	}
	switch r.Target.Kind {
	case ir.TargetJump, ir.TargetGoto, ir.TargetReturn, ir.TargetAccept, ir.TargetDrop,
		ir.TargetNone, ir.TargetMark:
		return true
	case ir.TargetDNAT:
		return fam == ir.IPv4 &&
			checkNatRule(fam, natContext{prerouting: true}, r) == nil &&
			checkNatRule(fam, natContext{output: true}, r) == nil
	}
	return false
}

// viewFreeMatch reports whether match m's entries and probes are the same
// whichever hook reaches its rule: its conditions are on fields the walk
// reads alike in every hook and no segment rewrites, its probe (if any)
// takes no hook.
func viewFreeMatch(m ir.Match) bool {
	switch m := m.(type) {
	case *ir.CommentMatch, *ir.TCPMatch, *ir.UDPMatch, *ir.MultiportMatch, *ir.ICMPMatch,
		*ir.IPRangeMatch, *ir.StatisticMatch, *ir.MarkMatch:
		return true
	case *ir.AddrTypeMatch:
		return !m.LimitIn && !m.LimitOut
	}
	return false
}

// chainState is what flattening memoises per user chain: its regions by
// view and whether it reaches a TTL match. One map lookup per jump finds
// it (a kube-proxy ruleset has about 230,000 jumps, each met in two views).
type chainState struct {
	// infos are the ruleInfos of the chain's rules, in order
	// (precomputeTerms; nil for a chain it did not index: infoAt looks
	// them up).
	infos   []*ruleInfo
	regions []regionSlot
	// ttl: 0 not known yet, ttlNo or ttlYes (reachesTTLOf).
	ttl uint8
	// nesting: 0 not known yet, nestingOnPath while height computes it,
	// nestingKnown once height is.
	nesting uint8
	height  int
	// natShare: 0 not known yet, ttlNo or ttlYes (natViewFree).
	natShare uint8
}

// regionSlot is one region of a chain: its view's key and start label.
type regionSlot struct {
	key   regionKey
	start *label
}

// chainState.ttl values.
const (
	ttlNo = 1 + iota
	ttlYes
)

// chainState.nesting values.
const (
	nestingOnPath = 1 + iota
	nestingKnown
)

// chainNamed returns the chain of the table being flattened (fl.rs)
// called name, or nil, from an index of the table's chains built on first
// use: lookups by name (ir.Ruleset.Chain) are shared by every caller and
// cost several times a map's.
func (fl *flattener) chainNamed(name string) *ir.Chain {
	return fl.chainIndexOf(fl.rs)[name]
}

// chainIndexOf returns table t's index of its chains by name, built on
// first use.
func (fl *flattener) chainIndexOf(t *ir.Ruleset) map[string]*ir.Chain {
	byName, ok := fl.chainIndex[t]
	if !ok {
		byName = make(map[string]*ir.Chain, len(t.Chains))
		for _, c := range t.Chains {
			if _, dup := byName[c.Name]; !dup {
				byName[c.Name] = c
			}
		}
		if fl.chainIndex == nil {
			fl.chainIndex = map[*ir.Ruleset]map[string]*ir.Chain{}
		}
		fl.chainIndex[t] = byName
	}
	return byName
}

// jumpOf returns the chain that rule i (r) of chain c, a jump or goto,
// names in the table being flattened: resolved ahead (resolveJump) when
// c's ruleInfos are indexed (infos), looked up by name otherwise.
func (fl *flattener) jumpOf(infos []*ruleInfo, c *ir.Chain, i int, r *ir.Rule) *ir.Chain {
	if len(infos) == len(c.Rules) && infos[i].jumpResolved {
		return infos[i].jump
	}
	return fl.chainNamed(r.Target.Chain)
}

// jumpStateOf is jumpOf with the chain's chainState (nil with a nil
// chain): found ahead (ruleInfo.jumpState) or by stateOf.
func (fl *flattener) jumpStateOf(infos []*ruleInfo, c *ir.Chain, i int, r *ir.Rule) (*ir.Chain, *chainState) {
	if len(infos) == len(c.Rules) && infos[i].jumpResolved {
		if inf := infos[i]; inf.jumpState != nil {
			return inf.jump, inf.jumpState
		}
	}
	t := fl.jumpOf(infos, c, i, r)
	if t == nil {
		return nil, nil
	}
	return t, fl.stateOf(t)
}

// stateOf returns chain c's chainState, a new one on first use.
func (fl *flattener) stateOf(c *ir.Chain) *chainState {
	if st, ok := fl.chainStates[c]; ok {
		return st
	}
	if fl.chainStates == nil {
		fl.chainStates = map[*ir.Chain]*chainState{}
	}
	st := &chainState{}
	fl.chainStates[c] = st
	return st
}

// reachesTTLOf reports whether a rule of chain c (whose chainState is
// st) or of a chain it reaches has a TTL (hop limit) match or a TTL or HL
// target; memoised (the chain graph has no loops: checkNesting ran
// first).
func (fl *flattener) reachesTTLOf(c *ir.Chain, st *chainState) bool {
	if st.ttl != 0 {
		return st.ttl == ttlYes
	}
	st.ttl = ttlNo
	infos := st.infos
	for i, r := range c.Rules {
		for _, m := range r.Matches {
			if _, ok := m.(*ir.TTLMatch); ok {
				st.ttl = ttlYes
				return true
			}
		}
		if r.Target.Kind == ir.TargetTTL || r.Target.Kind == ir.TargetHL {
			// Its rewrite depends on the view too (ManglePreDec).
			st.ttl = ttlYes
			return true
		}
		if r.Target.Jumps() {
			if t, tst := fl.jumpStateOf(infos, c, i, r); t != nil && fl.reachesTTLOf(t, tst) {
				st.ttl = ttlYes
				return true
			}
		}
	}
	return false
}

// regionOf returns the start label of target's region in the current
// view, queueing the region when it is new; st is target's chainState.
func (fl *flattener) regionOf(target *ir.Chain, st *chainState) *label {
	k := fl.regionKey(&fl.view, target, st)
	for i := range st.regions {
		if st.regions[i].key == k {
			return st.regions[i].start
		}
	}
	l := &label{}
	st.regions = append(st.regions, regionSlot{key: k, start: l})
	if len(fl.pending) == cap(fl.pending) {
		// Twice the size: append grows a large slice by a quarter,
		// which allocated 42 MB for kube-proxy's 110,000 regions
		// (7 MB of queue).
		fl.pending = slices.Grow(fl.pending, max(cap(fl.pending), 64))
	}
	fl.pending = append(fl.pending, pendingRegion{chain: target, view: fl.view, start: l, state: st})
	return l
}

// emitRegions emits the queued regions (and those their CALLs queue).
func (fl *flattener) emitRegions() error {
	savedRS, savedAccept, savedView := fl.rs, fl.acceptTo, fl.logView
	defer func() {
		fl.rs, fl.acceptTo, fl.logView = savedRS, savedAccept, savedView
		fl.natPrerouting, fl.natPostrouting, fl.natOutput, fl.natInput, fl.inRegion = false, false, false, false, false
	}()
	// The queue is read by index and emptied once done (regionOf grows
	// it; taking its head off by reslicing would drop the room it grew).
	defer func() { fl.pending = nil }()
	filterRegionsFirst(fl.pending)
	for head := 0; head < len(fl.pending); head++ {
		pr := fl.pending[head]
		if len(fl.entries) > MaxEntries {
			return fmt.Errorf("ruleset too large: more than %d entries after compiling user chains (limit of %d chunks of %d rules)", MaxEntries, MaxChunks, ChunkBits)
		}
		v := pr.view
		fl.view, fl.inRegion = v, true
		fl.rs, fl.acceptTo, fl.logView = v.rs, v.acceptTo, v.logView
		fl.natPrerouting, fl.natPostrouting, fl.natOutput, fl.natInput = v.natPrerouting, v.natPostrouting, v.natOutput, v.natInput
		slack := fl.regionSlack && v.seg == nil && len(fl.layout.Regions) < maxSlackRegions
		regionStart := uint32(len(fl.entries))
		pr.start.pos, pr.start.resolved = regionStart, true
		if slack {
			fl.emitSlack(RegionSlack)
		}
		first := uint32(len(fl.entries))
		ret := &label{}
		if err := fl.block(pr.chain, pr.state, Cond{}, ret, v.check); err != nil {
			if v.seg != nil {
				return fmt.Errorf("table %s: %w", v.seg.table, err)
			}
			return err
		}
		end := uint32(len(fl.entries))
		if slack {
			fl.emitSlack(RegionSlack)
		}
		ret.pos, ret.resolved = uint32(len(fl.entries)), true
		if slack {
			fl.layout.Regions = append(fl.layout.Regions, RegionLayout{Chain: pr.chain.Name, Check: v.check,
				SlackStart: regionStart, Start: first, End: end, Return: ret.pos})
		}
		fl.emit(Entry{Rule: NoRule, Action: ActReturn})
		if v.seg != nil {
			for i := first; i < uint32(len(fl.entries))-1; i++ {
				e := &fl.entries[i]
				cond := e.Cond.Full()
				before := cond
				if segmentView(&cond, v.walk, *v.seg, v.seg.table == ir.TableRaw && hasNotrack(v.rs)) {
					if cond != before {
						// Rewritten; most conditions are not
						// (lists are shared, never changed).
						e.Cond = fl.slab.list(cond)
					}
				} else {
					e.Cond = neverList
				}
			}
		}
		fl.spans = append(fl.spans, regionSpan{start: regionStart, end: uint32(len(fl.entries))})
	}
	return nil
}

// filterRegionsFirst orders the regions the walks queued so that filter's
// own (view without a segment) come first, right after the walks'
// entries, in the order they were queued; the other tables' follow in
// theirs. A later packet of a connection walks filter's chains but none
// of nat's: with nat's regions first, kube-proxy's KUBE-FORWARD region
// sat past nat's KUBE-SERVICES (one entry per service), in another chunk
// than the FORWARD walk from 4K services on, and every later packet
// entered that chunk and came back (each an AND of every field's chunk).
func filterRegionsFirst(pending []pendingRegion) {
	slices.SortStableFunc(pending, func(a, b pendingRegion) int {
		fa, fb := a.view.seg == nil, b.view.seg == nil
		switch {
		case fa == fb:
			return 0
		case fa:
			return -1
		}
		return 1
	})
}

// jumpTarget returns the chain that rule i (r, whose ruleInfo is inf) of
// chain jumps or goes to, its nesting checked (checkNesting), and its
// chainState; memoised in inf, since a rule is flattened once per view of
// its chain (a kube-proxy ruleset has about 230,000 jumps, each met in two
// views: the memo spares two map lookups per jump and view).
func (fl *flattener) jumpTarget(chain *ir.Chain, i int, r *ir.Rule, inf *ruleInfo) (*ir.Chain, *chainState, error) {
	if inf.target != nil {
		return inf.target, inf.targetState, nil
	}
	target, st := inf.jump, inf.jumpState
	if !inf.jumpResolved {
		target = fl.chainNamed(r.Target.Chain)
	}
	if target == nil || target.Builtin {
		return nil, nil, fmt.Errorf("chain %s rule %d: jump to unknown chain %q", chain.Name, i+1, r.Target.Chain)
	}
	if st == nil || !inf.jumpResolved {
		st = fl.stateOf(target)
	}
	if err := fl.checkNesting(target, st); err != nil {
		return nil, nil, err
	}
	inf.target, inf.targetState = target, st
	return target, st, nil
}

// checkNesting refuses a jump to chain c (from the chain being flattened)
// when c is part of a loop or its jumps nest deeper than maxDepth: the
// walk's call stack holds maxDepth positions.
func (fl *flattener) checkNesting(c *ir.Chain, st *chainState) error {
	fl.nestPath = fl.nestPath[:0]
	h, err := fl.height(c, st)
	if err != nil {
		return err
	}
	if h >= maxDepth {
		return fmt.Errorf("chain %s: jumps nest deeper than %d levels", c.Name, maxDepth)
	}
	return nil
}

// height returns the longest chain of jumps and gotos from c (0: none),
// memoised; fl.nestPath are the chains on the way to c (a loop is
// refused), one stack for the whole search rather than a path allocated
// per chain.
func (fl *flattener) height(c *ir.Chain, st *chainState) (int, error) {
	switch st.nesting {
	case nestingOnPath:
		return 0, fmt.Errorf("chain %s: jump loop (%v → %s)", c.Name, fl.nestPath, c.Name)
	case nestingKnown:
		return st.height, nil
	}
	st.nesting = nestingOnPath
	fl.nestPath = append(fl.nestPath, c.Name)
	defer func() { fl.nestPath = fl.nestPath[:len(fl.nestPath)-1] }()
	h := 0
	infos := st.infos
	for i, r := range c.Rules {
		if !r.Target.Jumps() {
			continue
		}
		t, tst := fl.jumpStateOf(infos, c, i, r)
		if t == nil || t.Builtin {
			return 0, fmt.Errorf("chain %s rule %d: jump to unknown chain %q", c.Name, i+1, r.Target.Chain)
		}
		th, err := fl.height(t, tst)
		if err != nil {
			return 0, err
		}
		if th+1 > maxDepth {
			return 0, fmt.Errorf("chain %s: jumps nest deeper than %d levels", t.Name, maxDepth)
		}
		h = max(h, th+1)
	}
	st.nesting, st.height = nestingKnown, h
	return h, nil
}

// MaxCalls is the depth of the walk's call stack (XFW_MAX_CALLS): a
// CALL beyond it hotdrops (the compiler refuses deeper nesting, maxDepth).
const MaxCalls = maxDepth

// maxLoopIters is bpf_loop's largest number of iterations (1 << 23).
const maxLoopIters = 1 << 23

// iterBound returns a bound on the search steps of any walk (the
// bpf_loop bound, Generation.MaxIters): the base walk's (a step per
// word and chunk of the list, per non-terminal entry, one more) plus, per
// CALL entry a walk can meet, the steps of the region it enters: its
// words twice (skipped to, then examined), its chunks, its entries and the
// RETURN's step, and so on for the CALLs in it.
func (fl *flattener) iterBound(numChunks uint32, walkStart, walkEnd [NumChains]uint32) (uint32, error) {
	base := uint64(numChunks)*(ChunkWords+1) + uint64(fl.hops) + 1
	if len(fl.spans) == 0 {
		return uint32(min(base, maxLoopIters)), nil
	}
	byStart := make(map[uint32]int, len(fl.spans))
	for i, sp := range fl.spans {
		byStart[sp.start] = i
	}
	total := make([]uint64, len(fl.spans)) // 0: not computed
	var regionCost func(i int) uint64
	regionCost = func(i int) uint64 {
		if total[i] != 0 {
			return total[i]
		}
		sp := fl.spans[i]
		n := uint64(sp.end - sp.start)
		words := n/64 + 2
		chunks := n/ChunkBits + 2
		cost := 2*words + chunks + n + 2
		for p := sp.start; p < sp.end && cost < maxLoopIters; p++ {
			if e := &fl.entries[p]; e.Action == ActCall {
				cost += regionCost(byStart[e.Next])
			}
		}
		total[i] = min(cost, maxLoopIters)
		return total[i]
	}
	var bound uint64
	for hook := 0; hook < NumChains; hook++ {
		b := base
		for p := walkStart[hook]; p < walkEnd[hook] && b < maxLoopIters; p++ {
			if e := &fl.entries[p]; e.Action == ActCall {
				b += regionCost(byStart[e.Next])
			}
		}
		bound = max(bound, b)
	}
	if bound >= maxLoopIters {
		return 0, fmt.Errorf("ruleset too large: a packet's walk through its user chains could take more than %d search steps", maxLoopIters)
	}
	return uint32(bound), nil
}

// entriesEstimate guesses the entries rs compiles to, the capacity the
// entry list starts with (growing a list of large entries by copying
// was a fifth of a big ruleset's compile time; emit doubles it when the
// guess is low): per rule an entry and a probe, per chain a RETURN, in
// each walk, but once for INPUT's, FORWARD's and OUTPUT's, which only
// their own walk has (three times as many made 9.6 of a 100K-rule
// FORWARD chain's compile's 14 MB of entries, unused), and for the nat table's, whose user chains' regions
// the views share where they can (natViewFree: kube-proxy's, 530,000 of
// its 533,000 entries at 10K services, where three times as many made
// 48 MB of entries the collector scanned and nothing used); and the
// slack; at most the data plane's limit.
func entriesEstimate(rs *ir.Ruleset) int {
	n := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		views := NumChains
		if t.Table == ir.TableNat {
			views = 1
		}
		for _, c := range t.Chains {
			k := 1 + len(c.Rules)
			for _, r := range c.Rules {
				if hasProbedMatch(r) {
					k++
				}
			}
			if ir.IsBuiltinChain(c.Name) {
				n += k // INPUT, FORWARD, OUTPUT: in their own walk only
				continue
			}
			n += k * views
		}
	}
	return min(n+2*NumChains*AppendSlack+1, MaxEntries+1)
}

// regionsEstimate is the first capacity of the flattener's region queue:
// a region per user chain and walk, one for a nat chain (natViewFree).
func regionsEstimate(rs *ir.Ruleset) int {
	n := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		views := NumChains
		if t.Table == ir.TableNat {
			views = 1 // natViewFree: kube-proxy's chains, one region each
		}
		for _, c := range t.Chains {
			if !ir.IsBuiltinChain(c.Name) {
				n += views
			}
		}
	}
	return n
}
