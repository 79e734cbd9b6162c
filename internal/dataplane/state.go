package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/ir"
)

// state is the running generation of the namespace, found from the XDP
// program attached to its interfaces.
type state struct {
	xdp  *ebpf.Program
	maps map[string]*ebpf.Map
	cfg  *bpfCfg
}

// Close releases the file descriptors (not the kernel objects, which the
// attachments keep alive).
func (s *state) Close() {
	if s == nil {
		return
	}
	s.xdp.Close()
	for _, m := range s.maps {
		m.Close()
	}
}

// Current returns the running state, or nil when xfw is not loaded in this
// namespace.
func Current() (*state, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	for _, l := range links {
		x := l.Attrs().Xdp
		if x == nil || !x.Attached || x.ProgId == 0 {
			continue
		}
		prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId))
		if err != nil {
			continue // detached meanwhile
		}
		info, err := prog.Info()
		if err != nil || info.Name != xdpProgName {
			prog.Close()
			continue
		}
		s := &state{xdp: prog, maps: map[string]*ebpf.Map{}}
		ids, _ := info.MapIDs()
		for _, id := range ids {
			m, err := ebpf.NewMapFromID(id)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("open map %d of the running program: %w", id, err)
			}
			mi, err := m.Info()
			if err != nil {
				m.Close()
				s.Close()
				return nil, fmt.Errorf("map %d info: %w", id, err)
			}
			s.maps[mi.Name] = m
		}
		return s, nil
	}
	return nil, nil
}

// section returns the running program's map of a data section (".rodata",
// ".data").
func (s *state) section(suffix string) *ebpf.Map {
	for name, m := range s.maps {
		if strings.HasSuffix(name, suffix) {
			return m
		}
	}
	return nil
}

// readVar decodes variable name of the running program's section into out.
func (s *state) readVar(spec *ebpf.CollectionSpec, suffix, name string, out any) error {
	m := s.section(suffix)
	v := spec.Variables[name]
	if m == nil || v == nil {
		return fmt.Errorf("running xfw program has no %s variable %s", suffix, name)
	}
	buf := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), &buf); err != nil {
		return fmt.Errorf("read running %s: %w", name, err)
	}
	off := int(v.Offset)
	if off+binary.Size(out) > len(buf) {
		return fmt.Errorf("running xfw program has an unexpected layout of %s", name)
	}
	if err := binary.Read(bytes.NewReader(buf[off:]), binary.LittleEndian, out); err != nil {
		return fmt.Errorf("decode running %s: %w", name, err)
	}
	return nil
}

// addrConfig reads the running address bounds layout.
func (s *state) addrConfig(spec *ebpf.CollectionSpec) (*bpfAddrCfg, error) {
	var a bpfAddrCfg
	if err := s.readVar(spec, ".data", "xfw_addrs", &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// config reads the running program's load-time configuration.
func (s *state) config(spec *ebpf.CollectionSpec) (*bpfCfg, error) {
	if s.cfg != nil {
		return s.cfg, nil
	}
	var cfg bpfCfg
	if err := s.readVar(spec, ".rodata", "cfg", &cfg); err != nil {
		return nil, err
	}
	s.cfg = &cfg
	return &cfg, nil
}

func (s *state) hasFamily(fam ir.Family) bool {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(objectBytes))
	if err != nil {
		return false
	}
	cfg, err := s.config(spec)
	return err == nil && cfg.Fam[familyIndex(fam)].Enabled == 1
}

// readCounters returns base + live counters of every counter index.
func (s *state) readCounters(fam ir.Family) ([]ir.Counters, error) {
	live := s.maps["xfw_counters"+famSuffix(fam)]
	base := s.maps["xfw_cbase"+famSuffix(fam)]
	if live == nil || base == nil {
		return nil, errors.New("running xfw program lacks its counter maps")
	}
	n := int(live.MaxEntries())
	out := make([]ir.Counters, n)
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("count CPUs: %w", err)
	}
	keys := make([]uint32, batchSize)
	percpu := make([]bpfCounter, batchSize*ncpu)
	bases := make([]bpfCounter, batchSize)
	for _, pass := range []struct {
		m      *ebpf.Map
		vals   any
		perCPU int
	}{{live, percpu, ncpu}, {base, bases, 1}} {
		var cursor ebpf.MapBatchCursor
		for done := 0; done < n; {
			cnt, err := pass.m.BatchLookup(&cursor, keys, pass.vals, nil)
			for i := 0; i < cnt; i++ {
				k := int(keys[i])
				if k >= n {
					continue
				}
				for c := 0; c < pass.perCPU; c++ {
					var v bpfCounter
					if pass.perCPU > 1 {
						v = percpu[i*ncpu+c]
					} else {
						v = bases[i]
					}
					out[k].Packets += v.Packets
					out[k].Bytes += v.Bytes
				}
			}
			done += cnt
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("read counters: %w", err)
			}
			if cnt == 0 {
				break
			}
		}
	}
	return out, nil
}

// text reads the saved ruleset text of fam.
func (s *state) text(fam ir.Family) ([]byte, error) {
	m := s.maps["xfw_state"+famSuffix(fam)]
	if m == nil {
		return nil, errors.New("running xfw program lacks its saved ruleset")
	}
	var out []byte
	page := make([]byte, statePage)
	for i := uint32(0); i < m.MaxEntries(); i++ {
		if err := m.Lookup(i, &page); err != nil {
			return nil, fmt.Errorf("read saved ruleset page %d: %w", i, err)
		}
		out = append(out, page...)
	}
	return bytes.TrimRight(out, "\x00"), nil
}

// SetCounters overwrites counters of fam's running ruleset: for each counter
// index in values, the base becomes value − live so the sum reads value
// (used by -Z and -c).
func SetCounters(fam ir.Family, values map[int]ir.Counters) error {
	cur, err := Current()
	if err != nil {
		return err
	}
	if cur == nil {
		return errors.New("xfw is not loaded in this network namespace")
	}
	defer cur.Close()
	live := cur.maps["xfw_counters"+famSuffix(fam)]
	base := cur.maps["xfw_cbase"+famSuffix(fam)]
	var percpu []bpfCounter
	for i, v := range values {
		if err := live.Lookup(uint32(i), &percpu); err != nil {
			return fmt.Errorf("read counter %d: %w", i, err)
		}
		var l bpfCounter
		for _, c := range percpu {
			l.Packets += c.Packets
			l.Bytes += c.Bytes
		}
		b := bpfCounter{Packets: v.Packets - l.Packets, Bytes: v.Bytes - l.Bytes}
		if err := base.Put(uint32(i), b); err != nil {
			return fmt.Errorf("set counter %d: %w", i, err)
		}
	}
	return nil
}

// LogRing returns the running ring buffer of LOG events (caller closes).
func LogRing() (*ebpf.Map, error) {
	cur, err := Current()
	if err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, errors.New("xfw is not loaded in this network namespace")
	}
	m := cur.maps["xfw_logring"]
	if m == nil {
		cur.Close()
		return nil, errors.New("running xfw program lacks its log ring")
	}
	c, err := m.Clone()
	cur.Close()
	return c, err
}
