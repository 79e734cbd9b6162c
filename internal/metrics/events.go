package metrics

import (
	"cmp"
	"slices"
	"sync"
)

// EventKind is what an agent did to an interface.
type EventKind string

const (
	// Attach is a first attachment of xfw's programs to an interface.
	Attach EventKind = "attach"
	// Reattach is an attachment that put back programs an interface had
	// lost (or that another program had replaced).
	Reattach EventKind = "reattach"
)

// Events counts what an agent attached where, for the metric
// xfw_attach_events_total. Its zero value is ready to use, and its
// methods may be called from any goroutine.
type Events struct {
	mu     sync.Mutex
	counts map[eventKey]uint64
}

// eventKey is one counter of Events.
type eventKey struct {
	iface string
	kind  EventKind
}

// eventCount is one counter of Events and its value.
type eventCount struct {
	eventKey
	n uint64
}

// Add counts one event of kind on the interface iface.
func (e *Events) Add(iface string, kind EventKind) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = map[eventKey]uint64{}
	}
	e.counts[eventKey{iface, kind}]++
}

// snapshot returns the counters, by interface then kind; none for a nil
// Events.
func (e *Events) snapshot() []eventCount {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	out := make([]eventCount, 0, len(e.counts))
	for k, n := range e.counts {
		out = append(out, eventCount{k, n})
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b eventCount) int {
		return cmp.Or(cmp.Compare(a.iface, b.iface), cmp.Compare(a.kind, b.kind))
	})
	return out
}
