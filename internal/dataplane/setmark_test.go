package dataplane

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
)

// dataplaneMark does what bpf/settarget.h's xfw_set_write does to mark
// prefix length plen of written table m before it adds an element: it
// ORs the length's bit into the data plane's word (XFW_SETW_MDP), the
// control plane's (port plen/64) in a table built without those words.
// From user space a read and a write; the test calls it where the
// control plane is paused, so nothing else writes meanwhile and it is
// the atomic OR it stands for.
func dataplaneMark(t *testing.T, m *ebpf.Map, plen int) {
	t.Helper()
	k := bpfSetKey{Port: setWriteMarkDP + uint16(plen/64), Plen: SetMetaPlen}
	var v bpfSetVal
	err := m.Lookup(k, &v)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		k.Port = uint16(plen / 64)
		err = m.Lookup(k, &v)
	}
	if err != nil {
		t.Fatalf("data plane: read the mark of /%d: %v", plen, err)
	}
	v.Expires |= 1 << (plen & 63)
	if err := m.Put(k, v); err != nil {
		t.Fatalf("data plane: mark /%d: %v", plen, err)
	}
}

// writtenPlens returns the prefix lengths written table m's lookups see
// present (bpf/settarget.h xfw_setw_words: the control plane's words
// OR-ed with the data plane's).
func writtenPlens(t *testing.T, m *ebpf.Map) [129]bool {
	t.Helper()
	var out [129]bool
	for w := 0; w < SetMetaWords; w++ {
		var word uint64
		for _, port := range []uint16{uint16(w), setWriteMarkDP + uint16(w)} {
			var v bpfSetVal
			err := m.Lookup(bpfSetKey{Port: port, Plen: SetMetaPlen}, &v)
			if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				t.Fatal(err)
			}
			word |= v.Expires
		}
		for i := 0; i < 64 && 64*w+i <= 128; i++ {
			out[64*w+i] = word&(1<<i) != 0
		}
	}
	return out
}

// TestMarkPlensLosesNoDataPlaneMark marks prefix lengths of a written
// set's table from the control plane (MarkPlens) while the data plane's
// SET target marks another length of the same word between MarkPlens'
// read and write of it, and checks that the lookups see both lengths.
// A table built without the data plane's words (the layout before them,
// which the data plane still writes into) loses the data plane's length:
// the race the separate words close. Needs root (BPF maps).
func TestMarkPlensLosesNoDataPlaneMark(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_BPF): run it as root, as make test does")
	}
	tests := []struct {
		name     string
		dpWords  bool // the table has the data plane's words
		maxPlen  uint8
		cp, dp   int // the lengths the control plane and the data plane mark
		wantLost bool
	}{
		{name: "IPv4 hash:net", dpWords: true, maxPlen: 32, cp: 24, dp: 32},
		{name: "IPv6 hash:net, word 1", dpWords: true, maxPlen: 128, cp: 64, dp: 127},
		{name: "IPv6, the same length from both", dpWords: true, maxPlen: 128, cp: 128, dp: 128},
		{name: "IPv6, different words", dpWords: true, maxPlen: 128, cp: 48, dp: 128},
		{name: "one shared word (old layout)", dpWords: false, maxPlen: 32, cp: 24, dp: 32, wantLost: true},
	}
	defer func() { markPlensBetween = nil }()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: uint32(unsafe.Sizeof(bpfSetKey{})),
				ValueSize: uint32(unsafe.Sizeof(bpfSetVal{})), MaxEntries: 1024})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var none [129]bool
			entries := append(SetMetaEntries(&none), SetWriteMetaEntry(0, false, true, false, tc.maxPlen))
			if tc.dpWords {
				entries = append(entries, SetWriteMarkEntries()...)
			}
			entries = append(entries, SetWriteCountEntries(tc.maxPlen, &[129]int64{})...)
			for _, e := range entries {
				if err := m.Put(bpfSetKey(e.Key), bpfSetVal{Expires: e.Expires, Answer: e.Answer, Aux: e.Aux}); err != nil {
					t.Fatal(err)
				}
			}
			struck := 0
			markPlensBetween = func(h *LiveSetHash) {
				struck++
				dataplaneMark(t, h.m, tc.dp)
			}
			h := &LiveSetHash{Info: SetLookupInfo{Set: "n"}, m: m}
			var plens [129]bool
			plens[tc.cp] = true
			if err := h.MarkPlens(&plens); err != nil {
				t.Fatal(err)
			}
			markPlensBetween = nil
			if struck != 1 {
				t.Fatalf("the data plane struck %d times between MarkPlens' read and write, want 1", struck)
			}
			got := writtenPlens(t, m)
			if !got[tc.cp] {
				t.Errorf("/%d (the control plane's) not present", tc.cp)
			}
			if lost := !got[tc.dp]; lost != tc.wantLost {
				t.Errorf("/%d (the data plane's) lost: %v, want %v", tc.dp, lost, tc.wantLost)
			}
		})
	}
}
