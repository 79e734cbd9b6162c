package settable

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// setClock converts the sets' wall-clock expiry times to the data plane's
// CLOCK_MONOTONIC (bpf_ktime_get_ns) at one instant.
type setClock struct {
	wall time.Time
	mono uint64 // ns
}

// nowClock reads both clocks.
func nowClock() (setClock, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return setClock{}, fmt.Errorf("read the monotonic clock: %w", err)
	}
	return setClock{wall: time.Now(), mono: uint64(ts.Nano())}, nil
}

// expiry returns the monotonic time of wall-clock time t (0 for the zero
// time: never), and whether t is still ahead.
func (c setClock) expiry(t time.Time) (uint64, bool) {
	if t.IsZero() {
		return 0, true
	}
	d := t.Sub(c.wall)
	if d <= 0 {
		return 0, false
	}
	return c.mono + uint64(d), true
}

// wallOf returns the wall-clock time of monotonic time mono (ns; 0: the
// zero time, never).
func (c setClock) wallOf(mono uint64) time.Time {
	if mono == 0 {
		return time.Time{}
	}
	return c.wall.Add(time.Duration(int64(mono) - int64(c.mono))).Truncate(time.Second)
}
