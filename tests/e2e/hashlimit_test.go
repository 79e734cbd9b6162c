package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// hlRules is TestHashLimitAgainstKernel's ruleset ("@Hn" is gen's subnet
// with last byte 0x40+n, "@M" the source mask of one subnet). Rates of
// 1/hour refill nothing within the test; the byte rate's refill in the
// test's milliseconds is a few bytes of a 1 KiB bucket.
const hlRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 7001 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name bysrc -j ACCEPT
-A FORWARD -p udp -m udp --dport 7001 -j DROP
-A FORWARD -p udp -m udp --dport 7002 -m hashlimit --hashlimit-above 1/hour --hashlimit-burst 3 --hashlimit-mode srcip,dstport --hashlimit-name above -j DROP
-A FORWARD -p udp -m udp --dport 7003 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name masked --hashlimit-srcmask @M -j ACCEPT
-A FORWARD -p udp -m udp --dport 7003 -j DROP
-A FORWARD -p udp -m udp --dport 7004 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcport --hashlimit-name ports -j ACCEPT
-A FORWARD -p udp -m udp --dport 7004 -j DROP
-A FORWARD -p udp -m udp --dport 7005 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 3 --hashlimit-name shared -j ACCEPT
-A FORWARD -p udp -m udp --dport 7006 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 9 --hashlimit-name shared -j ACCEPT
-A FORWARD -p udp -m multiport --dports 7005,7006 -j DROP
-A FORWARD -p udp -m udp --dport 7007 -m hashlimit --hashlimit-upto 1kb/s --hashlimit-burst 2kb --hashlimit-mode srcip --hashlimit-name bytes -j ACCEPT
-A FORWARD -p udp -m udp --dport 7007 -j DROP
-A FORWARD -p udp -m udp --dport 7008 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name full --hashlimit-htable-size 1 --hashlimit-htable-max 2 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7008 -j DROP
COMMIT
`

// hlSend is a number of datagrams from gen's host h.
type hlSend struct {
	host         byte
	sport, dport uint16
	payload, n   int
}

// hlBytesPort is the byte rate's rule: a byte bucket refills within a
// second whatever the rate (its cost is capped at a full bucket, which
// refills in a second), so only the first round sends to it.
const hlBytesPort = 7007

// hlBatch is one round: bursts from several sources into each rule.
var hlBatch = []hlSend{
	{1, 5000, 7001, 1, 4}, {2, 5000, 7001, 1, 3}, {3, 5001, 7001, 1, 1}, // 2 of each source's
	{1, 5000, 7002, 1, 5}, {2, 5000, 7002, 1, 2}, // above: the 4th and 5th of host 1
	{1, 5000, 7003, 1, 2}, {2, 5000, 7003, 1, 2}, {3, 5000, 7003, 1, 2}, // one key for the subnet: 2 in all
	{1, 5000, 7004, 1, 3}, {2, 5000, 7004, 1, 3}, {1, 5001, 7004, 1, 3}, // by source port: 5000 twice, 5001 twice
	{1, 5000, 7005, 1, 2}, {2, 5000, 7006, 1, 4}, // one table, the first rule's burst: 3 in all
	{1, 5000, 7007, 1000, 6}, {2, 5000, 7007, 1000, 2}, // bytes: a full bucket and 2 refills, per source
	{1, 5000, 7008, 1, 2}, {2, 5000, 7008, 1, 2}, {3, 5000, 7008, 1, 3}, // a full table drops host 3's
}

// TestHashLimitAgainstKernel compares -m hashlimit with the kernel's
// xt_hashlimit in twin topologies, by rule counters (never timings): per
// key bursts by source, by source and port, by source port and by a
// masked source, --hashlimit-above, a byte rate, two rules sharing a
// table (the first one's parameters), a table at its maximum dropping new
// keys. Then the tables survive the commands that keep naming them (-A,
// -I, -D, -Z, restore --noflush, a full restore of the same rules): the
// keys of the first round stay refused; a restore without a name drops
// its table, and the name's rule back starts a fresh one.
func TestHashLimitAgainstKernel(t *testing.T) {
	eachFamily(t, hashLimitAgainstKernel)
}

// hlBysrc is table bysrc's rule, which the last command drops and adds
// again.
const hlBysrc = "FORWARD -p udp -m udp --dport 7001 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name bysrc -j ACCEPT"

// hlCommands are the commands before rounds 2 to 8: each keeps naming
// every table but the last, which loses bysrc and gets it back.
func hlCommands(rules string) []twinCommand {
	noBysrc := strings.Join(filterLines(strings.Split(rules, "\n"), "bysrc"), "\n")
	unrelated := "*filter\n-A FORWARD -p tcp -m tcp --dport 10 -j DROP\nCOMMIT\n"
	tcpDrop := func(cmd, port string) twinCommand {
		return twinCommand{args: []string{cmd, "FORWARD", "-p", "tcp", "-m", "tcp", "--dport", port, "-j", "DROP"}}
	}
	return []twinCommand{
		tcpDrop("-A", "9"),
		tcpDrop("-I", "8"),
		tcpDrop("-D", "9"),
		{args: []string{"-Z"}},
		{restore: unrelated, restoreArgs: []string{"--noflush"}},
		{restore: rules},
		{restore: noBysrc, then: &twinCommand{restore: rules}},
	}
}

func hashLimitAgainstKernel(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		gen, sink := tp.Gen.IPv4, tp.Sink.IPv4
		mask := "24"
		if fam == 6 {
			gen, sink, mask = tp.Gen.IPv6, tp.Sink.IPv6, "120"
		}
		host := func(h byte) netip.Addr { return genHost(gen, h) }
		rules := strings.ReplaceAll(hlRules, "@M", mask)
		fw.restore(t, tp, fam, rules)
		round := func(first bool) {
			for _, s := range hlBatch {
				if !first && s.dport == hlBytesPort {
					continue
				}
				payload := []byte(strings.Repeat("x", s.payload))
				injectN(t, tp, kind, tp.GenToFw().Frame(nettest.IPPacket(host(s.host), sink, nettest.UDP{SrcPort: s.sport, DstPort: s.dport, Payload: payload})), s.n)
			}
			drainFw(t, tp)
			record(fw.save(t, tp, fam))
		}
		round(true)
		for _, c := range hlCommands(rules) {
			c.run(t, tp, fw, fam)
			round(false)
		}
	})
	// Policies: fw's own traffic in INPUT and OUTPUT (IPv6 neighbour and
	// router discovery); iptables-legacy's -A, -I and -D zero the
	// policies' counters (libiptc), xfw's keep them.
	k := compareRounds(t, results, ":INPUT", ":OUTPUT", ":FORWARD")
	// The kernel's own counts show the cases at work: the first round
	// passes each key's burst, the second host 3's second token (-A, -I
	// and -D keep the counters: 6 in all), later ones nothing until
	// bysrc's table starts afresh.
	want := []struct {
		round int
		key   string
		n     uint64
	}{
		{1, hlBysrc, 5},
		{1, "FORWARD -p udp -m udp --dport 7002 -m hashlimit --hashlimit-above 1/hour --hashlimit-burst 3 --hashlimit-mode srcip,dstport --hashlimit-name above -j DROP", 2},
		{1, "FORWARD -p udp -m udp --dport 7008 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name full --hashlimit-htable-size 1 --hashlimit-htable-max 2 -j ACCEPT", 2},
		{1, "FORWARD -p udp -m udp --dport 7008 -j DROP", 2},
		{2, hlBysrc, 6},
		{4, hlBysrc, 6},
		{5, hlBysrc, 0},
		{7, hlBysrc, 0},
		{8, hlBysrc, 5},
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
