package iptables

import (
	"fmt"
	"slices"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Executing commands against a ruleset with libiptc's semantics: the same
// checks in the same order, the same error numbers and messages, and the
// all-or-nothing effect of one iptables invocation.

// maxFunctionNameLen is XT_FUNCTION_MAXNAMELEN, the size of a chain name in
// the kernel's table (with the NUL).
const maxFunctionNameLen = 30

// libiptc / iptc_strerror messages (without the final period).
const (
	errNoChain      = "No chain/target/match by that name"
	errBadRule      = "Bad rule (does a matching rule exist in that chain?)"
	errChainExists  = "Chain already exists"
	errFileExists   = "File exists"
	errInsertBig    = "Index of insertion too big"
	errReplaceBig   = "Index of replacement too big"
	errDeleteBig    = "Index of deletion too big"
	errCounterBig   = "Index of counter too big"
	errBadBuiltin   = "Bad built-in chain name"
	errBadPolicy    = "Bad policy name"
	errTooManyLinks = "Too many links"
	errNotEmpty     = "Directory not empty"
)

// Apply executes the command on rs as iptables would, then applies the
// kernel's checks to the result. It returns what the command prints on
// standard output (for -S and -V). On error rs is left unchanged and the
// error is an *Error with iptables' message and exit status.
//
// Listing with -L is not implemented (use -S); -h is left to the caller.
func (c *Command) Apply(rs *ir.Ruleset) (string, error) {
	out, f := c.applyCommit(rs)
	if f != nil {
		return "", f.render(ProgramName(c.Family), 0)
	}
	return out, nil
}

// applyCommit runs the command on the table of a copy of rs (created
// empty if the command is the first to use it, as the kernel does),
// validates the table and, if all went well, makes the copy the new
// content of rs.
func (c *Command) applyCommit(rs *ir.Ruleset) (string, *failure) {
	work := c.workCopy(rs)
	table := work.EnsureTable(c.Table)
	hook, local := c.localChange(table)
	out, f := c.apply(table)
	if f != nil {
		return "", f
	}
	if local {
		f = c.checkLocal(table, hook)
	} else {
		f = validate(table)
	}
	if f != nil {
		return "", f
	}
	*rs = *work
	return out, nil
}

// localChange reports whether the command, about to run on table, only
// creates a chain (-N), or adds rules to or deletes a rule from a built-in
// chain, none of them a jump or goto: the chain graph, and so every chain's hooks, stay as they
// were, and of table's rules only those added are to be checked
// (checkLocal), table being valid before (a running table was validated
// when it was committed). hook is the chain's.
func (c *Command) localChange(table *ir.Ruleset) (hook hookMask, ok bool) {
	switch c.Kind {
	case CmdNewChain:
		// An empty chain: no rule to check, no jump added, none that
		// could have named it (table was valid: every jump's chain
		// exists).
		return 0, true
	case CmdAppend, CmdInsert, CmdDelete, CmdDeleteNum:
	default:
		return 0, false
	}
	ch := table.Chain(c.Chain)
	if c.skip || c.gotoSet || ch == nil || !ch.Builtin {
		return 0, false
	}
	if hook, ok = builtinHook(c.Chain); !ok {
		return 0, false
	}
	if c.target != "" && table.Chain(c.target) != nil {
		return 0, false // a jump (resolveTargets)
	}
	for _, r := range c.Rules {
		if r.Target.Jumps() {
			return 0, false
		}
	}
	if c.Kind == CmdDeleteNum && c.RuleNum >= 1 && c.RuleNum <= len(ch.Rules) && ch.Rules[c.RuleNum-1].Target.Jumps() {
		return 0, false
	}
	return hook, true
}

// checkLocal applies validate's checks to the rules a localChange added
// to its built-in chain, of hook: a failure is then reported as validate
// reports it, by validating the whole table.
func (c *Command) checkLocal(table *ir.Ruleset, hook hookMask) *failure {
	if c.Kind != CmdAppend && c.Kind != CmdInsert {
		return nil // a deletion adds nothing
	}
	for _, r := range c.Rules {
		if checkEntry(table.Family, table.Table, r, hook) != nil {
			return validate(table)
		}
	}
	return nil
}

// workCopy returns the copy of rs the command works on: commands on whole
// rules (-A, -I, -R, -D, -C, -D NUM) change chains' rule lists and no rule
// in place, chain commands (-N, -F, -X, -P) chains only, listings change
// nothing, so the rules are shared (ir.Ruleset.CloneChains); the others
// (-Z, -E) change rules themselves and get a deep copy.
func (c *Command) workCopy(rs *ir.Ruleset) *ir.Ruleset {
	if c.LeavesRulesAlone() {
		return rs.CloneChains()
	}
	return rs.Clone()
}

// ChangesRuleListsOnly reports whether commands of kind k add, remove or
// replace whole rules and change no rule in place, so that applying one to
// a copy made by ir.Ruleset.CloneChains leaves the original untouched.
func (k CommandKind) ChangesRuleListsOnly() bool {
	return k.isRuleCommand() || k == CmdDeleteNum
}

// LeavesRulesAlone reports whether the command changes no rule in place:
// the rule commands (ChangesRuleListsOnly), listings without -Z, and the
// chain commands that change chains only (-N, -F, -X, -P: the chains of a
// copy made by ir.Ruleset.CloneChains are the copy's own). -E (the jumps
// to the chain are renamed) and -Z (the rules' counters) change rules.
// A kube-proxy partial sync's -X of an endpoint chain made a restore copy
// every rule of the nat table before.
func (c *Command) LeavesRulesAlone() bool {
	switch c.Kind {
	case CmdList, CmdListRules:
		return !c.Zero
	case CmdNewChain, CmdFlush, CmdDeleteChain, CmdSetPolicy:
		return true
	}
	return c.Kind.ChangesRuleListsOnly()
}

// resolveTargets is do_command's target handling for rule commands: a -j
// or -g naming an existing chain jumps to it (even when a target module of
// that name exists), a -j naming neither a chain nor a module fails.
// rs nil means "every unknown name is a chain" (ParseRule). It returns the
// rules to use, copied when their target changes.
func (c *Command) resolveTargets(rs *ir.Ruleset) ([]*ir.Rule, *failure) {
	if !c.Kind.isRuleCommand() || c.skip || c.target == "" {
		return c.Rules, nil
	}
	var ch *ir.Chain
	if rs != nil {
		ch = c.chains.chain(rs, c.target)
	}
	isChain := rs == nil || ch != nil
	ext, std := findTarget(c.Family, c.target)
	switch {
	case isChain && rs != nil:
		if ext != nil {
			c.Notices = append(c.Notices, "Warning: using chain "+c.target+", not extension")
		}
		kind := ir.TargetJump
		if c.gotoSet {
			kind = ir.TargetGoto
		}
		rules := c.Rules // the command's own (ownsRules): changed in place
		if !c.ownsRules {
			rules = make([]*ir.Rule, len(c.Rules))
		}
		// The chain's own name (equal to c.target): the rule holds no
		// copy of it, and the later lookups of the target (the jump
		// graph's, the compile's) compare equal strings by their
		// pointers, not byte by byte.
		name := ch.Name
		for i, r := range c.Rules {
			rules[i] = c.ownRule(r)
			rules[i].Target = ir.Target{Kind: kind, Chain: name}
		}
		return rules, nil
	case c.gotoSet && !isChain:
		return nil, paramErr("goto '%s' is not a chain", c.target)
	case c.target == "standard":
		// The standard module has no verdict of that name: the kernel
		// finds no target "standard".
		return nil, iptcErr(errNoChain)
	case ext == nil && !std && !isChain:
		return nil, missingTarget(c.Family, c.target)
	}
	return c.Rules, nil
}

// apply executes the command on rs in place.
func (c *Command) apply(rs *ir.Ruleset) (string, *failure) {
	if c.Kind.isRuleCommand() && c.skip {
		return "", nil
	}
	rules, f := c.resolveTargets(rs)
	if f != nil {
		return "", f
	}
	switch c.Kind {
	case CmdAppend, CmdInsert, CmdReplace, CmdDelete, CmdCheck, CmdDeleteNum:
		return "", c.applyRule(rs, rules)
	case CmdFlush:
		return "", forChains(rs, c.Chain, true, func(ch *ir.Chain) *failure {
			ch.Rules = nil
			return nil
		})
	case CmdZero:
		return "", zero(rs, c.Chain)
	case CmdZeroNum:
		ch := rs.Chain(c.Chain)
		if ch == nil {
			return "", iptcErr(errNoChain)
		}
		if c.RuleNum > len(ch.Rules) {
			return "", iptcErr(errCounterBig)
		}
		ch.Rules[c.RuleNum-1].Counters = ir.Counters{}
		return "", nil
	case CmdNewChain:
		if rs.Chain(c.Chain) != nil || clashesWithTarget(c.Family, c.Chain) {
			return "", iptcErr(errChainExists)
		}
		rs.Chains = append(rs.Chains, &ir.Chain{Name: c.Chain, Policy: ir.VerdictNone})
		return "", nil
	case CmdDeleteChain:
		return "", deleteChains(rs, c.Chain)
	case CmdRenameChain:
		return "", renameChain(rs, c.Chain, c.NewName)
	case CmdSetPolicy:
		return "", setPolicy(rs, c.Chain, c.Policy, c.Counters)
	case CmdListRules:
		out, f := listRules(rs, c.Chain, c.RuleNum, c.Verbose > 0)
		if f == nil && c.Zero {
			f = zero(rs, c.Chain)
		}
		return out, f
	case CmdList:
		return "", paramErr("listing with -L is not supported by xfw; use -S")
	case CmdVersion:
		return fmt.Sprintf("%s %s\n", ProgramName(c.Family), versionString), nil
	}
	return "", nil
}

// ownRule returns rule r of the command to put into a ruleset: r itself
// when the command owns its rules (ownsRules), else a copy.
func (c *Command) ownRule(r *ir.Rule) *ir.Rule {
	if c.ownsRules {
		return r
	}
	return r.Clone()
}

// chainRulesFirst is the room an append makes in a chain without rules.
const chainRulesFirst = 4

// applyRule executes -A, -I, -R, -D and -C with the resolved rules.
func (c *Command) applyRule(rs *ir.Ruleset, rules []*ir.Rule) *failure {
	ch := c.chains.chain(rs, c.Chain)
	switch c.Kind {
	case CmdAppend:
		if ch == nil {
			return iptcErr(errNoChain)
		}
		if cap(ch.Rules) == 0 {
			// Room for a few: kube-proxy's chains have two to a dozen
			// rules, appended one command at a time.
			ch.Rules = make([]*ir.Rule, 0, max(len(rules), chainRulesFirst))
		}
		for _, r := range rules {
			ch.Rules = append(ch.Rules, c.ownRule(r))
		}
	case CmdInsert:
		if ch == nil {
			return iptcErr(errNoChain)
		}
		pos := c.RuleNum - 1
		for _, r := range rules {
			if pos > len(ch.Rules) {
				return iptcErr(errInsertBig)
			}
			ch.Rules = slices.Insert(ch.Rules, pos, c.ownRule(r))
		}
	case CmdReplace:
		if ch == nil {
			return iptcErr(errNoChain)
		}
		if c.RuleNum-1 >= len(ch.Rules) {
			return iptcErr(errReplaceBig)
		}
		ch.Rules[c.RuleNum-1] = c.ownRule(rules[0])
	case CmdDeleteNum:
		if ch == nil {
			return iptcErr(errNoChain)
		}
		if c.RuleNum-1 >= len(ch.Rules) {
			return iptcErr(errDeleteBig)
		}
		ch.Rules = append(ch.Rules[:c.RuleNum-1], ch.Rules[c.RuleNum:]...)
	case CmdDelete, CmdCheck:
		if ch == nil {
			return iptcErr(errBadRule)
		}
		var failed bool
		for _, r := range rules {
			i := findRule(rs.Family, ch, r)
			if i < 0 {
				failed = true
				continue
			}
			if c.Kind == CmdDelete {
				ch.Rules = append(ch.Rules[:i], ch.Rules[i+1:]...)
			}
		}
		if failed {
			return mismatchErr(rules[0].Target)
		}
	}
	return nil
}

// mismatchErr is what -D and -C report when no rule matches: libiptc's
// "Bad rule" for a standard verdict (or no target), the plain ENOENT
// message when the rule jumps to a chain or its target is a module (as
// iptables-legacy 1.8.9 prints it: looking the target up leaves libiptc's
// last function changed).
func mismatchErr(t ir.Target) *failure {
	switch t.Kind {
	case ir.TargetNone, ir.TargetAccept, ir.TargetDrop, ir.TargetReturn:
		return iptcErr(errBadRule)
	}
	return iptcErr(errNoChain)
}

// findRule returns the index of the first rule of ch equal to r, or -1.
func findRule(fam ir.Family, ch *ir.Chain, r *ir.Rule) int {
	// The addresses, compared first by RulesEqual too, normalised once:
	// most rules of a large chain differ in them.
	src, dst := addrKey(r.Src), addrKey(r.Dst)
	if src != (addrCmp{}) {
		// A rule with r's source has its address as it is (addrKey
		// keeps a set one): most rules are told by that compare alone.
		for i, x := range ch.Rules {
			if x.Src.Addr == src.addr && addrKey(x.Src) == src && addrKey(x.Dst) == dst && RulesEqual(fam, x, r) {
				return i
			}
		}
		return -1
	}
	for i, x := range ch.Rules {
		if addrKey(x.Src) == src && addrKey(x.Dst) == dst && RulesEqual(fam, x, r) {
			return i
		}
	}
	return -1
}

// forChains calls fn for the chain called name, or for every chain (user
// chains only unless builtins) in libiptc's order when name is "". All
// chains are tried; the last failure is returned.
func forChains(rs *ir.Ruleset, name string, builtins bool, fn func(*ir.Chain) *failure) *failure {
	if name != "" {
		ch := rs.Chain(name)
		if ch == nil {
			return iptcErr(errNoChain)
		}
		return fn(ch)
	}
	var last *failure
	for _, ch := range OrderedChains(rs) {
		if ch.Builtin && !builtins {
			continue
		}
		if f := fn(ch); f != nil {
			last = f
		}
	}
	return last
}

// zero resets the counters of the chain's rules and policy (all chains when
// name is "").
func zero(rs *ir.Ruleset, name string) *failure {
	return forChains(rs, name, true, func(ch *ir.Chain) *failure {
		ch.Counters = ir.Counters{}
		for _, r := range ch.Rules {
			r.Counters = ir.Counters{}
		}
		return nil
	})
}

// references counts the rules of rs that jump or go to chain name.
func references(rs *ir.Ruleset, name string) int {
	n := 0
	for _, ch := range rs.Chains {
		for _, r := range ch.Rules {
			if r.Target.Jumps() && r.Target.Chain == name {
				n++
			}
		}
	}
	return n
}

// deleteChains is -X: delete one user chain, or every user chain.
func deleteChains(rs *ir.Ruleset, name string) *failure {
	var doomed []string
	f := forChains(rs, name, false, func(ch *ir.Chain) *failure {
		switch {
		case ch.Builtin:
			return kernelEINVAL()
		case references(rs, ch.Name) > 0:
			return iptcErr(errTooManyLinks)
		case len(ch.Rules) > 0:
			return iptcErr(errNotEmpty)
		}
		doomed = append(doomed, ch.Name)
		return nil
	})
	if f != nil {
		return f
	}
	for _, n := range doomed {
		removeChain(rs, n)
	}
	return nil
}

// removeChain drops chain name from rs.
func removeChain(rs *ir.Ruleset, name string) {
	for i, ch := range rs.Chains {
		if ch.Name == name {
			rs.Chains = append(rs.Chains[:i], rs.Chains[i+1:]...)
			return
		}
	}
}

// isVerdictName reports whether name is one of the standard verdicts,
// which libiptc refuses as chain names.
func isVerdictName(name string) bool {
	switch name {
	case "ACCEPT", "DROP", "QUEUE", "RETURN":
		return true
	}
	return false
}

// renameChain is -E: references follow the chain.
func renameChain(rs *ir.Ruleset, oldName, newName string) *failure {
	if rs.Chain(newName) != nil || isVerdictName(newName) {
		return iptcErr(errFileExists)
	}
	ch := rs.Chain(oldName)
	if ch == nil || ch.Builtin {
		return iptcErr(errNoChain)
	}
	if len(newName) >= maxFunctionNameLen {
		// The kernel keeps chain names in XT_FUNCTION_MAXNAMELEN bytes.
		newName = newName[:maxFunctionNameLen-1]
	}
	rs.RenameChain(ch, newName)
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			if r.Target.Jumps() && r.Target.Chain == oldName {
				r.Target.Chain = newName
			}
		}
	}
	return nil
}

// setPolicy is -P (and the policy part of ":CHAIN POLICY" in restore).
func setPolicy(rs *ir.Ruleset, chain, policy string, counters *ir.Counters) *failure {
	ch := rs.Chain(chain)
	if ch == nil || !ch.Builtin {
		return iptcErr(errBadBuiltin)
	}
	switch policy {
	case "ACCEPT":
		ch.Policy = ir.VerdictAccept
	case "DROP":
		ch.Policy = ir.VerdictDrop
	default:
		f := iptcErr(errBadPolicy)
		f.dmesg = true
		return f
	}
	if counters != nil {
		ch.Counters = *counters
	}
	return nil
}

// chainMemo remembers the last few chains a restore's rule commands looked
// up by name, found or not: kube-proxy appends runs of rules to one chain
// and jumps to a few chains from many (a lookup in a table of 110,000
// chains is a cache miss or two). It is valid while the table's chains
// stay the same: the restorer resets it before any command or line that
// may add, remove or rename chains, and rule commands do none of that.
type chainMemo struct {
	table  *ir.Ruleset
	find   func(string) *ir.Chain // table's ChainFinder
	names  [chainMemoSize]string
	chains [chainMemoSize]*ir.Chain
	n      int // entries in use
	next   int // the entry replaced next
}

// chainMemoSize is how many lookups a chainMemo remembers.
const chainMemoSize = 4

// chain returns rs's chain called name, or nil; m nil looks it up.
func (m *chainMemo) chain(rs *ir.Ruleset, name string) *ir.Chain {
	if m == nil {
		return rs.Chain(name)
	}
	if m.table != rs || m.find == nil {
		m.reset()
		m.table, m.find = rs, rs.ChainFinder()
	}
	for i := range m.n {
		if m.names[i] == name {
			return m.chains[i]
		}
	}
	c := m.find(name)
	m.names[m.next], m.chains[m.next] = name, c
	m.next = (m.next + 1) % chainMemoSize
	m.n = min(m.n+1, chainMemoSize)
	return c
}

// reset forgets every lookup.
func (m *chainMemo) reset() { *m = chainMemo{} }
