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
	d := distinctClasses{}
	for f := Field(0); f < NumFields; f++ {
		if g.Active&(1<<f) == 0 {
			continue
		}
		fields = append(fields, f)
		d.next()
		switch f.Kind() {
		case KindSmall:
			base := int(g.SmallBase[f])
			prev := uint32(0)
			for _, c := range g.Small[base : base+g.SmallDomain(f)] {
				if c != prev { // a domain's classes come in runs
					classes[f] += d.count(c)
					prev = c
				}
			}
		case KindAddr:
			a := f.AddrIndex()
			for _, b := range g.Bounds[g.AddrBase[a] : g.AddrBase[a]+g.AddrCount[a]] {
				classes[f] += d.count(b.Class)
			}
		default:
			for k, c := range g.Hash {
				if k.Field == uint32(f) {
					classes[f] += d.count(c)
				}
			}
			classes[f] += d.count(g.DefaultClass[f])
		}
	}
	sort.SliceStable(fields, func(i, j int) bool { return classes[fields[i]] > classes[fields[j]] })
	return fields
}

// distinctClasses counts the distinct non-zero classes of one field at a
// time (next starts the next field). Classes are numbered densely from 1,
// so a stamp per class number (the field's round) replaces a set: the
// small fields' domains hold 65,536 entries each, and a map lookup per
// entry took about a millisecond of every generation swapped in.
type distinctClasses struct {
	round uint32
	stamp []uint32
	// big holds the classes past maxStampedClass (more rows than a
	// generation has; kept exact all the same).
	big map[uint32]uint32
}

// maxStampedClass bounds the stamp slice.
const maxStampedClass = 1 << 22

// next starts counting the next field's classes.
func (d *distinctClasses) next() { d.round++ }

// count returns 1 when cls is not zero and not seen yet for this field
// (and records it), else 0.
func (d *distinctClasses) count(cls uint32) int {
	switch {
	case cls == 0:
		return 0
	case cls < maxStampedClass:
		if int(cls) >= len(d.stamp) {
			d.stamp = append(d.stamp, make([]uint32, int(cls)+1-len(d.stamp)+len(d.stamp)/2)...)
		}
		if d.stamp[cls] == d.round {
			return 0
		}
		d.stamp[cls] = d.round
		return 1
	default:
		if d.big == nil {
			d.big = map[uint32]uint32{}
		}
		if d.big[cls] == d.round {
			return 0
		}
		d.big[cls] = d.round
		return 1
	}
}
