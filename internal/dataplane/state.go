package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/prefault"
)

// state is xfw as loaded in the namespace, found from the XDP program
// attached to its interfaces: the programs, their maps by name, and each
// family's active bank and slot configurations.
type state struct {
	xdp, tc *ebpf.Program
	// tcIn is the TCX ingress program (REJECT replies' way out).
	tcIn  *ebpf.Program
	maps  map[string]*ebpf.Map
	banks [2]uint32
	cfgs  [slots]bpfFamilyCfg
	// shared marks the state of a session (BeginSession): Close leaves it
	// open for the session's next user.
	shared bool
	// xdpID and tcID are the programs' ids once programIDs has asked.
	xdpID, tcID ebpf.ProgramID
	tcInID      ebpf.ProgramID
	// swaps counts each family's generation swaps through this state
	// (swapIn): with the state itself, what a resident process's cache
	// of the running ruleset is valid for (SessionStamp).
	swaps [2]uint64
	// setIDs is, per slot, what the set lookups' outer elements hold
	// (slotMaps), as this process last read or wrote them through this
	// state (nil: not known). Only this process writes them while it
	// keeps the state (another process's session under xfw's lock makes
	// it open the state afresh: keptsession.go), and it writes them
	// through eachOuter only, which forgets the slot's.
	setIDs [slots]*setSlotIDs
}

// setSlotIDs are the inner map ids of a slot's set lookup elements, by
// outer map (allSetOuters) and lookup; 0: none.
type setSlotIDs [len(allSetOuters)][maxSetLookups]uint32

// programIDs returns the ids of the XDP and egress programs.
func (s *state) programIDs() (xdp, tc ebpf.ProgramID, err error) {
	if s.xdpID != 0 && s.tcID != 0 {
		return s.xdpID, s.tcID, nil
	}
	xdpFacts, err := programFacts(s.xdp)
	if err != nil {
		return 0, 0, fmt.Errorf("XDP program: %w", err)
	}
	tcFacts, err := programFacts(s.tc)
	if err != nil {
		return 0, 0, fmt.Errorf("egress program: %w", err)
	}
	s.xdpID, s.tcID = xdpFacts.ID, tcFacts.ID
	return s.xdpID, s.tcID, nil
}

// ingressID returns the id of the TCX ingress program.
func (s *state) ingressID() (ebpf.ProgramID, error) {
	if s.tcInID != 0 {
		return s.tcInID, nil
	}
	facts, err := programFacts(s.tcIn)
	if err != nil {
		return 0, fmt.Errorf("ingress program: %w", err)
	}
	s.tcInID = facts.ID
	return s.tcInID, nil
}

// slots is XFW_NSLOTS: two banks per family.
const slots = 4

// Close releases the file descriptors (not the kernel objects, which the
// attachments keep alive).
func (s *state) Close() {
	if s == nil || s.shared {
		return
	}
	if s.xdp != nil {
		s.xdp.Close()
	}
	if s.tc != nil {
		s.tc.Close()
	}
	if s.tcIn != nil {
		s.tcIn.Close()
	}
	for _, m := range s.maps {
		m.Close()
	}
}

var (
	specOnce sync.Once
	specErr  error
	specVal  *ebpf.CollectionSpec
)

// buildID is an 8-byte identity of the embedded BPF object (written into the
// loaded programs' xfw_build map); computed without parsing the object, so
// commands that only read the running state do not pay for that. It is
// the object's CRC-32C and CRC-32 (IEEE), both computed by the CPU's
// instructions (a SHA-256 of the 600 KB object took ~0.5 ms of every
// command): it tells builds apart, it does not resist forgery.
// Tests build a second binary of another identity with buildIdentitySalt
// (handover.go).
var buildID = sync.OnceValue(func() uint64 {
	id := uint64(crc32.Checksum(objectBytes, crc32.MakeTable(crc32.Castagnoli)))<<32 | uint64(crc32.ChecksumIEEE(objectBytes))
	if buildIdentitySalt != "" {
		id ^= uint64(crc32.ChecksumIEEE([]byte(buildIdentitySalt)))<<32 | uint64(crc32.Checksum([]byte(buildIdentitySalt), crc32.MakeTable(crc32.Castagnoli)))
	}
	return id
})

// loadSpec parses the embedded BPF object (once per process) and returns a
// copy the caller may modify.
func loadSpec() (*ebpf.CollectionSpec, error) {
	if err := parseSpec(); err != nil {
		return nil, err
	}
	return specVal.Copy(), nil
}

// innerMapSpec returns a copy of the inner map spec of outer map name: what
// a new generation map of that kind is created from.
func innerMapSpec(name string) (*ebpf.MapSpec, error) {
	if err := parseSpec(); err != nil {
		return nil, err
	}
	os := specVal.Maps[name]
	if os == nil || os.InnerMap == nil {
		return nil, fmt.Errorf("BPF object lacks map %s", name)
	}
	return os.InnerMap.Copy(), nil
}

// parseSpec parses the embedded BPF object once per process.
func parseSpec() error {
	specOnce.Do(func() {
		specVal, specErr = ebpf.LoadCollectionSpecFromReader(bytes.NewReader(objectBytes))
		if specErr != nil {
			specErr = fmt.Errorf("load BPF object: %w", specErr)
		}
	})
	return specErr
}

// ErrPermission reports that the process may not read xfw's programs and
// maps (it lacks CAP_BPF/CAP_SYS_ADMIN): it cannot tell whether xfw runs.
var ErrPermission = errors.New("Permission denied (you must be root)")

// ErrOtherBuild reports that the xfw running in the namespace was loaded by
// a build whose BPF object differs from this one's.
var ErrOtherBuild = errors.New("xfw in this network namespace was loaded by another build of xfw; run `xfw takeover` to replace its programs with this build's, rulesets and connections kept")

// session is the state one command reuses under xfw's lock (BeginSession).
var session struct {
	mu     sync.Mutex
	active bool
	st     *state
	// keep and seen: a resident process's sessions (keptsession.go).
	keep bool
	seen uint64
	// kept is where the kept state's XDP program was last seen attached;
	// dropAtEnd gives the kept state up at the session's end.
	kept      keptAt
	dropAtEnd bool
}

// BeginSession makes Current return one opened state until the returned
// function ends the session (and closes it): for one command holding
// xfw's lock, during which no other xfw process changes what is loaded,
// finding the programs and opening their thirty-odd maps once instead of
// at every step (about 1–2 ms each). Stop and a first load reset it.
// In a resident process (KeepSessionState) the state outlives the session
// while no other process changes what is loaded.
func BeginSession() (end func()) {
	session.mu.Lock()
	session.active = true
	if session.keep {
		reviveKeptLocked()
	}
	session.mu.Unlock()
	return func() {
		discardPreload()
		session.mu.Lock()
		defer session.mu.Unlock()
		session.active = false
		if session.keep {
			keepLocked()
		}
		if session.st != nil && !session.keep {
			session.st.shared = false
			session.st.Close()
			session.st = nil
		}
		endSessionMappings(session.keep && session.st != nil)
		endSessionSysctls(session.keep && session.st != nil)
	}
}

// keepForSession makes s the session's state when a session is active.
func keepForSession(s *state) {
	session.mu.Lock()
	defer session.mu.Unlock()
	if !session.active || s == nil {
		return
	}
	if session.st != nil && session.st != s {
		session.st.shared = false
		session.st.Close()
	}
	s.shared = true
	session.st = s
	if !session.keep {
		// A resident process holding an older view must open it again.
		noteChange(s)
	}
}

// forgetSession drops the session's state (xfw was stopped).
func forgetSession() {
	session.mu.Lock()
	defer session.mu.Unlock()
	if session.st != nil {
		session.st.shared = false
		session.st.Close()
		session.st = nil
	}
}

// Current returns the running state, or nil when xfw is not loaded in this
// namespace.
func Current() (*state, error) {
	session.mu.Lock()
	st := session.st
	if !session.active {
		st = nil // a resident process's kept state is for its sessions
	}
	session.mu.Unlock()
	if st != nil {
		// Under xfw's lock only this process changes the banks and the
		// slot configurations, and it keeps st's copy of them up to date
		// (Apply, clearSlot): no need to read them again, and the
		// session's users may run concurrently (PrefetchGeneration).
		return st, nil
	}
	s, err := currentUncached()
	adoptForSession(s)
	return s, err
}

// OpenRunning opens the running state for the session (BeginSession), so
// that the session's later steps, concurrent ones among them, share it,
// and reports whether xfw is loaded in the namespace.
func OpenRunning() (bool, error) {
	cur, err := Current()
	if err != nil || cur == nil {
		return false, err
	}
	cur.Close() // a session's state stays open
	return true, nil
}

// slot is the generation slot fam's packets are judged by.
func (s *state) slot(fam ir.Family) uint32 {
	return slotOf(fam, s.banks[familyIndex(fam)])
}

func (s *state) hasFamily(fam ir.Family) bool {
	return s.cfgs[s.slot(fam)].Enabled == 1
}

// innerAt opens the inner map at key of outer map outer (caller closes).
func (s *state) innerAt(outer string, key uint32) (*ebpf.Map, error) {
	var id uint32
	if err := s.maps[outer].Lookup(key, &id); err != nil {
		return nil, fmt.Errorf("find %s map %d: %w", outer, key, err)
	}
	m, err := openMapID(ebpf.MapID(id))
	if err != nil {
		return nil, fmt.Errorf("open %s map %d: %w", outer, key, err)
	}
	return m, nil
}

// innerID returns the id of the generation map of kind in slot (0: none).
func (s *state) innerID(kind string, slot uint32) ebpf.MapID {
	var id uint32
	if err := s.maps[outerName(kind)].Lookup(slot, &id); err != nil {
		return 0
	}
	return ebpf.MapID(id)
}

// inner opens the generation map of kind in slot (caller closes).
func (s *state) inner(kind string, slot uint32) (*ebpf.Map, error) {
	var id uint32
	if err := s.maps[outerName(kind)].Lookup(slot, &id); err != nil {
		return nil, fmt.Errorf("find %s map of slot %d: %w", kind, slot, err)
	}
	m, err := openMapID(ebpf.MapID(id))
	if err != nil {
		return nil, fmt.Errorf("open %s map of slot %d: %w", kind, slot, err)
	}
	return m, nil
}

// slotMaps opens the maps slot holds, by buildSlot's kinds (generation
// kinds and "xfw_o_setdir/k" …); kinds the slot lacks are absent.
func (s *state) slotMaps(slot uint32) map[string]*ebpf.Map {
	held := map[string]*ebpf.Map{}
	for _, kind := range generationMaps {
		if m, err := s.inner(kind, slot); err == nil {
			held[kind] = m
		}
	}
	ids := s.setIDs[slot]
	if ids == nil {
		// 64 lookups, most finding nothing: done once, then kept.
		ids = &setSlotIDs{}
		known := true
		for i, name := range allSetOuters {
			for k := 0; k < maxSetLookups; k++ {
				var id uint32
				switch err := s.maps[name].Lookup(setKey(slot, k), &id); {
				case err == nil:
					ids[i][k] = id
				case !errors.Is(err, ebpf.ErrKeyNotExist):
					known = false // absent this time, asked again next
				}
			}
		}
		if known {
			s.setIDs[slot] = ids
		}
	}
	for i, name := range allSetOuters {
		for k, id := range ids[i] {
			if id == 0 {
				continue
			}
			if m, err := openMapID(ebpf.MapID(id)); err == nil {
				held[setKind(name, k)] = m
			}
		}
	}
	return held
}

// waitForReaders returns once no program run that may have read the bank
// index before the last flip still runs, so that the old slot's counters
// are final and its maps may be rewritten. It snapshots the runs begun on
// every CPU (xfw_inflight, bpf/generation.h "Quiescence") and waits until as
// many have ended, as x_tables does with its per-CPU sequence counts:
// microseconds, where an RCU grace period takes 10–25 ms. On PREEMPT_RT,
// where runs may nest, or if a CPU makes no progress within
// quiesceTimeout, it waits for a grace period instead.
func (s *state) waitForReaders(slot uint32) error {
	m := s.maps["xfw_inflight"]
	if m == nil || realtimeKernel() {
		return s.waitForGracePeriod(slot)
	}
	// The flip (a store by the kernel in the caller's syscall) must be
	// visible before the snapshot is read: a full barrier, as the
	// programs' fetching add is on their side.
	fence.Add(1)
	var snap []bpfInflight
	if err := m.Lookup(uint32(0), &snap); err != nil {
		return fmt.Errorf("read in-flight counts: %w", err)
	}
	deadline := time.Now().Add(quiesceTimeout)
	for {
		var now []bpfInflight
		if err := m.Lookup(uint32(0), &now); err != nil {
			return fmt.Errorf("read in-flight counts: %w", err)
		}
		done := len(now) == len(snap)
		for cpu := 0; done && cpu < len(snap); cpu++ {
			done = int64(now[cpu].Ended-snap[cpu].Begun) >= 0
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return s.waitForGracePeriod(slot)
		}
		time.Sleep(quiescePoll)
	}
}

// fence is the word of the full barrier waitForReaders issues (an atomic
// read-modify-write).
var fence atomic.Uint64

// Quiescence polling (waitForReaders): a program run takes microseconds.
const (
	quiescePoll    = 20 * time.Microsecond
	quiesceTimeout = 2 * time.Second
)

// realtimeKernel reports a PREEMPT_RT kernel, whose BPF program runs may be
// preempted and nest on one CPU: read once per process (the running
// kernel's build does not change; an agent asked at every swap).
var realtimeKernel = sync.OnceValue(func() bool {
	b, err := os.ReadFile("/sys/kernel/realtime")
	return err == nil && strings.TrimSpace(string(b)) == "1"
})

// waitForGracePeriod returns after an RCU grace period, after which no
// program run that began before it still runs: it puts slot's saved-text
// map back in its place, an update after which the kernel waits for one
// (maybe_wait_bpf_programs).
func (s *state) waitForGracePeriod(slot uint32) error {
	m, err := s.inner("state", slot)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := s.maps[outerName("state")].Put(slot, m); err != nil {
		return fmt.Errorf("wait for the old generation's packets: %w", err)
	}
	return nil
}

// readCounters returns base + live counters of every counter index of slot.
func (s *state) readCounters(slot uint32) ([]ir.Counters, error) {
	base, err := s.inner("cbase", slot)
	if err != nil {
		return nil, err
	}
	defer base.Close()
	live, err := s.inner("counters", slot)
	if err != nil {
		return nil, err
	}
	defer live.Close()
	out, err := counterTotals(base, live, int(s.cfgs[slot].NCounters))
	if err != nil {
		return nil, err
	}
	return withTrivialCounts(out, s.maps["xfw_stats"], slot, &s.cfgs[slot])
}

// counterTotals adds a generation's counter bases and the n counters of
// every CPU (live holds CPU after CPU, n each).
func counterTotals(base, live *ebpf.Map, n int) ([]ir.Counters, error) {
	return counterTotalsInto(nil, base, live, n)
}

// counterTotalsInto is counterTotals into buf's memory when it holds n
// counters, else into a new slice.
func counterTotalsInto(buf []ir.Counters, base, live *ebpf.Map, n int) ([]ir.Counters, error) {
	var out []ir.Counters
	if cap(buf) >= n {
		out = buf[:n]
		clear(out)
	} else {
		out = make([]ir.Counters, n)
		prefault.Slice(out)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	if bases, lives, ok := mappedCounters(base, live, n, ncpu); ok {
		for i, c := range bases {
			out[i] = ir.Counters{Packets: c.Packets, Bytes: c.Bytes}
		}
		for cpu := 0; cpu < ncpu; cpu++ {
			for i, c := range lives[cpu*n : (cpu+1)*n] {
				out[i].Packets += c.Packets
				out[i].Bytes += c.Bytes
			}
		}
		return out, nil
	}
	if err := readArray(base, n, func(i int, c bpfCounter) {
		out[i].Packets += c.Packets
		out[i].Bytes += c.Bytes
	}); err != nil {
		return nil, fmt.Errorf("read counter bases: %w", err)
	}
	if err := readArray(live, n*ncpu, func(i int, c bpfCounter) {
		if n > 0 {
			out[i%n].Packets += c.Packets
			out[i%n].Bytes += c.Bytes
		}
	}); err != nil {
		return nil, fmt.Errorf("read counters: %w", err)
	}
	return out, nil
}

// mappedCounters returns the n counter bases of base and the n × ncpu
// live counters of live as views of their mapped memory, when both maps
// are mapped arrays large enough.
func mappedCounters(base, live *ebpf.Map, n, ncpu int) (bases, lives []bpfCounter, ok bool) {
	if n == 0 {
		return nil, nil, true
	}
	view := func(m *ebpf.Map, k int) []bpfCounter {
		if m.Flags()&unix.BPF_F_MMAPABLE == 0 || m.ValueSize() != uint32(unsafe.Sizeof(bpfCounter{})) {
			return nil
		}
		mem, err := mapped(m, k*int(unsafe.Sizeof(bpfCounter{})))
		if err != nil || len(mem) < k*int(unsafe.Sizeof(bpfCounter{})) {
			return nil
		}
		return unsafe.Slice((*bpfCounter)(unsafe.Pointer(unsafe.SliceData(mem))), k)
	}
	bases, lives = view(base, n), view(live, n*ncpu)
	return bases, lives, bases != nil && lives != nil
}

// readU32s returns elements 0..n-1 of a mapped array of __u32 (one per
// 8-byte stride), read from the map's memory.
func readU32s(m *ebpf.Map, n int) ([]uint32, error) {
	mem, err := mappedPrefix(m, n*8)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	prefault.Slice(out)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(mem[i*8:])
	}
	return out, nil
}

// readPairedU32s returns values 0..n-1 of a mapped array of
// struct xfw_u32pair (two values an element, putPairedU32s).
func readPairedU32s(m *ebpf.Map, n int) ([]uint32, error) {
	mem, err := mappedPrefix(m, pairedElems(n)*int(unsafe.Sizeof(bpfU32Pair{})))
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	prefault.Slice(out)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(mem[i*4:])
	}
	return out, nil
}

// pairedElems is the number of struct xfw_u32pair elements that hold n
// values.
func pairedElems(n int) int { return (n + 1) / 2 }

// putPairedU32s writes the parts one after the other as values 0, 1, …
// of a mapped array of struct xfw_u32pair, value i in element i / 2's
// v[i % 2]: the values are contiguous in the map's memory, where an array
// of __u32 (putU32s) pads each to 8 bytes. The clsch map's 15.3 million
// values at 10K kube-proxy services are 61 MB this way, 122 MB padded.
func putPairedU32s(m *ebpf.Map, parts ...[]uint32) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	mem, err := mappedPrefix(m, pairedElems(n)*int(unsafe.Sizeof(bpfU32Pair{})))
	if err != nil {
		return err
	}
	// Stored natively, as the programs read them.
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), n)
	i := 0
	for _, p := range parts {
		i += copy(words[i:], p)
	}
	return nil
}

// putU32s writes the parts one after the other as elements 0, 1, … of a
// mapped array of __u32.
func putU32s(m *ebpf.Map, parts ...[]uint32) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return nil
	}
	mem, err := mappedPrefix(m, n*8)
	if err != nil {
		return err
	}
	// The values at a stride of two words (the kernel's 8 bytes per
	// element), stored natively as the programs read them; the padding
	// is left as it is.
	words := unsafe.Slice((*uint32)(unsafe.Pointer(&mem[0])), 2*n)
	i := 0
	for _, p := range parts {
		for _, v := range p {
			words[i] = v
			i += 2
		}
	}
	return nil
}

// mappedPrefix returns the first n bytes of a mapped array's memory.
func mappedPrefix(m *ebpf.Map, n int) ([]byte, error) {
	mem, err := mapped(m, n)
	if err != nil {
		return nil, err
	}
	if n > len(mem) {
		return nil, fmt.Errorf("map %s: %d bytes wanted of %d", m, n, len(mem))
	}
	return mem[:n], nil
}

// chunkBytes views chunks as the bytes of struct xfw_chunk elements
// (compiler.Chunk has the data plane's layout and a stride of its size).
func chunkBytes(chunks []compiler.Chunk) []byte {
	if len(chunks) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&chunks[0])), len(chunks)*int(unsafe.Sizeof(chunks[0])))
}

// readArray calls f for elements 0..n-1 of an array map: from its memory
// when it is BPF_F_MMAPABLE, else read in batches.
func readArray[T any](m *ebpf.Map, n int, f func(i int, v T)) error {
	if n == 0 {
		return nil
	}
	if m.Flags()&unix.BPF_F_MMAPABLE != 0 {
		mem, size, stride, err := mappedArray[T](m, n)
		if err != nil {
			return err
		}
		if n*stride > len(mem) {
			return fmt.Errorf("map %s: read %d elements of %d", m, n, len(mem)/stride)
		}
		var v T
		for i := 0; i < n; i++ {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), size), mem[i*stride:])
			f(i, v)
		}
		return nil
	}
	keys := make([]uint32, batchSize)
	vals := make([]T, batchSize)
	var cursor ebpf.MapBatchCursor
	for done := 0; done < n; {
		cnt, err := m.BatchLookup(&cursor, keys, vals, nil)
		for i := 0; i < cnt; i++ {
			if k := int(keys[i]); k < n {
				f(k, vals[i])
			}
		}
		done += cnt
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if cnt == 0 {
			return nil
		}
	}
	return nil
}

// savedLenBytes is the little-endian length before the saved ruleset in
// the pages of a slot's state map.
const savedLenBytes = 8

// saved reads the binary ruleset saved with slot's generation.
func (s *state) saved(slot uint32) ([]byte, error) {
	return s.statePart(slot, 0)
}

// statePart returns part i of slot's state pages: the parts (the saved
// ruleset, then the generation metadata) follow each other, each after its
// little-endian length (stateBlob); only the lengths before part i and the
// part itself are read.
func (s *state) statePart(slot uint32, i int) ([]byte, error) {
	m, err := s.inner("state", slot)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	defer unmapOutsideSession()
	mem, err := mapped(m, 0)
	if err != nil {
		return nil, fmt.Errorf("memory of the saved ruleset: %w", err)
	}
	size := uint64(len(mem))
	var at, n uint64
	for k := 0; k <= i; k++ {
		if k > 0 {
			at += savedLenBytes + n
		}
		if at+savedLenBytes > size {
			return nil, fmt.Errorf("saved state has no part %d", i)
		}
		if n = binary.LittleEndian.Uint64(mem[at:]); n > size-at-savedLenBytes {
			return nil, fmt.Errorf("saved state part %d of %d bytes in a map of %d", k, n, size)
		}
	}
	// A copy: the mapping ends with the session, the decoded ruleset
	// may not.
	out := make([]byte, n)
	prefault.Slice(out)
	copy(out, mem[at+savedLenBytes:])
	return out, nil
}

// SetCounters overwrites counters of fam's running ruleset: for each counter
// index in values, the base becomes value − live so the sum reads value
// (used by -Z and -c).
func SetCounters(fam ir.Family, values map[int]ir.Counters) error {
	cur, err := Current()
	if err != nil {
		return err
	}
	if cur == nil {
		return errors.New("xfw is not loaded in this network namespace")
	}
	defer cur.Close()
	slot := cur.slot(fam)
	live, err := cur.inner("counters", slot)
	if err != nil {
		return err
	}
	defer live.Close()
	base, err := cur.inner("cbase", slot)
	if err != nil {
		return err
	}
	defer base.Close()
	n := int(cur.cfgs[slot].NCounters)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("count CPUs: %w", err)
	}
	trivial, err := trivialCounts(cur.maps["xfw_stats"], slot)
	if err != nil {
		return err
	}
	for i, v := range values {
		if i < 0 || i >= n {
			return fmt.Errorf("counter %d does not exist", i)
		}
		share := trivialShare(&cur.cfgs[slot], &trivial, uint32(i))
		l := bpfCounter{Packets: share.Packets, Bytes: share.Bytes}
		for cpu := 0; cpu < ncpu; cpu++ {
			var c bpfCounter
			if err := live.Lookup(uint32(cpu*n+i), &c); err != nil {
				return fmt.Errorf("read counter %d: %w", i, err)
			}
			l.Packets += c.Packets
			l.Bytes += c.Bytes
		}
		b := bpfCounter{Packets: v.Packets - l.Packets, Bytes: v.Bytes - l.Bytes}
		if err := base.Put(uint32(i), b); err != nil {
			return fmt.Errorf("set counter %d: %w", i, err)
		}
	}
	return nil
}

// LogRing returns the running ring buffer of LOG events (caller closes).
func LogRing() (*ebpf.Map, error) {
	return eventRing(ringLog)
}

// NFLogRing returns the NFLOG event ring buffer of the running data plane
// (events of ir.LogFlagNFLog options, struct xfw_log_event), as LogRing.
func NFLogRing() (*ebpf.Map, error) {
	return eventRing(ringNFLog)
}

// eventRing returns the running data plane's event ring buffer i (a map of
// its own: the caller closes it).
func eventRing(i ring) (*ebpf.Map, error) {
	cur, err := currentOwn()
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, errors.New("xfw is not loaded in this network namespace")
	}
	m, err := openRing(cur.maps, i)
	cur.Close()
	return m, err
}

// trimSpec prepares spec for loading the attached programs: the
// connection tables are sized, the home namespace set (netns.go).
func trimSpec(spec *ebpf.CollectionSpec) error {
	sizeConnTables(spec)
	sizePktBytes(spec)
	return setHomeNetns(spec)
}

// load loads and verifies xfw's programs in the namespace (not attached
// yet) and returns them as the namespace's state with no generation.
func load(spec *ebpf.CollectionSpec) (*state, error) {
	s, err := loadUnkept(spec)
	if err != nil {
		return nil, err
	}
	keepForSession(s)
	return s, nil
}

// loadUnkept is load without making the state the session's.
func loadUnkept(spec *ebpf.CollectionSpec) (*state, error) {
	return loadUnkeptSharing(spec, nil)
}

// loadUnkeptSharing is loadUnkept with the maps of shared used instead of
// new ones (loadObjectSharing).
func loadUnkeptSharing(spec *ebpf.CollectionSpec, shared map[string]*ebpf.Map) (*state, error) {
	if err := checkKernel(); err != nil {
		return nil, err
	}
	if err := trimSpec(spec); err != nil {
		return nil, err
	}
	obj, err := loadObjectSharing(spec, shared)
	if err != nil {
		return nil, err
	}
	s := &state{maps: obj.maps}
	s.xdp, s.tc, s.tcIn = obj.progs[xdpProgName], obj.progs[tcProgName], obj.progs[tcInProgName]
	delete(obj.progs, xdpProgName)
	delete(obj.progs, tcProgName)
	delete(obj.progs, tcInProgName)
	obj.maps = nil
	obj.close()
	if s.xdp == nil || s.tc == nil || s.tcIn == nil {
		s.Close()
		return nil, errors.New("BPF object lacks its entry programs")
	}
	if err := fillRings(s.maps); err != nil {
		s.Close()
		return nil, err
	}
	if err := recordHandover(s.maps["xfw_build"]); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.readConfig(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
