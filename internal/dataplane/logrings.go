package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// ring is an index of xfw_logrings (enum xfw_ring): the LOG events' ring
// buffer and the NFLOG events'.
type ring uint32

const (
	ringLog ring = iota
	ringNFLog
	numRings
)

// ringNames name the rings in errors.
var ringNames = [numRings]string{"LOG ring", "NFLOG ring"}

// logRingsMap is the array of event rings (one map of the programs for
// all: the kernel allows a program 64 maps).
const logRingsMap = "xfw_logrings"

// fillRings puts a ring buffer in each empty slot of xfw_logrings, shaped
// as the map's inner template (a loaded data plane's rings stay).
func fillRings(maps map[string]*ebpf.Map) error {
	outer := maps[logRingsMap]
	if outer == nil {
		return errors.New("BPF object lacks its event rings (" + logRingsMap + ")")
	}
	for i := range numRings {
		var id uint32
		if err := outer.Lookup(uint32(i), &id); err == nil && id != 0 {
			continue
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "xfw_ring", Type: ebpf.RingBuf, MaxEntries: ringBytes})
		if err != nil {
			return fmt.Errorf("create the %s: %w", ringNames[i], err)
		}
		err = outer.Put(uint32(i), m)
		m.Close() // xfw_logrings holds it
		if err != nil {
			return fmt.Errorf("install the %s: %w", ringNames[i], err)
		}
	}
	return nil
}

// openRing opens ring i of the running data plane's maps (caller closes).
func openRing(maps map[string]*ebpf.Map, i ring) (*ebpf.Map, error) {
	outer := maps[logRingsMap]
	if outer == nil {
		return nil, fmt.Errorf("running xfw program lacks its %s", ringNames[i])
	}
	var id uint32
	if err := outer.Lookup(uint32(i), &id); err != nil {
		return nil, fmt.Errorf("find the %s: %w", ringNames[i], err)
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return nil, fmt.Errorf("open the %s: %w", ringNames[i], err)
	}
	return m, nil
}

// ringBytes is the size of each event ring (struct xfw_ring_m).
const ringBytes = 1 << 20
