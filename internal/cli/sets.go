package cli

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/lpm"
)

// statusSetUnsupported is the exit status of a ruleset whose set match
// the data plane cannot evaluate: iptables' PARAMETER_PROBLEM, as for a
// match it cannot load.
const statusSetUnsupported = iptables.StatusParameter

// setUsable reports why the data plane cannot look packets up in s for a
// rule (nil when it can): it evaluates hash:ip and hash:net sets (one
// address dimension, looked up by the match's first direction, as the
// kernel ignores directions beyond a set's dimensions) without timeouts
// (xfw's data plane does not expire entries yet). Never accept and ignore:
// a rule the data plane would skip changes what the firewall does.
func setUsable(s *ipset.Set) error {
	if s.Type != ipset.HashIP && s.Type != ipset.HashNet {
		return fmt.Errorf("sets of type %s are not supported in rules yet (hash:ip and hash:net are)", s.Type)
	}
	if s.Options.HasTimeout {
		return fmt.Errorf("sets with timeouts are not supported in rules yet")
	}
	return nil
}

// checkDataPlaneSupport refuses a ruleset whose set matches the data plane
// cannot evaluate, in any chain (also one no base chain reaches yet, so
// that whether a ruleset loads does not depend on its jumps).
func checkDataPlaneSupport(rs *ir.Ruleset, sets *ipsetLookup) error {
	for _, c := range rs.Chains {
		for i, r := range c.Rules {
			for _, m := range r.Matches {
				sm, ok := m.(*ir.SetMatch)
				if !ok {
					continue
				}
				s, err := sets.set(sm.Name)
				if err == nil {
					err = setUsable(s)
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

// setTables builds the lookup tables of gen's set conditions from the
// sets' current members: each prefix answers dataplane.SetMember, or
// dataplane.SetNomatch for a nomatch entry.
func setTables(gen *compiler.Generation, sets *ipsetLookup) ([]dataplane.SetTable, error) {
	var out []dataplane.SetTable
	for _, sc := range gen.SetConds {
		s, err := sets.set(sc.Name)
		if err == nil {
			err = setUsable(s)
		}
		if err != nil {
			return nil, fmt.Errorf("--match-set %s: %w", sc.Name, err)
		}
		fam := lpm.IPv4
		if sc.Family == ir.IPv6 {
			fam = lpm.IPv6
		}
		var entries []lpm.Entry
		s.All(func(e *ipset.Entry) bool {
			v := uint32(dataplane.SetMember)
			if e.Nomatch {
				v = dataplane.SetNomatch
			}
			entries = append(entries, lpm.Entry{Prefix: e.Elem.Prefix, Value: v})
			return true
		})
		t, err := lpm.Build(fam, entries, lpm.Options{})
		if err != nil {
			return nil, fmt.Errorf("--match-set %s: build its lookup table: %w", sc.Name, err)
		}
		out = append(out, dataplane.SetTable{Direct: t.Direct(), Ranges: t.Ranges(), Nomatch: s.Type == ipset.HashNet})
	}
	return out, nil
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
