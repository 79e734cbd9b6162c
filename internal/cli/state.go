package cli

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/prefault"
	"github.com/xfw-dev/xfw/internal/settable"
)

// loadRunning returns fam's running ruleset with its live counters, or an
// empty filter table when xfw holds none in this namespace
// (dataplane.RunningRuleset).
func loadRunning(fam ir.Family) (*ir.Ruleset, error) {
	rs, _, err := dataplane.RunningRuleset(fam)
	return rs, err
}

// runningRuleset is the running ruleset as a restore decoded it, and
// where its rules lie in their binary form (nil: none ran), or as the
// agent's cache kept it (cmdcache.go).
type runningRuleset struct {
	rs  *ir.Ruleset
	enc *ir.Encoded
}

// restoreCommit commits rs, what a restore made of the running ruleset:
// the rules rs shares with it are unchanged (iptables.Restore copies a
// table's rules before changing any in place), so the saved form copies
// their bytes instead of encoding them again (kube-proxy's one-service
// update shares all but a few of its 440,000 rules). It takes running's
// references (they are cleared), so that the compile holds the running
// rules only through what it needs of them. The rest is commit's. It
// returns where rs's rules lie in the binary form it swapped in
// (ir.Ruleset.MarshalBinaryIndexed) for the agent's cache; nil in a
// process of its own.
func restoreCommit(fam ir.Family, running *runningRuleset, rs *ir.Ruleset, keepCounters bool, committed []string, opts dataplane.AttachOptions, sets *ipsetLookup) (*ir.Encoded, error) {
	old, enc := running.rs, running.enc
	*running = runningRuleset{}
	var index *ir.Encoded
	mode := installMode{keepCounters: keepCounters, committed: committed, encoded: enc}
	if cmdCache.on() {
		mode.indexTo = &index // only the agent keeps it
	}
	err := compileAndInstall(fam, old, rs, mode, opts, sets)
	return index, err
}

// counterIndex returns the counter index of each rule of rs, as the
// compiler numbers them (compiler.ForEachCounter): policies 0–2, then
// rules chain by chain, then the other tables' policies and rules.
func counterIndex(rs *ir.Ruleset) map[*ir.Rule]int {
	idx := map[*ir.Rule]int{}
	compiler.ForEachCounter(rs, func(i int, _ compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
		if r != nil {
			idx[r] = i
		}
	})
	return idx
}

// numCounters returns the number of counters of rs, in
// compiler.ForEachCounter's layout, counted chain by chain (rulesOf), not
// rule by rule.
func numCounters(rs *ir.Ruleset) int {
	n := compiler.NumChains + rulesOf(rs)
	for _, t := range rs.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if t.Chain(name) != nil {
				n++
			}
		}
		n += rulesOf(t)
	}
	return n
}

// counterSources says, for each counter of the new ruleset, whether it
// carries over from the running one or starts from the counters the new
// ruleset states (iptables-restore -c, or zero). With keepOld, a rule read
// from the running ruleset (Handle set, kept by every copy) carries its own
// counters, whatever else the command changed (-E renames keep them); a
// rule the command added starts from zero even when a running rule has the
// same text: -R, and iptables-restore --noflush re-adding a flushed chain's
// rules, zero counters in the kernel too. A policy carries over from the
// same table's chain, except in the tables the command committed
// (restarted): iptables-legacy's libiptc writes the built-in chains'
// counters back as zero whenever it commits a table, so every iptables
// command that changes a table restarts its policies' counters (the rules'
// go on). xfw sync, the agent and ipset changes commit nothing: restarted
// is empty for them.
func counterSources(old, nw *ir.Ruleset, keepOld bool, restarted []string) []dataplane.CounterSource {
	return counterSourcesCounted(old, nil, nw, keepOld, restarted)
}

// counterSourcesCounted is counterSources for an old ruleset decoded
// without some chains' rules (dataplane.RunningRulesetSkip): oldCounts is
// how many rules each of its chains had (ir.Encoded.RuleCounts), by which
// its counters are laid out; nil, or a count of another length, when old
// holds all its rules.
func counterSourcesCounted(old *ir.Ruleset, oldCounts []int, nw *ir.Ruleset, keepOld bool, restarted []string) []dataplane.CounterSource {
	src := make([]dataplane.CounterSource, numCounters(nw))
	prefault.Slice(src)
	keepPolicy := func(table string) bool { return keepOld && !slices.Contains(restarted, table) }
	for hook, name := range ir.BuiltinChains {
		src[hook].From = -1
		if c := nw.Chain(name); c != nil {
			src[hook].Initial = c.Counters
			if keepPolicy(ir.TableFilter) {
				src[hook].From = hook
			} else if keepOld {
				src[hook].Initial = ir.Counters{}
			}
		}
	}
	oldN, oldPolicy := oldCounterLayout(old, oldCounts)
	carried := make([]bool, oldN+1) // by Handle
	compiler.ForEachCounter(nw, func(i int, ref compiler.RuleRef, c *ir.Chain, r *ir.Rule) {
		if r == nil {
			src[i] = dataplane.CounterSource{From: -1, Initial: c.Counters}
			if from, ok := oldPolicy[ref]; ok && keepPolicy(ref.Table) {
				src[i].From = from
			} else if keepOld {
				src[i].Initial = ir.Counters{}
			}
			return
		}
		src[i] = dataplane.CounterSource{From: -1, Initial: r.Counters}
		if h := r.Handle; keepOld && h > 0 && int(h) <= oldN && !carried[h] {
			src[i].From = int(h) - 1
			carried[h] = true
		}
	})
	return src
}

// oldCounterLayout returns how many counters the running ruleset old has
// and the counter index of each of its other tables' policies
// (compiler.ForEachCounter's layout), its chains' rules counted by counts
// (counterSourcesCounted) when it has one per chain.
func oldCounterLayout(old *ir.Ruleset, counts []int) (int, map[compiler.RuleRef]int) {
	policy := map[compiler.RuleRef]int{}
	chains := len(old.Chains)
	for _, t := range old.Tables {
		chains += len(t.Chains)
	}
	if len(counts) != chains {
		compiler.ForEachCounter(old, func(i int, ref compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
			if r == nil {
				policy[ref] = i
			}
		})
		return numCounters(old), policy
	}
	i, k := compiler.NumChains, 0
	for _, c := range old.Chains {
		i += max(counts[k], len(c.Rules))
		k++
	}
	for _, t := range old.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if t.Chain(name) != nil {
				policy[compiler.RuleRef{Table: t.Table, Chain: name, Index: compiler.PolicyIndex}] = i
				i++
			}
		}
		for _, c := range t.Chains {
			i += max(counts[k], len(c.Rules))
			k++
		}
	}
	return i, policy
}

// commit compiles rs and swaps it in. keepCounters carries counters of
// unchanged rules (and the policies) over from the running ruleset;
// committed names the tables the iptables command committed, whose
// policies' counters restart (counterSources).
func commit(fam ir.Family, old, rs *ir.Ruleset, keepCounters bool, committed []string, opts dataplane.AttachOptions, sets *ipsetLookup) error {
	return compileAndInstall(fam, old, rs, installMode{keepCounters: keepCounters, committed: committed}, opts, sets)
}

// commitReleasing commits rs in full (commit), counters kept, when a
// command that read the running generation back (gr, finished; nil: it
// read none) cannot use it: gr lets it go, and the compile's pace
// (compilePace) collects it before compiling instead of holding it
// through the compile and install (at 100K filter rules -A, -I and -D
// peaked at 385–420 MiB, 110 MiB above a restore of the same rules).
func commitReleasing(fam ir.Family, old, rs *ir.Ruleset, committed []string, opts dataplane.AttachOptions, sets *ipsetLookup, gr *generationReader) error {
	read := gr != nil && gr.gen != nil
	gr.release()
	return compileAndInstall(fam, old, rs, installMode{keepCounters: true, committed: committed, released: read}, opts, sets)
}

// recommit compiles rs, the running ruleset old read back unchanged, again
// and swaps it in, counters kept: for the namespace's interfaces and
// addresses now (xfw sync, the agent) or the sets' new members. The kernel
// replaces no table for these, so the limit buckets go on
// (dataplane.Update.SameRules).
func recommit(fam ir.Family, old, rs *ir.Ruleset, opts dataplane.AttachOptions, sets *ipsetLookup) error {
	return compileAndInstall(fam, old, rs, installMode{keepCounters: true, sameRules: true}, opts, sets)
}

// installMode is how install carries the running generation's state over.
type installMode struct {
	// keepCounters carries counters of unchanged rules (and the
	// policies) over from the running ruleset.
	keepCounters bool
	// sameRules says the rules are the running ones, unchanged: the
	// limit buckets are kept.
	sameRules bool
	// committed names the tables an iptables command committed: their
	// built-in chains' policy counters restart (counterSources).
	committed []string
	// encoded is where the rules the new ruleset shares, unchanged, with
	// the running one lie in its binary form, or nil (restoreCommit).
	encoded *ir.Encoded
	// saved is the new ruleset's binary form when compileAndInstall made
	// it ahead, else nil; index where its rules lie in it, when indexTo
	// asks for that.
	saved []byte
	index *ir.Encoded
	// indexTo, when not nil, receives where the rules lie in the binary
	// form install swapped in (ir.Ruleset.MarshalBinaryIndexed).
	indexTo **ir.Encoded
	// idleSmall, when not nil, is what the idle bank's small-field map
	// holds (dataplane.Update.IdleSmall).
	idleSmall *dataplane.SmallDelta
	// replaced, when not nil, receives the maps of the generation
	// install replaced (Update.Replaced).
	replaced *dataplane.ReplacedMaps
	// inPlace says the generation was made from the running one without
	// a compile (installKept): it keeps its field order
	// (dataplane.Update.KeepFieldOrder).
	inPlace bool
	// released says the command let a large part of its heap go before
	// compiling: the running generation it read back for a change in
	// place it could not make (commitReleasing).
	released bool
}

// compileAndInstall compiles rs and swaps it in (install).
func compileAndInstall(fam ir.Family, old, rs *ir.Ruleset, mode installMode, opts dataplane.AttachOptions, sets *ipsetLookup) error {
	t := time.Now()
	// A flushing restore over a running saved form lets the decoded
	// running ruleset go once its counters are taken (compilePace).
	released := mode.released || mode.encoded != nil && !mode.keepCounters
	// Counter indexes follow chain order; use the order the saved ruleset
	// has (iptables-save's), which is the order loadRunning reads it back in.
	orderChains(rs)
	t = dataplane.TraceSince("commit: order chains", t)
	ifaces, err := dataplane.CompilerInterfaces()
	if err != nil {
		return err
	}
	t = dataplane.TraceSince("commit: interfaces", t)
	// What the counters need of the running ruleset, taken now: old is
	// not needed past this point, so the compile of a large ruleset does
	// not hold both in memory (the heap's limit, cmd/xfw). With no saved
	// form to copy from, they are found beside the compile with the saved
	// form itself (startBesideCompile), and old is let go once they are.
	var counters []dataplane.CounterSource
	var ahead func() besideCompile
	if mode.encoded == nil && runtime.GOMAXPROCS(0) >= 2 {
		ahead = startBesideCompile(old, rs, mode)
	} else {
		var oldCounts []int
		if mode.encoded != nil {
			oldCounts = mode.encoded.RuleCounts()
		}
		counters = counterSourcesCounted(old, oldCounts, rs, mode.keepCounters, mode.committed)
		t = dataplane.TraceSince("commit: counter sources", t)
	}
	// Likewise encoded (restoreCommit), which refers to every running
	// rule: the saved form is made now, copying the kept rules' bytes,
	// when rs keeps any (a --noflush update), and the compile holds
	// neither (the 28 MB form instead of about 300 MB of heap at
	// kube-proxy's 10,000 services). A failure is install's to report.
	//
	// A restore that left the running rules as they were (compared in
	// that form) installs the running generation again (reuse.go).
	if mode.encoded != nil {
		saved, index, same := reusableEncoding(old, rs, mode.encoded, mode.indexTo != nil)
		mode.saved, mode.index, mode.encoded = saved, index, nil
		t = dataplane.TraceSince("commit: encode", t)
		if same {
			gen, at, err := reuseRunning(fam, rs, sets)
			if err != nil {
				return err
			}
			if gen != nil {
				return install(fam, counters, rs, gen, at, mode, opts, sets, nil)
			}
		}
	}
	defer compilePace(released)()
	t = dataplane.TraceSince("commit: collector paced", t)
	gen, err := compiler.Compile(rs, compiler.Options{Interfaces: ifaces, SetCounts: setCounts(sets), Trace: dataplane.TraceSince})
	if err != nil {
		return err
	}
	t = dataplane.TraceSince("commit: compile", t)
	if ahead != nil {
		b := ahead()
		counters = b.counters
		// A failed encoding leaves saved nil: install encodes again
		// and reports it in its turn, after its own checks.
		if b.err == nil {
			mode.saved, mode.index = b.saved, b.index
		}
		dataplane.TraceSince("commit: wait for counters and the saved form", t)
	}
	return install(fam, counters, rs, gen, ifaces, mode, opts, sets, mode.encoded)
}

// besideCompile is what startBesideCompile makes beside the compile.
type besideCompile struct {
	counters []dataplane.CounterSource
	saved    []byte
	index    *ir.Encoded
	err      error
}

// startBesideCompile starts, on another goroutine beside the compile
// (whose flattening is serial), what install needs besides the generation
// when there is no running saved form to copy from (a first load; a full
// compile after an iptables command): the counters' sources and rs's saved
// form (with where its rules lie in it when mode asks for that, as install
// would). It returns the function that waits for them. The encoder, the
// counters and the compiler only read the rulesets (the compiler's rewrites
// copy the rules they change).
func startBesideCompile(old, rs *ir.Ruleset, mode installMode) func() besideCompile {
	done := make(chan besideCompile, 1)
	go func() {
		var b besideCompile
		b.counters = counterSources(old, rs, mode.keepCounters, mode.committed)
		if mode.indexTo != nil {
			b.saved, b.index, b.err = rs.MarshalBinaryIndexed(nil)
		} else {
			b.saved, b.err = rs.MarshalBinaryReusing(nil)
		}
		done <- b
	}()
	return func() besideCompile { return <-done }
}

// commitAppend commits rs, the running ruleset old with rules appended to
// chain (iptables -A): it extends the running generation with them
// (compiler.AppendRule on a base chain, compiler.AppendRuleInChain on a
// user chain whose regions have slack: in slack positions, without
// compiling the ruleset again); when the generation cannot take them in
// place, it compiles rs in full (commit).
func commitAppend(fam ir.Family, old, rs *ir.Ruleset, chain string, opts dataplane.AttachOptions, sets *ipsetLookup, run runningParts) error {
	return changeInPlace(fam, old, rs, chain, opts, sets, run, "append",
		func(oldChain, newChain *ir.Chain) bool { return len(newChain.Rules) > len(oldChain.Rules) },
		func(gen *compiler.Generation, hook int, first uint32, oldChain, newChain *ir.Chain, ifaces []compiler.Interface) (*compiler.Generation, error) {
			var err error
			for i := len(oldChain.Rules); i < len(newChain.Rules) && err == nil; i++ {
				ref := compiler.RuleRef{Chain: newChain.Name, Index: i}
				if hook < 0 {
					gen, err = compiler.AppendRuleInChain(gen, newChain.Rules[i], newChain.Name, first+uint32(i), ref, ifaces)
				} else {
					gen, err = compiler.AppendRule(gen, newChain.Rules[i], hook, first+uint32(i), ref, ifaces)
				}
			}
			return gen, err
		})
}

// commitInsert commits rs, the running ruleset old with one rule inserted
// at the head of chain (iptables -I CHAIN [1]): it puts the rule in the
// running generation's slack before the chain's entries
// (compiler.InsertRule, compiler.InsertRuleInChain for a user chain:
// fail2ban's bans); when the generation cannot take it, it compiles rs in
// full (commit).
func commitInsert(fam ir.Family, old, rs *ir.Ruleset, chain string, opts dataplane.AttachOptions, sets *ipsetLookup, run runningParts) error {
	return changeInPlace(fam, old, rs, chain, opts, sets, run, "insert",
		func(oldChain, newChain *ir.Chain) bool {
			if len(newChain.Rules) != len(oldChain.Rules)+1 || newChain.Rules[0].Handle != 0 {
				return false
			}
			for i, r := range oldChain.Rules {
				if newChain.Rules[i+1].Handle != r.Handle {
					return false // not at the head
				}
			}
			return true
		},
		func(gen *compiler.Generation, hook int, first uint32, _, newChain *ir.Chain, ifaces []compiler.Interface) (*compiler.Generation, error) {
			ref := compiler.RuleRef{Chain: newChain.Name, Index: 0}
			if hook < 0 {
				return compiler.InsertRuleInChain(gen, newChain.Rules[0], newChain.Name, first, ref, ifaces)
			}
			return compiler.InsertRule(gen, newChain.Rules[0], hook, first, ref, ifaces)
		})
}

// commitDelete commits rs, the running ruleset old with one rule deleted
// from chain (iptables -D): it takes the rule's entries out of the running
// generation (compiler.DeleteRule, compiler.DeleteRuleInChain for a user
// chain) instead of compiling the ruleset again; when the generation
// cannot, it compiles rs in full (commit).
func commitDelete(fam ir.Family, old, rs *ir.Ruleset, chain string, opts dataplane.AttachOptions, sets *ipsetLookup, run runningParts) error {
	// The deleted rule: the first whose identity the new chain lacks; the
	// others must follow in order.
	deleted := func(oldChain, newChain *ir.Chain) int {
		k := 0
		for k < len(newChain.Rules) && newChain.Rules[k].Handle == oldChain.Rules[k].Handle {
			k++
		}
		for i := k; i < len(newChain.Rules); i++ {
			if newChain.Rules[i].Handle != oldChain.Rules[i+1].Handle {
				return -1
			}
		}
		return k
	}
	return changeInPlace(fam, old, rs, chain, opts, sets, run, "delete",
		func(oldChain, newChain *ir.Chain) bool {
			return len(newChain.Rules) == len(oldChain.Rules)-1 && deleted(oldChain, newChain) >= 0
		},
		func(gen *compiler.Generation, hook int, first uint32, oldChain, newChain *ir.Chain, ifaces []compiler.Interface) (*compiler.Generation, error) {
			k := deleted(oldChain, newChain)
			if hook < 0 {
				return compiler.DeleteRuleInChain(gen, oldChain.Rules[k], newChain.Name, first+uint32(k), ifaces)
			}
			return compiler.DeleteRule(gen, oldChain.Rules[k], hook, first+uint32(k), ifaces)
		})
}

// changeInPlace commits rs, the running ruleset old after one command on
// chain, by applying change to the running generation when the command's
// effect has the shape change handles (shape) and the generation takes it;
// otherwise it compiles rs in full (commit). change gets the chain's index
// among the base chains (-1: a user chain), its first counter index and
// both versions of the chain; what names the change in XFW_TRACE. run has
// what the command read of the running state besides old.
func changeInPlace(fam ir.Family, old, rs *ir.Ruleset, chain string, opts dataplane.AttachOptions, sets *ipsetLookup, run runningParts, what string,
	shape func(oldChain, newChain *ir.Chain) bool,
	change func(gen *compiler.Generation, hook int, first uint32, oldChain, newChain *ir.Chain, ifaces []compiler.Interface) (*compiler.Generation, error)) error {
	t := time.Now()
	if run.gen != nil {
		// Nothing may read the running state in the background once
		// the commit below changes it.
		run.gen.result()
		t = dataplane.TraceSince("commit: wait for the generation's read", t)
	}
	hook := slices.Index(ir.BuiltinChains[:], chain)
	orderChains(rs)
	oldChain, newChain := old.Chain(chain), rs.Chain(chain)
	// With other tables the walks go through their chains too: filter's
	// changes in place keep them (its ACCEPT goes on with the tables
	// after it, their counter indexes shift with filter's), but a table
	// the one ruleset has and the other lacks changes the walks: then
	// compile in full. So does a change that makes the nat table see
	// packets or leaves it without any (the first or last rule that asks
	// for connection tracking: compiler.NatWalkChanges).
	if oldChain == nil || newChain == nil || hook < 0 && (oldChain.Builtin || newChain.Builtin) || !shape(oldChain, newChain) ||
		compiler.UsesOtherTables(old) != compiler.UsesOtherTables(rs) || compiler.NatWalkChanges(old, rs) {
		return commitReleasing(fam, old, rs, filterOnly, opts, sets, run.gen)
	}
	gen, ifaces, err := runningGeneration(fam, old, run.gen)
	if err != nil || gen == nil {
		dataplane.TraceSince(fmt.Sprintf("commit: no running generation (%v)", err), t)
		return commitReleasing(fam, old, rs, filterOnly, opts, sets, run.gen)
	}
	first := uint32(compiler.NumChains)
	for _, c := range rs.Chains {
		if c == newChain {
			break
		}
		first += uint32(len(c.Rules))
	}
	t = dataplane.TraceSince("commit: read running generation", t)
	if gen, err = change(gen, hook, first, oldChain, newChain, ifaces); err != nil {
		dataplane.TraceSince(fmt.Sprintf("commit: not in place (%v)", err), t)
		// The full compile does not need the running generation
		// (about 40 MB of heap at 100K rules): the collector may take it.
		gen = nil
		return commitReleasing(fam, old, rs, filterOnly, opts, sets, run.gen)
	}
	t = dataplane.TraceSince("commit: "+what+" in place", t)
	shift := chainShift(oldChain, newChain, int(first))
	return installKept(fam, old, rs, gen, ifaces, filterOnly, opts, sets, run, &shift, t)
}

// installKept installs gen, a generation made from the running one
// without a compile (a change in place, -N), for rs, the running ruleset
// old changed, counters kept (committed names the tables the command
// committed), and hands it to the agent's cache (run.installed).
func installKept(fam ir.Family, old, rs *ir.Ruleset, gen *compiler.Generation, ifaces []compiler.Interface,
	committed []string, opts dataplane.AttachOptions, sets *ipsetLookup, run runningParts, shift *counterShift, t time.Time) error {
	mode := installMode{keepCounters: true, committed: committed, indexTo: run.index, replaced: new(dataplane.ReplacedMaps), inPlace: true}
	if idle := run.gen.keptIdleSmall(); idle != nil {
		// The idle bank holds the generation before gen's start: it
		// differs from gen where that one's change wrote and where
		// this one's did.
		mode.idleSmall = &dataplane.SmallDelta{Map: idle.Map, Len: idle.Len,
			Differ: append(slices.Clip(idle.Differ), gen.SmallWritten...)}
	}
	counters, err := keptCounterSources(old, rs, shift, mode.committed)
	if err != nil {
		return err
	}
	dataplane.TraceSince("commit: counter sources", t)
	if err := install(fam, counters, rs, gen, ifaces, mode, opts, sets, run.encoded); err != nil {
		return err
	}
	if run.installed != nil {
		// The bank gen replaced holds its start: what differs is what
		// this change wrote.
		idle := &dataplane.SmallDelta{Map: mode.replaced.Small, Len: len(gen.Small), Differ: gen.SmallWritten}
		gen.SmallWritten = nil
		kg := &keptGeneration{gen: gen, at: ifaces, idleSmall: idle, numbered: shift.numbered()}
		if run.gen != nil && run.gen.startChunks <= len(gen.Chunks) {
			kg.idleChunks = &dataplane.ChunkPrefix{Map: mode.replaced.Chunks, Len: run.gen.startChunks}
		}
		*run.installed = kg
	}
	return nil
}

// commitNewChain commits rs, the running ruleset old with one empty user
// chain added to table (iptables -N). A chain without rules that no rule
// jumps to changes no packet's path and no counter's index, so the
// running generation is installed again for rs, as a compile of rs would
// have made it (with checkReuseEnv the command compiles rs as well and
// fails unless the two are the same): rs's saved form, and the state a
// commit of the table restarts (its policies' counters, the limit
// buckets), as after a compile. A table old lacks (its policies are new
// counters and walk segments), set matches (the generation depends on the
// sets' definitions too) or no running generation compile rs in full
// (commit).
func commitNewChain(fam ir.Family, old, rs *ir.Ruleset, table string, opts dataplane.AttachOptions, sets *ipsetLookup, run runningParts) error {
	t := time.Now()
	committed := []string{table}
	orderChains(rs)
	if old.TableByName(table) == nil || compiler.UsesSetMatches(rs) || numCounters(old) != numCounters(rs) {
		if run.gen != nil {
			run.gen.result()
		}
		return commitReleasing(fam, old, rs, committed, opts, sets, run.gen)
	}
	gen, ifaces, err := runningGeneration(fam, old, run.gen)
	if err != nil || gen == nil {
		dataplane.TraceSince(fmt.Sprintf("commit: no running generation (%v)", err), t)
		return commitReleasing(fam, old, rs, committed, opts, sets, run.gen)
	}
	t = dataplane.TraceSince("commit: read running generation (new chain)", t)
	if os.Getenv(checkReuseEnv) != "" {
		want, err := compiler.Compile(rs, compiler.Options{Interfaces: ifaces, SetCounts: setCounts(sets)})
		if err != nil {
			return fmt.Errorf("%s: compile: %w", checkReuseEnv, err)
		}
		if err := compiler.DiffGenerations(gen, want); err != nil {
			return fmt.Errorf("%s: the running generation is not the compiled one: %w", checkReuseEnv, err)
		}
		t = dataplane.TraceSince("commit: "+checkReuseEnv+": compiled, the same", t)
	}
	return installKept(fam, old, rs, gen, ifaces, committed, opts, sets, run, &counterShift{}, t)
}

// filterOnly is what a command changing the filter table in place commits.
var filterOnly = []string{ir.TableFilter}

// runningParts is what a command read of the running state besides the
// ruleset, for changeInPlace; the zero value has nothing.
type runningParts struct {
	// gen has been reading the running generation meanwhile, or nil.
	gen *generationReader
	// encoded is where the running rules lie in their binary form, when
	// the command changes no rule in place, or nil.
	encoded *ir.Encoded
	// installed, when not nil, receives the generation a change in place
	// installed (the agent's cache keeps it for the next command).
	installed **keptGeneration
	// index, when not nil, receives where the rules lie in the binary
	// form a change in place swapped in (the agent's cache keeps it with
	// the ruleset, so that the next command copies the unchanged rules'
	// bytes instead of encoding them again).
	index **ir.Encoded
}

// generationReader reads a family's running generation in the background
// (dataplane.RunningGeneration): a command that may change it in place
// starts reading it as soon as it holds the lock, while it decodes the
// running ruleset (the two take about as long).
type generationReader struct {
	done chan struct{}
	gen  *compiler.Generation
	// at are the interfaces gen was compiled for, now the namespace's.
	at, now []compiler.Interface
	err     error
	// idleSmall is the kept generation's keptGeneration.idleSmall (nil
	// for a generation read back).
	idleSmall *dataplane.SmallDelta
	// startChunks is how many chunks gen had when read (or kept).
	startChunks int
	// keptRules is set when gen.Rules are a kept generation's rule
	// references (keepGeneration), nil for a generation read back.
	keptRules bool
}

// keptIdleSmall returns what the idle bank's small-field map holds
// against the kept generation gr hands over (nil: not known).
func (gr *generationReader) keptIdleSmall() *dataplane.SmallDelta {
	if gr == nil {
		return nil
	}
	return gr.idleSmall
}

// release lets go of the generation read, once the command compiles in
// full instead of changing it in place; nothing on a nil reader. It must
// have finished (result).
func (gr *generationReader) release() {
	if gr != nil {
		gr.gen = nil
	}
}

// keptReader hands kg, the generation the agent kept (cmdcache.go), over
// as a finished reading, with the namespace's interfaces now. With
// checkReuseEnv it reads the running generation as well and fails unless
// the two are the same.
func keptReader(fam ir.Family, kg *keptGeneration) *generationReader {
	t := time.Now()
	gr := &generationReader{done: make(chan struct{}), gen: kg.gen, at: kg.at, idleSmall: kg.idleSmall, keptRules: kg.gen.Rules != nil}
	defer close(gr.done)
	kg.gen.Chunks, gr.err = dataplane.RunningChunks(fam, kg.chunks, kg.idleChunks)
	gr.startChunks = kg.chunks
	if gr.err == nil {
		gr.now, gr.err = dataplane.CompilerInterfaces()
	}
	if gr.err == nil && os.Getenv(checkReuseEnv) != "" {
		// The chunks as copied (only those added since, when the idle
		// bank held the rest): the read below copies them all again,
		// into the same memory.
		copied := slices.Clone(kg.gen.Chunks)
		read, _, err := dataplane.RunningGeneration(fam)
		switch {
		case err != nil:
			gr.err = err
		case read == nil:
			gr.err = fmt.Errorf("%s: a generation kept, none running", checkReuseEnv)
		case !slices.Equal(copied, read.Chunks):
			gr.err = fmt.Errorf("%s: the idle bank's chunks (%d, %v of them there before) are not the running generation's", checkReuseEnv, len(copied), kg.idleChunks)
		default:
			// A generation read back has no rule references; the
			// kept ones are checked against the ruleset's
			// (runningGeneration).
			kept := *kg.gen
			kept.Rules = nil
			if err := compiler.DiffGenerations(&kept, read); err != nil {
				gr.err = fmt.Errorf("%s: the kept generation is not the running one: %w", checkReuseEnv, err)
			}
		}
	}
	dataplane.TraceSince("kept running generation", t)
	return gr
}

// readGeneration starts reading fam's running generation. The state must
// be open for the session first (dataplane.OpenRunning): the reader and
// the command share it.
func readGeneration(fam ir.Family) *generationReader {
	gr := &generationReader{done: make(chan struct{})}
	go func() {
		defer close(gr.done)
		t := time.Now()
		gr.gen, gr.at, gr.err = dataplane.RunningGeneration(fam)
		if gr.gen != nil {
			gr.startChunks = len(gr.gen.Chunks)
		}
		if gr.err == nil && gr.gen != nil {
			gr.now, gr.err = dataplane.CompilerInterfaces()
		}
		dataplane.TraceSince("read running generation (background)", t)
	}()
	return gr
}

// result waits for the reading to end and returns the generation, the
// interfaces it was compiled for and the namespace's interfaces now. The
// generation is the caller's (once).
func (gr *generationReader) result() (gen *compiler.Generation, at, now []compiler.Interface, err error) {
	<-gr.done
	return gr.gen, gr.at, gr.now, gr.err
}

// runningGeneration returns fam's running generation with its Rules (as
// Compile numbered old's) and the interfaces it was compiled for, or nil
// when it cannot be extended: none saved, or the interfaces changed since.
// It takes it from gr when not nil.
func runningGeneration(fam ir.Family, old *ir.Ruleset, gr *generationReader) (*compiler.Generation, []compiler.Interface, error) {
	if gr == nil {
		gr = readGeneration(fam)
	}
	gen, at, ifaces, err := gr.result()
	if err != nil || gen == nil {
		return nil, nil, err
	}
	if !slices.Equal(ifaces, at) {
		return nil, nil, errors.New("interfaces changed")
	}
	n := numCounters(old) - compiler.NumChains
	if gr.keptRules && len(gen.Rules) == n && cap(gen.Rules) > n {
		// A kept generation's references, kept in counter order by
		// the changes in place since old's (keepGeneration).
		t := time.Now()
		if os.Getenv(checkReuseEnv) != "" {
			if err := checkKeptRules(old, gen.Rules); err != nil {
				return nil, nil, err
			}
		}
		dataplane.TraceSince("commit: rule references kept", t)
		return gen, ifaces, nil
	}
	// Room for the rule an in-place change may add.
	gen.Rules = make([]compiler.RuleRef, 0, n+1)
	prefault.Slice(gen.Rules[:cap(gen.Rules)])
	compiler.ForEachCounter(old, func(_ int, ref compiler.RuleRef, _ *ir.Chain, _ *ir.Rule) {
		gen.Rules = append(gen.Rules, ref)
	})
	return gen, ifaces, nil
}

// checkKeptRules fails unless refs are old's rules' references as
// compiler.ForEachCounter numbers them (checkReuseEnv).
func checkKeptRules(old *ir.Ruleset, refs []compiler.RuleRef) error {
	var want []compiler.RuleRef
	compiler.ForEachCounter(old, func(_ int, ref compiler.RuleRef, _ *ir.Chain, _ *ir.Rule) {
		want = append(want, ref)
	})
	if !slices.Equal(refs, want) {
		return fmt.Errorf("%s: the kept generation's rule references are not the ruleset's", checkReuseEnv)
	}
	return nil
}

// orderChains puts the chains of every table of rs in the order
// iptables-save prints them, which is the order the saved ruleset keeps
// and the counters follow (compiler.ForEachCounter).
func orderChains(rs *ir.Ruleset) {
	rs.Chains = iptables.OrderedChains(rs)
	for _, t := range rs.Tables {
		t.Chains = iptables.OrderedChains(t)
	}
}

// limitSources maps the counter of each rule with a limit or nth
// statistic match in a table the command did not commit to the running
// rule it was read from (its Handle): the kernel replaces only the tables
// iptables commits, so the buckets and counters of the others go on
// (dataplane.Update.LimitsFrom). Nil when
// the command named no table (xfw sync, the agent and set changes keep
// every bucket: Update.SameRules).
func limitSources(rs *ir.Ruleset, mode installMode) map[uint32]uint32 {
	if len(mode.committed) == 0 || mode.sameRules || !slices.ContainsFunc(append([]*ir.Ruleset{rs}, rs.Tables...), func(t *ir.Ruleset) bool {
		table := t.Table
		if table == "" {
			table = ir.TableFilter
		}
		return !slices.Contains(mode.committed, table) && rulesOf(t) > 0
	}) {
		// Every rule is in a committed table (an iptables command on
		// filter without other tables): none is carried.
		return nil
	}
	var from map[uint32]uint32
	seen := map[uint32]bool{}
	compiler.ForEachCounter(rs, func(i int, ref compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
		if r == nil || r.Handle == 0 || !hasCountingMatch(r) {
			return
		}
		table := ref.Table
		if table == "" {
			table = ir.TableFilter
		}
		h := uint32(r.Handle) - 1
		if slices.Contains(mode.committed, table) || seen[h] {
			return
		}
		seen[h] = true
		if from == nil {
			from = map[uint32]uint32{}
		}
		from[uint32(i)] = h
	})
	return from
}

// hasCountingMatch reports whether r has a -m limit match or an nth
// statistic match, whose state a table replacement restarts.
func hasCountingMatch(r *ir.Rule) bool {
	for _, m := range r.Matches {
		switch m := m.(type) {
		case *ir.LimitMatch:
			return true
		case *ir.StatisticMatch:
			if m.Mode == ir.StatisticNth {
				return true
			}
		}
	}
	return false
}

// install swaps gen, compiled from rs for ifaces, in, its counters
// starting from counters (counterSources). encoded, when not nil, is where
// the rules rs shares with the running ruleset, unchanged, lie in its
// binary form (ir.Ruleset.MarshalBinaryReusing); mode says what goes on
// from the running generation.
func install(fam ir.Family, counters []dataplane.CounterSource, rs *ir.Ruleset, gen *compiler.Generation, ifaces []compiler.Interface, mode installMode, opts dataplane.AttachOptions, sets *ipsetLookup, encoded *ir.Encoded) error {
	t := time.Now()
	if err := checkDataPlaneSupport(rs, sets); err != nil {
		return err
	}
	if err := syncSetWrites(sets); err != nil {
		return err
	}
	tables, ctrs, err := settable.Build(gen, sets.set, sets.fresh, ifaces)
	if err != nil {
		return err
	}
	t = dataplane.TraceSince("commit: sets", t)
	saved, index := mode.saved, mode.index
	switch {
	case saved != nil:
	case mode.indexTo != nil:
		saved, index, err = rs.MarshalBinaryIndexed(encoded)
	default:
		saved, err = rs.MarshalBinaryReusing(encoded)
	}
	if err != nil {
		return fmt.Errorf("save the ruleset: %w", err)
	}
	if mode.indexTo != nil {
		*mode.indexTo = index
	}
	u := &dataplane.Update{Gen: gen, Saved: saved, Counters: counters, Sets: tables, Interfaces: ifaces, SetCounters: ctrs, SameRules: mode.sameRules,
		LimitsFrom: limitSources(rs, mode), IdleSmall: mode.idleSmall, KeepFieldOrder: mode.inPlace}
	dataplane.TraceSince("commit: encode", t)
	if err := dataplane.Apply(fam, u, opts); err != nil {
		return err
	}
	if mode.replaced != nil {
		*mode.replaced = u.Replaced
	}
	// What SET targets wrote to tables this generation replaced since the
	// sets were read. The window stays open for the command's other
	// family; its maps are closed when the lookup is collected (the
	// ebpf package's cleanups close unreachable descriptors).
	if sets != nil && sets.window != nil {
		if err := sets.window.CatchUp(fam); err != nil {
			return fmt.Errorf("copy the members SET targets wrote meanwhile: %w", err)
		}
	}
	// Counts of set entries the new generation no longer counts (no rule
	// looks their set up any more) go to the stored sets.
	return foldSetCounters(u.SetLeftover, sets)
}
