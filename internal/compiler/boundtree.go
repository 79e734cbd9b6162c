package compiler

import "fmt"

// The address fields' interval bounds (Generation.Bounds, sorted per field)
// reach the data plane as a static search tree of BoundNode elements
// (struct xfw_bnode, bpf/classify.h xfw_addr_cls): each node holds up to
// BoundFanout sorted keys, so a search reads one map element per level,
// log_32(n) of them, where a binary search over the flat bounds read
// log_2(n). Every lookup of the generation's maps is a helper call (the
// inner maps are sized per generation, which keeps the verifier from
// inlining them), so the element reads are what a search costs.
//
// Layout of one field's nodes, contiguous in the slot's bounds map: the
// leaves first (node i holds bounds[i*BoundFanout ...], in order), then
// each level of parents, the root last. A leaf's slot holds a bound and its
// class; a parent's slot holds its child's first key and the child's node
// index. Slots past the last real one repeat it (key and class or child),
// so a search that finds every key ≤ the value lands on the same answer as
// the last real slot.

// BoundFanout is the number of keys of a search tree node
// (XFW_BTREE_FANOUT).
const BoundFanout = 32

// MaxBoundLevels is the deepest search tree of MaxBounds bounds
// (XFW_BTREE_LEVELS): BoundFanout^MaxBoundLevels ≥ MaxBounds.
const MaxBoundLevels = 5

// BoundNode is one search tree node: struct xfw_bnode.
type BoundNode struct {
	Key [BoundFanout]U128
	// Class is a leaf's classes, a parent's children (node indexes
	// in the slot's bounds map).
	Class [BoundFanout]uint32
}

// BoundTreeShape is where each address field's search tree lies in the
// slot's bounds map.
type BoundTreeShape struct {
	// Root is the node a search starts at, Levels the nodes it reads
	// (0: the field has no bounds).
	Root, Levels [NumAddrFields]uint32
	// Leaf is each field's first node (its bounds' leaves).
	Leaf [NumAddrFields]uint32
	// Nodes is the number of nodes of every field together.
	Nodes int
}

// ShapeBoundTrees lays out search trees for fields of count[a] bounds each.
func ShapeBoundTrees(count [NumAddrFields]uint32) BoundTreeShape {
	var s BoundTreeShape
	for a, n := range count {
		s.Leaf[a] = uint32(s.Nodes)
		if n == 0 {
			continue
		}
		width := int(n)
		for {
			width = (width + BoundFanout - 1) / BoundFanout
			s.Nodes += width
			s.Levels[a]++
			if width == 1 {
				break
			}
		}
		s.Root[a] = uint32(s.Nodes - 1)
	}
	return s
}

// BoundTrees returns the search tree nodes of g's bounds and their shape.
func (g *Generation) BoundTrees() ([]BoundNode, BoundTreeShape, error) {
	s := ShapeBoundTrees(g.AddrCount)
	nodes := make([]BoundNode, s.Nodes)
	if err := g.WriteBoundTrees(nodes, s); err != nil {
		return nil, s, err
	}
	return nodes, s, nil
}

// WriteBoundTrees writes the search tree nodes of g's bounds into nodes,
// laid out as s (ShapeBoundTrees of g.AddrCount; len(nodes) is s.Nodes),
// every slot of every node: the data plane writes them straight into the
// mapped bounds map, whatever it held before. A parent is built from the
// nodes of the level below as written, so nothing else is allocated.
func (g *Generation) WriteBoundTrees(nodes []BoundNode, s BoundTreeShape) error {
	if len(nodes) != s.Nodes {
		return fmt.Errorf("search trees: %d nodes, shape says %d", len(nodes), s.Nodes)
	}
	at := 0
	for a := range g.AddrCount {
		if s.Levels[a] > MaxBoundLevels {
			return fmt.Errorf("address field %d: %d bounds need a search tree of %d levels (at most %d)",
				a, g.AddrCount[a], s.Levels[a], MaxBoundLevels)
		}
		bounds := g.Bounds[g.AddrBase[a] : g.AddrBase[a]+g.AddrCount[a]]
		if len(bounds) == 0 {
			continue
		}
		if at != int(s.Leaf[a]) || at+int(s.Levels[a]) > len(nodes) {
			return fmt.Errorf("search trees: field %d at node %d, shape says %d", a, at, s.Leaf[a])
		}
		first := at
		for i := 0; i < len(bounds); i += BoundFanout {
			n := &nodes[at]
			for j := range BoundFanout {
				b := &bounds[min(i+j, len(bounds)-1)]
				n.Key[j], n.Class[j] = b.Value, b.Class
			}
			at++
		}
		for width := at - first; width > 1; width = at - first {
			children := first
			first = at
			for i := 0; i < width; i += BoundFanout {
				n := &nodes[at]
				for j := range BoundFanout {
					k := children + min(i+j, width-1)
					n.Key[j], n.Class[j] = nodes[k].Key[0], uint32(k)
				}
				at++
			}
		}
	}
	if at != s.Nodes {
		return fmt.Errorf("search trees: %d nodes, shape says %d", at, s.Nodes)
	}
	return nil
}

// SearchBoundTree is xfw_addr_cls's search of field a's tree for value v:
// the class of the last bound ≤ v (the first bound's when none is), 0 when
// the field has no bounds.
func SearchBoundTree(nodes []BoundNode, s BoundTreeShape, a int, v U128) uint32 {
	if s.Levels[a] == 0 {
		return 0
	}
	at := s.Root[a]
	for l := uint32(0); l < s.Levels[a]; l++ {
		n := &nodes[at]
		i := 0
		for w := BoundFanout / 2; w > 0; w /= 2 {
			if !v.Less(n.Key[i+w]) {
				i += w
			}
		}
		at = n.Class[i]
	}
	return at
}

// BoundsOfTrees returns the flat bounds (Generation.Bounds) of the search
// trees of shape ShapeBoundTrees(count), read from their leaves: field a's
// at base[a] (the inverse of BoundTrees).
func BoundsOfTrees(nodes []BoundNode, base, count [NumAddrFields]uint32) ([]Bound, error) {
	s := ShapeBoundTrees(count)
	if len(nodes) < s.Nodes {
		return nil, fmt.Errorf("search trees: %d nodes, want %d", len(nodes), s.Nodes)
	}
	var total uint32
	for a, n := range count {
		if n > 0 {
			total = max(total, base[a]+n)
		}
	}
	bounds := make([]Bound, total)
	for a, n := range count {
		for i := uint32(0); i < n; i++ {
			leaf := &nodes[s.Leaf[a]+i/BoundFanout]
			bounds[base[a]+i] = Bound{Value: leaf.Key[i%BoundFanout], Class: leaf.Class[i%BoundFanout]}
		}
	}
	return bounds, nil
}
