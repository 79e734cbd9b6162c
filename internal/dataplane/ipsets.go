package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ipsetsOuter holds the namespace's encoded ipsets in element 0 (bpf/xfw_maps.h
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
// journal, read in place in the mapped map (never copied). A large map is
// mapped piece by piece as the snapshot is read (SnapshotPages): the
// kernel maps every page of a mapping when it is made, and the sets of a
// million members are thousands of pages, of which a command reads a few.
type IpsetImage struct {
	// Snapshot is the encoded sets when the whole map is mapped (nil when
	// it is read piece by piece); it never changes once saved.
	Snapshot []byte
	// Journal is the records appended since the snapshot was saved.
	Journal []byte

	pages     *imagePages // the snapshot piece by piece, or nil
	mem       []byte      // the map's memory from memAt on: all of it, or the journal's pages
	memAt     int         // offset of mem in the map
	journalAt int         // offset of the journal's length word in the map
}

// SnapshotPages returns the encoded sets for ipset.Sets.UnmarshalPages.
func (im *IpsetImage) SnapshotPages() interface {
	Len() int
	Slice(off, n int) ([]byte, error)
} {
	if im.pages != nil {
		return im.pages
	}
	return bytePages(im.Snapshot)
}

// bytePages is a snapshot held in one slice.
type bytePages []byte

func (b bytePages) Len() int { return len(b) }

func (b bytePages) Slice(off, n int) ([]byte, error) {
	if off < 0 || n < 1 || off+n > len(b) {
		return nil, fmt.Errorf("bytes %d+%d of a snapshot of %d", off, n, len(b))
	}
	return b[off : off+n : off+n], nil
}

// wholeImagePages is the size up to which the ipsets' map is mapped
// whole, in one step.
const wholeImagePages = 64

// imageChunk is the unit in which a large snapshot is mapped.
const imageChunk = 64 << 10

// imagePages is a snapshot mapped piece by piece: chunks of imageChunk
// bytes as read, and a mapping of its own for a piece across chunks. The
// mappings stay until the image's Close (the decoded sets' bytes).
type imagePages struct {
	mu     sync.Mutex
	m      *ebpf.Map // open as long as the process may map more
	at, n  int       // the snapshot's offset in the map, its length
	size   int       // the map's mappable bytes
	chunks map[int][]byte
	last   int // the chunk Slice used last, and its memory
	lastM  []byte
	spans  [][]byte // the mappings of pieces across chunks
}

func (p *imagePages) Len() int { return p.n }

// Slice maps the chunk holding bytes off … off+n-1 of the snapshot, or
// those bytes' pages when they cross chunks.
func (p *imagePages) Slice(off, n int) ([]byte, error) {
	if off < 0 || n < 1 || off+n > p.n {
		return nil, fmt.Errorf("bytes %d+%d of a snapshot of %d", off, n, p.n)
	}
	a := p.at + off
	c := a / imageChunk
	p.mu.Lock()
	defer p.mu.Unlock()
	if (a+n-1)/imageChunk == c {
		mem := p.lastM
		if mem == nil || p.last != c {
			mem = p.chunks[c]
			if mem == nil {
				var err error
				if mem, err = p.mmap(c*imageChunk, min((c+1)*imageChunk, p.size)); err != nil {
					return nil, err
				}
				p.chunks[c] = mem
			}
			p.last, p.lastM = c, mem
		}
		b := mem[a-c*imageChunk:]
		return b[:n:n], nil
	}
	page := os.Getpagesize()
	lo := a / page * page
	mem, err := p.mmap(lo, min((a+n+page-1)/page*page, p.size))
	if err != nil {
		return nil, err
	}
	p.spans = append(p.spans, mem)
	b := mem[a-lo:]
	return b[:n:n], nil
}

// mmap maps bytes lo … hi-1 of the map (lo page-aligned).
func (p *imagePages) mmap(lo, hi int) ([]byte, error) {
	mem, err := unix.Mmap(p.m.FD(), int64(lo), hi-lo, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map bytes %d–%d of the ipsets' map: %w", lo, hi, err)
	}
	return mem, nil
}

// LoadIpsetImage returns the namespace's ipsets, or nil when there are none
// (xfw not loaded, or no sets saved yet). The map stays mapped until the
// image's Close (a command need not call it: the mappings end with the
// process): the snapshot's bytes back the decoded sets.
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
	if m.ValueSize() != statePage {
		m.Close()
		return nil, fmt.Errorf("the ipsets' map has %d-byte values, not %d", m.ValueSize(), statePage)
	}
	size := int(m.MaxEntries()) * statePage
	if m.MaxEntries() <= wholeImagePages {
		defer m.Close()
		mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
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
	im, err := pagedIpsetImage(m, size)
	if err != nil {
		m.Close()
		return nil, err
	}
	return im, nil
}

// pagedIpsetImage reads the snapshot's length, maps the journal's pages
// and leaves the snapshot to be mapped as read.
func pagedIpsetImage(m *ebpf.Map, size int) (*IpsetImage, error) {
	p := &imagePages{m: m, at: ipsetsLenBytes, size: size, chunks: map[int][]byte{}}
	first, err := p.mmap(0, min(imageChunk, size))
	if err != nil {
		return nil, err
	}
	p.chunks[0] = first
	n := binary.LittleEndian.Uint64(first)
	if n > uint64(size-2*ipsetsLenBytes) {
		return nil, fmt.Errorf("the ipsets' map holds %d bytes, its header says %d", size, n)
	}
	p.n = int(n)
	im := &IpsetImage{pages: p, journalAt: ipsetsLenBytes + int(n+7)&^7}
	if im.journalAt+ipsetsLenBytes > size {
		return nil, fmt.Errorf("the ipsets' map has no room for its journal's length")
	}
	page := os.Getpagesize()
	im.memAt = im.journalAt / page * page
	if im.mem, err = p.mmap(im.memAt, size); err != nil {
		return nil, err
	}
	if err := im.readJournal(); err != nil {
		return nil, err
	}
	return im, nil
}

// parseIpsetImage finds the snapshot and the journal in mem, the whole
// map.
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
	if err := im.readJournal(); err != nil {
		return nil, err
	}
	return im, nil
}

// Close releases the image's mappings, and the map a large image keeps
// open to map more of it. Neither the image nor the sets decoded from it
// may be used after. A process that reads the sets again and again (a
// long-running one) must close each image it loads.
func (im *IpsetImage) Close() error {
	var errs []error
	unmap := func(mem []byte) {
		if mem == nil {
			return
		}
		if err := unix.Munmap(mem); err != nil {
			errs = append(errs, fmt.Errorf("unmap the ipsets' map: %w", err))
		}
	}
	unmap(im.mem)
	if p := im.pages; p != nil {
		p.mu.Lock()
		for _, mem := range p.chunks {
			unmap(mem)
		}
		for _, mem := range p.spans {
			unmap(mem)
		}
		p.chunks, p.spans, p.lastM = nil, nil, nil
		p.m.Close()
		p.mu.Unlock()
	}
	im.mem, im.Snapshot, im.Journal, im.pages = nil, nil, nil, nil
	return errors.Join(errs...)
}

// readJournal finds the journal after its length word.
func (im *IpsetImage) readJournal() error {
	at := im.journalAt - im.memAt // the length word in mem
	j := atomic.LoadUint64(im.journalWord())
	if j > uint64(len(im.mem)-at-ipsetsLenBytes) {
		return fmt.Errorf("the ipsets' journal says %d bytes, the map holds %d after it", j, len(im.mem)-at-ipsetsLenBytes)
	}
	start := at + ipsetsLenBytes
	im.Journal = im.mem[start : start+int(j) : start+int(j)]
	return nil
}

// journalWord is the journal's length word (8-byte aligned: the map's
// memory is page-aligned, and journalAt and memAt multiples of 8).
func (im *IpsetImage) journalWord() *uint64 {
	return (*uint64)(unsafe.Pointer(&im.mem[im.journalAt-im.memAt]))
}

// AppendJournal adds rec to the journal, in one step for the next reader
// (the record is written into the free room first, then the journal's
// length grows by one aligned 8-byte store). It reports false, changing
// nothing, when the journal has no room left: the caller saves a new
// snapshot instead.
func (im *IpsetImage) AppendJournal(rec []byte) bool {
	at := im.journalAt - im.memAt + ipsetsLenBytes // the journal in mem
	start := at + len(im.Journal)
	if len(rec) > len(im.mem)-start {
		return false
	}
	copy(im.mem[start:], rec)
	end := start + len(rec)
	atomic.StoreUint64(im.journalWord(), uint64(len(im.Journal)+len(rec)))
	im.Journal = im.mem[at:end:end]
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
