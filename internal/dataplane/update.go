package dataplane

import (
	"encoding/binary"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// CounterSource says where a new generation's counter starts from.
type CounterSource struct {
	// From is the old counter index to carry over, or -1.
	From int
	// Initial is the starting value when From is -1.
	Initial ir.Counters
}

// SmallDelta describes what a small-field map holds against a
// generation's Small (compiler.Generation.SmallWritten): map Map holds
// Len entries, Small's but in the ranges Differ lists (pairs of a first
// index and the index after the last), which may hold anything.
type SmallDelta struct {
	Map    ebpf.MapID
	Len    int
	Differ []uint32
}

// ReplacedMaps names maps of the generation an Apply replaced (0: none).
type ReplacedMaps struct {
	// Small is its small-field map, Chunks its chunk map.
	Small, Chunks ebpf.MapID
}

// ChunkPrefix says that chunk map Map holds the first Len chunks of the
// running generation (RunningChunks).
type ChunkPrefix struct {
	Map ebpf.MapID
	Len int
}

// Update is one family's new ruleset, ready to load.
type Update struct {
	Gen *compiler.Generation
	// Saved is the ruleset in its binary form (ir.Ruleset.MarshalBinary),
	// kept with the generation: what the next command reads back (Running).
	Saved []byte
	// Counters has one source per counter index of Gen (len NumCounters).
	Counters []CounterSource
	// Sets has the set lookups of Gen.SetConds (at most maxSetLookups):
	// each answers one set and is OR-ed into its condition's bit (one per
	// condition, or one per member of a list:set; none for a condition
	// that never matches).
	Sets []SetTable
	// Interfaces are those Gen was compiled for, kept with it so that a
	// later command can extend the running generation (RunningGeneration,
	// compiler.AppendRule) while they have not changed.
	Interfaces []compiler.Interface
	// SetCounters names the generation's list:set entry counters (index i
	// is SetTable.ListCtr i+1); a hash table's element counters are its
	// own (SetTable.Counters). Counters start at zero: the stored sets hold
	// what was counted before (the caller moves running counts there,
	// TakeSetCounters). Apply carries the counts of the generation it
	// replaces over to rebuilt tables and list entries (its packets keep
	// counting until they end; a table taken over keeps its counters) and
	// returns in SetLeftover those of entries this generation lacks, for
	// the caller to keep in the stored sets.
	SetCounters []SetCounterID
	// SetLeftover is set by Apply (see SetCounters).
	SetLeftover []SetCounterValue
	// SameRules says Gen compiles the running generation's ruleset again,
	// unchanged (for other interfaces, addresses or set members): the
	// kernel would not have replaced its table, so its limit buckets go
	// on. Apply then takes the running generation's buckets over when
	// its limit matches are Gen's (same parameters, same order); without
	// SameRules, or when they differ, the buckets start full.
	SameRules bool
	// LimitsFrom maps the rule counter of each rule whose table the
	// command did not commit to the running rule's counter it comes from:
	// the kernel replaced only the committed tables, so such a rule's
	// limit buckets and nth counters go on. Apply takes each over from
	// the running generation when that rule has the same match there
	// (same match index and parameters); the others start afresh.
	LimitsFrom map[uint32]uint32
	// IdleSmall, when not nil, is what the caller knows the small-field
	// map of the family's idle bank (where Apply builds Gen) holds:
	// Apply then writes only the entries it lists as differing from
	// Gen.Small, provided it reuses that very map (else it writes all).
	IdleSmall *SmallDelta
	// KeepFieldOrder says Gen was changed in place from the running
	// generation: it keeps that one's order of the fields (familyCfg)
	// when it has the same.
	KeepFieldOrder bool
	// Replaced is set by Apply: maps of the generation Gen replaced,
	// which hold that generation in the bank that is idle once Gen runs.
	Replaced ReplacedMaps

	// blob is what the slot's state pages hold: Saved and the generation's
	// metadata, each after its little-endian length (stateBlob).
	blob *stateParts
	// keepLimits is set by Apply: the generation takes the running
	// generation's limit buckets over (SameRules).
	keepLimits bool
	// basesCarried is set by Apply when the generation replaces a
	// running one: then the carry after the swap writes every counter
	// base (carryCounters), and the fill leaves them.
	basesCarried bool
	// limitCarry are the buckets Apply takes over one by one (LimitsFrom):
	// pairs of this generation's bucket and the running generation's.
	limitCarry [][2]uint32
	// nthCarry are the nth counters Apply takes over one by one
	// (LimitsFrom): pairs of this generation's probe and the running
	// generation's.
	nthCarry [][2]uint32
	// hashLimitArgs are the data plane's arguments of the hashlimit
	// probes, by hashlimit match (registerHashLimits).
	hashLimitArgs []uint32
}

// stateParts is the content of a slot's state pages in pieces, written
// one after the other: the saved ruleset and the generation's metadata,
// each after its little-endian length. The saved ruleset (half a megabyte
// at 10,000 rules) is copied once, into the pages, instead of into one
// buffer first.
type stateParts [4][]byte

// len returns the length of the content.
func (p *stateParts) len() int {
	n := 0
	for _, b := range p {
		n += len(b)
	}
	return n
}

// copyTo copies the content to the start of mem, which holds it.
func (p *stateParts) copyTo(mem []byte) {
	at := 0
	for _, b := range p {
		at += copy(mem[at:], b)
	}
}

// stateBlob returns u's state pages' content: the saved ruleset and the
// generation's metadata (generationMeta), each after its length.
func stateBlob(u *Update) (*stateParts, error) {
	meta, err := generationMeta(u)
	if err != nil {
		return nil, err
	}
	return &stateParts{
		binary.LittleEndian.AppendUint64(nil, uint64(len(u.Saved))), u.Saved,
		binary.LittleEndian.AppendUint64(nil, uint64(len(meta))), meta,
	}, nil
}
