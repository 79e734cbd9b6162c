package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// runIptables is `iptables …` / `ip6tables …`: one command applied to the
// running ruleset and swapped in atomically, counters of untouched rules
// kept.
func runIptables(name string, args []string, env Env) int {
	fam := familyOf(name)
	t0 := time.Now()
	wait, args := takeWait(args)
	sets := &ipsetLookup{}
	cmd, err := iptables.ParseCommandWith(fam, args, iptables.ParseOptions{Sets: sets.lookup})
	if err != nil {
		return report(env, name, sets.setsErr(err))
	}
	for _, n := range cmd.Notices {
		fmt.Fprintln(env.Stderr, n)
	}
	switch cmd.Kind {
	case iptables.CmdVersion:
		fmt.Fprintf(env.Stdout, "%s v1.8.9 (xfw %s)\n", name, Version)
		return exitOK
	case iptables.CmdHelp:
		fmt.Fprintf(env.Stdout, "%s v1.8.9 (xfw %s)\n%s", name, Version, iptables.HelpText(fam, cmd.HelpProtocol))
		return exitOK
	}

	t0 = dataplane.TraceSince("command: parse", t0)
	wait.gone = env.Gone
	unlock, err := lock(wait)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return exitResource
	}
	defer func() { t := time.Now(); unlock(); dataplane.TraceSince("command: unlock", t) }()
	t0 = dataplane.TraceSince("command: lock", t0)
	// The agent's cache learns how the command ended before the lock is
	// released (cmdcache.go).
	var committed *ir.Ruleset
	var index *ir.Encoded         // where committed's rules lie in its binary form
	var installed *keptGeneration // the generation a change in place installed
	succeeded := false
	defer func() {
		t := time.Now()
		cmdCache.afterCommand(fam, cmd.Kind, committed, index, installed, succeeded)
		dataplane.TraceSince("command: cache stored", t)
	}()

	// The parse above read the sets before the lock; what follows reads
	// them again, once, under it.
	locked := &ipsetLookup{}
	var run runningParts
	if mayChangeInPlace(cmd) {
		loaded, err := dataplane.OpenRunning()
		if err != nil {
			return report(env, name, err)
		}
		if kg := cmdCache.takeGeneration(fam); kg != nil && loaded {
			run.gen = keptReader(fam, kg)
		} else if loaded {
			run.gen = readGeneration(fam)
			// Wait for the reader before the lock is released
			// (deferred calls run last in, first out).
			defer run.gen.result()
		}
	}
	t0 = dataplane.TraceSince("command: open running", t0)
	old, encoded, err := runningForCommand(fam, commandReadsCounters(cmd))
	if err != nil {
		return report(env, name, err)
	}
	if cmd.LeavesRulesAlone() {
		run.encoded = encoded
	}
	if cmdCache.on() && cacheableChange(cmd.Kind) {
		run.index, run.installed = &index, &installed
	}
	// The command works on a copy (its Apply copies again, and keeps the
	// copy only when it succeeds); old stays the running ruleset, whose
	// counters and rules the commit compares with.
	t := time.Now()
	var rs *ir.Ruleset
	if cmd.LeavesRulesAlone() {
		rs = old.CloneChains()
	} else {
		rs = old.Clone()
	}
	t = dataplane.TraceSince("command: copy the ruleset", t)
	var out string
	if cmd.Kind == iptables.CmdList {
		table := rs.TableByName(cmd.Table)
		if table == nil {
			table = ir.NewTable(fam, cmd.Table)
		}
		out, err = listChains(table, cmd)
		if err == nil && cmd.Zero {
			_, err = (&iptables.Command{Kind: iptables.CmdZero, Family: fam, Table: cmd.Table, Chain: cmd.Chain}).Apply(rs)
		}
	} else {
		out, err = cmd.Apply(rs)
	}
	if err != nil {
		return report(env, name, err)
	}
	dataplane.TraceSince("command: apply", t)
	fmt.Fprint(env.Stdout, out)

	switch cmd.Kind {
	case iptables.CmdList, iptables.CmdListRules, iptables.CmdCheck:
		if !cmd.Zero {
			succeeded = true
			return exitOK
		}
		fallthrough
	case iptables.CmdZero, iptables.CmdZeroNum:
		if old.TableByName(cmd.Table) == nil {
			// A table no command has made yet holds no counter of
			// the data plane; zeroing it commits nothing, as listing
			// it does (docs/differences.md, Tables).
			succeeded = true
			return exitOK
		}
		// Counters only: no new generation, the bases move. The kernel's
		// limit buckets start full again (iptables replaces the table),
		// and libiptc's commit writes the table's policy counters back
		// as zero (counterSources).
		restartPolicies(rs, cmd.Table)
		if err := dataplane.SetCounters(fam, allCounters(rs)); err != nil {
			return report(env, name, err)
		}
		if err := dataplane.ResetLimits(fam); err != nil {
			return report(env, name, err)
		}
		succeeded = true
		return exitOK
	}
	ao, err := attachOptions()
	if err != nil {
		return report(env, name, err)
	}
	defer dataplane.TraceSince("command: commit", time.Now())
	switch {
	case cmd.Kind == iptables.CmdNewChain:
		err = commitNewChain(fam, old, rs, cmd.Table, ao, locked, run)
	case cmd.Table != ir.TableFilter:
		// Only the filter table's chains change in place.
		err = commit(fam, old, rs, true, []string{cmd.Table}, ao, locked)
	case cmd.Kind == iptables.CmdAppend:
		err = commitAppend(fam, old, rs, cmd.Chain, ao, locked, run)
	case cmd.Kind == iptables.CmdInsert:
		err = commitInsert(fam, old, rs, cmd.Chain, ao, locked, run)
	case cmd.Kind == iptables.CmdDelete || cmd.Kind == iptables.CmdDeleteNum:
		err = commitDelete(fam, old, rs, cmd.Chain, ao, locked, run)
	default:
		err = commit(fam, old, rs, true, []string{cmd.Table}, ao, locked)
	}
	if err != nil {
		return report(env, name, err)
	}
	committed, succeeded = rs, true
	return exitOK
}

// mayChangeInPlace reports whether cmd may change the running generation
// in place (commitAppend, commitInsert, commitDelete): a rule command on a
// chain of the filter table (a user chain's when its regions have slack:
// compiler.Layout.Regions); or install it again (commitNewChain): -N.
func mayChangeInPlace(cmd *iptables.Command) bool {
	switch cmd.Kind {
	case iptables.CmdNewChain:
		return true
	case iptables.CmdAppend, iptables.CmdInsert, iptables.CmdDelete, iptables.CmdDeleteNum:
		return cmd.Table == ir.TableFilter
	}
	return false
}

// commandReadsCounters reports whether cmd reads the running rules'
// counters: all but the commands that add, delete or create (-A, -I, -D,
// -N), whose commit carries every running rule's counters over by its
// position (counterSources: a rule with a Handle counts on from the
// running counter, one without starts from the command's own -c) and
// whose saved form holds none (ir.Ruleset.MarshalBinary).
func commandReadsCounters(cmd *iptables.Command) bool {
	switch cmd.Kind {
	case iptables.CmdAppend, iptables.CmdInsert, iptables.CmdDelete, iptables.CmdDeleteNum, iptables.CmdNewChain:
		return false
	}
	return true
}

// allCounters returns every counter of rs by counter index.
func allCounters(rs *ir.Ruleset) map[int]ir.Counters {
	out := map[int]ir.Counters{}
	for hook, name := range ir.BuiltinChains {
		if c := rs.Chain(name); c != nil {
			out[hook] = c.Counters
		}
	}
	compiler.ForEachCounter(rs, func(i int, _ compiler.RuleRef, c *ir.Chain, r *ir.Rule) {
		if r != nil {
			out[i] = r.Counters
		} else {
			out[i] = c.Counters
		}
	})
	return out
}

// takeWait removes -w [secs] / --wait[=secs] and -W / --wait-interval from
// args (they concern the lock, which the caller takes).
func takeWait(args []string) (waitSpec, []string) {
	var w waitSpec
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-w" || a == "--wait":
			w.set = true
			if i+1 < len(args) && isNumber(args[i+1]) {
				i++
				w.seconds, _ = strconv.Atoi(args[i])
			}
		case strings.HasPrefix(a, "--wait="):
			w.set = true
			w.seconds, _ = strconv.Atoi(strings.TrimPrefix(a, "--wait="))
		case a == "-W" || a == "--wait-interval":
			if i+1 < len(args) {
				i++
			}
		case strings.HasPrefix(a, "--wait-interval="):
		default:
			rest = append(rest, a)
		}
	}
	return w, rest
}

// listChains renders -L.
func listChains(rs *ir.Ruleset, cmd *iptables.Command) (string, error) {
	return iptables.FormatList(rs, cmd.Chain, iptables.ListOptions{
		Verbose:     cmd.Verbose > 0,
		Numeric:     cmd.Numeric,
		Exact:       cmd.Exact,
		LineNumbers: cmd.LineNumbers,
		RuleNum:     cmd.RuleNum,
	})
}

// restartPolicies zeroes the counters of table's built-in chains in rs, as
// iptables-legacy's commit of the table does.
func restartPolicies(rs *ir.Ruleset, table string) {
	t := rs.TableByName(table)
	if t == nil {
		return
	}
	for _, name := range ir.TableBuiltins(table) {
		if c := t.Chain(name); c != nil {
			c.Counters = ir.Counters{}
		}
	}
}
