package e2e

import (
	"bufio"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// ctGRERules counts forwarded GRE packets by their connection state.
const ctGRERules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p gre -m conntrack --ctstate NEW
-A FORWARD -p gre -m conntrack --ctstate ESTABLISHED
COMMIT
`

// TestConntrackGREAgainstKernel checks GRE's own timeouts
// (nf_conntrack_gre_timeout before a reply, _stream after one; the
// generic protocol's 600 s do not apply) in twin topologies where both
// are set short: a GRE packet's connection that saw no reply expires after
// nf_conntrack_gre_timeout (the packet back is NEW), one that saw a reply
// outlives it (the next packet is ESTABLISHED). The NEW and ESTABLISHED
// counters must be the kernel's. While the test sends the reply that
// establishes a connection, nf_conntrack_gre_timeout is a minute, not 2 s:
// each twin drains its frames between the packet and its reply, which on
// a loaded machine took seconds, and the reply must not find the
// connection expired. A connection's timeout is the one in force when its
// last packet passed (in both), so the change revives no expired one.
func TestConntrackGREAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "sysctl")
	// nf_conntrack_gre_timeout is set to 2 s, _stream to 60 s; wait
	// passes the first and not the second.
	const wait = 4 * time.Second
	const short, long = "2", "60"
	tw := newTwins(t, xfwPath(t))
	// setUnreplied sets nf_conntrack_gre_timeout (_stream 60 s): the
	// kernel's tracker reads the sysctls at each packet, xfw at its next
	// commit, here the ruleset restored with its counters.
	setUnreplied := func(kind string, tp *nettest.Topology, fw firewall, secs string) {
		for _, kv := range []string{"net.netfilter.nf_conntrack_gre_timeout=" + secs, "net.netfilter.nf_conntrack_gre_timeout_stream=" + long} {
			if res, err := nettest.Exec(tp.FwNS, "sysctl", "-q", "-w", kv); err != nil || res.ExitCode != 0 {
				t.Errorf("%s: sysctl %s: %v %s", kind, kv, err, res.Stderr)
			}
		}
		fw.restore(t, tp, 4, fw.save(t, tp, 4), "-c")
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		// The first restore loads the kernel's tracker, whose sysctls
		// exist from then on.
		fw.restore(t, tp, 4, ctGRERules)
		setUnreplied(kind, tp, fw, short)
	})
	gre := nettest.Raw{Proto: 47, Data: []byte{0, 0, 0x08, 0x00}} // version 0, IPv4 payload
	send := func(tp *nettest.Topology, fromGen bool) {
		t.Helper()
		var err error
		if fromGen {
			h := nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4, Protocol: 47}
			err = tp.InjectFromGen(tp.GenToFw().Frame(h.Packet(gre)))
		} else {
			h := nettest.IPv4{Src: tp.Sink.IPv4, Dst: tp.Gen.IPv4, Protocol: 47}
			err = tp.InjectFromSink(tp.SinkToFw().Frame(h.Packet(gre)))
		}
		if err != nil {
			t.Fatal(err)
		}
		// Judged before the next is sent: gen's and sink's frames
		// reach fw by different queues, and the states depend on the
		// order.
		drainFw(t, tp)
	}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		send(tp, true) // NEW: gen → sink
		time.Sleep(wait)
		setUnreplied(kind, tp, fw, long)
		send(tp, false) // sink → gen: the first expired, NEW again
		send(tp, true)  // the reply: ESTABLISHED
		setUnreplied(kind, tp, fw, short)
		send(tp, false) // ESTABLISHED, the connection now a stream
		time.Sleep(wait)
		send(tp, true) // ESTABLISHED: the stream timeout holds it
	})
	kc := counters(t, tw.fws["kernel"].save(t, tw.tps["kernel"], 4))
	xc := counters(t, tw.fws["xfw"].save(t, tw.tps["xfw"], 4))
	for rule, want := range map[string]uint64{
		"FORWARD -p gre -m conntrack --ctstate NEW":         2,
		"FORWARD -p gre -m conntrack --ctstate ESTABLISHED": 3,
	} {
		if kc[rule].packets != want {
			t.Errorf("kernel: %s counted %d, want %d (premise)", rule, kc[rule].packets, want)
		}
		if xc[rule].packets != kc[rule].packets {
			t.Errorf("xfw: %s counted %d, the kernel %d", rule, xc[rule].packets, kc[rule].packets)
		}
	}
}

// ctGREv1Rules counts forwarded GRE packets by state and direction, the
// assured connections' packets, and by the connection's keys, which
// --ctorig*port and --ctrepl*port match (the kernel's tuple's ports).
const ctGREv1Rules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p gre -m conntrack --ctstate NEW
-A FORWARD -p gre -m conntrack --ctstate ESTABLISHED --ctdir ORIGINAL
-A FORWARD -p gre -m conntrack --ctstate ESTABLISHED --ctdir REPLY
-A FORWARD -p gre -m conntrack --ctstate INVALID
-A FORWARD -p gre -m conntrack --ctstatus ASSURED
-A FORWARD -p gre -m conntrack --ctorigdstport 4660
-A FORWARD -p gre -m conntrack --ctreplsrcport 4660
-A FORWARD -p gre -m conntrack --ctorigsrcport 0 --ctrepldstport 0
COMMIT
`

// greV1 returns a GRE version 1 (PPTP's enhanced GRE) header with PPP
// (0x880b) or another protocol, no payload, and call ID id.
func greV1(proto uint16, id uint16) []byte {
	return []byte{0x20, 0x01, byte(proto >> 8), byte(proto), 0, 0, byte(id >> 8), byte(id)}
}

// ctGREv1Packets is the version 1 conversation between gen and sink:
// each packet's direction (from gen or not) and GRE header. The kernel's
// tuple of a version 1 packet (gre_pkt_to_tuple) has the call ID as its
// destination key and, without the PPTP helper's keymap, 0 as its source
// key; a connection's reply tuple swaps them, so a reply carrying the
// other side's call ID is a connection of its own, and only call ID 0
// (or a header too short for one) meets version 0's keys.
var ctGREv1Packets = []struct {
	name    string
	fromGen bool
	gre     []byte
}{
	{"gen call 0x1234: NEW", true, greV1(0x880b, 0x1234)},
	{"gen call 0x5678, same hosts: another NEW", true, greV1(0x880b, 0x5678)},
	{"gen call 0x1234 again: NEW (unreplied)", true, greV1(0x880b, 0x1234)},
	{"sink's own call 0x9abc: NEW, not a reply", false, greV1(0x880b, 0x9abc)},
	{"sink call 0x1234: the first connection's reply tuple has the keys swapped: NEW", false, greV1(0x880b, 0x1234)},
	{"gen version 1 carrying IPv4, not PPP: INVALID", true, greV1(0x0800, 0x1234)},
	{"gen call 0x9abc: sink's connection's direction has srckey 0: NEW", true, greV1(0x880b, 0x9abc)},
	{"gen version 1 cut before the call ID: keys 0, NEW", true, []byte{0x20, 0x01, 0x88, 0x0b, 0, 0}},
	{"sink version 0: keys 0, the reply", false, []byte{0, 0, 0x08, 0x00}},
	{"gen call 0: keys 0, ESTABLISHED", true, greV1(0x880b, 0)},
	{"gen version 2: keys 0, ESTABLISHED", true, []byte{0, 2, 0x08, 0x00, 0, 0, 0x12, 0x34}},
	{"gen version 1 with 4 bytes, not PPP: keys 0, ESTABLISHED", true, []byte{0x20, 0x01, 0x08, 0x00}},
	{"sink call 0x9abc again: NEW (unreplied)", false, greV1(0x880b, 0x9abc)},
	{"gen call 0x5678 again: NEW", true, greV1(0x880b, 0x5678)},
}

// TestConntrackGREv1AgainstKernel checks GRE version 1's keys (the call
// ID, nf_conntrack_proto_gre.c gre_pkt_to_tuple, without the PPTP
// helper) in twin topologies, both families: the state of each packet of
// a conversation of two calls between gen and sink, with replies,
// headers cut short and other versions (ctGREv1Packets), counted per
// packet, the keys --ctorig*port and --ctrepl*port match, and the
// connections `conntrack -L -p gre` lists afterwards.
func TestConntrackGREv1AgainstKernel(t *testing.T) {
	eachFamily(t, func(t *testing.T, bin string, fam int) {
		requireTools(t, "conntrack")
		addrs := func(tp *nettest.Topology) (gen, sink netip.Addr) {
			if fam == 6 {
				return tp.Gen.IPv6, tp.Sink.IPv6
			}
			return tp.Gen.IPv4, tp.Sink.IPv4
		}
		tw := newTwins(t, bin)
		tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
			fw.restore(t, tp, fam, ctGREv1Rules)
		})
		listings := map[string][]string{}
		var mu sync.Mutex
		rounds := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
			gen, sink := addrs(tp)
			for _, pk := range ctGREv1Packets {
				var err error
				raw := nettest.Raw{Proto: 47, Data: pk.gre}
				if pk.fromGen {
					err = tp.InjectFromGen(tp.GenToFw().Frame(nettest.IPPacket(gen, sink, raw)))
				} else {
					err = tp.InjectFromSink(tp.SinkToFw().Frame(nettest.IPPacket(sink, gen, raw)))
				}
				if err != nil {
					t.Errorf("%s: %s: %v", kind, pk.name, err)
					return
				}
				drainFw(t, tp)
				record(fw.save(t, tp, fam))
			}
			var lines []string
			for _, filter := range greListFilters {
				argv := append([]string{"conntrack", "-L", "-p", "gre"}, filter...)
				if fam == 6 {
					argv = append(argv, "-f", "ipv6")
				}
				if kind == "xfw" {
					argv = append([]string{fw.bin}, argv...)
				}
				res, err := nettest.Exec(tp.FwNS, argv...)
				if err != nil || res.ExitCode != 0 {
					t.Errorf("%s: %v: %v %v", kind, argv, err, res)
					return
				}
				lines = append(lines, fmt.Sprintf("%v:", filter))
				lines = append(lines, greListing(res.Stdout, map[string]string{gen.String(): "GEN", sink.String(): "SINK"})...)
			}
			mu.Lock()
			listings[kind] = lines
			mu.Unlock()
		})
		// The policies count fw's own traffic (IPv6 neighbour and
		// router discovery), which differs with the twins' timing.
		k := compareRounds(t, rounds, ":INPUT", ":OUTPUT")
		checkGREv1Premise(t, k)
		if !slices.Equal(listings["kernel"], listings["xfw"]) {
			t.Errorf("conntrack -L -p gre:\nkernel:\n%s\nxfw:\n%s",
				strings.Join(listings["kernel"], "\n"), strings.Join(listings["xfw"], "\n"))
		}
		t.Logf("kernel's connections:\n%s", strings.Join(listings["kernel"], "\n"))
	})
}

// checkGREv1Premise fails the test when the kernel's rounds (one per
// packet of ctGREv1Packets) are not what the test is about: each packet's
// state, and the keys' rules counting the call 0x1234's packets (3) and
// every tracked one (13).
func checkGREv1Premise(t *testing.T, k []map[string]counter) {
	t.Helper()
	want := []string{"NEW", "NEW", "NEW", "NEW", "NEW", "INVALID", "NEW", "NEW",
		"ESTABLISHED --ctdir REPLY", "ESTABLISHED --ctdir ORIGINAL", "ESTABLISHED --ctdir ORIGINAL",
		"ESTABLISHED --ctdir ORIGINAL", "NEW", "NEW"}
	if len(k) != len(want) {
		t.Fatalf("kernel: %d rounds, want %d", len(k), len(want))
	}
	prev := map[string]counter{}
	for i, r := range k {
		var got []string
		for key, c := range r {
			if c.packets != prev[key].packets && strings.Contains(key, "--ctstate") {
				got = append(got, key[strings.Index(key, "--ctstate ")+len("--ctstate "):])
			}
		}
		if len(got) != 1 || got[0] != want[i] {
			t.Errorf("kernel: %s: counted by %q, want %q (premise)", ctGREv1Packets[i].name, got, want[i])
		}
		prev = r
	}
	last := k[len(k)-1]
	for rule, n := range map[string]uint64{
		"FORWARD -p gre -m conntrack --ctorigdstport 4660":                3,
		"FORWARD -p gre -m conntrack --ctreplsrcport 4660":                3,
		"FORWARD -p gre -m conntrack --ctorigsrcport 0 --ctrepldstport 0": 13,
	} {
		if last[rule].packets != n {
			t.Errorf("kernel: %s counted %d, want %d (premise)", rule, last[rule].packets, n)
		}
	}
}

// greListFilters are the filters TestConntrackGREv1AgainstKernel lists
// the connections with (after -L -p gre): none, and the original
// direction's keys (conntrack's strtoul base 0: hex, octal, decimal).
var greListFilters = [][]string{
	nil,
	{"--dstkey", "0x1234"},
	{"--srckey", "0", "--dstkey", "4660"},
	{"--orig-key-dst", "0115274"},
	{"--orig-key-src", "0x0"},
	{"--srckey", "1"},
}

// greListing returns conntrack -L's lines with the timeout (which ticks)
// dropped and the addresses named, sorted.
func greListing(out string, names map[string]string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		f = append(f[:2], f[3:]...)
		l := strings.Join(f, " ") + " "
		for addr, name := range names {
			l = strings.ReplaceAll(l, "="+addr+" ", "="+name+" ")
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	slices.Sort(lines)
	return lines
}
