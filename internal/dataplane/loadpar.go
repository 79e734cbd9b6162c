package dataplane

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// loadedObject is xfw's BPF object in the kernel: its maps and its entry
// programs, verified but not attached.
type loadedObject struct {
	maps  map[string]*ebpf.Map
	progs map[string]*ebpf.Program
}

// close releases whatever the object still holds.
func (o *loadedObject) close() {
	for _, p := range o.progs {
		p.Close()
	}
	for _, m := range o.maps {
		m.Close()
	}
}

// loadObject creates the maps of spec, then loads and verifies its
// programs concurrently, each bound to those maps. The verifier checks a
// program on the loading thread alone and the entry programs share no
// verification, so on a machine with more than one CPU the namespace's
// first load costs about the longest program's verification instead of the
// sum of all three (docs/design.md, "Loading").
func loadObject(spec *ebpf.CollectionSpec) (*loadedObject, error) {
	return loadObjectSharing(spec, nil)
}

// loadObjectSharing is loadObject with the maps of shared (by spec name)
// used instead of new ones: a takeover hands the running connection tables
// to the new programs (takeover.go). Their sizes are the shared maps'.
func loadObjectSharing(spec *ebpf.CollectionSpec, shared map[string]*ebpf.Map) (*loadedObject, error) {
	start := time.Now()
	mapsOnly := spec.Copy()
	mapsOnly.Programs = map[string]*ebpf.ProgramSpec{}
	for name, m := range shared {
		for _, s := range []*ebpf.CollectionSpec{spec, mapsOnly} {
			if ms := s.Maps[name]; ms != nil {
				ms.MaxEntries = m.MaxEntries()
			}
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(mapsOnly, ebpf.CollectionOptions{MapReplacements: shared})
	if err != nil {
		return nil, fmt.Errorf("create xfw's maps: %w", err)
	}
	obj := &loadedObject{maps: coll.Maps, progs: map[string]*ebpf.Program{}}
	coll.Maps = nil
	coll.Close()
	start = TraceSince("load: create maps", start)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for name, ps := range spec.Programs {
		if ps.Type == ebpf.UnspecifiedProgram {
			continue // a function of the entry programs, linked into them
		}
		one := spec.Copy()
		one.Programs = map[string]*ebpf.ProgramSpec{name: one.Programs[name]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			prog, err := loadProgram(one, name, obj.maps)
			TraceSince("load: program "+name, start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			obj.progs[name] = prog
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		obj.close()
		return nil, err
	}
	return obj, nil
}

// loadProgram loads and verifies program name of spec (which holds only
// it), bound to the maps already created.
func loadProgram(spec *ebpf.CollectionSpec, name string, maps map[string]*ebpf.Map) (*ebpf.Program, error) {
	repl := map[string]*ebpf.Map{}
	for mapName := range spec.Maps {
		if m := maps[mapName]; m != nil {
			repl[mapName] = m
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		MapReplacements: repl,
		Programs:        ebpf.ProgramOptions{LogSizeStart: 1 << 20},
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("kernel verifier refused xfw's program %s: %+v", name, ve)
		}
		return nil, fmt.Errorf("load xfw's program %s into the kernel: %w", name, err)
	}
	defer coll.Close()
	prog := coll.Programs[name]
	delete(coll.Programs, name)
	if prog == nil {
		return nil, fmt.Errorf("BPF object lacks its program %s", name)
	}
	return prog, nil
}
