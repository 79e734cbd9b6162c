package compiler

// An entry's condition is sparse: a rule names a few of the NumFields
// fields, and a generation holds up to MaxEntries entries (about a million
// for kube-proxy's 10,000 services). A dense Cond per entry (NumFields
// pointers, 8 bytes each) made the entry list the largest structure of
// the compile, every pointer of it scanned by the garbage collector on
// every cycle; a CondList keeps only the constrained fields, and the
// flattener cuts the lists of its entries from shared blocks (condSlab)
// instead of one allocation each.

// FieldSet is one field's condition in an entry's CondList.
type FieldSet struct {
	Field Field
	Set   *Set
}

// CondList is an entry's condition: the fields it constrains, in field
// order, each with the set of values a packet may have there (fields not
// listed: any value). Lists are shared and never changed in place: an
// entry whose condition changes gets a new list.
type CondList []FieldSet

// Get returns field f's set, nil when the condition does not constrain f.
func (c CondList) Get(f Field) *Set {
	for _, fs := range c {
		if fs.Field >= f {
			if fs.Field == f {
				return fs.Set
			}
			break
		}
	}
	return nil
}

// Full returns the condition as a dense Cond.
func (c CondList) Full() Cond {
	var out Cond
	for _, fs := range c {
		out[fs.Field] = fs.Set
	}
	return out
}

// List returns c's constrained fields as a CondList of its own.
func (c Cond) List() CondList {
	n := c.count()
	if n == 0 {
		return nil
	}
	return c.appendTo(make(CondList, 0, n))
}

// count returns how many fields c constrains.
func (c Cond) count() int {
	n := 0
	for _, s := range c {
		if s != nil {
			n++
		}
	}
	return n
}

// appendTo appends c's constrained fields to out, in field order.
func (c Cond) appendTo(out CondList) CondList {
	for f, s := range c {
		if s != nil {
			out = append(out, FieldSet{Field: Field(f), Set: s})
		}
	}
	return out
}

// condSlabSize is how many FieldSets one block of a condSlab holds: 64K
// of them (1 MiB) amortise the allocation over thousands of entries and
// waste at most one partly used block.
const condSlabSize = 1 << 16

// condSlab cuts CondLists from shared blocks.
type condSlab struct {
	block CondList
}

// list returns c as a CondList cut from the slab's current block (a new
// block when it is full). The list's capacity is its length, so an append
// to it copies instead of writing into its neighbour's.
func (s *condSlab) list(c Cond) CondList {
	n := c.count()
	if n == 0 {
		return nil
	}
	if cap(s.block)-len(s.block) < n {
		s.block = make(CondList, 0, max(condSlabSize, n))
	}
	start := len(s.block)
	s.block = c.appendTo(s.block)
	return s.block[start:len(s.block):len(s.block)]
}
