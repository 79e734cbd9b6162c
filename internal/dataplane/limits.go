package dataplane

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// The limit matches' token buckets (bpf/limit.h): one struct xfw_limit per
// bucket of the generation (compiler.Generation.Limits) in the slot's
// "limit" map. The kernel sets a limit match's bucket up full whenever
// iptables replaces the table (every committed change, -Z included:
// limit_mt_check of the new table's matches), so a new generation's
// buckets are written full, prev the jiffies of the fill, and ResetLimits
// fills the running ones again for the commands that change counters only.
// A generation that compiles the running ruleset again (Update.SameRules:
// a resync, a set's new members) is no table replacement the kernel would
// see: when its limit matches are the running generation's, it takes the
// running "limit" map over (the slot installs the same map), so that no
// token taken meanwhile is lost. Both slots then hold that map: the next
// generation built in the idle slot does not reuse it (dropRunningLimits),
// since the running generation still reads it.

// bpfLimit mirrors struct xfw_limit.
type bpfLimit struct {
	Prev   uint64
	Credit uint64
	Cost   uint32
	Cap    uint32
	CPJ    uint32
	Pad    uint32
}

// limitStride is the size of struct xfw_limit in a mapped array.
const limitStride = int(unsafe.Sizeof(bpfLimit{}))

// limitBuckets returns the full buckets of limits on this kernel, prev
// its jiffies now.
func limitBuckets(limits []compiler.Limit) ([]bpfLimit, error) {
	if len(limits) == 0 {
		return nil, nil
	}
	hz, err := kernelHZ()
	if err != nil {
		return nil, err
	}
	now, err := Jiffies()
	if err != nil {
		return nil, fmt.Errorf("limit buckets: %w", err)
	}
	out := make([]bpfLimit, len(limits))
	for i, l := range limits {
		m := ir.LimitMatch{Avg: l.Avg, Burst: l.Burst}
		b, ok := m.Bucket(uint32(hz))
		if !ok {
			// The front end refuses these (the kernel's ERANGE).
			return nil, fmt.Errorf("limit match %d of rule %d: its credits overflow at HZ %d", l.Match+1, l.Rule, hz)
		}
		out[i] = bpfLimit{Prev: now, Credit: uint64(b.Capacity), Cost: b.Cost, Cap: b.Capacity, CPJ: b.CreditsPerJiffy}
	}
	return out, nil
}

// fillLimits writes u's buckets into m, full.
func fillLimits(m *ebpf.Map, limits []compiler.Limit) error {
	buckets, err := limitBuckets(limits)
	if err != nil {
		return err
	}
	if err := putArray(m, len(buckets), func(i int) bpfLimit { return buckets[i] }); err != nil {
		return fmt.Errorf("fill limit buckets: %w", err)
	}
	return nil
}

// ResetLimits fills the buckets of fam's running generation again, as the
// kernel's are when iptables replaces the table without changing a rule
// (iptables -Z, -L -Z). Packets may be taking tokens meanwhile: the
// stores are atomic, and a packet whose compare-and-swap then fails
// starts again from the new credit.
func ResetLimits(fam ir.Family) error {
	defer unmapOutsideSession()
	cur, err := Current()
	if err != nil || cur == nil {
		return err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil
	}
	m, err := cur.inner("limit", cur.slot(fam))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil // loaded by a build without limit buckets
	}
	if err != nil {
		return err
	}
	defer m.Close()
	n := int(m.MaxEntries())
	mem, _, stride, err := mappedArray[bpfLimit](m, n)
	if err != nil {
		return fmt.Errorf("limit buckets: %w", err)
	}
	if stride != limitStride {
		return fmt.Errorf("limit buckets %s: stride %d", m, stride)
	}
	now, err := Jiffies()
	if err != nil {
		return fmt.Errorf("limit buckets: %w", err)
	}
	buckets := unsafe.Slice((*bpfLimit)(unsafe.Pointer(&mem[0])), n)
	for i := range buckets {
		b := &buckets[i]
		if b.CPJ == 0 {
			continue // not a bucket of the generation
		}
		atomic.StoreUint64(&b.Prev, now)
		atomic.StoreUint64(&b.Credit, uint64(b.Cap))
	}
	return nil
}

// keepsLimits says whether u's generation takes over the limit buckets of
// the running generation, whose metadata is running (nil when not read):
// u compiles the same rules (SameRules) and its limit matches are the
// running ones, in the same order, so that bucket i is the same match's in
// both. The caller's word is not enough: a ruleset read back differently
// would give a match another's bucket.
func keepsLimits(u *Update, running *genMeta) bool {
	return u.SameRules && running != nil && len(u.Gen.Limits) > 0 && slices.Equal(running.Limits, u.Gen.Limits)
}

// carriedLimits pairs the buckets of u's generation with the running
// generation's (metadata running) that go on one by one: a bucket of a
// rule Update.LimitsFrom names, whose running rule has the same limit
// match (match index, average, burst). None when u keeps the whole map
// (keepLimits).
func carriedLimits(u *Update, running *genMeta) [][2]uint32 {
	if u.keepLimits || running == nil || len(u.LimitsFrom) == 0 {
		return nil
	}
	type key struct {
		rule  uint32
		match int
	}
	was := map[key]int{}
	for k, l := range running.Limits {
		was[key{l.Rule, l.Match}] = k
	}
	var pairs [][2]uint32
	for j, l := range u.Gen.Limits {
		from, ok := u.LimitsFrom[l.Rule]
		if !ok {
			continue
		}
		k, ok := was[key{from, l.Match}]
		if !ok || running.Limits[k].Avg != l.Avg || running.Limits[k].Burst != l.Burst {
			continue
		}
		pairs = append(pairs, [2]uint32{uint32(j), uint32(k)})
	}
	return pairs
}

// carryLimits copies the running buckets u.limitCarry names into m, the
// new slot's limit map, after it was filled full. Tokens the running
// generation takes between the copy and the switch are not carried.
func carryLimits(cur *state, runSlot int64, m *ebpf.Map, u *Update) error {
	if len(u.limitCarry) == 0 || runSlot < 0 || m == nil {
		return nil
	}
	run, err := cur.inner("limit", uint32(runSlot))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("limit buckets: the running ones: %w", err)
	}
	defer run.Close()
	for _, p := range u.limitCarry {
		var b bpfLimit
		if err := run.Lookup(p[1], &b); err != nil {
			continue // the running map is smaller than its metadata says
		}
		if err := m.Update(p[0], b, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("limit buckets: carry bucket %d: %w", p[0], err)
		}
	}
	return nil
}

// takeOverLimits opens the running generation's (in runSlot) limit map
// into b.given when u keeps its buckets (keepsLimits). A running slot
// without one, or with one too small for u's buckets, is not taken over:
// u's buckets are then filled full.
func (b *slotBuild) takeOverLimits(cur *state, runSlot int64, u *Update) error {
	if !u.keepLimits {
		return nil
	}
	if runSlot < 0 {
		u.keepLimits = false
		return nil
	}
	m, err := cur.inner("limit", uint32(runSlot))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		u.keepLimits = false
		return nil
	}
	if err != nil {
		return fmt.Errorf("limit buckets: the running ones: %w", err)
	}
	if int(m.MaxEntries()) < len(u.Gen.Limits) {
		m.Close()
		u.keepLimits = false
		return nil
	}
	b.given["limit"] = m
	return nil
}

// dropRunningLimits keeps the slot from reusing the limit map it holds
// when that is the running generation's (in runSlot; taken over by the
// generation the slot held before): filling it would change the running
// buckets. The slot then gets a new map.
func (b *slotBuild) dropRunningLimits(cur *state, runSlot int64) error {
	held := b.held["limit"]
	if _, given := b.given["limit"]; given || held == nil || runSlot < 0 {
		return nil
	}
	running, err := cur.inner("limit", uint32(runSlot))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("limit buckets: the running ones: %w", err)
	}
	defer running.Close()
	if sameMap(held, running) {
		held.Close()
		b.held["limit"] = nil
	}
	return nil
}
