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

// mappings holds the maps mapped during the current session (or, outside
// one, the current call), by map id: the longest mapping of each and every
// mapping made (unmapAll releases them).
var mappings struct {
	mu      sync.Mutex
	longest map[ebpf.MapID][]byte
	all     [][]byte
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
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	if mem, ok := mappings.longest[id]; ok && len(mem) >= n {
		return mem, nil
	}
	page := os.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: mmap %d bytes: %w", m, size, err)
	}
	if mappings.longest == nil {
		mappings.longest = map[ebpf.MapID][]byte{}
	}
	mappings.all = append(mappings.all, mem)
	// Its length: whole elements within the map (its capacity: the
	// whole mapping).
	mem = mem[:min(size, full)]
	mappings.longest[id] = mem
	return mem, nil
}

// unmapAll releases every mapping mapped made. Slices of them (a
// generation whose chunks were read in place) must not be used after.
func unmapAll() error {
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	var errs []error
	for _, mem := range mappings.all {
		if err := unix.Munmap(mem); err != nil {
			errs = append(errs, fmt.Errorf("unmap %d bytes: %w", len(mem), err))
		}
	}
	mappings.longest, mappings.all = nil, nil
	return errors.Join(errs...)
}

// unmapOutsideSession releases the mappings when no session keeps them
// (a data-plane call made without xfw's lock, as tests do).
func unmapOutsideSession() {
	session.mu.Lock()
	active := session.active
	session.mu.Unlock()
	if !active {
		unmapAll()
	}
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
