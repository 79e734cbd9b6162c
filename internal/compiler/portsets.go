package compiler

import (
	"sync/atomic"

	"github.com/xfw-dev/xfw/internal/ir"
)

// portValues is the number of port values, 0–65535.
const portValues = 1 << 16

// minPortSetsRules is the ruleset size from which a compile shares its
// rules' single-port sets (portSets): below it the tables' 1.5 MiB would
// outweigh what sharing saves.
const minPortSetsRules = 1 << 14

// portSets shares, within one compile, the sets of a tcp or udp match's
// single port (--sport P, --dport Q) and their unions with the cut-short
// sentinels that mergeHotdrop makes, one set per port value for every
// rule that names it instead of two sets a port field and rule (a
// 100K-rule compile allocated 36 MB for them). Sets are never changed in
// place, so rules share them as they share portsAll. Safe for concurrent
// use: precomputeTerms's workers fill it; a port two of them meet first
// at once may get two equal sets, one of which is kept.
type portSets struct {
	point, hot, hotShort [portValues]atomic.Pointer[Set]
}

// shared returns table's set for port, made by mk when the table has none.
func shared(table *[portValues]atomic.Pointer[Set], port uint64, mk func() *Set) *Set {
	if s := table[port].Load(); s != nil {
		return s
	}
	s := mk()
	if table[port].CompareAndSwap(nil, s) {
		return s
	}
	return table[port].Load()
}

// singlePort returns the port s holds and true when s is one port value.
func singlePort(s *Set) (uint64, bool) {
	if s == nil || len(s.Ivs) != 1 {
		return 0, false
	}
	iv := s.Ivs[0]
	if iv.Lo != iv.Hi || iv.Lo.Hi != 0 || iv.Lo.Lo >= portValues {
		return 0, false
	}
	return iv.Lo.Lo, true
}

// sharedPort is the single-port set a termBuilder last took from its
// portSets for a port field, and the port: mergeHotdrop knows the port of
// that set without reading it (made by another rule, it is seldom in the
// cache).
type sharedPort struct {
	set  *Set
	port uint64
}

// portSet is the package's portSet for port field f, a single port's set
// shared through b.ports when b has one.
func (b *termBuilder) portSet(f Field, pm ir.PortMatch) *Set {
	if b.ports == nil || !pm.Set || pm.Invert || pm.Range.First != pm.Range.Last {
		return portSet(pm)
	}
	port := uint64(pm.Range.First)
	s := shared(&b.ports.point, port, func() *Set { return portSet(pm) })
	b.sharedPorts[portIndex(f)] = sharedPort{s, port}
	return s
}

// hotUnion returns unionOf(s, valTruncSet), with shortPortsAll when short:
// mergeHotdrop's set for a port field, shared through p (nil: none) when s
// is a single port (known's set, or found by reading s).
func (p *portSets) hotUnion(s *Set, short bool, known sharedPort) *Set {
	port, ok := known.port, p != nil && s == known.set
	if p != nil && !ok {
		port, ok = singlePort(s)
	}
	switch {
	case p == nil || !ok:
	case short:
		return shared(&p.hotShort, port, func() *Set { return unionOf(s, valTruncSet, shortPortsAll) })
	default:
		return shared(&p.hot, port, func() *Set { return unionOf(s, valTruncSet) })
	}
	if short {
		return unionOf(s, valTruncSet, shortPortsAll)
	}
	return unionOf(s, valTruncSet)
}

// portIndex is port field f's index in termBuilder.sharedPorts: 0 for
// FieldSport, 1 for FieldDport.
func portIndex(f Field) int {
	if f == FieldDport {
		return 1
	}
	return 0
}
