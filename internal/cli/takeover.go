package cli

import (
	"errors"
	"fmt"

	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ir"
)

func init() { commands["takeover"] = runTakeover }

const takeoverUsage = `usage: xfw takeover

Replaces the programs another build of xfw loaded in this network namespace
(the package before an upgrade) with this build's, without a moment in
which an interface is unfiltered: the running rulesets, counters and sets
are read from the old build, compiled by this one and swapped in on every
interface in place; tracked connections are kept when both builds lay them
out alike. Exits 0 when done or when there is nothing to take over (no xfw,
or this build, runs here), 1 when the takeover failed: the old build's
programs then stay in charge, untouched.
`

// runTakeover is `xfw takeover`, run by the package's postinst and before
// the units' own commands (docs/design.md, "Upgrades: the takeover").
func runTakeover(name string, args []string, env Env) int {
	if len(args) > 0 {
		fmt.Fprint(env.Stderr, takeoverUsage)
		return exitParameter
	}
	msg, err := takeover()
	if errors.Is(err, dataplane.ErrNoOtherBuild) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "xfw takeover: %v\n", err)
		return exitOther
	}
	for _, m := range msg {
		fmt.Fprintf(env.Stderr, "xfw takeover: %s\n", m)
	}
	return exitOK
}

// takeover replaces the other build's programs (dataplane.BeginTakeover)
// and returns what it reports: what it kept and what it lost.
func takeover() ([]string, error) {
	unlock, err := lock(waitSpec{set: true})
	if err != nil {
		return nil, err
	}
	defer unlock()
	end := dataplane.BeginSession()
	defer end()
	ao, err := attachOptions()
	if err != nil {
		return nil, err
	}
	tk, err := dataplane.BeginTakeover(ao)
	if err != nil {
		return nil, err
	}
	defer tk.Abort()
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		rs := tk.Rulesets[fam]
		if rs == nil {
			continue
		}
		// The counters the old build holds start the new generation's
		// (installMode without keepCounters: the rules' own).
		if err := compileAndInstall(fam, ir.NewRuleset(fam), rs, installMode{}, ao, &ipsetLookup{}); err != nil {
			return nil, fmt.Errorf("%s ruleset: %w; the running build's programs stay in charge", fam, err)
		}
	}
	if err := tk.Commit(); err != nil {
		return nil, fmt.Errorf("swap the programs: %w; the running build's programs stay in charge", err)
	}
	msg := []string{fmt.Sprintf("build %016x replaced build %016x on %d interfaces", tk.NewBuild, tk.OldBuild, tk.Swapped)}
	if tk.ConnsShared {
		msg = append(msg, "tracked connections and NAT mappings kept")
	} else {
		msg = append(msg, fmt.Sprintf("the connection tables' layout differs between the builds: %d tracked connections and their NAT mappings are lost (their packets are judged as new connections)", tk.ConnsLost))
	}
	if tk.RatesCopied {
		msg = append(msg, "hashlimit tables and recent lists kept")
	} else {
		msg = append(msg, "the hashlimit tables' and recent lists' layout differs between the builds: hashlimit buckets start full, recent lists empty")
	}
	msg = append(msg, "limit buckets start full, connlimit counts empty, ipset member counters from their last stored value")
	return msg, nil
}
