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
// memory. Each map is mapped once per command (the kernel maps every page
// of it at mmap time) and read or written in place, without the
// intermediate buffers ebpf.Memory's ReadAt and WriteAt need: at 10,000
// rules a generation is ~6 MB, and every page of a fresh buffer costs a
// page fault.

// mappings holds the maps mapped during the current session (or, outside
// one, the current call), by map id; unmapAll releases them.
var mappings struct {
	mu   sync.Mutex
	byID map[ebpf.MapID][]byte
}

// mapped returns the memory of m, a BPF_F_MMAPABLE array map, mapped
// shared and writable: element i is at i × the value size rounded up to 8
// bytes. The mapping stays until unmapAll (the session's end).
func mapped(m *ebpf.Map) ([]byte, error) {
	if m.Flags()&unix.BPF_F_MMAPABLE == 0 {
		return nil, fmt.Errorf("map %s is not mmapable", m)
	}
	_, id, err := mapFacts(m)
	if err != nil {
		return nil, err
	}
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	if mem, ok := mappings.byID[id]; ok {
		return mem, nil
	}
	stride := (int(m.ValueSize()) + 7) &^ 7
	size := stride * int(m.MaxEntries())
	page := os.Getpagesize()
	size = (size + page - 1) / page * page
	mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: mmap %d bytes: %w", m, size, err)
	}
	if mappings.byID == nil {
		mappings.byID = map[ebpf.MapID][]byte{}
	}
	mem = mem[:stride*int(m.MaxEntries())] // its capacity: the whole mapping
	mappings.byID[id] = mem
	return mem, nil
}

// unmapAll releases every mapping mapped made. Slices of them (a
// generation whose chunks were read in place) must not be used after.
func unmapAll() error {
	mappings.mu.Lock()
	defer mappings.mu.Unlock()
	var errs []error
	for id, mem := range mappings.byID {
		if err := unix.Munmap(mem[:cap(mem)]); err != nil {
			errs = append(errs, fmt.Errorf("unmap map %d: %w", id, err))
		}
	}
	mappings.byID = nil
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
