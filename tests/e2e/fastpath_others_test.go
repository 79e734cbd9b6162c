package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The fast path keeps out of other users' way: packets it would redirect
// at XDP skip the stack's netfilter hooks and the input device's tc
// ingress, so an nftables chain that sees forwarded packets turns it off
// and a tc ingress filter keeps it from the device's packets. These tests
// have the other user drop the flow, and check that nothing arrives.

// fpOtherTable is an nftables table of another user whose forward chain
// drops the datagrams to fpPort.
const fpOtherTable = "table inet other {\n chain checks {\n  type filter hook forward priority 0; policy accept;\n" +
	"  udp dport 7777 drop\n }\n}\n"

// fpOtherChain is how `xfw fastpath` names fpOtherTable's chain.
const fpOtherChain = "nftables chain inet other checks (forward hook)"

// fpSendNone injects n IPv4 datagrams gen → sink and checks that none
// arrives (another user drops them): none reached sink's interface once
// fw took in everything gen sent (Drain), which no wait could tell.
func fpSendNone(t *testing.T, tp *nettest.Topology, step string, n int) {
	t.Helper()
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, fpPort))
	defer srv.Close()
	capt := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, func(c nettest.Captured) bool {
		return !c.Outgoing && c.Protocol == nettest.ProtoUDP && c.DstPort == fpPort
	})
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = fpFrame(tp, 4, nettest.IPv4{ID: uint16(i + 1)}, 32)
	}
	if err := nettest.Inject(tp.GenNS, tp.Gen.Ifname, frames...); err != nil {
		t.Fatal(err)
	}
	drainFw(t, tp)
	if got := capt.StopQueued(); len(got) != 0 {
		t.Errorf("%s: %d of %d datagrams the other user drops reached sink", step, len(got), n)
	}
	if got := srv.Received(); len(got) != 0 {
		t.Errorf("%s: sink received %d of %d datagrams the other user drops", step, len(got), n)
	}
}

// fpShow returns `xfw fastpath`'s output in fw.
func fpShow(t *testing.T, bin string, tp *nettest.Topology) string {
	t.Helper()
	return nettest.MustExec(t, tp.FwNS, bin, "fastpath")
}

// nftLoad loads an nftables ruleset in ns.
func nftLoad(t *testing.T, ns, ruleset string) {
	t.Helper()
	if res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, ns, ruleset, "nft", "-f", "-"); err != nil {
		t.Fatalf("nft -f: %v\n%s", err, res.Stderr)
	}
}

// TestFastPathNftForwardChain: with another user's nftables forward chain
// dropping a flow in fw's namespace, the flow is dropped with xfw on (the
// fast path is off and names the chain); without the table it is taken.
func TestFastPathNftForwardChain(t *testing.T) {
	requireTools(t, "nft")
	tp, fw := fpTopology(t, true)
	nftLoad(t, tp.FwNS, fpOtherTable)
	nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
	out := fpShow(t, fw.bin, tp)
	if !strings.Contains(out, "fast path off: "+fpOtherChain) {
		t.Errorf("xfw fastpath does not name the nftables chain:\n%s", out)
	}
	before, targets := fpStats(t, fw.bin, tp)
	if !strings.HasPrefix(targets, "none") {
		t.Errorf("fast path targets %q with an nftables forward chain, want none", targets)
	}
	fpSendNone(t, tp, "nftables forward chain", fpDatagram)
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "nftables forward chain", fpDelta(before, after), map[string]uint64{"no-target": fpDatagram})

	nettest.MustExec(t, tp.FwNS, "nft", "delete", "table", "inet", "other")
	nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
	before, _ = fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, fpDatagram, 32)
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "table removed", fpDelta(before, after), map[string]uint64{"taken": fpDatagram})

	// netdev chains: an ingress chain on in0 keeps the fast path from
	// what arrives there, an egress chain on out0 from sending to it.
	for _, c := range []struct{ hook, dev, says, outcome string }{
		{"ingress", tp.FwIn.Ifname, "fast path takes nothing arriving on " + tp.FwIn.Ifname, "no-source"},
		{"egress", tp.FwOut.Ifname, "fast path sends nothing to " + tp.FwOut.Ifname, "no-target"},
	} {
		nftLoad(t, tp.FwNS, "table netdev other {\n chain c {\n  type filter hook "+c.hook+" device "+c.dev+
			" priority 0; policy accept;\n }\n}\n")
		nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
		want := c.says + ": nftables chain netdev other c (" + c.hook + " hook)"
		if out := fpShow(t, fw.bin, tp); !strings.Contains(out, want) {
			t.Errorf("netdev %s chain: xfw fastpath does not say %q:\n%s", c.hook, want, out)
		}
		before, _ = fpStats(t, fw.bin, tp)
		fpSend(t, tp, 4, fpDatagram, 32)
		after, _ = fpStats(t, fw.bin, tp)
		fpExpect(t, "netdev "+c.hook+" chain", fpDelta(before, after), map[string]uint64{c.outcome: fpDatagram})
		nettest.MustExec(t, tp.FwNS, "nft", "delete", "table", "netdev", "other")
	}
}

// TestFastPathNftTableWithAgent: an nftables table added after the sync,
// while the agent runs, turns the fast path off without a sync (the agent
// follows nftables' notifications), and its removal turns it on again; a
// peer turning GRO off takes the target away; a tc ingress filter added
// later keeps the fast path from its device.
func TestFastPathNftTableWithAgent(t *testing.T) {
	requireTools(t, "nft", "tc")
	tp, fw := fpTopology(t, true)
	startAgent(t, fw.bin, tp)
	targetsAre := func(want string) func() bool {
		return func() bool { _, got := fpStats(t, fw.bin, tp); return strings.HasPrefix(got, want) }
	}
	waitFor(t, "the fast path's target", targetsAre(tp.FwOut.Ifname))

	nftLoad(t, tp.FwNS, fpOtherTable)
	waitFor(t, "the agent to turn the fast path off", targetsAre("none"))
	before, _ := fpStats(t, fw.bin, tp)
	fpSendNone(t, tp, "nftables table added", fpDatagram)
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "nftables table added", fpDelta(before, after), map[string]uint64{"no-target": fpDatagram})

	nettest.MustExec(t, tp.FwNS, "nft", "delete", "table", "inet", "other")
	waitFor(t, "the agent to turn the fast path on", targetsAre(tp.FwOut.Ifname))
	before, _ = fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, fpDatagram, 32)
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "nftables table removed", fpDelta(before, after), map[string]uint64{"taken": fpDatagram})

	// sink's veth turning GRO off stops taking XDP frames: the device's
	// XDP features change, and out0 is no target any more (frames
	// redirected to it would be lost).
	nettest.MustExec(t, tp.SinkNS, "ethtool", "-K", tp.Sink.Ifname, "gro", "off")
	waitFor(t, "the agent to drop the target", targetsAre("none"))
	before, _ = fpStats(t, fw.bin, tp)
	fpSend(t, tp, 4, fpDatagram, 32)
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "GRO off", fpDelta(before, after), map[string]uint64{"no-target": fpDatagram})
	nettest.MustExec(t, tp.SinkNS, "ethtool", "-K", tp.Sink.Ifname, "gro", "on")
	waitFor(t, "the agent to take the target back", targetsAre(tp.FwOut.Ifname))

	// The filter is added once the agent has attached to the trap devices
	// (it resyncs then): only tc's notification tells it of the filter.
	fpTrap(t, tp)
	waitFor(t, "the agent to attach to the trap devices", func() bool {
		return status(t, fw.bin, tp).ExitCode == 0 && strings.Contains(fpShow(t, fw.bin, tp), "trap0")
	})
	trapped := fpIngressFilter(t, tp)
	waitFor(t, "the agent to keep the fast path from "+tp.FwIn.Ifname, func() bool {
		return strings.Contains(fpShow(t, fw.bin, tp), "arriving on "+tp.FwIn.Ifname) &&
			!strings.Contains(fpShow(t, fw.bin, tp), "fast path stale")
	})
	before, _ = fpStats(t, fw.bin, tp)
	capt := trapped()
	fpSendNone(t, tp, "tc ingress filter added", fpDatagram)
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "tc ingress filter added", fpDelta(before, after), map[string]uint64{"no-source": fpDatagram})
	if n := len(capt.Wait(fpDatagram, fpWait)); n != fpDatagram {
		t.Errorf("the tc ingress filter took %d datagrams, want %d", n, fpDatagram)
	}
}

// fpTrap adds a veth pair to fw (trap0 → trap1) for fpIngressFilter.
func fpTrap(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	nettest.MustExec(t, tp.FwNS, "ip", "link", "add", "trap0", "type", "veth", "peer", "name", "trap1")
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "trap0", "up")
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "trap1", "up")
}

// fpIngressFilter adds another user's tc ingress filter on fw's input
// device that takes the IPv4 datagrams to fpPort away: it redirects them to
// fpTrap's veth pair. It returns a function that starts capturing them at
// trap1.
func fpIngressFilter(t *testing.T, tp *nettest.Topology) func() *nettest.Capture {
	t.Helper()
	nettest.MustExec(t, tp.FwNS, "tc", "qdisc", "add", "dev", tp.FwIn.Ifname, "clsact")
	nettest.MustExec(t, tp.FwNS, "tc", "filter", "add", "dev", tp.FwIn.Ifname, "ingress", "protocol", "ip",
		"prio", "1", "u32", "match", "ip", "dport", "7777", "0xffff",
		"action", "mirred", "egress", "redirect", "dev", "trap0")
	return func() *nettest.Capture {
		isUDP := func(c nettest.Captured) bool { return !c.Outgoing && c.DstPort == fpPort }
		return nettest.StartCapture(t, tp.FwNS, "trap1", isUDP)
	}
}

// TestFastPathForeignIngress: a tc ingress filter of another user on fw's
// input device sees the forwarded packets (here it takes them away): the fast
// path takes nothing arriving there, says why, and still sends to its
// target what arrives elsewhere.
func TestFastPathForeignIngress(t *testing.T) {
	requireTools(t, "tc")
	tp, fw := fpTopology(t, true)
	fpTrap(t, tp)
	trapped := fpIngressFilter(t, tp)
	nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
	out := fpShow(t, fw.bin, tp)
	if !strings.Contains(out, "fast path takes nothing arriving on "+tp.FwIn.Ifname+": a tc ingress filter") {
		t.Errorf("xfw fastpath does not name the tc ingress filter:\n%s", out)
	}
	if _, targets := fpStats(t, fw.bin, tp); !slices.Contains(strings.Fields(targets), tp.FwOut.Ifname) {
		t.Errorf("fast path targets %q, want %q (the filter is on the input device)", targets, tp.FwOut.Ifname)
	}
	before, _ := fpStats(t, fw.bin, tp)
	capt := trapped()
	fpSendNone(t, tp, "tc ingress filter", fpDatagram)
	after, _ := fpStats(t, fw.bin, tp)
	fpExpect(t, "tc ingress filter", fpDelta(before, after), map[string]uint64{"no-source": fpDatagram})
	if n := len(capt.Wait(fpDatagram, fpWait)); n != fpDatagram {
		t.Errorf("the tc ingress filter took %d datagrams, want %d", n, fpDatagram)
	}
	// Other datagrams pass the filter and reach sink through the stack.
	before, _ = fpStats(t, fw.bin, tp)
	fpSend(t, tp, 6, fpDatagram, 32)
	after, _ = fpStats(t, fw.bin, tp)
	fpExpect(t, "IPv6 past the filter", fpDelta(before, after), map[string]uint64{"no-source": fpDatagram})
}
