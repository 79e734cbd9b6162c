package difftest

import (
	"fmt"
	"math/rand"
	"net"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file writes packets aimed at the edges of a ruleset: the values just
// inside and just outside every prefix, range and comparison the rules
// name, every TCP flag combination, ICMP types and codes, and the packets
// parsers get wrong (fragments, options, extension headers, truncated and
// malformed headers, VLAN tags, other protocols, broadcast and multicast).
//
// Multicast to groups fw has not joined is sent among the unusual probes
// only (special), not at the rules' edges: the edges' draws stay those
// of the corpora before it was sent.

// maxL3Len is the largest IP packet gen can send (its MTU).
const maxL3Len = 1500

// pgen holds the state of one corpus's generation.
type pgen struct {
	rng   *rand.Rand
	plan  Plan
	fam   ir.Family
	e     edges
	flagN int // cycles through every TCP flag combination
	// resets6: an IPv6 ruleset that may REJECT with a TCP reset.
	resets6 bool
}

// GenerateCorpus returns n probes aimed at the edges of ruleset (iptables-
// restore text of plan's family), determined by seed and the ruleset. The
// ruleset must parse (xfw's parser: the matches it supports).
func GenerateCorpus(seed int64, plan Plan, ruleset string, n int) (*Corpus, error) {
	e, err := rulesetEdges(ruleset, plan)
	if err != nil {
		return nil, err
	}
	g := &pgen{rng: rand.New(rand.NewSource(seed)), plan: plan, fam: plan.Family, e: e,
		resets6: plan.Family == ir.IPv6 && strings.Contains(ruleset, "tcp-reset")}
	c := &Corpus{}
	for len(c.Probes) < n {
		c.Probes = append(c.Probes, g.probe())
	}
	c.Probes = append(c.Probes, rateBursts(seed, plan, ruleset)...)
	return c, nil
}

// rulesetEdges returns the edges of the filter table of ruleset, and of
// its nat table when it has one (the translations' addresses and ports).
func rulesetEdges(ruleset string, plan Plan) (edges, error) {
	rs, err := iptables.Restore(plan.Family, strings.NewReader(ruleset), nil, iptables.RestoreOptions{Table: "filter", Sets: SetLookup(ruleset)})
	if err != nil {
		return edges{}, fmt.Errorf("parse ruleset for its edges: %w", err)
	}
	if HasNATTable(ruleset) {
		nat, err := iptables.Restore(plan.Family, strings.NewReader(ruleset), nil, iptables.RestoreOptions{Table: "nat", Sets: SetLookup(ruleset)})
		if err != nil {
			return edges{}, fmt.Errorf("parse the nat table for its edges: %w", err)
		}
		rs.Chains = append(rs.Chains, nat.Chains...)
	}
	return collectEdges(rs, plan), nil
}

// maxGenTries bounds the probes generated per probe kept.
const maxGenTries = 10

// chance returns true with probability pct percent.
func (g *pgen) chance(pct int) bool { return g.rng.Intn(100) < pct }

// addr returns an address from the edges (or the topology's).
func (g *pgen) edgeAddr() netip.Addr {
	for i := 0; i < 8; i++ {
		a := pick(g.rng, g.e.addrs)
		if a.Is4() == (g.fam == ir.IPv4) && g.usable(a) {
			return a
		}
	}
	return g.plan.Sink
}

// usable reports whether a is fine as a probe address at the rules' edges:
// not multicast to a group fw did not join (special sends those), not the
// unspecified address or a loopback one (those are chosen on purpose
// elsewhere).
func (g *pgen) usable(a netip.Addr) bool {
	if a.IsUnspecified() || a.IsLoopback() {
		return false
	}
	if a.IsMulticast() {
		for _, j := range g.plan.Joined {
			if a == j {
				return true
			}
		}
		return false
	}
	return true
}

// port returns a port from the edges, or a random one.
func (g *pgen) port() uint16 {
	if g.chance(80) {
		return pick(g.rng, g.e.ports)
	}
	return uint16(g.rng.Intn(65536))
}

// ttl returns a TTL / hop limit.
func (g *pgen) ttl() uint8 {
	if g.chance(30) {
		return pick(g.rng, g.e.ttls)
	}
	return 64
}

// tcpFlags returns the next TCP flag byte: every combination in turn,
// interleaved with the ruleset's own.
func (g *pgen) tcpFlags() uint16 {
	if len(g.e.flags) > 0 && g.chance(40) {
		return uint16(pick(g.rng, g.e.flags))
	}
	g.flagN++
	f := uint16(g.flagN*37) & 0xff // 37 is odd: cycles through all 256
	if g.chance(5) {
		f |= nettest.TCPNs
	}
	return f
}

// randomIn returns a random address in pr.
func (g *pgen) randomIn(pr netip.Prefix) netip.Addr {
	b := pr.Addr().AsSlice()
	for i := pr.Bits(); i < len(b)*8; i++ {
		if g.rng.Intn(2) == 1 {
			b[i/8] |= 0x80 >> uint(i%8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// probe generates one probe.
func (g *pgen) probe() Probe {
	p := g.plan
	var pr Probe
	var src, dst netip.Addr
	switch k := g.rng.Intn(100); {
	case k < 36: // through fw, from gen's side
		pr.From, pr.Path = FromGen, PathForward
		src = pick(g.rng, []netip.Addr{p.Gen, p.Gen, g.randomIn(p.FarGen), g.edgeAddr(), g.randomIn(p.GenNet)})
		dst = pick(g.rng, []netip.Addr{p.Sink, p.Sink, g.randomIn(p.FarSink), g.edgeAddr(), g.randomIn(p.SinkNet), g.randomIn(p.Unrouted)})
	case k < 46: // through fw, from sink's side
		pr.From, pr.Path = FromSink, PathForward
		src = pick(g.rng, []netip.Addr{p.Sink, g.randomIn(p.FarSink), g.edgeAddr()})
		dst = pick(g.rng, []netip.Addr{p.Gen, g.randomIn(p.FarGen), g.edgeAddr(), p.GenVLAN})
	case k < 70: // to fw, from gen
		pr.From, pr.Path = FromGen, PathInput
		src = pick(g.rng, []netip.Addr{p.Gen, p.Gen, g.edgeAddr(), g.randomIn(p.FarGen)})
		dst = pick(g.rng, []netip.Addr{p.FwIn, p.FwIn, p.FwOut, p.FwVLAN})
	case k < 76: // to fw, from sink
		pr.From, pr.Path = FromSink, PathInput
		src = pick(g.rng, []netip.Addr{p.Sink, g.edgeAddr()})
		dst = pick(g.rng, []netip.Addr{p.FwOut, p.FwIn})
	case k < 92: // from fw
		pr.From, pr.Path = FromFw, PathOutput
		src = pick(g.rng, []netip.Addr{p.FwIn, p.FwOut, p.FwOut, g.edgeAddr()})
		dst = pick(g.rng, []netip.Addr{p.Gen, p.Sink, p.Sink, g.randomIn(p.FarSink), g.randomIn(p.FarGen), g.edgeAddr(), p.FwIn, p.GenVLAN})
	default:
		return g.special()
	}
	if g.chance(15) {
		// An edge address anywhere: the kernel decides where it goes.
		if g.chance(50) {
			src = g.edgeAddr()
		} else if pr.Path != PathInput {
			dst = g.edgeAddr()
		}
	}
	// Left out, as a documented difference (docs/differences.md): packets fw
	// itself sends to a broadcast or multicast address, whose copy for fw's
	// own sockets xfw does not see. Not from fw, then, and not from such
	// sources, which fw's replies go to.
	if g.plan.isGroup(src) {
		src = map[Origin]netip.Addr{FromGen: p.Gen, FromSink: p.Sink, FromFw: p.FwOut}[pr.From]
	}
	if pr.From == FromFw && g.plan.isGroup(dst) {
		dst = p.Sink
	}
	// fw's packets to link-local addresses: the route picks an interface,
	// the neighbour is never resolved, and the packet, counted by the
	// kernel's OUTPUT, never reaches xfw's egress hook (docs/differences.md:
	// not sent).
	if pr.From == FromFw && dst.Is6() && dst.IsLinkLocalUnicast() {
		dst = p.Sink
	}
	// IPv6: no hairpin (forwarded back out of the link it came from).
	// fw would send a redirect, rate-limited to one a second per
	// destination: how many go out depends on timing.
	// A link-local destination in fe80::/64 that is not fw's own goes back
	// out of the interface it came in on (the kernel's strict input route):
	// a hairpin too.
	hairpin := dst.Is6() && dst.IsLinkLocalUnicast() && !g.plan.isLocal(dst) &&
		netip.MustParsePrefix("fe80::/64").Contains(dst)
	if g.fam == ir.IPv6 && pr.From != FromFw && (g.plan.via(dst) == pr.From || hairpin) {
		dst = map[Origin]netip.Addr{FromGen: p.Sink, FromSink: p.Gen}[pr.From]
	}
	// Packets from gen or sink with a link-local source: whatever fw's
	// stack answers (ip6_forward's "beyond scope" error before the
	// FORWARD hook, a port unreachable...) goes to an address whose
	// neighbour is never resolved: counted by the kernel's OUTPUT, it
	// never reaches xfw's egress hook (docs/differences.md: not sent). Found
	// by xfw difftest on the conformance dump fedora27-ip6tables.
	if pr.From != FromFw && src.Is6() && src.IsLinkLocalUnicast() {
		src = map[Origin]netip.Addr{FromGen: p.Gen, FromSink: p.Sink}[pr.From]
	}
	pr.Frames, pr.Note = g.ipPacket(pr.From, src, dst)
	if pr.From != FromFw {
		pr.Frames, pr.Note = g.ethernet(pr.From, pr.Frames, pr.Note, dst)
	}
	return pr
}

// l4 is a transport payload being built.
type l4 struct {
	t    nettest.Transport
	note string
	// hdr is the transport header's size (to reach a target length).
	hdr int
	// grow sets the payload to n bytes.
	grow func(n int) nettest.Transport
}

// payload returns n bytes of filler.
func payload(n int) []byte {
	if n < 0 {
		n = 0
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// transport builds a transport header of a random kind.
func (g *pgen) transport(to netip.Addr) l4 {
	n := g.rng.Intn(40)
	switch k := g.rng.Intn(100); {
	case k < 38:
		t := nettest.TCP{SrcPort: g.port(), DstPort: g.port(), Flags: g.tcpFlags(), Window: 512}
		if g.chance(10) {
			t.Options = []byte{2, 4, 5, 0xb4, 1, 1, 4, 2} // MSS, NOP, NOP, SACK permitted
		}
		grow := func(n int) nettest.Transport { t.Payload = payload(n); return t }
		return l4{t: grow(n), note: "tcp", hdr: tcpHeaderLen + len(t.Options), grow: grow}
	case k < 65:
		u := nettest.UDP{SrcPort: g.port(), DstPort: g.port()}
		grow := func(n int) nettest.Transport { u.Payload = payload(n); return u }
		return l4{t: grow(n), note: "udp", hdr: 8, grow: grow}
	case k < 85:
		typ, code := g.icmpTypeCode()
		rest := uint32(0)
		if g.fam == ir.IPv4 {
			m := nettest.ICMPv4{Type: typ, Code: code, Rest: rest}
			grow := func(n int) nettest.Transport { m.Payload = payload(n); return m }
			return l4{t: grow(n), note: fmt.Sprintf("icmp %d/%d", typ, code), hdr: icmpHeaderLen, grow: grow}
		}
		m := nettest.ICMPv6{Type: typ, Code: code, Rest: rest}
		grow := func(n int) nettest.Transport { m.Payload = payload(n); return m }
		return l4{t: grow(n), note: fmt.Sprintf("icmp6 %d/%d", typ, code), hdr: icmpHeaderLen, grow: grow}
	default:
		protos := []uint8{47, 50, 51, 132, 136, 33, 255, 2, 58, 1, 103}
		protos = append(protos, g.e.protos...)
		proto := pick(g.rng, protos)
		if proto == 0 && g.fam == ir.IPv6 {
			proto = 59 // hop-by-hop is not a transport
		}
		grow := func(n int) nettest.Transport { return nettest.Raw{Proto: proto, Data: payload(n)} }
		// Enough bytes for multiport to read ports of SCTP, DCCP, UDP-Lite.
		return l4{t: grow(4 + n), note: fmt.Sprintf("proto %d", proto), hdr: 0, grow: grow}
	}
}

// icmpTypeCode returns an ICMP type and code: the ruleset's edges, common
// ones, or anything.
func (g *pgen) icmpTypeCode() (uint8, uint8) {
	if len(g.e.icmp) > 0 && g.chance(50) {
		tc := pick(g.rng, g.e.icmp)
		return tc[0], tc[1]
	}
	if g.chance(15) {
		return uint8(g.rng.Intn(256)), uint8(g.rng.Intn(20))
	}
	if g.fam == ir.IPv4 {
		tc := pick(g.rng, [][2]uint8{{8, 0}, {0, 0}, {3, 3}, {3, 1}, {3, 4}, {11, 0}, {11, 1}, {12, 0}, {13, 0}, {5, 1}, {4, 0}})
		return tc[0], tc[1]
	}
	tc := pick(g.rng, [][2]uint8{{128, 0}, {129, 0}, {1, 4}, {1, 0}, {2, 0}, {3, 0}, {4, 1}, {135, 0}, {136, 0}, {133, 0}, {143, 0}})
	return tc[0], tc[1]
}

// special builds the unusual probes: broadcast and multicast, packets to
// fw's loopback or link-local addresses, martian sources, frames for other
// hosts, VLANs, IPv4 in an IPv6 frame and the like.
func (g *pgen) special() Probe {
	p := g.plan
	pr := Probe{From: FromGen, Path: PathInput}
	var src, dst netip.Addr
	var eth = nettest.Ethernet{Src: p.GenMAC, Dst: p.FwInMAC}
	kind := g.rng.Intn(9)
	switch kind {
	case 0: // multicast to a group fw joined, or to one no device joined
		// (one draw, as when only joined groups were sent)
		src, dst = p.Gen, pick(g.rng, append(append([]netip.Addr(nil), p.Joined...), p.Unjoined...))
		eth.Dst = multicastMAC(dst)
		pr.Note = "multicast " + dst.String()
	case 1: // broadcast
		src = p.Gen
		if g.fam == ir.IPv4 {
			dst = pick(g.rng, []netip.Addr{netip.MustParseAddr("255.255.255.255"), netip.AddrFrom4([4]byte{10, p.Subnet, 1, 255})})
			eth.Dst = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			pr.Note = "broadcast " + dst.String()
		} else {
			dst = p.Sink
			eth.Dst = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			pr.Path, pr.Note = PathForward, "broadcast MAC, unicast IP"
		}
	case 2: // a unicast IP in a broadcast or multicast frame, to be forwarded
		src, dst = p.Gen, p.Sink
		eth.Dst = pick(g.rng, []net.HardwareAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {0x01, 0x00, 0x5e, 0, 0, 1}, {0x33, 0x33, 0, 0, 0, 1}})
		pr.Path, pr.Note = PathForward, "group MAC "+eth.Dst.String()+", unicast IP"
	case 3: // for another host on the link
		src, dst = p.Gen, p.Sink
		eth.Dst = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
		pr.Path, pr.Note = PathForward, "frame for another host"
	case 4: // fw's loopback address from outside (martian)
		src = p.Gen
		dst = p.FwAddrs()[3]
		pr.Note = "loopback destination from outside"
	case 5: // martian sources
		dst = pick(g.rng, []netip.Addr{p.FwIn, p.Sink})
		if g.fam == ir.IPv4 {
			src = pick(g.rng, []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("0.0.0.0"),
				netip.MustParseAddr("224.0.0.5"), netip.MustParseAddr("255.255.255.255"), p.FwIn, p.FwOut})
		} else {
			src = pick(g.rng, []netip.Addr{netip.IPv6Loopback(), netip.IPv6Unspecified(), netip.MustParseAddr("ff02::1"), p.FwIn, p.FwOut})
		}
		if dst == p.Sink {
			pr.Path = PathForward
		}
		pr.Note = "martian source " + src.String()
	case 6: // link-local
		if g.fam == ir.IPv6 {
			src, dst = netip.MustParseAddr("fe80::1"), p.FwInLL
			pr.Note = "link-local to fw"
		} else {
			src, dst = netip.MustParseAddr("169.254.1.1"), p.FwIn
			pr.Note = "link-local source"
		}
	case 7: // the VLAN: to fw's VLAN address, and through it
		src = p.GenVLAN
		dst = pick(g.rng, []netip.Addr{p.FwVLAN, p.Sink})
		eth = eth.WithVLAN(nettest.VLANTag{ID: VLANID})
		if dst == p.Sink {
			pr.Path = PathForward
		}
		pr.Note = "vlan device"
	default: // a double tag
		src, dst = p.Gen, p.FwIn
		eth = eth.WithVLAN(nettest.VLANTag{TPID: nettest.EtherTypeQinQ, ID: VLANID}).WithVLAN(nettest.VLANTag{ID: VLANID})
		pr.Note = "QinQ"
	}
	t := g.transport(dst)
	// An IPv6 TCP reset to a link-local source: the kernel routes it by
	// whichever fe80::/64 route its lookup picks, so whether the sender
	// gets it is not fixed by the packet (docs/differences.md, "REJECT
	// replies"; docs/difftest.md). A TCP probe to fw's link-local address
	// comes from gen's global one when the ruleset may send resets.
	if _, isTCP := t.t.(nettest.TCP); isTCP && g.resets6 && src.IsLinkLocalUnicast() {
		src = p.Gen
		pr.Note = "to fw's link-local address from a global source"
	}
	var pkt []byte
	if g.fam == ir.IPv4 {
		pkt = nettest.IPv4{Src: src, Dst: dst, TTL: g.ttl()}.Packet(t.t)
	} else {
		pkt = nettest.IPv6{Src: src, Dst: dst, HopLimit: g.ttl()}.Packet(t.t)
	}
	pr.Note += " " + t.note
	pr.Frames = [][]byte{eth.Frame(pkt)}
	return pr
}
