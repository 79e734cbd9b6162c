package difftest

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestNATReverse: with a ruleset that translates sources, a probe going
// the other way of an earlier probe's flow (an ICMPv6 echo reply to an
// earlier request's source, a protocol without ports, UDP with the ports
// swapped) is left out; other flows, and every flow without a source
// translation, are kept.
func TestNATReverse(t *testing.T) {
	plan := NewPlan(ir.IPv6, DefaultSubnet)
	const snat = "*nat\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n"
	const dnat = "*nat\n-A PREROUTING -p tcp -j DNAT --to-destination [::1]:80\nCOMMIT\n"
	probe := func(from Origin, l4 nettest.Transport) Probe {
		h := nettest.IPv6{Src: plan.Gen, Dst: plan.Sink}
		eth := nettest.Ethernet{Dst: plan.FwInMAC, Src: plan.GenMAC}
		if from == FromSink {
			h = nettest.IPv6{Src: plan.Sink, Dst: plan.Gen}
			eth = nettest.Ethernet{Dst: plan.FwOutMAC, Src: plan.SinkMAC}
		}
		return Probe{From: from, Path: PathForward, Frames: [][]byte{eth.Frame(h.Packet(l4))}}
	}
	echo := func(typ uint8) nettest.Transport { return nettest.ICMPv6{Type: typ, Payload: []byte("x")} }
	tests := []struct {
		name    string
		ruleset string
		first   Probe
		then    Probe
		dropped bool
	}{
		{"echo reply to a request's source", snat, probe(FromGen, echo(nettest.ICMPv6EchoRequest)),
			probe(FromSink, echo(nettest.ICMPv6EchoReply)), true},
		{"protocol without ports", snat, probe(FromGen, nettest.Raw{Proto: 253}), probe(FromSink, nettest.Raw{Proto: 253}), true},
		{"udp ports swapped", snat, probe(FromGen, nettest.UDP{SrcPort: 1000, DstPort: 53}),
			probe(FromSink, nettest.UDP{SrcPort: 53, DstPort: 1000}), true},
		{"udp other ports", snat, probe(FromGen, nettest.UDP{SrcPort: 1000, DstPort: 53}),
			probe(FromSink, nettest.UDP{SrcPort: 53, DstPort: 1001}), false},
		{"same direction again", snat, probe(FromGen, nettest.Raw{Proto: 253}), probe(FromGen, nettest.Raw{Proto: 253}), false},
		{"no source translation", dnat, probe(FromGen, echo(nettest.ICMPv6EchoRequest)),
			probe(FromSink, echo(nettest.ICMPv6EchoReply)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[flowEnds]bool{}
			if natReverse(tt.first, tt.ruleset, seen) {
				t.Fatal("the first probe left out")
			}
			if got := natReverse(tt.then, tt.ruleset, seen); got != tt.dropped {
				t.Errorf("left out %v, want %v", got, tt.dropped)
			}
		})
	}
}

// TestUniqueBurstPorts: the rate bursts' packets of one key keep one
// source port, a new one when an earlier probe used it; keys of other
// sources, destinations or destination ports with the same source port
// get ports of their own.
func TestUniqueBurstPorts(t *testing.T) {
	plan := NewPlan(ir.IPv6, DefaultSubnet)
	burst := func(src netip.Addr, sport uint16) Probe {
		return burstTo(plan, src, plan.FwIn, sport)
	}
	far := withLastByte(plan.FarGen.Addr(), 7)
	bursts := []Probe{burst(plan.Gen, 1024), burst(plan.Gen, 1024), burst(far, 1024), burst(far, 1024), burst(plan.Gen, 1025),
		burstTo(plan, plan.Gen, plan.FwOut, 1024), burst(plan.Gen, 1024), burstToPort(plan, plan.Gen, plan.FwIn, 1024, 4702)}
	seen, next := map[uint16]bool{1024: true}, uint16(firstFreePort)
	uniqueBurstPorts(bursts, seen, &next)
	var got []uint16
	for _, p := range bursts {
		port, _ := probeSourcePort(p)
		got = append(got, port)
		if !validUDPChecksum(p) {
			t.Errorf("port %d: bad checksum", port)
		}
	}
	want := []uint16{firstFreePort, firstFreePort, firstFreePort + 1, firstFreePort + 1, 1025, firstFreePort + 2, firstFreePort,
		firstFreePort + 3}
	if !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
}

// burstTo returns a rate burst's UDP packet from gen's side to port 4701.
func burstTo(plan Plan, src, dst netip.Addr, sport uint16) Probe {
	return burstToPort(plan, src, dst, sport, 4701)
}

// burstToPort returns a rate burst's UDP packet from gen's side.
func burstToPort(plan Plan, src, dst netip.Addr, sport, dport uint16) Probe {
	pkt := nettest.IPv6{Src: src, Dst: dst}.Packet(nettest.UDP{SrcPort: sport, DstPort: dport, Payload: []byte("x")})
	return Probe{From: FromGen, Path: PathInput, Frames: [][]byte{nettest.Ethernet{Dst: plan.FwInMAC, Src: plan.GenMAC}.Frame(pkt)}}
}

// validUDPChecksum reports whether a probe's UDP checksum is right.
func validUDPChecksum(p Probe) bool {
	o := p.decode(p.Frames[0])
	if o == nil {
		return false
	}
	want := nettest.IPv6{Src: o.Src, Dst: o.Dst}.Packet(nettest.UDP{SrcPort: o.SrcPort, DstPort: o.DstPort, Payload: o.Payload})
	return string(want[40:48]) == string(p.Frames[0][len(p.Frames[0])-len(want)+40:][:8])
}

// TestNATRandomPorts6: the random ports of IPv6 nat rules: a port range
// in brackets, an address without brackets and without ports (any port:
// not its last group read as a port), a shifted port map, IPv4's too.
func TestNATRandomPorts6(t *testing.T) {
	tests := []struct {
		line   string
		ranges [][2]uint16
		any    bool
	}{
		{"-A POSTROUTING -o out0 -p udp -j SNAT --to-source fd00:165:2::1 --random-fully", nil, true},
		{"-A POSTROUTING -p udp -j SNAT --to-source [fd00:1::1-fd00:1::3]:1000-1010 --random", [][2]uint16{{1000, 1010}}, false},
		{"-A PREROUTING -p tcp -j DNAT --to-destination [2001:db8:2::14]:80-87/22 --random", [][2]uint16{{80, 87}}, false},
		{"-A PREROUTING -p tcp -j DNAT --to-destination 10.1.2.3-10.1.2.5:80-81 --random", [][2]uint16{{80, 81}}, false},
		{"-A POSTROUTING -p udp -j MASQUERADE --to-ports 5000-5010 --random", [][2]uint16{{5000, 5010}}, false},
	}
	for _, tt := range tests {
		rp := natRandomPorts(tt.line)
		if rp == nil || rp.any != tt.any || !slices.Equal(rp.ranges, tt.ranges) {
			t.Errorf("%s: %+v, want ranges %v any %v", tt.line, rp, tt.ranges, tt.any)
		}
	}
}

// TestNATEchoClashDNAT: with rules translating echo requests'
// destinations, a request from another source to an address a DNAT sent
// an earlier request to (or to one a DNAT may send it to) is left out,
// as two requests to one destination are (difftest nat6 seed 48); one a
// rule cannot have sent there, or to another address, is kept.
func TestNATEchoClashDNAT(t *testing.T) {
	plan := NewPlan(ir.IPv6, DefaultSubnet)
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	echo := func(from Origin, src, dst netip.Addr) Probe {
		eth := nettest.Ethernet{Dst: plan.FwInMAC, Src: plan.GenMAC}
		if from == FromSink {
			eth = nettest.Ethernet{Dst: plan.FwOutMAC, Src: plan.SinkMAC}
		}
		pkt := nettest.IPv6{Src: src, Dst: dst}.Packet(nettest.ICMPv6{Type: nettest.ICMPv6EchoRequest, Payload: []byte("x")})
		return Probe{From: from, Path: PathForward, Frames: [][]byte{eth.Frame(pkt)}}
	}
	const notSink = "*nat\n-A PREROUTING ! -d fd00:42:2::/64 -j DNAT --to-destination fd00:42:2::2 --persistent\n" +
		"-A POSTROUTING ! -o in0 -p ipv6-icmp -m icmp6 --icmpv6-type echo-request -j SNAT --to-source 2001:db8:2::1e-2001:db8:2::21\nCOMMIT\n"
	const farGen = "*nat\n-A PREROUTING -d 2001:db8:1::/48 -j DNAT --to-destination fd00:42:2::2\nCOMMIT\n"
	const toRange = "*nat\n-A PREROUTING -d fd00:42:1::1 -j DNAT --to-destination 2001:db8:2::1e-2001:db8:2::21\nCOMMIT\n"
	const tcpOnly = "*nat\n-A PREROUTING -p tcp -j DNAT --to-destination fd00:42:2::2\nCOMMIT\n"
	fromSink := echo(FromSink, a("fd00:42:100::2"), a("2001:db8:1:3c21::1"))
	tests := []struct {
		name    string
		ruleset string
		first   Probe
		then    Probe
		dropped bool
	}{
		{"DNATed to the address the next one is for", notSink, fromSink,
			echo(FromGen, a("2001:db8:1:d645::1"), plan.Sink), true},
		{"another address", notSink, fromSink, echo(FromGen, a("2001:db8:1:d645::1"), a("fd00:42:2::3")), false},
		{"the rule's condition leaves the first out", farGen, echo(FromSink, a("fd00:42:100::2"), a("2001:db8:2::5")),
			echo(FromGen, a("2001:db8:1:d645::1"), plan.Sink), false},
		{"the rule's condition takes the first", farGen, fromSink, echo(FromGen, a("fd00:42:1::2"), plan.Sink), true},
		{"an address of the range", toRange, echo(FromGen, plan.Gen, plan.FwIn),
			echo(FromSink, plan.Sink, a("2001:db8:2::20")), true},
		{"TCP only", tcpOnly, fromSink, echo(FromGen, a("2001:db8:1:d645::1"), plan.Sink), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen, bySrc := map[netip.Addr]netip.Addr{}, map[netip.Addr]netip.Addr{}
			dnats := natEchoDNATs(tt.ruleset, plan)
			if natEchoClash(tt.first, plan, seen, dnats, bySrc) {
				t.Fatal("the first probe left out")
			}
			if got := natEchoClash(tt.then, plan, seen, dnats, bySrc); got != tt.dropped {
				t.Errorf("left out %v, want %v", got, tt.dropped)
			}
		})
	}
}
