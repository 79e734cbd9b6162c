package dataplane

// Takeover: this build replacing another build's programs in the namespace
// without a moment in which an interface runs neither (docs/design.md,
// "Upgrades: the takeover"). The old build's rulesets, counters and sets
// are read from its maps (handover.go: a format both builds read, or a
// clear refusal), the new programs are loaded with the connection tables
// handed over when both builds lay them out alike, the rulesets are
// compiled into them by the caller (Apply, with attachment held back), and
// Commit swaps every interface's XDP and TCX programs in place. Until
// Commit the old programs run untouched; a Commit that fails part way puts
// them back.

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ir"
)

// ErrNoOtherBuild reports that no other build of xfw runs in the namespace:
// there is nothing to take over.
var ErrNoOtherBuild = errors.New("no other build of xfw runs in this network namespace: nothing to take over")

// attachHeld keeps Apply from attaching the programs it loaded: during a
// takeover the new programs are attached by Commit, once every family's
// ruleset is in them.
var attachHeld atomic.Bool

// Takeover is a takeover in progress: the old build's state, read, and
// this build's programs, loaded and not attached.
type Takeover struct {
	old, next *state
	facts     handoverFacts
	// Rulesets are the old build's running rulesets with their counters
	// (a family without one is absent).
	Rulesets map[ir.Family]*ir.Ruleset
	// first are the counters as read for Rulesets: Commit adds what the
	// old programs counted after that read.
	first map[ir.Family][]ir.Counters
	// ConnsShared says the connection and NAT tables were handed to the
	// new programs; otherwise ConnsLost tracked connections are not
	// carried over (their layout differs between the builds).
	ConnsShared bool
	ConnsLost   int
	// RatesCopied says the hashlimit tables and recent lists were copied
	// into the new programs' maps (the builds lay them out alike).
	RatesCopied bool
	// OldBuild and NewBuild are the two builds' identities; Swapped
	// counts the interfaces whose programs Commit replaced.
	OldBuild, NewBuild uint64
	Swapped            int
	done               bool
	// opts attach the new programs where no old one ran.
	opts AttachOptions
}

// BeginTakeover reads the state of the other build running in the
// namespace and loads this build's programs beside it, not attached: the
// caller installs Rulesets (Apply attaches nothing meanwhile), then calls
// Commit, or Abort. It changes nothing the old programs use.
func BeginTakeover(opts AttachOptions) (_ *Takeover, err error) {
	forgetSession()
	old, err := openOtherBuild()
	if err != nil || old == nil {
		return nil, err
	}
	t := &Takeover{old: old, opts: opts, Rulesets: map[ir.Family]*ir.Ruleset{}, first: map[ir.Family][]ir.Counters{}, NewBuild: buildID()}
	defer func() {
		if err != nil {
			t.Abort()
		}
	}()
	if t.facts, err = readHandover(old.maps["xfw_build"]); err != nil {
		return nil, err
	}
	t.OldBuild = t.facts.build
	if err := checkSlotLayout(old); err != nil {
		return nil, err
	}
	if err := old.readSlots(); err != nil {
		return nil, err
	}
	if err := t.readRulesets(); err != nil {
		return nil, err
	}
	shared, err := t.connTables()
	if err != nil {
		return nil, err
	}
	spec, err := loadSpec()
	if err != nil {
		return nil, err
	}
	if t.next, err = loadUnkeptSharing(spec, shared); err != nil {
		return nil, fmt.Errorf("load this build's programs: %w", err)
	}
	if err := t.copySets(); err != nil {
		return nil, err
	}
	if err := t.copyRateState(); err != nil {
		return nil, err
	}
	keepForSession(t.next)
	attachHeld.Store(true)
	return t, nil
}

// openOtherBuild opens the state of the xfw another build loaded in the
// namespace (ErrNoOtherBuild when none runs, or only this build does):
// found from its XDP program, or its egress program where no interface
// runs the XDP one. Nothing of it is changed.
func openOtherBuild() (*state, error) {
	links, err := ListLinks()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var ids []ebpf.ProgramID
	add := func(id ebpf.ProgramID) {
		if id != 0 && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, l := range links {
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			add(ebpf.ProgramID(x.ProgId))
		}
	}
	for _, l := range links {
		if id, err := ourTC(Interface{Name: l.Attrs().Name, Index: l.Attrs().Index, link: l}); err == nil {
			add(id)
		}
	}
	for _, id := range ids {
		prog, err := ebpf.NewProgramFromID(id)
		if errors.Is(err, unix.EPERM) {
			return nil, ErrPermission
		}
		if err != nil {
			continue // detached meanwhile
		}
		facts, err := programFacts(prog)
		if err != nil || (facts.Name != xdpProgName && facts.Name != tcProgName) {
			prog.Close()
			continue
		}
		s := &state{maps: map[string]*ebpf.Map{}}
		if facts.Name == xdpProgName {
			s.xdp, s.xdpID = prog, facts.ID
		} else {
			s.tc, s.tcID = prog, facts.ID
		}
		if err := s.openMaps(facts.MapIDs); err != nil {
			s.Close()
			return nil, err
		}
		var build uint64
		if bm := s.maps["xfw_build"]; bm != nil && bm.Lookup(uint32(buildKeyID), &build) == nil && build == buildID() {
			// This build's (say, from a takeover killed part way):
			// another build may still run on other interfaces.
			s.Close()
			continue
		}
		// Its TCX programs, to put back if the swap fails.
		if err := s.findIngress(links); err == nil && s.tc == nil {
			err = s.findTC(links)
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	return nil, ErrNoOtherBuild
}

// checkSlotLayout refuses an old state whose bank and slot configuration
// maps this build would misread (their value sizes differ from this
// build's: a change the handover format number should have recorded).
func checkSlotLayout(old *state) error {
	want := map[string]uint32{
		"xfw_cfg":  uint32(unsafe.Sizeof(bpfFamilyCfg{})),
		"xfw_bank": uint32(unsafe.Sizeof(uint32(0))),
	}
	for name, size := range want {
		m := old.maps[name]
		if m == nil {
			return fmt.Errorf("%w: the running build lacks map %s", ErrHandoverFormat, name)
		}
		if m.ValueSize() != size {
			return fmt.Errorf("%w: the running build's %s holds %d-byte values, this build's %d", ErrHandoverFormat, name, m.ValueSize(), size)
		}
	}
	return nil
}

// readRulesets reads the old build's running rulesets and their counters.
func (t *Takeover) readRulesets() error {
	defer unmapOutsideSession()
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		if !t.old.hasFamily(fam) {
			continue
		}
		slot := t.old.slot(fam)
		saved, err := t.old.saved(slot)
		if err != nil {
			return fmt.Errorf("read the running %s ruleset: %w", fam, err)
		}
		counters, err := t.old.readCounters(slot)
		if err != nil {
			return fmt.Errorf("read the running %s counters: %w", fam, err)
		}
		rs, err := ir.UnmarshalRuleset(saved)
		if err == nil && rs.Family != fam {
			err = fmt.Errorf("saved as the %s ruleset", rs.Family)
		}
		if err != nil {
			return fmt.Errorf("%w: the running build's %s ruleset is in a form this build does not read (%v)", ErrHandoverFormat, fam, err)
		}
		applyCounters(rs, counters)
		t.Rulesets[fam], t.first[fam] = rs, counters
	}
	return nil
}

// connTables returns the old build's connection tables to hand to the new
// programs (by spec name) when both builds lay them out alike; otherwise
// none, and ConnsLost says how many tracked connections that leaves behind.
func (t *Takeover) connTables() (map[string]*ebpf.Map, error) {
	mine, err := connLayoutFingerprint()
	if err != nil {
		return nil, err
	}
	if t.facts.connLayout != mine {
		for _, name := range []string{ctMainMap, ctNewMap} {
			if m := t.old.maps[kernelName(name)]; m != nil {
				t.ConnsLost += countEntries(m)
			}
		}
		return nil, nil
	}
	shared := map[string]*ebpf.Map{}
	for _, name := range connStateMaps {
		m := t.old.maps[kernelName(name)]
		if m == nil {
			return nil, fmt.Errorf("%w: the running build lacks map %s", ErrHandoverFormat, name)
		}
		shared[name] = m
	}
	t.ConnsShared = true
	return shared, nil
}

// countEntries counts the keys of a hash map (0 when it cannot be read).
func countEntries(m *ebpf.Map) int {
	n := 0
	cur, next := make([]byte, m.KeySize()), make([]byte, m.KeySize())
	err := m.NextKey(nil, &next)
	for ; err == nil; err = m.NextKey(cur, &next) {
		n++
		copy(cur, next)
	}
	return n
}

// copySets gives the new programs a copy of the old build's ipsets: the
// map holding their image (whose encoding carries its own version,
// checked when the new build decodes it) is copied whole into a map of
// the new build's, so that nothing the new build writes (a set's journal)
// reaches the old build's before the swap.
func (t *Takeover) copySets() error {
	defer unmapOutsideSession()
	outer := t.old.maps[ipsetsOuter]
	if outer == nil {
		return nil
	}
	var id uint32
	if err := outer.Lookup(uint32(0), &id); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		return fmt.Errorf("find the running build's ipsets: %w", err)
	}
	from, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return fmt.Errorf("open the running build's ipsets: %w", err)
	}
	defer from.Close()
	spec, err := innerMapSpec(ipsetsOuter)
	if err != nil {
		return err
	}
	if from.ValueSize() != spec.ValueSize || from.Flags() != spec.Flags {
		return fmt.Errorf("%w: the running build's ipsets map holds %d-byte values (flags %#x), this build's %d (%#x)", ErrHandoverFormat, from.ValueSize(), from.Flags(), spec.ValueSize, spec.Flags)
	}
	spec.Name, spec.MaxEntries = "xfw_ipsets", from.MaxEntries()
	to, err := ebpf.NewMap(spec)
	if err != nil {
		return fmt.Errorf("create the ipsets' map (%d pages): %w", spec.MaxEntries, err)
	}
	defer to.Close()
	src, err := mapped(from, 0)
	if err != nil {
		return err
	}
	dst, err := mapped(to, 0)
	if err != nil {
		return err
	}
	copy(dst, src)
	if err := t.next.maps[ipsetsOuter].Put(uint32(0), to); err != nil {
		return fmt.Errorf("install the ipsets' map: %w", err)
	}
	return nil
}

// copyRateState copies the old build's hashlimit tables and recent lists,
// entries and all, into the new programs' maps when both builds lay them
// out alike: the commit then finds them by name and keeps them, as a
// ruleset change within one build does. What the old programs change in
// them after the copy (until the swap) is not carried.
func (t *Takeover) copyRateState() error {
	mine, err := rateLayoutFingerprint()
	if err != nil || t.facts.rateLayout != mine {
		return err
	}
	for _, name := range rateStateMaps {
		from, to := t.old.maps[kernelName(name)], t.next.maps[name]
		if from == nil || to == nil {
			return fmt.Errorf("%w: map %s missing", ErrHandoverFormat, name)
		}
		if err := copyEntries(from, to); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
	}
	t.RatesCopied = true
	return nil
}

// copyEntries copies every entry of from into to (maps of one layout),
// as bytes.
func copyEntries(from, to *ebpf.Map) error {
	key, val := make([]byte, from.KeySize()), make([]byte, from.ValueSize())
	it := from.Iterate()
	for it.Next(&key, &val) {
		if err := to.Put(key, val); err != nil {
			return err
		}
	}
	return it.Err()
}

// Abort ends a takeover that will not be committed: this build's programs
// are released (they were never attached), the old ones run on untouched.
func (t *Takeover) Abort() {
	if t == nil || t.done {
		return
	}
	t.done = true
	attachHeld.Store(false)
	forgetSession()
	if t.next != nil && !t.next.shared {
		t.next.Close()
	}
	t.old.Close()
}
