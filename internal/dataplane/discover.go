package dataplane

// Finding the running state: from the XDP program attached to the
// namespace's interfaces, or, when it was removed from every one, from the
// egress program, which holds the same maps (a new XDP program is then
// bound to them).

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// currentUncached finds and opens the running state.
func currentUncached() (*state, error) {
	// This build's identity (a checksum of the 600 KB object, ~0.5 ms)
	// is computed on another CPU while the interfaces are listed and the
	// maps opened; readConfig waits for it.
	go buildID()
	links, err := ListLinks()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	for _, l := range links {
		x := l.Attrs().Xdp
		if x == nil || !x.Attached || x.ProgId == 0 {
			continue
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
		if errors.Is(err, unix.EPERM) {
			return nil, ErrPermission
		}
		if err != nil {
			continue // detached meanwhile
		}
		facts, err := programFacts(prog)
		if err != nil || facts.Name != xdpProgName {
			prog.Close()
			continue
		}
		s := &state{xdp: prog, maps: map[string]*ebpf.Map{}, xdpID: facts.ID}
		if err := s.openMaps(facts.MapIDs); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.readConfig(); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.findTC(links); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.findIngress(links); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.reviveIngress(); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	return currentFromEgress(links)
}

// currentFromEgress finds the running state from xfw's egress program when
// no interface runs its XDP program any more (ip link set dev X xdp off on
// every one): the egress program holds the same maps, so the rulesets,
// counters and connections are all there, and a new copy of the XDP
// program bound to them (reviveXDP) is attached again by the next sync.
// It returns nil when no interface runs either program.
func currentFromEgress(links []netlink.Link) (*state, error) {
	for _, l := range links {
		id, err := ourTC(Interface{Name: l.Attrs().Name, Index: l.Attrs().Index, link: l})
		if err != nil {
			if errors.Is(err, unix.EPERM) {
				return nil, ErrPermission
			}
			continue
		}
		if id == 0 {
			continue
		}
		prog, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // detached meanwhile
		}
		facts, err := programFacts(prog)
		if err != nil {
			prog.Close()
			continue
		}
		s := &state{tc: prog, tcID: facts.ID, maps: map[string]*ebpf.Map{}}
		if err := s.openMaps(facts.MapIDs); err != nil {
			s.Close()
			return nil, err
		}
		// The ingress program holds the rate limiter's maps, which
		// the egress program lacks: found first, they are the ones
		// the revived XDP program is bound to.
		if err := s.findIngress(links); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.reviveXDP(); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.readConfig(); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.reviveIngress(); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
	return nil, nil
}

// openMaps opens the maps of ids into s.maps, by their kernel names.
func (s *state) openMaps(ids []ebpf.MapID) error {
	for _, id := range ids {
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			return fmt.Errorf("open map %d of the running program: %w", id, err)
		}
		name, _, err := mapFacts(m)
		if err != nil {
			m.Close()
			return fmt.Errorf("map %d: %w", id, err)
		}
		s.maps[name] = m
	}
	return nil
}

// kernelNameLen is BPF_OBJ_NAME_LEN less its NUL: the kernel keeps the
// first 15 characters of a map's name.
const kernelNameLen = 15

// kernelName is the name the kernel keeps of map name (its first 15
// characters), which maps found from a running program are known by.
func kernelName(name string) string {
	return name[:min(len(name), kernelNameLen)]
}

// reviveXDP loads a new copy of the XDP program bound to s's maps (those
// the running egress program holds; a map only the XDP program used, such
// as its scratch space or the interface facts, is created afresh and
// added to s).
func (s *state) reviveXDP() error {
	prog, err := s.revive(xdpProgName)
	if err != nil {
		return err
	}
	s.xdp = prog
	return nil
}

// reviveIngress loads a copy of the TCX ingress program bound to s's maps
// when findIngress found none attached.
func (s *state) reviveIngress() error {
	if s.tcIn != nil {
		return nil
	}
	prog, err := s.revive(tcInProgName)
	if err != nil {
		return err
	}
	s.tcIn = prog
	return nil
}

// revive loads a new copy of xfw's program name bound to s's maps; the
// maps it needs that s lacks are created afresh and added to s.
func (s *state) revive(progName string) (*ebpf.Program, error) {
	spec, err := loadSpec()
	if err != nil {
		return nil, err
	}
	if err := trimSpec(spec); err != nil {
		return nil, err
	}
	for name := range spec.Programs {
		if name != progName {
			delete(spec.Programs, name)
		}
	}
	repl := map[string]*ebpf.Map{}
	for name, ms := range spec.Maps {
		m := s.maps[kernelName(name)]
		if m == nil {
			continue
		}
		info, err := m.Info()
		if err != nil {
			return nil, fmt.Errorf("map %s: %w", name, err)
		}
		ms.MaxEntries, ms.Flags = info.MaxEntries, info.Flags
		repl[name] = m
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		return nil, fmt.Errorf("load xfw's program %s again, bound to the running maps: %w", progName, err)
	}
	prog := coll.Programs[progName]
	delete(coll.Programs, progName)
	// The maps created afresh (those only the XDP program used: interface
	// facts, local addresses, scratch) join the state; sync refills them.
	for name, m := range coll.Maps {
		if repl[name] == nil {
			s.maps[name] = m
		}
		delete(coll.Maps, name)
	}
	coll.Close()
	if prog == nil {
		return nil, fmt.Errorf("BPF object lacks its program %s", progName)
	}
	// Event rings created afresh with it are empty arrays: fill them.
	if repl[logRingsMap] == nil {
		if err := fillRings(s.maps); err != nil {
			prog.Close()
			return nil, err
		}
	}
	return prog, nil
}

// readConfig checks the build and reads the banks and slot configurations.
func (s *state) readConfig() error {
	bm := s.maps["xfw_build"]
	if bm == nil {
		return ErrOtherBuild
	}
	var id uint64
	if err := bm.Lookup(uint32(0), &id); err != nil {
		return fmt.Errorf("read the running build identity: %w", err)
	}
	if id != buildID() {
		return ErrOtherBuild
	}
	return s.readSlots()
}

// readSlots reads the families' active banks and the slot configurations.
func (s *state) readSlots() error {
	for _, name := range append([]string{"xfw_cfg", "xfw_bank", "xfw_ifinfo", "xfw_local4", "xfw_local6"}, outerNames()...) {
		if s.maps[name] == nil {
			return fmt.Errorf("running xfw program lacks map %s", name)
		}
	}
	for fi := range s.banks {
		if err := s.maps["xfw_bank"].Lookup(uint32(fi), &s.banks[fi]); err != nil {
			return fmt.Errorf("read active bank: %w", err)
		}
	}
	for i := range s.cfgs {
		if err := s.maps["xfw_cfg"].Lookup(uint32(i), &s.cfgs[i]); err != nil {
			return fmt.Errorf("read generation configuration: %w", err)
		}
	}
	return nil
}

func outerNames() []string {
	out := make([]string, len(generationMaps))
	for i, k := range generationMaps {
		out[i] = outerName(k)
	}
	return out
}

// findTC opens the egress program that belongs with s.xdp (it shares its
// configuration map), if one is attached anywhere.
func (s *state) findTC(links []netlink.Link) error {
	prog, id, _, err := s.findAttached(links, egressHook)
	if err == nil && prog != nil {
		s.tc, s.tcID = prog, id
	}
	return err
}

// findIngress opens the TCX ingress program that belongs with s (it shares
// the configuration map), if one is attached anywhere, and adds the maps
// it holds that s lacks. When none is, s.tcIn stays nil: the caller loads
// a copy bound to s's maps (revive), which the next sync attaches.
func (s *state) findIngress(links []netlink.Link) error {
	prog, id, mapIDs, err := s.findAttached(links, ingressHook)
	if err != nil || prog == nil {
		return err
	}
	s.tcIn, s.tcInID = prog, id
	// The rate limiter's maps are the XDP program's too; the IPv6
	// source table (saddr6Map) is the ingress program's alone.
	if s.maps[rateCfgMap] != nil && s.maps[saddr6Map] != nil {
		return nil
	}
	return s.openMissingMaps(mapIDs)
}

// findAttached opens xfw's program of hook that shares s's configuration
// map, attached to any of links, and returns it with its id and map ids
// (nil when there is none).
func (s *state) findAttached(links []netlink.Link, hook tcxHook) (*ebpf.Program, ebpf.ProgramID, []ebpf.MapID, error) {
	_, cfgID, err := mapFacts(s.maps["xfw_cfg"])
	if err != nil {
		return nil, 0, nil, fmt.Errorf("configuration map: %w", err)
	}
	for _, l := range links {
		id, err := ourTCX(Interface{Name: l.Attrs().Name, Index: l.Attrs().Index, link: l}, hook)
		if err != nil || id == 0 {
			continue
		}
		prog, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		facts, err := programFacts(prog)
		if err != nil || !slices.Contains(facts.MapIDs, cfgID) {
			prog.Close()
			continue
		}
		return prog, id, facts.MapIDs, nil
	}
	return nil, 0, nil, nil
}

// openMissingMaps opens those of the maps of ids that s does not hold yet.
func (s *state) openMissingMaps(ids []ebpf.MapID) error {
	held := map[ebpf.MapID]bool{}
	for _, m := range s.maps {
		if _, id, err := mapFacts(m); err == nil {
			held[id] = true
		}
	}
	var missing []ebpf.MapID
	for _, id := range ids {
		if !held[id] {
			missing = append(missing, id)
		}
	}
	return s.openMaps(missing)
}
