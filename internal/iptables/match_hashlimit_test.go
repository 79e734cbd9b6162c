package iptables

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestHashLimitMatchOracle replays the transcripts recorded from
// iptables-legacy 1.8.9 (CONFIG_HZ=250: the kernel's ERANGE depends on
// it): rates, byte rates and bursts print back as iptables -S and -L print
// them, the kernel's own changes (sizes above HASHLIMIT_MAX_SIZE) included,
// and every error has iptables' message and status.
func TestHashLimitMatchOracle(t *testing.T) {
	defer func(f func() uint32) { KernelHZ = f }(KernelHZ)
	KernelHZ = func() uint32 { return 250 }
	replayTranscripts(t, "testdata/hashlimit_oracle_v4.txt", "testdata/hashlimit_oracle_v6.txt", limitTranscript)
}

// TestHashLimitCheckHZ checks the kernel's overflow check of a packet rate
// at other values of CONFIG_HZ: 1/day passes with a burst of 1 at any HZ.
func TestHashLimitCheckHZ(t *testing.T) {
	for _, hz := range []uint32{100, 250, 300, 1000} {
		m := ir.HashLimitMatch{Name: "a", Avg: 86400 * ir.HashLimitScale, Burst: 1, GCInterval: 1, Expire: 1}
		if got := m.Check(ir.IPv4, hz); got != ir.HashLimitOK {
			t.Errorf("HZ %d: 1/day burst 1: %v, want OK", hz, got)
		}
		m.Burst = 0
		if got := m.Check(ir.IPv4, hz); got != ir.HashLimitERANGE {
			t.Errorf("HZ %d: burst 0: %v, want ERANGE", hz, got)
		}
	}
}
