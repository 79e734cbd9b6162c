package nettest

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
)

// Tests in this file build and parse packets only: they need no privileges.

var (
	testMAC1 = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	testMAC2 = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
	src4     = netip.MustParseAddr("10.9.1.2")
	dst4     = netip.MustParseAddr("10.9.2.2")
	src6     = netip.MustParseAddr("fd00:9:1::2")
	dst6     = netip.MustParseAddr("fd00:9:2::2")
)

func TestChecksumRFC1071(t *testing.T) {
	// Example from RFC 1071 section 3: the sum is 0xddf2.
	b := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got, want := Checksum(b), uint16(^uint16(0xddf2)); got != want {
		t.Fatalf("Checksum = %#04x, want %#04x", got, want)
	}
	// Odd length pads with a zero byte.
	if got, want := Checksum([]byte{0x01}), ^uint16(0x0100); got != want {
		t.Fatalf("Checksum(odd) = %#04x, want %#04x", got, want)
	}
}

// verifyTransport checks that the segment's checksum verifies.
func verifyTransport(t *testing.T, src, dst netip.Addr, proto uint8, seg []byte) {
	t.Helper()
	if got := transportChecksum(src, dst, proto, seg); got != 0 {
		t.Fatalf("proto %d checksum does not verify (residue %#04x)", proto, got)
	}
}

func TestIPv4UDPChecksums(t *testing.T) {
	pkt := IPv4{Src: src4, Dst: dst4, ID: 7, Options: []byte{0x94, 0x04, 0, 0}}.Packet(
		UDP{SrcPort: 1000, DstPort: 53, Payload: []byte("hello")})
	if Checksum(pkt[:24]) != 0 {
		t.Fatal("IPv4 header checksum does not verify")
	}
	if pkt[0] != 0x46 {
		t.Fatalf("version/IHL = %#x, want 0x46", pkt[0])
	}
	verifyTransport(t, src4, dst4, ProtoUDP, pkt[24:])
	p, err := ParseIP(pkt)
	if err != nil {
		t.Fatal(err)
	}
	if p.Src != src4 || p.Dst != dst4 || p.SrcPort != 1000 || p.DstPort != 53 || string(p.Payload) != "hello" ||
		!bytes.Equal(p.IPv4Options, []byte{0x94, 0x04, 0, 0}) || p.TTL != defaultTTL {
		t.Fatalf("parsed %+v", p)
	}
}

func TestTCPFlagsAndOptions(t *testing.T) {
	flags := TCPSyn | TCPFin | TCPUrg | TCPNs | TCPCwr
	mss := []byte{2, 4, 0x05, 0xb4}
	seg := TCP{SrcPort: 1, DstPort: 2, Seq: 9, Flags: flags, Window: 100, Options: append(mss, 1)}.Marshal(src6, dst6)
	verifyTransport(t, src6, dst6, ProtoTCP, seg)
	if off := seg[12] >> 4; off != 7 { // 20 bytes + 5 option bytes padded to 8
		t.Fatalf("data offset %d, want 7", off)
	}
	p := &Packet{IPVersion: 6, Protocol: ProtoTCP}
	if err := p.parseTransport(seg); err != nil {
		t.Fatal(err)
	}
	if p.TCPFlags != flags || p.Seq != 9 {
		t.Fatalf("flags %#x seq %d, want %#x 9", p.TCPFlags, p.Seq, flags)
	}
}

func TestIPv6ExtensionChain(t *testing.T) {
	h := IPv6{Src: src6, Dst: dst6, Ext: []ExtHeader{
		HopByHop(RouterAlertOption(0)),
		DestOpts(TLVOption(0x1e, []byte{1, 2, 3})),
		RoutingHeader(0, 0, dst6),
		FragmentHeader(0, false, 0x1234),
		DestOpts(),
	}}
	frame := Ethernet{Dst: testMAC1, Src: testMAC2}.WithVLAN(VLANTag{ID: 42, PCP: 3}).Frame(
		h.Packet(UDP{SrcPort: 5, DstPort: 6, Payload: []byte("x")}))
	p, err := Parse(frame)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint8{ProtoHopByHop, ProtoDestOpts, ProtoRouting, ProtoFragment, ProtoDestOpts}
	if !bytes.Equal(p.ExtHeaders, want) {
		t.Fatalf("ext headers %v, want %v", p.ExtHeaders, want)
	}
	if len(p.VLANs) != 1 || p.VLANs[0].ID != 42 || p.VLANs[0].PCP != 3 || p.EtherType != EtherTypeIPv6 {
		t.Fatalf("vlan %+v ethertype %#x", p.VLANs, p.EtherType)
	}
	if p.Protocol != ProtoUDP || p.DstPort != 6 || string(p.Payload) != "x" || !p.Fragment || p.FragID != 0x1234 {
		t.Fatalf("parsed %s", p)
	}
	ip := frame[ethHeaderLen+vlanTagLen:]
	if plen := int(binary.BigEndian.Uint16(ip[4:])); plen != len(ip)-ipv6HeaderLen {
		t.Fatalf("payload length %d, want %d", plen, len(ip)-ipv6HeaderLen)
	}
	off := len(ip) - udpHeaderLen - 1
	verifyTransport(t, src6, dst6, ProtoUDP, ip[off:])
}

func TestRoutingHeaderFinalDestination(t *testing.T) {
	final := netip.MustParseAddr("fd00:9:3::1")
	h := IPv6{Src: src6, Dst: dst6, Ext: []ExtHeader{RoutingHeader(0, 1, final)}}
	pkt := h.Packet(UDP{SrcPort: 1, DstPort: 2})
	verifyTransport(t, src6, final, ProtoUDP, pkt[len(pkt)-udpHeaderLen:])
}

func TestICMPChecksums(t *testing.T) {
	pkt := EchoRequest(src4, dst4, 1, 2, []byte("ping"))
	if Checksum(pkt[ipv4HeaderLen:]) != 0 {
		t.Fatal("ICMPv4 checksum does not verify")
	}
	pkt6 := EchoRequest(src6, dst6, 1, 2, []byte("ping"))
	verifyTransport(t, src6, dst6, ProtoICMPv6, pkt6[ipv6HeaderLen:])
	p, err := ParseIP(pkt6)
	if err != nil || p.ICMPType != ICMPv6EchoRequest || p.ICMPRest != 1<<16|2 {
		t.Fatalf("parsed %v, %v", p, err)
	}
}

func TestFragmentIPv4(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 300)
	// Record route (0x07) is not copied; security (0x82) is.
	opts := []byte{0x07, 0x03, 0x04, 0x82, 0x03, 0x00, 0, 0}
	pkt := IPv4{Src: src4, Dst: dst4, ID: 99, Options: opts}.Packet(UDP{SrcPort: 1, DstPort: 2, Payload: payload})
	frags, err := FragmentIPv4(pkt, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) != 4 { // 3008 bytes in 1000-byte pieces
		t.Fatalf("%d fragments, want 4", len(frags))
	}
	var data []byte
	for i, f := range frags {
		p, err := ParseIP(f)
		if err != nil && p.FragOffset == 0 {
			t.Fatalf("fragment %d: %v", i, err)
		}
		hlen := int(f[0]&0xf) * 4
		if Checksum(f[:hlen]) != 0 {
			t.Fatalf("fragment %d header checksum", i)
		}
		if int(p.FragOffset)*8 != len(data) || p.MoreFragments != (i < len(frags)-1) || p.IPv4ID != 99 {
			t.Fatalf("fragment %d: off %d mf %v id %d", i, p.FragOffset, p.MoreFragments, p.IPv4ID)
		}
		wantOpts := []byte{0x82, 0x03, 0x00, 0}
		if i == 0 {
			wantOpts = opts
		}
		if !bytes.Equal(p.IPv4Options, wantOpts) {
			t.Fatalf("fragment %d options %x, want %x", i, p.IPv4Options, wantOpts)
		}
		data = append(data, f[hlen:]...)
	}
	if !bytes.Equal(data, pkt[ipv4HeaderLen+len(opts):]) {
		t.Fatal("fragments do not reassemble to the original payload")
	}
}

func TestFragmentIPv6(t *testing.T) {
	payload := bytes.Repeat([]byte("abcdefgh"), 300)
	pkt := IPv6{Src: src6, Dst: dst6, Ext: []ExtHeader{HopByHop(), DestOpts()}}.Packet(
		UDP{SrcPort: 1, DstPort: 2, Payload: payload})
	frags, err := FragmentIPv6(pkt, 1000, 0xabcdef)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) != 3 {
		t.Fatalf("%d fragments, want 3", len(frags))
	}
	const unfrag = ipv6HeaderLen + extHeaderUnit // IPv6 + hop-by-hop
	var data []byte
	for i, f := range frags {
		p, _ := ParseIP(f)
		if !p.Fragment || p.FragID != 0xabcdef || int(p.FragOffset)*8 != len(data) || p.MoreFragments != (i < 2) {
			t.Fatalf("fragment %d: %s", i, p)
		}
		if p.ExtHeaders[0] != ProtoHopByHop || p.ExtHeaders[1] != ProtoFragment {
			t.Fatalf("fragment %d ext %v", i, p.ExtHeaders)
		}
		if int(binary.BigEndian.Uint16(f[4:])) != len(f)-ipv6HeaderLen {
			t.Fatalf("fragment %d payload length", i)
		}
		data = append(data, f[unfrag+extHeaderUnit:]...)
	}
	if !bytes.Equal(data, pkt[unfrag:]) {
		t.Fatal("fragments do not reassemble to the original fragmentable part")
	}
	// The first fragment's fragment header points at destination options.
	if frags[0][unfrag] != ProtoDestOpts {
		t.Fatalf("fragment header next %d, want %d", frags[0][unfrag], ProtoDestOpts)
	}
}

func TestParseTruncated(t *testing.T) {
	frame := Ethernet{Dst: testMAC1, Src: testMAC2}.Frame(TCPPacket(
		netip.AddrPortFrom(src4, 1), netip.AddrPortFrom(dst4, 2), TCPSyn, 1, nil))
	p, err := Parse(Truncate(frame, ethHeaderLen+ipv4HeaderLen+6))
	if err == nil || !p.Truncated || p.SrcPort != 1 || p.DstPort != 2 || p.Protocol != ProtoTCP {
		t.Fatalf("parsed %s, err %v", p, err)
	}
	if _, err := Parse(frame[:10]); err == nil {
		t.Fatal("no error for a 10-byte frame")
	}
}
