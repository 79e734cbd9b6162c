package dataplane

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/lpm"
)

// newTestSetTable returns a LiveSetTable over slices laid out as the maps
// are (the ranges with room words after the used ones, the high-water
// mark last) for a table of the prefixes; it returns the ranges (mark
// included) and the direct entries.
func newTestSetTable(t *testing.T, prefixes []string, room int) (*LiveSetTable, []uint64, []uint64) {
	t.Helper()
	var entries []lpm.Entry
	for _, p := range prefixes {
		entries = append(entries, lpm.Entry{Prefix: netip.MustParsePrefix(p), Value: SetMember})
	}
	tab, err := lpm.Build(lpm.IPv4, entries, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ranges := make([]uint64, tab.Used()+room+1)
	copy(ranges, tab.Ranges()[:tab.Used()])
	ranges[len(ranges)-1] = uint64(tab.Used())
	direct := append([]uint64(nil), tab.Direct()...)
	lt := &LiveSetTable{family: ir.IPv4, direct: sliceWords(direct), ranges: sliceWords(ranges[:len(ranges)-1]),
		nDirect: len(direct), nRanges: len(ranges) - 1, mark: &ranges[len(ranges)-1]}
	return lt, ranges, direct
}

// TestLiveSetTablePlanApply adds hosts to a table by Plan and Apply and
// checks the lookups, and that a patch without room writes nothing.
func TestLiveSetTablePlanApply(t *testing.T) {
	members := []string{"10.0.0.1/32", "10.0.0.9/32", "10.0.64.0/24", "192.0.2.0/24"}
	tests := []struct {
		name    string
		room    int
		add     []string
		wantErr error
	}{
		{"one host", 64, []string{"10.0.0.5/32"}, nil},
		{"two entries", 64, []string{"10.0.0.5/32", "10.0.128.7/32"}, nil},
		{"no room", 2, []string{"10.0.0.5/32", "10.0.128.7/32"}, ErrNoRoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lt, ranges, direct := newTestSetTable(t, members, tt.room)
			before := append([]uint64(nil), ranges...)
			directBefore := append([]uint64(nil), direct...)
			all := append([]string(nil), members...)
			all = append(all, tt.add...)
			var entries []lpm.Entry
			for _, p := range all {
				entries = append(entries, lpm.Entry{Prefix: netip.MustParsePrefix(p), Value: SetMember})
			}
			var slots []int
			for _, p := range tt.add {
				s, _, err := lpm.DirectSpan(lpm.IPv4, netip.MustParsePrefix(p))
				if err != nil {
					t.Fatal(err)
				}
				slots = append(slots, s)
			}
			patch, err := lt.Plan(slots, func(s int, base uint32) (uint64, []uint64, error) {
				return lpm.BuildBlock(lpm.IPv4, s, entries, base)
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Plan: %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				for i := range before {
					if ranges[i] != before[i] {
						t.Fatalf("a refused plan changed range word %d", i)
					}
				}
				for i := range directBefore {
					if direct[i] != directBefore[i] {
						t.Fatalf("a refused plan changed direct entry %d", i)
					}
				}
				return
			}
			patch.Apply()
			for _, p := range all {
				a := netip.MustParsePrefix(p).Addr()
				if v := lpm.Lookup4Flat(direct, ranges[:len(ranges)-1], ipv4Word(a)); v != SetMember {
					t.Errorf("lookup %v = %d, want %d", a, v, SetMember)
				}
			}
			for _, a := range []string{"10.0.0.2", "10.0.0.6", "10.0.128.8", "10.0.65.1"} {
				if v := lpm.Lookup4Flat(direct, ranges[:len(ranges)-1], ipv4Word(netip.MustParseAddr(a))); v != 0 {
					t.Errorf("lookup %s = %d, want 0", a, v)
				}
			}
			if *lt.mark <= before[len(before)-1] {
				t.Errorf("the high-water mark stayed at %d", *lt.mark)
			}
		})
	}
}

// ipv4Word is an IPv4 address as a host-order integer.
func ipv4Word(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
