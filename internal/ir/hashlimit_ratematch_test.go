package ir

import "testing"

// TestHashLimitRateWindow checks a --hashlimit-rate-match entry's rate and
// burst (rateinfo_init): packets HashLimitScale / Avg with the burst
// added; bytes user2rate_bytes with the burst as a multiple (the rate
// when 0). The byte averages are libxt_hashlimit's bytes_to_cost
// (2^32-1 / (bytes >> 4 + 1)): 16kb/s is 16384, as the kernel passes 15
// datagrams of 1,028 bytes and refuses the 16th (tests/e2e
// TestHashLimitRateMatchAgainstKernel).
func TestHashLimitRateWindow(t *testing.T) {
	for _, tt := range []struct {
		name        string
		m           HashLimitMatch
		rate, burst uint64
	}{
		{"2/sec burst 3", HashLimitMatch{Avg: HashLimitScale / 2, Burst: 3}, 2, 5},
		{"40/sec interval 10", HashLimitMatch{Avg: HashLimitScale / 40 * 10, Burst: 20}, 4, 24},
		{"40/min", HashLimitMatch{Avg: HashLimitScale * 60 / 40, Burst: 5}, 0, 5},
		{"16kb/s", HashLimitMatch{Mode: HashLimitBytes, Avg: 0xFFFFFFFF / 1025}, 16384, 16384},
		{"16kb/s burst 2", HashLimitMatch{Mode: HashLimitBytes, Avg: 0xFFFFFFFF / 1025, Burst: 2}, 16384, 32768},
		{"bytes avg 0", HashLimitMatch{Mode: HashLimitBytes}, (0xFFFFFFFF - 1) << HashLimitByteShift, (0xFFFFFFFF - 1) << HashLimitByteShift},
	} {
		rate, burst := tt.m.RateWindow()
		if rate != tt.rate || burst != tt.burst {
			t.Errorf("%s: rate %d burst %d, want %d and %d", tt.name, rate, burst, tt.rate, tt.burst)
		}
	}
}
