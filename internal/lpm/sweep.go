package lpm

// span is one prefix projected on a 64-bit key space: the inclusive interval
// [first, last] it covers, and its value (or result word).
type span struct {
	first, last uint64
	result      uint64
}

// boundary is one range of a sweep's output: from start up to the next
// boundary's start, the answer is result.
type boundary struct {
	start  uint64
	result uint64
}

// sweeper turns nested intervals into elementary ranges; its buffers are
// reused between calls.
type sweeper struct {
	stack []span
	out   []boundary
}

// emit appends a boundary, keeping the output minimal: a boundary at the same
// start as the previous one replaces it, and a boundary whose result equals
// the previous one's is dropped.
func (s *sweeper) emit(start, result uint64) {
	n := len(s.out)
	if n > 0 && s.out[n-1].start == start {
		s.out = s.out[:n-1]
		n--
	}
	if n > 0 && s.out[n-1].result == result {
		return
	}
	s.out = append(s.out, boundary{start, result})
}

// sweep returns the ranges of the window [first, last] given the result def
// of the window where no span applies and spans sorted by first ascending,
// then by size descending (a span before the spans it contains). Spans are
// the intervals of prefixes: two spans are disjoint or nested. The returned
// slice is valid until the next call.
func (s *sweeper) sweep(first, last uint64, def uint64, spans []span) []boundary {
	s.out = s.out[:0]
	s.stack = s.stack[:0]
	s.emit(first, def)
	for _, sp := range spans {
		s.popBefore(sp.first, last, def)
		s.stack = append(s.stack, sp)
		s.emit(sp.first, sp.result)
	}
	s.popAll(last, def)
	return s.out
}

// popBefore closes the open spans that end before key.
func (s *sweeper) popBefore(key, last, def uint64) {
	for n := len(s.stack); n > 0 && s.stack[n-1].last < key; n = len(s.stack) {
		s.closeTop(last, def)
	}
}

// popAll closes every open span.
func (s *sweeper) popAll(last, def uint64) {
	for len(s.stack) > 0 {
		s.closeTop(last, def)
	}
}

// closeTop pops the innermost open span; the range after it takes the result
// of the span enclosing it (or def).
func (s *sweeper) closeTop(last, def uint64) {
	n := len(s.stack)
	end := s.stack[n-1].last
	s.stack = s.stack[:n-1]
	if end == last {
		return // the span reaches the window's end: nothing follows it
	}
	next := def
	if n > 1 {
		next = s.stack[n-2].result
	}
	s.emit(end+1, next)
}
