package compiler

import (
	"math/rand"
	"slices"
	"sort"
	"testing"
)

// boundTreesRef builds g's search tree nodes level by level from copies
// of each level's keys (BoundTrees before it wrote into a given slice).
func boundTreesRef(g *Generation) []BoundNode {
	var nodes []BoundNode
	for a := range g.AddrCount {
		bounds := g.Bounds[g.AddrBase[a] : g.AddrBase[a]+g.AddrCount[a]]
		if len(bounds) == 0 {
			continue
		}
		keys := make([]U128, len(bounds))
		vals := make([]uint32, len(bounds))
		for i, b := range bounds {
			keys[i], vals[i] = b.Value, b.Class
		}
		for {
			first := uint32(len(nodes))
			var nextKeys []U128
			var nextVals []uint32
			for i := 0; i < len(keys); i += BoundFanout {
				var n BoundNode
				for j := 0; j < BoundFanout; j++ {
					k := min(i+j, len(keys)-1)
					n.Key[j], n.Class[j] = keys[k], vals[k]
				}
				nextKeys = append(nextKeys, n.Key[0])
				nextVals = append(nextVals, first+uint32(i/BoundFanout))
				nodes = append(nodes, n)
			}
			if len(nextKeys) == 1 {
				break
			}
			keys, vals = nextKeys, nextVals
		}
	}
	return nodes
}

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
			// Written over nodes holding something else (a reused
			// map's), the same nodes as the level-by-level build.
			ref := boundTreesRef(g)
			dirty := make([]BoundNode, shape.Nodes)
			for i := range dirty {
				for j := range BoundFanout {
					dirty[i].Key[j], dirty[i].Class[j] = U128{Hi: rng.Uint64(), Lo: rng.Uint64()}, rng.Uint32()
				}
			}
			if err := g.WriteBoundTrees(dirty, shape); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ref, nodes) || !slices.Equal(ref, dirty) {
				t.Fatalf("nodes differ from the level-by-level build")
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
