package dataplane

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Generation arrays are BPF_F_MMAPABLE: a command reads and writes them as
// memory. The part of a map a command uses is mapped once per command (the
// kernel maps its pages at mmap time) and read or written in place,
// without the intermediate buffers ebpf.Memory's ReadAt and WriteAt need:
// at 10,000 rules a generation is ~6 MB, and every page of a fresh buffer
// costs a page fault.

// mappings holds the maps mapped, by map id and by whether a session was
// active when they were made: the longest mapping of each and every
// mapping made. Outside a session (a call without xfw's lock) the call's
// mappings are released when it returns (unmapOutsideSession); a
// session's when it ends (endSessionMappings), except in a process that
// keeps its state between sessions (KeepSessionState): there a mapping
// used in the session stays for the next, whose commands write the same
// banks' maps (mapping and unmapping them costs about 1 µs a page each
// way: at 10,000 rules some 1,800 pages, the larger part of filling a
// generation), and one the session did not use (a map replaced, or no
// longer running) in it or the one before (a command fills the idle
// bank, the next the other) is released. A map stays allocated while it is mapped,
// so its id is not reused meanwhile.
var mappings struct {
	mu      sync.Mutex
	longest map[mappingKey]*mapping
	all     []*mapping
	// sessions counts the sessions ended.
	sessions uint64
}

// mappingKey finds a map's longest mapping.
type mappingKey struct {
	id ebpf.MapID
	// outside: made while no session was active.
	outside bool
}

// mapping is one mapping made.
type mapping struct {
	mem []byte // the whole mapping
	key mappingKey
	// used is the count of sessions ended (mappings.sessions) when it
	// was last used.
	used uint64
}

// mapped returns the first n bytes (all when n is 0 or more than the map
// holds) of the memory of m, a BPF_F_MMAPABLE array map, mapped shared and
// writable: element i is at i × the value size rounded up to 8 bytes. Only
// the pages asked for are mapped (the kernel maps each at mmap time, and
// unmaps each, at about 1 µs a page): a generation's maps have room to
// grow. The mapping stays until unmapAll (the session's end).
func mapped(m *ebpf.Map, n int) ([]byte, error) {
	if m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		return nil, fmt.Errorf("map %s is not mmapable", m)
	}
	_, id, err := mapFacts(m)
	if err != nil {
		return nil, err
	}
	stride := (int(m.ValueSize()) + 7) &^ 7
	full := stride * int(m.MaxEntries())
	if n <= 0 || n > full {
		n = full
	}
	key := mappingKey{id: id, outside: !sessionActive()}
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	// Its length: whole elements within the map (its capacity: the
	// whole mapping).
	if mp, ok := mappings.longest[key]; ok && min(len(mp.mem), full) >= n {
		mp.used = mappings.sessions
		return mp.mem[:min(len(mp.mem), full)], nil
	}
	page := os.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: mmap %d bytes: %w", m, size, err)
	}
	if mappings.longest == nil {
		mappings.longest = map[mappingKey]*mapping{}
	}
	mp := &mapping{mem: mem, key: key, used: mappings.sessions}
	mappings.all = append(mappings.all, mp)
	mappings.longest[key] = mp
	return mem[:min(size, full)], nil
}

// unmapAll releases every mapping mapped made. Slices of them (a
// generation whose chunks were read in place) must not be used after.
func unmapAll() error {
	return unmapWhere(func(*mapping) bool { return true })
}

// unmapWhere releases the mappings release picks, and forgets them.
func unmapWhere(release func(*mapping) bool) error {
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	var errs []error
	kept := mappings.all[:0]
	for _, mp := range mappings.all {
		if !release(mp) {
			kept = append(kept, mp)
			continue
		}
		if err := unix.Munmap(mp.mem); err != nil {
			errs = append(errs, fmt.Errorf("unmap %d bytes: %w", len(mp.mem), err))
		}
		if mappings.longest[mp.key] == mp {
			delete(mappings.longest, mp.key)
		}
	}
	clear(mappings.all[len(kept):])
	mappings.all = kept
	return errors.Join(errs...)
}

// unmapOutsideSession releases the mappings made outside a session when
// no session is active (a data-plane call made without xfw's lock, as
// tests and the agent's checks do).
func unmapOutsideSession() {
	if !sessionActive() {
		unmapWhere(func(mp *mapping) bool { return mp.key.outside })
	}
}

// endSessionMappings releases, at a session's end, the mappings made in
// it or kept from an earlier one: all of them, or with keep (the process
// keeps its state for the next session) those neither this session nor
// the one before used; the others stay for the next. session.mu is held.
func endSessionMappings(keep bool) error {
	mappings.mu.Lock()
	ended := mappings.sessions
	mappings.sessions++
	mappings.mu.Unlock()
	return errors.Join(endSessionOpened(keep, ended), unmapWhere(func(mp *mapping) bool {
		return !mp.key.outside && (!keep || mp.used+1 < ended)
	}))
}

// sessionActive reports whether a session (BeginSession) is active.
func sessionActive() bool {
	session.mu.Lock()
	defer session.mu.Unlock()
	return session.active
}

// sameMemory reports whether b starts where mem does: a generation array
// read in place (RunningGeneration) and its own map need no copy.
func sameMemory(b, mem []byte) bool {
	return len(b) > 0 && len(mem) > 0 && unsafe.SliceData(b) == unsafe.SliceData(mem)
}
