package cli

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// gcPercent returns the collector's current pace without changing it.
func gcPercent() int {
	pct := debug.SetGCPercent(100)
	debug.SetGCPercent(pct)
	return pct
}

// TestFrontEndPace checks the collector's pace during a restore's front
// end: frontEndGCPercent, XFW_FRONTEND_GOGC's when set, left alone under
// a GOGC of the environment, and the process's own pace again after.
func TestFrontEndPace(t *testing.T) {
	for _, tc := range []struct {
		name, gogc, frontEnd string
		want                 int
	}{
		{"default", "", "", frontEndGCPercent},
		{"XFW_FRONTEND_GOGC", "", "250", 250},
		{"XFW_FRONTEND_GOGC not a number", "", "x", frontEndGCPercent},
		{"GOGC set", "150", "250", 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			t.Setenv("XFW_FRONTEND_GOGC", tc.frontEnd)
			prev := debug.SetGCPercent(90)
			defer debug.SetGCPercent(prev)
			reset := frontEndPace()
			if got := gcPercent(); got != tc.want {
				t.Errorf("during the front end: GOGC %d, want %d", got, tc.want)
			}
			reset()
			if got := gcPercent(); got != 90 {
				t.Errorf("after: GOGC %d, want the process's 90", got)
			}
		})
	}
}

// TestCompilePace checks the collector's pace during a compile and
// install: off from compilePaceFrom of heap, with one collection first
// when the command released a ruleset (or the heap is more than half
// garbage, which this test's live heap is not); Go's below it, in the
// agent and under a GOGC of the environment; the process's own pace
// again after.
func TestCompilePace(t *testing.T) {
	for _, tc := range []struct {
		name, gogc      string
		agent, released bool
		heap            int
		want, cycles    int
	}{
		{"small heap", "", false, true, 0, 90, 0},
		{"large heap", "", false, false, 2 * compilePaceFrom, -1, 0},
		{"large heap, a ruleset released", "", false, true, 2 * compilePaceFrom, -1, 1},
		{"large heap in the agent", "", true, true, 2 * compilePaceFrom, 90, 0},
		{"large heap, GOGC set", "150", false, true, 2 * compilePaceFrom, 90, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			inAgent.Store(tc.agent)
			defer inAgent.Store(false)
			prev := debug.SetGCPercent(90)
			defer debug.SetGCPercent(prev)
			held := make([]byte, tc.heap)
			for i := range held {
				held[i] = 1
			}
			runtime.GC() // held is live heap: no garbage to collect
			before := gcCycles()
			reset := compilePace(tc.released)
			if got := gcPercent(); got != tc.want {
				t.Errorf("during the compile: GOGC %d, want %d", got, tc.want)
			}
			if got := gcCycles() - before; got != tc.cycles {
				t.Errorf("collections at the compile's start: %d, want %d", got, tc.cycles)
			}
			reset()
			if got := gcPercent(); got != 90 {
				t.Errorf("after: GOGC %d, want the process's 90", got)
			}
			runtime.KeepAlive(held)
		})
	}
}

// gcCycles returns the number of collections the process completed.
func gcCycles() int {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
