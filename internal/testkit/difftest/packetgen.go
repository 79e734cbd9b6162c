package difftest

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"net"
	"net/netip"
	"sort"
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
// Left out on purpose, as documented differences (README, "Known
// differences from iptables"): multicast to groups fw has not joined.

// maxL3Len is the largest IP packet gen can send (its MTU).
const maxL3Len = 1500

// edges are the values worth sending, taken from a ruleset.
type edges struct {
	addrs  []netip.Addr
	ports  []uint16
	icmp   [][2]uint8 // type, code
	ttls   []uint8
	lens   []int
	macs   []net.HardwareAddr
	flags  []uint8
	protos []uint8
	// multiport is set when a rule uses the multiport match.
	multiport bool
}

// pgen holds the state of one corpus's generation.
type pgen struct {
	rng   *rand.Rand
	plan  Plan
	fam   ir.Family
	e     edges
	flagN int // cycles through every TCP flag combination
}

// GenerateCorpus returns n probes aimed at the edges of ruleset (iptables-
// restore text of plan's family), determined by seed and the ruleset. The
// ruleset must parse (xfw's parser: the matches it supports).
func GenerateCorpus(seed int64, plan Plan, ruleset string, n int) (*Corpus, error) {
	rs, err := iptables.Restore(plan.Family, strings.NewReader(ruleset), nil, iptables.RestoreOptions{Table: "filter", Sets: SetLookup(ruleset)})
	if err != nil {
		return nil, fmt.Errorf("parse ruleset for its edges: %w", err)
	}
	g := &pgen{rng: rand.New(rand.NewSource(seed)), plan: plan, fam: plan.Family}
	g.e = collectEdges(rs, plan)
	c := &Corpus{}
	for tries := 0; len(c.Probes) < n && tries < maxGenTries*n; tries++ {
		p := g.probe()
		if g.e.multiport && shortPorts(p) {
			// Left out, as a documented difference (README, "Known
			// differences from iptables"): with multiport in the ruleset,
			// a ports protocol whose header is cut short (xfw's multiport
			// does not read its ports).
			continue
		}
		c.Probes = append(c.Probes, p)
	}
	return c, nil
}

// maxGenTries bounds the probes generated per probe kept.
const maxGenTries = 10

// fullHeader is the transport header length the kernel's matches read for
// the protocols with ports.
var fullHeader = map[uint8]int{nettest.ProtoTCP: 20, nettest.ProtoUDP: 8, 136: 8, nettest.ProtoSCTP: 4, 33: 4} // 136 UDP-Lite, 33 DCCP

// shortPorts reports whether a probe's first frame has a transport header
// with ports that ends before its full length (not a later fragment).
func shortPorts(p Probe) bool {
	if len(p.Frames) == 0 {
		return false
	}
	b := p.Frames[0]
	l3 := 0
	if p.From != FromFw {
		l3 = l3Offset(b)
	}
	proto, off, ok := transport(b, l3)
	need, ports := fullHeader[proto]
	if !ok || !ports {
		return false
	}
	end := len(b)
	switch b[l3] >> 4 {
	case 4:
		end = min(end, l3+int(binary.BigEndian.Uint16(b[l3+2:])))
	case 6:
		if pl := int(binary.BigEndian.Uint16(b[l3+4:])); pl != 0 || b[l3+6] != nettest.ProtoHopByHop {
			end = min(end, l3+ipv6HeaderLen+pl)
		}
	}
	return end-off < need
}

// collectEdges gathers the interesting values of rs and of the topology.
func collectEdges(rs *ir.Ruleset, plan Plan) edges {
	var e edges
	addAddr := func(as ...netip.Addr) {
		for _, a := range as {
			if a.IsValid() {
				e.addrs = append(e.addrs, a)
			}
		}
	}
	addPort := func(v int) {
		if v >= 0 && v <= 65535 {
			e.ports = append(e.ports, uint16(v))
		}
	}
	addRange := func(r ir.PortRange) {
		for _, v := range []int{int(r.First) - 1, int(r.First), int(r.Last), int(r.Last) + 1} {
			addPort(v)
		}
	}
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			for _, am := range []ir.AddrMatch{r.Src, r.Dst} {
				if am.Set {
					addAddr(maskEdges(am.Addr, am.Mask)...)
				}
			}
			if r.Proto.Set {
				e.protos = append(e.protos, r.Proto.Num)
			}
			for _, m := range r.Matches {
				switch m := m.(type) {
				case *ir.TCPMatch:
					for _, pm := range []ir.PortMatch{m.SrcPort, m.DstPort} {
						if pm.Set {
							addRange(pm.Range)
						}
					}
					if m.Flags.Set {
						e.flags = append(e.flags, m.Flags.Comp, m.Flags.Comp^m.Flags.Mask)
						for bit := uint8(1); bit != 0; bit <<= 1 {
							if m.Flags.Mask&bit != 0 {
								e.flags = append(e.flags, m.Flags.Comp^bit)
							}
						}
					}
				case *ir.UDPMatch:
					for _, pm := range []ir.PortMatch{m.SrcPort, m.DstPort} {
						if pm.Set {
							addRange(pm.Range)
						}
					}
				case *ir.MultiportMatch:
					e.multiport = true
					for _, pr := range m.Ports {
						addRange(pr)
					}
				case *ir.ICMPMatch:
					t := m.Type
					e.icmp = append(e.icmp, [2]uint8{t, m.CodeMin}, [2]uint8{t, m.CodeMax}, [2]uint8{t + 1, 0}, [2]uint8{t - 1, 0})
					if m.CodeMin > 0 {
						e.icmp = append(e.icmp, [2]uint8{t, m.CodeMin - 1})
					}
					if m.CodeMax < 255 {
						e.icmp = append(e.icmp, [2]uint8{t, m.CodeMax + 1})
					}
				case *ir.IPRangeMatch:
					for _, ar := range []ir.AddrRange{m.Src, m.Dst} {
						if ar.Set {
							addAddr(ar.From.Prev(), ar.From, ar.To, ar.To.Next())
						}
					}
				case *ir.LengthMatch:
					e.lens = append(e.lens, int(m.Min)-1, int(m.Min), int(m.Max), int(m.Max)+1)
				case *ir.TTLMatch:
					v := int(m.Value)
					for _, t := range []int{v - 1, v, v + 1, v + 2} {
						if t >= 0 && t <= 255 {
							e.ttls = append(e.ttls, uint8(t))
						}
					}
				case *ir.MACMatch:
					e.macs = append(e.macs, net.HardwareAddr(m.Addr[:]))
				}
			}
		}
	}
	// The topology's own values, always.
	addAddr(plan.Gen, plan.Sink, plan.FwIn, plan.FwOut, plan.GenVLAN, plan.FwVLAN)
	for _, p := range interestingPorts {
		addPort(p)
	}
	e.ttls = append(e.ttls, 0, 1, 2, 63, 64, 65, 254, 255)
	e.macs = append(e.macs, otherMACs...)
	e.ports, e.ttls, e.lens = sortedUnique(e.ports), sortedUnique(e.ttls), sortedUnique(e.lens)
	e.flags, e.protos = sortedUnique(e.flags), sortedUnique(e.protos)
	return e
}

// maskEdges returns the addresses at the edges of {a : a & mask == addr}:
// first and last, their outer neighbours, and for a non-contiguous mask the
// addresses one free bit away.
func maskEdges(addr, mask netip.Addr) []netip.Addr {
	if !addr.IsValid() || !mask.IsValid() {
		return nil
	}
	a, m := addr.AsSlice(), mask.AsSlice()
	first := make([]byte, len(a))
	last := make([]byte, len(a))
	for i := range a {
		first[i] = a[i] & m[i]
		last[i] = a[i]&m[i] | ^m[i]
	}
	f, _ := netip.AddrFromSlice(first)
	l, _ := netip.AddrFromSlice(last)
	out := []netip.Addr{f, l, f.Prev(), l.Next()}
	// One free bit set, and the lowest mask bit flipped (just outside).
	lowest := -1
	for i := len(m)*8 - 1; i >= 0; i-- {
		if m[i/8]&(0x80>>uint(i%8)) != 0 {
			lowest = i
			break
		}
	}
	for i := 0; i < lowest; i++ {
		if m[i/8]&(0x80>>uint(i%8)) == 0 {
			x := append([]byte(nil), first...)
			x[i/8] |= 0x80 >> uint(i%8)
			xa, _ := netip.AddrFromSlice(x)
			out = append(out, xa)
			break
		}
	}
	if lowest >= 0 {
		x := append([]byte(nil), first...)
		x[lowest/8] ^= 0x80 >> uint(lowest%8)
		xa, _ := netip.AddrFromSlice(x)
		out = append(out, xa)
	}
	return out
}

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

// usable reports whether a is fine as a probe address: not multicast to a
// group fw did not join (README: a documented difference), not the
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
	// Left out, as a documented difference (README, "Known differences
	// from iptables"): packets fw itself sends to a broadcast or multicast
	// address, whose copy for fw's own sockets xfw does not see. Not from
	// fw, then, and not from such sources, which fw's replies go to.
	if g.plan.isGroup(src) {
		src = map[Origin]netip.Addr{FromGen: p.Gen, FromSink: p.Sink, FromFw: p.FwOut}[pr.From]
	}
	if pr.From == FromFw && g.plan.isGroup(dst) {
		dst = p.Sink
	}
	// fw's packets to link-local addresses: the route picks an interface,
	// the neighbour is never resolved, and the packet, counted by the
	// kernel's OUTPUT, never reaches xfw's egress hook (README, "Known
	// differences from iptables": not sent).
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
	// never reaches xfw's egress hook (README, "Known differences from
	// iptables": not sent). Found by xfw difftest on the conformance dump
	// fedora27-ip6tables.
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
		// documented difference (README, "Known differences from
		// iptables").
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
	// Left out, as documented differences (README, "Known differences
	// from iptables"): first fragments and fragmented datagrams for fw
	// itself (the kernel reassembles before INPUT, xfw judges the first
	// fragment for the datagram), and later fragments fw sends (xfw judges
	// a datagram by its first fragment in OUTPUT too).
	local := g.plan.isLocal(dst)
	switch k := g.rng.Intn(100); {
	case k < 4 && !local: // a lone first fragment
		h.MoreFragments = true
		frames = [][]byte{h.Packet(t.t)}
		note += " first-fragment"
	case k < 8 && from != FromFw: // a later fragment
		h.FragOffset = uint16(1 + g.rng.Intn(200))
		h.MoreFragments = g.chance(50)
		frames = [][]byte{h.Packet(nettest.Raw{Proto: t.t.Protocol(), Data: payload(8 + g.rng.Intn(64))})}
		note += fmt.Sprintf(" later-fragment off %d", h.FragOffset)
	case k < 10 && from != FromFw: // offset 1: the "evil" TCP fragment
		h.FragOffset = 1
		frames = [][]byte{h.Packet(nettest.Raw{Proto: pick(g.rng, []uint8{6, 6, 17}), Data: payload(16)})}
		note += " fragment off 1"
	case k < 14 && from != FromFw && !local: // a whole datagram in fragments
		whole := h.Packet(t.t)
		if len(whole) > 60 {
			if fr, err := nettest.FragmentIPv4(whole, g.fragSize(len(whole))); err == nil {
				frames = fr
				note += fmt.Sprintf(" fragmented x%d", len(fr))
			}
		}
	case k < 19 && from != FromFw: // malformed headers: the stack's checks
		frames, note = g.malformed4(frames[0], t, note)
	case k < 25 && g.mayTruncate(t): // a truncated transport header
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

// mayTruncate says whether the transport header of t may be cut short. Not
// the ports' protocols when the ruleset uses multiport: xfw's multiport
// does not read the ports of a header cut short, a documented difference
// (README, "Known differences from iptables").
func (g *pgen) mayTruncate(t l4) bool {
	if !g.e.multiport {
		return true
	}
	switch t.t.Protocol() {
	case nettest.ProtoTCP, nettest.ProtoUDP, nettest.ProtoSCTP, 33, 136: // DCCP, UDP-Lite
		return false
	}
	return true
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

// ipv6 builds an IPv6 probe.
func (g *pgen) ipv6(from Origin, src, dst netip.Addr, ttl uint8, t l4, note string) ([][]byte, string) {
	h := nettest.IPv6{Src: src, Dst: dst, HopLimit: ttl}
	if r, ok := t.t.(nettest.Raw); ok && from == FromFw && r.Proto == nettest.ProtoFragment && len(r.Data) >= 4 {
		// "Protocol 44" is a fragment header: its filler bytes would make
		// a later fragment fw sends itself, which xfw's OUTPUT passes
		// unjudged (README, "Known differences"; see ipv4). Make it a
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
	case k < 8 && from != FromFw: // a later fragment (see ipv4 for fw's)
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
			raw.Data = []byte{6, 4, 0, 1} // not a later fragment (see ipv4)
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
	case k < 27 && g.mayTruncate(t): // a truncated transport header
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
	case 0: // multicast to a group fw joined
		src, dst = p.Gen, pick(g.rng, p.Joined)
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

// sortedUnique sorts and deduplicates a slice (for stable edge lists).
func sortedUnique[T interface{ ~uint8 | ~uint16 | ~int }](xs []T) []T {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
