// Package dataplane loads xfw's eBPF programs into the current network
// namespace, fills their maps from a compiled generation, attaches them to
// every interface (XDP ingress, TCX egress) and swaps generations
// atomically. It is the only package that touches the kernel's BPF API.
//
// State lives in the kernel, anchored on the interfaces: the attached
// programs hold their maps, and among them the saved ruleset text and the
// counter offsets. Nothing is pinned, so `ip netns exec` (which remounts
// /sys) works, the filter keeps running after the command exits, and
// deleting the namespace frees everything.
package dataplane

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xfw-dev/xfw/internal/compiler"
	"github.com/xfw-dev/xfw/internal/ir"
)

//go:embed bpf/xfw.o
var objectBytes []byte

// Program names as the kernel keeps them (15 characters at most).
const (
	xdpProgName = "xfw_xdp"
	tcProgName  = "xfw_tc_egress"
)

// familyIndex maps a family to its index in the data plane (0 IPv4, 1 IPv6).
func familyIndex(f ir.Family) int {
	if f == ir.IPv6 {
		return 1
	}
	return 0
}

func famSuffix(f ir.Family) string {
	if f == ir.IPv6 {
		return "6"
	}
	return "4"
}

// perFamilyMaps are the map names (without the family digit) that belong to
// one family's generation.
var perFamilyMaps = []string{"xfw_small", "xfw_bounds", "xfw_hcls", "xfw_clsch", "xfw_chunks",
	"xfw_entries", "xfw_counters", "xfw_logcfg", "xfw_state", "xfw_cbase"}

// sharedKeptMaps survive every generation (the log reader keeps reading the
// same ring; statistics accumulate).
var sharedKeptMaps = []string{"xfw_logring", "xfw_stats"}

// CounterSource says where a new generation's counter starts from.
type CounterSource struct {
	// From is the old counter index to carry over, or -1.
	From int
	// Initial is the starting value when From is -1.
	Initial ir.Counters
}

// Update is one family's new ruleset, ready to load.
type Update struct {
	Gen *compiler.Generation
	// Text is the ruleset as iptables-save prints it without counters: what
	// `xfw iptables-save` reads back.
	Text []byte
	// Counters has one source per counter index of Gen (len NumCounters).
	Counters []CounterSource
}

// mapSizes returns the number of entries each per-family map needs.
func mapSizes(u *Update) map[string]int {
	g := u.Gen
	pages := (len(u.Text) + statePage - 1) / statePage
	return map[string]int{
		"xfw_small":    len(g.Small),
		"xfw_bounds":   len(g.Bounds),
		"xfw_hcls":     len(g.Hash),
		"xfw_clsch":    len(g.ClassChunks),
		"xfw_chunks":   len(g.Chunks),
		"xfw_entries":  len(g.Entries),
		"xfw_counters": g.NumCounters(),
		"xfw_logcfg":   len(g.LogConfigs),
		"xfw_state":    pages,
		"xfw_cbase":    g.NumCounters(),
	}
}

// Apply compiles nothing: it loads u's generation for its family beside the
// running one, fills its maps, attaches the new programs to every interface
// in place of the old ones (one atomic replacement per hook) and carries the
// counters over. The other family's ruleset is kept as it is.
func Apply(fam ir.Family, u *Update, opts AttachOptions) error {
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(objectBytes))
	if err != nil {
		return fmt.Errorf("load BPF object: %w", err)
	}
	cur, err := Current()
	if err != nil {
		return err
	}
	defer cur.Close()

	ifaces, err := listInterfaces()
	if err != nil {
		return err
	}

	var cfg bpfCfg
	var addrs bpfAddrCfg
	fi := familyIndex(fam)
	other := ir.IPv4
	if fam == ir.IPv4 {
		other = ir.IPv6
	}
	replacements := map[string]*ebpf.Map{}
	if cur != nil {
		old, err := cur.config(spec)
		if err != nil {
			return err
		}
		cfg.Fam[1-fi] = old.Fam[1-fi]
		oldAddrs, err := cur.addrConfig(spec)
		if err != nil {
			return err
		}
		addrs.Base[1-fi], addrs.Count[1-fi] = oldAddrs.Base[1-fi], oldAddrs.Count[1-fi]
		keep := func(name string) {
			m := cur.maps[name]
			ms := spec.Maps[name]
			if m == nil || ms == nil {
				return
			}
			// A replacement must match its spec: take the running
			// map's size.
			ms.MaxEntries = m.MaxEntries()
			replacements[name] = m
		}
		for _, name := range perFamilyMaps {
			keep(name + famSuffix(other))
		}
		for _, name := range sharedKeptMaps {
			keep(name)
		}
	}
	cfg.Fam[fi] = familyCfg(u.Gen)
	for i := range cfg.Fam {
		// A bpf_loop count the verifier knows to be 0 makes it drop the
		// callback and then fail (see xfw_fam_on in bpf/xfw.c).
		if cfg.Fam[i].MaxIters == 0 {
			cfg.Fam[i].MaxIters = 1
		}
	}

	// Size this family's maps; the other family's keep their size when
	// replaced, and are minimal (1 entry) when it has no ruleset yet.
	for name, n := range mapSizes(u) {
		ms, ok := spec.Maps[name+famSuffix(fam)]
		if !ok {
			return fmt.Errorf("BPF object lacks map %s%s", name, famSuffix(fam))
		}
		if n < 1 {
			n = 1
		}
		ms.MaxEntries = uint32(n)
	}
	if err := spec.Variables["cfg"].Set(cfg); err != nil {
		return fmt.Errorf("set load-time configuration: %w", err)
	}
	addrs.Base[fi], addrs.Count[fi] = u.Gen.AddrBase, u.Gen.AddrCount
	if err := spec.Variables["xfw_addrs"].Set(addrs); err != nil {
		return fmt.Errorf("set address bounds layout: %w", err)
	}
	famOn := [2]uint32{cfg.Fam[0].Enabled, cfg.Fam[1].Enabled}
	if err := spec.Variables["xfw_fam_on"].Set(famOn); err != nil {
		return fmt.Errorf("set enabled families: %w", err)
	}

	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		MapReplacements: replacements,
		Programs:        ebpf.ProgramOptions{LogSizeStart: 1 << 20},
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("kernel verifier refused xfw's program: %+v", ve)
		}
		return fmt.Errorf("load xfw into the kernel: %w", err)
	}
	defer coll.Close()

	if err := fillFamily(coll, fam, u); err != nil {
		return err
	}
	if err := fillIfInfo(coll.Maps["xfw_ifinfo"], ifaces); err != nil {
		return err
	}
	if err := fillLocal(coll.Maps["xfw_local4"], coll.Maps["xfw_local6"]); err != nil {
		return err
	}

	if err := attachAll(coll.Programs[xdpProgName], coll.Programs[tcProgName], ifaces, cur, opts); err != nil {
		return err
	}

	// Carry counters: the old generation no longer sees packets once every
	// hook points at the new one; give in-flight runs a grace period.
	if cur != nil && cur.hasFamily(fam) {
		time.Sleep(counterGrace)
		if err := carryCounters(cur, coll, fam, u.Counters); err != nil {
			return err
		}
	}
	return nil
}

// counterGrace is how long programs of the replaced generation may still be
// running on other CPUs after the swap (an RCU grace period is far shorter).
const counterGrace = 20 * time.Millisecond

func fillFamily(coll *ebpf.Collection, fam ir.Family, u *Update) error {
	g := u.Gen
	sfx := famSuffix(fam)
	m := func(name string) *ebpf.Map { return coll.Maps[name+sfx] }

	if err := putArray(m("xfw_small"), len(g.Small), func(i int) uint32 { return g.Small[i] }); err != nil {
		return fmt.Errorf("fill small-field classes: %w", err)
	}
	if err := putArray(m("xfw_bounds"), len(g.Bounds), func(i int) bpfBound {
		b := g.Bounds[i]
		return bpfBound{Hi: b.Value.Hi, Lo: b.Value.Lo, Cls: b.Class}
	}); err != nil {
		return fmt.Errorf("fill address bounds: %w", err)
	}
	for k, v := range g.Hash {
		if err := m("xfw_hcls").Put(bpfHKey{Field: k.Field, Value: k.Value}, v); err != nil {
			return fmt.Errorf("fill hashed classes: %w", err)
		}
	}
	if err := putArray(m("xfw_clsch"), len(g.ClassChunks), func(i int) uint32 { return g.ClassChunks[i] }); err != nil {
		return fmt.Errorf("fill class chunks: %w", err)
	}
	if err := putArray(m("xfw_chunks"), len(g.Chunks), func(i int) bpfChunk {
		return bpfChunk{Summary: g.Chunks[i].Summary, Words: g.Chunks[i].Words}
	}); err != nil {
		return fmt.Errorf("fill chunks: %w", err)
	}
	if err := putArray(m("xfw_entries"), len(g.Entries), func(i int) bpfEntry {
		e := g.Entries[i]
		return bpfEntry{Rule: e.Rule, Action: uint8(e.Action), Flags: e.Flags, Aux: e.Aux, Next: e.Next}
	}); err != nil {
		return fmt.Errorf("fill entries: %w", err)
	}
	if err := putArray(m("xfw_logcfg"), len(g.LogConfigs), func(i int) bpfLogCfg {
		lc := g.LogConfigs[i]
		var v bpfLogCfg
		copy(v.Prefix[:compiler.LogPrefixLen-1], lc.Prefix)
		v.Level, v.Flags = lc.Level, lc.Flags
		return v
	}); err != nil {
		return fmt.Errorf("fill LOG options: %w", err)
	}
	pages := (len(u.Text) + statePage - 1) / statePage
	if err := putArray(m("xfw_state"), pages, func(i int) [statePage]byte {
		var p [statePage]byte
		copy(p[:], u.Text[i*statePage:])
		return p
	}); err != nil {
		return fmt.Errorf("save ruleset text: %w", err)
	}
	// Counter bases of counters that start fresh (carried ones are written
	// after the swap).
	return putArray(m("xfw_cbase"), len(u.Counters), func(i int) bpfCounter {
		c := u.Counters[i].Initial
		if u.Counters[i].From >= 0 {
			c = ir.Counters{}
		}
		return bpfCounter{Packets: c.Packets, Bytes: c.Bytes}
	})
}

// batchSize is how many array elements one BPF_MAP_UPDATE_BATCH carries.
const batchSize = 8192

// putArray writes n elements of an array map, val(i) being element i, in
// batches of one BPF_MAP_UPDATE_BATCH call each (a 100k-rule ruleset has
// millions of class-chunk elements: one syscall each would take seconds).
func putArray[T any](m *ebpf.Map, n int, val func(i int) T) error {
	for start := 0; start < n; start += batchSize {
		end := start + batchSize
		if end > n {
			end = n
		}
		keys := make([]uint32, end-start)
		vals := make([]T, end-start)
		for i := range keys {
			keys[i] = uint32(start + i)
			vals[i] = val(start + i)
		}
		if _, err := m.BatchUpdate(keys, vals, nil); err != nil {
			return fmt.Errorf("map %s[%d:%d]: %w", m.String(), start, end, err)
		}
	}
	return nil
}

// carryCounters sets the new generation's counter bases of carried rules to
// the old base plus the old live counters.
func carryCounters(cur *state, coll *ebpf.Collection, fam ir.Family, src []CounterSource) error {
	old, err := cur.readCounters(fam)
	if err != nil {
		return err
	}
	base := coll.Maps["xfw_cbase"+famSuffix(fam)]
	for i, s := range src {
		if s.From < 0 || s.From >= len(old) {
			continue
		}
		c := old[s.From]
		if err := base.Put(uint32(i), bpfCounter{Packets: c.Packets, Bytes: c.Bytes}); err != nil {
			return fmt.Errorf("carry counter %d: %w", i, err)
		}
	}
	return nil
}

// Stop detaches xfw from every interface of the namespace. The programs and
// maps are freed by the kernel once detached.
func Stop() error {
	ifaces, err := listInterfaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, ifc := range ifaces {
		if err := detachInterface(ifc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Counters returns the counters of fam's running ruleset, indexed as the
// generation's counter indexes (0–2 policies, then rules), or nil when no
// ruleset of the family is loaded.
func Counters(fam ir.Family) ([]ir.Counters, error) {
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil
	}
	return cur.readCounters(fam)
}

// SavedText returns the ruleset text saved with fam's running ruleset, or
// nil when none is loaded.
func SavedText(fam ir.Family) ([]byte, error) {
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, err
	}
	defer cur.Close()
	if !cur.hasFamily(fam) {
		return nil, nil
	}
	return cur.text(fam)
}

var _ = link.Tail // link is used by attach.go
