package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// MASQUERADE of GRE against the kernel: version 1 connections are keyed
// by their call ID (nf_conntrack_proto_gre.c), so the translation
// follows a call's later packets and ICMP errors about it, and an answer
// carrying the other side's call ID is not the call's reply (without the
// PPTP helper the reply tuple's keys are the original's swapped): it
// stays at fw. Keys 0 (version 0, call ID 0) are translated back.
// Through xfw and iptables-legacy (ip6tables-legacy) in twin topologies:
// what each end saw, the counters and `conntrack -L`.

// masqGRERuleset is TestMasqueradeGREAgainstKernel's ruleset (@SRC: gen's
// subnet, @GEN: gen, @OUT: fw's sink-side interface, @ICMP: the family's
// ICMP).
const masqGRERuleset = natTableStart + `-A POSTROUTING -s @SRC -o @OUT -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -s @GEN -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p @ICMP -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// greMasq is one twin's view for the steps: the family's addresses.
type greMasq struct {
	fam                    int
	gen, fwOut, sink       func(tp *nettest.Topology) netip.Addr
	name                   func(tp *nettest.Topology, a netip.Addr) string
	icmpProto, unreachType uint8
	unreachCode            uint8
}

// greMasqFam returns the view of family fam.
func greMasqFam(fam int) greMasq {
	if fam == 6 {
		return greMasq{fam: 6,
			gen:       func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv6 },
			fwOut:     func(tp *nettest.Topology) netip.Addr { return tp.FwOut.IPv6 },
			sink:      func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv6 },
			name:      nat6Name,
			icmpProto: nettest.ProtoICMPv6, unreachType: nettest.ICMPv6DestUnreachable, unreachCode: 1}
	}
	return greMasq{fam: 4,
		gen:       func(tp *nettest.Topology) netip.Addr { return tp.Gen.IPv4 },
		fwOut:     func(tp *nettest.Topology) netip.Addr { return tp.FwOut.IPv4 },
		sink:      func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv4 },
		name:      natName,
		icmpProto: nettest.ProtoICMP, unreachType: nettest.ICMPv4DestUnreachable, unreachCode: 2}
}

// step sends one GRE header from gen to sink (fromGen) or from sink to
// fw's masquerading address, and says where it arrived and with which
// call ID.
func (m greMasq) step(fromGen bool, gre []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		isGRE := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == 47 }
		raw := nettest.Raw{Proto: 47, Data: gre}
		at, atNS, atIf := "sink", tp.SinkNS, tp.Sink.Ifname
		frame := tp.GenToFw().Frame(nettest.IPPacket(m.gen(tp), m.sink(tp), raw))
		if !fromGen {
			at, atNS, atIf = "gen", tp.GenNS, tp.Gen.Ifname
			frame = tp.SinkToFw().Frame(nettest.IPPacket(m.sink(tp), m.fwOut(tp), raw))
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
		if !ok {
			return at + " saw nothing"
		}
		return fmt.Sprintf("%s saw %s to %s, call ID %s", at, m.name(tp, f.Src), m.name(tp, f.Dst), greCall(f.Payload))
	}
}

// unreachable has sink send fw's masquerading address a destination
// unreachable quoting the GRE header gre it got from there, and says what
// came to gen.
func (m greMasq) unreachable(gre []byte) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		inner := nettest.IPPacket(m.fwOut(tp), m.sink(tp), nettest.Raw{Proto: 47, Data: gre})
		var l4 nettest.Transport = nettest.ICMPv4{Type: m.unreachType, Code: m.unreachCode, Payload: inner}
		if m.fam == 6 {
			l4 = nettest.ICMPv6{Type: m.unreachType, Code: m.unreachCode, Payload: inner}
		}
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == m.icmpProto && c.ICMPType == m.unreachType
		})
		defer atGen.Stop()
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(nettest.IPPacket(m.sink(tp), m.fwOut(tp), l4))); err != nil {
			t.Fatal(err)
		}
		e, ok := atGen.WaitFor(func(nettest.Captured) bool { return true }, 1500*time.Millisecond)
		if !ok {
			return "gen got nothing"
		}
		out := fmt.Sprintf("gen got ICMP %d/%d from %s to %s", e.ICMPType, e.ICMPCode, m.name(tp, e.Src), m.name(tp, e.Dst))
		if e.Inner != nil {
			out += fmt.Sprintf(" quoting %s to %s, call ID %s", m.name(tp, e.Inner.Src), m.name(tp, e.Inner.Dst),
				greCall(e.Inner.Payload))
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

// steps are TestMasqueradeGREAgainstKernel's steps.
func (m greMasq) steps() []natStep {
	return []natStep{
		{"gen's call 0x1234 masqueraded", m.step(true, greV1(0x880b, 0x1234))},
		{"the call's next packet masqueraded too", m.step(true, greV1(0x880b, 0x1234))},
		{"sink's destination unreachable about the call comes back to gen", m.unreachable(greV1(0x880b, 0x1234))},
		{"one about another call does not", m.unreachable(greV1(0x880b, 0x4321))},
		{"sink's answer with its own call ID stays at fw", m.step(false, greV1(0x880b, 0x9abc))},
		{"gen's version 0 masqueraded", m.step(true, []byte{0, 0, 0x08, 0x00, 0, 0, 0, 0})},
		{"sink's call ID 0 answers it: translated back", m.step(false, greV1(0x880b, 0))},
		{"gen's version 1 carrying IPv4: INVALID, dropped", m.step(true, greV1(0x0800, 0x1234))},
	}
}

// TestMasqueradeGREAgainstKernel masquerades GRE version 1 calls and
// version 0 (greMasq.steps) in twins, both families.
func TestMasqueradeGREAgainstKernel(t *testing.T) {
	eachFamily(t, func(t *testing.T, bin string, fam int) {
		requireTools(t, "conntrack")
		m := greMasqFam(fam)
		tw := newTwins(t, bin)
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			src, icmp := fmt.Sprintf("10.%d.1.0/24", tp.Subnet), "icmp"
			if fam == 6 {
				nat6Setup(t, tp)
				src, icmp = fmt.Sprintf("fd00:%d:1::/64", tp.Subnet), "ipv6-icmp"
			}
			fw.restore(t, tp, fam, strings.NewReplacer("@SRC", src, "@GEN", m.gen(tp).String(), "@OUT", tp.FwOut.Ifname,
				"@ICMP", icmp).Replace(masqGRERuleset))
		})
		if t.Failed() {
			return
		}
		runNatSteps(t, tw, m.steps())
		compareNatCountersFam(t, tw, fam, 2)
		compareNatConntrackProtos(t, tw, fam, []string{"gre"}, func(string, int) bool { return false }, 3)
	})
}
