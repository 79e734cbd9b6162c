package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/cilium/ebpf"
)

// heldGuard is the guard this process holds (the agent's, StartGuard),
// nil when it holds none.
var heldGuard atomic.Pointer[Guard]

// admitAttached admits to the namespace's guard the interfaces this process
// has just attached xfw's programs to (XDP program xdpID), so that a command
// returns with them carrying traffic: the guard of the agent that serves
// the command, else the pinned guard another process left in force. A
// guard that is neither (an agent's unpinned guard, no bpffs) admits them
// at its agent's next look, within its poll interval; until then their
// packets stay dropped, never passed unjudged.
func admitAttached(attached []Interface, xdpID ebpf.ProgramID) error {
	if len(attached) == 0 {
		return nil
	}
	in := map[int]GuardedInterface{}
	for _, ifc := range attached {
		in[ifc.Index] = GuardedInterface{XDPProgID: uint32(xdpID), Veth: ifc.link.Type() == "veth"}
	}
	if g := heldGuard.Load(); g != nil {
		return g.Admit(in)
	}
	dir, err := guardPinDir()
	if err != nil || dir == "" {
		return err
	}
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, guardIfsPin), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no guard in force
	}
	if err != nil {
		return fmt.Errorf("guard: open its interfaces: %w", err)
	}
	defer m.Close()
	for i, gi := range in {
		if err := m.Put(uint32(i), gi.entry()); err != nil {
			return fmt.Errorf("guard: admit interface %d: %w", i, err)
		}
	}
	return nil
}
