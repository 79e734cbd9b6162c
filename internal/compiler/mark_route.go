package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// Routing by the packet's mark. The kernel routes a received packet after
// the PREROUTING chains (raw, mangle, nat) with the mark they left it
// (ip rule fwmark); the data plane routes before its walk, with mark 0.
// When a PREROUTING chain can change the mark, Layout.PreEnd tells the
// data plane where each walk's PREROUTING segments end: it stops there,
// routes the packet again with its mark and resumes the walk of the chain
// that route picks at the same point (bpf/xfw.c, xfw_xdp_rerouted).

// preroutingMarks reports whether a PREROUTING chain of the tables that
// have one (raw, mangle, nat), or a user chain it reaches, holds a rule
// that changes the packet's mark: MARK, or CONNMARK --restore-mark. (A
// mark set in the other chains only, for tc or a socket, costs the data
// plane no split walk.)
func preroutingMarks(rs *ir.Ruleset) bool {
	for _, name := range []string{ir.TableRaw, ir.TableMangle, ir.TableNat} {
		t := rs.TableByName(name)
		if t == nil {
			continue
		}
		if c := t.Chain(ir.ChainPrerouting); c != nil && reachesMarkChange(t, c, map[*ir.Chain]bool{}) {
			return true
		}
	}
	return false
}

// reachesMarkChange reports whether chain c of table t, or a user chain it
// jumps or goes to, changes the packet's mark; seen holds the chains
// already looked at.
func reachesMarkChange(t *ir.Ruleset, c *ir.Chain, seen map[*ir.Chain]bool) bool {
	if seen[c] {
		return false
	}
	seen[c] = true
	for _, r := range c.Rules {
		if changesMark(&r.Target) {
			return true
		}
		if r.Target.Kind != ir.TargetJump && r.Target.Kind != ir.TargetGoto {
			continue
		}
		if next := t.Chain(r.Target.Chain); next != nil && reachesMarkChange(t, next, seen) {
			return true
		}
	}
	return false
}

// changesMark reports whether target t changes the packet's mark.
func changesMark(t *ir.Target) bool {
	switch t.Kind {
	case ir.TargetMark:
		return true
	case ir.TargetConnmark:
		return t.Connmark != nil && t.Connmark.Mode == ir.ConnmarkRestore
	}
	return false
}

// notePreEnd records, after segment tc of hook's walk ended at exit
// (the position after its policy entry), where the walk's PREROUTING
// segments end: the last one seen wins (they come first in the walk).
func (fl *flattener) notePreEnd(hook int, tc tableChain, exit uint32) {
	if tc.chain == ir.ChainPrerouting {
		fl.preEnd[hook] = exit + 1
	}
}
