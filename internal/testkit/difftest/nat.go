package difftest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"

	"strings"

	"github.com/xfw-dev/xfw/internal/ir"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file holds what the tester does differently for a ruleset with a
// nat table: both firewalls translate, so a probe's copies may arrive at
// sink, gen or fw's sockets with other addresses and ports than it was
// sent with; both connection tables start empty; the counters of both
// tables are compared.

// HasNATTable reports whether iptables-restore text ruleset has a "*nat"
// table.
func HasNATTable(ruleset string) bool {
	for _, l := range strings.Split(ruleset, "\n") {
		if strings.TrimSpace(l) == "*nat" {
			return true
		}
	}
	return false
}

// savedTables are the tables whose rules and counters a run compares: the
// filter table, and the nat table first when the ruleset has one.
func (s *Session) savedTables() []string {
	if s.nat {
		return []string{"nat", "filter"}
	}
	return []string{"filter"}
}

// translatedCopy reports whether event e, which no candidate attributed by
// its addresses, is probe p translated: a copy (or the packet an ICMP
// error quotes, or a RST or echo reply answering it) with the probe's
// marker and protocol, whose addresses a nat rule may have changed. For a
// copy the IP packet's length must be the probe's too (translation keeps
// it): a packet of fw's own stack whose identification happens to equal a
// marker is not taken for a probe.
func translatedCopy(e event, cand candidate, p Probe) bool {
	if len(p.Frames) == 0 || (e.pkt == nil && e.kind != evLog) {
		return false
	}
	sent := p.decode(p.Frames[0])
	if sent == nil || sent.Fragment {
		return false
	}
	if e.kind == evLog {
		return translatedLogLine(e.line, cand.rel, sent, len(p.Frames))
	}
	switch cand.rel {
	case relCopy:
		return e.pkt.Protocol == sent.Protocol && l3Len(e.pkt) == l3Len(sent) && len(p.Frames) == 1
	case relQuote:
		return e.pkt.Inner != nil && e.pkt.Inner.Protocol == sent.Protocol
	default:
		return e.pkt.Protocol == sent.Protocol || isICMP(e.pkt.Protocol) && isICMP(sent.Protocol)
	}
}

// translatedLogLine is translatedCopy for a LOG line: the packet it
// prints (or the one it quotes, for rel relQuote) has the protocol of the
// probe sent and, for a copy, its length. (A LOG rule after a translation
// prints the packet as translated: its addresses are not the probe's.)
func translatedLogLine(line string, rel relation, sent *nettest.Packet, frames int) bool {
	in := strings.Index(line, "IN=")
	if in < 0 {
		return false
	}
	outer, inner := line[in:], ""
	if i := strings.IndexByte(outer, '['); i >= 0 {
		outer, inner = outer[:i], outer[i:]
	}
	switch rel {
	case relCopy:
		proto, ok := logProtocol(outer)
		n, okLen := logLength(outer)
		return ok && okLen && proto == sent.Protocol && n == l3Len(sent) && frames == 1
	case relQuote:
		proto, ok := logProtocol(inner)
		return ok && proto == sent.Protocol
	default:
		proto, ok := logProtocol(outer)
		return ok && (proto == sent.Protocol || isICMP(proto) && isICMP(sent.Protocol))
	}
}

// Fields of a LOG line's packet: its IP length (the first LEN=, the
// transport's follows) and its protocol, by name or number
// (nf_log_syslog.c).
var (
	logLenRe   = regexp.MustCompile(`\bLEN=(\d+) `)
	logProtoRe = regexp.MustCompile(`\bPROTO=(\w+) `)
)

// logProtoNames are the protocols a LOG line names rather than numbers.
var logProtoNames = map[string]uint8{
	"TCP": 6, "UDP": 17, "UDPLITE": 136, "ICMP": nettest.ProtoICMP, "ICMPv6": nettest.ProtoICMPv6,
	"AH": 51, "ESP": 50,
}

// logProtocol returns the protocol of the packet LOG text s prints.
func logProtocol(s string) (uint8, bool) {
	m := logProtoRe.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	if p, ok := logProtoNames[m[1]]; ok {
		return p, true
	}
	n, err := strconv.ParseUint(m[1], 10, 8)
	return uint8(n), err == nil
}

// logLength returns the IP length of the packet LOG text s prints.
func logLength(s string) (int, bool) {
	m := logLenRe.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// isICMP reports whether proto is ICMP or ICMPv6.
func isICMP(proto uint8) bool {
	return proto == nettest.ProtoICMP || proto == nettest.ProtoICMPv6
}

// attribute returns the probe event e belongs to and how: the first
// candidate whose marker and addresses are a probe's; with a nat table
// loaded, failing that, the first whose marker is a probe's that e may be
// a translation of (translatedCopy).
func (s *Session) attribute(e event, c *Corpus, byMarker map[uint32]int) (int, relation, bool) {
	for _, cand := range e.cands {
		pi, ok := byMarker[cand.marker]
		if !ok || cand.marker == 0 {
			continue
		}
		if src, dst := c.Probes[pi].addrs(); cand.src == src && cand.dst == dst {
			return pi, cand.rel, true
		}
	}
	if !s.nat {
		return 0, 0, false
	}
	for _, cand := range e.cands {
		pi, ok := byMarker[cand.marker]
		if ok && cand.marker != 0 && translatedCopy(e, cand, c.Probes[pi]) {
			return pi, cand.rel, true
		}
	}
	return 0, 0, false
}

// clearNAT empties a side's nat table (the rules and user chains an
// earlier ruleset left: iptables-restore replaces only the tables its text
// names). The empty table stays, in the kernel and in xfw (which then
// tracks connections): a session checks rulesets without a nat table
// before those with one (tests/difftest TestRealisticRulesets).
func (s *Session) clearNAT(sd *side) error {
	prog := "iptables"
	if s.cfg.Family == ir.IPv6 {
		prog = "ip6tables"
	}
	for _, op := range []string{"-F", "-X"} {
		argv := []string{prog + "-legacy", "-w", "-t", "nat", op}
		if !sd.kernel {
			argv = []string{s.cfg.XFW, prog, "-w", "-t", "nat", op}
		}
		if res, err := nettest.ExecTimeout(toolTimeout, sd.topo.FwNS, argv...); err != nil {
			return fmt.Errorf("%s: nat %s: %v %s", sd.name, op, err, res.Stderr)
		}
	}
	return nil
}

// answerTTL is the TTL of sink's answers.
const answerTTL = 64

// Offsets in the IPv6 header turnAround writes.
const (
	ipv6HopLimitOffset = 7
	ipv6SrcOffset      = 8
	ipv6DstOffset      = 24
	ipv6AddrLen        = 16
)

// answerSeq is the sequence number of sink's TCP answers (the marker is in
// the IPv4 identification: answers keep their transport header).
const answerSeq = 0x5eed0000

// answerFrames returns the frame of answer probe k on side sd: the copy
// the other end (sink, or gen) received there of the probe it answers, turned around (MACs,
// addresses and ports swapped; a TCP SYN answered by SYN,ACK, anything
// else by ACK, acknowledging what it carried), marked with k's marker; or
// nothing when sink received no copy.
func (s *Session) answerFrames(sd *side, c *Corpus, probes []markedProbe, k int) [][]byte {
	orig := answeredProbe(c, k)
	if orig < 0 || probes[orig].marker == 0 || probes[k].marker == 0 {
		return nil
	}
	events, _ := sd.log.snapshot()
	osrc, odst := c.Probes[orig].addrs()
	at := evSink
	if c.Probes[k].From == FromGen {
		at = evGen
	}
	for _, e := range events {
		if e.kind != at || e.l3 < 0 {
			continue
		}
		for _, cand := range e.cands {
			if cand.rel != relCopy || cand.marker != probes[orig].marker {
				continue
			}
			if cand.src == osrc && cand.dst == odst || translatedCopy(e, cand, c.Probes[orig]) {
				if b := turnAround(e.pkt.Raw, e.l3); b != nil && setMarker(b, e.l3, probes[k].marker, true) {
					return [][]byte{b}
				}
				return nil
			}
		}
	}
	return nil
}

// answeredProbe returns the earlier probe from the other end that answer
// probe k answers:
// the first whose addresses and ports its frame reverses, or -1.
func answeredProbe(c *Corpus, k int) int {
	if len(c.Probes[k].Frames) == 0 {
		return -1
	}
	a := c.Probes[k].decode(c.Probes[k].Frames[0])
	if a == nil {
		return -1
	}
	for j := 0; j < k; j++ {
		p := c.Probes[j]
		if p.From == c.Probes[k].From || p.Answer || len(p.Frames) != 1 || p.Step >= c.Probes[k].Step {
			continue
		}
		o := p.decode(p.Frames[0])
		if o != nil && o.Protocol == a.Protocol && o.Src == a.Dst && o.Dst == a.Src &&
			o.SrcPort == a.DstPort && o.DstPort == a.SrcPort {
			return j
		}
	}
	return -1
}

// turnAround returns the Ethernet frame raw (IPv4 or IPv6 at l3, TCP or
// UDP) turned into its answer, or nil when it is not one to answer.
func turnAround(raw []byte, l3 int) []byte {
	b := append([]byte(nil), raw...)
	proto, off, ok := transport(b, l3)
	if !ok {
		return nil
	}
	v6 := b[l3]>>4 == 6
	if v6 && (len(b) < l3+ipv6HeaderLen || b[l3+6] != proto) || !v6 && (len(b) < l3+ipv4HeaderLen || b[l3]>>4 != 4) {
		// (IPv6: no extension headers, which an answer would repeat.)
		return nil
	}
	hdr := 8
	if proto == nettest.ProtoTCP {
		hdr = tcpHeaderLen
	} else if proto != nettest.ProtoUDP {
		return nil
	}
	if len(b) < off+hdr {
		return nil
	}
	var mac [6]byte
	copy(mac[:], b[0:6])
	copy(b[0:6], b[6:12])
	copy(b[6:12], mac[:])
	// Swapping two words keeps every checksum over them.
	swap := func(x, y, n int) {
		for i := 0; i < n; i++ {
			b[x+i], b[y+i] = b[y+i], b[x+i]
		}
	}
	var payload int
	if v6 {
		swap(l3+ipv6SrcOffset, l3+ipv6DstOffset, ipv6AddrLen)
		b[l3+ipv6HopLimitOffset] = answerTTL // no header checksum
		payload = int(binary.BigEndian.Uint16(b[l3+4:])) - (off - l3 - ipv6HeaderLen)
	} else {
		swap(l3+12, l3+16, 4)
		ttlProto := binary.BigEndian.Uint16(b[l3+8:])
		put16(b, l3+8, answerTTL<<8|ttlProto&0xff, l3+10)
		payload = int(binary.BigEndian.Uint16(b[l3+2:])) - (off - l3)
	}
	swap(off, off+2, 2)
	if proto == nettest.ProtoTCP {
		seq := binary.BigEndian.Uint32(b[off+4:])
		flags := b[off+13]
		payload -= int(b[off+12]>>4) * 4
		ack := seq + uint32(max(payload, 0))
		newFlags := uint8(0x10)                 // ACK
		if flags&0x02 != 0 && flags&0x10 == 0 { // SYN: SYN,ACK
			newFlags, ack = 0x12, ack+1
		}
		if flags&0x01 != 0 { // FIN takes a sequence number too
			ack++
		}
		put32(b, off+4, answerSeq, off+16)
		put32(b, off+8, ack, off+16)
		put16(b, off+12, uint16(b[off+12])<<8|uint16(newFlags), off+16)
	}
	return b
}

// natUnrouted reports whether a probe from gen or sink has a martian
// source (IPv6: a link-local one, or the subnet-router anycast address of
// one of fw's links), is sent to a group MAC, or goes to a destination fw has no route
// to (a loopback address from outside included): the kernel's nat PREROUTING translates it before routing,
// where xfw passes it untranslated to the stack, which drops it (a
// documented difference: docs/differences.md "Tables"). Left out of nat
// rulesets' packets, as are those stackErrorProbe names (the kernel
// counts them in PREROUTING before dropping them, xfw does not: the same
// section).
func natUnrouted(p Probe, plan Plan) bool {
	if p.From == FromFw {
		return false
	}
	src, dst := p.addrs()
	if !dst.IsValid() || !src.IsValid() {
		return false
	}
	if len(p.Frames[0]) > 0 && p.Frames[0][0]&1 != 0 {
		// A group destination MAC: the kernel counts the packet in
		// PREROUTING and drops it before forwarding (not for this host).
		return true
	}
	martian := src.IsLoopback() || src.IsUnspecified() || src.IsMulticast() || src == netip.AddrFrom4([4]byte{255, 255, 255, 255}) ||
		slices.Contains(plan.FwAddrs(), src)
	if subnetAnycast(plan, src) {
		// fw's subnet-router anycast address: an answer to it is fw's,
		// whose stack answers with an error about a translated packet
		// (difftest nat6 seed 21).
		return true
	}
	if src.Is6() && src.IsLinkLocalUnicast() {
		// Not forwarded: to fw's own address a DNAT may send it on,
		// and fw's stack answers "beyond scope of source address"
		// quoting the translated packet (the kernel's quote is
		// translated back; docs/differences.md "Tables": errors the host
		// itself sends about a translated packet; difftest nat6 seed 5).
		return true
	}
	return martian || dst.IsLoopback() || !dst.IsMulticast() && !plan.isLocal(dst) && plan.via(dst) == ""
}

// uniqueSourcePort gives a TCP or UDP probe whose source port an earlier
// probe of seen used (any addresses) an unused one from next on, its
// checksum adjusted: no two connections of a nat corpus share a source
// port, so no translation maps two of them to the same tuple (the kernel
// then picks another source port at random; so does xfw, except in nat
// OUTPUT, where it drops the packet: docs/differences.md "Tables"). fw's
// own probes too: two of them from one port to two destinations nat
// OUTPUT translates to one. Translated ports still clash in SNAT port
// ranges and with --random (compared in their range: maskRandomPorts).
func uniqueSourcePort(p Probe, seen map[uint16]bool, next *uint16) {
	sport, ok := probeSourcePort(p)
	if !ok {
		return
	}
	if !seen[sport] {
		seen[sport] = true
		return
	}
	for seen[*next] {
		*next++
	}
	setSourcePort(p, *next)
	seen[*next] = true
}

// uniqueBurstPorts is uniqueSourcePort for the rate bursts
// (packetgen_rate.go): the packets of one burst key (a source address and
// port, a destination and port) keep one source port between them, a new one when
// an earlier probe or key used theirs (difftest nat6 seed 5: two keys'
// bursts, or two rules' bursts, DNATed and masqueraded to one tuple, and
// the ports picked after the clash differed).
func uniqueBurstPorts(bursts []Probe, seen map[uint16]bool, next *uint16) {
	type key struct {
		src, dst    netip.Addr
		sport, port uint16
	}
	given := map[key]uint16{}
	for _, p := range bursts {
		sport, ok := probeSourcePort(p)
		if !ok {
			continue
		}
		src, dst := p.addrs()
		o := p.decode(p.Frames[0])
		if o == nil {
			continue
		}
		k := key{src, dst, sport, o.DstPort}
		if port, done := given[k]; done {
			setSourcePort(p, port)
			continue
		}
		uniqueSourcePort(p, seen, next)
		given[k], _ = probeSourcePort(p)
	}
}

// probeSourcePort returns the TCP or UDP source port of a single-frame
// probe.
func probeSourcePort(p Probe) (uint16, bool) {
	if len(p.Frames) != 1 {
		return 0, false
	}
	b := p.Frames[0]
	l3 := 0
	if p.From != FromFw {
		l3 = l3Offset(b)
	}
	proto, off, ok := transport(b, l3)
	if !ok || proto != nettest.ProtoTCP && proto != nettest.ProtoUDP || len(b) < off+8 {
		return 0, false
	}
	return binary.BigEndian.Uint16(b[off:]), true
}

// setSourcePort writes port as the TCP or UDP source port of a
// single-frame probe, its checksum adjusted.
func setSourcePort(p Probe, port uint16) {
	b := p.Frames[0]
	l3 := 0
	if p.From != FromFw {
		l3 = l3Offset(b)
	}
	proto, off, ok := transport(b, l3)
	if !ok || len(b) < off+8 {
		return
	}
	csum := off + 16
	if proto == nettest.ProtoUDP {
		csum = off + 6
		if binary.BigEndian.Uint16(b[csum:]) == 0 {
			csum = -1 // no checksum
		}
	}
	if len(b) < off+tcpHeaderLen && proto == nettest.ProtoTCP {
		csum = -1
	}
	put16(b, off, port, csum)
}

// firstFreePort is where uniqueSourcePort starts looking for unused
// source ports.
const firstFreePort = 20000

// answerShare is the share (percent) of forwarded TCP and UDP probes from
// gen that sink answers in nat rulesets' corpora.
const answerShare = 40

// answers returns the answers (Probe.Answer, step 1) to a share of the
// single-frame TCP and UDP probes from gen or sink whose source fw routes
// back there, sent from the other end, and to a share of fw's own TCP
// probes (fwAnswer); none whose source port a probe used as its own
// (sports, uniqueSourcePort's): an answer is a new connection when it
// opens none, and DNATed onto that probe's tuple it would clash (another
// source port, each side's own: difftest nat6 seed 22).
func answers(g *pgen, probes []Probe, sports map[uint16]bool) []Probe {
	var out []Probe
	for _, p := range probes {
		if len(p.Frames) != 1 || !g.chance(answerShare) {
			continue
		}
		if p.From == FromFw {
			if a, ok := fwAnswer(g, p); ok && !answerPortUsed(a, sports) {
				out = append(out, a)
			}
			continue
		}
		o := p.decode(p.Frames[0])
		if o == nil || o.Fragment || o.Protocol != nettest.ProtoTCP && o.Protocol != nettest.ProtoUDP ||
			g.plan.via(o.Src) != p.From || g.plan.VLANNet.Contains(o.Src) {
			// (An answer fw has no route for is dropped before any
			// chain, where the kernel counts it in PREROUTING; the
			// VLAN's prefix has none when the kernel has no VLAN
			// devices, as stackErrorProbe says: difftest nat6 seed 9.)
			continue
		}
		b := turnAround(p.Frames[0], l3Offset(p.Frames[0]))
		if b == nil {
			continue
		}
		// Without translation the answer comes from the other end.
		from, fwMAC, endMAC := FromSink, g.plan.FwOutMAC, g.plan.SinkMAC
		if p.From == FromSink {
			from, fwMAC, endMAC = FromGen, g.plan.FwInMAC, g.plan.GenMAC
		}
		copy(b[0:6], fwMAC)
		copy(b[6:12], endMAC)
		a := Probe{From: from, Path: PathForward, Frames: [][]byte{b}, Step: 1, KeepL4: true, Answer: true,
			Note: fmt.Sprintf("%s's answer to %s", from, p.Note)}
		if !answerPortUsed(a, sports) {
			out = append(out, a)
		}
	}
	return out
}

// answerPortUsed reports whether answer a's source port is one a probe
// used as its own.
func answerPortUsed(a Probe, sports map[uint16]bool) bool {
	port, ok := probeSourcePort(a)
	return ok && sports[port]
}

// fwAnswer returns the answer to probe p, fw's own TCP packet from one of
// its interfaces' addresses: sent from the end fw routes p's destination
// to (gen or sink), built there from the copy that arrived (after nat
// OUTPUT's DNAT or REDIRECT), so that the answer comes back to fw
// translated in reverse. fw's stack answers it in turn (a RST: no socket
// holds the connection), in the connection's original direction. UDP is
// not answered: fw's "port unreachable" about a translated packet is not
// translated back by xfw (docs/differences.md "Tables"); nor probes with
// IPv4 options (turned around, fw's stack answers their answer with a
// parameter problem quoting a port an SNAT picked at random). An answer from
// the other end than the copy reached is not sent (answerFrames).
func fwAnswer(g *pgen, p Probe) (Probe, bool) {
	o := p.decode(p.Frames[0])
	if o == nil || o.Fragment || o.Protocol != nettest.ProtoTCP || len(o.IPv4Options) > 0 || len(o.ExtHeaders) > 0 ||
		o.Src != g.plan.FwIn && o.Src != g.plan.FwOut {
		return Probe{}, false
	}
	from, fwMAC, endMAC := FromSink, g.plan.FwOutMAC, g.plan.SinkMAC
	switch g.plan.via(o.Dst) {
	case FromGen:
		from, fwMAC, endMAC = FromGen, g.plan.FwInMAC, g.plan.GenMAC
	case FromSink:
	default:
		return Probe{}, false
	}
	b := turnAround(nettest.Ethernet{Dst: endMAC, Src: fwMAC}.Frame(p.Frames[0]), ethHeaderLen)
	if b == nil {
		return Probe{}, false
	}
	return Probe{From: from, Path: PathInput, Frames: [][]byte{b}, Step: 1, KeepL4: true, Answer: true,
		Note: fmt.Sprintf("%s's answer to fw's %s", from, p.Note)}, true
}

// sourceNATRe matches a source translation's target.
var sourceNATRe = regexp.MustCompile(`-j (SNAT|MASQUERADE)\b`)

// natLoopback reports whether a probe is fw's own packet to itself (its
// subnet-router anycast addresses too) while
// ruleset translates sources: the kernel translates loopback traffic,
// xfw drops it (documented: docs/differences.md "Tables"). Left out of
// such rulesets' packets.
func natLoopback(p Probe, plan Plan, ruleset string) bool {
	if p.From != FromFw || !sourceNATRe.MatchString(ruleset) {
		return false
	}
	_, dst := p.addrs()
	return plan.isLocal(dst) || subnetAnycast(plan, dst)
}

// natOutputToFw reports whether a probe is fw's own TCP segment to
// another host's address while nat OUTPUT may send it to fw itself (a
// REDIRECT, or a DNAT whose addresses hold one of fw's): xfw sends the
// translated segment to the stack through loopback, where the kernel's
// route after nat OUTPUT is local. Documented (docs/differences.md
// "Tables"): in IPv4 that route through loopback is not the kernel's
// local one, so no RST answers a segment no socket takes (the kernel's
// does; difftest nat seed 17); and when the ruleset translates sources,
// the packet then meets the loopback SNAT xfw drops (seed 105). Left
// out of such rulesets' packets.
func natOutputToFw(p Probe, plan Plan, ruleset string) bool {
	if p.From != FromFw || len(p.Frames) == 0 {
		return false
	}
	if sent := p.decode(p.Frames[0]); sent == nil || sent.Protocol != nettest.ProtoTCP {
		return false
	}
	if plan.Family == ir.IPv6 && !sourceNATRe.MatchString(ruleset) {
		return false
	}
	_, dst := p.addrs()
	return !plan.isLocal(dst) && natOutputMayReachFw(ruleset, plan)
}

// natOutputTooBig reports whether a probe is fw's own packet longer than
// the MTU towards sink (outMTU) while nat OUTPUT may translate its
// destination: routed again to sink's link, the kernel fragments it, xfw
// sends it whole where the device takes it (a veth a few bytes over its
// MTU) or drops it (documented: docs/differences.md "Tables"; difftest
// nat seed 203). Left out of such rulesets' packets.
func natOutputTooBig(p Probe, ruleset string) bool {
	if p.From != FromFw || len(p.Frames) == 0 || len(p.Frames[0]) <= outMTU {
		return false
	}
	return natOutputDNATs(ruleset)
}

// natOutputDNATs reports whether the nat table of ruleset has a DNAT or
// REDIRECT outside PREROUTING.
func natOutputDNATs(ruleset string) bool {
	inNAT := false
	for _, l := range strings.Split(ruleset, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "*"):
			inNAT = l == "*nat"
		case inNAT && strings.HasPrefix(l, "-A ") && !strings.HasPrefix(l, "-A PREROUTING ") &&
			(strings.Contains(l, "-j DNAT") || strings.Contains(l, "-j REDIRECT")):
			return true
		}
	}
	return false
}

// natDNATToRe matches a DNAT's destination: an address or range, IPv6's
// in brackets when ports follow, or ports alone.
var natDNATToRe = regexp.MustCompile(`--to-destination (\S+)`)

// natOutputMayReachFw reports whether the nat table of ruleset has a
// rule outside PREROUTING (nat OUTPUT's or a chain it may jump to) that
// REDIRECTs or DNATs to an address range holding one of fw's addresses.
func natOutputMayReachFw(ruleset string, plan Plan) bool {
	inNAT := false
	for _, l := range strings.Split(ruleset, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "*"):
			inNAT = l == "*nat"
		case !inNAT || !strings.HasPrefix(l, "-A ") || strings.HasPrefix(l, "-A PREROUTING "):
		case strings.Contains(l, "-j REDIRECT"):
			return true
		case strings.Contains(l, "-j DNAT"):
			if m := natDNATToRe.FindStringSubmatch(l); m != nil && dnatHoldsFw(m[1], plan) {
				return true
			}
		}
	}
	return false
}

// dnatHoldsFw reports whether DNAT destination to (as iptables-save
// prints it) names an address range holding one of fw's addresses. Ports
// alone keep the destination.
func dnatHoldsFw(to string, plan Plan) bool {
	lo, hi, ok := dnatAddrRange(to, plan)
	if !ok {
		return false
	}
	for _, a := range plan.FwAddrs() {
		if a.Compare(lo) >= 0 && a.Compare(hi) <= 0 {
			return true
		}
	}
	return false
}

// dnatAddrRange returns the first and last address of DNAT destination
// to (as iptables-save prints it), or false for ports alone (the
// destination kept) or a form it cannot read.
func dnatAddrRange(to string, plan Plan) (lo, hi netip.Addr, ok bool) {
	addrs := to
	switch {
	case strings.HasPrefix(to, ":"):
		return lo, hi, false
	case strings.HasPrefix(to, "["):
		addrs = strings.TrimPrefix(to[:max(strings.IndexByte(to, ']'), 1)], "[")
	case plan.Family == ir.IPv4:
		addrs, _, _ = strings.Cut(to, ":")
	}
	loText, hiText, isRange := strings.Cut(addrs, "-")
	if !isRange {
		hiText = loText
	}
	lo, err1 := netip.ParseAddr(loText)
	hi, err2 := netip.ParseAddr(hiText)
	return lo, hi, err1 == nil && err2 == nil
}

// subnetAnycast reports whether a is the IPv6 subnet-router anycast
// address of one of fw's links (fw's own, as its stack answers it; a
// forwarding host joins it; difftest nat6 seeds 21 and 22).
func subnetAnycast(plan Plan, a netip.Addr) bool {
	for _, n := range []netip.Prefix{plan.GenNet, plan.SinkNet, plan.VLANNet} {
		if a.Is6() && a == n.Masked().Addr() {
			return true
		}
	}
	return false
}

// natEchoClash reports whether a probe is an ICMP echo request to a
// destination an earlier one from another source went to (seen: the first
// source by destination, updated). Every probe's echo identifier is 0
// (the marker is in the sequence number), so translated to one source two
// such requests clash: the kernel picks another identifier, xfw drops the
// request (documented: docs/differences.md "Tables"). A request to one
// of fw's own addresses counts as that address's request to its source
// too: a later one to that source masqueraded to that address takes the
// reply tuple of the first (difftest nat6 seed 9). Left out of nat
// rulesets' packets.
//
// With rules translating echo requests' destinations (dnats:
// natEchoDNATs), a request goes to the addresses a rule that may match it
// translates to as well as to its own destination: two requests from
// different sources sent to one address by a DNAT (or one sent there and
// one addressed to it) clash the same way once an SNAT gives them one
// source (difftest nat6 seed 48: sink's request to a far address and
// gen's to sink, both DNATed or addressed to sink, SNATed into one
// range). And a request from a source an earlier one came from to
// another destination is left out too: translated to one destination,
// the two clash the same way (bySrc: the first destination by source,
// updated).
func natEchoClash(p Probe, plan Plan, seen map[netip.Addr]netip.Addr, dnats []echoDNAT, bySrc map[netip.Addr]netip.Addr) bool {
	if len(p.Frames) == 0 {
		return false
	}
	o := p.decode(p.Frames[0])
	if o == nil || !(o.Protocol == nettest.ProtoICMP && o.ICMPType == nettest.ICMPv4EchoRequest ||
		o.Protocol == nettest.ProtoICMPv6 && o.ICMPType == nettest.ICMPv6EchoRequest) {
		return false
	}
	if len(dnats) > 0 {
		if first, ok := bySrc[o.Src]; ok && first != o.Dst {
			return true
		}
		bySrc[o.Src] = o.Dst
	}
	dsts := []netip.Addr{o.Dst}
	for _, d := range dnats {
		if d.output == (p.From == FromFw) && d.src.allows(o.Src) && d.dst.allows(o.Dst) {
			dsts = append(dsts, d.to...)
		}
	}
	for _, dst := range dsts {
		if first, ok := seen[dst]; ok && first != o.Src {
			return true
		}
	}
	for _, dst := range dsts {
		if _, ok := seen[dst]; !ok {
			seen[dst] = o.Src
		}
	}
	if _, ok := seen[o.Src]; !ok && slices.Contains(plan.FwAddrs(), o.Dst) {
		seen[o.Src] = o.Dst
	}
	return false
}

// echoDNAT is a nat rule that may translate an echo request's
// destination (natEchoDNATs): in nat OUTPUT (fw's own requests) or
// PREROUTING, its address conditions, and the addresses it may translate
// to (every address of a range; fw's own for a REDIRECT).
type echoDNAT struct {
	output   bool
	src, dst addrCond
	to       []netip.Addr
}

// addrCond is a rule's -s or -d condition: set when the rule has one
// this package can read (else it may match any address).
type addrCond struct {
	set, neg bool
	prefix   netip.Prefix
}

// allows reports whether address a may meet the condition.
func (c addrCond) allows(a netip.Addr) bool {
	return !c.set || c.prefix.Contains(a) != c.neg
}

// maxEchoDNATAddrs bounds the addresses of one DNAT range natEchoDNATs
// lists (the generated ranges hold a few).
const maxEchoDNATAddrs = 256

// natEchoDNATs returns the ruleset's nat PREROUTING and OUTPUT rules
// that may translate an echo request's destination: a DNAT or REDIRECT
// not restricted to TCP or UDP.
func natEchoDNATs(ruleset string, plan Plan) []echoDNAT {
	var out []echoDNAT
	inNAT := false
	for _, l := range strings.Split(ruleset, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "*") {
			inNAT = l == "*nat"
			continue
		}
		if !inNAT || !dnatRe.MatchString(l) || strings.Contains(l, " -p tcp") || strings.Contains(l, " -p udp") {
			continue
		}
		d := echoDNAT{output: strings.HasPrefix(l, "-A OUTPUT ")}
		if !d.output && !strings.HasPrefix(l, "-A PREROUTING ") {
			continue
		}
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			neg := i > 0 && f[i-1] == "!"
			switch f[i] {
			case "-s", "--source", "--src":
				d.src = parseAddrCond(f[i+1], neg)
			case "-d", "--destination", "--dst":
				d.dst = parseAddrCond(f[i+1], neg)
			}
		}
		if strings.Contains(l, "-j REDIRECT") {
			d.to = plan.FwAddrs()
		} else if m := natDNATToRe.FindStringSubmatch(l); m != nil {
			lo, hi, ok := dnatAddrRange(m[1], plan)
			if !ok {
				continue // ports alone: the destination is kept
			}
			for a := lo; a.IsValid() && a.Compare(hi) <= 0 && len(d.to) < maxEchoDNATAddrs; a = a.Next() {
				d.to = append(d.to, a)
			}
		}
		out = append(out, d)
	}
	return out
}

// parseAddrCond reads a -s or -d value (an address or a prefix); a form
// it cannot read (a non-contiguous mask) leaves the condition unset.
func parseAddrCond(v string, neg bool) addrCond {
	if pfx, err := netip.ParsePrefix(v); err == nil {
		return addrCond{set: true, neg: neg, prefix: pfx.Masked()}
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return addrCond{set: true, neg: neg, prefix: netip.PrefixFrom(a, a.BitLen())}
	}
	return addrCond{}
}

// dnatRe finds a destination translation's target.
var dnatRe = regexp.MustCompile(`-j (DNAT|REDIRECT)\b`)

// flowEnds are a probe's protocol, addresses and (TCP, UDP) ports.
type flowEnds struct {
	proto      uint8
	src, dst   netip.Addr
	sport, dpt uint16
}

// natReverse reports whether a probe goes the other way of an earlier
// one's flow (seen: the earlier probes' flows, updated) while ruleset
// translates sources: the reverse of a connection an SNAT or MASQUERADE
// translated, sent to its original source rather than to the translated
// one. The kernel finds no connection for it (a new one, whose reply
// tuple clashes with the translated connection's: another source port,
// or INVALID for an echo reply, or dropped); xfw, which keys a connection
// by its original tuple, takes it for the connection's reply
// (documented: docs/differences.md "Tables"; difftest nat6 seed 2). Left
// out of such rulesets' packets; the far end's answers (answers) come to
// the translated source.
func natReverse(p Probe, ruleset string, seen map[flowEnds]bool) bool {
	if len(p.Frames) == 0 || !sourceNATRe.MatchString(ruleset) {
		return false
	}
	o := p.decode(p.Frames[0])
	if o == nil || !o.Src.IsValid() {
		return false
	}
	f := flowEnds{proto: o.Protocol, src: o.Src, dst: o.Dst}
	if o.Protocol == nettest.ProtoTCP || o.Protocol == nettest.ProtoUDP {
		f.sport, f.dpt = o.SrcPort, o.DstPort
	}
	seen[f] = true
	return seen[flowEnds{proto: f.proto, src: f.dst, dst: f.src, sport: f.dpt, dpt: f.sport}]
}

// natQuery reports whether a probe is of a protocol whose translation
// differs in documented ways (docs/differences.md "Tables"): the ICMP
// queries other than echo (timestamp, information, address mask), which
// xfw drops when it translates them, and UDP-Lite, which the kernel's
// tracker finds INVALID when its checksum is right (it verifies it
// against UDP's pseudo-header) and so never translates. Left out of nat
// rulesets' packets (SCTP and DCCP are left out of every stateful corpus).
func natQuery(p Probe) bool {
	if len(p.Frames) == 0 {
		return false
	}
	o := p.decode(p.Frames[0])
	if o == nil {
		return false
	}
	switch o.Protocol {
	case protoUDPLite:
		return true
	case nettest.ProtoICMP:
		return o.ICMPType == icmpTimestamp || o.ICMPType == icmpInfoRequest || o.ICMPType == icmpAddressMask
	case nettest.ProtoICMPv6:
		// The informational messages but echo (node information
		// queries, neighbour discovery, MLD); errors are kept.
		return o.ICMPType >= icmpv6Informational && o.ICMPType != nettest.ICMPv6EchoRequest && o.ICMPType != nettest.ICMPv6EchoReply
	}
	return false
}

// Protocol and ICMP type numbers natQuery leaves out.
const (
	protoUDPLite    = 136
	icmpTimestamp   = 13
	icmpInfoRequest = 15
	icmpAddressMask = 17
	// icmpv6Informational is the first ICMPv6 informational type (RFC
	// 4443: the types below are errors).
	icmpv6Informational = 128
)

// randomPorts are the translated ports a nat ruleset may pick at random
// (after a clash in an SNAT or MASQUERADE port range, or with --random,
// --random-fully): the kernel's choice and xfw's differ (both uniform over
// the range), so such ports are compared as within a range of the
// ruleset's targets only.
type randomPorts struct {
	ranges [][2]uint16
	// any: a random target without ports (any port of the class the
	// kernel keeps is possible).
	any bool
}

// natTargetRe matches a nat rule's target and its options.
var natTargetRe = regexp.MustCompile(`-j (SNAT|MASQUERADE|DNAT|REDIRECT)\b(.*)$`)

// natPortRe matches a port or port range of --to-source,
// --to-destination ("ADDR:PORT[-PORT]", IPv6 "[ADDR]:PORT[-PORT]", a
// shifted map's "/BASE" after it) or --to-ports ("PORT[-PORT]"); not the
// last group of an IPv6 address without brackets (difftest nat6 seed 20:
// "--to-source fd00:X:2::1 --random-fully" read as port 1).
var natPortRe = regexp.MustCompile(`(?:--to-(?:source|destination) (?:[^\s:\[]*|\[[^\]\s]*\]):|--to-ports )(\d+)(?:-(\d+))?(?:/\d+)?(?:\s|$)`)

// natRandomPorts returns the random ports of ruleset's nat table, or nil
// when it picks none at random.
func natRandomPorts(ruleset string) *randomPorts {
	rp := &randomPorts{}
	random := false
	for _, line := range strings.Split(ruleset, "\n") {
		m := natTargetRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		flagged := strings.Contains(m[2], "--random")
		pm := natPortRe.FindStringSubmatch(m[2])
		source := m[1] == "SNAT" || m[1] == "MASQUERADE"
		switch {
		case pm != nil:
			lo, _ := strconv.Atoi(pm[1])
			hi := lo
			if pm[2] != "" {
				hi, _ = strconv.Atoi(pm[2])
			}
			rp.ranges = append(rp.ranges, [2]uint16{uint16(lo), uint16(hi)})
			random = random || flagged || source && hi > lo
		case flagged:
			rp.any, random = true, true
		}
	}
	if !random {
		return nil
	}
	return rp
}

// allows reports whether port is one a random translation may pick.
func (rp *randomPorts) allows(port uint16) bool {
	return rp.any || rp.inRanges(port)
}

// masks reports whether a copy's port got, where its probe had was, is
// compared masked: one a random translation may have picked, unless it
// is the probe's own outside every range of the ruleset's targets (a
// random pick within a range may land on the probe's own port on one
// side and on another on the other: both are masked).
func (rp *randomPorts) masks(got, was uint16) bool {
	if got == was {
		return rp.inRanges(got)
	}
	return rp.allows(got)
}

// inRanges reports whether port lies in a port range of the ruleset's
// nat targets.
func (rp *randomPorts) inRanges(port uint16) bool {
	for _, r := range rp.ranges {
		if port >= r[0] && port <= r[1] {
			return true
		}
	}
	return false
}

// maskRandomPorts returns e for comparison with the ports of a copy of
// probe p that a random translation picked (they differ from p's and lie
// in rp's ranges) written as 0, and its transport checksum, which covers
// them, as 0 too. The same for an answer to p (the far end's, or a RST)
// whose ports are not p's reversed: an answer that opened a connection of
// its own (p opened none: an invalid TCP segment) translated by an SNAT
// or MASQUERADE to a random port. Answers translated back to p's ports
// are compared exactly.
func maskRandomPorts(e event, rel relation, p Probe, rp *randomPorts) event {
	if rp == nil || rel != relCopy && rel != relAnswer || len(p.Frames) != 1 {
		return e
	}
	if e.kind == evLog {
		if sent := p.decode(p.Frames[0]); sent != nil {
			e.line = maskRandomLogPorts(e.line, rel, sent, rp)
		}
		return e
	}
	if e.pkt == nil {
		return e
	}
	sent := p.decode(p.Frames[0])
	l3 := e.l3
	if e.kind == evLocal {
		l3 = 0
	}
	b := append([]byte(nil), e.pkt.Raw...)
	var (
		proto uint8
		off   int
		ok    bool
	)
	if e.kind == evLocal && e.l3 < 0 {
		// An IPv6 raw socket shows the bytes after the IPv6 header
		// (observe.go event6; found by xfw difftest, nat6 seed 310).
		proto, ok = e.pkt.Protocol, true
	} else {
		proto, off, ok = transport(b, l3)
	}
	if sent == nil || !ok || proto != sent.Protocol || proto != nettest.ProtoTCP && proto != nettest.ProtoUDP || len(b) < off+8 {
		return e
	}
	masked := false
	for i, was := range []uint16{sent.SrcPort, sent.DstPort} {
		got := binary.BigEndian.Uint16(b[off+2*i:])
		if rel == relAnswer && (got == sent.SrcPort || got == sent.DstPort) {
			// An answer goes either way (the far end's, or fw's RST
			// after it): a port of the probe's is kept.
			continue
		}
		if rp.masks(got, was) {
			binary.BigEndian.PutUint16(b[off+2*i:], 0)
			masked = true
		}
	}
	if !masked {
		return e
	}
	if proto == nettest.ProtoUDP {
		binary.BigEndian.PutUint16(b[off+6:], 0)
	} else if len(b) >= off+tcpHeaderLen {
		binary.BigEndian.PutUint16(b[off+16:], 0)
	}
	var pkt *nettest.Packet
	switch {
	case e.kind == evLocal && e.l3 < 0:
		cp := *e.pkt
		cp.Raw = b
		pkt = &cp
	case e.kind == evLocal:
		pkt, _ = nettest.ParseIP(b)
	default:
		pkt, _ = nettest.Parse(b)
	}
	if pkt == nil {
		return e
	}
	e.pkt = pkt
	return e
}

// logPortsRe matches the ports of a LOG line's TCP or UDP header.
var logPortsRe = regexp.MustCompile(`\bSPT=(\d+) DPT=(\d+) `)

// maskRandomLogPorts is maskRandomPorts for a LOG line printing a copy of
// probe sent (rel relCopy) or an answer to it: the ports of its packet
// (not of a packet it quotes) a random translation picked are written as
// "?".
func maskRandomLogPorts(line string, rel relation, sent *nettest.Packet, rp *randomPorts) string {
	if sent.Protocol != nettest.ProtoTCP && sent.Protocol != nettest.ProtoUDP {
		return line
	}
	outer, inner := line, ""
	if in := strings.Index(line, "IN="); in >= 0 {
		if i := strings.IndexByte(line[in:], '['); i >= 0 {
			outer, inner = line[:in+i], line[in+i:]
		}
	}
	m := logPortsRe.FindStringSubmatchIndex(outer)
	if m == nil {
		return line
	}
	masked := outer[:m[0]]
	for i, was := range []uint16{sent.SrcPort, sent.DstPort} {
		name := [2]string{"SPT=", " DPT="}[i]
		text := outer[m[2+2*i]:m[3+2*i]]
		n, err := strconv.ParseUint(text, 10, 16)
		got := uint16(n)
		keep := err != nil || !rp.masks(got, was) ||
			rel == relAnswer && (got == sent.SrcPort || got == sent.DstPort)
		if !keep {
			text = "?"
		}
		masked += name + text
	}
	return masked + outer[m[1]-1:] + inner
}
