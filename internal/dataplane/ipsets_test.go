package dataplane

import (
	"bytes"
	"testing"
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
