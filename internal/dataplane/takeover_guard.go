package dataplane

// The guard across a takeover: its admissions name each interface's XDP
// program by id, so as each interface's program is swapped, its admission
// moves to the new program. The guard (the agent's, pinned or held open by
// the agent process alone) is found by its program's name among the
// kernel's programs; only admissions that name the old program of that
// very interface are changed (program ids are unique in the kernel, so a
// guard of another namespace is never touched).

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// guards are the interface maps (xfw_guard_ifs) of the guards loaded in
// the kernel.
type guards []*ebpf.Map

// openGuards opens the interface maps of every guard program loaded.
func openGuards() (guards, error) {
	var out guards
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			out.close()
			return nil, fmt.Errorf("guard: list the loaded programs: %w", err)
		}
		id = next
		m, err := guardMapOf(id)
		if err != nil {
			out.close()
			return nil, err
		}
		if m != nil {
			out = append(out, m)
		}
	}
}

// guardMapOf returns the interface map of program id when it is a guard,
// else nil.
func guardMapOf(id ebpf.ProgramID) (*ebpf.Map, error) {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return nil, nil // unloaded meanwhile
	}
	defer prog.Close()
	facts, err := programFacts(prog)
	if err != nil || facts.Name != guardProgName {
		return nil, nil
	}
	for _, mid := range facts.MapIDs {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return nil, fmt.Errorf("guard: open map %d of program %d: %w", mid, id, err)
		}
		if name, _, err := mapFacts(m); err == nil && name == guardIfsMap {
			return m, nil
		}
		m.Close()
	}
	return nil, nil
}

// retarget makes every guard that admits the interface of ifindex by
// program from admit it by program to instead.
func (g guards) retarget(ifindex int, from, to ebpf.ProgramID) error {
	if from == 0 || to == 0 {
		return nil
	}
	for _, m := range g {
		var v guardIf
		if err := m.Lookup(uint32(ifindex), &v); err != nil || v.ProgID != uint32(from) {
			continue
		}
		v.ProgID = uint32(to)
		if err := m.Put(uint32(ifindex), v); err != nil {
			return fmt.Errorf("guard: admit interface %d by its new XDP program: %w", ifindex, err)
		}
	}
	return nil
}

// close releases the maps.
func (g guards) close() {
	for _, m := range g {
		m.Close()
	}
}
