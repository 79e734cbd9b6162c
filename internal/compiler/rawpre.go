package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// The PREROUTING chains before the route lookup. The kernel runs raw
// PREROUTING (priority -300), conntrack (-200), mangle (-150) and nat
// (-100) PREROUTING, and all of them before its routing decision; the data
// plane routes first to pick the walk (INPUT or FORWARD). When raw
// PREROUTING, and mangle PREROUTING after it, are judged on the packet
// alone, the data plane walks them before routing: the INPUT walk's raw
// and mangle PREROUTING segments (their view sees the TTL before
// ip_forward's decrement, as PREROUTING does on either path) up to
// Layout.RawPre[ChainInput]; a packet they drop costs no route lookup, one
// the kernel's routing drops afterwards (no route, martian) is counted
// there as the kernel counts it, and the mark they leave is the one the
// route lookup takes (ip rule fwmark). A packet they accept is routed and
// walked from Layout.RawPre of the chosen walk on, past that walk's copy
// of the segments (the same rules and counters).
//
// Judged on the packet alone: every rule of the chain and of the user
// chains it reaches has a target that decides, logs or sets the mark
// (preRouteTarget; in raw also the notrack targets: the data plane then
// tracks no connection for the packet, routed or not), and no match on a
// connection or a socket (preRouteMatch; in raw a state condition, which
// there sees INVALID or, after a notrack rule, UNTRACKED). mangle
// PREROUTING, which the kernel runs after conntrack, is judged before
// routing only when raw PREROUTING is too (or absent). An empty chain
// with policy ACCEPT is judged too: the kernel counts its policy for
// every packet, routed or not; when all of them are such chains
// (Layout.PrePassive) the data plane walks them for the packets its
// routing drops alone, the walk after routing counting the others. nat
// PREROUTING, and the chains not judged before routing, are walked after
// routing and tracking; for a packet the routing drops, up to
// Layout.PreEnd (the data plane's unrouted walk: the kernel counts there
// every such packet, nat PREROUTING those of no confirmed connection, and
// a DNAT, mark or TTL there may route it after all).

// preRouteJudged reports whether chain c (PREROUTING of table t, named
// table) can be judged before the route lookup.
func preRouteJudged(t *ir.Ruleset, table string, c *ir.Chain) bool {
	if table != ir.TableRaw && table != ir.TableMangle {
		return false
	}
	return preRouteChain(t, table, c, map[*ir.Chain]bool{})
}

// preRouteChain reports whether every rule of chain c and of the user
// chains it reaches (seen: those already looked at) qualifies.
func preRouteChain(t *ir.Ruleset, table string, c *ir.Chain, seen map[*ir.Chain]bool) bool {
	if seen[c] {
		return true
	}
	seen[c] = true
	for _, r := range c.Rules {
		if !preRouteTarget(table, r.Target.Kind) {
			return false
		}
		for _, m := range r.Matches {
			if !preRouteMatch(table, m) {
				return false
			}
		}
		if !r.Target.Jumps() {
			continue
		}
		if next := t.Chain(r.Target.Chain); next != nil && !preRouteChain(t, table, next, seen) {
			return false
		}
	}
	return true
}

// preRouteTarget reports whether target kind k of a rule of table can be
// judged before the route lookup: it decides or moves the walk, logs,
// sets the mark (the route lookup then takes it, as the kernel's after
// PREROUTING does) or, in raw, exempts the packet from connection
// tracking (which the data plane runs after routing).
func preRouteTarget(table string, k ir.TargetKind) bool {
	switch k {
	case ir.TargetNone, ir.TargetAccept, ir.TargetDrop, ir.TargetReturn, ir.TargetJump,
		ir.TargetGoto, ir.TargetLog, ir.TargetNFLog, ir.TargetMark:
		return true
	case ir.TargetNotrack, ir.TargetCTNotrack:
		return table == ir.TableRaw
	}
	return false
}

// preRouteMatch reports whether match m of a rule of table reads the
// packet alone: not its connection (which the data plane tracks after
// routing) nor its socket. In raw, before connection tracking, a
// condition on the state alone reads no connection: conntrack_mt sees
// INVALID, or UNTRACKED after a notrack rule (rawCtView).
func preRouteMatch(table string, m ir.Match) bool {
	switch m := m.(type) {
	case *ir.ConntrackMatch:
		return table == ir.TableRaw && stateOnly(m)
	case *ir.ConnmarkMatch, *ir.ConnlimitMatch, *ir.OwnerMatch:
		return false
	}
	return true
}

// stateOnly reports whether conntrack match m has no condition but
// --ctstate (--state).
func stateOnly(m *ir.ConntrackMatch) bool {
	bare := ir.ConntrackMatch{StateAlias: m.StateAlias, States: m.States}
	return *m == bare
}

// rawOutputPreWalked reports whether the OUTPUT walk's raw segment is
// judged by itself before the TC egress hook translates and tracks the
// host's packet (Layout.RawPre[ChainOutput]): the kernel's raw OUTPUT
// runs before conntrack and nat OUTPUT, so a packet its notrack rule
// exempts is neither tracked nor translated back (a reply of a connection
// nat INPUT's SNAT translated leaves as its socket sent it, to the new
// source), and one it drops was never tracked. Only with a notrack rule
// in raw (otherwise the walk after tracking is the same) and, besides
// preRouteJudged's conditions, no -m tcpmss (whose value the hook reads
// after this walk).
func rawOutputPreWalked(rs *ir.Ruleset) bool {
	t := rs.TableByName(ir.TableRaw)
	if t == nil || !hasNotrack(t) {
		return false
	}
	c := t.Chain(ir.ChainOutput)
	if c == nil {
		return false
	}
	return !reachesMatch(t, c, map[*ir.Chain]bool{}, func(m ir.Match) bool {
		_, ok := m.(*ir.TCPMSSMatch)
		return ok
	})
}

// reachesMatch reports whether a rule of chain c or of a user chain it
// reaches has a match that is reports (seen: the chains looked at).
func reachesMatch(t *ir.Ruleset, c *ir.Chain, seen map[*ir.Chain]bool, is func(ir.Match) bool) bool {
	if seen[c] {
		return false
	}
	seen[c] = true
	for _, r := range c.Rules {
		for _, m := range r.Matches {
			if is(m) {
				return true
			}
		}
		if !r.Target.Jumps() {
			continue
		}
		if next := t.Chain(r.Target.Chain); next != nil && reachesMatch(t, next, seen, is) {
			return true
		}
	}
	return false
}
