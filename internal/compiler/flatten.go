package compiler

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Entry is one flattened entry: the data plane's struct xfw_entry plus the
// condition the bit vectors encode.
type Entry struct {
	Cond   CondList
	Rule   uint32 // counter index or NoRule
	Action Action
	Flags  uint8
	Aux    uint16 // reject type or LOG config index
	Next   uint32 // ActContinue: where the search goes on
	// nextLabel is resolved into Next once the label's position is known.
	nextLabel *label
}

// label is a position in the flattened list that may not be known yet.
type label struct {
	pos      uint32
	resolved bool
}

// LogConfig is one distinct set of LOG target options.
type LogConfig struct {
	Prefix string
	Level  uint8
	Flags  uint8
	// NFLogGroup and NFLogLen are an NFLOG rule's group and the bytes of
	// the packet its events carry (Flags has ir.LogFlagNFLog; 0 for LOG).
	NFLogGroup uint16
	NFLogLen   uint32
}

// RuleRef names the rule behind a counter index.
type RuleRef struct {
	// Table is the rule's table, "" for filter.
	Table string
	Chain string
	Index int // 0-based position in the chain; PolicyIndex: its policy
}

// flattener turns the chain graph into per-base-chain entry lists.
type flattener struct {
	rs      *ir.Ruleset
	ifaces  []Interface
	entries []Entry
	// slab holds the entries' conditions (CondList).
	slab condSlab
	// prefixBuilder builds the probes' prefix terms (prefixTerms).
	prefixBuilder termBuilder
	// info is what flattening needs of each rule (ruleInfo).
	info map[*ir.Rule]*ruleInfo
	// layout records the slack and end references (Generation.Layout).
	layout Layout
	// natIdle is set when rs's nat table sees no packet, nothing asking
	// the kernel to track connections: the walks leave it out (ctpull.go).
	natIdle  bool
	logIndex map[LogConfig]uint16
	logs     []LogConfig
	// sets allocates the set conditions (FieldSets bits).
	sets *setConds
	// counts says which set matches update set entry counters
	// (Options.SetCounts).
	counts func(m *ir.SetMatch) bool
	// maxHops counts the non-terminal entries, a bound on the actions a
	// packet can meet on its way through one chain.
	hops uint32
	// limits, recents and hashLimits are the limit matches' buckets,
	// the recent and the hashlimit matches (limitIndex, recentIndex,
	// hashLimitIndex).
	limits     matchIndex[Limit]
	recents    matchIndex[Recent]
	hashLimits matchIndex[HashLimit]
	// probeList are the generation's probes, probeIDs their indexes
	// (probeIndex).
	probeList []Probe
	// setWrites are the sets SET targets write (settarget.go).
	setWrites []string
	probeIDs  map[Probe]uint16
	// policyID are the counter indexes of the other tables' policies;
	// walkStart and walkEnd the walks' bounds (Generation.WalkStart);
	// acceptTo, when set, is where ACCEPT continues (the next table of
	// the walk); logView the LOG view bits of the segment being
	// flattened (tables.go).
	policyID           map[RuleRef]uint32
	walkStart, walkEnd [NumChains]uint32
	acceptTo           *label
	logView            uint8
	// unreached are the chains checkUnreached has checked, per hook.
	unreached map[unreachedKey]bool
	// preds are the generation's predicates, predIDs their indexes
	// (predIndex).
	preds   []Pred
	predIDs map[predKey]uint32
	// connlimits numbers the connlimit matches (connlimitIndex),
	// ctExpires the --ctexpire options (ctExpireIndex).
	connlimits matchIndex[struct{}]
	ctExpires  matchIndex[CtExpire]
	// statistics numbers the statistic matches' instances (mark.go).
	statistics matchIndex[StatisticInst]
	// natPrerouting is set while the walk's nat PREROUTING segment is
	// flattened (DNAT may be used there); natResume are the walks'
	// resume positions after it (Layout.NatResume).
	natPrerouting, natPostrouting bool
	// natOutput is set while the walk's nat OUTPUT segment is flattened
	// (nat_output.go).
	natOutput bool
	// natInput is set while the walk's nat INPUT segment is flattened
	// (SNAT there: bpf/nat_in.h).
	natInput  bool
	natResume [NumChains]uint32
	// natGate is the position of the last nat segment's gate, the
	// entry that skips the segment for a packet that is not its
	// connection's first (segment).
	natGate uint32
	// postStart are the walks' first POSTROUTING positions
	// (Layout.PostStart).
	postStart [NumChains]uint32
	// reroute are the positions where the walks' packets are routed
	// again with their mark (Layout.Reroute, mark_route.go).
	reroute [NumChains]uint32
	// rawPre are the positions after the walks' raw PREROUTING segments
	// the data plane judges before routing (Layout.RawPre, rawpre.go).
	rawPre [NumChains]uint32
	// preEnd are the positions after the walks' PREROUTING segments
	// (Layout.PreEnd).
	preEnd [NumChains]uint32
	// preOpen: the segments of the walk being emitted so far are all
	// judged before the route lookup (rawpre.go).
	preOpen bool
	// prePassive: the segments judged before the route lookup so far
	// only count (Layout.PrePassive).
	prePassive [NumChains]bool
	// view is what the chain being flattened sees (regions.go); inRegion
	// is set while a user chain's region is emitted. chainStates hold
	// what is memoised per user chain (its regions by view, its nesting:
	// chainState), pending the regions not emitted yet, spans the
	// emitted ones.
	view        viewCtx
	inRegion    bool
	chainStates map[*ir.Chain]*chainState
	pending     []pendingRegion
	spans       []regionSpan
	// chainIndex indexes each table's chains by name (chainNamed).
	chainIndex map[*ir.Ruleset]map[string]*ir.Chain
	// jumps are the jumps' targets resolved ahead (resolveJumps; nil:
	// none), read by precomputeTerms.
	jumps *jumpIndex
	// nestPath are the chains on height's way (checkNesting).
	nestPath []string
	// numbered are the rules' ruleInfos in the order numberRules met
	// them (ForEachCounter's, policies left out), numberedRules the
	// rules; numberedDup: a rule was met twice. info is filled from them
	// when first asked (ruleInfo, infoFilled): a lookup by rule is the
	// exception (limits, nth statistics, rules met twice), and filling a
	// map of kube-proxy's 330,000 rules was a tenth of a second of the
	// serial compile.
	numbered      []*ruleInfo
	numberedRules []*ir.Rule
	numberedDup   bool
	infoFilled    bool
	// regionSlack: filter's regions get slack (regions.go, "Slack").
	regionSlack bool
}

// maxDepth bounds nested jumps and gotos (the walk's call stack,
// XFW_MAX_CALLS); iptables refuses loops, a chain nesting deeper than this
// is refused.
const maxDepth = 64

func (fl *flattener) emit(e Entry) {
	if len(fl.entries) == cap(fl.entries) {
		// Twice the size, where append grows a large slice by a
		// quarter: entriesEstimate may guess low (a nat chain with a
		// region per view), and each growth copies every entry.
		fl.entries = slices.Grow(fl.entries, max(cap(fl.entries), 1024))
	}
	fl.entries = append(fl.entries, e)
	if e.Action == ActContinue || e.Action == ActCall || e.Action == ActReturn || e.Action == ActUnwind || e.Action == ActExit {
		fl.hops++
	}
}

// block emits the rules of chain under the outer condition; RETURN and
// falling off its end continue at ret (the base chain's end, or the
// region's RETURN entry). A jump or goto is a CALL of the target chain's
// region (regions.go). st is chain's chainState, nil to look it up.
func (fl *flattener) block(chain *ir.Chain, st *chainState, outer Cond, ret *label, hook int) error {
	if st == nil {
		st = fl.stateOf(chain)
	}
	infos := st.infos
	universal := outer == (Cond{})
	for i, r := range chain.Rules {
		if len(fl.entries) > MaxEntries {
			return fmt.Errorf("ruleset too large: more than %d entries after flattening user chains (limit of %d chunks of %d rules)", MaxEntries, MaxChunks, ChunkBits)
		}
		inf := fl.infoAt(infos, chain, i, r)
		if inf.hookBound == hookBoundUnknown {
			inf.hookBound = hookBoundNo
			if hookBound(r) {
				inf.hookBound = hookBoundYes
			}
		}
		if inf.hookBound == hookBoundYes {
			if err := checkHook(r, hook); err != nil {
				return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
			}
		}
		terms, err := fl.termsOf(inf, r)
		if err != nil {
			return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
		}
		past, err := fl.probes(inf, r, outer, hook)
		if err != nil {
			return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
		}
		id := inf.id
		emitted := false
		for ti := range terms {
			t := &terms[ti]
			cond, ok := fl.termList(t, outer, universal)
			if !ok {
				continue // can never match here
			}
			emitted = true
			if t.hotdrop {
				fl.emit(Entry{Cond: cond, Rule: NoRule, Action: ActDrop})
				continue
			}
			base := Entry{Cond: cond, Rule: id, Flags: EFCount | t.flags}
			if t.counted && !countedRuns(r.Target.Kind) {
				// Counted, then dropped: the verdict, a jump or a
				// translation is not taken (ipt_do_table's walk
				// ends on the hotdrop).
				base.Action = ActDrop
				fl.emit(base)
				continue
			}
			switch r.Target.Kind {
			case ir.TargetReturn:
				base.Action = ActContinue
				base.nextLabel = ret
				fl.emit(base)
			case ir.TargetMark:
				if err := fl.markAction(&base, r.Target.Mark); err != nil {
					return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
				}
				fl.emit(base)
				fl.fallthroughNext()
			case ir.TargetConnmark:
				if err := fl.connmarkAction(&base, r.Target.Connmark); err != nil {
					return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
				}
				fl.emit(base)
				fl.fallthroughNext()
			case ir.TargetSet:
				if err := fl.setAction(&base, r.Target.Set); err != nil {
					return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
				}
				fl.emit(base)
				fl.fallthroughNext()
			case ir.TargetTCPMSS, ir.TargetDSCP, ir.TargetTOS, ir.TargetTTL, ir.TargetHL,
				ir.TargetCTNotrack, ir.TargetNotrack:
				if err := fl.mangleAction(&base, r.Target); err != nil {
					return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
				}
				fl.emit(base)
				fl.fallthroughNext()
			case ir.TargetJump, ir.TargetGoto:
				target, st, err := fl.jumpTarget(chain, i, r, inf)
				if err != nil {
					return err
				}
				if len(target.Rules) == 0 {
					fl.emptyJump(base, r.Target.Kind == ir.TargetGoto, ret)
					continue
				}
				base.Action, base.nextLabel = ActCall, fl.regionOf(target, st)
				exit := !fl.inRegion && fl.acceptTo != nil
				if exit {
					base.Aux = CallExitNext
				}
				fl.emit(base)
				if exit {
					// Where an ACCEPT in the region (ActUnwind)
					// leaves the table's chain.
					fl.emit(Entry{Rule: NoRule, Action: ActExit, nextLabel: fl.acceptTo})
				}
				if r.Target.Kind == ir.TargetGoto {
					// The CALL returns here: falling off (or RETURN
					// from) the goto'd chain returns from this one.
					fl.emit(Entry{Cond: cond, Rule: NoRule, Action: ActContinue, nextLabel: ret})
				}
			case ir.TargetDNAT, ir.TargetRedirect, ir.TargetSNAT, ir.TargetMasquerade:
				if err := fl.natEntry(&base, r); err != nil {
					return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
				}
				fl.emit(base)
			default:
				ok, err := verdictEntry(&base, r.Target, fl.logConfig)
				if err != nil {
					return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
				}
				if !ok {
					return fmt.Errorf("chain %s rule %d: unsupported target", chain.Name, i+1)
				}
				if base.Action == ActAccept && fl.acceptTo != nil {
					// ACCEPT ends this table's chain only (from a
					// region: unwinding the calls).
					base.Action, base.nextLabel = ActContinue, fl.acceptTo
					if fl.inRegion {
						base.Action, base.nextLabel = ActUnwind, nil
					}
				}
				fl.emit(base)
				if base.Action == ActContinue {
					fl.fallthroughNext()
				}
			}
			if t.counted && fl.entries[len(fl.entries)-1].Action == ActContinue {
				// Its target ran: the walk ends on the hotdrop.
				fl.emit(Entry{Cond: cond, Rule: NoRule, Action: ActDrop})
			}
		}
		if past != nil {
			past.pos, past.resolved = uint32(len(fl.entries)), true
		}
		if !emitted {
			// A jump that never matches here: its chain is not
			// flattened, but what xfw refuses in it is refused all
			// the same (unreached.go).
			if err := fl.checkJumpUnreached(chain, i, r, inf, hook); err != nil {
				return err
			}
		}
	}
	return nil
}

// termList returns the condition of term t under the outer condition as
// an entry's CondList, and false when it holds for no packet. Under the
// universal condition (universal: outer is, as for every chain and region
// flattened now) it is t's own, made with t (listTerms) and shared by the
// entries of every view (lists are never changed in place).
func (fl *flattener) termList(t *listedTerm, outer Cond, universal bool) (CondList, bool) {
	if t.never {
		return nil, false
	}
	if !universal {
		cond, ok := outer.and(t.list.Full())
		if !ok {
			return nil, false
		}
		return fl.slab.list(cond), true
	}
	return t.list, true
}

// listedTerm is a rule's term as flattening keeps it (listTerms): its
// condition as the CondList its entries share, no dense Cond. A dense term
// (288 bytes) per rule held until the rule was flattened was the largest
// allocation of a 100K-rule compile after the class sweep's (31 of 205
// MB).
type listedTerm struct {
	// list is the term's condition; nil with never, when it holds for
	// no packet (a field's set empty).
	list    CondList
	flags   uint8
	hotdrop bool
	never   bool
	// counted and after are the term's (term): a rule counted before a
	// hotdrop whose match returned true, and a hotdrop term after it.
	counted, after bool
}

// listTerms appends terms, as listedTerms with their lists cut from slab,
// to out.
func listTerms(out []listedTerm, terms []term, slab *condSlab) []listedTerm {
	for i := range terms {
		t := &terms[i]
		lt := listedTerm{flags: t.flags, hotdrop: t.hotdrop, counted: t.counted, after: t.after}
		if _, ok := (Cond{}).and(t.cond); !ok {
			lt.never = true
		} else {
			lt.list = slab.list(t.cond)
		}
		out = append(out, lt)
	}
	return out
}

// probeCondList is termList for term t of a probe's prefix terms
// (prefixTerms): its condition under the outer condition, ANDed with
// probeCt when that is not nil. Under the universal condition without
// probeCt (every statistic, mark or set counting probe; a prefix's terms
// serve one probe only, whose kind decides probeCt) it is t's own list.
func (fl *flattener) probeCondList(t *listedTerm, outer Cond, universal bool, probeCt *Set) (CondList, bool) {
	if probeCt == nil {
		return fl.termList(t, outer, universal)
	}
	if t.never {
		return nil, false
	}
	cond, ok := outer.and(t.list.Full())
	if ok {
		cond, ok = cond.and(Cond{FieldCt: probeCt})
	}
	if !ok {
		return nil, false
	}
	return fl.slab.list(cond), true
}

// termsOf returns rule r's terms (ruleTerms), computed once and kept in
// its ruleInfo inf, or the reason xfw refuses the rule.
func (fl *flattener) termsOf(inf *ruleInfo, r *ir.Rule) ([]listedTerm, error) {
	if !inf.hasTerms {
		terms, err := ruleTerms(fl.rs.Family, r, fl.ifaces, fl.sets)
		inf.setTermsErr(err)
		if err == nil {
			inf.terms = listTerms(make([]listedTerm, 0, len(terms)), terms, &fl.slab)
		}
		inf.hasTerms = true
	}
	return inf.terms, inf.termsErr()
}

// probes emits the probes of rule r (under the outer condition), in the
// order of its matches, which is the order the kernel evaluates them in:
// a set counting probe per set match that updates set entry counters, a
// probe (probe.go) per probed match (limit, ...). Each has the condition
// under which the kernel evaluates its match: the rule's IP header part
// and the matches before it (the kernel counts the element the lookup
// finds, and takes a token, whatever the rule's later matches answer). A
// match before it that can hotdrop hotdrops here, uncounted, as the rule
// itself would. A probe that answers false continues at the label
// returned (nil: r has no probed match), which the caller resolves to the
// position after r's entries, so later probes of r are not met either.
func (fl *flattener) probes(inf *ruleInfo, r *ir.Rule, outer Cond, hook int) (past *label, err error) {
	if inf.probed == hookBoundUnknown {
		inf.probed = hookBoundNo
		for _, m := range r.Matches {
			sm, isSet := m.(*ir.SetMatch)
			if probedMatch(m) || isSet && fl.counts != nil && fl.counts(sm) {
				inf.probed = hookBoundYes
				break
			}
		}
	}
	if inf.probed == hookBoundNo {
		return nil, nil // most rules: met in every view
	}
	universal := outer == (Cond{})
	for i, m := range r.Matches {
		sm, isSet := m.(*ir.SetMatch)
		probed := probedMatch(m)
		if !probed && (!isSet || fl.counts == nil || !fl.counts(sm)) {
			continue
		}
		terms, err := fl.prefixTerms(inf, r, i)
		if err != nil {
			return nil, err
		}
		var probe Entry
		var probeCt *Set // the probe's FieldCt condition: it needs the connection
		if isSet {
			k, err := fl.sets.index(sm)
			if err != nil {
				return nil, err
			}
			probe = Entry{Flags: EFSetCount, Aux: uint16(k)}
			if sm.SkipSubcounterUpdate {
				probe.Aux |= SetCountSkipSub
			}
		} else {
			if past == nil {
				past = &label{}
			}
			pr, err := fl.probeOf(r, i, m, hook)
			if err != nil {
				return nil, err
			}
			k, err := fl.probeIndex(pr)
			if err != nil {
				return nil, err
			}
			probe = Entry{Flags: EFProbe, Aux: k, nextLabel: past}
			if probeNeedsCt(pr.Kind) {
				probeCt = ctFullKeys
			}
		}
		for ti := range terms {
			t := &terms[ti]
			if t.after {
				// The counted term's own entry drops after the
				// probe (a probe answering false lets it by).
				continue
			}
			cond, ok := fl.probeCondList(t, outer, universal, probeCt)
			if !ok {
				continue
			}
			if t.hotdrop {
				fl.emit(Entry{Cond: cond, Rule: NoRule, Action: ActDrop})
				continue
			}
			e := probe
			e.Cond, e.Rule, e.Action, e.Flags = cond, NoRule, ActContinue, probe.Flags|t.flags
			fl.emit(e)
			if e.nextLabel == nil {
				fl.fallthroughNext()
			}
		}
	}
	return past, nil
}

// countedRuns reports whether a target of kind k acts before the walk
// ends on a hotdrop its rule's match returned true with (the counted terms
// of terms_hdr4.go): targets that change the packet, its mark or a set,
// log, or reply (REJECT) run, then the packet is dropped; a verdict, a
// jump, RETURN or a translation is not taken.
func countedRuns(k ir.TargetKind) bool {
	switch k {
	case ir.TargetMark, ir.TargetConnmark, ir.TargetSet, ir.TargetTCPMSS, ir.TargetDSCP,
		ir.TargetTOS, ir.TargetTTL, ir.TargetHL, ir.TargetCTNotrack, ir.TargetNotrack,
		ir.TargetLog, ir.TargetNFLog, ir.TargetNone, ir.TargetReject, ir.TargetDrop:
		return true
	}
	return false
}

// verdictEntry sets e's action for the targets whose entry needs no label:
// ACCEPT, DROP, REJECT (Aux the reject type), none (count only) and LOG
// or NFLOG (Aux the LOG options' index from logConfig); the last two continue at
// the next entry, which the caller sets as e.Next. ok is false for other
// targets.
func verdictEntry(e *Entry, t ir.Target, logConfig func(LogConfig) uint16) (ok bool, err error) {
	switch t.Kind {
	case ir.TargetAccept:
		e.Action = ActAccept
	case ir.TargetDrop:
		e.Action = ActDrop
	case ir.TargetReject:
		rt, ok := RejectTypes[t.RejectWith]
		if !ok {
			return false, fmt.Errorf("unknown reject type %q", t.RejectWith)
		}
		e.Action, e.Aux = ActReject, rt
	case ir.TargetNone:
		e.Action = ActContinue
	case ir.TargetLog:
		e.Action = ActContinue
		e.Flags |= EFLog
		e.Aux = logConfig(logConfigOf(t.Log))
	case ir.TargetNFLog:
		e.Action = ActContinue
		e.Flags |= EFLog
		e.Aux = logConfig(nflogConfigOf(t.NFLog))
	default:
		return false, nil
	}
	return true, nil
}

// fallthroughNext makes the last entry continue at the entry after it.
func (fl *flattener) fallthroughNext() {
	e := &fl.entries[len(fl.entries)-1]
	e.Next = uint32(len(fl.entries))
}

// emptyJump emits base, a jump or (goto) a goto to a chain without rules,
// as the counted CONTINUE the kernel's walk amounts to: the packet enters
// the chain, meets no rule and returns at once, to the next rule (a jump)
// or to ret, where the chain that went to it returns (a goto). No region,
// no CALL: the walk saves the CALL's stack push, the RETURN's step and,
// in a table's chain followed by others, the ActExit entry's (the
// per-packet cost of kube-proxy's empty filter chains, KUBE-SERVICES and
// KUBE-PROXY-FIREWALL when no service lacks endpoints). A rule added to
// the chain later compiles the ruleset again (in-place changes are
// filter's base chains').
func (fl *flattener) emptyJump(base Entry, gotoChain bool, ret *label) {
	base.Action = ActContinue
	if gotoChain {
		base.nextLabel = ret
		fl.emit(base)
		return
	}
	fl.emit(base)
	fl.fallthroughNext()
}

// defaultLogLevel is the LOG target's level when none is given (warning).
const defaultLogLevel = 4

// logConfigOf returns the data plane's LOG options for the target's.
func logConfigOf(o *ir.LogOptions) LogConfig {
	lc := LogConfig{Level: defaultLogLevel}
	if o != nil {
		lc = LogConfig{Prefix: o.Prefix, Level: o.Level, Flags: o.Flags}
		if !o.LevelSet {
			lc.Level = defaultLogLevel
		}
	}
	return lc
}

// logConfig returns the index of the LOG options lc, numbered in order of
// first use.
func (fl *flattener) logConfig(lc LogConfig) uint16 {
	lc.Flags |= fl.logView
	if i, ok := fl.logIndex[lc]; ok {
		return i
	}
	i := uint16(len(fl.logs))
	fl.logIndex[lc] = i
	fl.logs = append(fl.logs, lc)
	return i
}

// checkHook refuses matches the kernel refuses on a hook: -m mac outside
// PREROUTING/INPUT/FORWARD, addrtype's --limit-iface-out from INPUT and
// --limit-iface-in from OUTPUT.
func checkHook(r *ir.Rule, hook int) error {
	for _, m := range r.Matches {
		switch m := m.(type) {
		case *ir.MACMatch:
			if hook == ChainOutput {
				return fmt.Errorf("mac match is only valid in the PREROUTING, INPUT and FORWARD chains (reached from OUTPUT)")
			}
		case *ir.AddrTypeMatch:
			if (m.LimitOut && hook == ChainInput) || (m.LimitIn && hook == ChainOutput) {
				return fmt.Errorf("addrtype match: --limit-iface-in is not valid from OUTPUT, --limit-iface-out not from INPUT")
			}
		}
	}
	return nil
}

// ruleInfo.hookBound values.
const (
	hookBoundUnknown = iota
	hookBoundNo
	hookBoundYes
)

// hookBound reports whether r has a match checkHook checks: whether its
// validity depends on the hook it is reached from.
func hookBound(r *ir.Rule) bool {
	for _, m := range r.Matches {
		switch m.(type) {
		case *ir.MACMatch, *ir.AddrTypeMatch:
			return true
		}
	}
	return false
}

// flatten builds the entry list: INPUT's entries, then FORWARD's, then
// OUTPUT's. It returns the chain ranges.
func (fl *flattener) flatten() (start, end [NumChains]uint32, err error) {
	var endLabels [NumChains]*label
	rs := fl.rs
	walks := UsesOtherTables(rs)
	for hook, name := range ir.BuiltinChains {
		c := rs.Chain(name)
		if walks {
			if err := fl.walkBefore(rs, hook); err != nil {
				return start, end, err
			}
		}
		// Slack before the chain's entries too, for rules inserted at its
		// head (InsertRule).
		fl.layout.SlackStart[hook] = uint32(len(fl.entries))
		for i := 0; i < AppendSlack && len(fl.entries) < MaxEntries; i++ {
			fl.entries = append(fl.entries, Entry{Cond: neverList, Rule: NoRule, Action: ActDrop})
		}
		start[hook] = uint32(len(fl.entries))
		endLabel := &label{}
		endLabels[hook] = endLabel
		if c != nil {
			var universe Cond
			fl.view = viewCtx{rs: rs, walk: hook, check: hook, acceptTo: fl.acceptTo}
			if err := fl.block(c, nil, universe, endLabel, hook); err != nil {
				return start, end, err
			}
		}
		end[hook] = uint32(len(fl.entries))
		endLabel.pos, endLabel.resolved = end[hook], true
		// Slack for rules appended later (AppendRule): entries in no
		// class, so the search never stops on them.
		for i := 0; i < AppendSlack && len(fl.entries) < MaxEntries; i++ {
			fl.entries = append(fl.entries, Entry{Cond: neverList, Rule: NoRule, Action: ActDrop})
		}
		fl.layout.SlackEnd[hook] = uint32(len(fl.entries))
		if walks {
			if err := fl.walkAfter(rs, hook, end[hook]); err != nil {
				return start, end, err
			}
		}
	}
	if err := fl.emitRegions(); err != nil {
		return start, end, err
	}
	if len(fl.entries) > MaxEntries {
		return start, end, fmt.Errorf("ruleset too large: %d entries after flattening user chains, the data plane holds %d (%d chunks of %d)", len(fl.entries), MaxEntries, MaxChunks, ChunkBits)
	}
	for i := range fl.entries {
		e := &fl.entries[i]
		if e.nextLabel != nil {
			if !e.nextLabel.resolved {
				return start, end, fmt.Errorf("internal error: unresolved label at entry %d", i)
			}
			for hook, l := range endLabels {
				if e.nextLabel == l {
					fl.layout.EndRefs[hook] = append(fl.layout.EndRefs[hook], uint32(i))
				}
			}
			e.Next = e.nextLabel.pos
			e.nextLabel = nil
		}
		if e.Action == ActContinue && e.Next <= uint32(i) {
			return start, end, fmt.Errorf("internal error: entry %d continues backwards at %d", i, e.Next)
		}
	}
	return start, end, nil
}

// AppendSlack is the number of never-matching positions after each base
// chain's entries, where AppendRule puts appended rules without moving
// any other entry, and before them, where InsertRule puts rules inserted
// at the head.
const AppendSlack = 64

// neverCond is the condition a slack entry is flattened with, an empty
// protocol set; Compile then empties every classified field
// (neverInAnyClass).
func neverCond() Cond {
	var c Cond
	c[FieldProto] = &Set{}
	return c
}

// neverList is neverCond as a CondList, shared by the slack entries.
var neverList = neverCond().List()

// ruleInfo is what flattening needs of one rule, found with one lookup
// per rule and view: its counter index, its terms (ruleTerms, computed
// once) and, for a jump or goto, its target (jumpTarget).
type ruleInfo struct {
	id       uint32
	hasTerms bool
	// hookBound: whether checkHook has anything to check (hookBound);
	// probed: whether the rule gets probes (probes); viewFree: whether
	// the rule is the same in the nat views (viewFreeRule, for
	// natViewFree). Computed ahead on all CPUs (precomputeTerms), or the
	// first time flattening meets the rule (hookBoundUnknown,
	// viewFreeUnknown).
	hookBound, probed, viewFree uint8
	terms                       []listedTerm
	// target is the chain a jump or goto reaches, its nesting checked,
	// targetState its chainState (jumpTarget).
	target      *ir.Chain
	targetState *chainState
	// jump is the chain a jump or goto names, when jumpResolved
	// (resolveJump; its nesting not checked yet: jumpTarget), jumpState
	// its chainState when precomputeTerms found it (nil: stateOf).
	jump         *ir.Chain
	jumpState    *chainState
	jumpResolved bool
	// more holds what few rules have: the reason xfw refuses the rule,
	// a probed rule's prefix terms (nil: neither). Out of line, a
	// ruleInfo is 80 bytes instead of 112 (330,000 of them at 10K
	// kube-proxy services).
	more *ruleMore
}

// ruleMore is the part of a ruleInfo few rules need.
type ruleMore struct {
	// err is the reason xfw refuses the rule's terms.
	err error
	// prefix[i] are the terms of the rule's IP part and its matches
	// before match i, for the probe of match i (prefixTerms).
	prefix []prefixTerms
}

// termsErr returns the reason xfw refuses the rule's terms, nil if none.
func (inf *ruleInfo) termsErr() error {
	if inf.more == nil {
		return nil
	}
	return inf.more.err
}

// setTermsErr records err (nil: nothing to record) as the reason xfw
// refuses the rule's terms.
func (inf *ruleInfo) setTermsErr(err error) {
	if err == nil {
		if inf.more != nil {
			inf.more.err = nil
		}
		return
	}
	if inf.more == nil {
		inf.more = &ruleMore{}
	}
	inf.more.err = err
}

// prefixTerms are the terms of a rule's matches before a probed one, or
// the reason xfw refuses them.
type prefixTerms struct {
	done  bool
	terms []listedTerm
	err   error
}

// ruleInfo returns r's ruleInfo, a new one (counter index 0) for a rule
// Compile did not number.
func (fl *flattener) ruleInfo(r *ir.Rule) *ruleInfo {
	if !fl.infoFilled {
		fl.fillInfo()
	}
	if inf, ok := fl.info[r]; ok {
		return inf
	}
	inf := &ruleInfo{}
	fl.info[r] = inf
	return inf
}

// fillInfo indexes the rules numberRules numbered by rule: a rule met
// twice gets the ruleInfo numbered last, as when the index was filled in
// numbering order.
func (fl *flattener) fillInfo() {
	fl.infoFilled = true
	if fl.info == nil {
		fl.info = make(map[*ir.Rule]*ruleInfo, len(fl.numberedRules))
	}
	for i, r := range fl.numberedRules {
		fl.info[r] = fl.numbered[i]
	}
}

// hasDuplicate reports whether a rule is in rules twice (the same *ir.Rule).
func hasDuplicate(rules []*ir.Rule) bool {
	addrs := make([]uintptr, len(rules))
	for i, r := range rules {
		// An identity only (Go's heap objects do not move): sorted,
		// equal rules are neighbours.
		addrs[i] = uintptr(unsafe.Pointer(r))
	}
	slices.Sort(addrs)
	for i := 1; i < len(addrs); i++ {
		if addrs[i] == addrs[i-1] {
			return true
		}
	}
	return false
}

// numberRules gives every rule of rs its ruleInfo with its counter index
// (ForEachCounter) and collects the policies' counter indexes; it returns
// the rules' references in counter order (Generation.Rules).
func (fl *flattener) numberRules(rs *ir.Ruleset) []RuleRef {
	// Sized ahead: grown by append, the references of kube-proxy's
	// 430,000 rules (10K services) allocated 67 MB for 17 MB kept.
	rules := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		rules += len(ir.TableBuiltins(t.Table)) // at most one policy each
		for _, c := range t.Chains {
			rules += len(c.Rules)
		}
	}
	refs := make([]RuleRef, 0, rules)
	fl.numbered = make([]*ruleInfo, 0, rules)
	fl.numberedRules = make([]*ir.Rule, 0, rules)
	var infos []ruleInfo
	ForEachCounter(rs, func(i int, ref RuleRef, _ *ir.Chain, r *ir.Rule) {
		refs = append(refs, ref)
		if r == nil {
			fl.policyID[ref] = uint32(i)
			return
		}
		if len(infos) == cap(infos) {
			infos = make([]ruleInfo, 0, 4096) // one allocation per 4,096 rules
		}
		infos = append(infos, ruleInfo{id: uint32(i)})
		fl.numbered = append(fl.numbered, &infos[len(infos)-1])
		fl.numberedRules = append(fl.numberedRules, r)
	})
	fl.numberedDup = hasDuplicate(fl.numberedRules)
	fl.infoFilled = false
	return refs
}

// listedTermBlock is how many listedTerms precomputeTerms's workers
// allocate at a time (128 KiB).
const listedTermBlock = 4096

// minParallelRules is the ruleset size from which precomputeTerms splits
// the work across CPUs.
const minParallelRules = 1024

// precomputeTerms computes the terms of the rules without set matches on
// all CPUs before flattening: ruleTerms is pure for them (set conditions
// are numbered in the order flattening meets them, so rules with set
// matches are left to it). Errors are kept and reported only if
// flattening reaches the rule, as before. The rules of every table are
// computed ahead (kube-proxy's are nat's). It resolves the jumps' and
// gotos' target chains too (resolveJumps), finds what else flattening
// asks of each rule alone (hookBound, viewFreeRule, and hasProbedMatch
// for a rule without set matches: a first touch of each rule's matches
// that cost the serial flattening about 0.15 s of CPU at 10K kube-proxy
// services), and indexes every chain's ruleInfos (chainState.infos).
func (fl *flattener) precomputeTerms() {
	total, chains := 0, 0
	for _, t := range append([]*ir.Ruleset{fl.rs}, fl.rs.Tables...) {
		chains += len(t.Chains)
		for _, c := range t.Chains {
			total += len(c.Rules)
		}
	}
	// Sized ahead (grown by append, 34 MiB more at 10K kube-proxy
	// services).
	rules := make([]*ir.Rule, 0, total)
	infos := make([]*ruleInfo, 0, total)
	byName := make([]map[string]*ir.Chain, 0, total) // the table of rules[i]'s chain index; nil: resolved ahead
	// numberRules met the rules in this order: their ruleInfos without
	// a lookup each, unless a rule is in the ruleset twice (its
	// ruleInfo is then the one numbered last, fl.info's).
	numbered := fl.numbered
	if fl.numberedDup || len(numbered) != total {
		numbered = nil
	}
	all := make([]*ruleInfo, 0, total)
	// Every chain's chainState made here, in one allocation, holding
	// its ruleInfos: the jumps' target states are then found ahead
	// (jumpState) and the graph's walks (height, natViewFree,
	// reachesTTLOf) look no chain up.
	states := make([]chainState, chains)
	if fl.chainStates == nil {
		fl.chainStates = make(map[*ir.Chain]*chainState, chains)
	}
	for _, t := range append([]*ir.Ruleset{fl.rs}, fl.rs.Tables...) {
		// The jumps resolved ahead (resolveJumps) are taken here; a
		// rule they do not know is looked up by name (byName, the
		// table's index, made on first need).
		tj := fl.jumps.of(t)
		var index map[string]*ir.Chain
		if tj == nil {
			index = fl.chainIndexOf(t)
		}
		tstates := make([]*chainState, len(t.Chains))
		for ci, c := range t.Chains {
			st := fl.chainStates[c]
			if st == nil {
				st = &states[0]
				states = states[1:]
				fl.chainStates[c] = st
			}
			tstates[ci] = st
		}
		for ci, c := range t.Chains {
			first := len(all)
			for j, r := range c.Rules {
				var inf *ruleInfo
				if numbered != nil {
					inf = numbered[len(all)]
				} else {
					inf = fl.ruleInfo(r)
				}
				all = append(all, inf)
				rules = append(rules, r)
				infos = append(infos, inf)
				if tj != nil {
					if k, ok := tj.target(ci, j, r); ok {
						if k != noJump {
							inf.jump, inf.jumpState, inf.jumpResolved = t.Chains[k], tstates[k], true
						}
						byName = append(byName, nil)
						continue
					}
					if index == nil {
						index = fl.chainIndexOf(t)
					}
				}
				byName = append(byName, index)
			}
			tstates[ci].infos = all[first:len(all):len(all)]
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || len(rules) < minParallelRules {
		return
	}
	per := (len(rules) + workers - 1) / workers
	var ports *portSets
	if len(rules) >= minPortSetsRules {
		ports = new(portSets)
	}
	var wg sync.WaitGroup
	for lo := 0; lo < len(rules); lo += per {
		hi := min(lo+per, len(rules))
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker's rules' terms are built in one termBuilder
			// (sharing single-port sets: portSets) and kept as
			// listedTerms, their lists cut from the worker's slab, in
			// blocks of listedTerms.
			b := termBuilder{ports: ports}
			var slab condSlab
			var block []listedTerm
			for i := lo; i < hi; i++ {
				r, inf := rules[i], infos[i]
				if byName[i] != nil { // not resolved ahead
					resolveJump(inf, r, byName[i])
					if inf.jump != nil {
						// Read only while the workers run.
						inf.jumpState = fl.chainStates[inf.jump]
					}
				}
				inf.hookBound = hookBoundNo
				if hookBound(r) {
					inf.hookBound = hookBoundYes
				}
				inf.viewFree = viewFreeNo
				if viewFreeRule(fl.rs.Family, r) {
					inf.viewFree = viewFreeYes
				}
				if hasSetMatch(r) {
					continue // numbered in order; probed asks fl.counts
				}
				inf.probed = hookBoundNo
				if hasProbedMatch(r) {
					inf.probed = hookBoundYes
				}
				terms, err := b.ruleTerms(fl.rs.Family, r, fl.ifaces, nil)
				inf.setTermsErr(err)
				if err == nil {
					if cap(block)-len(block) < len(terms) {
						block = make([]listedTerm, 0, max(listedTermBlock, len(terms)))
					}
					start := len(block)
					block = listTerms(block, terms, &slab)
					inf.terms = block[start:len(block):len(block)]
				}
				inf.hasTerms = true
			}
		}()
	}
	wg.Wait()
}

// resolveJump records in inf the chain that r, a jump or goto, names in
// its table (byName), nil if none: what chainNamed would return, looked up
// ahead on all CPUs (a kube-proxy ruleset has about 230,000 jumps).
func resolveJump(inf *ruleInfo, r *ir.Rule, byName map[string]*ir.Chain) {
	if r.Target.Jumps() {
		inf.jump, inf.jumpResolved = byName[r.Target.Chain], true
	}
}

// infoAt returns the ruleInfo of rule i (r) of chain c: from the chain's
// index (chainState.infos, one lookup per chain instead of one per rule), or
// looked up by rule.
func (fl *flattener) infoAt(infos []*ruleInfo, c *ir.Chain, i int, r *ir.Rule) *ruleInfo {
	if len(infos) == len(c.Rules) {
		return infos[i]
	}
	return fl.ruleInfo(r)
}

// hasSetMatch reports whether r has a -m set match, or an IPv6
// extension header match, whose conditions are numbered the same way (in
// the order flattening meets them).
func hasSetMatch(r *ir.Rule) bool {
	for _, m := range r.Matches {
		if _, ok := m.(*ir.SetMatch); ok {
			return true
		}
		if _, ok := Ext6Kind(m); ok {
			return true
		}
		if usesHdr4(m) {
			return true
		}
	}
	return false
}

// prefixTerms returns the terms of rule r's IP part and matches before
// match i (its probe's condition), computed once per rule and kept in
// its ruleInfo inf: a rule flattened in several views (kube-proxy's
// statistic matches) needs them in each.
func (fl *flattener) prefixTerms(inf *ruleInfo, r *ir.Rule, i int) ([]listedTerm, error) {
	if inf.more == nil {
		inf.more = &ruleMore{}
	}
	if inf.more.prefix == nil {
		inf.more.prefix = make([]prefixTerms, len(r.Matches))
	}
	if p := inf.more.prefix[i]; p.done {
		return p.terms, p.err
	}
	before := *r
	before.Matches = r.Matches[:i]
	// Built in the flattener's own termBuilder (flattening is serial)
	// and kept as listedTerms: a dense term per probe was 26 MB of
	// kube-proxy's 90,000 statistic probes at 10K services.
	terms, err := fl.prefixBuilder.ruleTerms(fl.rs.Family, &before, fl.ifaces, fl.sets)
	var listed []listedTerm
	if err == nil {
		listed = listTerms(make([]listedTerm, 0, len(terms)), terms, &fl.slab)
	}
	inf.more.prefix[i] = prefixTerms{true, listed, err}
	return listed, err
}
