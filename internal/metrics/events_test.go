package metrics

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestEventsCountConcurrently adds events from many goroutines and reads
// them back by interface, then kind.
func TestEventsCountConcurrently(t *testing.T) {
	var e Events
	const goroutines, each = 8, 100
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				e.Add("eth1", Reattach)
				if i%10 == 0 {
					e.Add("eth0", Attach)
				}
				e.snapshot() // reads race with the adds
			}
		}()
	}
	wg.Wait()
	want := []eventCount{
		{eventKey{"eth0", Attach}, goroutines * each / 10},
		{eventKey{"eth1", Reattach}, goroutines * each},
	}
	if got := e.snapshot(); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestEventsOrder lists the counters by interface, then kind, whatever
// the order they were first counted in; a nil Events lists none.
func TestEventsOrder(t *testing.T) {
	var e Events
	for _, ev := range []eventKey{{"veth9", Reattach}, {"eth0", Reattach}, {"veth9", Attach}, {"eth0", Attach}} {
		e.Add(ev.iface, ev.kind)
	}
	var got []string
	for _, c := range e.snapshot() {
		got = append(got, fmt.Sprintf("%s/%s=%d", c.iface, c.kind, c.n))
	}
	want := []string{"eth0/attach=1", "eth0/reattach=1", "veth9/attach=1", "veth9/reattach=1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	var none *Events
	if got := none.snapshot(); len(got) != 0 {
		t.Errorf("a nil Events lists %v", got)
	}
}
