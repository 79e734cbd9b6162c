package dataplane

import (
	"fmt"
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
	if extra := u.Gen.Active >> bpfNumFields; extra != 0 {
		return fmt.Errorf("generation uses classification fields the data plane does not compute (active %#x, fields from %s on)", u.Gen.Active, compiler.Field(bpfNumFields))
	}
	if len(u.Sets) > maxSetLookups {
		return fmt.Errorf("generation needs %d set lookups, at most %d are supported", len(u.Sets), maxSetLookups)
	}
	for i, st := range u.Sets {
		if st.Cond < 0 || st.Cond >= len(u.Gen.SetConds) {
			return fmt.Errorf("set lookup %d (%s) is for set condition %d of %d", i, st.Set, st.Cond, len(u.Gen.SetConds))
		}
	}
	t := time.Now()
	blob, err := stateBlob(u)
	if err != nil {
		return err
	}
	u.blob = blob
	cur, ifaces, err := loadedState()
	if err != nil {
		return err
	}
	defer cur.Close()
	t = TraceSince("apply: state, interfaces", t)
	fi := familyIndex(fam)
	wasOn := cur.hasFamily(fam)
	oldSlot := slotOf(fam, cur.banks[fi])
	newBank := 1 - cur.banks[fi]&1
	newSlot := slotOf(fam, newBank)
	// The old generation's counters, held open across its removal.
	var oldLive, oldBase *ebpf.Map
	oldN := int(cur.cfgs[oldSlot].NCounters)
	if wasOn {
		if oldLive, err = cur.inner("counters", oldSlot); err != nil {
			return err
		}
		defer oldLive.Close()
		if oldBase, err = cur.inner("cbase", oldSlot); err != nil {
			return err
		}
		defer oldBase.Close()
	}

	// The old generation's metadata, when a table is taken over from it
	// or its set counters are carried over (most generations do neither).
	oldCfg := cur.cfgs[oldSlot]
	var oldMeta *genMeta
	needMeta := oldCfg.NSetCtr > 0
	for _, st := range u.Sets {
		needMeta = needMeta || st.Reuse > 0
	}
	if wasOn && needMeta {
		if oldMeta, err = slotMeta(cur, oldSlot); err != nil {
			return err
		}
	}
	for k, st := range u.Sets {
		if st.Reuse > 0 && (oldMeta == nil || st.Reuse > len(oldMeta.SetLookups)) {
			return fmt.Errorf("set lookup %d (%s) takes over lookup %d the running generation lacks", k, st.Set, st.Reuse-1)
		}
		if st.SameAs > 0 && (st.SameAs > k || u.Sets[st.SameAs-1].Kind == SetKindDXR) {
			return fmt.Errorf("set lookup %d (%s) shares the table of lookup %d", k, st.Set, st.SameAs-1)
		}
	}
	runSlot := int64(-1)
	if wasOn {
		runSlot = int64(oldSlot)
	}

	if u.Gen.Active&(1<<compiler.FieldCt) != 0 {
		if err := configureConntrack(cur); err != nil {
			return err
		}
	}
	if err := buildSlot(cur, newSlot, runSlot, u); err != nil {
		clearSlot(cur, newSlot)
		return err
	}
	t = TraceSince("apply: build generation", t)
	fc := familyCfg(u.Gen)
	for k, st := range u.Sets {
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
	fc.NSetLk = uint32(len(u.Sets))
	if setCounting(u.Gen) {
		fc.NSetCtr = uint32(max(1, len(u.SetCounters)))
	}
	if fc.MaxIters == 0 {
		fc.MaxIters = 1
	}
	if err := cur.maps["xfw_cfg"].Put(newSlot, fc); err != nil {
		clearSlot(cur, newSlot)
		return fmt.Errorf("write generation configuration: %w", err)
	}
	// The swap.
	if err := cur.maps["xfw_bank"].Put(uint32(fi), newBank); err != nil {
		clearSlot(cur, newSlot)
		return fmt.Errorf("switch to the new generation: %w", err)
	}
	cur.banks[fi] = newBank
	cur.cfgs[newSlot] = fc

	// Attach last: a namespace loaded for the first time starts filtering
	// with the complete ruleset, and interfaces added since are covered.
	if err := attachMissing(cur, ifaces, opts); err != nil {
		return err
	}

	t = TraceSince("apply: swap, attach", t)
	// Wait until no packet that read the old bank before the flip is
	// still running: then the old counters are final and the old slot may
	// be rewritten by the next update. Its maps stay for that update to
	// reuse.
	if wasOn {
		if err := cur.waitForReaders(oldSlot); err != nil {
			return err
		}
		if err := cur.maps["xfw_cfg"].Put(oldSlot, bpfFamilyCfg{}); err != nil {
			return fmt.Errorf("reset configuration of slot %d: %w", oldSlot, err)
		}
		cur.cfgs[oldSlot] = bpfFamilyCfg{}
	}
	t = TraceSince("apply: wait for old readers", t)
	if wasOn {
		old, err := counterTotals(oldBase, oldLive, oldN)
		if err != nil {
			return err
		}
		if err := carryCounters(cur, old, newSlot, u.Counters); err != nil {
			return err
		}
		if oldCfg.NSetCtr > 0 {
			if err := carrySetCounters(cur, fam, oldSlot, newSlot, &oldCfg, oldMeta, u); err != nil {
				return err
			}
		}
	}
	TraceSince("apply: carry counters", t)
	return nil
}

// loadedState returns the namespace's running state (xfw loaded first
// when it is not) and its interfaces, whose facts (and the local routes) it
// refreshes: a new generation may name interfaces that appeared since the
// last change. The BPF object is parsed only to load it (loadSpec, ~5 ms).
func loadedState() (*state, []Interface, error) {
	ifaces, err := listInterfaces()
	if err != nil {
		return nil, nil, err
	}
	cur, err := Current()
	if err != nil {
		return nil, nil, err
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
	if err := fillIfInfo(cur.maps["xfw_ifinfo"], ifaces); err != nil {
		cur.Close()
		return nil, nil, err
	}
	if err := fillLocal(cur.maps["xfw_local4"], cur.maps["xfw_local6"]); err != nil {
		cur.Close()
		return nil, nil, err
	}
	return cur, ifaces, nil
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
