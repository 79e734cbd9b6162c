package compiler

import "sort"

// WalkFields returns the active fields in the order the data plane ANDs
// their chunks (xfw_family_cfg.fields, bpf/classify.h xfw_and_chunk): the
// fields of more classes first, field order among equals. The AND stops at
// the first field whose chunk is empty, and a field of many classes (an
// address, a port) has a class in few of the chunks, where one of few
// classes (the protocol) has a class in most: on a walk through chunks
// that hold no match, the first field read is then usually the one that
// ends the chunk.
func (g *Generation) WalkFields() []Field {
	var fields []Field
	var classes [NumFields]int
	seen := map[uint32]bool{}
	distinct := func(cls uint32) int {
		if cls == 0 || seen[cls] {
			return 0
		}
		seen[cls] = true
		return 1
	}
	for f := Field(0); f < NumFields; f++ {
		if g.Active&(1<<f) == 0 {
			continue
		}
		fields = append(fields, f)
		clear(seen)
		switch f.Kind() {
		case KindSmall:
			base := int(g.SmallBase[f])
			for _, c := range g.Small[base : base+f.SmallDomain()] {
				classes[f] += distinct(c)
			}
		case KindAddr:
			a := f.AddrIndex()
			for _, b := range g.Bounds[g.AddrBase[a] : g.AddrBase[a]+g.AddrCount[a]] {
				classes[f] += distinct(b.Class)
			}
		default:
			for k, c := range g.Hash {
				if k.Field == uint32(f) {
					classes[f] += distinct(c)
				}
			}
			classes[f] += distinct(g.DefaultClass[f])
		}
	}
	sort.SliceStable(fields, func(i, j int) bool { return classes[fields[i]] > classes[fields[j]] })
	return fields
}
