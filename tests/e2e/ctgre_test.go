package e2e

import (
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
