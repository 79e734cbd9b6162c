package dataplane

import (
	"bytes"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// TestIpsetImageJournal lays out snapshots as SaveIpsetState does, appends
// journal records until the room is used up, and reads the image back
// after each step as the next command would.
func TestIpsetImageJournal(t *testing.T) {
	tests := []struct {
		name     string
		snapshot []byte
		record   []byte
	}{
		{"empty snapshot", nil, []byte{1, 2, 3}},
		{"unaligned snapshot", []byte("xfw-ipset-2\nabc"), bytes.Repeat([]byte{7}, 13)},
		{"aligned snapshot", bytes.Repeat([]byte{9}, 64), bytes.Repeat([]byte{5}, 4096)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blob, size := ipsetBlob(tt.snapshot)
			mem := make([]byte, (size+statePage-1)/statePage*statePage)
			copy(mem, blob)
			// Stale bytes after the blob (a reused page) must not show.
			for i := len(blob); i < len(mem); i++ {
				mem[i] = 0xee
			}
			im, err := parseIpsetImage(mem)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(im.Snapshot, tt.snapshot) || len(im.Journal) != 0 {
				t.Fatalf("fresh image: snapshot %q, journal %d bytes", im.Snapshot, len(im.Journal))
			}
			var want []byte
			for im.AppendJournal(tt.record) {
				want = append(want, tt.record...)
				again, err := parseIpsetImage(mem)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again.Snapshot, tt.snapshot) || !bytes.Equal(again.Journal, want) {
					t.Fatalf("after %d journal bytes: read back %d bytes of snapshot, %d of journal", len(want), len(again.Snapshot), len(again.Journal))
				}
			}
			if len(want) < journalRoom-len(tt.record) {
				t.Errorf("the journal took %d bytes, its room is %d", len(want), journalRoom)
			}
			if again, _ := parseIpsetImage(mem); !bytes.Equal(again.Journal, want) {
				t.Errorf("a refused record changed the journal")
			}
		})
	}
}

// TestIpsetImageRejectsBadLengths refuses headers that point beyond the map.
func TestIpsetImageRejectsBadLengths(t *testing.T) {
	mem := make([]byte, statePage)
	mem[0] = 0xff
	mem[1] = 0xff
	if _, err := parseIpsetImage(mem); err == nil {
		t.Error("a snapshot length beyond the map was accepted")
	}
	mem = make([]byte, statePage)
	mem[8] = 0xff
	mem[9] = 0xff
	if _, err := parseIpsetImage(mem); err == nil {
		t.Error("a journal length beyond the map was accepted")
	}
}

// TestIpsetImageCloseUnmaps reads a large image piece by piece, as a
// command decoding its sets does (chunks and a piece across chunks), and
// checks that Close releases every mapping the reading made: a
// long-running process loads the sets again and again.
func TestIpsetImageCloseUnmaps(t *testing.T) {
	snapshot := bytes.Repeat([]byte("xfw-ipset-snapshot "), 3*imageChunk/16)
	blob, size := ipsetBlob(snapshot)
	spec, err := innerMapSpec(ipsetsOuter)
	if err != nil {
		t.Fatal(err)
	}
	spec.MaxEntries = uint32((size + statePage - 1) / statePage)
	if spec.MaxEntries <= wholeImagePages {
		t.Fatalf("test premise: %d pages are mapped whole", spec.MaxEntries)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatalf("create the ipsets' map: %v", err)
	}
	if err := putArray(m, (len(blob)+statePage-1)/statePage, func(i int) (p [statePage]byte) {
		copy(p[:], blob[i*statePage:])
		return p
	}); err != nil {
		t.Fatal(err)
	}
	before := mappingCount(t)
	im, err := pagedIpsetImage(m, int(spec.MaxEntries)*statePage)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	pages := im.SnapshotPages()
	// The snapshot starts after its length word: the last piece crosses
	// from the second chunk into the third.
	across := 2*imageChunk - ipsetsLenBytes - 8
	for _, piece := range []struct{ off, n int }{{0, 16}, {imageChunk + 5, 100}, {across, 16}} {
		b, err := pages.Slice(piece.off, piece.n)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, snapshot[piece.off:piece.off+piece.n]) {
			t.Errorf("bytes %d+%d read back wrong", piece.off, piece.n)
		}
	}
	if got := mappingCount(t); got <= before {
		t.Fatalf("test premise: reading the image mapped nothing (%d mappings, %d before)", got, before)
	}
	if err := im.Close(); err != nil {
		t.Fatal(err)
	}
	if got := mappingCount(t); got != before {
		t.Errorf("after Close the process has %d mappings, %d before loading the image", got, before)
	}
}

// mappingCount returns how many mappings of BPF maps the process has (the
// kernel names their file anon_inode:bpf-map).
func mappingCount(t *testing.T) int {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(maps, []byte("bpf-map"))
}
