package dataplane

import (
	"fmt"
	"os"
	"time"
)

// traceOn enables timing lines on stderr (XFW_TRACE=1): where a command
// spends its time, for profiling update latency.
var traceOn = os.Getenv("XFW_TRACE") != ""

// TraceSince prints the time since start under label when XFW_TRACE is set
// and returns the current time, so calls chain phase by phase.
func TraceSince(label string, start time.Time) time.Time {
	now := time.Now()
	if traceOn {
		fmt.Fprintf(os.Stderr, "xfw trace: %-28s %8.2f ms\n", label, float64(now.Sub(start).Microseconds())/1000)
	}
	return now
}
