package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// A chain that a jump reaches only through conditions that can never
// match in this compile (a jump behind `-i eth1` before eth1 exists) is
// not flattened: none of its rules produce entries. Its rules must still
// be refused here when xfw cannot enforce them, or the command that added
// them would succeed and the compile the interface's arrival triggers (the
// agent's, `xfw sync`) would fail, leaving the namespace unsyncable.
// checkUnreached makes the checks that do not depend on the packet's path
// for such chains: the hook-bound matches (checkHook), every match's
// conversion (ruleTerms), the probes whose conversion is pure (owner,
// conntrack's NAT states) and the jumps' nesting. NAT targets are
// checked for the nat table as a whole (checkNatReach).

// unreachedKey is a chain checked for one hook.
type unreachedKey struct {
	chain *ir.Chain
	hook  int
}

// checkUnreached checks the rules of chain, reached from hook through a
// jump that can never match, and of the chains it jumps to.
func (fl *flattener) checkUnreached(chain *ir.Chain, hook int) error {
	if fl.unreached == nil {
		fl.unreached = map[unreachedKey]bool{}
	}
	key := unreachedKey{chain, hook}
	if fl.unreached[key] {
		return nil
	}
	fl.unreached[key] = true
	infos := fl.stateOf(chain).infos
	for i, r := range chain.Rules {
		inf := fl.infoAt(infos, chain, i, r)
		if err := checkHook(r, hook); err != nil {
			return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
		}
		if _, err := fl.termsOf(inf, r); err != nil {
			return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
		}
		if err := checkPureProbes(r); err != nil {
			return fmt.Errorf("chain %s rule %d: %w", chain.Name, i+1, err)
		}
		if err := fl.checkJumpUnreached(chain, i, r, inf, hook); err != nil {
			return err
		}
	}
	return nil
}

// checkJumpUnreached checks, with checkUnreached, the chain that rule i
// (r, whose ruleInfo is inf) of chain jumps or goes to from hook; nothing
// for a rule of another target.
func (fl *flattener) checkJumpUnreached(chain *ir.Chain, i int, r *ir.Rule, inf *ruleInfo, hook int) error {
	if !r.Target.Jumps() {
		return nil
	}
	target, _, err := fl.jumpTarget(chain, i, r, inf)
	if err != nil {
		return err
	}
	return fl.checkUnreached(target, hook)
}

// checkPureProbes converts r's probed matches whose conversion has no
// side effect on the generation (the others allocate state as they
// convert) and returns the first refusal.
func checkPureProbes(r *ir.Rule) error {
	for _, m := range r.Matches {
		switch m := m.(type) {
		case *ir.OwnerMatch:
			if _, err := ownerProbe(m); err != nil {
				return err
			}
		case *ir.ConntrackMatch:
			if ctNatProbed(m) {
				if _, err := ctNatProbe(m); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
