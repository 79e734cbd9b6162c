package dataplane

import (
	"errors"
	"sync"

	"github.com/cilium/ebpf"
)

// Maps opened by id are kept as mappings are (mapped.go). A command opens
// every generation map of a slot by its id (the outer maps hold ids), some
// 30 a command, each a BPF_MAP_GET_FD_BY_ID and a BPF_OBJ_GET_INFO_BY_FD.
// In a session the map opened stays open, and a later open of the same id
// gets a duplicate of its descriptor (one dup, no info); in a process that
// keeps its state between sessions it stays while one of the last
// keptOpenSessions sessions used it, else it is closed at the session's
// end. The id is always read from the outer map first, so a slot whose map
// was replaced finds the new one; a map held open stays allocated, so its
// id is not reused meanwhile. Outside a session nothing is kept.
var openedMaps struct {
	mu   sync.Mutex
	byID map[ebpf.MapID]*openedMap
}

// keptOpenSessions is how many sessions a map opened by id stays open
// after the last that opened it, in a process that keeps its state. A
// command fills the idle bank, the next the other, so a bank's maps are
// opened every other command, and other sessions come between (the
// agent's own refreshes take the lock too): kept for the one session
// before only (as the mappings are), the idle bank's maps were found
// closed at nearly every served command and opened anew (in strace, ten
// BPF_MAP_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD and close each per command,
// where a kept one costs a dup).
const keptOpenSessions = 4

// openedMap is one map kept open, and the count of sessions ended
// (mappings.sessions) when it was last opened.
type openedMap struct {
	m    *ebpf.Map
	used uint64
}

// openMapID opens the map whose id is id (caller closes): a duplicate of
// the one kept open in a session.
func openMapID(id ebpf.MapID) (*ebpf.Map, error) {
	if !sessionActive() {
		return ebpf.NewMapFromID(id)
	}
	mappings.mu.Lock()
	now := mappings.sessions
	mappings.mu.Unlock()
	openedMaps.mu.Lock()
	defer openedMaps.mu.Unlock()
	om, ok := openedMaps.byID[id]
	if !ok {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return nil, err
		}
		if openedMaps.byID == nil {
			openedMaps.byID = map[ebpf.MapID]*openedMap{}
		}
		om = &openedMap{m: m}
		openedMaps.byID[id] = om
	}
	om.used = now
	return om.m.Clone()
}

// endSessionOpened closes, at a session's end (ended: the count of
// sessions ended before it), the maps kept open: all of them, or with keep
// those none of the last keptOpenSessions sessions opened.
func endSessionOpened(keep bool, ended uint64) error {
	openedMaps.mu.Lock()
	defer openedMaps.mu.Unlock()
	var errs []error
	for id, om := range openedMaps.byID {
		if keep && om.used+keptOpenSessions > ended {
			continue
		}
		errs = append(errs, om.m.Close())
		delete(openedMaps.byID, id)
	}
	return errors.Join(errs...)
}
