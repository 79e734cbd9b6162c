package dataplane

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// buildMap makes an xfw_build-like array of entries __u64 values (the
// first len(vals) set).
func buildMap(t *testing.T, entries uint32, vals ...uint64) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: entries})
	if err != nil {
		t.Fatalf("create map: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	for k, v := range vals {
		if err := m.Put(uint32(k), v); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestReadHandover: what another build recorded is read back, and every
// build whose state this one would misread is refused, naming why.
func TestReadHandover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_BPF)")
	}
	tests := []struct {
		name    string
		m       func(t *testing.T) *ebpf.Map
		refused string // "" when accepted
	}{
		{"no identity map", func(*testing.T) *ebpf.Map { return nil }, "records no build identity"},
		{"identity only (a build before takeovers)", func(t *testing.T) *ebpf.Map { return buildMap(t, 1, 0xb1) }, "records no handover format"},
		{"another format", func(t *testing.T) *ebpf.Map { return buildMap(t, 4, 0xb1, 99, 7, 8) }, "handover format 99, this build reads format 1"},
		{"format 0", func(t *testing.T) *ebpf.Map { return buildMap(t, 4, 0xb1, 0, 7, 8) }, "handover format 0"},
		{"this format", func(t *testing.T) *ebpf.Map { return buildMap(t, 4, 0xb1, handoverFormat, 7, 8) }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := readHandover(tc.m(t))
			if tc.refused != "" {
				if !errors.Is(err, ErrHandoverFormat) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("got %v, want a refusal naming %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (handoverFacts{build: 0xb1, format: handoverFormat, connLayout: 7, rateLayout: 8}); f != want {
				t.Fatalf("read %+v, want %+v", f, want)
			}
		})
	}
}

// TestRecordHandover: a loaded object's xfw_build holds this build's
// identity, format and both layout fingerprints, which readHandover reads
// back.
func TestRecordHandover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_BPF)")
	}
	m := buildMap(t, buildKeyRateLayout+1)
	if err := recordHandover(m); err != nil {
		t.Fatal(err)
	}
	f, err := readHandover(m)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := connLayoutFingerprint()
	if err != nil {
		t.Fatal(err)
	}
	rate, err := rateLayoutFingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if want := (handoverFacts{build: buildID(), format: handoverFormat, connLayout: conn, rateLayout: rate}); f != want {
		t.Fatalf("recorded %+v, want %+v", f, want)
	}
}

// TestLayoutFingerprint: the fingerprint depends on the maps named, on the
// salt, and on nothing else (the same inputs give the same value).
func TestLayoutFingerprint(t *testing.T) {
	fp := func(names []string, salt string) uint64 {
		t.Helper()
		v, err := layoutFingerprint(names, salt)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	conn := fp(connStateMaps, "")
	reversed := slices.Clone(connStateMaps)
	slices.Reverse(reversed)
	if again := fp(reversed, ""); again != conn {
		t.Errorf("the order of the names changed the fingerprint: %x, %x", conn, again)
	}
	if salted := fp(connStateMaps, "x"); salted == conn {
		t.Error("a salt left the fingerprint unchanged")
	}
	if rate := fp(rateStateMaps, ""); rate == conn {
		t.Error("two sets of maps share a fingerprint")
	}
	if other := fp(connStateMaps[1:], ""); other == conn {
		t.Error("a map fewer left the fingerprint unchanged")
	}
	if _, err := layoutFingerprint([]string{"xfw_no_such_map"}, ""); err == nil {
		t.Error("a map the object lacks was fingerprinted")
	}
}
