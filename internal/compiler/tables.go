package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The tables besides filter (raw, mangle, nat, security) in the walk.
//
// The kernel runs, at each hook, the built-in chain of every table
// registered there, in priority order (raw -300, conntrack -200, mangle
// -150, nat's destination mapping -100, filter 0, security 50, nat's
// source mapping 100). xfw judges a packet once per data-plane hook, after
// the route lookup (XDP: INPUT or FORWARD; TC egress: OUTPUT), so each of
// its walks is the sequence of (table, chain) segments the kernel runs on
// that path (hookWalks). A segment is a table's chain flattened with its
// user chains, then its policy entry (counted to the policy's counter:
// ACCEPT continues with the next segment, DROP ends the walk). In a
// segment ACCEPT ends the table's chain only: it continues with the next
// segment; so does filter's when segments follow it. A walk with segments
// after filter ends with an uncounted ACCEPT entry; filter's policy is
// then an entry too. Filter's chain keeps its slack; its ChainStart and
// ChainEnd bound filter's entries, WalkStart and WalkEnd the walk.
//
// A segment sees the packet as its chain does in the kernel:
//   - raw runs before conntrack: a packet has no connection there
//     (conntrack_mt answers INVALID), so conditions on the connection are
//     decided at compile time;
//   - PREROUTING has no output device, POSTROUTING no input device, and
//     PREROUTING of a forwarded packet sees the TTL (hop limit) before
//     ip_forward's decrement: the conditions are rewritten for the walk's
//     packet (the data plane decrements before its FORWARD walk);
//   - nat chains run for a connection's first packet only (nf_nat_inet_fn:
//     a packet with no connection, of a connection already set up, or an
//     ICMP error passes them by): the segment starts with an entry that
//     skips it for every other packet, a condition on the connection's
//     state (NEW, not yet CONFIRMED), which turns connection tracking on;
//     and the nat table is walked only when some rule asks the kernel to
//     track connections at all (ctpull.go): without one its chains see
//     no packet;
//   - LOG lines of PREROUTING and POSTROUTING chains name no output or
//     input device (ir.LogViewPrerouting, ir.LogViewPostrouting).
//
// Targets xfw cannot apply yet (the NAT targets) are refused.

// tableChain names one table's built-in chain in a walk.
type tableChain struct {
	table, chain string
}

// hookWalks are the segments of each base chain's walk, in the kernel's
// order, filter's among them.
var hookWalks = [NumChains][]tableChain{
	ChainInput: {{ir.TableRaw, ir.ChainPrerouting}, {ir.TableMangle, ir.ChainPrerouting},
		{ir.TableNat, ir.ChainPrerouting}, {ir.TableMangle, ir.ChainInput}, {ir.TableFilter, ir.ChainInput},
		{ir.TableSecurity, ir.ChainInput}, {ir.TableNat, ir.ChainInput}},
	ChainForward: {{ir.TableRaw, ir.ChainPrerouting}, {ir.TableMangle, ir.ChainPrerouting},
		{ir.TableNat, ir.ChainPrerouting}, {ir.TableMangle, ir.ChainForward}, {ir.TableFilter, ir.ChainForward},
		{ir.TableSecurity, ir.ChainForward}, {ir.TableMangle, ir.ChainPostrouting}, {ir.TableNat, ir.ChainPostrouting}},
	ChainOutput: {{ir.TableRaw, ir.ChainOutput}, {ir.TableMangle, ir.ChainOutput}, {ir.TableNat, ir.ChainOutput},
		{ir.TableFilter, ir.ChainOutput}, {ir.TableSecurity, ir.ChainOutput}, {ir.TableMangle, ir.ChainPostrouting},
		{ir.TableNat, ir.ChainPostrouting}},
}

// PolicyIndex is a RuleRef's Index for a chain's policy.
const PolicyIndex = -1

// UsesOtherTables reports whether rs has a table besides filter: then its
// walks have segments of those tables (Generation.WalkStart), whose
// policies count even when they hold no rule, as the kernel's do.
func UsesOtherTables(rs *ir.Ruleset) bool {
	for _, t := range rs.Tables {
		if t.Table != "" && t.Table != ir.TableFilter {
			return true
		}
	}
	return false
}

// ForEachCounter calls fn for every counter of rs past the filter table's
// policies (0 to NumChains-1), in counter index order: the filter table's
// rules chain by chain, then for each other table (in rs.Tables order) its
// built-in chains' policies (ref.Index PolicyIndex, r nil) in hook order
// and its rules chain by chain. The chains are taken in the order the
// tables have them (the caller orders them first, as the saved ruleset).
func ForEachCounter(rs *ir.Ruleset, fn func(counter int, ref RuleRef, c *ir.Chain, r *ir.Rule)) {
	i := NumChains
	for _, c := range rs.Chains {
		for k, r := range c.Rules {
			fn(i, RuleRef{Chain: c.Name, Index: k}, c, r)
			i++
		}
	}
	for _, t := range rs.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if c := t.Chain(name); c != nil {
				fn(i, RuleRef{Table: t.Table, Chain: name, Index: PolicyIndex}, c, nil)
				i++
			}
		}
		for _, c := range t.Chains {
			for k, r := range c.Rules {
				fn(i, RuleRef{Table: t.Table, Chain: c.Name, Index: k}, c, r)
				i++
			}
		}
	}
}

// checkOtherTables refuses what the data plane cannot enforce in the
// tables besides filter: the NAT targets (and any target the walk cannot
// apply there), and a nat policy other than ACCEPT.
func checkOtherTables(rs *ir.Ruleset) error {
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			if c.Builtin && c.Policy != ir.VerdictAccept && t.Table == ir.TableNat {
				return fmt.Errorf("table %s: policy %s of chain %s is not supported by xfw", t.Table, c.Policy, c.Name)
			}
			for i, r := range c.Rules {
				switch r.Target.Kind {
				case ir.TargetNone, ir.TargetAccept, ir.TargetDrop, ir.TargetReturn, ir.TargetJump,
					ir.TargetGoto, ir.TargetLog, ir.TargetMark, ir.TargetDNAT, ir.TargetRedirect,
					ir.TargetSNAT, ir.TargetMasquerade, ir.TargetConnmark,
					ir.TargetTCPMSS, ir.TargetDSCP, ir.TargetTOS, ir.TargetTTL, ir.TargetHL,
					ir.TargetCTNotrack, ir.TargetNotrack, ir.TargetNFLog, ir.TargetSet:
				default:
					return fmt.Errorf("table %s chain %s rule %d: target %s is not supported by xfw's data plane yet",
						t.Table, c.Name, i+1, targetName(r.Target.Kind))
				}
			}
		}
	}
	return nil
}

// refusedTargets names the targets checkOtherTables refuses.
var refusedTargets = map[ir.TargetKind]string{
	ir.TargetDNAT: "DNAT", ir.TargetSNAT: "SNAT", ir.TargetMasquerade: "MASQUERADE",
	ir.TargetRedirect: "REDIRECT", ir.TargetReject: "REJECT",
}

// targetName names a target checkOtherTables refuses.
func targetName(k ir.TargetKind) string {
	if name, ok := refusedTargets[k]; ok {
		return name
	}
	return fmt.Sprintf("#%d", k)
}

// splitWalk returns the segments of hook's walk before and after filter's
// chain, those of tables rs has; not the nat table's when it sees no
// packet (fl.natIdle: ctpull.go).
func (fl *flattener) splitWalk(rs *ir.Ruleset, hook int) (before, after []tableChain) {
	seenFilter := false
	for _, tc := range hookWalks[hook] {
		if tc.table == ir.TableFilter {
			seenFilter = true
			continue
		}
		if tc.table == ir.TableNat && fl.natIdle {
			continue
		}
		if t := rs.TableByName(tc.table); t == nil || t.Chain(tc.chain) == nil {
			continue
		}
		if seenFilter {
			after = append(after, tc)
		} else {
			before = append(before, tc)
		}
	}
	return before, after
}

// walkBefore emits the segments of hook's walk before filter's chain and
// says whether segments follow it (then filter's ACCEPT continues at
// fl.acceptTo, which walkAfter resolves).
func (fl *flattener) walkBefore(rs *ir.Ruleset, hook int) error {
	fl.walkStart[hook] = uint32(len(fl.entries))
	before, after := fl.splitWalk(rs, hook)
	reroutes := marksBeforeRoute(rs, hook)
	fl.preOpen, fl.prePassive[hook] = hook != ChainOutput || rawOutputPreWalked(rs), true
	defer func() { fl.preOpen = false }()
	for i, tc := range before {
		if err := fl.segment(rs, hook, tc); err != nil {
			return err
		}
		var next *tableChain
		if i+1 < len(before) {
			next = &before[i+1]
		}
		if reroutes && isReroutePoint(hook, tc, next) {
			if err := fl.emitReroute(hook, rerouteInputs(rs, hook)); err != nil {
				return err
			}
			if i == 0 && tc.table == ir.TableNat {
				fl.gatePastReroute(hook)
			}
		}
		if tc.chain == ir.ChainPrerouting {
			fl.preEnd[hook] = uint32(len(fl.entries)) + 1
		}
	}
	fl.acceptTo = nil
	if len(after) > 0 {
		fl.acceptTo = &label{}
	}
	return nil
}

// gatePastReroute sends the gate of hook's nat PREROUTING segment, the
// walk's first, past the reroute entries that follow the segment: a
// packet that is not its connection's first passes the segment by, and
// no chain before it could have changed its mark, TTL or TOS since it was
// routed, so the reroute probe would say false. (A DNAT's walk resumes
// there too, Layout.NatResume.) One walk step less for every later
// packet of a ruleset whose nat PREROUTING marks packets (kube-proxy's
// KUBE-MARK-MASQ).
func (fl *flattener) gatePastReroute(hook int) {
	past := fl.reroute[hook] - 1
	fl.entries[fl.natGate].nextLabel = &label{pos: past, resolved: true}
}

// walkAfter emits, after filter's chain (ending at filterEnd), its policy
// entry and the segments that follow it, and ends the walk. Without such
// segments filter's chain ends the walk (the data plane applies its
// policy).
func (fl *flattener) walkAfter(rs *ir.Ruleset, hook int, filterEnd uint32) error {
	_, after := fl.splitWalk(rs, hook)
	fl.walkEnd[hook] = filterEnd
	if len(after) == 0 {
		return nil
	}
	exit := fl.acceptTo
	policy := Entry{Rule: uint32(hook), Flags: EFCount, Action: ActContinue, nextLabel: exit}
	if c := rs.Chain(ir.BuiltinChains[hook]); c != nil && c.Policy == ir.VerdictDrop {
		policy.Action, policy.nextLabel = ActDrop, nil
	}
	fl.emit(policy)
	exit.pos, exit.resolved = uint32(len(fl.entries)), true
	fl.acceptTo = nil
	for _, tc := range after {
		if err := fl.segment(rs, hook, tc); err != nil {
			return err
		}
	}
	// The end of the walk: every table accepted the packet.
	fl.entries = append(fl.entries, Entry{Rule: NoRule, Action: ActAccept})
	fl.walkEnd[hook] = uint32(len(fl.entries))
	return nil
}

// segment emits table tc.table's chain tc.chain (of rs's tables) in
// hook's walk: the nat gate, the chain's rules, its policy entry; then
// rewrites their conditions for the segment's view of the packet.
func (fl *flattener) segment(rs *ir.Ruleset, hook int, tc tableChain) error {
	t := rs.TableByName(tc.table)
	c := t.Chain(tc.chain)
	first := len(fl.entries)
	if tc.chain == ir.ChainPostrouting && fl.postStart[hook] == 0 {
		fl.postStart[hook] = uint32(first) + 1
	}
	exit := &label{}
	savedRS, savedAccept, savedView := fl.rs, fl.acceptTo, fl.logView
	defer func() { fl.rs, fl.acceptTo, fl.logView = savedRS, savedAccept, savedView }()
	fl.rs, fl.acceptTo, fl.logView = t, exit, 0
	check := hook
	switch tc.chain {
	case ir.ChainPrerouting:
		fl.logView, check = ir.LogViewPrerouting, ChainInput
	case ir.ChainPostrouting:
		fl.logView, check = ir.LogViewPostrouting, ChainOutput
	}
	fl.natPrerouting = tc.table == ir.TableNat && tc.chain == ir.ChainPrerouting
	fl.natPostrouting = tc.table == ir.TableNat && tc.chain == ir.ChainPostrouting
	fl.natOutput = tc.table == ir.TableNat && tc.chain == ir.ChainOutput
	fl.natInput = tc.table == ir.TableNat && tc.chain == ir.ChainInput
	defer func() { fl.natPrerouting, fl.natPostrouting, fl.natOutput, fl.natInput = false, false, false, false }()
	if tc.table == ir.TableNat {
		var notFirst Cond
		notFirst[FieldCt] = Complement(firstPacketStates(), U64(0), U64(ctDomain-1))
		fl.natGate = uint32(len(fl.entries))
		fl.emit(Entry{Cond: notFirst.List(), Rule: NoRule, Action: ActContinue, nextLabel: exit})
	}
	end := &label{}
	seg := tc
	fl.view = viewCtx{rs: t, walk: hook, check: check, seg: &seg, acceptTo: exit, logView: fl.logView,
		natPrerouting: fl.natPrerouting, natPostrouting: fl.natPostrouting, natOutput: fl.natOutput,
		natInput: fl.natInput}
	if err := fl.block(c, nil, Cond{}, end, check); err != nil {
		return fmt.Errorf("table %s: %w", tc.table, err)
	}
	end.pos, end.resolved = uint32(len(fl.entries)), true
	ref := RuleRef{Table: t.Table, Chain: c.Name, Index: PolicyIndex}
	policy := Entry{Rule: fl.policyID[ref], Flags: EFCount, Action: ActContinue, nextLabel: exit}
	if c.Policy == ir.VerdictDrop {
		policy.Action, policy.nextLabel = ActDrop, nil
	}
	fl.emit(policy)
	exit.pos, exit.resolved = uint32(len(fl.entries)), true
	if fl.natPrerouting || fl.natOutput {
		fl.natResume[hook] = exit.pos + 1
	}
	// The walk's PREROUTING segments judged before routing so far
	// (rawpre.go): this one joins them when it qualifies.
	rawOut := hook == ChainOutput && tc.table == ir.TableRaw && tc.chain == ir.ChainOutput
	if fl.preOpen && (tc.chain == ir.ChainPrerouting || rawOut) && preRouteJudged(t, tc.table, c) {
		fl.rawPre[hook] = exit.pos + 1
		fl.prePassive[hook] = fl.prePassive[hook] && len(c.Rules) == 0 && c.Policy != ir.VerdictDrop
	} else {
		fl.preOpen = false
	}
	for i := first; i < len(fl.entries); i++ {
		e := &fl.entries[i]
		cond := e.Cond.Full()
		if segmentView(&cond, hook, tc, tc.table == ir.TableRaw && hasNotrack(t)) {
			e.Cond = fl.slab.list(cond)
		} else {
			e.Cond = neverList
		}
	}
	return nil
}

// firstPacketStates is the FieldCt condition (in key order, ctKey) of a
// connection's first packet: state NEW, status without CONFIRMED, either
// direction, any protocol.
func firstPacketStates() *Set {
	const confirmed = 1 << 3 // IPS_CONFIRMED among the status bits
	s := &Set{}
	for dir := uint32(0); dir < 2; dir++ {
		lo := uint32(CtsNew)<<ctKeyStateShift | dir<<ctKeyDirShift
		hi := lo | (confirmed-1)<<ctKeyStatusShift | ctKeyProtoMask
		s = Union(s, Range(U64(uint64(lo)), U64(uint64(hi))))
	}
	return s
}

// segmentView rewrites condition c of an entry of segment tc in hook's
// walk to the walk's packet (see the top of this file); false when no
// packet can match it there. notrack says the raw table has notrack
// rules (mangle.go).
func segmentView(c *Cond, hook int, tc tableChain, notrack bool) bool {
	if tc.table == ir.TableRaw && c[FieldCt] != nil {
		// No connection yet: conntrack_mt sees INVALID (UNTRACKED
		// after a notrack rule: rawCtView), and ignores the tuple.
		ct := rawCtView(c[FieldCt], notrack)
		if ct != nil && ct.Empty() {
			return false
		}
		for _, f := range []Field{FieldCtOrigSrc, FieldCtOrigDst, FieldCtOrigSport, FieldCtOrigDport,
			FieldCtReplSport, FieldCtReplDport} {
			c[f] = nil
		}
		c[FieldCt] = ct
	}
	switch tc.chain {
	case ir.ChainPrerouting:
		if !pinField(c, FieldOIF, 0) {
			return false
		}
		if hook == ChainForward && c[FieldTTL] != nil {
			c[FieldTTL] = decremented(c[FieldTTL])
		}
	case ir.ChainPostrouting:
		return pinField(c, FieldIIF, 0)
	}
	return true
}

// pinField decides c's condition on field f for a packet whose value is
// v: it drops the condition when v satisfies it, and reports false when
// not.
func pinField(c *Cond, f Field, v uint64) bool {
	if c[f] == nil {
		return true
	}
	if !c[f].Contains(U64(v)) {
		return false
	}
	c[f] = nil
	return true
}

// decremented returns the TTL condition s, on the value before ip_forward
// decrements it, as a condition on the value after (a forwarded packet's
// TTL was at least 2: the kernel drops the others before FORWARD).
func decremented(s *Set) *Set {
	out := &Set{}
	for _, iv := range s.Ivs {
		if iv.Hi.Less(U64(1)) {
			continue
		}
		lo := iv.Lo
		if lo.Less(U64(1)) {
			lo = U64(1)
		}
		out = Union(out, Range(lo.Dec(), iv.Hi.Dec()))
	}
	return out
}
