package cli

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// setMatchInDataPlane says whether the data plane computes the set
// match's classification field (compiler.FieldSets). Until it does, rulesets
// using -m set parse, print and compile, but every path that would apply
// them (iptables, iptables-restore, and iptables-restore --test, which
// promises that the real load would succeed) refuses them in
// checkDataPlaneSupport. Enabling the set match is setting this to true.
const setMatchInDataPlane = false

// statusSetMatchUnsupported is the exit status of a ruleset refused by the
// gate: iptables' PARAMETER_PROBLEM, as for a match it cannot load.
const statusSetMatchUnsupported = iptables.StatusParameter

// checkDataPlaneSupport refuses a ruleset the data plane cannot enforce
// yet: any set match, in any chain (also one no base chain reaches yet, so
// that whether a ruleset loads does not depend on its jumps). Never accept
// and ignore: a rule the data plane would skip changes what the firewall
// does.
func checkDataPlaneSupport(rs *ir.Ruleset) error {
	if setMatchInDataPlane {
		return nil
	}
	for _, c := range rs.Chains {
		for i, r := range c.Rules {
			for _, m := range r.Matches {
				if sm, ok := m.(*ir.SetMatch); ok {
					return &iptables.Error{
						Status: statusSetMatchUnsupported,
						Msg: fmt.Sprintf("xfw: the set match is not supported by the data plane yet (chain %s rule %d: --match-set %s %s)",
							c.Name, i+1, sm.Name, sm.Dirs),
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
	// err is the failure to load the store; lookups then find no set and
	// callers report err (setsErr) instead of "Set … doesn't exist.".
	err error
}

// lookup implements iptables.SetLookup.
func (l *ipsetLookup) lookup(name string) (iptables.SetInfo, bool) {
	if !l.loaded {
		l.loaded = true
		store, err := newIpsetStore()
		if err == nil {
			l.sets, err = store.Load()
		}
		if err != nil {
			l.err = fmt.Errorf("load ipsets: %w", err)
		}
	}
	if l.sets == nil {
		return iptables.SetInfo{}, false
	}
	s := l.sets.Get(name)
	if s == nil {
		return iptables.SetInfo{}, false
	}
	return setInfo(s), true
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
