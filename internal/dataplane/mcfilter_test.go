package dataplane

import (
	"reflect"
	"testing"

	"github.com/cilium/ebpf"
)

// mcfilterSample is /proc/net/mcfilter as Linux 6.18 writes it, beside
// igmpSample.
const mcfilterSample = "Idx Device        MCA        SRC    INC    EXC\n" +
	"  2     b0 0xef010102 0x0a000102      1      0\n" +
	"  2     b0 0xef010102 0x0a000103      0      1\n"

func TestParseMcfilter(t *testing.T) {
	got, err := parseMcfilter(mcfilterSample)
	if err != nil {
		t.Fatal(err)
	}
	want := map[mcDevGroup][]mcSource{{2, 0xef010102}: {{0x0a000102, 1, 0}, {0x0a000103, 0, 1}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"head\n  2 b0 0xef010102 0x0a000102 1\n", "head\nx b0 0xef010102 0x0a000102 1 0\n",
		"head\n  2 b0 0xef0101021 0x0a000102 1 0\n", "head\n  2 b0 0xef010102 0x0a000102 -1 0\n"} {
		if _, err := parseMcfilter(bad); err == nil {
			t.Errorf("parseMcfilter(%q): no error", bad)
		}
	}
}

// TestSourceFilter: the verdicts ip_check_mc_rcu gives, for memberships
// whose modes the counts tell, and none where they do not.
func TestSourceFilter(t *testing.T) {
	const a, b, c = 0x0a000102, 0x0a000103, 0x0a000104
	const g = 0xef010102
	for _, tc := range []struct {
		name     string
		group    uint32
		users    uint64
		srcs     []mcSource
		want     mcFilter
		filtered bool
	}{
		{"any-source joins only", g, 2, nil, mcFilter{}, false},
		{"one source-specific join", g, 1, []mcSource{{a, 1, 0}}, mcFilter{false, []uint32{a}}, true},
		{"two source-specific joins of one source", g, 2, []mcSource{{a, 2, 0}}, mcFilter{false, []uint32{a}}, true},
		{"one blocked source", g, 1, []mcSource{{b, 0, 1}}, mcFilter{true, []uint32{b}}, true},
		{"blocked by one of two any-source joins", g, 2, []mcSource{{b, 0, 1}}, mcFilter{}, false},
		{"blocked by both", g, 2, []mcSource{{b, 0, 2}}, mcFilter{true, []uint32{b}}, true},
		{"a source-specific join beside a blocking one", g, 2, []mcSource{{a, 1, 0}, {b, 0, 1}}, mcFilter{true, []uint32{b}}, true},
		{"blocked, and included by another", g, 2, []mcSource{{b, 1, 1}}, mcFilter{}, false},
		// {a} {b} (INCLUDE, c dropped) or {a, b} and an any-source
		// join (c passes): left open.
		{"modes not told", g, 2, []mcSource{{a, 1, 0}, {b, 1, 0}}, mcFilter{}, false},
		{"two INCLUDE memberships, one of two sources", g, 2, []mcSource{{a, 1, 0}, {b, 2, 0}}, mcFilter{false, []uint32{a, b}}, true},
		{"three any-source joins beside an INCLUDE one", g, 4, []mcSource{{a, 1, 0}, {b, 0, 3}}, mcFilter{true, []uint32{b}}, true},
		// One INCLUDE {a} and two EXCLUDE, or ... c excluded by 1 of
		// at least 2: passes; b by 2 of exactly 2: dropped.
		{"excluded by all", g, 3, []mcSource{{a, 1, 0}, {b, 0, 2}, {c, 0, 1}}, mcFilter{true, []uint32{b}}, true},
		{"all hosts", mcAllHosts, 1, []mcSource{{b, 0, 1}}, mcFilter{}, false},
		{"counts read while changing", g, 1, []mcSource{{a, 2, 0}}, mcFilter{}, false},
		{"counts read while changing, excluded", g, 1, []mcSource{{a, 1, 0}, {b, 0, 1}}, mcFilter{}, false},
	} {
		f, filtered := sourceFilter(tc.group, tc.users, tc.srcs)
		if filtered != tc.filtered || filtered && !reflect.DeepEqual(f, tc.want) {
			t.Errorf("%s: got %+v %v, want %+v %v", tc.name, f, filtered, tc.want, tc.filtered)
		}
	}
}

// TestFilterNumbers: a group keeps its filter's number while the verdict
// of its unlisted sources stays, and gets a fresh one when it changes.
func TestFilterNumbers(t *testing.T) {
	ifinfo, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 16, MaxEntries: 64})
	if err != nil {
		t.Skipf("create a hash map (root needed): %v", err)
	}
	defer ifinfo.Close()
	const g1, g2, g3 = 0xef010101, 0xef010102, 0xef010103
	const a, b = 0x0a000102, 0x0a000103
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ifinfo.Put(mcEntry(g1, 2), bpfIfInfo{Ifindex: 1}))                    // INCLUDE
	must(ifinfo.Put(mcEntry(g2, 2), bpfIfInfo{Ifindex: 2}))                    // INCLUDE, to become EXCLUDE
	must(ifinfo.Put(mcEntry(g3, 3), bpfIfInfo{Ifindex: 3, Flags: mcUnlisted})) // on a device no longer mirrored
	jg := joinedGroups{
		users: map[mcDevGroup]uint64{{2, g1}: 1, {2, g2}: 1, {2, g3}: 1, {3, g3}: 1},
		sources: map[mcDevGroup][]mcSource{
			{2, g1}: {{b, 1, 0}},
			{2, g2}: {{a, 0, 1}},
			{2, g3}: {{a, 1, 0}},
			{3, g3}: {{a, 0, 1}},
		},
	}
	got, err := filterNumbers(ifinfo, jg, map[int]bool{2: true})
	must(err)
	want := map[mcDevGroup]mcNumbered{
		{2, g1}: {mcFilter{false, []uint32{b}}, 1},
		{2, g2}: {mcFilter{true, []uint32{a}}, 4},
		{2, g3}: {mcFilter{false, []uint32{a}}, 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	keys := groupKeys4(2, g2, got[mcDevGroup{2, g2}])
	wantKeys := []mcKeyVal{{key: uint64(mcKeySrc4+4)<<32 | a}, {key: mcEntry(g2, 2), val: bpfIfInfo{Ifindex: 4, Flags: mcUnlisted}}}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("keys %+v, want %+v", keys, wantKeys)
	}
}
