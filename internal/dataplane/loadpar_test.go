package dataplane

import (
	"testing"

	"github.com/cilium/ebpf"
)

// TestLoadObjectSharesMaps checks that the programs loaded concurrently
// (loadObject) use the maps created first, each of them: a program with a
// private copy of a map would judge by a generation nobody fills.
func TestLoadObjectSharesMaps(t *testing.T) {
	inFreshNetns(t, func() {
		obj, err := loadObject(trimmedSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		defer obj.close()
		created := map[ebpf.MapID]string{}
		for name, m := range obj.maps {
			info, err := m.Info()
			if err != nil {
				t.Fatalf("map %s: %v", name, err)
			}
			id, ok := info.ID()
			if !ok {
				t.Fatalf("map %s: the kernel reports no id", name)
			}
			created[id] = name
		}
		for _, name := range []string{xdpProgName, tcProgName, tcInProgName} {
			prog := obj.progs[name]
			if prog == nil {
				t.Fatalf("program %s was not loaded", name)
			}
			info, err := prog.Info()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ids, ok := info.MapIDs()
			if !ok || len(ids) == 0 {
				t.Fatalf("%s: the kernel reports no maps", name)
			}
			for _, id := range ids {
				if _, ok := created[id]; !ok {
					t.Errorf("%s uses map id %d, which loadObject did not create", name, id)
				}
			}
		}
	})
}

// trimmedSpec returns the embedded object's spec prepared as load prepares
// it (trimSpec), in the calling thread's namespace.
func trimmedSpec(t *testing.T) *ebpf.CollectionSpec {
	t.Helper()
	spec, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if err := trimSpec(spec); err != nil {
		t.Fatal(err)
	}
	return spec
}
