package compiler

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCondList converts dense conditions to CondLists (their own and cut
// from a slab) and back, and reads single fields from them.
func TestCondList(t *testing.T) {
	tcp, port := Point(U64(6)), Range(U64(80), U64(90))
	var twoFields Cond
	twoFields[FieldProto], twoFields[FieldDport] = tcp, port
	var lastField Cond
	lastField[NumFields-1] = tcp
	tests := []struct {
		name string
		cond Cond
		len  int
	}{
		{"no field", Cond{}, 0},
		{"two fields", twoFields, 2},
		{"the last field", lastField, 1},
	}
	var slab condSlab
	for _, tc := range tests {
		for _, l := range []CondList{tc.cond.List(), slab.list(tc.cond)} {
			if len(l) != tc.len {
				t.Errorf("%s: %d fields listed, want %d", tc.name, len(l), tc.len)
			}
			if l.Full() != tc.cond {
				t.Errorf("%s: Full() differs from the condition listed", tc.name)
			}
			for f := Field(0); f < NumFields; f++ {
				if l.Get(f) != tc.cond[f] {
					t.Errorf("%s: Get(%s) = %v, want %v", tc.name, f, l.Get(f), tc.cond[f])
				}
			}
		}
	}
	// Lists cut from one block do not share room: an append to one
	// copies it and leaves the next intact.
	first, second := slab.list(twoFields), slab.list(lastField)
	_ = append(first, FieldSet{Field: FieldSport, Set: port})
	if second.Get(NumFields-1) != tcp || len(second) != 1 {
		t.Errorf("an append to one list changed the next: %v", second)
	}
}

// TestAppendStopsAtClassBound appends a rule naming one source to a chain
// of more than maxAppendClasses rules naming distinct destinations: every
// destination class must take it, so the append is refused, and it must
// stop copying classes at the bound rather than copy one per class first.
func TestAppendStopsAtClassBound(t *testing.T) {
	const rules = 3 * maxAppendClasses
	rs := ir.NewRuleset(ir.IPv4)
	fwd := rs.Chain("FORWARD")
	host := netip.MustParseAddr("255.255.255.255")
	for i := 0; i < rules; i++ {
		dst := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})
		fwd.Rules = append(fwd.Rules, &ir.Rule{Dst: ir.AddrMatch{Set: true, Addr: dst, Mask: host}, Target: ir.Target{Kind: ir.TargetAccept}})
	}
	// One rule naming a source makes the source field classified.
	fwd.Rules = append(fwd.Rules, &ir.Rule{Src: ir.AddrMatch{Set: true, Addr: netip.MustParseAddr("10.255.255.1"), Mask: host}, Target: ir.Target{Kind: ir.TargetDrop}})
	g, err := Compile(rs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	chunksBefore := len(g.Chunks)
	r := &ir.Rule{Src: ir.AddrMatch{Set: true, Addr: netip.MustParseAddr("192.0.2.1"), Mask: host}, Target: ir.Target{Kind: ir.TargetAccept}}
	counter := uint32(NumChains)
	for _, c := range rs.Chains {
		counter += uint32(len(c.Rules))
		if c == fwd {
			break
		}
	}
	_, err = AppendRule(g, r, ChainForward, counter, RuleRef{Chain: "FORWARD", Index: len(fwd.Rules)}, nil)
	if !errors.Is(err, ErrNotAppendable) || !strings.Contains(err.Error(), "classes") {
		t.Fatalf("append: %v, want refused for its classes", err)
	}
	if made := len(g.Chunks) - chunksBefore; made > maxAppendClasses {
		t.Errorf("the refused append made %d chunks, more than the %d classes it may copy", made, maxAppendClasses)
	}
}

// TestUnionOf checks the one-allocation union of several sets against
// Union applied in turn: overlapping, adjacent, disjoint and nil sets.
func TestUnionOf(t *testing.T) {
	r := func(lo, hi uint64) *Set { return Range(U64(lo), U64(hi)) }
	cases := [][]*Set{
		{r(1, 5), Point(U64(9))},
		{r(1, 5), r(6, 8), r(20, 30)},
		{r(10, 20), r(1, 12), r(15, 40)},
		{&Set{}, Point(U64(3))},
		{r(1, 2), nil},
		{Point(U64(ValTrunc)), shortPortsAll, r(80, 80)},
	}
	for i, sets := range cases {
		want := sets[0]
		for _, s := range sets[1:] {
			want = Union(want, s)
		}
		got := unionOf(sets...)
		if (got == nil) != (want == nil) || got != nil && !slices.Equal(got.Ivs, want.Ivs) {
			t.Errorf("case %d: unionOf %v, Union in turn %v", i, got, want)
		}
	}
}
