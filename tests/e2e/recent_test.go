package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// recRules is TestRecentAgainstKernel's ruleset ("@Hn" is gen's subnet
// with last byte n, "@MASK" a mask keeping the subnet). --seconds values
// are an hour: the test's own time never matters.
const recRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:ufw-user-limit - [0:0]
:ufw-user-limit-accept - [0:0]
-A FORWARD -s @H1 -p udp -m udp --dport 22 -m recent --set --name DEFAULT --mask @FULL --rsource
-A FORWARD -s @H1 -p udp -m udp --dport 22 -m recent --update --seconds 30 --hitcount 6 --name DEFAULT --mask @FULL --rsource -j ufw-user-limit
-A FORWARD -s @H1 -p udp -m udp --dport 22 -j ufw-user-limit-accept
-A FORWARD -s @H1 -j DROP
-A FORWARD -s @H2 -p udp -m udp --dport 1 -m recent --set --name two
-A FORWARD -s @H2 -p udp -m udp --dport 2 -m recent --rcheck --name two -j ACCEPT
-A FORWARD -s @H2 -p udp -m udp --dport 3 -m recent --remove --name two -j ACCEPT
-A FORWARD -s @H2 -p udp -m udp --dport 4 -m recent ! --rcheck --seconds 3600 --name two -j ACCEPT
-A FORWARD -s @H2 -j DROP
-A FORWARD -s @H3 -p udp -m udp --dport 1 -m recent --set --name hc
-A FORWARD -s @H3 -p udp -m udp --dport 2 -m recent --rcheck --seconds 3600 --hitcount 3 --name hc -j ACCEPT
-A FORWARD -s @H3 -p udp -m udp --dport 3 -m recent --update --hitcount 2 --name hc -j ACCEPT
-A FORWARD -s @H3 -j DROP
-A FORWARD -s @H4 -p udp -m udp --dport 1 -m recent --set --name dst --rdest
-A FORWARD -s @H4 -p udp -m udp --dport 2 -m recent --rcheck --name dst --rdest -j ACCEPT
-A FORWARD -s @H4 -p udp -m udp --dport 3 -m recent --rcheck --name dst --rsource -j ACCEPT
-A FORWARD -s @H4 -j DROP
-A FORWARD -s @H5 -p udp -m udp --dport 1 -m recent --set --name masked --mask @MASK
-A FORWARD -s @H6 -p udp -m udp --dport 2 -m recent --rcheck --name masked --mask @MASK -j ACCEPT
-A FORWARD -s @H5 -j DROP
-A FORWARD -s @H6 -j DROP
-A FORWARD -s @H7 -p udp -m udp --dport 1 -m recent --set --name ttl
-A FORWARD -s @H7 -p udp -m udp --dport 2 -m recent --update --rttl --name ttl -j ACCEPT
-A FORWARD -s @H7 -j DROP
-A ufw-user-limit -j DROP
-A ufw-user-limit-accept -j ACCEPT
COMMIT
`

// recSend is one datagram from gen's host h to sink:dport with a TTL.
type recSend struct {
	host  byte
	dport uint16
	ttl   uint8
	n     int
}

// recBatch exercises every rule of recRules.
var recBatch = []recSend{
	{1, 22, 64, 8}, // ufw limit: the 6th within 30 s and later ones refused
	{2, 4, 64, 1},  // not listed: ! --rcheck matches
	{2, 1, 64, 1},  // --set
	{2, 2, 64, 1},  // --rcheck matches
	{2, 4, 64, 1},  // listed: ! --rcheck fails
	{2, 3, 64, 1},  // --remove matches
	{2, 2, 64, 1},  // gone
	{2, 4, 64, 1},  // not listed again
	{3, 1, 64, 2},  // two stamps
	{3, 2, 64, 1},  // 2 < 3 hits
	{3, 3, 64, 2},  // --update --hitcount 2: matches, stamps (4 stamps)
	{3, 2, 64, 1},  // 4 hits
	{4, 1, 64, 1},  // the destination listed
	{4, 2, 64, 1},  // --rdest finds it
	{4, 3, 64, 1},  // the source is not listed
	{5, 1, 64, 1},  // H5's subnet listed
	{6, 2, 64, 1},  // H6 in it
	{7, 1, 64, 1},  // listed with TTL 64
	{7, 2, 63, 2},  // --rttl: another TTL is not the entry
	{7, 2, 64, 2},  // the same TTL is
}

// TestRecentAgainstKernel compares -m recent with the kernel's xt_recent
// in twin topologies, by rule counters (never timings), in both families:
// ufw's limit pair (--set, then --update --seconds 30 --hitcount 6: the
// sixth connection and later ones refused), --rcheck, ! --rcheck,
// --remove, --hitcount with --rcheck and --update, --rdest, --mask, --rttl,
// and lists shared by several rules; then a reload that keeps naming the
// lists keeps their entries, and one that no longer names a list drops
// it (recent_mt_destroy of its last rule).
func TestRecentAgainstKernel(t *testing.T) {
	eachFamily(t, recentAgainstKernel)
}

func recentAgainstKernel(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		rules := rh.rules(recRules)
		fw.restore(t, tp, fam, rules)
		save := func() {
			drainFw(t, tp)
			record(nameHosts(fw.save(t, tp, fam), rh.host, 7))
		}
		round := func() {
			for _, s := range recBatch {
				rh.send(t, tp, kind, s)
			}
			save()
		}
		round()
		// The same rules again (a reload naming every list): the
		// entries stay, so the ufw host stays refused.
		fw.restore(t, tp, fam, rules)
		rh.send(t, tp, kind, recSend{1, 22, 64, 2})
		save()
		// Without the ufw rules the DEFAULT list goes; with them back,
		// the host starts afresh.
		noUfw := strings.Join(filterLines(strings.Split(rules, "\n"), "DEFAULT"), "\n")
		fw.restore(t, tp, fam, noUfw)
		fw.restore(t, tp, fam, rules)
		round()
	})
	// Policies: fw's own traffic (IPv6 neighbour and router discovery).
	k := compareRounds(t, results, ":OUTPUT", ":INPUT")
	// The kernel's own counts show the cases are exercised: ufw's limit
	// refused the 6th to 8th connection.
	for key, kc := range k[0] {
		if strings.Contains(key, "ufw-user-limit-accept -j ACCEPT") && kc.packets != 5 {
			t.Errorf("kernel: %s: %d packets, want 5", key, kc.packets)
		}
	}
}

// recentHosts are the addresses of a twin's recent tests: gen's subnet
// with last byte 0x40+h for host h, the sink, the full and the subnet's
// mask of the family.
type recentHosts struct {
	fam        int
	gen, sink  netip.Addr
	full, mask string
}

// newRecentHosts returns tp's addresses of family fam.
func newRecentHosts(tp *nettest.Topology, fam int) recentHosts {
	if fam == 6 {
		return recentHosts{fam, tp.Gen.IPv6, tp.Sink.IPv6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff::"}
	}
	return recentHosts{fam, tp.Gen.IPv4, tp.Sink.IPv4, "255.255.255.255", "255.255.255.0"}
}

// host returns host h's address.
func (rh recentHosts) host(h byte) netip.Addr { return genHost(rh.gen, h) }

// rules returns a ruleset with its @FULL, @MASK and @H1 to @H7 named.
func (rh recentHosts) rules(text string) string {
	text = strings.NewReplacer("@FULL", rh.full, "@MASK", rh.mask).Replace(text)
	for h := byte(7); h >= 1; h-- {
		text = strings.ReplaceAll(text, fmt.Sprintf("@H%d", h), rh.host(h).String())
	}
	return text
}

// send sends s's datagrams from gen.
func (rh recentHosts) send(t *testing.T, tp *nettest.Topology, kind string, s recSend) {
	l4 := nettest.UDP{SrcPort: 5000, DstPort: s.dport, Payload: []byte("x")}
	var pkt []byte
	if rh.fam == 6 {
		pkt = nettest.IPv6{Src: rh.host(s.host), Dst: rh.sink, HopLimit: s.ttl}.Packet(l4)
	} else {
		pkt = nettest.IPv4{Src: rh.host(s.host), Dst: rh.sink, TTL: s.ttl}.Packet(l4)
	}
	injectN(t, tp, kind, tp.GenToFw().Frame(pkt), s.n)
}

// filterLines returns the lines without the word.
func filterLines(lines []string, word string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return out
}
