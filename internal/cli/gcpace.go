package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync/atomic"
)

// frontEndGCPercent is the collector's pace (GOGC) while a restore reads
// and parses its input. The parser's garbage is short-lived (a line's
// words, option state) while the live heap is the parsed ruleset, which
// is far smaller than the compile's peak after it: collecting half as
// often there costs no peak memory. The compile runs at the pace the
// process had (Go's default), so the peak stays where it was.
const frontEndGCPercent = 400

// frontEndPace sets the collector's pace for a restore's front end and
// returns the function that sets it back. XFW_FRONTEND_GOGC (a
// percentage) replaces frontEndGCPercent, for measurements; a GOGC in
// the environment leaves the pace alone.
func frontEndPace() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	pct := frontEndGCPercent
	if v, err := strconv.Atoi(os.Getenv("XFW_FRONTEND_GOGC")); err == nil && v > 0 {
		pct = v
	}
	prev := debug.SetGCPercent(pct)
	return func() { debug.SetGCPercent(prev) }
}

// inAgent is set in the agent's process (runAgent), which outlives the
// commands it serves and the compiles it runs: compilePace leaves its
// pace alone.
var inAgent atomic.Bool

// compilePaceFrom is the heap from which compilePace turns the collector
// off: below it (every ruleset but large ones) a cycle costs little and
// the pace stays Go's.
const compilePaceFrom = 64 << 20

// compilePace sets the collector's pace for a command's compile and
// install, which the process ends after, and returns the function that
// sets the pace back: one collection now when the heap holds more than
// twice what the last cycle left live (the front end's garbage) or when
// released says the command let a large ruleset go since (a flushing
// restore's decoded running ruleset, once its counters are taken; the
// running generation an -A, -I, -D or -N read back and could not use:
// commitReleasing), then
// none until the install ends; the process's memory limit (cmd/xfw) stays
// the backstop. At kube-proxy's 10K services the default pace ran two or
// three cycles there, each marking the parsed ruleset and the compile's
// growing state (213 to 620 MB live; 1–1.5 s of CPU on two busy cores)
// while the compile allocates about 500 MB in all: one cycle before it
// leaves the peak about where it was. It changes nothing in the agent,
// whose process goes on after the command (collectAfterReply paces it),
// below compilePaceFrom, or with a GOGC in the environment.
func compilePace(released bool) (restore func()) {
	if os.Getenv("GOGC") != "" || inAgent.Load() {
		return func() {}
	}
	s := slices.Clone(gcMetrics)
	metrics.Read(s)
	if s[2].Value.Uint64() < compilePaceFrom {
		return func() {}
	}
	// Off first: SetGCPercent waits for a cycle under way (the front
	// end's pace set back may have started one) to end.
	prev := debug.SetGCPercent(-1)
	metrics.Read(s)
	if live, heap := s[0].Value.Uint64(), s[2].Value.Uint64(); released || heap > 2*live {
		runtime.GC()
	}
	return func() { debug.SetGCPercent(prev) }
}

// The agent's collector. A served command at 10,000 rules allocates about
// 3.5 MB over a live heap of 13–16 MB: at Go's default pace the collector
// ran every third command, marking for 5–10 ms of wall time beside it on
// two cores (about 2 ms of its median). The agent paces it with a headroom
// of at least agentHeadroom over the live heap (a GOGC above 100 while the
// heap is small; 100 from 64 MB of live heap up, so a large ruleset's
// compile peaks where it did), and after a command's reply has been sent it
// collects when less than a quarter of the headroom is left, so the cycle
// runs between commands instead of during the next one. The memory limit
// (cmd/xfw) stays the backstop. A GOGC in the environment leaves the pace
// and the collection after replies alone.

// agentHeadroom is the least the heap may grow by between the agent's
// collections.
const agentHeadroom = 64 << 20

// gcMetrics are the runtime's figures agentPace and collectAfterReply read.
var gcMetrics = []metrics.Sample{
	{Name: "/gc/heap/live:bytes"},
	{Name: "/gc/heap/goal:bytes"},
	{Name: "/memory/classes/heap/objects:bytes"},
}

// collecting is set while a collection started after a reply runs.
var collecting atomic.Bool

// agentPace sets the collector's pace for the live heap now (the last
// cycle's): a headroom of agentHeadroom or the live heap, whichever is
// larger.
func agentPace() {
	if os.Getenv("GOGC") != "" {
		return
	}
	s := slices.Clone(gcMetrics)
	metrics.Read(s)
	live := s[0].Value.Uint64()
	if live == 0 {
		return
	}
	debug.SetGCPercent(int(max(100, 100*uint64(agentHeadroom)/live)))
}

// collectAfterReply starts a collection in the background when the heap has
// used three quarters of its headroom (the next command would likely run
// one), then sets the pace for the live heap it leaves.
func collectAfterReply() {
	if os.Getenv("GOGC") != "" {
		return
	}
	s := slices.Clone(gcMetrics)
	metrics.Read(s)
	live, goal, heap := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	if goal <= live || heap < live+(goal-live)*3/4 || !collecting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer collecting.Store(false)
		runtime.GC()
		agentPace()
	}()
}
