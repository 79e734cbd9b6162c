package compiler

import (
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/xfw-dev/xfw/internal/ir"
)

// Generation is one compiled ruleset of one family: everything the loader
// writes into the family's maps and load-time constants.
type Generation struct {
	Family     ir.Family
	Active     uint32 // bit mask of fields in use
	NumChunks  uint32
	ChainStart [NumChains]uint32
	ChainEnd   [NumChains]uint32
	PolicyDrop [NumChains]bool
	MaxIters   uint32

	Entries []Entry
	Chunks  []Chunk
	// ClassChunks.At(c, k) is the chunk id of class c's chunk k.
	ClassChunks ClassTable
	// Small is the concatenation of the direct arrays of the small fields;
	// SmallBase[f] is where field f's array starts.
	Small     []uint32
	SmallBase [NumFields]uint32
	// SmallWritten lists the ranges of Small the in-place changes
	// (AppendRule, InsertRule, DeleteRule) wrote since it was last
	// emptied, as pairs of a first index and the index after the last:
	// the entries that may differ from the generation they started
	// from (the caller empties it). Not part of what a generation is
	// (DiffGenerations ignores it).
	SmallWritten []uint32
	// runs is where the small fields' runs of one class start, kept by
	// the changes in place (smallIndex); not part of what a generation
	// is either.
	runs *smallIndex
	// NoShortPorts says the port fields' arrays end before ValShort: no
	// condition tells a header cut short after its ports (ValShort +
	// port) from one cut short before them (ValTrunc), so the data plane
	// classifies the former as the latter (bpf/classify.h
	// xfw_ports_view) and the arrays are half as long (shortports.go).
	NoShortPorts bool
	// Bounds holds the source then destination address bounds.
	Bounds    []Bound
	AddrBase  [NumAddrFields]uint32
	AddrCount [NumAddrFields]uint32
	// Hash and DefaultClass serve the hashed fields.
	Hash         map[HashKey]uint32
	DefaultClass [NumFields]uint32
	LogConfigs   []LogConfig
	// SetConds are the set conditions the rules test, at most MaxSetConds:
	// FieldSets' bit k is the packet's result for SetConds[k].
	SetConds []SetCond
	// ext6 are the IPv6 extension header conditions (Ext6Conds).
	ext6 []ir.Match
	// hdr4 are the transport header conditions (Hdr4Conds).
	hdr4 []Hdr4Cond
	// Rules maps counter indexes to rules: index i ≥ NumChains is
	// Rules[i-NumChains]; indexes 0–2 are the filter table's built-in
	// chains' policies, the other tables' policies are among Rules
	// (ForEachCounter).
	Rules []RuleRef
	// Layout is what AppendRule needs beyond the data plane's maps.
	Layout Layout
	// Limits are the token buckets of the rules' limit matches, one per
	// match however often user chains flatten its rule; limit probes
	// (Probes of kind ProbeLimit) name them by index.
	Limits []Limit
	// Statistics are the nth statistic matches' instances (their probes'
	// Inst), one per match however often user chains flatten its rule.
	Statistics []StatisticInst
	// Probes are the matches the walk asks in rule order (probe.go);
	// probe entries (EFProbe) name them by index.
	Probes []Probe
	// Recents are the rules' recent matches, one per match however
	// often user chains flatten its rule; recent probes (ProbeRecent)
	// name them by index.
	Recents []Recent
	// HashLimits are the rules' hashlimit matches, one per match however
	// often user chains flatten its rule; hashlimit probes (Probes of
	// kind ProbeHashLimit) name them by index.
	HashLimits []HashLimit
	// Preds are the string, u32 and time matches (pred.go); probes of
	// kind ProbePred name them by index.
	Preds []Pred
	// CtExpires are the conntrack matches' --ctexpire ranges; probes of
	// kind ProbeCtExpire name them by index (ctexpire.go).
	CtExpires []CtExpire
	// Trivial are the base chains' walks that accept every packet without
	// classifying it, and the counters they bump (trivial.go).
	Trivial [NumChains]TrivialInfo
	// preDrops are the leading address drops before routing (predrop.go).
	preDrops []PreDrop
	// SetWrites are the sets SET targets write (settarget.go); probes of
	// kind ProbeSetTarget name them by 1 + their index.
	SetWrites []string
}

// Layout describes a generation's entry list for AppendRule: the slack
// after each base chain and the entries that continue at a chain's end.
type Layout struct {
	// SlackStart[h] starts the slack before base chain h's entries:
	// positions SlackStart[h] to ChainStart[h]-1 take rules inserted at
	// its head.
	SlackStart [NumChains]uint32
	// SlackEnd[h] ends base chain h's slack: positions ChainEnd[h] to
	// SlackEnd[h]-1 are in no class (they never match) and take appended
	// rules.
	SlackEnd [NumChains]uint32
	// EndRefs[h] are the CONTINUE entries of base chain h that continue at
	// its end (RETURN from the base chain, the end of a chain it goes to):
	// they must skip an appended rule.
	EndRefs [NumChains][]uint32
	// WalkStart and WalkEnd bound the entries the data plane walks for
	// each base chain when the ruleset has other tables (tables.go): the
	// chains of every table the kernel runs on that path, filter's
	// (ChainStart to ChainEnd) among them. WalkEnd[h] == 0: the walk is
	// filter's chain alone. The in-place changes keep filter's ACCEPT
	// going on with the tables after it (walkAcceptTo), and WalkEnd at
	// ChainEnd when filter's chain ends the walk.
	WalkStart, WalkEnd [NumChains]uint32
	// Dead[h] counts the positions of base chain h whose rules DeleteRule
	// removed: in no class, never reused until the next full compile.
	Dead [NumChains]uint32
	// NatResume[h] is 1 + the position after the nat PREROUTING segment
	// of base chain h's walk, where the data plane resumes the walk of
	// a packet a DNAT sent there (0: no such segment; nat.go).
	NatResume [NumChains]uint32
	// PostStart[h] is 1 + the position of the first POSTROUTING segment
	// of base chain h's walk (0: none): the data plane judges a packet
	// nat OUTPUT rerouted with the first route's device before it and
	// the new one from it (nat_output.go).
	PostStart [NumChains]uint32
	// Reroute[h] is 1 + the position in base chain h's walk where the
	// data plane routes the packet again with its mark (after the
	// PREROUTING segments; after mangle OUTPUT), set only when the chains
	// before it can change the mark (0: none; mark_route.go).
	Reroute [NumChains]uint32
	// RawPre[h] is 1 + the position after the PREROUTING segments of
	// base chain h's walk (INPUT, FORWARD) the data plane judges before
	// its route lookup, as the kernel runs PREROUTING before routing: raw
	// PREROUTING, and mangle PREROUTING after it, when they decide on the
	// packet alone. The INPUT walk's segments up to RawPre[ChainInput],
	// then, once routed, the chosen walk from RawPre[h] (0: no such
	// pre-walk; rawpre.go). RawPre[ChainOutput] is 1 + the position after
	// the OUTPUT walk's raw segment, judged before the host's packet is
	// translated and tracked (rawOutputPreWalked).
	RawPre [NumChains]uint32
	// PrePassive says the segments RawPre ends are all empty chains with
	// policy ACCEPT: they only count. The data plane then walks them
	// only for the packets its routing drops (which the kernel's
	// PREROUTING counts too), and a walk that accepts everything stays
	// trivial.
	PrePassive bool
	// PreEnd[h] is 1 + the position after the PREROUTING segments of
	// base chain h's walk (INPUT, FORWARD) and the reroute entries that
	// follow them (0: no PREROUTING segment). The data plane walks the
	// INPUT walk's segments up to PreEnd[ChainInput] for a packet its
	// routing drops, which the kernel's PREROUTING chains see all the
	// same (rawpre.go): counted there, translated by nat PREROUTING's
	// DNAT or routed by their mark, and then routed again.
	PreEnd [NumChains]uint32
	// Regions are the user chains' regions that have slack, for the
	// in-place changes of their chains (regions.go, "Slack").
	Regions []RegionLayout `json:",omitempty"`
}

// RegionLayout is one region with slack: RegionSlack never-matching
// positions from SlackStart to Start (rules inserted at the chain's
// head), the rules' entries from Start to End, RegionSlack more from End
// to Return (appended rules), and the region's RETURN entry at Return,
// where its chain's RETURN rules continue. The region's CALLs search from
// SlackStart.
type RegionLayout struct {
	// Chain names the region's chain; Check is the hook the kernel's
	// checks use in its view.
	Chain                          string
	Check                          int
	SlackStart, Start, End, Return uint32
	// Dead counts the positions of rules DeleteRuleInChain removed.
	Dead uint32 `json:",omitempty"`
}

// Walks reports whether the generation walks other tables' chains
// (Layout.WalkEnd).
func (g *Generation) Walks() bool { return g.Layout.WalkEnd != [NumChains]uint32{} }

// Walk returns the entries the data plane walks for base chain h: its
// walk through every table (WalkStart), or filter's chain alone.
func (g *Generation) Walk(h int) (start, end uint32) {
	if g.Layout.WalkEnd[h] != 0 {
		return g.Layout.WalkStart[h], g.Layout.WalkEnd[h]
	}
	return g.ChainStart[h], g.ChainEnd[h]
}

// NumCounters is the size of the counters map.
func (g *Generation) NumCounters() int { return NumChains + len(g.Rules) }

// Options tune compilation.
type Options struct {
	// Interfaces are the devices of the network namespace, for -i/-o.
	Interfaces []Interface
	// SetCounts says whether evaluating set match m updates set entry
	// counters (its set, or a list:set's members, have counters, and no
	// "! --update-counters" says otherwise); such a match gets a counting
	// probe before its rule (EFSetCount). Nil: none does.
	SetCounts func(m *ir.SetMatch) bool
	// Trace, when set, is told each stage of the compile as it ends:
	// its name and when it started; it returns the next stage's start
	// (dataplane.TraceSince's shape). Nil: nothing is told.
	Trace func(stage string, start time.Time) time.Time
}

// trace tells o.Trace that stage, begun at start, ended.
func (o Options) trace(stage string, start time.Time) time.Time {
	if o.Trace == nil {
		return start
	}
	return o.Trace(stage, start)
}

// Compile compiles rs: its filter table and the chains of its other
// tables (tables.go), refusing what the data plane cannot enforce.
func Compile(rs *ir.Ruleset, opts Options) (*Generation, error) {
	if err := checkOtherTables(rs); err != nil {
		return nil, err
	}
	t := time.Now()
	jumps := resolveJumps(rs)
	opts.trace("compile: resolve jumps", t)
	natReach := startNatReach(rs, jumps)
	g, err := compileChecked(rs, opts, jumps)
	t = time.Now()
	natErr := natReach()
	opts.trace("compile: wait for the nat check", t)
	if natErr != nil {
		// Refused before flattening in a serial compile: its refusal
		// is the one reported, whatever the flattening found.
		return nil, natErr
	}
	return g, err
}

// minConcurrentNatRules is the nat table's size from which startNatReach
// checks it beside the compile rather than before it (kube-proxy's 10K
// services: 330,000 rules, a check of about 0.13 s of CPU); a variable
// so that tests compare both orders.
var minConcurrentNatRules = 4096

// startNatReach starts checkNatReach of rs and returns the function that
// waits for its answer: on another goroutine, beside the rest of the
// compile, when rs's nat table is large and there are CPUs for it, at
// once otherwise. The check only reads rs, as does the compile (its
// rewrites copy the rules they change), and flattening refuses an
// unsupported NAT rule it meets by itself (natEntry), so a compile that
// goes on past a refused NAT rule ends in an error, not in a generation.
// jumps are rs's jumps resolved ahead (nil: looked up by name).
func startNatReach(rs *ir.Ruleset, jumps *jumpIndex) func() error {
	nat := rs.TableByName(ir.TableNat)
	rules := 0
	if nat != nil {
		for _, c := range nat.Chains {
			rules += len(c.Rules)
		}
	}
	if rules < minConcurrentNatRules || runtime.GOMAXPROCS(0) < 2 {
		err := checkNatReach(rs, jumps)
		return func() error { return err }
	}
	done := make(chan error, 1)
	go func() { done <- checkNatReach(rs, jumps) }()
	return func() error { return <-done }
}

// compileChecked is Compile after the ruleset-wide checks; jumps are
// rs's jumps resolved ahead (nil: looked up by name).
func compileChecked(rs *ir.Ruleset, opts Options, jumps *jumpIndex) (*Generation, error) {
	rs = natReplRewrite(rs)              // --ctreplsrc, --ctrepldst with NAT (ctrepl.go)
	rs, setWrites := setWriteRewrite(rs) // sets SET targets write (settarget.go)
	g := &Generation{Family: rs.Family, Hash: map[HashKey]uint32{}}
	fl := &flattener{
		rs:       rs,
		ifaces:   opts.Interfaces,
		logIndex: map[LogConfig]uint16{},
		sets:     &setConds{fam: rs.Family},
		counts:   opts.SetCounts,
		policyID: map[RuleRef]uint32{},
		// Written sets, numbered in the order their targets come.
		setWrites: setWrites,
		natIdle:   rs.TableByName(ir.TableNat) != nil && !natWalked(rs),
		jumps:     jumps,
		// Regions get slack in a ruleset of the filter table alone
		// (regions.go, "Slack").
		regionSlack: !UsesOtherTables(rs),
	}
	t := time.Now()
	g.Rules = fl.numberRules(rs)
	t = opts.trace("compile: number rules", t)
	for hook, name := range ir.BuiltinChains {
		if c := rs.Chain(name); c != nil {
			g.PolicyDrop[hook] = c.Policy == ir.VerdictDrop
		}
	}
	fl.precomputeTerms()
	t = opts.trace("compile: terms", t)
	fl.entries = make([]Entry, 0, entriesEstimate(rs))
	// The region queue sized for the regions there can be: kube-proxy's
	// 110,000 in one allocation of 7 MB instead of 14 MB of doublings.
	fl.pending = make([]pendingRegion, 0, regionsEstimate(rs))
	var err error
	g.ChainStart, g.ChainEnd, err = fl.flatten()
	if err != nil {
		return nil, err
	}
	t = opts.trace("compile: flatten", t)
	g.Entries = fl.entries
	fl.layout.WalkStart, fl.layout.WalkEnd = fl.walkStart, fl.walkEnd
	fl.layout.NatResume = fl.natResume
	fl.layout.PostStart = fl.postStart
	fl.layout.Reroute = fl.reroute
	fl.layout.RawPre = fl.rawPre
	fl.layout.PreEnd = fl.preEnd
	fl.layout.PrePassive = fl.rawPre[ChainInput] != 0 && fl.prePassive[ChainInput]
	g.Layout = fl.layout
	neverInAnyClass(g)
	g.LogConfigs = fl.logs
	g.SetConds = fl.sets.conds
	if fl.sets.ext6 != nil {
		g.ext6 = fl.sets.ext6.conds
	}
	if fl.sets.hdr4 != nil {
		g.hdr4 = fl.sets.hdr4.conds
	}
	g.Limits = fl.limits.items
	g.Statistics = fl.statistics.items
	g.Probes = fl.probeList
	g.Recents = fl.recents.items
	g.HashLimits = fl.hashLimits.items
	g.Preds = fl.preds
	g.CtExpires = fl.ctExpires.items
	g.SetWrites = fl.setWrites
	n := len(g.Entries)
	g.NumChunks = uint32((n + ChunkBits - 1) / ChunkBits)
	if g.NumChunks == 0 {
		g.NumChunks = 1
	}
	// One bpf_loop step per examined word (64 a chunk, plus the step that
	// leaves it), per CONTINUE entry, plus the step that finds the end;
	// plus the steps in the user chains' regions (iterBound).
	var walkStart, walkEnd [NumChains]uint32
	for h := range walkStart {
		walkStart[h], walkEnd[h] = g.Walk(h)
	}
	if g.MaxIters, err = fl.iterBound(g.NumChunks, walkStart, walkEnd); err != nil {
		return nil, err
	}

	t = opts.trace("compile: walk bound", t)
	vb := newVectorBuilder(int(g.NumChunks))
	constrained := constrainedBy(g.Entries)
	t = opts.trace("compile: constrained lists", t)
	g.NoShortPorts = !needsShortPorts(g.Entries)
	prepared, stopPreparing := prepareAhead(g.Entries, constrained, int(g.NumChunks))
	defer stopPreparing()
	for f := Field(0); f < NumFields; f++ {
		if len(constrained[f]) == 0 {
			continue
		}
		g.Active |= 1 << uint(f)
		constrained[f] = nil // the sweep's garbage once prepared
		fc, err := vb.sweepField(f, prepared(f))
		if err != nil {
			return nil, err
		}
		switch f.Kind() {
		case KindSmall:
			g.SmallBase[f] = uint32(len(g.Small))
			dom := g.SmallDomain(f)
			arr := make([]uint32, dom)
			bi := 0
			// k is the value's place in the field's condition order
			// (Field.smallIndex).
			for k := 0; k < dom; k++ {
				for bi+1 < len(fc.Bounds) && !U64(uint64(k)).Less(fc.Bounds[bi+1].Value) {
					bi++
				}
				arr[f.smallIndex(k)] = fc.Bounds[bi].Class
			}
			g.Small = append(g.Small, arr...)
		case KindAddr:
			a := f.AddrIndex()
			g.AddrBase[a] = uint32(len(g.Bounds))
			g.AddrCount[a] = uint32(len(fc.Bounds))
			g.Bounds = append(g.Bounds, fc.Bounds...)
		case KindHash:
			points := hashPoints(f, g.Entries, opts.Interfaces)
			for _, p := range points {
				g.Hash[HashKey{Field: uint32(f), Value: p.Lo}] = fc.classOf(p)
			}
			g.DefaultClass[f] = fc.classOf(unmentioned(f, points))
		}
	}
	t = opts.trace("compile: class sweep", t)
	g.Chunks = vb.allChunks()
	g.ClassChunks = vb.allClasses()
	g.decideTrivial()
	g.decidePreDrops()
	opts.trace("compile: class table", t)
	return g, nil
}

// hashPoints lists the values of a hashed field that get their own hash
// entry: for interfaces, every known device (and 0, "no device"); for MAC
// addresses, every address a rule names. Every other value shares the
// default class.
func hashPoints(f Field, entries []Entry, ifaces []Interface) []U128 {
	seen := map[U128]bool{}
	var out []U128
	add := func(v U128) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	if isIfaceField(f) {
		add(U64(0))
		if f == FieldPhysIn || f == FieldPhysOut {
			add(U64(PhysNull))
			add(U64(PhysAnyPort))
		}
		for _, i := range ifaces {
			add(U64(uint64(i.Index)))
		}
	} else {
		// The source of a frame without an Ethernet header: the class
		// of "no MAC condition holds" (it is in no set, complement or
		// not), not the default class of unnamed addresses.
		add(U64(MACNone))
		for i := range entries {
			s := entries[i].Cond.Get(f)
			if s == nil {
				continue
			}
			// Sets are single addresses or their complements: the named
			// address is a one-value interval or the gap between two.
			for _, iv := range s.Ivs {
				if iv.Lo == iv.Hi {
					add(iv.Lo)
				}
				if iv.Lo != (U128{}) {
					add(iv.Lo.Dec())
				}
				if iv.Hi != macMax {
					add(iv.Hi.Inc())
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// unmentioned returns a value of field f that no entry names: the class of
// every value missing from the hash map.
func unmentioned(f Field, points []U128) U128 {
	if isIfaceField(f) {
		return U64(ifaceUnknown)
	}
	seen := map[U128]bool{}
	for _, p := range points {
		seen[p] = true
	}
	for v := uint64(0); ; v++ {
		if !seen[U64(v)] {
			return U64(v)
		}
	}
}

// String summarises the generation for debugging dumps.
func (g *Generation) String() string {
	return fmt.Sprintf("%s: %d entries, %d chunks/vector, %d distinct chunks, %d classes, %d rules, active fields %#x",
		g.Family, len(g.Entries), g.NumChunks, len(g.Chunks), g.ClassChunks.Len(), len(g.Rules), g.Active)
}

// neverInAnyClass gives the slack entries (Layout) an empty set in every
// field some other entry constrains (the protocol when none does), so that
// a slack position is in no class at all and an appended rule's position
// joins only the classes of the values its condition holds for.
func neverInAnyClass(g *Generation) {
	var used [NumFields]bool
	slack := func(i int) bool {
		for h := range g.ChainEnd {
			if uint32(i) >= g.ChainEnd[h] && uint32(i) < g.Layout.SlackEnd[h] ||
				uint32(i) >= g.Layout.SlackStart[h] && uint32(i) < g.ChainStart[h] {
				return true
			}
		}
		for _, r := range g.Layout.Regions {
			if uint32(i) >= r.SlackStart && uint32(i) < r.Start || uint32(i) >= r.End && uint32(i) < r.Return {
				return true
			}
		}
		return false
	}
	any := false
	for i := range g.Entries {
		if slack(i) {
			continue
		}
		for _, fs := range g.Entries[i].Cond {
			used[fs.Field], any = true, true
		}
	}
	if !any {
		used[FieldProto] = true
	}
	var never Cond
	for f := range never {
		if used[f] {
			never[f] = &Set{}
		}
	}
	neverList := never.List()
	for i := range g.Entries {
		if slack(i) {
			g.Entries[i].Cond = neverList
		}
	}
}
