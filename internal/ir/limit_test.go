package ir_test

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestCreditsPerJiffy checks CREDITS_PER_JIFFY for the usual CONFIG_HZ
// values (the power of two below 0xFFFFFFFF / (HZ * 86400)).
func TestCreditsPerJiffy(t *testing.T) {
	for _, c := range []struct{ hz, want uint32 }{
		{100, 256}, {250, 128}, {300, 128}, {1000, 32},
	} {
		if got := ir.CreditsPerJiffy(c.hz); got != c.want {
			t.Errorf("CreditsPerJiffy(%d) = %d, want %d", c.hz, got, c.want)
		}
	}
}

// TestLimitBucket checks the buckets and the kernel's refusals (ERANGE,
// checked with iptables-legacy on a CONFIG_HZ=250 kernel: --limit 1/day
// with bursts 4 and 5 and --limit-burst 0 are refused, 1/hour with a burst
// of 10000 is not).
func TestLimitBucket(t *testing.T) {
	const hz = 250
	day, hour, minute := uint32(ir.LimitScale*86400), uint32(ir.LimitScale*3600), uint32(ir.LimitScale*60)
	for _, c := range []struct {
		name     string
		m        ir.LimitMatch
		ok       bool
		cost, bc uint32
	}{
		{"3/hour", ir.LimitMatch{Avg: hour / 3, Burst: 5}, true, 38400000, 192000000},
		{"3/min", ir.LimitMatch{Avg: minute / 3, Burst: 5}, true, 640000, 3200000},
		{"10000/sec", ir.LimitMatch{Avg: 1, Burst: 5}, true, 3, 16},
		{"1/hour burst 10000", ir.LimitMatch{Avg: hour, Burst: 10000}, true, 115200000, 2666737408},
		{"burst 0", ir.LimitMatch{Avg: hour / 3, Burst: 0}, false, 0, 0},
		{"1/day", ir.LimitMatch{Avg: day, Burst: 5}, false, 0, 0},
		{"1/day burst 4", ir.LimitMatch{Avg: day, Burst: 4}, false, 0, 0},
		{"1/day burst 1", ir.LimitMatch{Avg: day, Burst: 1}, true, 2764800000, 2764800000},
	} {
		b, ok := c.m.Bucket(hz)
		if ok != c.ok || ok && (b.Cost != c.cost || b.Capacity != c.bc || b.CreditsPerJiffy != 128) {
			t.Errorf("%s: Bucket = %+v, %v; want cost %d, capacity %d, %v", c.name, b, ok, c.cost, c.bc, c.ok)
		}
	}
}
