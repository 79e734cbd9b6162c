package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// raw PREROUTING before the route lookup. The kernel runs raw PREROUTING
// (priority -300) before conntrack, mangle and nat PREROUTING, and all of
// them before its routing decision; the data plane routes first to pick
// the walk (INPUT or FORWARD). When raw PREROUTING is judged on the
// packet alone, the data plane walks it before routing: the INPUT walk's
// raw segment (its view sees the TTL before ip_forward's decrement, as
// PREROUTING does on either path) up to Layout.RawPre[ChainInput]; a
// packet that segment drops costs no route lookup, and one the kernel's
// routing drops afterwards (no route, martian) is counted in raw
// PREROUTING as the kernel counts it. A packet it accepts is routed and
// walked from Layout.RawPre of the chosen walk on, past that walk's copy
// of the segment (the same rules and counters).
//
// Judged on the packet alone: every rule of raw PREROUTING and of the
// user chains it reaches has a target that changes neither the
// connection nor the packet (rawPreTarget) and no match on the
// connection or a socket (rawPreMatch). The others (NOTRACK, CT, a
// conntrack condition) are judged with the walk after routing and
// tracking, as before. An empty raw PREROUTING with policy ACCEPT has
// nothing to judge and gets no pre-walk (its policy counter misses the
// packets the kernel's routing drops: docs/differences.md).

// rawPreJudged reports whether chain c (raw PREROUTING of table t) is
// judged before the route lookup.
func rawPreJudged(t *ir.Ruleset, c *ir.Chain) bool {
	if len(c.Rules) == 0 && c.Policy != ir.VerdictDrop {
		return false
	}
	return rawPreChain(t, c, map[*ir.Chain]bool{})
}

// rawPreChain reports whether every rule of chain c and of the user
// chains it reaches (seen: those already looked at) qualifies.
func rawPreChain(t *ir.Ruleset, c *ir.Chain, seen map[*ir.Chain]bool) bool {
	if seen[c] {
		return true
	}
	seen[c] = true
	for _, r := range c.Rules {
		if !rawPreTarget(r.Target.Kind) {
			return false
		}
		for _, m := range r.Matches {
			if !rawPreMatch(m) {
				return false
			}
		}
		if r.Target.Kind != ir.TargetJump && r.Target.Kind != ir.TargetGoto {
			continue
		}
		if next := t.Chain(r.Target.Chain); next != nil && !rawPreChain(t, next, seen) {
			return false
		}
	}
	return true
}

// rawPreTarget reports whether target kind k can be judged before the
// route lookup: it decides or moves the walk, logs, or sets the mark (the
// route lookup then takes it, as the kernel's after PREROUTING does).
func rawPreTarget(k ir.TargetKind) bool {
	switch k {
	case ir.TargetNone, ir.TargetAccept, ir.TargetDrop, ir.TargetReturn, ir.TargetJump,
		ir.TargetGoto, ir.TargetLog, ir.TargetNFLog, ir.TargetMark:
		return true
	}
	return false
}

// rawPreMatch reports whether match m reads the packet alone: not its
// connection (which the data plane tracks after routing) nor its socket.
func rawPreMatch(m ir.Match) bool {
	switch m.(type) {
	case *ir.ConntrackMatch, *ir.ConnmarkMatch, *ir.ConnlimitMatch, *ir.OwnerMatch:
		return false
	}
	return true
}
