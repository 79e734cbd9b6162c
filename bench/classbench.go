package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand"
	"net/netip"
	"strconv"
	"strings"
)

// ClassBench filter sets (Taylor & Turner's generator, the acl, fw and ipc
// families): the parser of their text format, their rendering as an
// iptables FORWARD chain and as nftables, and traces of packets drawn inside
// their rules with the first rule each matches (reference classifier).
//
// Choices, the same for every firewall:
//   - every rule ACCEPTs, in file order, and the chain's policy is DROP, so a
//     forwarded packet was matched by some rule and its first match is the
//     rule whose counter counts it;
//   - the FLAGS/MASK column (TCP flags) is ignored, as the family's usual
//     translations and classifiers do;
//   - only TCP and UDP have ports: a rule of any protocol with port ranges
//     becomes a tcp rule and a udp rule (as iptables needs), and a rule of
//     another protocol with port ranges matches nothing (its packets have no
//     ports) and is left out of the rendered chain.

// cbPortRange is an inclusive range of transport ports.
type cbPortRange struct{ Lo, Hi uint16 }

// full reports whether r is every port.
func (r cbPortRange) full() bool { return r.Lo == 0 && r.Hi == 0xffff }

// contains reports whether p is in r.
func (r cbPortRange) contains(p uint16) bool { return p >= r.Lo && p <= r.Hi }

// iptables renders r as iptables' --sport/--dport argument ("N" or "LO:HI").
func (r cbPortRange) iptables() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d:%d", r.Lo, r.Hi)
}

// nft renders r as an nftables value ("N" or "LO-HI").
func (r cbPortRange) nft() string {
	if r.Lo == r.Hi {
		return strconv.Itoa(int(r.Lo))
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// IP protocol numbers with ports (and ICMP's, for the trace's frames).
const (
	protoICMP = 1
	protoTCP  = 6
	protoUDP  = 17
)

// cbRule is one ClassBench rule.
type cbRule struct {
	Src, Dst     netip.Prefix // masked
	Sport, Dport cbPortRange
	// Proto is the protocol when AnyProto is false.
	Proto    uint8
	AnyProto bool
	// Line is the rule's line in its file (1-based).
	Line int
}

// hasPorts reports whether protocol p has transport ports.
func hasPorts(p uint8) bool { return p == protoTCP || p == protoUDP }

// portsFull reports whether r leaves both ports free.
func (r *cbRule) portsFull() bool { return r.Sport.full() && r.Dport.full() }

// matchesNothing reports whether r can match no packet: a protocol
// without ports, with a port range that is not every port.
func (r *cbRule) matchesNothing() bool {
	return !r.AnyProto && !hasPorts(r.Proto) && !r.portsFull()
}

// protocols returns the protocols of r's iptables rules: one, none (any
// protocol, every port) or tcp and udp (any protocol with port ranges).
func (r *cbRule) protocols() []uint8 {
	switch {
	case r.matchesNothing():
		return nil
	case r.AnyProto && r.portsFull():
		return []uint8{0}
	case r.AnyProto:
		return []uint8{protoTCP, protoUDP}
	}
	return []uint8{r.Proto}
}

// cbPacket is the header a classifier looks at.
type cbPacket struct {
	Src, Dst     netip.Addr
	Proto        uint8
	Sport, Dport uint16 // meaningful for TCP and UDP only
}

// matches reports whether r matches p (the rule as iptables renders it).
func (r *cbRule) matches(p cbPacket) bool {
	if !r.Src.Contains(p.Src) || !r.Dst.Contains(p.Dst) {
		return false
	}
	if !r.AnyProto && r.Proto != p.Proto {
		return false
	}
	if r.portsFull() {
		return true
	}
	return hasPorts(p.Proto) && r.Sport.contains(p.Sport) && r.Dport.contains(p.Dport)
}

// cbClassify is the reference classifier: the index of the first rule of
// rules matching p, or -1.
func cbClassify(rules []cbRule, p cbPacket) int {
	for i := range rules {
		if rules[i].matches(p) {
			return i
		}
	}
	return -1
}

// parseClassBench reads a ClassBench filter set:
//
//	@SRC/LEN DST/LEN SPORT_LO : SPORT_HI DPORT_LO : DPORT_HI PROTO/MASK FLAGS/MASK
func parseClassBench(r io.Reader) ([]cbRule, error) {
	var out []cbRule
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		rule, err := parseClassBenchRule(text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rule.Line = line
		out = append(out, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read filter set: %w", err)
	}
	return out, nil
}

// parseClassBenchRule parses one line of a filter set.
func parseClassBenchRule(text string) (cbRule, error) {
	var r cbRule
	if !strings.HasPrefix(text, "@") {
		return r, fmt.Errorf("rule %q does not start with @", text)
	}
	f := strings.Fields(text[1:])
	// SRC DST LO : HI LO : HI PROTO/MASK [FLAGS/MASK]
	if len(f) < 9 || f[3] != ":" || f[6] != ":" {
		return r, fmt.Errorf("rule %q: want SRC DST LO : HI LO : HI PROTO/MASK FLAGS/MASK", text)
	}
	var err error
	if r.Src, err = netip.ParsePrefix(f[0]); err != nil || !r.Src.Addr().Is4() {
		return r, fmt.Errorf("source %q: not an IPv4 prefix", f[0])
	}
	if r.Dst, err = netip.ParsePrefix(f[1]); err != nil || !r.Dst.Addr().Is4() {
		return r, fmt.Errorf("destination %q: not an IPv4 prefix", f[1])
	}
	r.Src, r.Dst = r.Src.Masked(), r.Dst.Masked()
	if r.Sport, err = parsePortRange(f[2], f[4]); err != nil {
		return r, fmt.Errorf("source ports: %w", err)
	}
	if r.Dport, err = parsePortRange(f[5], f[7]); err != nil {
		return r, fmt.Errorf("destination ports: %w", err)
	}
	val, mask, ok := strings.Cut(f[8], "/")
	if !ok {
		return r, fmt.Errorf("protocol %q: want VALUE/MASK", f[8])
	}
	v, err1 := strconv.ParseUint(val, 0, 8)
	m, err2 := strconv.ParseUint(mask, 0, 8)
	switch {
	case err1 != nil || err2 != nil:
		return r, fmt.Errorf("protocol %q: not two bytes", f[8])
	case m == 0:
		r.AnyProto = true
	case m == 0xff:
		r.Proto = uint8(v)
	default:
		return r, fmt.Errorf("protocol %q: a mask other than 0x00 or 0xFF", f[8])
	}
	return r, nil
}

// matchesAll reports whether r matches every packet.
func (r *cbRule) matchesAll() bool {
	return r.Src.Bits() == 0 && r.Dst.Bits() == 0 && r.AnyProto && r.portsFull()
}

// cbWithoutDefault returns rules without its trailing default rule (one
// matching every packet), if it has one: every ClassBench set ends with
// it. Kept, it would accept everything: the policy would never apply, no
// packet could miss, and a set of the accepted packets (nftables') would
// hold it alone.
func cbWithoutDefault(rules []cbRule) ([]cbRule, bool) {
	if n := len(rules); n > 0 && rules[n-1].matchesAll() {
		return rules[:n-1], true
	}
	return rules, false
}

// parsePortRange parses an inclusive port range's bounds.
func parsePortRange(lo, hi string) (cbPortRange, error) {
	l, err1 := strconv.ParseUint(lo, 10, 16)
	h, err2 := strconv.ParseUint(hi, 10, 16)
	if err1 != nil || err2 != nil || l > h {
		return cbPortRange{}, fmt.Errorf("%q : %q is not a port range", lo, hi)
	}
	return cbPortRange{uint16(l), uint16(h)}, nil
}

// protoName is the protocol as iptables and nftables name it.
func protoName(p uint8) string {
	switch p {
	case protoTCP:
		return "tcp"
	case protoUDP:
		return "udp"
	case protoICMP:
		return "icmp"
	}
	return strconv.Itoa(int(p))
}

// cbRendered is a filter set as a FORWARD chain.
type cbRendered struct {
	// Restore is the iptables-restore input.
	Restore string
	// RuleOf is, for each rule of the chain, the index of the ClassBench
	// rule it comes from.
	RuleOf []int
	// Proto is, for each rule of the chain, its protocol (0: any).
	Proto []uint8
	// Omitted counts the rules left out because they match nothing.
	Omitted int
}

// iptablesArgs renders the iptables rule of r for protocol p (0: any).
func (r *cbRule) iptablesArgs(p uint8) string {
	var b strings.Builder
	if r.Src.Bits() > 0 {
		fmt.Fprintf(&b, "-s %s ", r.Src)
	}
	if r.Dst.Bits() > 0 {
		fmt.Fprintf(&b, "-d %s ", r.Dst)
	}
	if p != 0 {
		fmt.Fprintf(&b, "-p %s ", protoName(p))
		if hasPorts(p) && !r.portsFull() {
			fmt.Fprintf(&b, "-m %s ", protoName(p))
			if !r.Sport.full() {
				fmt.Fprintf(&b, "--sport %s ", r.Sport.iptables())
			}
			if !r.Dport.full() {
				fmt.Fprintf(&b, "--dport %s ", r.Dport.iptables())
			}
		}
	}
	b.WriteString("-j ACCEPT")
	return b.String()
}

// renderIptables renders rules as the filter table's FORWARD chain, policy
// DROP.
func renderIptables(rules []cbRule) cbRendered {
	var out cbRendered
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := range rules {
		ps := rules[i].protocols()
		if len(ps) == 0 {
			out.Omitted++
		}
		for _, p := range ps {
			fmt.Fprintf(&b, "-A FORWARD %s\n", rules[i].iptablesArgs(p))
			out.RuleOf = append(out.RuleOf, i)
			out.Proto = append(out.Proto, p)
		}
	}
	b.WriteString("COMMIT\n")
	out.Restore = b.String()
	return out
}

// nftExpr renders the nftables rule of r for protocol p (0: any).
func (r *cbRule) nftExpr(p uint8) string {
	var b strings.Builder
	if r.Src.Bits() > 0 {
		fmt.Fprintf(&b, "ip saddr %s ", nftPrefix(r.Src))
	}
	if r.Dst.Bits() > 0 {
		fmt.Fprintf(&b, "ip daddr %s ", nftPrefix(r.Dst))
	}
	if p != 0 {
		switch {
		case !hasPorts(p) || r.portsFull():
			fmt.Fprintf(&b, "ip protocol %s ", protoName(p))
		default:
			if !r.Sport.full() {
				fmt.Fprintf(&b, "%s sport %s ", protoName(p), r.Sport.nft())
			}
			if !r.Dport.full() {
				fmt.Fprintf(&b, "%s dport %s ", protoName(p), r.Dport.nft())
			}
		}
	}
	b.WriteString("accept")
	return b.String()
}

// nftPrefix renders a prefix as nft users write it (a /32 as the address).
func nftPrefix(p netip.Prefix) string {
	if p.Bits() == 32 {
		return p.Addr().String()
	}
	return p.String()
}

// renderNft renders rules as an nftables forward chain, one rule each,
// policy drop, replacing the whole ruleset.
func renderNft(rules []cbRule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "flush ruleset\ntable ip %s {\n\tchain forward {\n\t\ttype filter hook forward priority filter; policy drop;\n", nftTable)
	for i := range rules {
		for _, p := range rules[i].protocols() {
			fmt.Fprintf(&b, "\t\t%s\n", rules[i].nftExpr(p))
		}
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// cbBox is one rule of one protocol as a box of the five dimensions
// (protocol 0-255 for any).
type cbBox struct {
	Src, Dst         netip.Prefix
	ProtoLo, ProtoHi uint8
	Sport, Dport     cbPortRange
}

// contains reports whether b holds every packet of o.
func (b *cbBox) contains(o *cbBox) bool {
	return b.Src.Bits() <= o.Src.Bits() && b.Src.Contains(o.Src.Addr()) &&
		b.Dst.Bits() <= o.Dst.Bits() && b.Dst.Contains(o.Dst.Addr()) &&
		b.ProtoLo <= o.ProtoLo && o.ProtoHi <= b.ProtoHi &&
		b.Sport.Lo <= o.Sport.Lo && o.Sport.Hi <= b.Sport.Hi &&
		b.Dport.Lo <= o.Dport.Lo && o.Dport.Hi <= b.Dport.Hi
}

// cbSetBoxes returns the boxes of rules' accept set, leaving out those
// another box contains (the union, the set of accepted packets, is the
// same; the kernel refuses an element inside another).
func cbSetBoxes(rules []cbRule) []cbBox {
	var all []cbBox
	for i := range rules {
		r := &rules[i]
		for _, p := range r.protocols() {
			b := cbBox{Src: r.Src, Dst: r.Dst, ProtoLo: p, ProtoHi: p, Sport: r.Sport, Dport: r.Dport}
			if p == 0 {
				b.ProtoHi = 0xff
			}
			all = append(all, b)
		}
	}
	var out []cbBox
	for i := range all {
		inside := false
		for j := range all {
			// Of equal boxes, the first stays.
			if j != i && all[j].contains(&all[i]) && (j < i || !all[i].contains(&all[j])) {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, all[i])
		}
	}
	return out
}

// holdsCorner reports whether b holds the packet at o's lowest corner
// (lo) or at its highest (!lo): every field at its range's low or high end.
func (b *cbBox) holdsCorner(o *cbBox, lo bool) bool {
	src, dst := o.Src.Masked().Addr(), o.Dst.Masked().Addr()
	proto, sport, dport := o.ProtoLo, o.Sport.Lo, o.Dport.Lo
	if !lo {
		src, dst = prefixLast(o.Src), prefixLast(o.Dst)
		proto, sport, dport = o.ProtoHi, o.Sport.Hi, o.Dport.Hi
	}
	return b.Src.Contains(src) && b.Dst.Contains(dst) &&
		b.ProtoLo <= proto && proto <= b.ProtoHi &&
		b.Sport.contains(sport) && b.Dport.contains(dport)
}

// prefixLast returns the highest address of the IPv4 prefix p.
func prefixLast(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	if bits := p.Bits(); bits < 32 {
		v |= 1<<(32-bits) - 1
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// cbSetGroups deals the boxes of cbSetBoxes into sets the kernel loads:
// its concatenated interval sets (nft_set_pipapo) refuse an element whose
// lowest or highest corner lies inside an element added before it ("File
// exists"; checked with nft 1.0.6 on kernel 6.18: {10.0.0.0/8 . 70-90,
// 10.0.0.0/8 . 85-95} fails, {10.0.0.0/8 . 70-90, 10.0.0.0/8 . 60-95}
// loads), so each box goes, in order, to the first set none of whose boxes
// holds either of its corners, as a user splitting an overlapping list
// would.
func cbSetGroups(rules []cbRule) [][]cbBox {
	var groups [][]cbBox
	for _, x := range cbSetBoxes(rules) {
		placed := false
		for g := range groups {
			clash := false
			for i := range groups[g] {
				if groups[g][i].holdsCorner(&x, true) || groups[g][i].holdsCorner(&x, false) {
					clash = true
					break
				}
			}
			if !clash {
				groups[g] = append(groups[g], x)
				placed = true
				break
			}
		}
		if !placed {
			groups = append(groups, []cbBox{x})
		}
	}
	return groups
}

// renderNftSet renders rules as nftables users write a long accept list:
// interval sets of concatenations (source . destination . protocol .
// source port . destination port) and one rule looking each up, policy
// drop: one set, or as few as cbSetGroups needs when elements partially
// overlap. Every rule accepts, so their order does not change any
// verdict, and an element inside another is left out; a rule of any
// protocol is the protocol range 0-255, and th sport/dport read the
// transport header's first four bytes whatever the protocol (only rules
// with every port there match protocols without ports).
func renderNftSet(rules []cbRule) string {
	var b strings.Builder
	groups := cbSetGroups(rules)
	fmt.Fprintf(&b, "flush ruleset\ntable ip %s {\n", nftTable)
	for g, boxes := range groups {
		fmt.Fprintf(&b, "\tset acl%d {\n\t\ttype ipv4_addr . ipv4_addr . inet_proto . inet_service . inet_service\n\t\tflags interval\n\t\telements = {\n", g)
		for i, x := range boxes {
			if i > 0 {
				b.WriteString(",\n")
			}
			proto := strconv.Itoa(int(x.ProtoLo))
			if x.ProtoHi != x.ProtoLo {
				proto = fmt.Sprintf("%d-%d", x.ProtoLo, x.ProtoHi)
			}
			fmt.Fprintf(&b, "\t\t\t%s . %s . %s . %s . %s", x.Src, x.Dst, proto, x.Sport.nft(), x.Dport.nft())
		}
		b.WriteString("\n\t\t}\n\t}\n")
	}
	b.WriteString("\tchain forward {\n\t\ttype filter hook forward priority filter; policy drop;\n")
	for g := range groups {
		fmt.Fprintf(&b, "\t\tip saddr . ip daddr . meta l4proto . th sport . th dport @acl%d accept\n", g)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// cbTraced is one packet of a trace and its expected first match.
type cbTraced struct {
	Pkt cbPacket
	// Rule is the index of the first rule matching Pkt (-1: none).
	Rule int
	// Drawn is the rule it was drawn inside.
	Drawn int
}

// cbTraceProtos are the protocols a packet drawn inside a rule of any
// protocol gets.
var cbTraceProtos = []uint8{protoTCP, protoUDP, protoICMP}

// cbTrace draws n distinct packets, each at a random point of a randomly
// chosen rule (seeded), and classifies each with cbClassify. Packets the
// forwarding path would not carry (martian or the bench's own addresses:
// forwardable) are drawn again; a rule giving none after a few tries is
// skipped. skipped counts the rules given up.
func cbTrace(rules []cbRule, n int, seed int64) (trace []cbTraced, skipped int) {
	rng := rand.New(rand.NewSource(seed))
	var live []int
	for i := range rules {
		if !rules[i].matchesNothing() {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		return nil, 0
	}
	seen := map[cbPacket]bool{}
	dead := map[int]bool{}
	const tries = 32 // draws per rule before giving up on it
	for attempts := 0; len(trace) < n && attempts < 100*n && len(dead) < len(live); attempts++ {
		i := live[rng.Intn(len(live))]
		if dead[i] {
			continue
		}
		var p cbPacket
		ok := false
		for t := 0; t < tries && !ok; t++ {
			p = drawPacket(rng, &rules[i])
			ok = forwardable(p.Src) && forwardable(p.Dst)
		}
		if !ok {
			dead[i] = true
			continue
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		trace = append(trace, cbTraced{Pkt: p, Rule: cbClassify(rules, p), Drawn: i})
	}
	return trace, len(dead)
}

// drawPacket returns a random packet matching r.
func drawPacket(rng *rand.Rand, r *cbRule) cbPacket {
	p := cbPacket{Src: randomInPrefix(rng, r.Src), Dst: randomInPrefix(rng, r.Dst), Proto: r.Proto}
	if r.AnyProto {
		if r.portsFull() {
			p.Proto = cbTraceProtos[rng.Intn(len(cbTraceProtos))]
		} else {
			p.Proto = cbTraceProtos[rng.Intn(2)] // tcp or udp
		}
	}
	switch {
	case hasPorts(p.Proto):
		p.Sport = randomPort(rng, r.Sport)
		p.Dport = randomPort(rng, r.Dport)
	case p.Proto == protoICMP:
		// Echo request: type 8, code 0 in the "source port" bytes.
		const echoRequest = 8 << 8
		p.Sport = echoRequest
	}
	return p
}

// randomPort returns a random port of r.
func randomPort(rng *rand.Rand, r cbPortRange) uint16 {
	return r.Lo + uint16(rng.Intn(int(r.Hi)-int(r.Lo)+1))
}

// randomInPrefix returns a random address of p.
func randomInPrefix(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	host := uint32(0)
	if p.Bits() < 32 {
		host = uint32(rng.Int63()) & (1<<(32-p.Bits()) - 1)
	}
	v := base | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// cbNotForwarded are the addresses a trace avoids: those the kernel
// refuses to forward from or to (this network, loopback, multicast, the
// limited broadcast) and the bench's own networks (topo.go, sets.go).
var cbNotForwarded = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("255.255.255.255/32"),
	netip.MustParsePrefix("10.1.0.0/16"),
	srcNet,
	setNet, // fwdNet and localNet included
}

// forwardable reports whether a packet from or to a can cross the bench's
// forwarding path.
func forwardable(a netip.Addr) bool {
	for _, p := range cbNotForwarded {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
