package cli

import (
	"runtime"
	"runtime/debug"
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
// install: off from compilePaceFrom of heap (with a collection first when
// the heap holds more than twice its live part), Go's below it, in the
// agent and under a GOGC of the environment, and the process's own pace
// again after.
func TestCompilePace(t *testing.T) {
	for _, tc := range []struct {
		name, gogc string
		agent      bool
		heap       int
		want       int
	}{
		{"small heap", "", false, 0, 90},
		{"large heap", "", false, 2 * compilePaceFrom, -1},
		{"large heap in the agent", "", true, 2 * compilePaceFrom, 90},
		{"large heap, GOGC set", "150", false, 2 * compilePaceFrom, 90},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.gogc)
			servingAgent.Store(tc.agent)
			defer servingAgent.Store(false)
			prev := debug.SetGCPercent(90)
			defer debug.SetGCPercent(prev)
			runtime.GC() // the small case's heap is the test binary's
			held := make([]byte, tc.heap)
			for i := range held {
				held[i] = 1
			}
			reset := compilePace(false)
			if got := gcPercent(); got != tc.want {
				t.Errorf("during the compile: GOGC %d, want %d", got, tc.want)
			}
			reset()
			if got := gcPercent(); got != 90 {
				t.Errorf("after: GOGC %d, want the process's 90", got)
			}
			runtime.KeepAlive(held)
		})
	}
}
