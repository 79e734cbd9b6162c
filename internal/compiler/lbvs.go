package compiler

import (
	"cmp"
	"fmt"
	"math/bits"
	"runtime"
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
//
// Chunks are found by a Zobrist hash (the XOR of a fixed random word per
// set bit), which the sweep in buildField updates in O(1) per flipped bit
// instead of hashing 520 bytes per interval; equal hashes are confirmed by
// comparing the chunks.
type vectorBuilder struct {
	nchunks int
	// chunks holds the chunks by id, in blocks of chunkBlock (a block
	// list grows without copying what it holds: doubling one slice
	// allocated three times the chunks' size at 100K rules).
	chunks [][]Chunk
	nchunk int // chunks held
	// chunkByHash maps a hash to the first chunk with that hash; chunks
	// whose hash an earlier, different chunk has are in chunkCollided.
	chunkByHash   map[uint64]uint32
	chunkCollided map[Chunk]uint32
	// classes holds the classes' chunk ids (in blocks, as chunks,
	// without copies); it becomes Generation.ClassChunks as it is.
	classes ClassTable
	// classByHash maps a class hash (classHash) to the first class with
	// that hash; classes whose hash an earlier, different class has are
	// in classCollided. Hashing the chunk ids, updated per changed chunk,
	// instead of keying a map by all nchunks ids keeps a sweep step
	// linear in the chunks it changes (kube-proxy's 10K services: 112,519
	// classes of 261 chunks).
	classByHash   map[uint64]uint32
	classCollided map[uint64][]uint32
	// bounds is the sweeps' bound list, reused field after field: a
	// fieldClasses' Bounds hold until the next sweepField (the compile
	// copies them out first; one list per field was 32 MB of a 100K-rule
	// compile's allocations).
	bounds []Bound
}

// chunkBlock is the number of chunks in a block of vectorBuilder.chunks
// (133 KB).
const chunkBlock = 256

func newVectorBuilder(nchunks int) *vectorBuilder {
	vb := &vectorBuilder{
		nchunks:       nchunks,
		classes:       NewClassTable(nchunks),
		chunkByHash:   map[uint64]uint32{},
		chunkCollided: map[Chunk]uint32{},
		classByHash:   map[uint64]uint32{},
		classCollided: map[uint64][]uint32{},
	}
	vb.chunk(&Chunk{}, 0)                                                 // id 0: the empty chunk
	vb.class(make([]uint32, nchunks), classHash(make([]uint32, nchunks))) // class 0: the empty class
	return vb
}

// chunkAt returns chunk id.
func (vb *vectorBuilder) chunkAt(id uint32) *Chunk {
	return &vb.chunks[id/chunkBlock][id%chunkBlock]
}

// allChunks returns the chunks in id order, in one slice; the blocks are
// released as they are copied, so the copy costs one block of memory.
func (vb *vectorBuilder) allChunks() []Chunk {
	out := make([]Chunk, 0, vb.nchunk)
	for i, b := range vb.chunks {
		out = append(out, b...)
		vb.chunks[i] = nil
	}
	return out
}

// allClasses returns the class table, its blocks as they are.
func (vb *vectorBuilder) allClasses() ClassTable {
	return vb.classes
}

// zobrist is the hash word of bit b of a chunk (splitmix64 of b).
func zobrist(b int) uint64 {
	z := uint64(b+1) * 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// chunkHash computes a chunk's Zobrist hash from scratch.
func chunkHash(c *Chunk) uint64 {
	var h uint64
	for w, word := range c.Words {
		for word != 0 {
			b := bits.TrailingZeros64(word)
			h ^= zobrist(w*64 + b)
			word &= word - 1
		}
	}
	return h
}

// chunk returns the id of chunk c, whose hash is h, adding (a copy of) it
// if new. It sets c's summary word.
func (vb *vectorBuilder) chunk(c *Chunk, h uint64) uint32 {
	c.Summary = 0
	for j, w := range c.Words {
		if w != 0 {
			c.Summary |= 1 << uint(j)
		}
	}
	id, ok := vb.chunkByHash[h]
	if ok && *vb.chunkAt(id) == *c {
		return id
	}
	if ok {
		if id, ok := vb.chunkCollided[*c]; ok {
			return id
		}
	}
	nid := uint32(vb.nchunk)
	if nid%chunkBlock == 0 {
		vb.chunks = append(vb.chunks, make([]Chunk, 0, chunkBlock))
	}
	last := len(vb.chunks) - 1
	vb.chunks[last] = append(vb.chunks[last], *c)
	vb.nchunk++
	if ok {
		vb.chunkCollided[*c] = nid
	} else {
		vb.chunkByHash[h] = nid
	}
	return nid
}

// classWord is the hash word of chunk id id at chunk index k of a class.
func classWord(k int, id uint32) uint64 {
	return zobrist(k<<32 | int(id))
}

// classHash hashes a class's chunk ids from scratch: the XOR of their
// classWords, which a sweep updates per changed chunk.
func classHash(ids []uint32) uint64 {
	var h uint64
	for k, id := range ids {
		h ^= classWord(k, id)
	}
	return h
}

// classIDs returns the chunk ids of class c.
func (vb *vectorBuilder) classIDs(c uint32) []uint32 {
	return vb.classes.Row(c)
}

// class returns the class of chunk ids ids, whose classHash is h, adding
// it if new.
func (vb *vectorBuilder) class(ids []uint32, h uint64) uint32 {
	first, ok := vb.classByHash[h]
	if ok && slices.Equal(vb.classIDs(first), ids) {
		return first
	}
	for _, c := range vb.classCollided[h] {
		if slices.Equal(vb.classIDs(c), ids) {
			return c
		}
	}
	c := vb.classes.Append(ids)
	if ok {
		vb.classCollided[h] = append(vb.classCollided[h], c)
	} else {
		vb.classByHash[h] = c
	}
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

// event is where an entry's interval of a field starts or ends (past its
// last value): 24 bytes, the sweep sorts millions of them.
type event struct {
	at    U128
	entry uint32
	start bool
}

// constrainedBy lists, per field, the indexes of the entries whose
// condition constrains it, in entry order: one pass over the entries'
// conditions for every field's sweep (buildField), which would otherwise
// read each entry's condition twice per field.
func constrainedBy(entries []Entry) [NumFields][]uint32 {
	var count [NumFields]int
	for i := range entries {
		for _, fs := range entries[i].Cond {
			count[fs.Field]++
		}
	}
	var out [NumFields][]uint32
	for f, n := range count {
		if n > 0 {
			out[f] = make([]uint32, 0, n)
		}
	}
	for i := range entries {
		for _, fs := range entries[i].Cond {
			out[fs.Field] = append(out[fs.Field], uint32(i))
		}
	}
	return out
}

// setFirstBits sets the bits of the first n positions of chunks, position
// i being bit i%64 of word (i%ChunkBits)/64 of chunk i/ChunkBits.
func setFirstBits(chunks []Chunk, n int) {
	for i := 0; i < n; i += 64 {
		word := ^uint64(0)
		if n-i < 64 {
			word = 1<<uint(n-i) - 1
		}
		chunks[i/ChunkBits].Words[(i%ChunkBits)/64] = word
	}
}

// buildField sweeps the domain of field f over all entries' sets and
// returns the value→class partition; constrained are the indexes of the
// entries whose condition constrains f, in order (constrainedBy), every
// other entry holds for every value.
func (vb *vectorBuilder) buildField(f Field, entries []Entry, constrained []uint32) (*fieldClasses, error) {
	return vb.sweepField(f, prepareField(f, entries, constrained, vb.nchunks, nil))
}

// fieldEvents is what the sweep of one field starts from (prepareField):
// the positions that hold for every value of the field (wild) and the
// points where the constraining entries' intervals start and end,
// sorted.
type fieldEvents struct {
	wild   []Chunk
	events []event
}

// prepareField finds field f's fieldEvents over entries, of which
// constrained (in order) constrain f, in vectors of nchunks chunks. It
// only reads entries, so that the fields after the one being swept are
// prepared beside its sweep (prepareAhead). The events are put in buf
// when it has room for them (an earlier field's, swept).
func prepareField(f Field, entries []Entry, constrained []uint32, nchunks int, buf []event) fieldEvents {
	wild := make([]Chunk, nchunks)
	setFirstBits(wild, len(entries))
	n := fieldEventCount(f, entries, constrained)
	events := buf[:0]
	if cap(buf) < n {
		events = make([]event, 0, n)
	}
	for _, e := range constrained {
		i := int(e)
		wild[i/ChunkBits].Words[(i%ChunkBits)/64] &^= 1 << uint(i%64)
		s := entries[i].Cond.Get(f)
		for _, iv := range s.Ivs {
			events = append(events, event{at: iv.Lo, entry: e, start: true})
			if iv.Hi != maxU128 {
				events = append(events, event{at: iv.Hi.Inc(), entry: e})
			}
		}
	}
	// One three-way comparison of the words (the same order as two
	// Less calls, so the same sort).
	slices.SortFunc(events, func(a, b event) int {
		if c := cmp.Compare(a.at.Hi, b.at.Hi); c != 0 {
			return c
		}
		return cmp.Compare(a.at.Lo, b.at.Lo)
	})
	return fieldEvents{wild: wild, events: events}
}

// fieldEventCount returns the most events field f has over entries, of
// which constrained constrain it: a start and an end per interval.
func fieldEventCount(f Field, entries []Entry, constrained []uint32) int {
	n := 0
	for _, i := range constrained {
		n += 2 * len(entries[i].Cond.Get(f).Ivs)
	}
	return n
}

// mostFieldEvents returns the most events any field has (fieldEventCount),
// the size of prepareAhead's event lists.
func mostFieldEvents(entries []Entry, constrained *[NumFields][]uint32) int {
	most := 0
	for f := range constrained {
		most = max(most, fieldEventCount(Field(f), entries, constrained[f]))
	}
	return most
}

// sweepField sweeps field f's prepared events (prepareField) and returns
// its value→class partition, its chunks and classes added to vb. The
// partition's Bounds are vb's list, valid until the next sweepField.
func (vb *vectorBuilder) sweepField(f Field, fe fieldEvents) (*fieldClasses, error) {
	nchunks := vb.nchunks
	wild, events := fe.wild, fe.events
	cur := make([]Chunk, nchunks)
	hashes := make([]uint64, nchunks) // Zobrist hashes of cur's chunks
	for k := range cur {
		cur[k] = wild[k]
		hashes[k] = chunkHash(&cur[k])
	}
	ids := make([]uint32, nchunks)
	for k := range cur {
		ids[k] = vb.chunk(&cur[k], hashes[k])
	}
	idsHash := classHash(ids)
	dirty := make([]bool, nchunks)
	var dirtyList []int // the chunk indexes dirty is true for
	// At most one bound per event and one at 0: sized once, where
	// appending grew it by copies (30 MB at 100K 5-tuple rules), and
	// reused by the next field's sweep.
	if cap(vb.bounds) < len(events)+1 {
		vb.bounds = make([]Bound, 0, len(events)+1)
	}
	fc := &fieldClasses{Bounds: vb.bounds[:0]}
	defer func() { vb.bounds = fc.Bounds[:0] }()
	emit := func(at U128) {
		for _, k := range dirtyList {
			if id := vb.chunk(&cur[k], hashes[k]); id != ids[k] {
				idsHash ^= classWord(k, ids[k]) ^ classWord(k, id)
				ids[k] = id
			}
			dirty[k] = false
		}
		dirtyList = dirtyList[:0]
		cls := vb.class(ids, idsHash)
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
			e := int(events[i].entry)
			k, w, b := e/ChunkBits, (e%ChunkBits)/64, uint(e%64)
			was := cur[k].Words[w]
			if events[i].start {
				cur[k].Words[w] |= 1 << b
			} else {
				cur[k].Words[w] &^= 1 << b
			}
			if cur[k].Words[w] != was {
				hashes[k] ^= zobrist(e % ChunkBits)
			}
			if !dirty[k] {
				dirty[k] = true
				dirtyList = append(dirtyList, k)
			}
		}
		emit(at)
		if len(fc.Bounds) > MaxBounds {
			return nil, fmt.Errorf("field %s: more than %d distinct intervals (data plane binary search limit)", f, MaxBounds)
		}
	}
	return fc, nil
}

// minPrepareAheadEntries is the number of entries from which the fields'
// events are prepared on another goroutine beside the sweep
// (prepareAhead); a variable so that tests take both paths.
var minPrepareAheadEntries = 1 << 15

// preparedAhead is the number of fields whose events may be prepared and
// not yet swept, the one being swept included: one prepared beside the
// sweep. Their lists, sized for the field with the most events, are used
// again field after field (12 MB each for kube-proxy's port fields at
// 10K services; a list per field was 32 MB of a 100K-rule compile's
// allocations).
const preparedAhead = 2

// prepareAhead returns the function that gives field f's fieldEvents
// (prepareField) of entries, constrained[f] being the entries that
// constrain it, and the function that ends the preparing. The sweep takes
// the fields in order; with two CPUs or more and a large entry list the
// fields after the one being swept are prepared beside it (kube-proxy's
// 10K services: about 110 ms of the sweep's 180 ms is finding and
// sorting the events, the sweep itself serial since the classes and
// chunks are numbered in field order), otherwise each when asked.
func prepareAhead(entries []Entry, constrained [NumFields][]uint32, nchunks int) (next func(Field) fieldEvents, stop func()) {
	most := mostFieldEvents(entries, &constrained)
	if runtime.GOMAXPROCS(0) < 2 || len(entries) < minPrepareAheadEntries {
		buf := make([]event, 0, most) // the previous field's, swept
		return func(f Field) fieldEvents {
			fe := prepareField(f, entries, constrained[f], nchunks, buf)
			buf = fe.events
			constrained[f] = nil // the sweep's garbage once prepared
			return fe
		}, func() {}
	}
	var ready [NumFields]chan fieldEvents
	for f := range ready {
		if len(constrained[f]) > 0 {
			ready[f] = make(chan fieldEvents, 1) // never blocks its one send
		}
	}
	// A token per field prepared and not yet swept; a swept field's
	// events list goes back to spare for a later field.
	tokens := make(chan struct{}, preparedAhead)
	spare := make(chan []event, preparedAhead)
	done := make(chan struct{})
	go func() {
		for f := range ready {
			if ready[f] == nil {
				continue
			}
			select {
			case tokens <- struct{}{}:
			case <-done:
				return
			}
			var buf []event
			select {
			case buf = <-spare:
			default:
				buf = make([]event, 0, most)
			}
			ready[f] <- prepareField(Field(f), entries, constrained[f], nchunks, buf)
			constrained[f] = nil // the sweep's garbage once prepared
		}
	}()
	var swept []event // the field before f's: its sweep has ended
	next = func(f Field) fieldEvents {
		if swept != nil {
			spare <- swept // never blocks: at most preparedAhead lists
			<-tokens
		}
		fe := <-ready[f]
		swept = fe.events
		return fe
	}
	return next, func() { close(done) }
}
