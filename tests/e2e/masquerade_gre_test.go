package e2e

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// MASQUERADE of GRE against the kernel: version 1 connections are keyed
// by their call ID (nf_conntrack_proto_gre.c), so the translation
// follows a call's later packets, and an answer carrying the other
// side's call ID is not the call's reply (without the PPTP helper the
// reply tuple's keys are the original's swapped): it stays at fw. Keys
// 0 (version 0, call ID 0) are translated back. Through xfw and
// iptables-legacy in twin topologies: what each end saw, the counters
// and `conntrack -L`.

// greMasqStep sends one GRE header from gen to sink (fromGen) or from
// sink to the address sink saw last (the masquerading one), and says
// where it arrived and with which call ID.
func greMasqStep(fromGen bool, gre []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		isGRE := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == 47 }
		raw := nettest.Raw{Proto: 47, Data: gre}
		var frame []byte
		at, atNS, atIf := "sink", tp.SinkNS, tp.Sink.Ifname
		if fromGen {
			frame = tp.GenToFw().Frame(nettest.IPv4{Src: tp.Gen.IPv4, Dst: tp.Sink.IPv4}.Packet(raw))
		} else {
			at, atNS, atIf = "gen", tp.GenNS, tp.Gen.Ifname
			frame = tp.SinkToFw().Frame(nettest.IPv4{Src: tp.Sink.IPv4, Dst: tp.FwOut.IPv4}.Packet(raw))
		}
		capture := nettest.StartCapture(t, atNS, atIf, isGRE)
		var err error
		if fromGen {
			err = tp.InjectFromGen(frame)
		} else {
			err = tp.InjectFromSink(frame)
		}
		if err != nil {
			t.Fatal(err)
		}
		f, ok := capture.WaitFor(func(nettest.Captured) bool { return true }, 1500*time.Millisecond)
		capture.Stop()
		out := at + " saw nothing"
		if ok {
			out = fmt.Sprintf("%s saw %s to %s, call ID %s", at, natName(tp, f.Src), natName(tp, f.Dst), greCall(f.Payload))
		}
		return out
	}
}

// greCall returns the call ID of GRE header p as text ("none" when it is
// too short for one).
func greCall(p []byte) string {
	if len(p) < 8 {
		return "none"
	}
	return fmt.Sprintf("%#x", binary.BigEndian.Uint16(p[6:8]))
}

// masqGRERuleset is TestMasqueradeGREAgainstKernel's ruleset (X: the
// topology's subnet, OUT: fw's sink-side interface).
const masqGRERuleset = natTableStart + `-A POSTROUTING -s 10.X.1.0/24 -o OUT -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -s 10.X.1.2/32 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// greMasqError has sink send fw's masquerading address a protocol
// unreachable quoting the GRE header gre it got from there, and says
// what came to gen.
func greMasqError(gre []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		inner := nettest.IPv4{Src: tp.FwOut.IPv4, Dst: tp.Sink.IPv4}.Packet(nettest.Raw{Proto: 47, Data: gre})
		icmp := nettest.IPPacket(tp.Sink.IPv4, tp.FwOut.IPv4, nettest.ICMPv4{Type: nettest.ICMPv4DestUnreachable, Code: 2, Payload: inner})
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMP
		})
		defer atGen.Stop()
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(icmp)); err != nil {
			t.Fatal(err)
		}
		e, ok := atGen.WaitFor(func(nettest.Captured) bool { return true }, 1500*time.Millisecond)
		if !ok {
			return "gen got nothing"
		}
		out := fmt.Sprintf("gen got ICMP %d/%d from %s to %s", e.ICMPType, e.ICMPCode, natName(tp, e.Src), natName(tp, e.Dst))
		if e.Inner != nil {
			out += fmt.Sprintf(" quoting %s to %s, call ID %s", natName(tp, e.Inner.Src), natName(tp, e.Inner.Dst), greCall(e.Inner.Payload))
		}
		return out
	}
}

// masqGRESteps are TestMasqueradeGREAgainstKernel's steps.
var masqGRESteps = []natStep{
	{"gen's call 0x1234 masqueraded", greMasqStep(true, greV1(0x880b, 0x1234))},
	{"the call's next packet masqueraded too", greMasqStep(true, greV1(0x880b, 0x1234))},
	{"sink's protocol unreachable about the call comes back to gen", greMasqError(greV1(0x880b, 0x1234))},
	{"one about another call does not", greMasqError(greV1(0x880b, 0x4321))},
	{"sink's answer with its own call ID stays at fw", greMasqStep(false, greV1(0x880b, 0x9abc))},
	{"gen's version 0 masqueraded", greMasqStep(true, []byte{0, 0, 0x08, 0x00, 0, 0, 0, 0})},
	{"sink's call ID 0 answers it: translated back", greMasqStep(false, greV1(0x880b, 0))},
	{"gen's version 1 carrying IPv4: INVALID, dropped", greMasqStep(true, greV1(0x0800, 0x1234))},
}

// TestMasqueradeGREAgainstKernel masquerades GRE version 1 calls and
// version 0 (masqGRESteps) in twins.
func TestMasqueradeGREAgainstKernel(t *testing.T) {
	tw := masqTwins(t, masqGRERuleset)
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, masqGRESteps)
	compareNatCounters(t, tw, 2)
	compareNatConntrack(t, tw, func(string, int) bool { return false }, 3)
}
