package dataplane

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

// Apply compiles nothing: it installs u's generation for its family. The
// programs are loaded and verified once per namespace (the first Apply, or
// after Stop); every later Apply builds the generation's maps in the
// family's idle bank, then flips the family's bank index — one write the
// data plane reads once per packet, so every packet is judged wholly by the
// old ruleset or wholly by the new one. Counters of carried rules continue;
// the other family's ruleset is not touched.
func Apply(fam ir.Family, u *Update, opts AttachOptions) error {
	defer unmapOutsideSession()
	defer TraceSince("apply", time.Now())
	if err := checkUpdate(u); err != nil {
		return err
	}
	t := time.Now()
	blob, err := stateBlob(u)
	if err != nil {
		return err
	}
	u.blob = blob
	t = TraceSince("apply: state blob", t)
	cur, ifaces, err := loadedState()
	if err != nil {
		return err
	}
	defer cur.Close()
	t = TraceSince("apply: state, interfaces", t)
	fi := familyIndex(fam)
	newBank := 1 - cur.banks[fi]&1
	newSlot := slotOf(fam, newBank)
	old := &replacedGeneration{fam: fam, on: cur.hasFamily(fam), slot: slotOf(fam, cur.banks[fi])}
	defer old.close()
	if err := old.open(cur, u); err != nil {
		return err
	}
	if err := checkSetSharing(u, old.meta); err != nil {
		return err
	}
	u.keepLimits = keepsLimits(u, old.meta)
	u.basesCarried = old.on
	u.limitCarry = carriedLimits(u, old.meta)
	u.nthCarry = carriedNth(u, old.meta)

	if u.Gen.Active&(1<<compiler.FieldCt) != 0 {
		if err := configureConntrack(cur); err != nil {
			return err
		}
	}
	if err := registerHashLimits(cur, fam, u); err != nil {
		return err
	}
	u.Replaced = ReplacedMaps{}
	if old.on {
		u.Replaced.Small = cur.innerID("small", old.slot)
		u.Replaced.Chunks = cur.innerID("chunks", old.slot)
	}
	if err := buildSlot(cur, newSlot, old.runSlot(), u); err != nil {
		clearSlot(cur, newSlot)
		return err
	}
	if err := prepareRecent(cur, fam, newSlot, u.Gen); err != nil {
		clearSlot(cur, newSlot)
		return err
	}
	t = TraceSince("apply: build generation", t)
	var prev *bpfFamilyCfg
	if u.KeepFieldOrder && old.on {
		prev = &old.cfg
	}
	if err := swapIn(cur, fam, newBank, slotConfig(u, prev)); err != nil {
		return err
	}

	// Attach last: a namespace loaded for the first time starts filtering
	// with the complete ruleset, and interfaces added since are covered.
	if err := attachMissing(cur, ifaces, opts); err != nil {
		return err
	}

	t = TraceSince("apply: swap, attach", t)
	if err := old.retire(cur); err != nil {
		return err
	}
	if err := releaseRecent(cur, fam, u.Gen); err != nil {
		return err
	}
	t = TraceSince("apply: wait for old readers", t)
	if err := dropHashLimitTables(cur, fam, u.Gen); err != nil {
		return err
	}
	if err := old.carryOver(cur, newSlot, u); err != nil {
		return err
	}
	TraceSince("apply: carry counters", t)
	return nil
}

// checkUpdate refuses an update the data plane cannot run: classification
// fields it does not compute, more set lookups than it has, a lookup for a
// set condition the generation lacks.
func checkUpdate(u *Update) error {
	if extra := u.Gen.Active >> bpfNumFields; extra != 0 {
		return fmt.Errorf("generation uses classification fields the data plane does not compute (active %#x, fields from %s on)", u.Gen.Active, compiler.Field(bpfNumFields))
	}
	if len(u.Sets) > maxSetLookups {
		return fmt.Errorf("generation needs %d set lookups, at most %d are supported", len(u.Sets), maxSetLookups)
	}
	writes := 0
	for i, st := range u.Sets {
		if st.Write {
			if st.Kind == SetKindDXR || !st.Writable || writes >= len(u.Gen.SetWrites) || u.Gen.SetWrites[writes] != st.Set {
				return fmt.Errorf("set lookup %d (%s) is no writable lookup of written set %d", i, st.Set, writes+1)
			}
			writes++
			continue
		}
		if writes > 0 {
			return fmt.Errorf("set lookup %d (%s) follows the written sets' lookups", i, st.Set)
		}
		if st.Cond < 0 || st.Cond >= len(u.Gen.SetConds) {
			return fmt.Errorf("set lookup %d (%s) is for set condition %d of %d", i, st.Set, st.Cond, len(u.Gen.SetConds))
		}
	}
	if writes != len(u.Gen.SetWrites) {
		return fmt.Errorf("generation writes %d sets, %d have a lookup", len(u.Gen.SetWrites), writes)
	}
	return nil
}

// checkSetSharing refuses set lookups that take over a hash table the
// running generation (whose metadata is oldMeta, nil when not read) lacks,
// or share the table of a lookup that is not an earlier hash lookup.
func checkSetSharing(u *Update, oldMeta *genMeta) error {
	for k, st := range u.Sets {
		if st.Reuse > 0 && (oldMeta == nil || st.Reuse > len(oldMeta.SetLookups)) {
			return fmt.Errorf("set lookup %d (%s) takes over lookup %d the running generation lacks", k, st.Set, st.Reuse-1)
		}
		if st.SameAs > 0 && (st.SameAs > k || u.Sets[st.SameAs-1].Kind == SetKindDXR) {
			return fmt.Errorf("set lookup %d (%s) shares the table of lookup %d", k, st.Set, st.SameAs-1)
		}
	}
	return nil
}

// replacedGeneration is the running generation of the family Apply
// replaces (on is false when the family has none), with what Apply needs
// of it after the swap.
type replacedGeneration struct {
	fam  ir.Family
	on   bool
	slot uint32
	// cfg is its configuration, read before the swap.
	cfg bpfFamilyCfg
	// live and base are its counters, held open across its removal.
	live, base *ebpf.Map
	// meta is its metadata, read only when a table or the limit buckets
	// may be taken over from it or its set counters are carried over
	// (most generations do none of these).
	meta *genMeta
}

// open reads the replaced generation's configuration and opens its
// counters and, when u needs it, its metadata.
func (r *replacedGeneration) open(cur *state, u *Update) error {
	r.cfg = cur.cfgs[r.slot]
	if !r.on {
		return nil
	}
	var err error
	if r.live, err = cur.inner("counters", r.slot); err != nil {
		return err
	}
	if r.base, err = cur.inner("cbase", r.slot); err != nil {
		return err
	}
	needMeta := r.cfg.NSetCtr > 0 || (u.SameRules && len(u.Gen.Limits) > 0) ||
		(len(u.LimitsFrom) > 0 && len(u.Gen.Limits)+len(u.Gen.Statistics) > 0)
	for _, st := range u.Sets {
		needMeta = needMeta || st.Reuse > 0
	}
	if needMeta {
		if r.meta, err = slotMeta(cur, r.slot); err != nil {
			return err
		}
	}
	return nil
}

// close closes the counters open opened.
func (r *replacedGeneration) close() {
	if r.base != nil {
		r.base.Close()
	}
	if r.live != nil {
		r.live.Close()
	}
}

// runSlot is the slot of the running generation buildSlot may take hash
// tables over from, -1 when the family has none.
func (r *replacedGeneration) runSlot() int64 {
	if !r.on {
		return -1
	}
	return int64(r.slot)
}

// retire waits until no packet that read the old bank before the flip is
// still running: then the old counters are final and the old slot may be
// rewritten by the next update. Its maps stay for that update to reuse.
func (r *replacedGeneration) retire(cur *state) error {
	if !r.on {
		return nil
	}
	if err := cur.waitForReaders(r.slot); err != nil {
		return err
	}
	if err := cur.maps["xfw_cfg"].Put(r.slot, &bpfFamilyCfg{}); err != nil {
		return fmt.Errorf("reset configuration of slot %d: %w", r.slot, err)
	}
	cur.cfgs[r.slot] = bpfFamilyCfg{}
	return nil
}

// carryScratch holds the old generation's counter totals between carries
// (a process that swaps generations again and again, the agent, reads
// them into the same memory instead of a new, prefaulted slice each
// time); only carryOver uses it, under its mutex.
var carryScratch struct {
	sync.Mutex
	totals []ir.Counters
}

// maxCarryScratch is the most counters carryScratch keeps memory for
// between carries (2 MB); a larger generation's totals are let go.
const maxCarryScratch = 1 << 17

// carryOver carries the retired generation's final counts over to the new
// one in newSlot: rule counters (as u.Counters says) and set counters.
func (r *replacedGeneration) carryOver(cur *state, newSlot uint32, u *Update) error {
	if !r.on {
		return nil
	}
	carryScratch.Lock()
	defer carryScratch.Unlock()
	old, err := counterTotalsInto(carryScratch.totals, r.base, r.live, int(r.cfg.NCounters))
	if err == nil && len(old) <= maxCarryScratch {
		carryScratch.totals = old
	}
	if err == nil {
		old, err = withTrivialCounts(old, cur.maps["xfw_stats"], r.slot, &r.cfg)
	}
	if err != nil {
		return errors.Join(err, freshBases(cur, newSlot, u))
	}
	if err := carryCounters(cur, old, newSlot, u.Counters); err != nil {
		return err
	}
	if r.cfg.NSetCtr > 0 {
		if err := carrySetCounters(cur, r.fam, r.slot, newSlot, &r.cfg, r.meta, u); err != nil {
			return err
		}
	}
	return nil
}

// freshBases writes the new generation's counter bases as a generation
// that replaces none has them, when carryOver could not read the old
// counters: the fill left the bases to it (Update.basesCarried).
func freshBases(cur *state, newSlot uint32, u *Update) error {
	if !u.basesCarried {
		return nil
	}
	base, err := cur.inner("cbase", newSlot)
	if err != nil {
		return err
	}
	defer base.Close()
	return putFreshBases(base, u.Counters)
}

// slotConfig is the configuration of u's generation's slot (xfw_cfg): the
// generation's own, its set lookups and its set counters.
func slotConfig(u *Update, prev *bpfFamilyCfg) bpfFamilyCfg {
	fc := familyCfg(u.Gen, prev)
	for k, st := range u.Sets {
		if st.Write {
			// After the conditions' lookups, which the packet's
			// lookups stop at (NSetLk); the SET target finds it
			// there (bpf/settarget.h).
			fc.SetLk[k] = bpfSetLk{Kind: st.Kind, MaxPlen: st.MaxPlen}
			continue
		}
		fc.NSetLk = uint32(k + 1)
		lk := bpfSetLk{Bit: uint8(st.Cond), Kind: st.Kind, MaxPlen: st.MaxPlen}
		if st.Dst1 {
			lk.Flags |= setLkDst1
		}
		if st.Dst2 {
			lk.Flags |= setLkDst2
		}
		if st.ReturnNomatch && st.Nomatch {
			lk.Flags |= setLkReturnNomatch
		}
		if st.Via != "" {
			lk.Flags |= setLkMember
		}
		fc.SetLk[k] = lk
		fc.SetLkLCtr[k] = st.ListCtr
	}
	if setCounting(u.Gen) {
		fc.NSetCtr = uint32(max(1, len(u.SetCounters)))
	}
	if fc.MaxIters == 0 {
		fc.MaxIters = 1
	}
	return fc
}

// swapIn writes the configuration fc of the generation built in newBank's
// slot and flips fam's bank index to it: the swap. On failure the slot is
// freed.
func swapIn(cur *state, fam ir.Family, newBank uint32, fc bpfFamilyCfg) error {
	fi := familyIndex(fam)
	newSlot := slotOf(fam, newBank)
	// By pointer: the library then passes the value's memory as it is
	// (bpfFamilyCfg has no padding: TestFamilyCfgUnpadded), where a
	// value is encoded field by field through reflection (1.8 KB, about
	// 0.05 ms at each of a command's two writes of it).
	if err := cur.maps["xfw_cfg"].Put(newSlot, &fc); err != nil {
		clearSlot(cur, newSlot)
		return fmt.Errorf("write generation configuration: %w", err)
	}
	if err := cur.maps["xfw_bank"].Put(uint32(fi), newBank); err != nil {
		clearSlot(cur, newSlot)
		return fmt.Errorf("switch to the new generation: %w", err)
	}
	cur.banks[fi] = newBank
	cur.cfgs[newSlot] = fc
	cur.swaps[fi]++
	return nil
}

// loadedState returns the namespace's running state (xfw loaded first
// when it is not) and its interfaces, whose facts (and the local routes) it
// refreshes: a new generation may name interfaces that appeared since the
// last change. The BPF object is parsed only to load it (loadSpec, ~5 ms).
func loadedState() (*state, []Interface, error) {
	t := time.Now()
	ifaces, err := listInterfaces()
	if err != nil {
		return nil, nil, err
	}
	t = TraceSince("state: interfaces listed", t)
	cur, err := Current()
	if err != nil {
		return nil, nil, err
	}
	var ours ebpf.ProgramID
	if cur != nil {
		if ours, _, err = cur.programIDs(); err != nil {
			cur.Close()
			return nil, nil, err
		}
	}
	if err := checkForeignXDP(ifaces, ours); err != nil {
		if cur != nil {
			cur.Close()
		}
		return nil, nil, err
	}
	if cur == nil {
		if cur, err = takePreload(); err != nil {
			return nil, nil, err
		}
	}
	if cur == nil {
		spec, err := loadSpec()
		if err != nil {
			return nil, nil, err
		}
		if cur, err = load(spec); err != nil {
			return nil, nil, err
		}
	}
	t = TraceSince("state: current, foreign XDP", t)
	if err := fillIfInfo(cur.maps["xfw_ifinfo"], ifaces); err != nil {
		cur.Close()
		return nil, nil, err
	}
	t = TraceSince("state: interface facts", t)
	if err := bumpIfinfoGen(cur.maps["xfw_bank"]); err != nil {
		cur.Close()
		return nil, nil, err
	}
	if err := fillNetFacts(cur); err != nil {
		cur.Close()
		return nil, nil, err
	}
	TraceSince("state: addresses, routes, rate limits", t)
	return cur, ifaces, nil
}

// fillNetFacts copies the namespace's local routes, IPv6 routes,
// interface addresses, multicast groups joined and ICMP rate limit
// sysctls into cur's maps. The routes and addresses are dumped only when
// the process's watch (WatchNetwork) saw a change since cur's maps last
// got them, or does not watch; the sysctls and the groups, which the
// watch does not follow, are read always.
func fillNetFacts(cur *state) error {
	t := time.Now()
	current, epoch := netFacts.filledFor(cur)
	if err := fillRateCfg(cur.maps); err != nil {
		return err
	}
	t = TraceSince("netfacts: rate cfg", t)
	// Joins and leaves move no watched epoch: the groups are read always.
	if err := fillGroupsNow(cur); err != nil {
		return err
	}
	TraceSince("netfacts: groups", t)
	if current {
		return nil
	}
	if err := fillRouteFacts(cur); err != nil {
		netFacts.forgetFilled()
		return err
	}
	netFacts.markFilled(cur, epoch)
	return nil
}

// fillRouteFacts dumps the routes once (both families) and copies from the
// dump the local table (fillLocal) and the main table's routes
// (fillRoutes) into cur's maps, then the interfaces' addresses NAT uses
// and the IPv6 addresses REJECT's ICMPv6 errors pick a source from.
func fillRouteFacts(cur *state) error {
	t := time.Now()
	routes, err := dumpNetRoutes()
	if err != nil {
		return err
	}
	t = TraceSince("netfacts: route dump", t)
	if err := fillLocal(cur.maps["xfw_local4"], cur.maps["xfw_local6"], &routes); err != nil {
		return err
	}
	t = TraceSince("netfacts: local table", t)
	if err := fillRoutes(cur.maps[rateRoute6Map], &routes); err != nil {
		return err
	}
	t = TraceSince("netfacts: main routes", t)
	if err := fillNatAddrs(cur.maps["xfw_nat_ifaddr"]); err != nil {
		return err
	}
	t = TraceSince("netfacts: NAT addresses", t)
	err = fillSaddr6(cur.maps[saddr6Map])
	TraceSince("netfacts: IPv6 source addresses", t)
	return err
}

// carryCounters writes the new generation's counter bases: the old
// generation's totals for carried counters, the stated initial values for
// the others (one memory copy).
func carryCounters(cur *state, old []ir.Counters, newSlot uint32, src []CounterSource) error {
	base, err := cur.inner("cbase", newSlot)
	if err != nil {
		return err
	}
	defer base.Close()
	if err := putArray(base, len(src), func(i int) bpfCounter {
		c := src[i].Initial
		if f := src[i].From; f >= 0 && f < len(old) {
			c = old[f]
		}
		return bpfCounter{Packets: c.Packets, Bytes: c.Bytes}
	}); err != nil {
		return fmt.Errorf("carry counters: %w", err)
	}
	return nil
}
