package compiler

import (
	"math/rand"
	"sort"
	"testing"
)

// flatSearch is the binary search the data plane did before the search
// trees: the class of the last bound ≤ v, the first bound's when none is.
func flatSearch(bounds []Bound, v U128) uint32 {
	i := sort.Search(len(bounds), func(i int) bool { return v.Less(bounds[i].Value) })
	if i == 0 {
		i = 1
	}
	return bounds[i-1].Class
}

// TestBoundTrees checks the search trees' answers against a binary search
// of the flat bounds for trees of one to four levels, values at, between,
// below and above the bounds (the all-ones address among them), and that
// the flat bounds read back from the leaves are the ones written.
func TestBoundTrees(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, tc := range []struct {
		name   string
		counts [NumAddrFields]uint32
		hi     bool // IPv6-like: the high words vary too
	}{
		{"one bound", [NumAddrFields]uint32{1, 0, 0, 0}, false},
		{"one leaf, full", [NumAddrFields]uint32{BoundFanout, 3, 0, 0}, false},
		{"two levels", [NumAddrFields]uint32{BoundFanout + 1, 100, 0, 7}, false},
		{"three levels", [NumAddrFields]uint32{2000, 0, 5000, 1}, true},
		{"four levels", [NumAddrFields]uint32{0, 40000, 0, 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Generation{}
			for a, n := range tc.counts {
				g.AddrBase[a], g.AddrCount[a] = uint32(len(g.Bounds)), n
				seen := map[U128]bool{{}: true}
				vals := []U128{{}} // the first bound is the field's minimum
				for uint32(len(vals)) < n {
					v := U128{Lo: rng.Uint64()}
					if tc.hi {
						v.Hi = rng.Uint64() % 4
					}
					if !seen[v] {
						seen[v] = true
						vals = append(vals, v)
					}
				}
				sort.Slice(vals, func(i, j int) bool { return vals[i].Less(vals[j]) })
				for i := uint32(0); i < n; i++ {
					g.Bounds = append(g.Bounds, Bound{Value: vals[i], Class: uint32(a)<<24 | i + 1})
				}
			}
			nodes, shape, err := g.BoundTrees()
			if err != nil {
				t.Fatal(err)
			}
			for a, n := range tc.counts {
				bounds := g.Bounds[g.AddrBase[a] : g.AddrBase[a]+n]
				if n == 0 {
					if got := SearchBoundTree(nodes, shape, a, U128{Lo: 5}); got != 0 || shape.Levels[a] != 0 {
						t.Errorf("field %d without bounds: class %d, %d levels", a, got, shape.Levels[a])
					}
					continue
				}
				probes := []U128{{}, {Hi: ^uint64(0), Lo: ^uint64(0)}}
				for _, b := range bounds {
					probes = append(probes, b.Value, U128{Hi: b.Value.Hi, Lo: b.Value.Lo + 1}, U128{Hi: b.Value.Hi, Lo: b.Value.Lo - 1})
				}
				for i := 0; i < 1000; i++ {
					probes = append(probes, U128{Hi: rng.Uint64() % 5, Lo: rng.Uint64()})
				}
				for _, v := range probes {
					if got, want := SearchBoundTree(nodes, shape, a, v), flatSearch(bounds, v); got != want {
						t.Fatalf("field %d (%d bounds, %d levels), value %x:%x: class %d, want %d",
							a, n, shape.Levels[a], v.Hi, v.Lo, got, want)
					}
				}
			}
			back, err := BoundsOfTrees(nodes, g.AddrBase, g.AddrCount)
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(g.Bounds) {
				t.Fatalf("read back %d bounds, wrote %d", len(back), len(g.Bounds))
			}
			for i := range back {
				if back[i] != g.Bounds[i] {
					t.Fatalf("bound %d read back as %+v, wrote %+v", i, back[i], g.Bounds[i])
				}
			}
		})
	}
}

// TestBoundTreeDepth checks that MaxBounds bounds fit MaxBoundLevels
// levels, the data plane's loop bound.
func TestBoundTreeDepth(t *testing.T) {
	s := ShapeBoundTrees([NumAddrFields]uint32{MaxBounds, MaxBounds, 1, 0})
	if s.Levels[0] > MaxBoundLevels {
		t.Errorf("%d bounds: %d levels, the data plane walks %d", MaxBounds, s.Levels[0], MaxBoundLevels)
	}
	if s.Levels[2] != 1 || s.Levels[3] != 0 {
		t.Errorf("levels of 1 and 0 bounds: %d, %d", s.Levels[2], s.Levels[3])
	}
}
