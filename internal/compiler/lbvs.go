package compiler

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
)

// Chunk is a 64-word slice of a bit vector with its summary word (bit j set
// when word j is non-zero): struct xfw_chunk.
type Chunk struct {
	Summary uint64
	Words   [ChunkWords]uint64
}

// Bound is the lower bound of an interval of an address field and the class
// of the values from it up to the next bound: struct xfw_bound.
type Bound struct {
	Value U128
	Class uint32
}

// HashKey is the key of the hashed fields: struct xfw_hkey.
type HashKey struct {
	Field uint32
	Value uint64
}

// vectorBuilder deduplicates chunks and classes across all fields.
type vectorBuilder struct {
	nchunks int
	chunks  []Chunk
	chunkID map[Chunk]uint32
	// classes[c*nchunks+k] is the chunk id of class c's chunk k.
	classes []uint32
	classID map[string]uint32
}

func newVectorBuilder(nchunks int) *vectorBuilder {
	vb := &vectorBuilder{
		nchunks: nchunks,
		chunks:  []Chunk{{}}, // id 0: the empty chunk
		chunkID: map[Chunk]uint32{{}: 0},
		classes: make([]uint32, nchunks), // class 0: the empty class
		classID: map[string]uint32{},
	}
	vb.classID[string(make([]byte, 4*nchunks))] = 0
	return vb
}

func (vb *vectorBuilder) chunk(c *Chunk) uint32 {
	c.Summary = 0
	for j, w := range c.Words {
		if w != 0 {
			c.Summary |= 1 << uint(j)
		}
	}
	if id, ok := vb.chunkID[*c]; ok {
		return id
	}
	id := uint32(len(vb.chunks))
	vb.chunks = append(vb.chunks, *c)
	vb.chunkID[*c] = id
	return id
}

func (vb *vectorBuilder) class(ids []uint32) uint32 {
	key := make([]byte, 4*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint32(key[4*i:], id)
	}
	if c, ok := vb.classID[string(key)]; ok {
		return c
	}
	c := uint32(len(vb.classes) / vb.nchunks)
	vb.classes = append(vb.classes, ids...)
	vb.classID[string(key)] = c
	return c
}

// fieldClasses is a field's partition of its domain: Bounds[i] starts an
// interval of class Bounds[i].Class that ends where Bounds[i+1] starts.
type fieldClasses struct {
	Bounds []Bound
}

// classOf returns the class of value v.
func (fc *fieldClasses) classOf(v U128) uint32 {
	i := sort.Search(len(fc.Bounds), func(i int) bool { return v.Less(fc.Bounds[i].Value) })
	if i == 0 {
		return 0
	}
	return fc.Bounds[i-1].Class
}

type event struct {
	at    U128
	entry int
	start bool
}

// buildField sweeps the domain of field f over all entries' sets and
// returns the value→class partition.
func (vb *vectorBuilder) buildField(f Field, entries []Entry) (*fieldClasses, error) {
	nchunks := vb.nchunks
	wild := make([]Chunk, nchunks)
	cur := make([]Chunk, nchunks)
	n := 0
	for i := range entries {
		if s := entries[i].Cond[f]; s != nil {
			n += 2 * len(s.Ivs)
		}
	}
	events := make([]event, 0, n)
	for i := range entries {
		s := entries[i].Cond[f]
		if s == nil {
			wild[i/ChunkBits].Words[(i%ChunkBits)/64] |= 1 << uint(i%64)
			continue
		}
		for _, iv := range s.Ivs {
			events = append(events, event{at: iv.Lo, entry: i, start: true})
			if iv.Hi != maxU128 {
				events = append(events, event{at: iv.Hi.Inc(), entry: i})
			}
		}
	}
	slices.SortFunc(events, func(a, b event) int {
		if a.at.Less(b.at) {
			return -1
		}
		if b.at.Less(a.at) {
			return 1
		}
		return 0
	})
	for k := range cur {
		cur[k] = wild[k]
	}
	ids := make([]uint32, nchunks)
	for k := range cur {
		c := cur[k]
		ids[k] = vb.chunk(&c)
	}
	dirty := make([]bool, nchunks)
	fc := &fieldClasses{}
	emit := func(at U128) {
		for k, d := range dirty {
			if d {
				c := cur[k]
				ids[k] = vb.chunk(&c)
				dirty[k] = false
			}
		}
		cls := vb.class(ids)
		if n := len(fc.Bounds); n > 0 && fc.Bounds[n-1].Class == cls {
			return
		}
		fc.Bounds = append(fc.Bounds, Bound{Value: at, Class: cls})
	}
	i := 0
	if len(events) == 0 || events[0].at != (U128{}) {
		emit(U128{})
	}
	for i < len(events) {
		at := events[i].at
		for ; i < len(events) && events[i].at == at; i++ {
			e := events[i].entry
			k, w, b := e/ChunkBits, (e%ChunkBits)/64, uint(e%64)
			if events[i].start {
				cur[k].Words[w] |= 1 << b
			} else {
				cur[k].Words[w] &^= 1 << b
			}
			dirty[k] = true
		}
		emit(at)
		if len(fc.Bounds) > MaxBounds {
			return nil, fmt.Errorf("field %s: more than %d distinct intervals (data plane binary search limit)", f, MaxBounds)
		}
	}
	return fc, nil
}
