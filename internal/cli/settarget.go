package cli

import (
	"fmt"
	"time"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/settable"
)

// checkSetTargets refuses a ruleset whose SET targets write sets the data
// plane cannot write (settable.WriteUsable), in any table and chain.
func checkSetTargets(rs *ir.Ruleset, sets *ipsetLookup) error {
	check := func(table string, chains []*ir.Chain) error {
		for _, c := range chains {
			for i, r := range c.Rules {
				t := r.Target.Set
				if r.Target.Kind != ir.TargetSet || t == nil {
					continue
				}
				for _, w := range []struct {
					opt, name string
					dirs      ir.SetDirs
				}{{"--add-set", t.AddName, t.AddDirs}, {"--del-set", t.DelName, t.DelDirs}} {
					if w.dirs.Dim == 0 {
						continue
					}
					s, err := sets.set(w.name)
					if err == nil {
						err = settable.WriteUsable(s)
					}
					if err != nil {
						return &iptables.Error{
							Status: statusSetUnsupported,
							Msg: fmt.Sprintf("xfw: table %s chain %s rule %d: %s %s %s: %v",
								table, c.Name, i+1, w.opt, w.name, w.dirs, err),
						}
					}
				}
			}
		}
		return nil
	}
	if err := check("filter", rs.Chains); err != nil {
		return err
	}
	for _, t := range rs.Tables {
		if err := check(t.Table, t.Chains); err != nil {
			return err
		}
	}
	return nil
}

// syncSetWrites moves the members SET targets wrote into the stored sets
// before a ruleset change replaces the tables that hold them: loading the
// sets does (namespaceStore.Load), so only a command that has not loaded
// them yet loads them, when a running generation writes sets.
func syncSetWrites(sets *ipsetLookup) error {
	if sets == nil || sets.loaded {
		return nil
	}
	writes, err := settable.RunningWrites()
	if err != nil || !writes {
		return err
	}
	sets.load()
	return sets.err
}

// takeSetWrites moves the members SET targets wrote into ss, the sets
// store holds (settable.TakeWritesHeld), committing them when any changed,
// and returns the sets as stored and the written tables read (nil when
// none; the caller closes it), whose later adds a reload catches up.
func takeSetWrites(store ipset.Store, ss *ipset.Sets) (*ipset.Sets, *settable.WriteWindow, error) {
	t := time.Now()
	written := ss.Clone()
	changed, w, err := settable.TakeWritesHeld(written)
	dataplane.TraceSince("ipset: take the members SET targets wrote", t)
	if err != nil {
		return nil, nil, fmt.Errorf("read the members SET targets wrote: %w", err)
	}
	if !changed {
		return ss, w, nil
	}
	if err := store.Commit(ss, written); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("store the members SET targets wrote: %w", err)
	}
	return written, w, nil
}

// catchUpSetWrites copies into the running generation's new written
// tables what the data plane added to the old ones since w read them
// (settable.WriteWindow.CatchUp), and closes w. The caller holds the lock.
func catchUpSetWrites(w *settable.WriteWindow) error {
	defer w.Close()
	if err := w.CatchUp(ir.IPv4, ir.IPv6); err != nil {
		return fmt.Errorf("copy the members SET targets wrote meanwhile: %w", err)
	}
	return nil
}

// writtenStore is a store that is not the namespace's (XFW_IPSET_FILE)
// whose Load, like namespaceStore's, moves in the members SET targets
// wrote.
type writtenStore struct{ ipset.Store }

// Load implements ipset.Store.
func (w writtenStore) Load() (*ipset.Sets, error) {
	ss, err := w.Store.Load()
	if err != nil {
		return nil, err
	}
	ss, win, err := takeSetWrites(w.Store, ss)
	win.Close()
	return ss, err
}
