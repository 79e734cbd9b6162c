package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ipsetsOuter holds the namespace's encoded ipsets in element 0 (bpf/xfw.c
// xfw_o_ipsets): pages of an 8-byte little-endian length, then the bytes
// of the snapshot (ipset.Sets.MarshalBinary), padded to 8 bytes; then the
// journal of the member changes committed since (ipset.JournalRecord's
// records): its 8-byte length, the records, and free room for more.
const ipsetsOuter = "xfw_o_ipsets"

// ipsetsLenBytes is the size of each length word.
const ipsetsLenBytes = 8

// journalRoom is the journal's room after a new snapshot: the records of
// a few thousand single adds or deletes. A change that does not fit is
// committed as a new snapshot, which empties the journal; so the journal
// a command replays stays small next to the snapshot it decodes.
const journalRoom = 64 << 10

// IpsetImage is the namespace's ipsets as stored: the snapshot and the
// journal, read in place in the mapped map (never copied).
type IpsetImage struct {
	// Snapshot is the encoded sets; it never changes once saved.
	Snapshot []byte
	// Journal is the records appended since the snapshot was saved.
	Journal []byte

	mem       []byte // the map's memory
	journalAt int    // offset of the journal's length word in mem
}

// LoadIpsetImage returns the namespace's ipsets, or nil when there are none
// (xfw not loaded, or no sets saved yet). The map stays mapped for the
// rest of the process: the snapshot's bytes back the decoded sets.
func LoadIpsetImage() (*IpsetImage, error) {
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
	if m.ValueSize() != statePage {
		return nil, fmt.Errorf("the ipsets' map has %d-byte values, not %d", m.ValueSize(), statePage)
	}
	mem, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries())*statePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map the ipsets' map: %w", err)
	}
	im, err := parseIpsetImage(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	return im, nil
}

// parseIpsetImage finds the snapshot and the journal in mem.
func parseIpsetImage(mem []byte) (*IpsetImage, error) {
	if len(mem) < 2*ipsetsLenBytes {
		return nil, fmt.Errorf("the ipsets' map holds %d bytes", len(mem))
	}
	n := binary.LittleEndian.Uint64(mem)
	if n > uint64(len(mem)-2*ipsetsLenBytes) {
		return nil, fmt.Errorf("the ipsets' map holds %d bytes, its header says %d", len(mem), n)
	}
	im := &IpsetImage{mem: mem, Snapshot: mem[ipsetsLenBytes : ipsetsLenBytes+n : ipsetsLenBytes+n]}
	im.journalAt = ipsetsLenBytes + int(n+7)&^7
	if im.journalAt+ipsetsLenBytes > len(mem) {
		return nil, fmt.Errorf("the ipsets' map has no room for its journal's length")
	}
	j := atomic.LoadUint64(im.journalWord())
	if j > uint64(len(mem)-im.journalAt-ipsetsLenBytes) {
		return nil, fmt.Errorf("the ipsets' journal says %d bytes, the map holds %d after it", j, len(mem)-im.journalAt-ipsetsLenBytes)
	}
	start := im.journalAt + ipsetsLenBytes
	im.Journal = mem[start : start+int(j) : start+int(j)]
	return im, nil
}

// journalWord is the journal's length word (8-byte aligned: the map's
// memory is page-aligned and journalAt a multiple of 8).
func (im *IpsetImage) journalWord() *uint64 {
	return (*uint64)(unsafe.Pointer(&im.mem[im.journalAt]))
}

// AppendJournal adds rec to the journal, in one step for the next reader
// (the record is written into the free room first, then the journal's
// length grows by one aligned 8-byte store). It reports false, changing
// nothing, when the journal has no room left: the caller saves a new
// snapshot instead.
func (im *IpsetImage) AppendJournal(rec []byte) bool {
	start := im.journalAt + ipsetsLenBytes + len(im.Journal)
	if len(rec) > len(im.mem)-start {
		return false
	}
	copy(im.mem[start:], rec)
	end := start + len(rec)
	atomic.StoreUint64(im.journalWord(), uint64(len(im.Journal)+len(rec)))
	im.Journal = im.mem[im.journalAt+ipsetsLenBytes : end : end]
	return true
}

// ipsetBlob returns the ipsets map's content for the snapshot data (an
// empty journal after it) and the size the map needs for the journal's
// room.
func ipsetBlob(data []byte) (blob []byte, size int) {
	journalAt := ipsetsLenBytes + (len(data)+7)&^7
	blob = make([]byte, journalAt+ipsetsLenBytes) // the journal's length: 0
	binary.LittleEndian.PutUint64(blob, uint64(len(data)))
	copy(blob[ipsetsLenBytes:], data)
	return blob, journalAt + ipsetsLenBytes + journalRoom
}

// SaveIpsetState makes data the namespace's encoded ipsets (a new
// snapshot with an empty journal), replacing the previous ones in one step
// (an ARRAY_OF_MAPS element). When xfw is not loaded in the namespace yet
// it is loaded and attached first, with no ruleset (every packet passes):
// the sets live as long as xfw's programs, and `xfw stop` removes them
// with the rulesets.
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
	blob, size := ipsetBlob(data)
	pages := (size + statePage - 1) / statePage
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
	if err := putArray(m, (len(blob)+statePage-1)/statePage, func(i int) [statePage]byte {
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
