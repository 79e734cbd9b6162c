package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
)

// ipsetsOuter holds the namespace's encoded ipsets in element 0 (bpf/xfw.c
// xfw_o_ipsets): pages of an 8-byte little-endian length, then the bytes.
const ipsetsOuter = "xfw_o_ipsets"

// ipsetsLenBytes is the length header before the encoded sets.
const ipsetsLenBytes = 8

// IpsetState returns the namespace's encoded ipsets, or nil when there are
// none (xfw not loaded, or no sets saved yet).
func IpsetState() ([]byte, error) {
	cur, err := Current()
	if err != nil || cur == nil {
		return nil, err
	}
	defer cur.Close()
	outer := cur.maps[ipsetsOuter]
	if outer == nil {
		return nil, fmt.Errorf("BPF object lacks map %s", ipsetsOuter)
	}
	var id uint32
	if err := outer.Lookup(uint32(0), &id); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("find the ipsets' map: %w", err)
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return nil, fmt.Errorf("open the ipsets' map: %w", err)
	}
	defer m.Close()
	defer unmapOutsideSession()
	mem, _, _, err := mappedArray[[statePage]byte](m, 0)
	if err != nil {
		return nil, err
	}
	raw := slices.Clone(mem) // the mapping ends with the session
	if len(raw) < ipsetsLenBytes {
		return nil, nil
	}
	n := binary.LittleEndian.Uint64(raw)
	if n > uint64(len(raw)-ipsetsLenBytes) {
		return nil, fmt.Errorf("the ipsets' map holds %d bytes, its header says %d", len(raw)-ipsetsLenBytes, n)
	}
	return raw[ipsetsLenBytes : ipsetsLenBytes+n], nil
}

// SaveIpsetState makes data the namespace's encoded ipsets, replacing the
// previous ones in one step (an ARRAY_OF_MAPS element). When xfw is not
// loaded in the namespace yet it is loaded and attached first, with no
// ruleset (every packet passes): the sets live as long as xfw's programs,
// and `xfw stop` removes them with the rulesets.
func SaveIpsetState(data []byte, opts AttachOptions) error {
	defer unmapOutsideSession()
	cur, ifaces, err := loadedState()
	if err != nil {
		return err
	}
	defer cur.Close()
	if err := attachMissing(cur, ifaces, opts); err != nil {
		return err
	}
	blob := make([]byte, ipsetsLenBytes+len(data))
	binary.LittleEndian.PutUint64(blob, uint64(len(data)))
	copy(blob[ipsetsLenBytes:], data)
	pages := (len(blob) + statePage - 1) / statePage
	is, err := innerMapSpec(ipsetsOuter)
	if err != nil {
		return err
	}
	is.Name = "xfw_ipsets"
	is.MaxEntries = uint32(pages)
	m, err := ebpf.NewMap(is)
	if err != nil {
		return fmt.Errorf("create the ipsets' map (%d pages): %w", pages, err)
	}
	defer m.Close()
	if err := putArray(m, pages, func(i int) [statePage]byte {
		var p [statePage]byte
		copy(p[:], blob[i*statePage:])
		return p
	}); err != nil {
		return fmt.Errorf("fill the ipsets' map: %w", err)
	}
	if err := cur.maps[ipsetsOuter].Put(uint32(0), m); err != nil {
		return fmt.Errorf("install the ipsets' map: %w", err)
	}
	return nil
}
