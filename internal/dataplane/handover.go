package dataplane

// What a build records for the build that takes its namespace over
// (takeover.go): beside its identity in xfw_build, the number of the
// handover format it keeps its state in, and fingerprints of its
// connection tables' layout and of its hashlimit tables' and recent
// lists'.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Entries of the xfw_build array (bpf/xfw_maps.h).
const (
	buildKeyID         = 0 // the build identity (buildID)
	buildKeyFormat     = 1 // handoverFormat
	buildKeyConnLayout = 2 // connLayoutFingerprint
	buildKeyRateLayout = 3 // rateLayoutFingerprint
	// buildKeyChange counts the sessions of processes that do not keep
	// their state (keptsession.go). Not part of the handover: a takeover
	// loads new maps, whose count starts at zero, and a state kept of the
	// old programs is given up once they no longer run.
	buildKeyChange = 4
)

// handoverFormat numbers the layout of what a takeover reads of another
// build's state: the xfw_build entries above (four); the families' bank indexes
// (xfw_bank, a __u32 each) and slot configurations (xfw_cfg, struct
// xfw_family_cfg); the generation outer maps of the saved state (its parts
// each after a little-endian length, the first the ruleset in ir's binary
// form, which carries its own version byte), the counters and their bases
// (struct xfw_counter, numbered by compiler.ForEachCounter); xfw_stats'
// trivial-chain counts; the ipsets' outer map (its image carries its own
// magic); xfw_inflight. A change to any of them must bump it: a build
// then refuses to take over from a build of another number (it would
// misread the state) and says so, instead of guessing.
const handoverFormat = 1

// Set only by tests, with -ldflags -X, to build a second binary that
// differs from the default build in what a takeover compares and in
// nothing else: buildIdentitySalt changes the build identity,
// handoverFormatOverride the handover format number recorded, and
// connLayoutSalt the connection tables' layout fingerprint. Releases leave
// them empty.
var (
	buildIdentitySalt      string
	handoverFormatOverride string
	connLayoutSalt         string
)

// recordedHandoverFormat is the format number this build records.
func recordedHandoverFormat() uint64 {
	if v, err := strconv.ParseUint(handoverFormatOverride, 10, 64); err == nil {
		return v
	}
	return handoverFormat
}

// connStateMaps are the maps that hold the tracked connections and their
// NAT mappings (and xfw_nat_on, which turns the mappings' lookups on), and
// the verdicts of first fragments whose later fragments may be in flight
// (xfw_frag_dg): a takeover hands them, as they are, to the new build's
// programs when both builds lay them out alike (connLayoutFingerprint).
var connStateMaps = []string{ctMainMap, ctNewMap, "xfw_ct_lo_handoff", "xfw_nat", "xfw_nat_bysrc", "xfw_nat_lo_pass", "xfw_nat_on", "xfw_frag_dg"}

// rateStateMaps are the namespace's hashlimit tables and recent lists
// with their entries: a takeover copies them into the new build's maps
// when both builds lay them out alike (rateLayoutFingerprint).
var rateStateMaps = []string{hlTableMap, hlEntryMap, recentListMap, recentEntMap}

// connLayoutFingerprint and rateLayoutFingerprint are layoutFingerprint of
// connStateMaps and rateStateMaps in this build's object.
var (
	connLayoutFingerprint = sync.OnceValues(func() (uint64, error) {
		return layoutFingerprint(connStateMaps, connLayoutSalt)
	})
	rateLayoutFingerprint = sync.OnceValues(func() (uint64, error) {
		return layoutFingerprint(rateStateMaps, "")
	})
)

// layoutFingerprint is a hash of the layout of maps names in this build's
// object: each map's type, key and value sizes, flags, and its key and
// value types as BTF declares them (every field's name, type and offset),
// so that two builds agree on it only when one's entries mean the same to
// the other. salt is mixed in (tests).
func layoutFingerprint(names []string, salt string) (uint64, error) {
	if err := parseSpec(); err != nil {
		return 0, err
	}
	h := fnv.New64a()
	names = slices.Clone(names)
	slices.Sort(names)
	for _, name := range names {
		ms := specVal.Maps[name]
		if ms == nil {
			return 0, fmt.Errorf("BPF object lacks map %s", name)
		}
		fmt.Fprintf(h, "%s %v %d %d %#x\n", name, ms.Type, ms.KeySize, ms.ValueSize, ms.Flags)
		for _, typ := range []btf.Type{ms.Key, ms.Value} {
			if typ == nil {
				continue
			}
			decl, err := (&btf.GoFormatter{}).TypeDeclaration("T", typ)
			if err != nil {
				return 0, fmt.Errorf("describe map %s: %w", name, err)
			}
			fmt.Fprintln(h, decl)
		}
	}
	fmt.Fprint(h, salt)
	return h.Sum64(), nil
}

// recordHandover writes this build's identity, handover format and
// connection layout into a freshly loaded object's xfw_build map.
func recordHandover(m *ebpf.Map) error {
	conn, err := connLayoutFingerprint()
	if err != nil {
		return err
	}
	rate, err := rateLayoutFingerprint()
	if err != nil {
		return err
	}
	for k, v := range map[uint32]uint64{buildKeyID: buildID(), buildKeyFormat: recordedHandoverFormat(), buildKeyConnLayout: conn, buildKeyRateLayout: rate} {
		if err := m.Put(k, v); err != nil {
			return fmt.Errorf("record build identity: %w", err)
		}
	}
	return nil
}

// ErrHandoverFormat reports a running build whose state this build cannot
// read (another handover format, or one from before takeovers existed).
var ErrHandoverFormat = errors.New("cannot take over")

// handoverFacts are what another build recorded in its xfw_build map.
type handoverFacts struct {
	build, format, connLayout, rateLayout uint64
}

// readHandover reads another build's xfw_build map and refuses a format
// this build does not read, naming both.
func readHandover(m *ebpf.Map) (handoverFacts, error) {
	var f handoverFacts
	if m == nil {
		return f, fmt.Errorf("%w: the running xfw records no build identity (a build from before takeovers); run `xfw stop`, then load the rulesets again", ErrHandoverFormat)
	}
	if err := m.Lookup(uint32(buildKeyID), &f.build); err != nil {
		return f, fmt.Errorf("read the running build identity: %w", err)
	}
	if m.MaxEntries() <= buildKeyRateLayout || m.ValueSize() != uint32(unsafe.Sizeof(f.format)) {
		return f, fmt.Errorf("%w: the running build %016x records no handover format (a build from before takeovers); run `xfw stop`, then load the rulesets again", ErrHandoverFormat, f.build)
	}
	if err := m.Lookup(uint32(buildKeyFormat), &f.format); err != nil {
		return f, fmt.Errorf("read the running build's handover format: %w", err)
	}
	if err := m.Lookup(uint32(buildKeyConnLayout), &f.connLayout); err != nil {
		return f, fmt.Errorf("read the running build's connection layout: %w", err)
	}
	if err := m.Lookup(uint32(buildKeyRateLayout), &f.rateLayout); err != nil {
		return f, fmt.Errorf("read the running build's rate state layout: %w", err)
	}
	if f.format != handoverFormat {
		return f, fmt.Errorf("%w: the running build %016x keeps its state in handover format %d, this build reads format %d only; its programs stay in charge. Run `xfw stop`, then load the rulesets again (the host is unfiltered meanwhile: docs/install.md, \"Upgrading\")", ErrHandoverFormat, f.build, f.format, handoverFormat)
	}
	return f, nil
}
