package difftest

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file writes conversations: sequences of probes whose order matters
// to connection tracking. Each conversation is one flow (its own ports or
// ICMP identifier, so conversations do not meet) between a client and a
// server: both beyond fw (FORWARD, either way), a host and fw (INPUT, fw's
// answers through OUTPUT), or fw and a host (OUTPUT, the host's answers
// through INPUT). Its i-th probe has step i+1 (Probe.Step): the run sends
// it once both sides have settled after the step before, so every packet
// meets the state the previous ones left, in the kernel's nf_conntrack as
// in xfw's tables.
//
// What a conversation is made of:
//   - TCP: a handshake (or half of one, or none: a bare ACK picked up
//     mid-stream, nf_conntrack_tcp_loose), data both ways, retransmissions,
//     segments out of the window (sequence far ahead or far behind, an
//     acknowledgement of data never sent), SYN on an established
//     connection, RST in and out of the window, invalid flag combinations,
//     FIN both ways and a new SYN on the closed connection;
//   - UDP: requests, replies, more of both, replies without a request;
//   - ICMP echo (and IPv4 timestamp): requests, replies, replies without a
//     request, repeated replies;
//   - other protocols (tracked as generic): both ways;
//   - ICMP errors quoting an earlier probe of the conversation (RELATED,
//     also from a router on the way) or a flow nobody opened (INVALID);
//   - IPv6 neighbour discovery (UNTRACKED).
//
// Sequence numbers are consistent within a conversation, so the markers of
// its probes live in the IP identification or flow label only
// (Probe.KeepL4); its TCP sequence numbers and ICMP identifiers are kept
// out of the markers' range so that no answer is attributed to a probe it
// does not answer.

// convISNBase keeps conversations' TCP sequence numbers above every
// marker (seq>>tcpMarkerShift ≥ 0xf0000, far more probes than a session
// sends).
const convISNBase = 0xf0000000

// convICMPIDBase keeps conversations' ICMP identifiers out of the markers'
// range (an echo reply's identifier and sequence number, 32 bits, are
// matched against markers).
const convICMPIDBase = 0xe000

// convPortBase is the first client port of conversations; each takes the
// next one.
const convPortBase = 40000

// StatefulOptions size a stateful corpus.
type StatefulOptions struct {
	// Probes is the number of independent probes (step 0), as
	// GenerateCorpus makes them, but for the documented differences of
	// xfw's tracking: no fragments (the kernel reassembles before
	// conntrack, xfw does not; IPv6 atomic fragments too), no SCTP or
	// DCCP (generic in xfw), no GRE (left out while it was generic in
	// xfw, so that seeds keep their corpora), no IPv6 packets with
	// extension headers for fw itself (fw's ICMPv6 errors quoting them
	// are INVALID in xfw).
	Probes int
	// Conversations is the number of conversations added after them.
	Conversations int
	// SkipStackErrors leaves out the independent probes fw's stack is
	// likely to answer with an ICMP error before any chain sees them
	// (stackErrorProbe): an open difference (the kernel's such errors
	// are RELATED to the offending packet's unconfirmed connection, xfw's
	// INVALID), left out only so that a campaign sees past it.
	SkipStackErrors bool
}

// GenerateStatefulCorpus returns opts.Probes independent probes aimed at
// the edges of ruleset and opts.Conversations conversations, determined by
// seed and the ruleset. Fragments are left out: with connection tracking
// the kernel reassembles datagrams before its chains (and forwards them
// whole, or refragmented by the MTU), while xfw judges first fragments and
// passes later ones unjudged (a documented difference).
func GenerateStatefulCorpus(seed int64, plan Plan, ruleset string, opts StatefulOptions) (*Corpus, error) {
	e, err := rulesetEdges(ruleset, plan)
	if err != nil {
		return nil, err
	}
	g := &pgen{rng: rand.New(rand.NewSource(seed)), plan: plan, fam: plan.Family, e: e}
	nat := HasNATTable(ruleset)
	sports, nextPort := map[uint16]bool{}, uint16(firstFreePort)
	echoes, echoSrcs := map[netip.Addr]netip.Addr{}, map[netip.Addr]netip.Addr{}
	var echoDNATs []echoDNAT
	if nat {
		echoDNATs = natEchoDNATs(ruleset, plan)
	}
	flows := map[flowEnds]bool{}
	c := &Corpus{}
	for tries := 0; len(c.Probes) < opts.Probes && tries < maxGenTries*opts.Probes; tries++ {
		p := g.probe()
		if isFragmented(p) || trackedAsGeneric(p) || extToFw(p, plan) || badL4Checksum(p) ||
			opts.SkipStackErrors && stackErrorProbe(p, plan) || nat && (natUnrouted(p, plan) || stackErrorProbe(p, plan) || natQuery(p) || natLoopback(p, plan, ruleset) || natOutputToFw(p, plan, ruleset) || natOutputTooBig(p, ruleset) || natEchoClash(p, plan, echoes, echoDNATs, echoSrcs)) {
			continue
		}
		if nat {
			uniqueSourcePort(p, sports, &nextPort)
			if natReverse(p, ruleset, flows) {
				continue
			}
		}
		c.Probes = append(c.Probes, p)
	}
	bursts := rateBursts(seed, plan, ruleset)
	if nat {
		uniqueBurstPorts(bursts, sports, &nextPort)
	}
	c.Probes = append(c.Probes, bursts...)
	if nat {
		// Sink's answers instead of conversations, whose packets do not
		// follow the translations (nat.go).
		c.Probes = append(c.Probes, answers(g, c.Probes, sports)...)
		return c, nil
	}
	cg := &cgen{pgen: g, rng: rand.New(rand.NewSource(seed ^ 0x5eed))}
	for i := 0; i < opts.Conversations; i++ {
		c.Probes = append(c.Probes, cg.conversation(i)...)
	}
	return c, nil
}

// extToFw reports whether a probe is an IPv6 packet with extension headers
// for fw itself (from outside or from fw): fw's stack answers many of them with an ICMPv6 error
// (port unreachable, parameter problem), which xfw's tracking calls
// INVALID where the kernel's calls it RELATED (a documented difference:
// an ICMPv6 error quoting a packet with extension headers is INVALID).
func extToFw(p Probe, plan Plan) bool {
	if len(p.Frames) == 0 {
		return false
	}
	f := p.Frames[0]
	l3 := 0
	if p.From != FromFw {
		l3 = l3Offset(f)
	}
	if l3 < 0 || len(f) < l3+ipv6HeaderLen || f[l3]>>4 != 6 {
		return false
	}
	b := f[l3:]
	dst, _ := netip.AddrFromSlice(b[24:40])
	switch b[6] {
	case nettest.ProtoTCP, nettest.ProtoUDP, nettest.ProtoICMPv6, nettest.ProtoNoNext:
		return false
	}
	return plan.isLocal(dst) || dst.IsMulticast()
}

// checksummedHeader is the header length of the transport protocols whose
// checksum the kernel's conntrack verifies at PREROUTING.
var checksummedHeader = map[uint8]int{nettest.ProtoTCP: 20, nettest.ProtoUDP: 8, 136: 8, nettest.ProtoICMP: 8, nettest.ProtoICMPv6: 8}

// badL4Checksum reports whether a probe from gen or sink has a complete
// TCP, UDP, UDP-Lite, ICMP or ICMPv6 header with a wrong checksum (the
// generator's raw filler of those protocols): the kernel's conntrack
// verifies checksums before any chain (INVALID), xfw's does not (a
// documented difference).
func badL4Checksum(p Probe) bool {
	if p.From == FromFw || len(p.Frames) == 0 {
		return false
	}
	f := p.Frames[0]
	l3 := l3Offset(f)
	proto, off, ok := transport(f, l3)
	need, sums := checksummedHeader[proto]
	if !ok || !sums || l3 < 0 {
		return false
	}
	b := f[l3:]
	end := len(f)
	var pseudo []byte
	switch b[0] >> 4 {
	case 4:
		end = min(end, l3+int(binary.BigEndian.Uint16(b[2:])))
		if proto != nettest.ProtoICMP {
			pseudo = append(append([]byte(nil), b[12:20]...), 0, proto, 0, 0)
		}
	case 6:
		end = min(end, l3+ipv6HeaderLen+int(binary.BigEndian.Uint16(b[4:])))
		pseudo = append(append([]byte(nil), b[8:40]...), 0, 0, 0, 0, 0, 0, 0, proto)
	}
	if end-off < need {
		return false // cut short: INVALID for its length on both sides
	}
	l4 := f[off:end]
	if proto == nettest.ProtoUDP && b[0]>>4 == 4 && binary.BigEndian.Uint16(l4[6:]) == 0 {
		return false // no checksum
	}
	if pseudo != nil {
		n := len(l4)
		if b[0]>>4 == 4 {
			pseudo[10], pseudo[11] = byte(n>>8), byte(n)
		} else {
			binary.BigEndian.PutUint32(pseudo[32:], uint32(n))
			pseudo[39] = proto
		}
	}
	return nettest.Checksum(append(pseudo, l4...)) != 0
}

// trackedAsGeneric reports whether a probe is SCTP or DCCP, which xfw
// tracks as generic protocols and the kernel with their own trackers (a
// documented difference), or GRE, left out while it was one too (kept out
// so that seeds keep their corpora): left out of stateful corpora.
func trackedAsGeneric(p Probe) bool {
	for _, f := range p.Frames {
		l3 := 0
		if p.From != FromFw {
			l3 = l3Offset(f)
		}
		if proto, _, ok := transport(f, l3); ok && (proto == nettest.ProtoSCTP || proto == 33 || proto == 47) {
			return true
		}
	}
	return false
}

// stackErrorProbe reports whether fw's stack may answer a probe from gen or
// sink with an ICMP error before the filter sees it: a TTL or hop limit
// of 0 or 1 (time exceeded when forwarded), more than the fw—sink MTU
// (fragmentation needed, packet too big), IPv4 options or IPv6 extension
// headers (parameter problem), an IPv6 destination fw has no route to (no
// route).
func stackErrorProbe(p Probe, plan Plan) bool {
	if p.From == FromFw || len(p.Frames) == 0 {
		return false
	}
	f := p.Frames[0]
	l3 := l3Offset(f)
	if l3 < 0 || len(f) < l3+ipv6HeaderLen {
		return l3 >= 0 && len(f) >= l3+ipv4HeaderLen && (f[l3+8] <= 1 || f[l3]&0xf != 5)
	}
	b := f[l3:]
	switch b[0] >> 4 {
	case 4:
		return b[8] <= 1 || b[0]&0xf != 5 || len(b) > outMTU
	case 6:
		dst, _ := netip.AddrFromSlice(b[24:40])
		// No route, or the VLAN's prefix (no route when the kernel has
		// no VLAN devices).
		unrouted := plan.VLANNet.Contains(dst) || !dst.IsMulticast() && !plan.isLocal(dst) && plan.via(dst) == ""
		return b[7] <= 1 || len(b) > outMTU || unrouted || b[6] != nettest.ProtoTCP && b[6] != nettest.ProtoUDP && b[6] != nettest.ProtoICMPv6
	}
	return false
}

// isFragmented reports whether any frame of a probe is an IP fragment or
// carries an IPv6 fragment header (atomic fragments and fragment headers
// cut short included).
func isFragmented(p Probe) bool {
	for _, f := range p.Frames {
		l3 := 0
		if p.From != FromFw {
			l3 = l3Offset(f)
		}
		if l3 < 0 || len(f) < l3+1 {
			continue
		}
		b := f[l3:]
		switch b[0] >> 4 {
		case 4:
			if len(b) >= ipv4HeaderLen && binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
				return true
			}
		case 6:
			if len(b) < ipv6HeaderLen {
				continue
			}
			nh, off := b[6], ipv6HeaderLen
		walk:
			for i := 0; i < 8 && off < len(b); i++ {
				if nh != nettest.ProtoFragment && off+8 > len(b) {
					break
				}
				switch nh {
				case nettest.ProtoHopByHop, nettest.ProtoRouting, nettest.ProtoDestOpts:
					nh, off = b[off], off+(int(b[off+1])+1)*8
				case nettest.ProtoAH:
					nh, off = b[off], off+(int(b[off+1])+2)*4
				case nettest.ProtoFragment:
					// Atomic fragments too: with conntrack, the
					// kernel's nf_defrag_ipv6 takes their fragment
					// header out before any chain (the packet is
					// forwarded or delivered without it); and it
					// drops a packet whose fragment header is cut
					// short.
					return true
				default:
					break walk
				}
			}
		}
	}
	return false
}

// cgen writes conversations.
type cgen struct {
	*pgen
	rng *rand.Rand
}

// conv is one conversation being written: side 0 is the client, side 1
// the server.
type conv struct {
	g     *cgen
	id    int
	kind  string
	addr  [2]netip.Addr
	from  [2]Origin
	path  [2]Path
	port  [2]uint16
	out   []Probe
	pkts  [][]byte // each probe's IP packet (quoted by ICMP errors)
	dirs  []int
	v6    bool
	label string
}

// conversation writes conversation i.
func (g *cgen) conversation(i int) []Probe {
	cv := g.endpoints(i)
	switch k := g.rng.Intn(100); {
	case k < 50:
		cv.tcp()
	case k < 70:
		cv.udp()
	case k < 85:
		cv.echo()
	case k < 90:
		cv.generic()
	case k < 95 || !cv.v6:
		cv.strayErrors()
	default:
		cv.ndp()
	}
	for j := range cv.out {
		cv.out[j].Step = j + 1
	}
	return cv.out
}

// endpoints chooses where conversation i runs.
func (g *cgen) endpoints(i int) *conv {
	p := g.plan
	cv := &conv{g: g, id: i, v6: g.fam == ir.IPv6, port: [2]uint16{uint16(convPortBase + i), g.port()}}
	genSide := func() netip.Addr {
		return pick(g.rng, []netip.Addr{p.Gen, p.Gen, g.randomIn(p.FarGen), g.randomIn(p.GenNet)})
	}
	sinkSide := func() netip.Addr {
		return pick(g.rng, []netip.Addr{p.Sink, p.Sink, g.randomIn(p.FarSink), g.randomIn(p.SinkNet)})
	}
	for {
		switch k := g.rng.Intn(100); {
		case k < 45: // FORWARD, the client behind gen
			cv.label = "forward"
			cv.addr = [2]netip.Addr{genSide(), sinkSide()}
			cv.from = [2]Origin{FromGen, FromSink}
			cv.path = [2]Path{PathForward, PathForward}
		case k < 60: // FORWARD, the client behind sink
			cv.label = "forward from sink"
			cv.addr = [2]netip.Addr{sinkSide(), genSide()}
			cv.from = [2]Origin{FromSink, FromGen}
			cv.path = [2]Path{PathForward, PathForward}
		case k < 80: // INPUT: a client talks to fw
			cv.label = "to fw"
			if g.chance(75) {
				cv.addr = [2]netip.Addr{genSide(), pick(g.rng, []netip.Addr{p.FwIn, p.FwIn, p.FwOut})}
				cv.from = [2]Origin{FromGen, FromFw}
			} else {
				cv.addr = [2]netip.Addr{sinkSide(), pick(g.rng, []netip.Addr{p.FwOut, p.FwIn})}
				cv.from = [2]Origin{FromSink, FromFw}
			}
			cv.path = [2]Path{PathInput, PathOutput}
		default: // OUTPUT: fw is the client
			cv.label = "from fw"
			if g.chance(50) {
				cv.addr = [2]netip.Addr{p.FwOut, sinkSide()}
				cv.from = [2]Origin{FromFw, FromSink}
			} else {
				cv.addr = [2]netip.Addr{p.FwIn, genSide()}
				cv.from = [2]Origin{FromFw, FromGen}
			}
			cv.path = [2]Path{PathOutput, PathInput}
		}
		// Neither end a group address or fw's loopback, and not through
		// fw back to the link it came from.
		ok := true
		for _, a := range cv.addr {
			ok = ok && !p.isGroup(a) && a != lastAddr(p.GenNet) && a != lastAddr(p.SinkNet)
			if a.Is4() && a.As4()[3] == 0 {
				ok = false // a subnet's first address
			}
		}
		if ok {
			return cv
		}
	}
}

// ip returns an IP packet from side dir to the other side.
func (cv *conv) ip(dir int, t nettest.Transport) []byte {
	src, dst := cv.addr[dir], cv.addr[1-dir]
	if cv.v6 {
		return nettest.IPv6{Src: src, Dst: dst, HopLimit: 64}.Packet(t)
	}
	return nettest.IPv4{Src: src, Dst: dst, TTL: 64}.Packet(t)
}

// send adds the probe of IP packet pkt sent by side dir.
func (cv *conv) send(dir int, pkt []byte, what string) {
	p := Probe{From: cv.from[dir], Path: cv.path[dir], KeepL4: true,
		Note: fmt.Sprintf("conversation %d (%s %s) #%d: %s", cv.id, cv.kind, cv.label, len(cv.out)+1, what)}
	p.Frames = [][]byte{cv.frame(p.From, pkt)}
	cv.out = append(cv.out, p)
	cv.pkts = append(cv.pkts, pkt)
	cv.dirs = append(cv.dirs, dir)
}

// frame wraps an IP packet sent from o (fw sends IP packets).
func (cv *conv) frame(o Origin, pkt []byte) []byte {
	p := cv.g.plan
	switch o {
	case FromGen:
		return nettest.Ethernet{Src: p.GenMAC, Dst: p.FwInMAC}.Frame(pkt)
	case FromSink:
		return nettest.Ethernet{Src: p.SinkMAC, Dst: p.FwOutMAC}.Frame(pkt)
	}
	return pkt
}

// again resends probe j of the conversation (a retransmission, byte for
// byte but for the marker).
func (cv *conv) again(j int, what string) {
	cv.send(cv.dirs[j], cv.pkts[j], what+" (again #"+fmt.Sprint(j+1)+")")
}

// icmpError adds an ICMP error about probe j, sent by the side that
// probe went to, or by a router on its way; wrongDst sends it to the
// wrong host (the kernel checks the outer destination).
func (cv *conv) icmpError(j int) {
	g := cv.g
	dir := 1 - cv.dirs[j]
	quoted := cv.pkts[j]
	hl := ipv4HeaderLen
	if cv.v6 {
		hl = ipv6HeaderLen
	}
	// The quote: the header and 8 bytes of the transport header, or more.
	n := min(len(quoted), hl+8+pick(g.rng, []int{0, 0, 12, 40, 1000}))
	if cv.v6 {
		n = min(len(quoted), 1232)
	}
	q := append([]byte(nil), quoted[:n]...)
	src := cv.addr[dir]
	who := "its destination"
	// A router on the way (beyond fw): another address of that side.
	if cv.from[dir] != FromFw && g.chance(30) {
		if cv.from[dir] == FromGen {
			src = g.randomIn(g.plan.FarGen)
		} else {
			src = g.randomIn(g.plan.FarSink)
		}
		who = "a router"
	}
	dst := cv.addr[1-dir]
	var t nettest.Transport
	var what string
	if cv.v6 {
		tc := pick(g.rng, [][2]uint8{{1, 4}, {1, 0}, {1, 3}, {3, 0}, {2, 0}, {4, 0}})
		rest := uint32(0)
		if tc[0] == 2 {
			rest = 1280
		}
		t = nettest.ICMPv6{Type: tc[0], Code: tc[1], Rest: rest, Payload: q}
		what = fmt.Sprintf("ICMPv6 error %d/%d from %s quoting #%d", tc[0], tc[1], who, j+1)
	} else {
		tc := pick(g.rng, [][2]uint8{{3, 3}, {3, 1}, {3, 4}, {3, 13}, {11, 0}, {12, 0}, {4, 0}})
		rest := uint32(0)
		if tc == [2]uint8{3, 4} {
			rest = 1200
		}
		t = nettest.ICMPv4{Type: tc[0], Code: tc[1], Rest: rest, Payload: q}
		what = fmt.Sprintf("ICMP error %d/%d from %s quoting #%d", tc[0], tc[1], who, j+1)
	}
	var pkt []byte
	if cv.v6 {
		pkt = nettest.IPv6{Src: src, Dst: dst, HopLimit: 64}.Packet(t)
	} else {
		pkt = nettest.IPv4{Src: src, Dst: dst, TTL: 64}.Packet(t)
	}
	p := Probe{From: cv.from[dir], Path: cv.path[dir], KeepL4: true,
		Note: fmt.Sprintf("conversation %d (%s %s) #%d: %s", cv.id, cv.kind, cv.label, len(cv.out)+1, what)}
	p.Frames = [][]byte{cv.frame(p.From, pkt)}
	cv.out = append(cv.out, p)
	cv.pkts = append(cv.pkts, pkt)
	cv.dirs = append(cv.dirs, dir)
}

// maybeError adds, now and then, an ICMP error about one of the probes so
// far.
func (cv *conv) maybeError() {
	if len(cv.out) > 0 && cv.g.chance(12) {
		cv.icmpError(cv.g.rng.Intn(len(cv.out)))
	}
}

// tcpOptsSYN are a SYN's options: MSS 1460, NOP, NOP, SACK permitted, NOP,
// window scale 7.
var tcpOptsSYN = []byte{2, 4, 5, 0xb4, 1, 1, 4, 2, 1, 3, 3, 7}

// tcpOptsSYNNoScale are a SYN's options without window scaling.
var tcpOptsSYNNoScale = []byte{2, 4, 5, 0xb4, 1, 1, 4, 2}

// badFlagSets are flag combinations nf_conntrack_proto_tcp calls invalid
// (tcp_valid_flags), and a few that are valid but odd.
var badFlagSets = []struct {
	flags uint16
	name  string
}{
	{nettest.TCPSyn | nettest.TCPFin, "SYN,FIN"},
	{nettest.TCPSyn | nettest.TCPRst, "SYN,RST"},
	{0, "no flags"},
	{nettest.TCPFin, "FIN without ACK"},
	{nettest.TCPFin | nettest.TCPPsh | nettest.TCPUrg, "xmas FIN,PSH,URG"},
	{0x3f, "all six flags"},
	{nettest.TCPSyn | nettest.TCPFin | nettest.TCPAck, "SYN,FIN,ACK"},
	{nettest.TCPRst | nettest.TCPFin | nettest.TCPAck, "RST,FIN,ACK"},
	{nettest.TCPAck | nettest.TCPUrg, "ACK,URG"},
	{nettest.TCPSyn | nettest.TCPPsh, "SYN,PSH"},
}

// tcp writes a TCP conversation.
func (cv *conv) tcp() {
	cv.kind = "tcp"
	g := cv.g
	var nxt [2]uint32
	for d := range nxt {
		nxt[d] = convISNBase + uint32(g.rng.Intn(0x0e000000))
	}
	scale := g.chance(50)
	window := uint16(8192)
	seg := func(dir int, flags uint16, seq, ack uint32, n int, what string) {
		t := nettest.TCP{SrcPort: cv.port[dir], DstPort: cv.port[1-dir], Seq: seq, Ack: ack, Flags: flags, Window: window, Payload: payload(n)}
		if flags&nettest.TCPSyn != 0 {
			t.Options = tcpOptsSYNNoScale
			if scale {
				t.Options = tcpOptsSYN
			}
			t.Window = 64240
		}
		if flags&nettest.TCPAck == 0 {
			t.Ack = 0
		}
		cv.send(dir, cv.ip(dir, t), what)
	}
	dname := [2]string{"client", "server"}
	handshake := func() {
		seg(0, nettest.TCPSyn, nxt[0], 0, 0, "SYN")
		nxt[0]++
		if g.chance(10) {
			cv.again(len(cv.out)-1, "SYN retransmitted")
		}
		seg(1, nettest.TCPSyn|nettest.TCPAck, nxt[1], nxt[0], 0, "SYN,ACK")
		nxt[1]++
		if g.chance(8) {
			cv.again(len(cv.out)-1, "SYN,ACK retransmitted")
		}
		seg(0, nettest.TCPAck, nxt[0], nxt[1], 0, "ACK")
	}
	switch k := g.rng.Intn(100); {
	case k < 65:
		handshake()
	case k < 75: // a SYN nobody answers, then data anyway
		seg(0, nettest.TCPSyn, nxt[0], 0, 0, "SYN")
		nxt[0]++
	case k < 88: // picked up mid-stream (nf_conntrack_tcp_loose)
		n := 1 + g.rng.Intn(200)
		seg(0, nettest.TCPAck|nettest.TCPPsh, nxt[0], nxt[1], n, fmt.Sprintf("data %d bytes, no handshake seen", n))
		nxt[0] += uint32(n)
	case k < 94: // the server's half first
		seg(1, nettest.TCPSyn|nettest.TCPAck, nxt[1], nxt[0]+1, 0, "SYN,ACK without SYN")
		nxt[1]++
		nxt[0]++
	default: // the client's SYN, the server's RST
		seg(0, nettest.TCPSyn, nxt[0], 0, 0, "SYN")
		nxt[0]++
		seg(1, nettest.TCPRst|nettest.TCPAck, 0, nxt[0], 0, "RST,ACK refusing it")
	}
	var lastData = -1
	for ev := 3 + g.rng.Intn(7); ev > 0; ev-- {
		d := g.rng.Intn(2)
		switch k := g.rng.Intn(100); {
		case k < 30:
			n := 1 + g.rng.Intn(400)
			seg(d, nettest.TCPAck|nettest.TCPPsh, nxt[d], nxt[1-d], n, fmt.Sprintf("%s data %d bytes", dname[d], n))
			lastData = len(cv.out) - 1
			nxt[d] += uint32(n)
		case k < 40:
			seg(d, nettest.TCPAck, nxt[d], nxt[1-d], 0, dname[d]+" ACK")
		case k < 47 && lastData >= 0:
			cv.again(lastData, "data retransmitted")
		case k < 53:
			n := 1 + g.rng.Intn(100)
			seg(d, nettest.TCPAck|nettest.TCPPsh, nxt[d]+1<<20, nxt[1-d], n, dname[d]+" data far ahead of the window")
		case k < 58:
			seg(d, nettest.TCPAck, nxt[d], nxt[1-d]+1<<20, 0, dname[d]+" ACK of data never sent")
		case k < 62:
			n := 1 + g.rng.Intn(100)
			seg(d, nettest.TCPAck|nettest.TCPPsh, nxt[d]-1<<20, nxt[1-d], n, dname[d]+" data far behind the window")
		case k < 67:
			seg(0, nettest.TCPSyn, nxt[0]+uint32(g.rng.Intn(1<<24)), 0, 0, "SYN on the connection")
		case k < 70:
			seg(1, nettest.TCPSyn|nettest.TCPAck, nxt[1]-1, nxt[0], 0, "SYN,ACK again")
		case k < 75:
			f := pick(g.rng, badFlagSets)
			seg(d, f.flags, nxt[d], nxt[1-d], 0, dname[d]+" "+f.name)
		case k < 80:
			if g.chance(50) {
				seg(d, nettest.TCPRst, nxt[d], 0, 0, dname[d]+" RST in the window")
			} else {
				seg(d, nettest.TCPRst|nettest.TCPAck, nxt[d]+1<<24, nxt[1-d], 0, dname[d]+" RST,ACK out of the window")
			}
		case k < 90: // close
			seg(d, nettest.TCPFin|nettest.TCPAck, nxt[d], nxt[1-d], 0, dname[d]+" FIN,ACK")
			nxt[d]++
			seg(1-d, nettest.TCPAck, nxt[1-d], nxt[d], 0, dname[1-d]+" ACK of FIN")
			if g.chance(70) {
				seg(1-d, nettest.TCPFin|nettest.TCPAck, nxt[1-d], nxt[d], 0, dname[1-d]+" FIN,ACK")
				nxt[1-d]++
				seg(d, nettest.TCPAck, nxt[d], nxt[1-d], 0, dname[d]+" last ACK")
			}
			if g.chance(30) { // reopened (TIME_WAIT)
				nxt[0] += 100000
				handshake()
			}
		default:
			if len(cv.out) > 0 {
				cv.icmpError(g.rng.Intn(len(cv.out)))
			}
		}
	}
}

// udp writes a UDP conversation.
func (cv *conv) udp() {
	cv.kind = "udp"
	g := cv.g
	first := 0
	if g.chance(15) {
		first = 1 // a "reply" first
	}
	for ev := 2 + g.rng.Intn(5); ev > 0; ev-- {
		d := first
		if len(cv.out) > 0 {
			d = g.rng.Intn(2)
		}
		if len(cv.out) == 1 && g.chance(70) {
			d = 1 - cv.dirs[0]
		}
		n := g.rng.Intn(200)
		cv.send(d, cv.ip(d, nettest.UDP{SrcPort: cv.port[d], DstPort: cv.port[1-d], Payload: payload(n)}),
			fmt.Sprintf("%s datagram %d bytes", [2]string{"client", "server"}[d], n))
		cv.maybeError()
	}
	if g.chance(20) { // a "reply" from another port: a new flow
		cv.send(1, cv.ip(1, nettest.UDP{SrcPort: cv.port[1] + 1, DstPort: cv.port[0], Payload: payload(8)}), "datagram from another server port")
	}
}

// echo writes an ICMP echo (or IPv4 timestamp) conversation.
func (cv *conv) echo() {
	cv.kind = "icmp echo"
	g := cv.g
	id := uint16(convICMPIDBase + cv.id)
	req, rep := nettest.ICMPv4EchoRequest, nettest.ICMPv4EchoReply
	if cv.v6 {
		req, rep = nettest.ICMPv6EchoRequest, nettest.ICMPv6EchoReply
	} else if g.chance(15) {
		req, rep = 13, 14 // timestamp
		cv.kind = "icmp timestamp"
	}
	msg := func(dir int, typ uint8, seq uint16, what string) {
		rest := uint32(id)<<16 | uint32(seq)
		var t nettest.Transport = nettest.ICMPv4{Type: typ, Rest: rest, Payload: payload(12 + g.rng.Intn(40))}
		if cv.v6 {
			t = nettest.ICMPv6{Type: typ, Rest: rest, Payload: payload(12 + g.rng.Intn(40))}
		}
		cv.send(dir, cv.ip(dir, t), what)
	}
	seq := uint16(1)
	if g.chance(15) {
		msg(1, rep, seq, "reply without a request")
	}
	for ev := 1 + g.rng.Intn(4); ev > 0; ev-- {
		msg(0, req, seq, fmt.Sprintf("request seq %d", seq))
		if g.chance(85) {
			msg(1, rep, seq, fmt.Sprintf("reply seq %d", seq))
		}
		if g.chance(20) {
			msg(1, rep, seq, fmt.Sprintf("reply seq %d again", seq))
		}
		if g.chance(10) {
			msg(0, rep, seq, "a reply from the requester")
		}
		cv.maybeError()
		seq++
	}
}

// genericProtos are protocols nf_conntrack tracks as generic (SCTP and
// DCCP are by xfw, a documented difference: the kernel has their own
// trackers, left out here, as GRE, which was one).
var genericProtos = []uint8{nettest.ProtoESP, nettest.ProtoAH, 103, 253}

// generic writes a conversation of a protocol without ports.
func (cv *conv) generic() {
	g := cv.g
	proto := pick(g.rng, genericProtos)
	cv.kind = fmt.Sprintf("proto %d", proto)
	for ev := 2 + g.rng.Intn(3); ev > 0; ev-- {
		d := g.rng.Intn(2)
		if len(cv.out) == 0 {
			d = 0
		}
		cv.send(d, cv.ip(d, nettest.Raw{Proto: proto, Data: payload(8 + g.rng.Intn(40))}), [2]string{"client", "server"}[d]+" packet")
	}
}

// strayErrors writes ICMP errors quoting flows nobody opened (INVALID),
// then the flow itself and an error about it (RELATED).
func (cv *conv) strayErrors() {
	cv.kind = "stray icmp errors"
	g := cv.g
	var t nettest.Transport = nettest.UDP{SrcPort: cv.port[0], DstPort: cv.port[1], Payload: payload(20)}
	if g.chance(50) {
		t = nettest.TCP{SrcPort: cv.port[0], DstPort: cv.port[1], Seq: convISNBase, Flags: nettest.TCPSyn, Window: 8192}
	}
	// A packet never sent, quoted: build it as probe, then take it back.
	cv.send(0, cv.ip(0, t), "unsent")
	cv.out = cv.out[:0]
	cv.icmpError(0)
	cv.pkts, cv.dirs = cv.pkts[1:], cv.dirs[1:]
	// Now the flow, and an error about it.
	cv.send(0, cv.ip(0, t), "the flow")
	cv.icmpError(len(cv.out) - 1)
}

// ndp writes IPv6 neighbour discovery between gen and fw (UNTRACKED in
// both), and an echo after it.
func (cv *conv) ndp() {
	cv.kind = "ndp"
	p := cv.g.plan
	cv.label = "gen and fw"
	cv.addr = [2]netip.Addr{netip.MustParseAddr("fe80::1"), p.FwIn}
	cv.from = [2]Origin{FromGen, FromFw}
	cv.path = [2]Path{PathInput, PathOutput}
	target := p.FwIn.As16()
	opt := append([]byte{1, 1}, p.GenMAC...)
	ns := nettest.ICMPv6{Type: 135, Payload: append(target[:], opt...)}
	sol := p.Joined[2]
	pkt := nettest.IPv6{Src: cv.addr[0], Dst: sol, HopLimit: 255}.Packet(ns)
	pr := Probe{From: FromGen, Path: PathInput, KeepL4: true, Note: fmt.Sprintf("conversation %d (ndp) #1: neighbour solicitation", cv.id)}
	pr.Frames = [][]byte{nettest.Ethernet{Src: p.GenMAC, Dst: multicastMAC(sol)}.Frame(pkt)}
	cv.out, cv.pkts, cv.dirs = append(cv.out, pr), append(cv.pkts, pkt), append(cv.dirs, 0)
	src := p.Gen.As16()
	na := nettest.ICMPv6{Type: 136, Rest: 0x60000000, Payload: append(src[:], 2, 1, p.GenMAC[0], p.GenMAC[1], p.GenMAC[2], p.GenMAC[3], p.GenMAC[4], p.GenMAC[5])}
	cv.send(0, nettest.IPv6{Src: p.Gen, Dst: p.FwIn, HopLimit: 255}.Packet(na), "neighbour advertisement")
	rs := nettest.ICMPv6{Type: 133, Payload: []byte{1, 1, p.GenMAC[0], p.GenMAC[1], p.GenMAC[2], p.GenMAC[3], p.GenMAC[4], p.GenMAC[5]}}
	cv.send(0, nettest.IPv6{Src: cv.addr[0], Dst: p.FwIn, HopLimit: 255}.Packet(rs), "router solicitation")
}
