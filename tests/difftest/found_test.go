package difftest_test

// Differences the campaigns of xfw-difftest found (nat rulesets, the
// rate-aware and stateful ones), each against the kernel with the packets
// that showed it.

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// natResetPort is the source port of fw's own SYN in TestNATOutputReplyReset
// (no socket of fw's has it: its stack answers the SYN,ACK with a RST).
const natResetPort = 20012

// TestNATOutputReplyReset compares fw's answer to the far end's SYN,ACK in
// a connection nat OUTPUT translated, when fw has no socket for it (its
// SYN came from a raw socket): fw's own SYN to gen's port 53 is given
// another destination beyond gen by a DNAT, the far end (gen) answers, and
// the answer, its source given back, meets no socket: the kernel's TCP
// answers it with a RST (tcp_v4_send_reset, on the RTN_LOCAL route of the
// answer's input routing), which leaves translated as the connection's.
// xfw's answer went to the stack through loopback, whose route to the
// host's address is RTN_UNICAST: no RST (difftest nat seeds 33 and 37).
// It still does for a source of the host's own, or one that routes back
// by another device while rp_filter is on (docs/differences.md).
// Each firewall must show exactly the SYN at gen, the SYN,ACK at fw and the
// RST at gen.
func TestNATOutputReplyReset(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	far := p.FarGen.Addr().Next().Next().Next().Next().Next().Next().Next() // .7, beyond gen
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A OUTPUT -p tcp -j DNAT --to-destination %s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A OUTPUT -m conntrack --ctstate RELATED,ESTABLISHED --ctstatus SEEN_REPLY -j ACCEPT\n"+
		"-A INPUT -m state --state INVALID -j DROP\nCOMMIT\n", far)
	// The SYN to gen, or to sink: the answer's source given back routes
	// back by the device it arrived on (in0), or by the other (out0, with
	// rp_filter off in the test topology, as in a new namespace).
	for _, to := range []netip.Addr{p.Gen, p.Sink} {
		syn := nettest.IPv4{Src: p.FwOut, Dst: to}.Packet(nettest.TCP{SrcPort: natResetPort, DstPort: 53,
			Flags: nettest.TCPSyn, Window: 512, Payload: []byte("fw's own syn")})
		corpus := &difftest.Corpus{Probes: []difftest.Probe{
			{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{syn}, Note: "fw's own tcp"},
			answerFromGen(p, to, p.FwOut, 53, natResetPort, len("fw's own syn")),
		}}
		checkObserved(t, s, difftest.Case{Name: "nat OUTPUT reply reset, SYN to " + to.String(), Ruleset: ruleset, Corpus: corpus},
			[2]int{3, 3}, "the SYN at gen, the SYN,ACK at fw, fw's RST at gen")
	}
}

// answerFromGen is gen's SYN,ACK to fw's SYN of payload n bytes (from
// src:sport, as it left fw untranslated, to dst:dport): an answer probe,
// built on each side from the copy that arrived at gen.
func answerFromGen(p difftest.Plan, src, dst netip.Addr, sport, dport uint16, n int) difftest.Probe {
	pkt := nettest.IPv4{Src: src, Dst: dst}.Packet(nettest.TCP{SrcPort: sport, DstPort: dport,
		Seq: 0x5eed0000, Ack: uint32(n) + 1, Flags: nettest.TCPSyn | nettest.TCPAck, Window: 512})
	frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
	return difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame}, Step: 1,
		KeepL4: true, Answer: true, Note: "gen's answer to fw's tcp"}
}

// TestNATSnatRangeKeepsEchoSource compares an SNAT to an address range
// holding the source of fw's own echo request: the kernel keeps the
// source (get_unique_tuple: the original tuple in the range and free is
// kept, an echo's identifier standing for its port) where xfw gave the
// echo the range's hashed address (difftest, the rate-aware campaign's
// nat rulesets). Each firewall must show each request at sink, from
// fw's own address.
func TestNATSnatRangeKeepsEchoSource(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	last := p.FwOut.As4()
	last[3] += 2
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A POSTROUTING -s %s -p icmp -j SNAT --to-source %s-%s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A INPUT -m conntrack --ctstate ESTABLISHED -j ACCEPT\nCOMMIT\n", p.FwOut, p.FwOut, netip.AddrFrom4(last))
	var probes []difftest.Probe
	// Echoes to sink from fw's address (the range's hash picks the same
	// address for each: it reads the addresses only).
	for id := uint16(1); id <= 4; id++ {
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput, KeepL4: true,
			Frames: [][]byte{nettest.EchoRequest(p.FwOut, p.Sink, id, 1, []byte("fw's own echo"))},
			Note:   fmt.Sprintf("fw's echo %d", id)})
	}
	checkObserved(t, s, difftest.Case{Name: "SNAT range keeps the echo's source", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{4, 4}, "each echo at sink from fw's own address")
}

// TestNATSnatRangeKeepsSourceMapping compares an SNAT to an address
// range of a source's echoes (identifier 0) and datagrams of a protocol
// without ports to several destinations: the kernel gives each the first
// one's mapping (get_unique_tuple's find_appropriate_src, whose same_src
// compares an echo's identifier as a port and finds a protocol without
// ports by its address), where xfw hashed each destination to its own
// address of the range (difftest nat seed 205). Every probe must arrive
// at sink, from the same address on both sides.
func TestNATSnatRangeKeepsSourceMapping(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	last := p.FwOut.As4()
	last[3] += 3
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A POSTROUTING -s %s -j SNAT --to-source %s-%s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", p.Gen, p.FwOut, netip.AddrFrom4(last))
	var probes []difftest.Probe
	const dsts = 6
	for i := 0; i < 2*dsts; i++ {
		dst := p.FarSink.Addr().As4()
		dst[3] = byte(10 + i%dsts)
		var pkt []byte
		note := "gen's echo, identifier 0, to " + netip.AddrFrom4(dst).String()
		if i < dsts {
			pkt = nettest.EchoRequest(p.Gen, netip.AddrFrom4(dst), 0, uint16(i+1), []byte("same source"))
		} else {
			pkt = nettest.IPv4{Src: p.Gen, Dst: netip.AddrFrom4(dst), TTL: 64}.Packet(nettest.Raw{Proto: 253, Data: []byte("same source")})
			note = "gen's protocol 253 to " + netip.AddrFrom4(dst).String()
		}
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		probes = append(probes, difftest.Probe{From: difftest.FromGen, Path: difftest.PathForward, Frames: [][]byte{frame},
			Step: i, KeepL4: true, Note: note})
	}
	checkObserved(t, s, difftest.Case{Name: "SNAT range keeps a source's mapping", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2 * dsts, 2 * dsts}, "each probe at sink, translated alike")
}

// TestNATDnatTupleClash compares a host's datagrams of a protocol
// without ports, one to fw's address that a DNAT sends beyond sink and
// one to that far address itself, in either order. The second of each
// pair is a new connection whose reply tuple is the first's: the kernel
// walks the chains for it (NEW, counted in nat PREROUTING and
// POSTROUTING), its null binding has no port to change and the
// confirmation drops it. xfw tracks a DNAT connection under its
// translated tuple, and took the datagram that came with that tuple for
// the connection's own, forwarding it (difftest nat seed 60; the other
// order, the DNAT second, was nat_null.h's already). Each firewall must
// deliver the first datagram of each pair to sink, and only it.
func TestNATDnatTupleClash(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	far := func(last byte) netip.Addr {
		a := p.FarSink.Addr().As4()
		a[3] = last
		return netip.AddrFrom4(a)
	}
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A PREROUTING -i in0 -d %[1]s -p 253 -j DNAT --to-destination %[2]s\n"+
		"-A PREROUTING -i in0 -d %[1]s -p 254 -j DNAT --to-destination %[3]s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A FORWARD -m conntrack --ctstate NEW\n-A FORWARD -m conntrack --ctstate ESTABLISHED\nCOMMIT\n",
		p.FwIn, far(21), far(22))
	probe := func(proto uint8, dst netip.Addr, step int) difftest.Probe {
		pkt := nettest.IPv4{Src: p.Gen, Dst: dst, TTL: 64}.Packet(nettest.Raw{Proto: proto, Data: []byte("dnat tuple")})
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathForward, Frames: [][]byte{frame}, Step: step,
			Note: fmt.Sprintf("gen's protocol %d to %s", proto, dst)}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		probe(253, p.FwIn, 0), probe(253, far(21), 1), // the DNAT first
		probe(254, far(22), 2), probe(254, p.FwIn, 3), // the DNAT second
	}}
	checkObserved(t, s, difftest.Case{Name: "DNAT tuple clash", Ruleset: ruleset, Corpus: corpus}, [2]int{2, 2},
		"the first datagram of each pair at sink, the second dropped")
}

// TestNATSnatEchoCodes compares a host's two echo requests to one peer,
// identifier 0, codes 255 and 0, masqueraded to one address: the kernel's
// ICMP tuples carry the code, so the two are two connections with
// distinct reply tuples and both leave with identifier 0. xfw keyed the
// echo's mapping by the identifier alone, found the first one's under
// the second's reply tuple, and dropped the second request as a clash
// (difftest nat6 seed 50). Both families; each firewall must deliver
// both requests to sink.
func TestNATSnatEchoCodes(t *testing.T) {
	for _, fam := range []ir.Family{ir.IPv4, ir.IPv6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
			p := s.Plan()
			ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
				"-A POSTROUTING -s %s -j SNAT --to-source %s\nCOMMIT\n"+
				"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", p.Gen, p.FwOut)
			var probes []difftest.Probe
			for i, code := range []uint8{255, 0} {
				var pkt []byte
				if fam == ir.IPv4 {
					pkt = nettest.IPv4{Src: p.Gen, Dst: p.Sink, TTL: 64}.Packet(nettest.ICMPv4{Type: nettest.ICMPv4EchoRequest, Code: code,
						Rest: uint32(i + 1), Payload: []byte("echo code")})
				} else {
					pkt = nettest.IPv6{Src: p.Gen, Dst: p.Sink, HopLimit: 64}.Packet(nettest.ICMPv6{Type: nettest.ICMPv6EchoRequest, Code: code,
						Rest: uint32(i + 1), Payload: []byte("echo code")})
				}
				frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
				probes = append(probes, difftest.Probe{From: difftest.FromGen, Path: difftest.PathForward, Frames: [][]byte{frame},
					Step: i, KeepL4: true, Note: fmt.Sprintf("gen's echo, identifier 0, code %d", code)})
			}
			checkObserved(t, s, difftest.Case{Name: "SNAT of echoes with two codes", Ruleset: ruleset,
				Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2, 2}, "both requests at sink, identifier 0")
		})
	}
}

// TestNATOutputIGMP compares fw's own IGMP datagrams (protocol 2) that a
// DNAT in nat OUTPUT sends beyond sink, one first routed to sink's link
// and one to gen's: the kernel routes them again without a device
// (ip_route_me_harder) and sends them on translated; xfw's redirect
// routed them with the device, and an IGMP packet routed with an output
// device is link multicast to the kernel (an RTN_MULTICAST route), which
// the redirect dropped (difftest nat seeds 37, 61, 66, inconclusive:
// "frames dropped by veth queues"). Each firewall must deliver both to
// sink.
func TestNATOutputIGMP(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	to := p.FarSink.Addr().As4()
	to[3] = 10
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A OUTPUT -p igmp -j DNAT --to-destination %s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", netip.AddrFrom4(to))
	var probes []difftest.Probe
	// From the address of each one's link: translated to one tuple, the
	// second would clash with the first.
	for i, ends := range [][2]netip.Addr{{p.FwOut, p.Sink}, {p.FwIn, p.Gen}} {
		src, dst := ends[0], ends[1]
		pkt := nettest.IPv4{Src: src, Dst: dst, TTL: 1}.Packet(nettest.Raw{Proto: 2, Data: []byte("igmp nat")})
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{pkt}, Step: i,
			Note: "fw's own igmp to " + dst.String()})
	}
	checkObserved(t, s, difftest.Case{Name: "nat OUTPUT DNAT of IGMP", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2, 2}, "both datagrams at sink, translated")
}

// TestRejectOutputErrorSource compares the ICMP error REJECT sends in
// OUTPUT about fw's own echo request, as it passes OUTPUT on its way to
// fw's sockets: the kernel's comes from fw's own address (icmp_send routes
// it to the offending packet's source, the local route's preferred
// source) and carries the echo's connection (RELATED), so rules matching
// fw's address, or its state, meet it: here the first rule takes it out
// of OUTPUT by a goto to an empty chain, and it reaches fw's sockets.
// xfw's came from the echo's destination, outside 0.0.0.0/1, met the
// REJECT rule and was dropped (difftest conntrack seed 2). For an echo
// to fw's own other address the kernel's error comes from that address.
// Each firewall must deliver each error to fw's sockets.
func TestRejectOutputErrorSource(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	far := p.FarGen.Addr().Next() // beyond gen: outside 0.0.0.0/1
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:zone-in - [0:0]\n" +
		"-A OUTPUT -s 0.0.0.0/1 -m state ! --state NEW,UNTRACKED -g zone-in\n" +
		"-A OUTPUT -p icmp -m icmp ! --icmp-type 0/0 -j REJECT --reject-with icmp-host-prohibited\n" +
		"-A INPUT -m state --state INVALID -j DROP\nCOMMIT\n"
	// To a host beyond gen, and to fw's other address (through lo: the
	// error then comes from that address, the echo's destination).
	var probes []difftest.Probe
	for i, to := range []netip.Addr{far, p.FwIn} {
		echo := nettest.EchoRequest(p.FwOut, to, uint16(i), 1, []byte("fw's own echo"))
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{echo}, Note: fmt.Sprintf("fw's echo to %s", to)})
	}
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's error to fw", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2, 2}, "each error at fw's sockets")
}

// TestRejectOutputRoutedReplyRelated compares REJECT's replies in OUTPUT
// to packets fw sends with another host's source: the reply is routed out
// (to that host, behind sink) and passes OUTPUT with the offending
// packet's connection attached, RELATED, in the kernel; xfw judged it at
// the out device's TC egress as a packet of its own, without it, and its
// last rule dropped it (difftest conntrack seed 2: probes from 10.X.2.128
// and 11.0.0.0). Each firewall must deliver the ICMP error and the RST
// to sink, in both families.
func TestRejectOutputRoutedReplyRelated(t *testing.T) {
	eachFamily(t, routedReplyRelated)
}

func routedReplyRelated(t *testing.T, fam ir.Family) {
	s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	icmp := "icmp --icmp-type echo-request -j REJECT --reject-with icmp-host-prohibited"
	if fam == ir.IPv6 {
		icmp = "icmpv6 --icmpv6-type echo-request -j REJECT --reject-with icmp6-adm-prohibited"
	}
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A OUTPUT -m state --state RELATED,ESTABLISHED -j ACCEPT\n" +
		"-A OUTPUT -p " + icmp + "\n" +
		"-A OUTPUT -p tcp --syn -j REJECT --reject-with tcp-reset\n" +
		"-A OUTPUT -j DROP\nCOMMIT\n"
	// From a host behind sink, to one beyond gen: the replies go back
	// out of out0.
	src, dst := p.FarSink.Addr().Next(), p.FarGen.Addr().Next()
	echo := nettest.EchoRequest(src, dst, 7, 1, []byte("another host's echo"))
	syn := nettest.TCPPacket(netip.AddrPortFrom(src, 40000), netip.AddrPortFrom(dst, 80), nettest.TCPSyn, 1, nil)
	probes := []difftest.Probe{
		{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{echo}, Note: "echo from another host's address"},
		{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{syn}, Note: "syn from another host's address"},
	}
	checkObserved(t, s, difftest.Case{Name: fmt.Sprintf("routed OUTPUT replies, %v", fam), Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2, 2}, "the ICMP error and the RST at sink")
}

// TestRejectInputResetOnLo compares the TCP reset REJECT sends in INPUT
// about fw's own SYN to its own address (through lo), as fw's sockets
// see it: the kernel's IPv4 reset leaves its checksum to the device
// (CHECKSUM_PARTIAL, the field holding the pseudo-header sum), and lo
// never completes it, as with OUTPUT's reset (TestRejectOutputResetToFw);
// xfw's carried the complete checksum (difftest conntrack IPv4 seed 208:
// fw's SYN,ECE 10.X.1.1:28838 > 10.X.1.1:43050, `-A zone-in -p tcp
// --dport 32768: -j REJECT --reject-with tcp-rst`). Each firewall must
// deliver each reset to fw's sockets, byte for byte the same; IPv6's
// reset carries a complete checksum in both.
func TestRejectInputResetOnLo(t *testing.T) {
	eachFamily(t, rejectInputResetOnLo)
}

func rejectInputResetOnLo(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A INPUT -i lo -p tcp --dport 32768: -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	var probes []difftest.Probe
	for i, to := range []netip.Addr{p.FwIn, p.FwOut} {
		syn := nettest.TCPPacket(netip.AddrPortFrom(p.FwIn, uint16(28838+i)), netip.AddrPortFrom(to, 43050),
			nettest.TCPSyn, 0, []byte("ab"))
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{syn}, Note: fmt.Sprintf("fw's syn to %s", to)})
	}
	checkObserved(t, s, difftest.Case{Name: fmt.Sprintf("INPUT REJECT's reset on lo, %v", fam), Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{2, 2}, "each reset at fw's sockets")
}

// TestRejectOutputErrorToFwFromForeignSource compares the ICMP error
// REJECT sends in OUTPUT about a packet fw sends to one of its own
// addresses with another host's source (behind sink): the error is routed
// out to that host, from the offending packet's destination, which
// icmp6_send keeps as the source when it is the host's own address or
// one of its anycast addresses (ipv6_chk_addr, ipv6_chk_acast_addr_src),
// as icmp_send does for a local route (RTCF_LOCAL). xfw's came from the
// address of the route back, out0's (difftest conntrack seed 212, IPv6:
// to fw's in0 address and to its subnet-router anycast address). Each
// firewall must deliver each error to sink, byte for byte the same; and
// the IPv6 error about fw's packet from its own address to its anycast
// address, for fw itself, came from out0's address where the kernel's
// keeps the anycast one: delivered to fw's sockets.
func TestRejectOutputErrorToFwFromForeignSource(t *testing.T) {
	eachFamily(t, rejectOutputErrorToFwFromForeignSource)
}

func rejectOutputErrorToFwFromForeignSource(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A OUTPUT -p tcp -j REJECT\nCOMMIT\n"
	src := p.FarSink.Addr().Next()
	dsts := []netip.Addr{p.FwIn}
	if fam == ir.IPv6 {
		// in0's subnet-router anycast address (fw forwards: joined).
		dsts = append(dsts, p.GenNet.Addr())
	}
	var probes []difftest.Probe
	for i, dst := range dsts {
		seg := nettest.TCPPacket(netip.AddrPortFrom(src, uint16(41000+i)), netip.AddrPortFrom(dst, 443), nettest.TCPSyn, 1, nil)
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{seg}, Note: fmt.Sprintf("fw's SYN from another host's address to %s", dst)})
	}
	want := len(dsts)
	if fam == ir.IPv6 {
		// From fw's own address to the anycast address: the error,
		// for fw itself, keeps the anycast address as its source.
		seg := nettest.TCPPacket(netip.AddrPortFrom(p.FwOut, 41100), netip.AddrPortFrom(p.GenNet.Addr(), 443), nettest.TCPSyn, 1, nil)
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{seg}, Note: "fw's SYN to its anycast address"})
		want++
	}
	checkObserved(t, s, difftest.Case{Name: fmt.Sprintf("OUTPUT REJECT's error about a packet to fw, %v", fam), Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{want, want}, "each error at sink or at fw's sockets")
}

// TestRejectOutputResetToFw compares the TCP reset REJECT sends in OUTPUT
// about fw's own SYN, as fw's sockets see it. The kernel's IPv4 reset
// (nf_send_reset) leaves its checksum to the device (CHECKSUM_PARTIAL:
// the field holds the pseudo-header sum) and goes to fw through lo, whose
// checksum offload cannot be turned off, so fw's sockets see the
// pseudo-header sum; xfw's carried the complete checksum (difftest
// conntrack seed 14, `-A OUTPUT -p tcp -j REJECT --reject-with
// tcp-reset`). A SYN to a host beyond gen and one to fw's other address
// (over lo); each firewall must deliver each reset to fw's sockets, byte
// for byte the same. Then the kernel's reset passes lo's INPUT, whose rule
// drops it; xfw's entered fw's device and passed no INPUT (difftest
// conntrack seed 19, where the kernel's INPUT dropped resets of INVALID
// state): neither may reach fw's sockets. IPv6's reset carries a complete
// checksum, and takes lo and its INPUT the same way (xfw's entered fw's
// device before).
func TestRejectOutputResetToFw(t *testing.T) {
	eachFamily(t, rejectOutputResetToFw)
}

func rejectOutputResetToFw(t *testing.T, fam ir.Family) {
	s := session(t, fam)
	p := s.Plan()
	rules := func(input string) string {
		return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + input +
			"-A OUTPUT -p tcp --syn -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	}
	var probes []difftest.Probe
	for i, to := range []netip.Addr{p.FarGen.Addr().Next(), p.FwIn} {
		syn := nettest.TCPPacket(netip.AddrPortFrom(p.FwOut, 80), netip.AddrPortFrom(to, uint16(1023+i)),
			nettest.TCPSyn, 0, []byte("ab"))
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{syn}, Note: fmt.Sprintf("fw's syn to %s", to)})
	}
	corpus := &difftest.Corpus{Probes: probes}
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's reset to fw", Ruleset: rules(""), Corpus: corpus},
		[2]int{2, 2}, "each reset at fw's sockets")
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's reset to fw dropped in lo's INPUT",
		Ruleset: rules("-A INPUT -i lo -p tcp --tcp-flags RST RST -j DROP\n"), Corpus: corpus},
		[2]int{0, 0}, "no reset at fw's sockets")
}

// TestNATOutputLogAfterDNAT compares the LOG lines filter OUTPUT writes
// about fw's own datagrams nat OUTPUT translated: the kernel's filter
// OUTPUT runs after nat OUTPUT and logs the packet as translated (DST
// the DNAT's address). xfw logged a packet its OUTPUT dropped after its
// translation was undone, with the original destination (difftest nat
// seed 5: fw's UDP to 10.X.2.3 and 10.X.2.0 DNATed to sink, logged by
// `-d` sink before the DROP policy; the tester, which attributed no LOG
// line of a translated packet, saw xfw's line alone). From fw's own
// address and from another host's (behind sink), in both families (and
// to a host beyond gen, whose first route leaves by in0); with
// the DROP policy each firewall must show each datagram's LOG line, with
// ACCEPT also the datagram at sink.
func TestNATOutputLogAfterDNAT(t *testing.T) {
	eachFamily(t, natOutputLogAfterDNAT)
}

func natOutputLogAfterDNAT(t *testing.T, fam ir.Family) {
	s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	ruleset := func(policy string) string {
		return fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
			"-A OUTPUT -o out0 -d %s -p udp -j DNAT --to-destination %s\n"+
			"-A OUTPUT -o in0 -d %s -p udp -j DNAT --to-destination %s\nCOMMIT\n"+
			"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT %s [0:0]\n"+
			"-A OUTPUT -d %s -j LOG --log-prefix nat-seen:\nCOMMIT\n", p.SinkNet, p.Sink, p.FarGen, p.Sink, policy, p.Sink)
	}
	// To an address of sink's link no host holds, from fw's own address
	// and from a host's behind sink; to a host beyond gen, DNATed to
	// sink: filter OUTPUT's line names the first route's device (in0),
	// which the hook keeps (xfw named the new one when nat POSTROUTING
	// was empty: difftest nat seed 51).
	var probes []difftest.Probe
	for i, fromTo := range [][2]netip.Addr{{p.FwOut, p.Sink.Next()}, {p.FarSink.Addr().Next().Next(), p.Sink.Next()},
		{p.FarSink.Addr().Next().Next(), p.FarGen.Addr().Next()}} {
		from, to := fromTo[0], fromTo[1]
		l4 := nettest.UDP{SrcPort: uint16(20060 + i), DstPort: 443, Payload: []byte("fw's own datagram")}
		var pkt []byte
		if fam == ir.IPv6 {
			pkt = nettest.IPv6{Src: from, Dst: to, HopLimit: 64}.Packet(l4)
		} else {
			pkt = nettest.IPv4{Src: from, Dst: to, TTL: 64}.Packet(l4)
		}
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{pkt}, Note: fmt.Sprintf("fw's udp from %s to %s", from, to)})
	}
	corpus := &difftest.Corpus{Probes: probes}
	checkObserved(t, s, difftest.Case{Name: "LOG after nat OUTPUT's DNAT, dropped", Ruleset: ruleset("DROP"), Corpus: corpus},
		[2]int{3, 3}, "each datagram's LOG line")
	checkObserved(t, s, difftest.Case{Name: "LOG after nat OUTPUT's DNAT, accepted", Ruleset: ruleset("ACCEPT"), Corpus: corpus},
		[2]int{6, 6}, "each datagram's LOG line and the datagram at sink")
}

// TestConntrackResetAfterIgnoredSynAck compares the state of fw's own
// connection after a RST of fw's own side that answers nothing conntrack
// let through: fw's SYN, a SYN,ACK from beyond gen whose ACK lies far
// below fw's sequence number (both conntracks ignore it; the connection
// has seen a reply), fw's stack's RST to it (ACK field 0, the
// connection's last_end), and fw's SYN again with a lower sequence
// number. The kernel takes a RST without a window check only as the
// answer to a SYN from the other side; xfw took fw's RST as answering
// fw's own SYN, closed the connection and reopened it at the next SYN:
// NEW in xfw, ESTABLISHED in the kernel (difftest `--family 6 --seed 1
// --conntrack --conversations 30`, reduced to the rule below).
func TestConntrackResetAfterIgnoredSynAck(t *testing.T) {
	eachFamily(t, resetAfterIgnoredSynAck)
}

func resetAfterIgnoredSynAck(t *testing.T, fam ir.Family) {
	s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	far := p.FarGen.Addr().Next().Next().Next()
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A OUTPUT -m state --state RELATED,ESTABLISHED -j ACCEPT\nCOMMIT\n"
	// MSS 1460, NOP, NOP, SACK permitted: as fw's and the far end's stacks
	// write them.
	opts := []byte{2, 4, 0x05, 0xb4, 1, 1, 4, 2}
	packet := func(src, dst netip.Addr, l4 nettest.TCP) []byte {
		if fam == ir.IPv6 {
			return nettest.IPv6{Src: src, Dst: dst, HopLimit: 64}.Packet(l4)
		}
		return nettest.IPv4{Src: src, Dst: dst, TTL: 64}.Packet(l4)
	}
	const synSeq = 0xf2bc431d
	syn := func(seq uint32) []byte {
		return packet(p.FwIn, far, nettest.TCP{SrcPort: 40014, DstPort: 22, Seq: seq,
			Flags: nettest.TCPSyn, Window: 0xfaf0, Options: opts})
	}
	// The SYN,ACK's ACK lies 3.5 million below fw's SYN: under the
	// lower bound of the window check (ignored, not invalid).
	synAck := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(packet(far, p.FwIn, nettest.TCP{
		SrcPort: 22, DstPort: 40014, Seq: 0xf8f2ae62, Ack: synSeq - 0x35bf60,
		Flags: nettest.TCPSyn | nettest.TCPAck, Window: 0xfaf0, Options: opts}))
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{syn(synSeq)}, KeepL4: true,
			Note: "fw's syn"},
		{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{synAck}, Step: 1, KeepL4: true,
			Note: "syn,ack far below fw's sequence"},
		{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{syn(synSeq - 0x1d1090 + 3)}, Step: 2,
			KeepL4: true, Note: "fw's syn again, lower sequence"},
	}}
	checkObserved(t, s, difftest.Case{Name: "RST of fw's side after an ignored SYN,ACK", Ruleset: ruleset, Corpus: corpus},
		[2]int{3, 3}, "the same three observations of the probes (the SYNs at gen, the SYN,ACK at fw's stack)")
	// A RST from the far side, ACK field 0, still answers fw's SYN and
	// closes the connection without a window check (its sequence number
	// lies outside every window).
	farRst := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(packet(far, p.FwIn, nettest.TCP{
		SrcPort: 22, DstPort: 40014, Seq: 0x10000000, Flags: nettest.TCPRst}))
	probes := append([]difftest.Probe(nil), corpus.Probes...)
	probes[2].Step = 3
	probes = append(probes, difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput,
		Frames: [][]byte{farRst}, Step: 2, KeepL4: true, Note: "the far side's rst"})
	checkObserved(t, s, difftest.Case{Name: "RST of the far side after an ignored SYN,ACK", Ruleset: ruleset,
		Corpus: &difftest.Corpus{Probes: probes}}, [2]int{4, 4},
		"the same four observations of the probes (the SYNs at gen, the SYN,ACK and the RST at fw's stack)")
}

// TestNATInputSnatUnroutedReset compares nat INPUT's SNAT to a single
// port when the host's RST answering a connection's first segment cannot
// leave: its destination given back (the original source) has no route.
// The kernel's conntrack sees the RST at LOCAL_OUT, before the nat hook's
// ip_route_me_harder drops it, and deletes the connection (its only reply
// an RST), so the next connection from another source takes the same
// translated tuple (the new source and port) and is delivered, and
// answered. xfw dropped the RST before tracking it: the first connection
// stayed, the second clashed with it and was dropped (difftest nat seed
// 37). Each firewall must show the second segment's RST at gen (the two
// segments at fw's sockets, the RST at gen).
func TestNATInputSnatUnroutedReset(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	newSrc := p.FarSink.Addr().Next().Next().Next() // .3, routed through sink
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A INPUT -p tcp -j SNAT --to-source %s:5000\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", newSrc)
	unrouted := p.Unrouted.Addr().Next()
	segment := func(src netip.Addr, sport uint16, flags uint16, payload string) difftest.Probe {
		pkt := nettest.IPv4{Src: src, Dst: p.FwIn}.Packet(nettest.TCP{SrcPort: sport, DstPort: 443,
			Flags: flags, Window: 512, Payload: []byte(payload)})
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame}, Note: "tcp to fw"}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		segment(unrouted, 3130, nettest.TCPSyn, "from an unrouted source"),
		segment(p.Gen, 20086, nettest.TCPSyn, "from gen"),
	}}
	checkObserved(t, s, difftest.Case{Name: "nat INPUT SNAT, RST without a route", Ruleset: ruleset, Corpus: corpus},
		[2]int{3, 3}, "both segments at fw's sockets, the second one's RST at gen")
}

// TestNATInputSnatBroadcast compares nat INPUT's SNAT of a TCP segment to
// the limited broadcast address: the kernel's input routing delivers it
// (ip_route_input_slow's brd_input, the source accepted by
// fib_validate_source: reverse-path filtering is off in the test
// topology) and the raw sockets get it from the new source; xfw sent the
// translated segment through loopback, which does not deliver a broadcast
// (difftest nat seed 117). Each firewall must show the segment at fw's
// sockets.
func TestNATInputSnatBroadcast(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	newSrc := p.FarSink.Addr().Next().Next().Next() // .3, routed through sink
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A INPUT -i in0 -p tcp -j SNAT --to-source %s\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", newSrc)
	pkt := nettest.IPv4{Src: p.Gen, Dst: netip.MustParseAddr("255.255.255.255")}.Packet(nettest.TCP{SrcPort: 20249, DstPort: 1,
		Flags: nettest.TCPSyn, Window: 512, Payload: []byte("to everyone")})
	frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame}, Note: "tcp to broadcast"},
	}}
	checkObserved(t, s, difftest.Case{Name: "nat INPUT SNAT, TCP to broadcast", Ruleset: ruleset, Corpus: corpus},
		[2]int{1, 1}, "the segment at fw's sockets")
}

// TestNATTableWithoutConntrack compares a nat table when no rule of the
// family asks the kernel to track connections: conntrack then attaches
// no connection to a packet and the nat chains, which run only for a
// connection's first packet, see none. The shrinker's reduction of
// difftest nat seed 37 (an empty nat table beside an empty filter table,
// two TCP segments to fw) showed xfw's nat PREROUTING and INPUT policies
// counting both segments ([2:118]) where the kernel's counted nothing.
// The segments are the reduction's: ACK,ECE,CWR with a byte of payload
// from gen, and CWR,ECE,URG,ACK,PSH from an address beyond gen. Nat rules
// without a NAT target count and log nothing either; one rule anywhere
// that asks for tracking (here -m conntrack in a chain nothing jumps to)
// makes the nat chains count, in both. Each firewall must show the same
// counters, the same LOG lines and the segments at fw's sockets.
func TestNATTableWithoutConntrack(t *testing.T) {
	eachFamily(t, natTableWithoutConntrack)
}

func natTableWithoutConntrack(t *testing.T, fam ir.Family) {
	s := session(t, fam, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	far := p.FarGen.Addr().Next().Next().Next()
	segment := func(src netip.Addr, sport uint16, flags uint16, payload string) difftest.Probe {
		l4 := nettest.TCP{SrcPort: sport, DstPort: 443, Flags: flags, Window: 512, Payload: []byte(payload)}
		var pkt []byte
		if fam == ir.IPv6 {
			pkt = nettest.IPv6{Src: src, Dst: p.FwIn, HopLimit: 64}.Packet(l4)
		} else {
			pkt = nettest.IPv4{Src: src, Dst: p.FwIn, TTL: 64}.Packet(l4)
		}
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame}, Note: "tcp to fw"}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		segment(far, 3130, nettest.TCPCwr|nettest.TCPEce|nettest.TCPUrg|nettest.TCPAck|nettest.TCPPsh,
			"abcdefghijklmnopqrstuvwxyzabcdefghijk"),
		segment(p.Gen, 20086, nettest.TCPAck|nettest.TCPEce|nettest.TCPCwr, "a"),
	}}
	const filter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:TRACKING - [0:0]\n%sCOMMIT\n"
	const nat = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n%sCOMMIT\n"
	natRules := "-A PREROUTING -p tcp\n-A INPUT -p tcp -j LOG --log-prefix \"nat-in \"\n-A OUTPUT -p tcp\n-A POSTROUTING -p tcp\n"
	tracking := "-A TRACKING -m conntrack --ctstate INVALID\n"
	for _, c := range []struct {
		name, ruleset string
		observed      int
	}{
		{"empty nat table (seed 37 reduced)", fmt.Sprintf(nat, "") + fmt.Sprintf(filter, ""), 4},
		{"nat rules without NAT", fmt.Sprintf(nat, natRules) + fmt.Sprintf(filter, ""), 4},
		{"nat rules, conntrack in an unused chain", fmt.Sprintf(nat, natRules) + fmt.Sprintf(filter, tracking), 6},
	} {
		checkObserved(t, s, difftest.Case{Name: c.name, Ruleset: c.ruleset, Corpus: corpus},
			[2]int{c.observed, c.observed}, "the segments at fw's sockets, fw's RSTs at gen (and nat INPUT's LOG lines)")
	}
}

// TestNATInputSnatUnroutedResetNotrack is TestNATInputSnatUnroutedReset
// with a raw OUTPUT rule that exempts fw's RSTs from tracking. The
// kernel's raw OUTPUT runs before conntrack and nat OUTPUT: the first
// connection's RST, untracked, is not translated back and leaves as fw's
// stack sent it, to the new source (routed through sink), and the
// connection stays, so the second connection's translated tuple clashes
// with it and its SYN is dropped (checked by hand with iptables-legacy:
// the RST at sink, `conntrack -L` showing the first connection
// UNREPLIED). xfw translated the RST back before its raw OUTPUT walk,
// found no route, tracked it (closing the connection) and dropped it: no
// RST at sink, the second SYN delivered and answered at gen. It now
// judges such a raw OUTPUT before translating and tracking (xfw.c
// xfw_tc_rawout). Each firewall must show the same.
func TestNATInputSnatUnroutedResetNotrack(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	newSrc := p.FarSink.Addr().Next().Next().Next() // .3, routed through sink
	ruleset := fmt.Sprintf("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A OUTPUT -p tcp -m tcp --tcp-flags RST RST -j NOTRACK\nCOMMIT\n"+
		"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A INPUT -p tcp -j SNAT --to-source %s:5000\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -p tcp\nCOMMIT\n", newSrc)
	unrouted := p.Unrouted.Addr().Next()
	segment := func(src netip.Addr, sport uint16, flags uint16, payload string) difftest.Probe {
		pkt := nettest.IPv4{Src: src, Dst: p.FwIn}.Packet(nettest.TCP{SrcPort: sport, DstPort: 443,
			Flags: flags, Window: 512, Payload: []byte(payload)})
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame}, Note: "tcp to fw"}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		segment(unrouted, 3130, nettest.TCPSyn, "from an unrouted source"),
		segment(p.Gen, 20086, nettest.TCPSyn, "from gen"),
	}}
	checkObserved(t, s, difftest.Case{Name: "nat INPUT SNAT, untracked RST without a route", Ruleset: ruleset, Corpus: corpus},
		[2]int{2, 2}, "the first segment at fw's sockets, its untranslated RST at sink; the second dropped")
}

// TestRejectDirectedBroadcast compares REJECT of a TCP segment to in0's
// subnet-directed broadcast address, sent in a unicast frame to fw: its
// input route is a broadcast one, and icmp_send answers nothing about such
// a packet (RTCF_BROADCAST). xfw answered it (the route type was not
// consulted, only the frame's destination MAC): random ruleset seed 11
// with sets, probe #269, once the generator's corpus shifted. A segment
// to fw's own address, REJECTed by the same rule, shows that replies are
// sent at all: each firewall must show one reply at gen.
func TestRejectDirectedBroadcast(t *testing.T) {
	s := session(t, ir.IPv4)
	p := s.Plan()
	bcast := p.GenNet.Masked().Addr().As4()
	bcast[3] = 255
	ruleset := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A INPUT -p tcp -j REJECT\nCOMMIT\n"
	probe := func(dst netip.Addr, note string) difftest.Probe {
		pkt := nettest.IPv4{Src: p.Gen, Dst: dst, TTL: 64}.Packet(nettest.TCP{SrcPort: 52, DstPort: 4712,
			Flags: nettest.TCPAck, Window: 512, Payload: []byte("directed broadcast")})
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathInput, Frames: [][]byte{frame}, Note: note}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{
		probe(p.FwIn, "gen's tcp to fw's address"),
		probe(netip.AddrFrom4(bcast), "gen's tcp to in0's subnet broadcast, unicast frame"),
	}}
	checkObserved(t, s, difftest.Case{Name: "REJECT of a directed broadcast", Ruleset: ruleset, Corpus: corpus},
		[2]int{1, 1}, "one port unreachable at gen, for the segment to fw's address")
}
