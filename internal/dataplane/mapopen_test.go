package dataplane

import (
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// TestSessionOpenedMapsKept checks the maps opened by id in a session:
// each open gives a descriptor of its own for the one map (closing it
// leaves the kept one), a later open of the id reuses the kept map, a
// session's end with keep closes those neither it nor the one before
// opened, without keep all of them, and outside a session none is kept.
func TestSessionOpenedMapsKept(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a BPF map needs root")
	}
	newMap := func() ebpf.MapID {
		t.Helper()
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 4})
		if err != nil {
			t.Fatalf("create an array: %v", err)
		}
		t.Cleanup(func() { m.Close() })
		_, id, err := mapFacts(m)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	setActive := func(on bool) {
		session.mu.Lock()
		session.active = on
		session.mu.Unlock()
	}
	kept := func() map[ebpf.MapID]*ebpf.Map {
		openedMaps.mu.Lock()
		defer openedMaps.mu.Unlock()
		out := map[ebpf.MapID]*ebpf.Map{}
		for id, om := range openedMaps.byID {
			out[id] = om.m
		}
		return out
	}
	// open opens id, writes v through it and closes it.
	open := func(id ebpf.MapID, v uint64) {
		t.Helper()
		m, err := openMapID(id)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if err := m.Put(uint32(0), v); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		setActive(false)
		endSessionMappings(false)
	})
	endSessionMappings(false)
	a, b := newMap(), newMap()

	open(a, 1) // outside a session
	if n := len(kept()); n != 0 {
		t.Fatalf("outside a session %d maps kept, want 0", n)
	}
	setActive(true)
	open(a, 2) // session 1: both
	open(b, 3)
	first := kept()[a]
	if len(kept()) != 2 || first == nil {
		t.Fatalf("in a session kept %v, want a and b", kept())
	}
	var v uint64
	if err := first.Lookup(uint32(0), &v); err != nil || v != 2 {
		t.Fatalf("the kept map after its clone was closed: %d, %v; want 2 written through the clone", v, err)
	}
	endSessionMappings(true)
	open(a, 4) // session 2: a only
	if kept()[a] != first {
		t.Errorf("a kept map was opened again")
	}
	endSessionMappings(true)
	if n := len(kept()); n != 2 {
		t.Errorf("after a session that opened one of two kept maps: %d kept, want 2", n)
	}
	// Sessions 3 …: b stays open until keptOpenSessions sessions in a
	// row did not open it.
	for i := 3; i <= keptOpenSessions+1; i++ {
		open(a, uint64(2+i))
		endSessionMappings(true)
		k := kept()
		switch {
		case i <= keptOpenSessions && len(k) != 2:
			t.Errorf("after %d sessions without b: kept %v, want a and b", i-1, k)
		case i > keptOpenSessions && (len(k) != 1 || k[a] == nil):
			t.Errorf("after %d sessions without b: kept %v, want a only", i-1, k)
		}
	}
	endSessionMappings(false)
	if n := len(kept()); n != 0 {
		t.Errorf("a session's end without keep left %d maps open", n)
	}
}
