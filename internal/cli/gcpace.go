package cli

import (
	"os"
	"runtime/debug"
	"strconv"
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
