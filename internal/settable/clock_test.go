package settable

import (
	"testing"
	"time"
)

// TestSetClockExpiry checks the conversion of wall-clock expiry times.
func TestSetClockExpiry(t *testing.T) {
	now := time.Now()
	clk := setClock{wall: now, mono: 5_000}
	for _, tt := range []struct {
		t    time.Time
		mono uint64
		live bool
	}{
		{time.Time{}, 0, true},
		{now.Add(3 * time.Second), 5_000 + 3_000_000_000, true},
		{now, 0, false},
		{now.Add(-time.Second), 0, false},
	} {
		if m, live := clk.expiry(tt.t); m != tt.mono || live != tt.live {
			t.Errorf("expiry(%v) = %d, %v; want %d, %v", tt.t.Sub(now), m, live, tt.mono, tt.live)
		}
	}
}
