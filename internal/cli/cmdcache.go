package cli

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/dataplane"
	"github.com/xfw-dev/xfw/internal/ipset"
	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The agent serving iptables commands keeps each family's running ruleset
// as its last served command committed it, instead of decoding the saved
// binary form at every command (13 ms of a 10,000-rule ruleset's 20 ms
// append). An entry is used only while the session's stamp
// (dataplane.SessionStamp) equals the one it was stored with: the same kept
// state, with no generation swapped in through it since. Another process's
// command, xfw stop and a takeover make the agent's session open the state
// again (a new stamp); the agent's own resync swaps a generation (a new
// count). The counters are read live at every use, and the rules' Handles
// numbered again, as a decode would.
//
// Only commands whose effect on the ruleset is plain are stored: -A, -I,
// -D and -N, and restores that made few rules (restoreCacheRules: a
// kube-proxy partial sync, not its full sync). Each rule such a command
// made is put through the binary form (ir.Rule.RoundTrip), so the kept
// ruleset is the one a decode of what was saved gives
// (TestCmdCacheMatchesDecode, TestCmdCacheRestoreMatchesDecode). A restore,
// and an -A, -I or -D changed in place, also keeps where the rules lie in
// the saved form it swapped in (ir.Ruleset.MarshalBinaryIndexed), as a
// decode's ir.Encoded: the next command encodes only the rules it made
// and tells a restore that changed nothing (reuse.go) as after a decode.
// A change in place also keeps the generation it installed (but for its
// chunks: keptGeneration), which the next change in place starts from
// instead of reading it back.
// Read-only and counter commands (-L, -S, -C, -Z) and restores with --test
// leave the entry, whether they succeed or not; every other command that
// commits, and every other command that fails past its parsing, drops it.

// cmdCache is the agent's cache; disabled in a command's own process.
var cmdCache rulesetCache

// rulesetCache holds each family's cached running ruleset.
type rulesetCache struct {
	mu      sync.Mutex
	enabled bool
	entries [2]cachedRuleset // by family: IPv4, IPv6
}

// cachedRuleset is one family's running ruleset as committed, and the
// stamp it is valid for.
type cachedRuleset struct {
	stamp dataplane.Stamp
	rs    *ir.Ruleset
	// enc is where rs's rules lie in its binary form when a restore
	// stored rs (nil else).
	enc *ir.Encoded
	// gen is the generation the last change in place installed (its
	// chunks on the heap), at the interfaces it was made for; nil when
	// the entry has none, or a command took it (takeGeneration).
	gen *keptGeneration
	// numbered is the counter index below which rs's rules have their
	// Handles as a decode numbers them (the rules a change in place
	// did not move): the next command numbers only those from it on.
	numbered int
}

// keptGeneration is a running generation the agent keeps between
// commands instead of reading it back from the maps (about 1.5 ms at
// 10,000 rules): the one an in-place change (changeInPlace) made and
// installed, and the interfaces it was compiled for.
type keptGeneration struct {
	gen *compiler.Generation
	at  []compiler.Interface
	// chunks is how many chunks gen has: they are not kept but read
	// from the running bank at the next use (keptReader), copied
	// straight into the idle one, as a read of the whole generation
	// would.
	chunks int
	// idleSmall is what the idle bank's small-field map holds against
	// gen.Small: the generation gen replaced, which differs from it in
	// the ranges gen's change wrote (gen.SmallWritten, emptied when
	// kept). The next change writes only those and its own there.
	idleSmall *dataplane.SmallDelta
	// idleChunks is what the idle bank's chunk map holds of gen's
	// chunks: the generation gen replaced, whose chunks gen starts with
	// (a change in place only adds chunks).
	idleChunks *dataplane.ChunkPrefix
	// numbered is the counter index from which the change moved or
	// added rules (counterShift.at; math.MaxInt for -N, which moves
	// none): the rules before it keep their Handles.
	numbered int
}

// enableCmdCache turns the cache on (the agent, before it serves).
func enableCmdCache() {
	cmdCache.mu.Lock()
	defer cmdCache.mu.Unlock()
	cmdCache.enabled = true
}

// familySlot is fam's index in rulesetCache.entries.
func familySlot(fam ir.Family) int {
	if fam == ir.IPv6 {
		return 1
	}
	return 0
}

// runningForCommand returns fam's running ruleset for a command holding
// xfw's lock: the cached one when it is still what runs, its counters
// read now (with counters; without, the cached rules' counters are stale
// and only their Handles are numbered again), else the decoded saved form
// (dataplane.RunningRuleset) and where its rules lie in it (nil when
// cached).
func runningForCommand(fam ir.Family, counters bool) (*ir.Ruleset, *ir.Encoded, error) {
	r, err := loadRunningFor(fam, false, counters)
	return r.rs, r.enc, err
}

// runningForRestore is runningForCommand for a restore: the ruleset and
// where its rules lie in its binary form (a decode's, or the one a cached
// ruleset was stored with; nil when neither). With take, the cache forgets
// the ruleset it returns (the restore stores its own result when it
// succeeds), so that the compile does not hold the rules the restore
// replaced. A decode leaves out what skip says (a zero Skip: nothing;
// dataplane.RunningRulesetSkip): the rules the restore replaces.
func runningForRestore(fam ir.Family, take bool, skip ir.Skip) (runningRuleset, error) {
	return loadRunningSkipping(fam, take, true, skip)
}

// loadRunningFor is runningForRestore; without counters, a cached
// ruleset's rules keep the counters they had (stale) and only their
// Handles are numbered (commandReadsCounters says which commands may).
func loadRunningFor(fam ir.Family, take, withCounters bool) (runningRuleset, error) {
	return loadRunningSkipping(fam, take, withCounters, ir.Skip{})
}

// loadRunningSkipping is loadRunningFor decoding without the rules skip
// says (a cached ruleset is returned whole).
func loadRunningSkipping(fam ir.Family, take, withCounters bool, skip ir.Skip) (runningRuleset, error) {
	t := time.Now()
	if e := cmdCache.lookup(fam); e.rs != nil {
		if take {
			cmdCache.drop(fam)
		}
		var counters []ir.Counters
		check := os.Getenv(checkReuseEnv) != ""
		if withCounters || check {
			var err error
			if counters, err = dataplane.RunningCounters(fam); err != nil {
				cmdCache.drop(fam)
				return runningRuleset{}, err
			}
		}
		numberHandlesFrom(e.rs, e.numbered)
		if check {
			if err := checkHandles(e.rs); err != nil {
				cmdCache.drop(fam)
				return runningRuleset{}, err
			}
		}
		if counters != nil {
			dataplane.ApplyCounters(e.rs, counters)
		}
		dataplane.TraceSince("load: cached ruleset, counters", t)
		if check {
			if err := checkCached(fam, e, counters); err != nil {
				cmdCache.drop(fam)
				return runningRuleset{}, err
			}
		}
		return runningRuleset{rs: e.rs, enc: e.enc}, nil
	}
	rs, enc, err := dataplane.RunningRulesetSkip(fam, skip)
	return runningRuleset{rs: rs, enc: enc}, err
}

// lookup returns fam's cache entry when the session's stamp is the one it
// was stored with, else an empty one (and forgets a stale one).
func (c *rulesetCache) lookup(fam ir.Family) cachedRuleset {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.entries[familySlot(fam)]
	if !c.enabled || e.rs == nil {
		return cachedRuleset{}
	}
	if loaded, err := dataplane.OpenRunning(); err != nil || !loaded {
		*e = cachedRuleset{}
		return cachedRuleset{}
	}
	if stamp, ok := dataplane.SessionStamp(fam); !ok || stamp != e.stamp {
		*e = cachedRuleset{}
		return cachedRuleset{}
	}
	return *e
}

// on reports whether the cache is enabled (the agent).
func (c *rulesetCache) on() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enabled
}

// holds reports whether fam has a cached ruleset (perhaps a stale one).
func (c *rulesetCache) holds(fam ir.Family) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.enabled && c.entries[familySlot(fam)].rs != nil
}

// drop forgets fam's cached ruleset.
func (c *rulesetCache) drop(fam ir.Family) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[familySlot(fam)] = cachedRuleset{}
}

// afterCommand updates fam's entry once a command has ended, still under
// xfw's lock: committed is the ruleset it swapped in (nil when it swapped
// none), index where its rules lie in the binary form swapped in (nil
// when the commit did not say), gen the generation a change in place
// installed (nil: none) and ok whether it succeeded.
func (c *rulesetCache) afterCommand(fam ir.Family, kind iptables.CommandKind, committed *ir.Ruleset, index *ir.Encoded, gen *keptGeneration, ok bool) {
	c.mu.Lock()
	enabled := c.enabled
	c.mu.Unlock()
	if !enabled {
		return
	}
	switch {
	case committed == nil && leavesCacheValid(kind):
		// Read only, or counters only (read live at every use), whether
		// it succeeded or not (a -C that finds no rule exits 1).
		return
	case ok && committed != nil && cacheableChange(kind):
		numbered := 0
		if gen != nil {
			numbered = gen.numbered
		}
		c.store(fam, committed, index, numbered)
		if gen != nil {
			c.keepGeneration(fam, gen)
		}
	default:
		c.drop(fam)
	}
}

// restoreCacheRules is the most rules a restore may have made for the
// agent to keep its result: each is put through the binary form (about
// 2 µs), which for a full load of kube-proxy's 440,000 rules would cost
// about what the next command's decode does.
const restoreCacheRules = 50000

// afterRestore updates fam's entry once a restore has ended, still under
// xfw's lock: committed is the ruleset it swapped in (nil when it swapped
// none: a failure, or --test), enc where its rules lie in the binary form
// swapped in.
func (c *rulesetCache) afterRestore(fam ir.Family, committed *ir.Ruleset, enc *ir.Encoded, ok, test bool) {
	c.mu.Lock()
	enabled := c.enabled
	c.mu.Unlock()
	switch {
	case !enabled || test:
		// --test swaps nothing in: the running ruleset is as it was.
	case ok && committed != nil && enc != nil && madeRules(committed) <= restoreCacheRules:
		c.store(fam, committed, enc, 0)
	default:
		c.drop(fam)
	}
}

// keepGeneration keeps kg, the generation a change in place just
// installed, with fam's entry stored before it (store), but for its
// chunks: they may be the bank's mapped memory (readChunks), which the
// session unmaps, and the next command copies them from the running bank
// into the idle one in any case.
func (c *rulesetCache) keepGeneration(fam ir.Family, kg *keptGeneration) {
	g := kg.gen
	kg.chunks = len(g.Chunks)
	g.Chunks = nil
	// The rules' references stay (the changes in place keep them in
	// counter order: compiler.AppendRule, InsertRule, DeleteRule), with
	// room for the next command's rule, so that it need not number the
	// whole ruleset again (runningGeneration).
	if cap(g.Rules) == len(g.Rules) {
		g.Rules = slices.Grow(g.Rules, keptRulesRoom)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := &c.entries[familySlot(fam)]; e.rs != nil {
		e.gen = kg
	}
}

// keptRulesRoom is how many more rule references a kept generation's
// Rules gets room for when it has none left: a copy of the references
// every so many appends instead of a numbering of the ruleset at every one.
const keptRulesRoom = 256

// takeGeneration returns fam's kept running generation, which the cache
// forgets (the command changes it), when it is still what runs; else nil.
func (c *rulesetCache) takeGeneration(fam ir.Family) *keptGeneration {
	if e := c.lookup(fam); e.gen == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.entries[familySlot(fam)]
	kg := e.gen
	e.gen = nil
	return kg
}

// numberHandlesFrom numbers the Handles of rs's rules whose counter index
// (compiler.ForEachCounter) is from or more, as a decode numbers them
// (dataplane.ApplyCounters): index+1. The rules before from are not read,
// and a chain all of whose rules lie before it is skipped whole.
func numberHandlesFrom(rs *ir.Ruleset, from int) {
	i := compiler.NumChains
	rules := func(t *ir.Ruleset) {
		for _, c := range t.Chains {
			if i+len(c.Rules) <= from {
				i += len(c.Rules)
				continue
			}
			for _, r := range c.Rules {
				if i >= from {
					r.Handle = uint32(i + 1)
				}
				i++
			}
		}
	}
	rules(rs)
	for _, t := range rs.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if t.Chain(name) != nil {
				i++
			}
		}
		rules(t)
	}
}

// checkHandles fails unless every rule of rs has the Handle a decode
// gives it (checkReuseEnv: numberHandlesFrom left none out).
func checkHandles(rs *ir.Ruleset) error {
	var bad error
	compiler.ForEachCounter(rs, func(i int, ref compiler.RuleRef, _ *ir.Chain, r *ir.Rule) {
		if r != nil && r.Handle != uint32(i+1) && bad == nil {
			bad = fmt.Errorf("%s: the cached rule %s %s %d has Handle %d, not %d", checkReuseEnv, ref.Table, ref.Chain, ref.Index+1, r.Handle, i+1)
		}
	})
	return bad
}

// madeRules counts the rules of rs without a Handle: those the command
// made rather than kept from the running ruleset.
func madeRules(rs *ir.Ruleset) int {
	n := 0
	for _, t := range append([]*ir.Ruleset{rs}, rs.Tables...) {
		for _, ch := range t.Chains {
			for _, r := range ch.Rules {
				if r.Handle == 0 {
					n++
				}
			}
		}
	}
	return n
}

// leavesCacheValid reports whether a command of kind that swapped no
// generation leaves the cached rules as they were.
func leavesCacheValid(kind iptables.CommandKind) bool {
	switch kind {
	case iptables.CmdList, iptables.CmdListRules, iptables.CmdCheck, iptables.CmdZero, iptables.CmdZeroNum:
		return true
	}
	return false
}

// cacheableChange reports whether the ruleset a command of kind committed
// is stored in the cache.
func cacheableChange(kind iptables.CommandKind) bool {
	switch kind {
	case iptables.CmdAppend, iptables.CmdInsert, iptables.CmdDelete, iptables.CmdDeleteNum, iptables.CmdNewChain:
		return true
	}
	return false
}

// store keeps rs, just committed, as fam's running ruleset, the rules the
// command made (no Handle yet) put through the binary form first (in
// place: enc, where rs's rules lie in the binary form swapped in, or nil,
// refers to rs's rule slices, and a rule's round trip encodes the same).
func (c *rulesetCache) store(fam ir.Family, rs *ir.Ruleset, enc *ir.Encoded, numbered int) {
	stamp, ok := dataplane.SessionStamp(fam)
	if ok && asDecodedFrom(rs, numbered) != nil {
		ok = false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &c.entries[familySlot(fam)]
	*e = cachedRuleset{}
	if ok {
		*e = cachedRuleset{stamp: stamp, rs: rs, enc: enc, numbered: numbered}
	}
}

// asDecoded replaces every rule of rs without a Handle (one the command
// made) by what the binary form gives back of it; an empty chain's rules
// are nil, as decoded.
func asDecoded(rs *ir.Ruleset) error { return asDecodedFrom(rs, 0) }

// asDecodedFrom is asDecoded for a ruleset whose rules before counter
// index from (compiler.ForEachCounter's) all have their Handles: the
// rules the command made lie at from or after it (keptGeneration.numbered),
// so the rules before it are not walked (every rule of the ruleset was, at
// every served change).
func asDecodedFrom(rs *ir.Ruleset, from int) error {
	i := compiler.NumChains
	chains := func(t *ir.Ruleset) error {
		for _, ch := range t.Chains {
			if len(ch.Rules) == 0 {
				ch.Rules = nil
			}
			start := min(max(from-i, 0), len(ch.Rules))
			i += len(ch.Rules)
			for k, r := range ch.Rules[start:] {
				if r.Handle != 0 {
					continue
				}
				rt, err := r.RoundTrip()
				if err != nil {
					return err
				}
				ch.Rules[start+k] = rt
			}
		}
		return nil
	}
	if err := chains(rs); err != nil {
		return err
	}
	for _, t := range rs.Tables {
		for _, name := range ir.TableBuiltins(t.Table) {
			if t.Chain(name) != nil {
				i++ // its policy's counter
			}
		}
		if err := chains(t); err != nil {
			return err
		}
	}
	return nil
}

// readOnlyCommand reports whether name args is an iptables command that
// changes nothing (-C, -L without -Z, -S), or an ipset command that
// changes no set (ipset.ChangesNothing): its failure (a -C that finds no
// rule, an `ipset test` of a non-member exit 1) is an answer, and the
// agent keeps its state and cache.
func readOnlyCommand(name string, args []string) bool {
	if name == "ipset" {
		return ipset.ChangesNothing(args)
	}
	if name != "iptables" && name != "ip6tables" {
		return false
	}
	_, rest := takeWait(args)
	cmd, err := iptables.ParseCommandWith(familyOf(name), rest, iptables.ParseOptions{Sets: (&ipsetLookup{}).lookup})
	if err != nil {
		return false
	}
	switch cmd.Kind {
	case iptables.CmdCheck, iptables.CmdListRules:
		return true
	case iptables.CmdList:
		return !cmd.Zero
	}
	return false
}

// checkCached fails unless e, fam's cached ruleset with counters applied,
// is what a decode of the running saved form gives (checkReuseEnv).
func checkCached(fam ir.Family, e cachedRuleset, counters []ir.Counters) error {
	saved, _, err := dataplane.Running(fam)
	if err != nil {
		return err
	}
	if e.enc != nil && !e.enc.Encodes(saved) {
		return fmt.Errorf("%s: the cached saved form is not the running one", checkReuseEnv)
	}
	dec, err := ir.UnmarshalRuleset(saved)
	if err != nil {
		return err
	}
	dataplane.ApplyCounters(dec, counters)
	if !reflect.DeepEqual(dec, e.rs) {
		return fmt.Errorf("%s: the cached ruleset is not the decoded one", checkReuseEnv)
	}
	return nil
}
