package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// hlRateMatchRules is TestHashLimitRateMatchAgainstKernel's ruleset: a
// packet rate of 2/sec in windows of one second (a window passes the
// burst plus the rate, 5, and the next one opens only if this one stayed
// within the rate), the same with --hashlimit-above, and a byte rate
// (its window counts the packets' bytes against user2rate_bytes of the
// rate: 16384 here, 15 datagrams of 1,000 bytes of payload).
const hlRateMatchRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD ` + hlRMUpto + `
-A FORWARD -p udp -m udp --dport 7101 -j DROP
-A FORWARD ` + hlRMAbove + `
-A FORWARD ` + hlRMBytes + `
-A FORWARD -p udp -m udp --dport 7103 -j DROP
COMMIT
`

// The rate-match rules as iptables-save prints them (the default
// --hashlimit-rate-interval 1 left out). The entries must outlive the
// phases: without --hashlimit-htable-expire an entry expires after the
// rate's period (500 ms here), and a new one opens a new window.
const (
	hlRMUpto  = "-p udp -m udp --dport 7101 -m hashlimit --hashlimit-upto 2/sec --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name rm --hashlimit-htable-expire 60000 --hashlimit-rate-match -j ACCEPT"
	hlRMAbove = "-p udp -m udp --dport 7102 -m hashlimit --hashlimit-above 2/sec --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name rma --hashlimit-htable-expire 60000 --hashlimit-rate-match -j DROP"
	hlRMBytes = "-p udp -m udp --dport 7103 -m hashlimit --hashlimit-upto 16kb/s --hashlimit-mode srcip --hashlimit-name rmb --hashlimit-htable-expire 60000 --hashlimit-rate-match -j ACCEPT"
)

// hlRateMatchPhases are the datagrams of each phase, sent 1.5 s apart:
// more than a window, and far less than the time after which host 1's
// first window would count as within the rate (its packets over 2/sec:
// 8 s for the 16 to 7101, 6 s for the 12 to 7102). The gap between a
// key's first packets of two phases is the 1.5 s, the sends and a save
// of each twin's own (logged): 2.4-3.0 s here under load, against the
// 3 s of the 6 packets to 7102 this test sent before.
var hlRateMatchPhases = [][]hlSend{
	{ // windows open: each key's first 5 (4 for -above, 15 for bytes)
		{1, 5000, 7101, 1, 16}, {2, 5000, 7101, 1, 1},
		{1, 5000, 7102, 1, 12},
		{1, 5000, 7103, 1000, 17},
	},
	{ // host 1 went over its rate: its next window refuses all; host 2's opens
		{1, 5000, 7101, 1, 2}, {2, 5000, 7101, 1, 3},
		{1, 5000, 7102, 1, 2},
	},
	{ // host 1's last window (2 packets) stayed within the rate: open again
		{1, 5000, 7101, 1, 6},
		{1, 5000, 7102, 1, 5},
	},
}

// TestHashLimitRateMatchAgainstKernel compares --hashlimit-rate-match
// with the kernel's xt_hashlimit (revision 3) in twin topologies, by rule
// counters after each phase: a window's burst, the next window closed
// after a window over the rate and open after one within it, per key, with
// -upto and -above, and a byte rate. Both families.
func TestHashLimitRateMatchAgainstKernel(t *testing.T) {
	eachFamily(t, hashLimitRateMatchAgainstKernel)
}

func hashLimitRateMatchAgainstKernel(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		gen, sink := tp.Gen.IPv4, tp.Sink.IPv4
		if fam == 6 {
			gen, sink = tp.Gen.IPv6, tp.Sink.IPv6
		}
		host := func(h byte) netip.Addr { return genHost(gen, h) }
		fw.restore(t, tp, fam, hlRateMatchRules)
		var last time.Time
		for i, phase := range hlRateMatchPhases {
			if i > 0 {
				time.Sleep(1500 * time.Millisecond)
				t.Logf("%s: phase %d %v after the one before", kind, i+1, time.Since(last).Round(time.Millisecond))
			}
			last = time.Now()
			for _, s := range phase {
				payload := []byte(strings.Repeat("x", s.payload))
				injectN(t, tp, kind, tp.GenToFw().Frame(nettest.IPPacket(host(s.host), sink, nettest.UDP{SrcPort: s.sport, DstPort: s.dport, Payload: payload})), s.n)
			}
			time.Sleep(200 * time.Millisecond)
			record(fw.save(t, tp, fam))
		}
	})
	k := compareRounds(t, results, ":INPUT", ":OUTPUT", ":FORWARD")
	// The kernel's own counts show the windows at work.
	upto, above, bytes := "FORWARD "+hlRMUpto, "FORWARD "+hlRMAbove, "FORWARD "+hlRMBytes
	want := []struct {
		round int
		key   string
		n     uint64
	}{
		{1, upto, 6},   // host 1's 5, host 2's 1
		{1, above, 8},  // host 1's 5th to 12th
		{1, bytes, 15}, // 15 of 17
		{2, upto, 9},   // host 2's 3
		{2, above, 10}, // both of host 1's
		{3, upto, 14},  // host 1's 5 of 6
		{3, above, 11}, // the 5th
	}
	for _, w := range want {
		if w.round > len(k) {
			continue // compareRounds failed the test
		}
		if got := k[w.round-1][w.key].packets; got != w.n {
			t.Errorf("kernel, round %d: %s: %d packets, want %d", w.round, w.key, got, w.n)
		}
	}
}
