package difftest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file writes the generator's IP packets and frames: IPv4 with options,
// fragments, truncated and malformed headers; IPv6 with extension headers
// and fragments; and the Ethernet frames (VLAN tags, broadcast, multicast)
// that carry them.

// ipPacket builds the IP packet(s) of a probe from src to dst.
func (g *pgen) ipPacket(from Origin, src, dst netip.Addr) ([][]byte, string) {
	t := g.transport(dst)
	note := t.note
	maxLen := maxL3Len
	if from == FromFw {
		maxLen = outMTU // a raw socket refuses more than the route's MTU
	}
	if g.plan.isLocal(dst) {
		// fw's answer (an echo reply is as long as the request) must not
		// need fragmenting: the byte counts and -m length of a datagram
		// the stack fragments are its first fragment's in xfw's OUTPUT, a
		// documented difference (docs/differences.md).
		maxLen = outMTU
	}
	// A length the ruleset names, reached with payload.
	hdrs := ipv4HeaderLen
	if g.fam == ir.IPv6 {
		hdrs = ipv6HeaderLen
	}
	if len(g.e.lens) > 0 && g.chance(25) {
		want := pick(g.rng, g.e.lens)
		if n := want - hdrs - t.hdr; n >= 0 && want <= maxLen {
			t.t = t.grow(n)
			note += fmt.Sprintf(" len %d", want)
		}
	} else if g.chance(4) {
		t.t = t.grow(maxLen - hdrs - t.hdr - g.rng.Intn(2))
		note += " big"
	}
	ttl := g.ttl()
	if ttl != 64 {
		note += fmt.Sprintf(" ttl %d", ttl)
	}
	if g.fam == ir.IPv4 {
		return g.ipv4(from, src, dst, ttl, t, note)
	}
	return g.ipv6(from, src, dst, ttl, t, note)
}

// ipv4Options are options worth sending (each padded by the builder).
var ipv4Options = []struct {
	name string
	b    []byte
}{
	{"nop", []byte{1}},
	{"record-route", []byte{7, 7, 4, 0, 0, 0, 0}},
	// A full timestamp option (pointer past its end): the stack only
	// counts the overflow, where an open one would get each namespace's
	// own clock written into it.
	{"timestamp", []byte{68, 12, 13, 0, 0, 0, 0, 1, 0, 0, 0, 2}},
	{"router-alert", []byte{148, 4, 0, 0}},
	{"lsrr", []byte{131, 7, 4, 10, 0, 0, 1}},
	{"bad-length", []byte{7, 2, 4, 0}},
	{"eol", []byte{0, 0, 0, 0}},
}

// ipv4 builds an IPv4 probe.
func (g *pgen) ipv4(from Origin, src, dst netip.Addr, ttl uint8, t l4, note string) ([][]byte, string) {
	h := nettest.IPv4{Src: src, Dst: dst, TTL: ttl}
	if ttl == 0 {
		h.TTL = 0 // the builder turns 0 into 64; patched below
	}
	if g.chance(30) {
		h.DontFragment = true
	}
	if g.chance(8) {
		o := pick(g.rng, ipv4Options)
		h.Options = o.b
		note += " opt " + o.name
	}
	if g.chance(3) {
		h.TOS = uint8(g.rng.Intn(256))
	}
	frames := [][]byte{h.Packet(t.t)}
	// Left out, as documented differences (docs/differences.md): first
	// fragments and fragmented datagrams for fw itself (the kernel
	// reassembles before INPUT, xfw judges the first fragment for the
	// datagram). Fragments fw sends are written whole by its raw socket:
	// OUTPUT judges each, in xfw too (bpf/frag.h).
	local := g.plan.isLocal(dst)
	switch k := g.rng.Intn(100); {
	case k < 4 && !local: // a lone first fragment
		h.MoreFragments = true
		frames = [][]byte{h.Packet(t.t)}
		note += " first-fragment"
	case k < 8: // a later fragment
		h.FragOffset = uint16(1 + g.rng.Intn(200))
		h.MoreFragments = g.chance(50)
		frames = [][]byte{h.Packet(nettest.Raw{Proto: t.t.Protocol(), Data: payload(8 + g.rng.Intn(64))})}
		note += fmt.Sprintf(" later-fragment off %d", h.FragOffset)
	case k < 10: // offset 1: the "evil" TCP fragment
		h.FragOffset = 1
		frames = [][]byte{h.Packet(nettest.Raw{Proto: pick(g.rng, []uint8{6, 6, 17}), Data: payload(16)})}
		note += " fragment off 1"
	case k < 14 && !local: // a whole datagram in fragments
		whole := h.Packet(t.t)
		if len(whole) > 60 {
			if fr, err := nettest.FragmentIPv4(whole, g.fragSize(len(whole))); err == nil {
				frames = fr
				note += fmt.Sprintf(" fragmented x%d", len(fr))
			}
		}
	case k < 19 && from != FromFw: // malformed headers: the stack's checks
		frames, note = g.malformed4(frames[0], t, note)
	case k < 25: // a truncated transport header
		frames[0] = g.truncateL4(frames[0], t, ipv4HeaderLen+len(padded(h.Options)))
		note += " truncated-l4"
	}
	if ttl == 0 {
		for _, f := range frames {
			setTTL4(f, 0)
		}
	}
	return frames, note
}

// maxFragments bounds the fragments of one datagram.
const maxFragments = 4

// fragSize returns a fragment payload size (a multiple of 8) cutting n
// bytes into two to maxFragments fragments.
func (g *pgen) fragSize(n int) int {
	parts := 2 + g.rng.Intn(maxFragments-1)
	size := (n + parts - 1) / parts
	return max(8, (size+7)/8*8)
}

// padded returns IPv4 options padded to 4 bytes, as the builder pads them.
func padded(o []byte) []byte {
	for len(o)%4 != 0 {
		o = append(o, 0)
	}
	return o
}

// setTTL4 sets the TTL of an IPv4 packet and fixes its header checksum.
func setTTL4(b []byte, ttl uint8) {
	if len(b) < ipv4HeaderLen {
		return
	}
	old := binary.BigEndian.Uint16(b[8:])
	nw := uint16(ttl)<<8 | old&0xff
	put16(b, 8, nw, 10)
}

// truncateL4 cuts the IP packet b (header of hl bytes) inside its
// transport header, fixing the length fields so that only the transport
// header is short.
func (g *pgen) truncateL4(b []byte, t l4, hl int) []byte {
	keep := 1 + g.rng.Intn(19)
	if t.hdr > 0 && t.hdr < 20 {
		keep = g.rng.Intn(t.hdr)
	}
	if len(b) < hl+keep {
		return b
	}
	out := append([]byte(nil), b[:hl+keep]...)
	if out[0]>>4 == 4 {
		put16(out, 2, uint16(len(out)), 10)
	} else if len(out) >= ipv6HeaderLen {
		binary.BigEndian.PutUint16(out[4:], uint16(len(out)-ipv6HeaderLen))
	}
	return out
}

// malformed4 breaks an IPv4 header in one of the ways the stack checks.
func (g *pgen) malformed4(b []byte, t l4, note string) ([][]byte, string) {
	b = append([]byte(nil), b...)
	switch g.rng.Intn(6) {
	case 0:
		b[10] ^= 0x5a // header checksum
		note += " bad-ip-checksum"
	case 1:
		put16(b, 2, uint16(len(b)+20), 10) // total length beyond the frame
		note += " tot-len-too-big"
	case 2:
		b = append(b, payload(10)...) // trailing bytes after tot_len
		note += " trailing-bytes"
	case 3:
		put16(b, 0, 0x44<<8|uint16(b[1]), 10) // IHL 4
		note += " ihl-4"
	case 4:
		put16(b, 0, 0x4f<<8|uint16(b[1]), 10) // IHL 15 past the data
		note += " ihl-15"
	default:
		put16(b, 2, uint16(g.rng.Intn(20)), 10) // total length below the header
		note += " tot-len-short"
	}
	return [][]byte{b}, note
}

// ipv6 builds an IPv6 probe. Later fragments fw sends are left out
// (fw6Fragments): the kernel's OUTPUT judges each as its FORWARD does, but
// -m tcpmss hotdrops one there where it reads the payload after the
// fragment header in FORWARD (as xfw does in both): the transport offset
// (par->thoff) on that path is not modelled yet (docs/difftest.md, "Open
// differences").
func (g *pgen) ipv6(from Origin, src, dst netip.Addr, ttl uint8, t l4, note string) ([][]byte, string) {
	h := nettest.IPv6{Src: src, Dst: dst, HopLimit: ttl}
	if r, ok := t.t.(nettest.Raw); ok && from == FromFw && r.Proto == nettest.ProtoFragment && len(r.Data) >= 4 {
		// "Protocol 44" is a fragment header: its filler bytes would make
		// a later fragment fw sends itself (see ipv6). Make it a
		// first fragment of nothing.
		d := append([]byte(nil), r.Data...)
		d[0], d[2], d[3] = nettest.ProtoNoNext, 0, 1
		t.t = nettest.Raw{Proto: r.Proto, Data: d}
	}
	if g.chance(3) {
		h.TrafficClass = uint8(g.rng.Intn(256))
	}
	// Extension headers.
	if g.chance(20) {
		var names []string
		for i := 0; i < 1+g.rng.Intn(3); i++ {
			switch g.rng.Intn(7) {
			case 0:
				if i == 0 {
					h.Ext = append(h.Ext, nettest.HopByHop(nettest.PadNOption(4)))
					names = append(names, "hbh")
				} else {
					h.Ext = append(h.Ext, nettest.HopByHop(nettest.PadNOption(4)))
					names = append(names, "hbh-not-first")
				}
			case 1:
				h.Ext = append(h.Ext, nettest.HopByHop(nettest.RouterAlertOption(0)))
				names = append(names, "hbh-router-alert")
			case 2:
				h.Ext = append(h.Ext, nettest.DestOpts(nettest.PadNOption(4)))
				names = append(names, "dstopts")
			case 3:
				h.Ext = append(h.Ext, nettest.RoutingHeader(pick(g.rng, []uint8{0, 2, 4}), 0, dst))
				names = append(names, "routing")
			case 4:
				h.Ext = append(h.Ext, nettest.FragmentHeader(0, false, g.rng.Uint32()))
				names = append(names, "atomic-fragment")
			case 5:
				h.Ext = append(h.Ext, nettest.ExtHeader{Type: nettest.ProtoAH, Data: payload(10)})
				names = append(names, "ah")
			default:
				h.Ext = append(h.Ext, nettest.DestOpts(nettest.TLVOption(0x1e, []byte{1, 2})))
				names = append(names, "dstopts-unknown-option")
			}
		}
		note += " ext " + strings.Join(names, ",")
	}
	if ttl == 0 {
		h.HopLimit = 0
	}
	frames := [][]byte{h.Packet(t.t)}
	switch k := g.rng.Intn(100); {
	case k < 4: // a lone first fragment
		h.Ext = append(h.Ext, nettest.FragmentHeader(0, true, g.rng.Uint32()))
		frames = [][]byte{h.Packet(t.t)}
		note += " first-fragment"
	case k < 8 && from != FromFw: // a later fragment (see ipv6)
		off := uint16(1 + g.rng.Intn(200))
		h.Ext = append(h.Ext, nettest.FragmentHeader(off, g.chance(50), g.rng.Uint32()))
		h.NextHeader = t.t.Protocol()
		frames = [][]byte{h.Packet(nettest.Raw{Proto: t.t.Protocol(), Data: payload(8 + g.rng.Intn(64))})}
		note += fmt.Sprintf(" later-fragment off %d", off)
	case k < 10 && from != FromFw: // a later fragment followed by another extension header
		h.Ext = append(h.Ext, nettest.FragmentHeader(uint16(1+g.rng.Intn(50)), false, g.rng.Uint32()))
		h.NextHeader = nettest.ProtoDestOpts
		frames = [][]byte{h.Packet(nettest.Raw{Proto: nettest.ProtoDestOpts, Data: payload(16)})}
		note += " later-fragment then dstopts"
	case k < 14 && from != FromFw: // a whole datagram in fragments
		whole := h.Packet(t.t)
		if fr, err := nettest.FragmentIPv6(whole, g.fragSize(len(whole)-ipv6HeaderLen), g.rng.Uint32()); err == nil && len(fr) > 1 {
			frames = fr
			note += fmt.Sprintf(" fragmented x%d", len(fr))
		}
	case k < 18: // an extension header cut short or running past the end
		raw := nettest.Raw{Proto: pick(g.rng, []uint8{nettest.ProtoDestOpts, nettest.ProtoHopByHop, nettest.ProtoRouting, nettest.ProtoFragment, nettest.ProtoAH}),
			Data: pick(g.rng, [][]byte{{17}, {6, 4, 1, 2}, {17, 0, 1}, {58, 1}})}
		if from == FromFw && raw.Proto == nettest.ProtoFragment && len(raw.Data) >= 4 {
			raw.Data = []byte{6, 4, 0, 1} // not a later fragment (see ipv6)
		}
		if raw.Proto == nettest.ProtoHopByHop && len(h.Ext) > 0 {
			raw.Proto = nettest.ProtoDestOpts
		}
		h.NextHeader = raw.Proto
		frames = [][]byte{h.Packet(raw)}
		note += fmt.Sprintf(" ext %d cut short", raw.Proto)
	case k < 21 && from != FromFw: // payload length against the frame
		b := append([]byte(nil), frames[0]...)
		switch g.rng.Intn(3) {
		case 0:
			binary.BigEndian.PutUint16(b[4:], uint16(len(b)-ipv6HeaderLen+8))
			note += " payload-length-too-big"
		case 1:
			b = append(b, payload(12)...)
			note += " trailing-bytes"
		default:
			binary.BigEndian.PutUint16(b[4:], 0)
			note += " payload-length-0"
		}
		frames = [][]byte{b}
	case k < 27: // a truncated transport header
		ext := len(frames[0]) - len(t.t.Marshal(src, dst)) // header and extension headers
		frames[0] = g.truncateL4(frames[0], t, ext)
		note += " truncated-l4"
	case k < 29:
		frames = [][]byte{h.Packet(nil)} // no next header
		note = strings.Replace(note, t.note, "no-next-header", 1)
	}
	if ttl == 0 {
		for _, f := range frames {
			if len(f) >= ipv6HeaderLen {
				f[7] = 0
			}
		}
	}
	return frames, note
}

// ethernet wraps IP packets into frames from gen or sink: usually to fw's
// MAC, sometimes from a MAC the ruleset names, broadcast, multicast,
// another host's, VLAN-tagged.
func (g *pgen) ethernet(from Origin, pkts [][]byte, note string, dst netip.Addr) ([][]byte, string) {
	eth := nettest.Ethernet{Src: g.plan.GenMAC, Dst: g.plan.FwInMAC}
	if from == FromSink {
		eth = nettest.Ethernet{Src: g.plan.SinkMAC, Dst: g.plan.FwOutMAC}
	}
	if dst.IsMulticast() {
		eth.Dst = multicastMAC(dst)
	}
	if g.chance(12) && len(g.e.macs) > 0 {
		eth.Src = pick(g.rng, g.e.macs)
		note += " src-mac " + eth.Src.String()
	}
	if from == FromGen && g.chance(8) {
		id := pick(g.rng, []uint16{VLANID, VLANID, VLANID, 0, 200})
		eth = eth.WithVLAN(nettest.VLANTag{ID: id})
		note += fmt.Sprintf(" vlan %d", id)
	}
	out := make([][]byte, len(pkts))
	for i, b := range pkts {
		out[i] = eth.Frame(b)
	}
	return out, note
}

// multicastMAC returns the Ethernet group address of an IP multicast group.
func multicastMAC(a netip.Addr) net.HardwareAddr {
	b := a.AsSlice()
	if a.Is4() {
		return net.HardwareAddr{0x01, 0x00, 0x5e, b[1] & 0x7f, b[2], b[3]}
	}
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}
