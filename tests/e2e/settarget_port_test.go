package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// setjPortRules is TestSetTargetPortsAgainstKernel's ruleset
// (recentHosts' @Hn; @ICMP is the family's ICMP protocol, @TTL its TTL
// or hop limit test): a fail2ban- or
// pf-style table of address and port (H1's UDP to port 22 bans H1,udp:22
// with --exist --timeout, and every packet of that pair is dropped, the
// first included, while H1's other ports pass), a delete (H2's TTL-63
// datagram deletes what its TTL-64 one added; a TCP one deletes nothing,
// its protocol differs), a hash:net,port taking the longest prefix present
// and the source port (src,src), flags naming one dimension only (no
// element, no match: the kernel's IPSET_ERR_TYPE_MISMATCH), ICMP echo and
// a protocol without ports (GRE: port 0), a full set (maxelem 1), the
// set's default timeout against --timeout and --exist, and the
// destination's address and port (dst,dst).
const setjPortRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -s @H1 -p udp -m udp --dport 22 -j SET --add-set ipp src,dst --exist --timeout 600
-A FORWARD -s @H2 -p udp -m udp --dport 5 @TTL 63 -j SET --del-set ipp src,dst
-A FORWARD -s @H2 -p tcp -m tcp --dport 5 -j SET --del-set ipp src,dst
-A FORWARD -s @H2 -p udp -m udp --dport 5 @TTL 64 -j SET --add-set ipp src,dst
-A FORWARD -s @H3 -p udp -m udp --dport 1 -j SET --add-set np src,src
-A FORWARD -s @H3 -p udp -m udp --dport 2 -m set --match-set np src,src -j ACCEPT
-A FORWARD -s @H4 -p udp -m udp --dport 1 -j SET --add-set ipp src
-A FORWARD -s @H4 -p udp -m udp --dport 2 -m set --match-set ipp src
-A FORWARD -s @H4 -p udp -m udp --dport 2 -m set ! --match-set ipp src
-A FORWARD -s @H5 -p @ICMP -j SET --add-set ipp src,dst
-A FORWARD -s @H5 -p gre -j SET --add-set ipp src,dst
-A FORWARD -s @H6 -p udp -m udp --dport 1 -j SET --add-set small src,dst
-A FORWARD -s @H6 -p udp -m udp --dport 1 -m set --match-set small src,dst -j ACCEPT
-A FORWARD -s @H6 -p udp -m udp --dport 4 -j SET --add-set ex src,dst --timeout 100
-A FORWARD -s @H6 -p udp -m udp --dport 4 @TTL 63 -j SET --add-set ex src,dst --exist --timeout 1000
-A FORWARD -s @H6 -p udp -m udp --dport 6 -j SET --add-set ex src,dst
-A FORWARD -s @H7 -p udp -m udp --dport 7 -j SET --add-set dd dst,dst
-A FORWARD -m set --match-set dd dst,dst -j ACCEPT
-A FORWARD -m set --match-set ipp src,dst -j DROP
COMMIT
`

// portSend is a batch of identical packets from host to the sink: UDP or
// TCP (a SYN) from port 5000 to dport, an ICMP echo request, or GRE.
type portSend struct {
	host  byte
	proto string // "udp", "tcp", "icmp", "gre"
	dport uint16
	ttl   uint8
	n     int
}

// setjPortFirst is the first round's packets.
var setjPortFirst = []portSend{
	{1, "udp", 22, 64, 3}, // banned by the first: all three dropped
	{1, "udp", 23, 64, 1}, // another port: passes
	{2, "udp", 5, 65, 1},  // H2,udp:5 added (TTL 64 in FORWARD), dropped
	{2, "tcp", 5, 65, 1},  // deletes H2,tcp:5: not there
	{2, "udp", 5, 65, 1},  // still dropped
	{2, "udp", 5, 64, 1},  // deleted (TTL 63): passes
	{2, "udp", 5, 64, 1},  // passes
	{3, "udp", 2, 64, 1},  // np lacks it
	{3, "udp", 1, 64, 1},  // H3's /28 (/124),udp:5000 added
	{3, "udp", 2, 64, 1},  // accepted
	{4, "udp", 1, 64, 1},  // one dimension: nothing added
	{4, "udp", 2, 64, 1},  // no match, the inverted one matches
	{5, "icmp", 0, 64, 1}, // H5,icmp:echo-request added, dropped
	{5, "gre", 0, 64, 2},  // H5,gre:0 added, both dropped
	{6, "udp", 1, 64, 1},  // small is full: not added, not accepted
	{6, "udp", 4, 65, 1},  // ex: 100 s
	{6, "udp", 4, 64, 1},  // kept at 100 s, then --exist: 1000 s
	{6, "udp", 6, 64, 1},  // ex: the set's 5 s
	{7, "udp", 7, 64, 1},  // SINK,udp:7 added, accepted
	{1, "udp", 7, 64, 1},  // accepted too (dd)
}

// send sends s's packets from gen through fw.
func (s portSend) send(t *testing.T, tp *nettest.Topology, kind string, rh recentHosts) {
	t.Helper()
	var l4 nettest.Transport
	switch s.proto {
	case "udp":
		l4 = nettest.UDP{SrcPort: 5000, DstPort: s.dport, Payload: []byte("x")}
	case "tcp":
		l4 = nettest.TCP{SrcPort: 5000, DstPort: s.dport, Seq: 1, Flags: nettest.TCPSyn, Window: 1024}
	case "icmp":
		if rh.fam == 6 {
			l4 = nettest.ICMPv6{Type: 128, Rest: 7<<16 | 1}
		} else {
			l4 = nettest.ICMPv4{Type: 8, Rest: 7<<16 | 1}
		}
	case "gre":
		l4 = nettest.Raw{Proto: 47, Data: []byte{0, 0, 0x08, 0}}
	default:
		t.Fatalf("portSend: protocol %q", s.proto)
	}
	var pkt []byte
	if rh.fam == 6 {
		pkt = nettest.IPv6{Src: rh.host(s.host), Dst: rh.sink, HopLimit: s.ttl}.Packet(l4)
	} else {
		pkt = nettest.IPv4{Src: rh.host(s.host), Dst: rh.sink, TTL: s.ttl}.Packet(l4)
	}
	injectN(t, tp, kind, tp.GenToFw().Frame(pkt), s.n)
}

// TestSetTargetPortsAgainstKernel compares -j SET on hash:ip,port and
// hash:net,port sets with the kernel's xt_SET and ipset in twin
// topologies, by rule counters and the sets' members (ipset save and xfw
// ipset save, timeouts as setjMembers tells them), both families: the
// directions of each dimension, the protocol and port as the kernel
// encodes them (ICMP's type and code, 0 for a protocol without ports),
// --del-set, --exist and --timeout, a full set, flags with too few
// dimensions, and the members kept across a reload.
func TestSetTargetPortsAgainstKernel(t *testing.T) {
	eachFamily(t, setTargetPortsAgainstKernel)
}

func setTargetPortsAgainstKernel(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	members := map[string][]string{}
	var mu sync.Mutex
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		famName, net, icmp, ttl := "inet", "192.0.2.0/28", "icmp", "-m ttl --ttl-eq"
		if fam == 6 {
			famName, net, icmp, ttl = "inet6", "2001:db8::/124", "ipv6-icmp", "-m hl --hl-eq"
		}
		ipsetCmd("create ipp hash:ip,port family " + famName + " timeout 0")
		ipsetCmd("create np hash:net,port family " + famName)
		ipsetCmd("add np " + net + ",tcp:80")
		ipsetCmd("create small hash:ip,port maxelem 1 family " + famName)
		ipsetCmd("add small " + rh.sink.String() + ",udp:9")
		ipsetCmd("create ex hash:ip,port timeout 5 family " + famName)
		ipsetCmd("create dd hash:ip,port family " + famName)
		rules := strings.NewReplacer("@ICMP", icmp, "@TTL", ttl).Replace(rh.rules(setjPortRules))
		fw.restore(t, tp, fam, rules)
		// H3's network as np holds it: its /28 (/124).
		h3net := netip.PrefixFrom(rh.host(3), rh.host(3).BitLen()-4).Masked().String()
		list := func(round int) {
			m := setjMembers(t, tp, kind, bin, func(s string) string {
				s = strings.ReplaceAll(s, h3net, "@N3")
				return strings.ReplaceAll(nameHosts(s, rh.host, 7), rh.sink.String(), "@SINK")
			})
			mu.Lock()
			members[fmt.Sprintf("%s round %d", kind, round)] = m
			mu.Unlock()
		}
		save := func() {
			drainFw(t, tp)
			record(nameHosts(fw.save(t, tp, fam), rh.host, 7))
		}
		for _, s := range setjPortFirst {
			s.send(t, tp, kind, rh)
		}
		save()
		list(1)
		// A reload keeps the members the data plane added: H1,udp:22
		// stays banned (and is refreshed, --exist); ipset deletes it.
		fw.restore(t, tp, fam, rules)
		portSend{1, "udp", 22, 64, 1}.send(t, tp, kind, rh)
		ipsetCmd("del ipp " + rh.host(1).String() + ",udp:22")
		portSend{1, "udp", 23, 64, 1}.send(t, tp, kind, rh)
		save()
		list(2)
	})
	k := compareRounds(t, results, ":OUTPUT", ":INPUT")
	if len(k) == 0 {
		t.Fatal("no rounds recorded")
	}
	for round := 1; round <= 2; round++ {
		km, xm := members[fmt.Sprintf("kernel round %d", round)], members[fmt.Sprintf("xfw round %d", round)]
		if strings.Join(km, "\n") != strings.Join(xm, "\n") {
			t.Errorf("round %d: members differ:\nkernel %q\nxfw    %q", round, km, xm)
		}
	}
	// The kernel's own counts show the cases are exercised.
	for key, kc := range k[0] {
		if strings.Contains(key, "--match-set ipp src,dst -j DROP") && kc.packets != 8 {
			t.Errorf("kernel: %s: %d packets, want 8", key, kc.packets)
		}
		if strings.Contains(key, "! --match-set ipp src") && kc.packets != 1 {
			t.Errorf("kernel: %s: %d packets, want 1", key, kc.packets)
		}
	}
	for _, want := range []string{"add ipp @H1,udp:22 long", "add np @N3,udp:5000", "add ex @H6,udp:4 long", "add ex @H6,udp:6",
		"add dd @SINK,udp:7", "add small @SINK,udp:9"} {
		if !contains(members["kernel round 1"], want) {
			t.Errorf("kernel members %q: want %q in round 1", members["kernel round 1"], want)
		}
	}
	if contains(members["kernel round 2"], "add ipp @H1,udp:22 long") {
		t.Errorf("kernel members %q: H1,udp:22 still there after ipset del", members["kernel round 2"])
	}
}
