package compiler

import (
	"fmt"
	"slices"
	"sync"
)

// Placing a position in place (AppendRule, InsertRule, DeleteRule) while
// keeping the classes' numbers.
//
// Position p enters the classes of the values its condition holds for and
// leaves the others'. A class whose references (small-field values,
// address intervals, hashed keys, default classes, over every active
// field) all want the same change is changed where it is: its chunk p/
// ChunkBits is replaced by the chunk with p's bit flipped, its number and
// every reference to it stay. A class whose references disagree is split:
// the side with more references keeps the number (and the class's chunks
// as that side wants them), the other side gets a new class. Class 0, the
// empty class, is never changed: values outside a small field's array
// are in it without a reference.
//
// So an append writes the small-field entries of the values whose class
// is split off only, not every entry of every field it covers (262,406
// entries with both port fields, of which 196,613 changed at every append
// when each changed class was copied to a new number), and the idle bank
// can be brought up to date by writing those entries alone
// (Generation.SmallWritten).
//
// place walks the references twice: it counts, per class, the references
// that want p's bit changed and those that do not, decides each class's
// fate, then rewrites the references whose class number changes. The
// small fields' first walk keeps the runs of values whose class may
// change, so the second visits those alone.

// place puts position p into the classes of exactly the values cond holds
// for (an empty set in every field takes it out of all), field by field,
// and returns how many classes it changed or split. p is a slack position
// (in no class: fresh) for an append, a rule's entry for a deletion.
func (g *Generation) place(p uint32, cond Cond, fresh bool) (int, error) {
	cp := newClassPlan(g, p)
	cp.fresh = fresh
	defer cp.release()
	// First walk: count.
	for f := Field(0); f < NumFields; f++ {
		if g.Active&(1<<uint(f)) == 0 {
			continue
		}
		s := cond[f]
		switch f.Kind() {
		case KindSmall:
			g.smallRuns(f, s, cp.countRun)
		case KindAddr:
			a := f.AddrIndex()
			forSetPieces(g.Bounds[g.AddrBase[a]:g.AddrBase[a]+g.AddrCount[a]], s, func(_ U128, c uint32, want bool) {
				cp.count(c, want, 1)
			})
		case KindHash:
			for hk, c := range g.Hash {
				if hk.Field == uint32(f) {
					cp.count(c, s.Contains(U64(hk.Value)), 1)
				}
			}
			cp.count(g.DefaultClass[f], s.Contains(unmentioned(f, nil)), 1)
		}
	}
	if len(cp.changed) > maxAppendClasses {
		return 0, fmt.Errorf("%w: more than %d classes", ErrNotAppendable, maxAppendClasses)
	}
	cp.decide()
	// Second walk: rewrite the references whose class number changes.
	br := newBoundsRewrite(g, cond)
	for f := Field(0); f < NumFields; f++ {
		if g.Active&(1<<uint(f)) == 0 {
			continue
		}
		s := cond[f]
		switch f.Kind() {
		case KindSmall:
			bit := uint32(1) << uint(f)
			switch {
			case cp.kept && cp.keptFields&bit != 0 || cp.overflow[f] && cp.flippedFields&bit != 0:
				// References that keep a class that gets a copy
				// (rare: most of its references flip it), which
				// the first walk did not keep, or more runs than
				// it kept: walk the field again.
				g.smallRuns(f, s, cp.rewriteRun)
			case cp.flippedFields&bit != 0:
				for _, r := range cp.runs[f] {
					cp.rewriteRun(f, r.lo, r.hi, r.class, r.want)
				}
			}
		case KindAddr:
			if err := br.place(f, s, cp.setBit); err != nil {
				return 0, err
			}
		case KindHash:
			for hk, c := range g.Hash {
				if hk.Field == uint32(f) {
					g.Hash[hk] = cp.setBit(c, s.Contains(U64(hk.Value)))
				}
			}
			g.DefaultClass[f] = cp.setBit(g.DefaultClass[f], s.Contains(unmentioned(f, nil)))
		}
	}
	br.finish()
	return len(cp.changed), nil
}

// reserveClasses makes room in g's chunk and class arrays for the classes
// the places of n positions may copy (up to maxAppendClasses each): the
// arrays read from a running generation have no spare capacity, and
// appending a class at a time regrew the chunk array (520 bytes a chunk)
// again and again.
func (g *Generation) reserveClasses(n int) {
	classes := n * maxAppendClasses
	g.Chunks = slices.Grow(g.Chunks, classes)
	// The class table grows a block at a time (ClassTable.Append).
}

// classTally is what place's first walk learnt of one class: how many
// references want p's bit as the class has it (keep) and how many want
// it flipped (flip), and the class's bit (1: set, 2: clear, 0: not read
// yet).
type classTally struct {
	keep, flip uint32
	bit        uint8
	// keepFields and flipFields have bit f set when a reference of
	// small field f keeps or flips the class's bit.
	keepFields, flipFields uint32
	// keptAs is the class the keeping references get once decided, when
	// not the class itself (0: itself; a class made is never 0), flippedAs
	// the one the flipping references get.
	keptAs, flippedAs uint32
}

// A small field's bit in classTally's masks.
var _ = [1]struct{}{}[NumFields/33]

// maxSmallRuns bounds the runs of a small field place's first walk keeps
// for the second: a field with more (one the rule does not constrain,
// where values of many classes alternate) is walked again if one of its
// classes needs new numbers (most need none: they are flipped where they
// are).
const maxSmallRuns = 4096

// smallRun is a run of a small field's entries [lo, hi) of one class, all
// wanting p or all not, whose class may change (place's second walk).
type smallRun struct {
	lo, hi uint32
	class  uint32
	want   bool
}

// classPlan is the decision, per class, of what happens to it when p is
// placed (see above).
type classPlan struct {
	g       *Generation
	nchunks int
	k       int    // the chunk of p
	w       int    // the word of p in its chunk
	bit     uint64 // p's bit in its word
	tally   []classTally
	// fresh says p is in no class (a slack position).
	fresh   bool
	touched []uint32 // the classes whose tally is not zero
	changed []uint32 // the classes some reference wants flipped
	runs    [NumFields][]smallRun
	// overflow[f]: small field f has more than maxSmallRuns runs that
	// flip (runs[f] has the first).
	overflow [NumFields]bool
	// flippedFields and keptFields have bit f set when small field f has
	// references that get a new class number (classTally.flippedAs, keptAs).
	flippedFields, keptFields uint32
	// kept says some class's keeping references get a new class
	// (classTally.keptAs).
	kept bool
	// chunkFlips memoises the chunk with p's bit flipped, by chunk id.
	chunkFlips map[uint32]uint32
}

// tallies keeps the per-class tallies between places (an append's at
// 10,000 rules counts about 130,000 classes, 2.6 MB), zeroed: a place
// clears the tallies it touched (classPlan.touched) when it ends. Not a
// sync.Pool: the agent's collections between commands emptied it, and
// each append then allocated and zeroed them again. At most
// maxKeptTallies are kept; places at the same time get their own.
var tallies struct {
	sync.Mutex
	t []classTally
}

// maxKeptTallies bounds the tallies kept between places (20 MB).
const maxKeptTallies = 1 << 20

func newClassPlan(g *Generation, p uint32) *classPlan {
	nchunks := int(g.NumChunks)
	nclass := g.ClassChunks.Len()
	tallies.Lock()
	tally := tallies.t
	tallies.t = nil
	tallies.Unlock()
	if cap(tally) < nclass {
		tally = make([]classTally, nclass, nclass+nclass/4)
	} else {
		tally = tally[:nclass]
	}
	return &classPlan{
		g: g, nchunks: nchunks,
		k:          int(p) / ChunkBits,
		w:          (int(p) % ChunkBits) / 64,
		bit:        uint64(1) << (p % 64),
		tally:      tally,
		chunkFlips: map[uint32]uint32{},
	}
}

// release keeps the tallies for the next place, zeroed.
func (cp *classPlan) release() {
	for _, c := range cp.touched {
		cp.tally[c] = classTally{}
	}
	t := cp.tally[:0]
	cp.tally = nil
	if cap(t) > maxKeptTallies {
		return
	}
	tallies.Lock()
	if cap(t) > cap(tallies.t) {
		tallies.t = t
	}
	tallies.Unlock()
}

// hasBit reports whether class c holds p.
func (cp *classPlan) hasBit(c uint32) bool {
	t := &cp.tally[c]
	if t.bit == 0 {
		cp.touched = append(cp.touched, c)
		t.bit = 2
		if cp.fresh {
			return false // no chunk to read
		}
		id := cp.g.ClassChunks.At(c, uint32(cp.k))
		if cp.g.Chunks[id].Words[cp.w]&cp.bit != 0 {
			t.bit = 1
		}
	}
	return t.bit == 1
}

// count adds n references to class c that want p (want) or not.
func (cp *classPlan) count(c uint32, want bool, n uint32) {
	cp.countIn(c, want, n, 0)
}

// countIn is count for references of the small fields in mask fields.
func (cp *classPlan) countIn(c uint32, want bool, n, fields uint32) {
	t := &cp.tally[c]
	if cp.hasBit(c) == want {
		t.keep += n
		t.keepFields |= fields
		return
	}
	t.flipFields |= fields
	if t.flip == 0 {
		cp.changed = append(cp.changed, c)
	}
	t.flip += n
}

// countRun counts a run of small field f's entries and keeps it for the
// second walk when it wants p's bit flipped.
func (cp *classPlan) countRun(f Field, lo, hi uint32, c uint32, want bool) {
	cp.countIn(c, want, hi-lo, 1<<uint(f))
	if cp.hasBit(c) == want {
		return
	}
	if len(cp.runs[f]) < maxSmallRuns {
		cp.runs[f] = append(cp.runs[f], smallRun{lo: lo, hi: hi, class: c, want: want})
	} else {
		cp.overflow[f] = true
	}
}

// rewriteRun writes the class a run of small field f's entries refers to
// once the plan is carried out, when it is not c.
func (cp *classPlan) rewriteRun(f Field, lo, hi uint32, c uint32, want bool) {
	if int(c) >= len(cp.tally) {
		return // a class this place made: written already
	}
	if n := cp.setBit(c, want); n != c {
		for i := lo; i < hi; i++ {
			cp.g.Small[i] = n
		}
		cp.g.SmallWritten = append(cp.g.SmallWritten, lo, hi)
		cp.g.noteSmallWrite(f, lo, hi)
	}
}

// decide settles each changed class's fate: flipped where it is when no
// reference keeps it (or most flip it; the keeping ones then get a copy of
// it as it was), else copied, flipped, for the flipping references.
func (cp *classPlan) decide() {
	g := cp.g
	for _, c := range cp.changed {
		t := cp.tally[c]
		old := g.ClassChunks.At(c, uint32(cp.k))
		flip := cp.flipChunk(old)
		// Row is asked again after copyClass, whose Append may move
		// the table's last block.
		switch {
		case c != 0 && t.keep == 0:
			g.ClassChunks.Row(c)[cp.k] = flip
		case c != 0 && t.flip > t.keep:
			cp.tally[c].keptAs = cp.copyClass(c, old)
			cp.kept = true
			cp.keptFields |= t.keepFields
			g.ClassChunks.Row(c)[cp.k] = flip
		default:
			cp.tally[c].flippedAs = cp.copyClass(c, flip)
			cp.flippedFields |= t.flipFields
		}
	}
}

// copyClass adds a class with c's chunks but chunk k, which is id, and
// returns its number.
func (cp *classPlan) copyClass(c, id uint32) uint32 {
	t := &cp.g.ClassChunks
	n := t.Append(t.Row(c))
	t.Row(n)[cp.k] = id
	return n
}

// flipChunk returns the id of chunk id with p's bit flipped: 0 when that
// leaves it empty, else a new chunk (one per chunk flipped: the chunks are
// never changed where they are, other classes share them).
func (cp *classPlan) flipChunk(id uint32) uint32 {
	if n, ok := cp.chunkFlips[id]; ok {
		return n
	}
	g := cp.g
	ch := g.Chunks[id]
	ch.Words[cp.w] ^= cp.bit
	if ch.Words[cp.w] != 0 {
		ch.Summary |= 1 << uint(cp.w)
	} else {
		ch.Summary &^= 1 << uint(cp.w)
	}
	n := uint32(0) // the empty chunk
	if ch.Summary != 0 {
		n = uint32(len(g.Chunks))
		g.Chunks = append(g.Chunks, ch)
	}
	cp.chunkFlips[id] = n
	return n
}

// setBit returns the class a reference to class c that wants p (want) or
// not refers to once the plan is carried out.
func (cp *classPlan) setBit(c uint32, want bool) uint32 {
	n := cp.tally[c].flippedAs
	if cp.hasBit(c) == want {
		n = cp.tally[c].keptAs
	}
	if n == 0 {
		return c
	}
	return n
}

// smallRuns calls run for the runs of small field f's entries (indexes
// into g.Small) that have one class and all want p or all not (s holds
// the values that want it, nil: all).
func (g *Generation) smallRuns(f Field, s *Set, run func(f Field, lo, hi, c uint32, want bool)) {
	base, dom := int(g.SmallBase[f]), g.SmallDomain(f)
	ivs := []Interval{{Lo: U64(0), Hi: maxU128}}
	if s != nil {
		ivs = s.Ivs
	}
	if f != FieldCt || s == nil {
		// (Every FieldCt value wants p without a condition: the
		// value order does as well as the conditions'.)
		small := g.Small[base : base+dom]
		starts := g.runStarts(f, small)
		forValueRuns(dom, ivs, func(lo, hi int, want bool) {
			r, found := slices.BinarySearch(starts, uint32(lo))
			if !found {
				r-- // starts[0] is 0: lo is inside run r
			}
			for k := lo; k < hi; r++ {
				end := hi
				if r+1 < len(starts) && int(starts[r+1]) < hi {
					end = int(starts[r+1])
				}
				run(f, uint32(base+k), uint32(base+end), small[k], want)
				k = end
			}
		})
		return
	}
	// k runs in the order of the field's conditions, which for FieldCt
	// is not the value order (Field.smallIndex): an entry extends the
	// run before it when it follows it in the array and agrees.
	j := 0 // the first interval not below k
	var cur smallRun
	for k := 0; k < dom; k++ {
		uk, i := U64(uint64(k)), uint32(base+f.smallIndex(k))
		for j < len(ivs) && ivs[j].Hi.Less(uk) {
			j++
		}
		c, want := g.Small[i], j < len(ivs) && !uk.Less(ivs[j].Lo)
		if k > 0 && i == cur.hi && c == cur.class && want == cur.want {
			cur.hi++
			continue
		}
		if k > 0 {
			run(f, cur.lo, cur.hi, cur.class, cur.want)
		}
		cur = smallRun{lo: i, hi: i + 1, class: c, want: want}
	}
	if dom > 0 {
		run(f, cur.lo, cur.hi, cur.class, cur.want)
	}
}

// smallIndex is where each small field's runs of one class start in
// Generation.Small, kept on the generation between changes in place: the
// walks of place visit a field's runs instead of its entries (a port
// field's 65,536, which do not depend on the rules: 0.2–0.3 ms of every
// append or deletion on an empty ruleset). Small is written, once the
// generation is made, by rewriteRun alone, which records each range it
// wrote; the next use brings the field's starts up to date from them.
type smallIndex struct {
	// starts are offsets into each field's entries, ascending, 0 first
	// (when the field has entries); nil: not built yet.
	starts [NumFields][]uint32
	// written are the ranges (pairs of offsets: first, after last)
	// written since starts was last brought up to date.
	written [NumFields][]uint32
}

// runStarts returns where small field f's runs of one class start in
// small (its entries), building them on the first use and bringing them
// up to date with the ranges written since the last.
func (g *Generation) runStarts(f Field, small []uint32) []uint32 {
	if g.runs == nil {
		g.runs = &smallIndex{}
	}
	ix := g.runs
	if ix.starts[f] == nil {
		st := make([]uint32, 0, 16)
		for k := 0; k < len(small); {
			st = append(st, uint32(k))
			k += 1 + runLen(small[k+1:], small[k])
		}
		ix.starts[f], ix.written[f] = st, ix.written[f][:0]
		return st
	}
	w := ix.written[f]
	for i := 0; i+1 < len(w); i += 2 {
		ix.starts[f] = restartRuns(ix.starts[f], small, int(w[i]), int(w[i+1]))
	}
	ix.written[f] = w[:0]
	return ix.starts[f]
}

// restartRuns returns starts (run starts of small, ascending) with the
// positions lo…hi decided again from small as it is, after a write of
// small[lo:hi]: only those can have begun or ended a run. Decided from
// the entries as they are, whatever was written later, ranges may be
// taken in any order.
func restartRuns(starts, small []uint32, lo, hi int) []uint32 {
	i, _ := slices.BinarySearch(starts, uint32(lo))
	j, _ := slices.BinarySearch(starts, uint32(hi)+1)
	var now []uint32
	for p := lo; p <= hi && p < len(small); p++ {
		if p == 0 || small[p-1] != small[p] {
			now = append(now, uint32(p))
		}
	}
	return slices.Replace(starts, i, j, now...)
}

// noteSmallWrite records that small field f's entries lo…hi-1 (indexes
// into Small) were written, for runStarts.
func (g *Generation) noteSmallWrite(f Field, lo, hi uint32) {
	if g.runs == nil || g.runs.starts[f] == nil {
		return
	}
	base := g.SmallBase[f]
	g.runs.written[f] = append(g.runs.written[f], lo-base, hi-base)
}

// runLen returns how many of s's first entries are c. Every append and
// deletion in place scans each active small field's entries this way
// (131,334 with both port fields), so it compares eight at a time, their
// differences from c or'ed (about half the time of one at a time).
func runLen(s []uint32, c uint32) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		q := s[i : i+8 : i+8]
		if (q[0]^c)|(q[1]^c)|(q[2]^c)|(q[3]^c)|(q[4]^c)|(q[5]^c)|(q[6]^c)|(q[7]^c) != 0 {
			break
		}
	}
	for i < len(s) && s[i] == c {
		i++
	}
	return i
}

// forValueRuns splits the values [0, dom) into the runs that ivs (in
// order) hold, want, or do not, and calls fn for each in value order.
func forValueRuns(dom int, ivs []Interval, fn func(lo, hi int, want bool)) {
	// clamp returns v as a value below dom, dom when beyond it.
	clamp := func(v U128) int {
		if v.Hi != 0 || v.Lo >= uint64(dom) {
			return dom
		}
		return int(v.Lo)
	}
	j := 0 // the first interval not below k
	for k := 0; k < dom; {
		for j < len(ivs) && ivs[j].Hi.Less(U64(uint64(k))) {
			j++
		}
		want, end := false, dom
		switch {
		case j == len(ivs):
		case !U64(uint64(k)).Less(ivs[j].Lo):
			want = true
			if hi := clamp(ivs[j].Hi); hi < dom {
				end = hi + 1
			}
		default:
			end = clamp(ivs[j].Lo)
		}
		fn(k, end, want)
		k = end
	}
}
