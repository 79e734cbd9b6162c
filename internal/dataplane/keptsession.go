package dataplane

import (
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/ir"
)

// A resident process (the agent serving xfw's commands) keeps the running
// state it opened from one session to the next instead of finding the
// programs and opening their maps again for every command. Other processes
// change what is loaded only under xfw's lock, and each one that opens the
// running state under it counts that in the xfw_build map's buildKeyChange
// entry first (keepForSession, adoptForSession): a session of the
// resident process that finds the count moved since its last one opens
// the state again. xfw stop opens no state and so counts nowhere, and
// another build cannot count in this one's maps: the kept state is also
// given up when the interface it was last seen on no longer runs its XDP
// program (stillAttached).

// KeepSessionState makes this process's sessions keep their opened state
// for the next one while no other process has opened it under xfw's lock
// meanwhile. For a resident process whose commands each hold the lock; a
// short-lived command closes its state at the session's end.
func KeepSessionState() {
	session.mu.Lock()
	defer session.mu.Unlock()
	session.keep = true
}

// DropKeptState closes the kept state, so the next session opens it again
// (after a command that failed in an unexpected way). When another
// command's session has begun meanwhile, the state is closed at its end.
func DropKeptState() {
	session.mu.Lock()
	defer session.mu.Unlock()
	if session.active {
		session.dropAtEnd = true
		return
	}
	dropKeptLocked()
}

// changeCount reads the count of other processes' sessions in s's maps.
func changeCount(s *state) (uint64, error) {
	var n uint64
	err := buildMapOf(s).Lookup(uint32(buildKeyChange), &n)
	return n, err
}

// buildMapOf returns s's xfw_build map.
func buildMapOf(s *state) *ebpf.Map { return s.maps["xfw_build"] }

// noteChange counts a session of a process that does not keep its state.
// (Updating an array map's existing entry fails only on a closed
// descriptor, which this process's own state is not.)
func noteChange(s *state) {
	if buildMapOf(s) == nil {
		return
	}
	n, err := changeCount(s)
	if err != nil {
		return
	}
	_ = buildMapOf(s).Update(uint32(buildKeyChange), n+1, ebpf.UpdateAny)
}

// keptAt is an interface that runs the kept state's XDP program.
type keptAt struct {
	st      *state
	ifindex int
	prog    ebpf.ProgramID
}

// reviveKeptLocked checks at a session's start (under xfw's lock) that the
// kept state is still what is loaded: unchanged by any other process since
// the last session ended (the count), and its XDP program still attached
// where it was (xfw stop, which removes it, and a build that cannot count
// in this build's maps). Otherwise it closes it. session.mu is held.
func reviveKeptLocked() {
	st := session.st
	if st == nil {
		return
	}
	t := time.Now()
	if n, err := changeCount(st); err == nil && n == session.seen && stillAttached(session.kept, st) {
		TraceSince("session: kept state reused", t)
		return
	}
	TraceSince("session: kept state stale", t)
	dropKeptLocked()
}

// stillAttached reports whether at's interface still runs st's XDP program:
// from the links the network watch kept while it saw no change (an XDP
// program attached or detached through netlink is a link change the watch
// is told of before the request that made it returns: WatchNetwork), else
// by one netlink request.
func stillAttached(at keptAt, st *state) bool {
	if at.st != st || at.ifindex == 0 {
		return false
	}
	if links, kept := netFacts.keptLinks(); kept {
		for _, l := range links {
			if l.Attrs().Index == at.ifindex {
				return runsXDP(l, at.prog)
			}
		}
		return false
	}
	l, err := netlink.LinkByIndex(at.ifindex)
	if err != nil {
		return false
	}
	return runsXDP(l, at.prog)
}

// runsXDP reports whether l runs XDP program prog, attached through
// netlink.
func runsXDP(l netlink.Link, prog ebpf.ProgramID) bool {
	x := l.Attrs().Xdp
	return x != nil && x.Attached && ebpf.ProgramID(x.ProgId) == prog
}

// keepLocked records, at a session's end (still under xfw's lock), the
// count the next session compares with and, for a state opened in this
// session, an interface its XDP program runs on; a state that runs on
// none is not kept. session.mu is held.
func keepLocked() {
	st := session.st
	if st == nil || session.dropAtEnd {
		session.dropAtEnd = false
		dropKeptLocked()
		return
	}
	n, err := changeCount(st)
	if err != nil || !findAttached(st) {
		dropKeptLocked()
		return
	}
	session.seen = n
}

// findAttached makes session.kept an interface running st's XDP program,
// unless it is one already.
func findAttached(st *state) bool {
	if session.kept.st == st && session.kept.ifindex != 0 {
		return true
	}
	session.kept = keptAt{}
	prog, _, err := st.programIDs()
	if err != nil {
		return false
	}
	links, err := ListLinks()
	if err != nil {
		return false
	}
	for _, l := range links {
		if runsXDP(l, prog) {
			session.kept = keptAt{st: st, ifindex: l.Attrs().Index, prog: prog}
			return true
		}
	}
	return false
}

// dropKeptLocked closes the kept state. session.mu is held.
func dropKeptLocked() {
	if session.st != nil {
		session.st.shared = false
		session.st.Close()
		session.st = nil
	}
	session.kept = keptAt{}
}

// adoptForSession makes s, a state Current opened, the session's unless
// the session has one already: a reader without xfw's lock (the agent's
// interface checks) may open its own while a session starts, and must not
// replace, and so close, the state that session's command is using.
func adoptForSession(s *state) {
	session.mu.Lock()
	defer session.mu.Unlock()
	if !session.active || s == nil || session.st != nil {
		return
	}
	s.shared = true
	session.st = s
	if !session.keep {
		noteChange(s)
	}
}

// currentOwn opens the running state for a reader that may run without
// xfw's lock (the agent's interface checks and address refreshes, its LOG
// reader), never sharing the session's: in the agent a served command
// holding the lock may be changing that one's banks meanwhile.
func currentOwn() (*state, error) {
	return currentUncached()
}

// Stamp identifies a family's running generation as a resident process's
// session sees it: the kept state and the number of generations swapped in
// through it. Two equal stamps mean nothing has changed the family's
// ruleset in between: another process's session makes the session open the
// state again (a new stamp), and this process's swaps count.
type Stamp struct {
	st    *state
	swaps uint64
}

// SessionStamp returns the stamp of fam's running generation for the
// current session, after OpenRunning reported xfw loaded; ok is false
// outside a resident process's session (KeepSessionState), where nothing
// outlives the command to be stamped.
func SessionStamp(fam ir.Family) (stamp Stamp, ok bool) {
	session.mu.Lock()
	defer session.mu.Unlock()
	if !session.active || !session.keep || session.st == nil || session.dropAtEnd {
		return Stamp{}, false
	}
	return Stamp{st: session.st, swaps: session.st.swaps[familyIndex(fam)]}, true
}

// RunningCounters returns fam's live counters, indexed as RunningRuleset
// applies them, for a caller that knows the running ruleset already (a
// resident process's cache, SessionStamp); nil when none is loaded.
func RunningCounters(fam ir.Family) ([]ir.Counters, error) {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil
	}
	return cur.readCounters(cur.slot(fam))
}

// ApplyCounters copies counters (RunningCounters) into rs and numbers its
// rules' Handles, as RunningRuleset does to the ruleset it decodes. With
// counters nil it numbers the Handles only.
func ApplyCounters(rs *ir.Ruleset, counters []ir.Counters) { applyCounters(rs, counters) }

// ApplyCountersCounted is ApplyCounters for a ruleset decoded without some
// chains' rules (RunningRulesetSkip): counts is how many rules each chain
// had (ir.Encoded.RuleCounts).
func ApplyCountersCounted(rs *ir.Ruleset, counts []int, counters []ir.Counters) {
	applyCountersCounted(rs, counts, counters)
}
