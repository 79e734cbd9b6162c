package iptables

import (
	"runtime"
	"sync"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The checks the kernel (x_tables, legacy backend) applies when iptables
// commits a table: chain loops, jumps into built-in chains, matches used with
// the wrong protocol, modules used in hooks they do not support. iptables
// reports them only after parsing succeeded, as "iptables: Invalid argument.
// Run `dmesg' for more information." (or "Too many levels of symbolic
// links." for loops); iptables-restore reports "line N failed" for the
// COMMIT line.

// hookMask is a set of netfilter hooks, as the kernel's comefrom/hook_mask.
type hookMask uint8

// The netfilter hooks.
const (
	hookLocalIn hookMask = 1 << iota
	hookForward
	hookLocalOut
	hookPreRouting
	hookPostRouting
)

// builtinHook returns the hook of a built-in chain (of any table: a
// chain's name is its hook's).
func builtinHook(chain string) (hookMask, bool) {
	switch chain {
	case ir.ChainInput:
		return hookLocalIn, true
	case ir.ChainForward:
		return hookForward, true
	case ir.ChainOutput:
		return hookLocalOut, true
	case ir.ChainPrerouting:
		return hookPreRouting, true
	case ir.ChainPostrouting:
		return hookPostRouting, true
	}
	return 0, false
}

// macHooks are the hooks the mac match may be used from.
const macHooks = hookPreRouting | hookLocalIn | hookForward

// Validate applies the kernel's checks to a whole ruleset (every table),
// as committing it with iptables-legacy would. The error is an *Error with
// iptables' message.
func Validate(rs *ir.Ruleset) error {
	if f := validate(rs); f != nil {
		return f.render(ProgramName(rs.Family), 0)
	}
	for _, t := range rs.Tables {
		if f := validate(t); f != nil {
			return f.render(ProgramName(rs.Family), 0)
		}
	}
	return nil
}

// validate applies the kernel's checks to one table. The rules are
// checked in the order of Chains, which is the order the first failure is
// reported in only when there is one: then they are checked again in
// iptables' order (OrderedChains, user chains sorted by name) to name the
// same failure. The checks of a rule depend on nothing but the rule, its
// table and its chain's hooks.
func validate(rs *ir.Ruleset) *failure {
	hooks, f := chainHooks(rs)
	if f != nil {
		return f
	}
	failed := false
	for i, c := range rs.Chains {
		for _, r := range c.Rules {
			if checkEntry(rs.Family, rs.Table, r, hooks[i]) != nil {
				failed = true
				break
			}
		}
	}
	if !failed {
		return nil
	}
	return firstFailureInOrder(rs, hooks)
}

// firstFailureInOrder checks rs's rules in iptables' order
// (OrderedChains), hooks[i] being the hooks of rs.Chains[i], and returns
// the first failure, or nil.
func firstFailureInOrder(rs *ir.Ruleset, hooks []hookMask) *failure {
	index := make(map[*ir.Chain]int, len(rs.Chains))
	for i, c := range rs.Chains {
		index[c] = i
	}
	for _, c := range OrderedChains(rs) {
		for _, r := range c.Rules {
			if f := checkEntry(rs.Family, rs.Table, r, hooks[index[c]]); f != nil {
				return f
			}
		}
	}
	return nil
}

// chainHooks walks the chain graph from the built-in chains, as the
// kernel's mark_source_chains does: it finds loops and jumps to built-in or
// missing chains, and returns for every chain of Chains (by index) the
// hooks it is reachable from: those of the first chain of its name.
// Chains are numbered and each jump's target looked up once (a kube-proxy
// table has a hundred thousand chains, reached from several hooks).
func chainHooks(rs *ir.Ruleset) ([]hookMask, *failure) {
	g := newJumpGraph(rs)
	g.resolveAll()
	masks := make([]hookMask, len(rs.Chains))
	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]uint8, len(rs.Chains))
	for _, name := range ir.TableBuiltins(rs.Table) {
		h, _ := builtinHook(name)
		c, ok := g.index[name]
		if !ok {
			continue
		}
		clear(state)
		var walk func(c int32) *failure
		walk = func(c int32) *failure {
			state[c] = onStack
			masks[c] |= h
			for _, next := range g.targetsOf(c) {
				switch {
				case next == jumpMissing:
					return iptcErr(errNoChain)
				case next == jumpBuiltin:
					return kernelEINVAL()
				case state[next] == onStack:
					return kernelELOOP()
				case state[next] == unvisited:
					if f := walk(next); f != nil {
						return f
					}
				}
			}
			state[c] = done
			return nil
		}
		if f := walk(c); f != nil {
			return nil, f
		}
	}
	// Only the first chain of a name is walked (g.index): a later one
	// takes its hooks, as a lookup by name would.
	for i := range masks {
		if first := g.first[i]; first != int32(i) {
			masks[i] = masks[first]
		}
	}
	return masks, nil
}

// Targets of a jump that is no chain index (jumpGraph.targetsOf).
const (
	jumpMissing = -1 // no chain of that name
	jumpBuiltin = -2 // a built-in chain
)

// jumpGraph numbers a table's chains (their index in Chains, the first of
// a name as ir.Ruleset.Chain finds it) and resolves their jumps on demand.
type jumpGraph struct {
	rs      *ir.Ruleset
	index   map[string]int32
	targets [][]int32 // per chain, its jumps' targets in rule order; nil: not resolved yet
	// first is, per chain, the index of the first chain of its name
	// (itself but for a duplicate name).
	first []int32
	// recent holds recent lookups of index by a hash of the name's
	// length and last byte (recentSlot): kube-proxy jumps to
	// KUBE-MARK-MASQ from a hundred thousand chains, a lookup in a map of
	// 110,000 names otherwise.
	recent [recentSlots]recentTarget
}

// recentSlots is the size of jumpGraph.recent, a power of two.
const recentSlots = 64

// recentTarget is a name looked up in jumpGraph.index and what it found.
type recentTarget struct {
	name string
	next int32
	ok   bool
}

// recentSlot is name's slot in jumpGraph.recent (name is not empty).
func recentSlot(name string) int {
	return (len(name)*31 + int(name[len(name)-1])) & (recentSlots - 1)
}

// lookup is index[name], served from recent when it holds name.
func (g *jumpGraph) lookup(name string) (int32, bool) {
	if name == "" {
		next, ok := g.index[name]
		return next, ok
	}
	slot := &g.recent[recentSlot(name)]
	if slot.name == name && len(slot.name) > 0 {
		return slot.next, slot.ok
	}
	next, ok := g.index[name]
	*slot = recentTarget{name: name, next: next, ok: ok}
	return next, ok
}

// newJumpGraph numbers rs's chains.
func newJumpGraph(rs *ir.Ruleset) *jumpGraph {
	g := &jumpGraph{rs: rs, index: make(map[string]int32, len(rs.Chains)),
		targets: make([][]int32, len(rs.Chains)), first: make([]int32, len(rs.Chains))}
	for i, c := range rs.Chains {
		if j, dup := g.index[c.Name]; dup {
			g.first[i] = j
		} else {
			g.index[c.Name] = int32(i)
			g.first[i] = int32(i)
		}
	}
	return g
}

// resolveParallelChains is the least number of chains whose jumps
// resolveAll resolves on every CPU.
const resolveParallelChains = 4096

// resolveAll resolves the jumps of every chain ahead of the walk, on every
// CPU for a large table (kube-proxy's 110,000 chains and 330,000 rules: a
// cache miss or two per rule and per jump, in chains that are independent
// of each other); a small table's are resolved as the walk meets them.
func (g *jumpGraph) resolveAll() {
	n := len(g.rs.Chains)
	workers := runtime.GOMAXPROCS(0)
	if n < resolveParallelChains || workers < 2 {
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker has recent slots of its own.
			own := &jumpGraph{rs: g.rs, index: g.index, targets: g.targets}
			for c := lo; c < hi; c++ {
				own.targetsOf(int32(c))
			}
		}()
	}
	wg.Wait()
}

// targetsOf returns the targets of chain c's jumps and gotos, in rule
// order: chain indexes, jumpMissing or jumpBuiltin.
func (g *jumpGraph) targetsOf(c int32) []int32 {
	if t := g.targets[c]; t != nil {
		return t
	}
	t := []int32{}
	for _, r := range g.rs.Chains[c].Rules {
		if !r.Target.Jumps() {
			continue
		}
		next, ok := g.lookup(r.Target.Chain)
		switch {
		case !ok:
			next = jumpMissing
		case g.rs.Chains[next].Builtin:
			next = jumpBuiltin
		}
		t = append(t, next)
	}
	g.targets[c] = t
	return t
}

// needsProto checks the protocol a match module is restricted to
// (xt_check_match): the rule must name it, not inverted.
func needsProto(r *ir.Rule, proto uint8) bool {
	return r.Proto.Num == proto && !r.Proto.Invert
}

// checkEntry applies the per-rule kernel checks for a rule in a chain of
// table reachable from hooks.
func checkEntry(fam ir.Family, table string, r *ir.Rule, hooks hookMask) *failure {
	for _, m := range r.Matches {
		ok := true
		switch m := m.(type) {
		case *ir.LimitMatch:
			if f := checkLimit(m); f != nil {
				return f
			}
		case *ir.RecentMatch:
			if f := checkRecent(m); f != nil {
				return f
			}
		case *ir.HashLimitMatch:
			if f := checkHashLimit(fam, m); f != nil {
				return f
			}
		case *ir.StringMatch:
			if f := checkString(m); f != nil {
				return f
			}
		case *ir.U32Match:
			if f := checkU32(m); f != nil {
				return f
			}
		case *ir.TimeMatch:
			if f := checkTime(m); f != nil {
				return f
			}
		case *ir.TCPMatch:
			ok = needsProto(r, protoTCP)
		case *ir.UDPMatch:
			ok = needsProto(r, protoUDP)
		case *ir.ICMPMatch:
			if m.V6 {
				ok = fam == ir.IPv6 && needsProto(r, protoICMPv6)
			} else {
				ok = fam == ir.IPv4 && needsProto(r, protoICMP)
			}
		case *ir.MultiportMatch:
			ok = multiportProtoName(r.Proto.Num) != "" && !r.Proto.Invert && multiportSlots(m) <= maxMultiPorts
		case *ir.TTLMatch:
			ok = m.HL == (fam == ir.IPv6)
		case *ir.MACMatch:
			ok = hooks&^macHooks == 0
		case *ir.AddrTypeMatch:
			ok = addrTypeHookOK(fam, m, hooks)
		case *ir.OwnerMatch:
			ok = ownerOK(m, hooks)
		case *ir.DevGroupMatch:
			ok = devGroupOK(m, hooks)
		case *ir.PhysdevMatch:
			ok = physdevOK(m, hooks)
		case *ir.ECNMatch:
			ok = ecnProtoOK(r, m)
		case *ir.TCPMSSMatch:
			ok = needsProto(r, protoTCP)
		case *ir.MHMatch:
			ok = needsProto(r, protoMH)
		case *ir.SCTPMatch, *ir.DCCPMatch, *ir.ESPMatch, *ir.AH4Match:
			ok = hdr4ProtoOK(r, m)
		}
		if !ok {
			return kernelEINVAL()
		}
	}
	if f := checkTableTarget(table, r.Target, hooks); f != nil {
		return f
	}
	if f := checkMangleTarget(table, r, hooks); f != nil {
		return f
	}
	switch t := r.Target; t.Kind {
	case ir.TargetReject:
		if t.RejectWith == RejectTCPReset && !needsProto(r, protoTCP) {
			return kernelEINVAL()
		}
	case ir.TargetConnmark:
		if f := checkConnmarkTarget(t.Connmark); f != nil {
			return f
		}
	case ir.TargetNFLog:
		if f := checkNFLogTarget(t.NFLog); f != nil {
			return f
		}
	case ir.TargetLog:
		const maxLevel = 7
		if t.Log != nil && (t.Log.Level > maxLevel || len(t.Log.Prefix) >= logPrefixSize) {
			return kernelEINVAL()
		}
	}
	return nil
}

// multiportSlots counts the port slots a multiport match uses (a range
// takes two).
func multiportSlots(m *ir.MultiportMatch) int {
	n := 0
	for _, p := range m.Ports {
		n++
		if p.First != p.Last {
			n++
		}
	}
	return n
}
