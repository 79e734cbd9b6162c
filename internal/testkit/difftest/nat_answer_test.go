package difftest

import (
	"encoding/binary"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// fwPacket returns fw's own IPv4 packet (an OUTPUT probe's frame).
func fwPacket(src, dst netip.Addr, l4 nettest.Transport, opts []byte) []byte {
	return nettest.IPv4{Src: src, Dst: dst, Options: opts}.Packet(l4)
}

// TestFwAnswer: fw's TCP probes from its own addresses are answered from
// the end their destination is routed to, ports swapped; UDP, probes with
// IPv4 options, spoofed sources and destinations of fw itself are not.
func TestFwAnswer(t *testing.T) {
	plan := NewPlan(ir.IPv4, DefaultSubnet)
	g := &pgen{rng: rand.New(rand.NewSource(1)), plan: plan, fam: plan.Family}
	syn := nettest.TCP{SrcPort: 40000, DstPort: 443, Flags: nettest.TCPSyn}
	tests := []struct {
		name string
		pkt  []byte
		from Origin // "" for no answer
	}{
		{"tcp to sink", fwPacket(plan.FwOut, plan.Sink, syn, nil), FromSink},
		{"tcp to gen", fwPacket(plan.FwIn, plan.Gen, syn, nil), FromGen},
		{"udp", fwPacket(plan.FwOut, plan.Sink, nettest.UDP{SrcPort: 40000, DstPort: 53}, nil), ""},
		{"ipv4 options", fwPacket(plan.FwOut, plan.Sink, syn, []byte{1, 1, 1, 1}), ""},
		{"spoofed source", fwPacket(plan.Gen, plan.Sink, syn, nil), ""},
		{"to fw itself", fwPacket(plan.FwOut, plan.FwIn, syn, nil), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := fwAnswer(g, Probe{From: FromFw, Path: PathOutput, Frames: [][]byte{tt.pkt}})
			if ok != (tt.from != "") {
				t.Fatalf("answered %v, want %v", ok, tt.from != "")
			}
			if !ok {
				return
			}
			if a.From != tt.from || !a.Answer || a.Step != 1 {
				t.Fatalf("answer %+v, want from %s, an answer at step 1", a, tt.from)
			}
			o := a.decode(a.Frames[0])
			if o == nil || o.SrcPort != 443 || o.DstPort != 40000 || o.TCPFlags != nettest.TCPSyn|nettest.TCPAck {
				t.Fatalf("answer frame %v, want 443 > 40000 SYN,ACK", o)
			}
		})
	}
}

// TestUniqueSourcePortFw: fw's own probes get unused source ports too.
func TestUniqueSourcePortFw(t *testing.T) {
	plan := NewPlan(ir.IPv4, DefaultSubnet)
	seen, next := map[uint16]bool{}, uint16(firstFreePort)
	udp := nettest.UDP{SrcPort: 4999, DstPort: 443}
	first := Probe{From: FromFw, Frames: [][]byte{fwPacket(plan.FwIn, netip.MustParseAddr("203.0.113.17"), udp, nil)}}
	second := Probe{From: FromFw, Frames: [][]byte{fwPacket(plan.FwIn, netip.MustParseAddr("203.0.113.18"), udp, nil)}}
	uniqueSourcePort(first, seen, &next)
	uniqueSourcePort(second, seen, &next)
	a, b := first.decode(first.Frames[0]), second.decode(second.Frames[0])
	if a.SrcPort != 4999 || b.SrcPort != firstFreePort {
		t.Fatalf("source ports %d, %d; want 4999, %d", a.SrcPort, b.SrcPort, firstFreePort)
	}
	want := fwPacket(plan.FwIn, netip.MustParseAddr("203.0.113.18"), nettest.UDP{SrcPort: firstFreePort, DstPort: 443}, nil)
	if string(second.Frames[0]) != string(want) {
		t.Errorf("the second probe is\n%x\nwant (checksum adjusted)\n%x", second.Frames[0], want)
	}
}

// TestMaskRandomPortsAnswer: an answer's port an SNAT picked at random is
// masked; one of the probe's own ports is not.
func TestMaskRandomPortsAnswer(t *testing.T) {
	plan := NewPlan(ir.IPv4, DefaultSubnet)
	rp := &randomPorts{ranges: [][2]uint16{{5000, 5002}}}
	probe := Probe{From: FromGen, Frames: [][]byte{nettest.Ethernet{Dst: plan.FwInMAC, Src: plan.GenMAC}.Frame(
		nettest.IPv4{Src: plan.Gen, Dst: plan.Sink}.Packet(nettest.TCP{SrcPort: 20413, DstPort: 17361, Flags: nettest.TCPAck}))}}
	answer := func(sport, dport uint16) event {
		f := nettest.Ethernet{Dst: plan.GenMAC, Src: plan.FwInMAC}.Frame(
			nettest.IPv4{Src: plan.FwOut, Dst: plan.Gen}.Packet(nettest.TCP{SrcPort: sport, DstPort: dport, Flags: nettest.TCPAck}))
		pkt, err := nettest.Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		return event{kind: evGen, pkt: pkt, l3: ethHeaderLen}
	}
	ports := func(e event) (uint16, uint16) {
		b := e.pkt.Raw[ethHeaderLen+20:]
		return binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
	}
	if s, d := ports(maskRandomPorts(answer(5001, 20413), relAnswer, probe, rp)); s != 0 || d != 20413 {
		t.Errorf("answer from a random SNAT port: ports %d > %d, want 0 > 20413", s, d)
	}
	if s, d := ports(maskRandomPorts(answer(17361, 20413), relAnswer, probe, rp)); s != 17361 || d != 20413 {
		t.Errorf("answer translated back: ports %d > %d, want them kept", s, d)
	}
}

// TestMaskRandomPortsLocal6: a copy an IPv6 raw socket of fw got (the
// bytes after the IPv6 header) has the port a DNAT with --random picked
// masked, as a captured frame's (nat6 seed 310: the kernel's and xfw's
// picks within 22-24 differed).
func TestMaskRandomPortsLocal6(t *testing.T) {
	plan := NewPlan(ir.IPv6, DefaultSubnet)
	rp := &randomPorts{ranges: [][2]uint16{{22, 24}}}
	syn := nettest.TCP{SrcPort: 65534, DstPort: 22, Flags: nettest.TCPSyn}
	probe := Probe{From: FromGen, Frames: [][]byte{nettest.Ethernet{Dst: plan.FwInMAC, Src: plan.GenMAC}.Frame(
		nettest.IPv6{Src: plan.Gen, Dst: netip.MustParseAddr("2001:db8:2::9")}.Packet(syn))}}
	local := func(dport uint16) event {
		syn.DstPort = dport
		ip := nettest.IPv6{Src: plan.Gen, Dst: plan.FwOut}.Packet(syn)
		return event{kind: evLocal, l3: -1,
			pkt: &nettest.Packet{IPVersion: 6, Protocol: nettest.ProtoTCP, Src: plan.Gen, Raw: ip[40:]}}
	}
	for _, dport := range []uint16{22, 24} {
		got := maskRandomPorts(local(dport), relCopy, probe, rp)
		b := got.pkt.Raw
		if s, d, sum := binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint16(b[16:]); s != 65534 || d != 0 || sum != 0 {
			t.Errorf("DNAT to port %d: ports %d > %d, checksum %#x; want 65534 > 0, checksum 0", dport, s, d, sum)
		}
	}
	if got, want := maskRandomPorts(local(22), relCopy, probe, rp).describe(relCopy), maskRandomPorts(local(24), relCopy, probe, rp).describe(relCopy); got != want {
		t.Errorf("the two picks compare differently:\n%s\n%s", got, want)
	}
}
