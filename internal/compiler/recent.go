package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The recent match (xt_recent) in the walk. Asking it changes a list of
// the namespace (an address added, its timestamps refreshed, removed), so
// it is a probe of kind ProbeRecent (probe.go) whose Arg is the match's
// index in Generation.Recents. Only packets that reach the rule and pass
// its earlier matches meet the probe, as only those reach recent_mt in
// the kernel; the list changes even when a later match of the rule fails.
// The data plane resolves the lists' names to the namespace's lists
// (internal/dataplane/recent.go), which outlive generations.

// Recent is one recent match of a generation.
type Recent struct {
	ir.RecentMatch
}

// MaxRecents bounds a generation's recent matches (the data plane's
// per-slot table of them, XFW_RECENT_RULES in bpf/recent.h).
const MaxRecents = 256

// RecentArgForward marks the Arg of a recent probe met in FORWARD
// (XFW_RC_ARG_FWD): recent_mt takes the TTL the packet had before
// forwarding, one more than FORWARD's rules see.
const RecentArgForward = 1 << 31

// MaxRecentStamps bounds the timestamps an entry keeps
// (XFW_RECENT_STAMPS): a list's ring is the kernel's but for --hitcount
// above this, which xfw refuses.
const MaxRecentStamps = 256

// recentIndex returns the index of match i (m) of rule r among the
// generation's recent matches (matchIndex).
func (fl *flattener) recentIndex(r *ir.Rule, i int, m *ir.RecentMatch) (uint32, error) {
	if m.StampsMask() >= MaxRecentStamps {
		return 0, fmt.Errorf("recent: --hitcount %d: more than %d timestamps per address are not supported by xfw", m.HitCount, MaxRecentStamps)
	}
	return fl.recents.index(r, i, MaxRecents, "recent matches in a family's ruleset are not supported by xfw", func() Recent {
		return Recent{RecentMatch: *m}
	})
}

// RecentAnswer is the simulator's recent list: whether match k
// (Generation.Recents) of the walk matches the packet, applying its
// changes. Nil in Packet: every list is empty and stays so.
type RecentAnswer func(k int, m *ir.RecentMatch) bool

// recentEmpty is recent_mt's answer for an address its list lacks: --set
// adds it and matches, the others do not match (both inverted by !).
func recentEmpty(m *ir.RecentMatch) bool {
	return (m.Flags&ir.RecentSet != 0) != m.Invert
}
