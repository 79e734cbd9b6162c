package compiler

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// checkOtherTables refuses what the data plane cannot enforce in the
// tables besides filter: they may exist, with their built-in chains at
// policy ACCEPT and empty user chains, but hold no rule yet (NAT, mangle
// and raw rules are not compiled: loading them would ignore them).
func checkOtherTables(rs *ir.Ruleset) error {
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			if c.Builtin && c.Policy != ir.VerdictAccept {
				return fmt.Errorf("table %s: policy %s of chain %s is not supported by xfw's data plane yet", t.Table, c.Policy, c.Name)
			}
			if len(c.Rules) > 0 {
				return fmt.Errorf("table %s chain %s rule 1: rules in the %s table are not supported by xfw's data plane yet", t.Table, c.Name, t.Table)
			}
		}
	}
	return nil
}
