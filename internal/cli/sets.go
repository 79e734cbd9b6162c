package cli

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/settable"
)

// statusSetUnsupported is the exit status of a ruleset whose set match
// the data plane cannot evaluate: iptables' PARAMETER_PROBLEM, as for a
// match it cannot load.
const statusSetUnsupported = iptables.StatusParameter

// checkDataPlaneSupport refuses a ruleset whose set matches the data plane
// cannot evaluate, in any chain (also one no base chain reaches yet, so
// that whether a ruleset loads does not depend on its jumps).
func checkDataPlaneSupport(rs *ir.Ruleset, sets *ipsetLookup) error {
	if err := checkSetTargets(rs, sets); err != nil {
		return err
	}
	for _, c := range rs.Chains {
		for i, r := range c.Rules {
			for _, m := range r.Matches {
				sm, ok := m.(*ir.SetMatch)
				if !ok {
					continue
				}
				s, err := sets.set(sm.Name)
				if err == nil {
					err = settable.Usable(s)
				}
				if err != nil {
					return &iptables.Error{
						Status: statusSetUnsupported,
						Msg: fmt.Sprintf("xfw: chain %s rule %d: --match-set %s %s: %v",
							c.Name, i+1, sm.Name, sm.Dirs, err),
					}
				}
			}
		}
	}
	return nil
}

// ipsetLookup serves iptables' set match with the sets of `xfw ipset`'s
// store (newIpsetStore), loaded on the first lookup only: rulesets without
// set matches never touch the store.
type ipsetLookup struct {
	loaded bool
	sets   *ipset.Sets
	// fresh are the sets whose members changed since the running
	// generations' tables were built (an `ipset` command's changes that
	// could not be patched in): their tables are built afresh, the others
	// taken over (settable.Build).
	fresh map[string]bool
	// err is the failure to load the store; lookups then find no set and
	// callers report err (setsErr) instead of "Set … doesn't exist.".
	err error
	// window holds the written tables the load read (nil: none), whose
	// adds meanwhile a commit that replaces them catches up with.
	window *settable.WriteWindow
}

// load reads the store once.
func (l *ipsetLookup) load() {
	if l.loaded {
		return
	}
	l.loaded = true
	store, err := newIpsetStore()
	if err == nil {
		l.sets, err = store.Load()
	}
	if ns, ok := store.(*namespaceStore); ok {
		l.window, ns.window = ns.window, nil
	}
	if err != nil {
		l.err = fmt.Errorf("load ipsets: %w", err)
	}
}

// lookup implements iptables.SetLookup.
func (l *ipsetLookup) lookup(name string) (iptables.SetInfo, bool) {
	s, err := l.set(name)
	if err != nil {
		return iptables.SetInfo{}, false
	}
	return setInfo(s), true
}

// set returns the set called name.
func (l *ipsetLookup) set(name string) (*ipset.Set, error) {
	l.load()
	if l.err != nil {
		return nil, l.err
	}
	s := l.sets.Get(name)
	if s == nil {
		return nil, fmt.Errorf("set %s does not exist", name)
	}
	return s, nil
}

// setsErr returns the failure to load the sets, if a lookup met one: it
// replaces the parser's error, which took every set for missing.
func (l *ipsetLookup) setsErr(parseErr error) error {
	if l.err != nil {
		return l.err
	}
	return parseErr
}

// setInfo describes a set for the set match: its family (none for
// list:set and bitmap:port) and the number of its dimensions (the parts of
// its type name; 0 for list:set, whose members decide).
func setInfo(s *ipset.Set) iptables.SetInfo {
	info := iptables.SetInfo{Type: s.Type.String()}
	switch s.Options.Family {
	case ipset.Inet:
		info.Family = ir.IPv4
	case ipset.Inet6:
		info.Family = ir.IPv6
	}
	if s.Type != ipset.ListSet {
		_, parts, _ := strings.Cut(info.Type, ":")
		info.Dims = strings.Count(parts, ",") + 1
	}
	return info
}
