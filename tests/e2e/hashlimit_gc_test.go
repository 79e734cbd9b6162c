package e2e

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// hlGCRules is TestHashLimitGCAgainstKernel's ruleset: entries expire
// after a second, the tables are collected every 8.
const hlGCRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 7101 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name gcslow --hashlimit-htable-expire 1000 --hashlimit-htable-gcinterval 8000 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7101 -j DROP
-A FORWARD -p udp -m udp --dport 7102 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name gcfull --hashlimit-htable-size 1 --hashlimit-htable-max 2 --hashlimit-htable-expire 1000 --hashlimit-htable-gcinterval 8000 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7102 -j DROP
COMMIT
`

// hlGCRounds are the rounds' times from the restore and sends: before
// any collection, after the entries expired but before the first
// collection (8 s after the table's creation), after it.
var hlGCRounds = []struct {
	at    time.Duration
	sends []hlSend
}{
	{0, []hlSend{{1, 5000, 7101, 1, 3}, {1, 5000, 7102, 1, 1}, {2, 5000, 7102, 1, 1}}},
	{3 * time.Second, []hlSend{{1, 5000, 7101, 1, 1}, {3, 5000, 7102, 1, 1}}},
	{12 * time.Second, []hlSend{{1, 5000, 7101, 1, 3}, {3, 5000, 7102, 1, 1}}},
}

// TestHashLimitGCAgainstKernel compares with the kernel's xt_hashlimit
// what an expired entry does before and after the table's garbage
// collection (every --hashlimit-htable-gcinterval ms from the table's
// creation): before, the kernel keeps using it (its bucket refilled by
// the time since its last packet only: a rate of 1/hour refills nothing,
// so the packet is over the limit) and counts it (a table at its maximum
// refuses a new key: hotdrop); after, it is gone (a full bucket again,
// room for the new key).
func TestHashLimitGCAgainstKernel(t *testing.T) {
	eachFamily(t, func(t *testing.T, bin string, fam int) {
		tw := newTwins(t, bin)
		results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
			silenceSink(t, tp)
			gen, sink := tp.Gen.IPv4, tp.Sink.IPv4
			if fam == 6 {
				gen, sink = tp.Gen.IPv6, tp.Sink.IPv6
			}
			host := func(h byte) netip.Addr { return genHost(gen, h) }
			fw.restore(t, tp, fam, hlGCRules)
			start := time.Now()
			for _, r := range hlGCRounds {
				time.Sleep(time.Until(start.Add(r.at)))
				for _, s := range r.sends {
					injectN(t, tp, kind, tp.GenToFw().Frame(nettest.IPPacket(host(s.host), sink,
						nettest.UDP{SrcPort: s.sport, DstPort: s.dport, Payload: []byte("x")})), s.n)
				}
				drainFw(t, tp)
				record(fw.save(t, tp, fam))
			}
		})
		k := compareRounds(t, results, ":INPUT", ":OUTPUT", ":FORWARD")
		// The kernel's own counts (cumulative): the bursts; the expired
		// entry over the limit and host 3 refused by the full table;
		// fresh entries after the collection.
		const slow, full = "FORWARD -p udp -m udp --dport 7101 -j DROP", "FORWARD -p udp -m udp --dport 7102 -j DROP"
		slowOK := "FORWARD -p udp -m udp --dport 7101 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name gcslow --hashlimit-htable-gcinterval 8000 --hashlimit-htable-expire 1000 -j ACCEPT"
		fullOK := "FORWARD -p udp -m udp --dport 7102 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name gcfull --hashlimit-htable-size 1 --hashlimit-htable-max 2 --hashlimit-htable-gcinterval 8000 --hashlimit-htable-expire 1000 -j ACCEPT"
		want := []struct {
			round int
			key   string
			n     uint64
		}{
			{1, slowOK, 2}, {1, slow, 1}, {1, fullOK, 2}, {1, full, 0},
			{2, slowOK, 2}, {2, slow, 2}, {2, fullOK, 2}, {2, full, 0},
			{3, slowOK, 4}, {3, slow, 3}, {3, fullOK, 3}, {3, full, 0},
		}
		for _, w := range want {
			if w.round > len(k) {
				continue // compareRounds failed the test
			}
			if got := k[w.round-1][w.key].packets; got != w.n {
				t.Errorf("kernel, round %d: %s: %d packets, want %d", w.round, w.key, got, w.n)
			}
		}
	})
}
