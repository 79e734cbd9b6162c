package difftest

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes the random nat rulesets (xfw-difftest --nat): a nat
// table with DNAT (with and without an address, shifted port maps; in
// PREROUTING and OUTPUT also for ICMP echo or without -p, by the address
// alone) and REDIRECT in PREROUTING and OUTPUT (fw's own packets: the
// corpus's probes from fw), SNAT and MASQUERADE in POSTROUTING (single
// addresses and ranges, ports and port ranges, --random, --random-fully,
// --persistent), SNAT in INPUT (TCP and ICMP echo delivered to fw, to
// addresses fw's replies reach through a neighbour that answers: xfw
// sees the host's packet after its first route's neighbour answered,
// docs/differences.md), matched by -s, -d, -p,
// --dport, -i and -o; in front of a small stateful filter table (NAT needs
// connection tracking) whose first FORWARD and INPUT rules name the
// translated addresses and ports. Both families: an IPv6 ruleset names
// ICMPv6 echo where an IPv4 one names ICMP echo, writes a DNAT's or SNAT's
// address with ports in brackets ("[ADDR]:PORT", "[ADDR-ADDR]:PORT") as
// ip6tables-save does, and translates sources without -p too (address
// only for the protocols without ports).

// natSeedMix derives the nat table's random stream from the ruleset's.
const natSeedMix = 0x5eed_a7

// natOutputSeedMix derives the nat OUTPUT rules' random stream from the
// ruleset's: drawn apart, they leave a seed's other rules as they were
// before nat OUTPUT was drawn.
const natOutputSeedMix = 0x5eed_0a7

// natOutputRules bounds the rules of nat OUTPUT (fewer than the other
// chains': only the probes from fw reach them).
const natOutputRules = 4

// natOutputFilterRules bounds the filter OUTPUT rules naming nat OUTPUT's
// translations (filter OUTPUT sees the translated destination).
const natOutputFilterRules = 2

// natInputSeedMix derives the nat INPUT rules' random stream from the
// ruleset's, as natOutputSeedMix does nat OUTPUT's.
const natInputSeedMix = 0x5eed_1a7

// natInputRules bounds the rules of nat INPUT.
const natInputRules = 2

// natFilterRules bounds the random filter table of a nat ruleset: small,
// so that most probes reach the translations.
const natFilterRules = 12

// natGen draws one nat table.
type natGen struct {
	rng  *rand.Rand
	plan Plan
	// targets are the translated addresses and ports the nat rules use
	// (for the filter rules that name them).
	targets []natTarget
}

// natTarget is a translation a rule makes: an address and a port (0:
// none), the last port of its range (portHi, 0: a single port), and
// whether the rule picks the port at random (--random, --random-fully).
type natTarget struct {
	addr   netip.Addr
	proto  string
	port   uint16
	portHi uint16
	random bool
}

// GenerateNATRuleset returns a random ruleset of plan's family with a nat
// table and a stateful filter table, as iptables-restore text, determined
// by seed.
func GenerateNATRuleset(seed int64, plan Plan) string {
	g := &natGen{rng: rand.New(rand.NewSource(seed ^ natSeedMix)), plan: plan}
	var nat strings.Builder
	fmt.Fprintf(&nat, "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, chain := range []string{"PREROUTING", "POSTROUTING"} {
		for n := g.rng.Intn(5); n > 0; n-- {
			fmt.Fprintf(&nat, "-A %s %s\n", chain, strings.Join(g.natRule(chain), " "))
		}
	}
	out := &natGen{rng: rand.New(rand.NewSource(seed ^ natOutputSeedMix)), plan: plan}
	for n := out.rng.Intn(natOutputRules + 1); n > 0; n-- {
		fmt.Fprintf(&nat, "-A OUTPUT %s\n", strings.Join(out.natRule("OUTPUT"), " "))
	}
	in := &natGen{rng: rand.New(rand.NewSource(seed ^ natInputSeedMix)), plan: plan}
	for n := in.rng.Intn(natInputRules + 1); n > 0; n-- {
		fmt.Fprintf(&nat, "-A INPUT %s\n", strings.Join(in.natInputRule(), " "))
	}
	nat.WriteString("COMMIT\n")
	filter := GenerateRuleset(seed, plan, GenOptions{Conntrack: true, MaxRules: natFilterRules})
	filter = strings.Replace(filter, "*filter\n", nat.String()+"*filter\n", 1)
	// The rules naming the translations go first in their chains: after
	// the filter table's chain lines.
	lines := strings.SplitAfter(filter, "\n")
	at := len(lines)
	inFilter := false
	for i, l := range lines {
		inFilter = inFilter || l == "*filter\n"
		if inFilter && (strings.HasPrefix(l, "-A ") || l == "COMMIT\n") {
			at = i
			break
		}
	}
	head := strings.Join(lines[:at], "")
	return head + g.filterLines("", 4) + out.filterLines("OUTPUT", natOutputFilterRules) + strings.Join(lines[at:], "")
}

// filterLines returns filter rules naming up to max of the translated
// addresses and ports: in chain, or ("") in INPUT for fw's own
// addresses, else in FORWARD.
func (g *natGen) filterLines(chain string, max int) string {
	var b strings.Builder
	for i, t := range g.targets {
		if i == max || !t.addr.IsValid() {
			break
		}
		chain := chain
		switch {
		case chain != "":
		case t.addr == g.plan.FwIn || t.addr == g.plan.FwOut:
			chain = "INPUT"
		default:
			chain = "FORWARD"
		}
		spec := []string{"-A", chain, "-d", t.addr.String()}
		switch {
		case t.port != 0 && t.random && t.portHi > t.port:
			// A port picked at random differs on each side by design
			// (docs/differences.md "Tables"): the rule names the whole
			// range (difftest nat seed 37: one port of 80-81 --random).
			spec = append(spec, "-p", t.proto, "--dport", fmt.Sprintf("%d:%d", t.port, t.portHi))
		case t.port != 0:
			spec = append(spec, "-p", t.proto, "--dport", fmt.Sprint(t.port))
		}
		spec = append(spec, "-j", pick(g.rng, []string{"ACCEPT", "DROP", "LOG --log-prefix nat-seen:"}))
		b.WriteString(strings.Join(spec, " ") + "\n")
	}
	return b.String()
}

// natRule returns the spec of one rule of a nat chain.
func (g *natGen) natRule(chain string) []string {
	var s []string
	icmp := g.icmpName()
	proto := pick(g.rng, []string{"", "tcp", "tcp", "udp", "udp", icmp})
	if chain == "POSTROUTING" && proto == "" && (g.plan.Family == ir.IPv4 || g.chance(50)) {
		// Source translation of other protocols than TCP, UDP and ICMP
		// echo differs in documented ways (docs/differences.md
		// "Tables": SCTP, DCCP, UDP-Lite and ICMP timestamps are dropped;
		// the corpus leaves those out). IPv6 rules translate every
		// protocol half of the time (the protocols without ports address
		// only, as the kernel).
		proto = pick(g.rng, []string{"tcp", "udp", icmp})
	}
	if chain != "POSTROUTING" && proto != "tcp" && proto != "udp" {
		// xfw translates destinations of other protocols by the address
		// alone, in nat PREROUTING and OUTPUT (ICMP echo with its
		// identifier, the protocols without ports; refused with ports):
		// half of such rules stay.
		if p := pick(g.rng, []string{"tcp", "udp"}); p == "tcp" {
			proto = p
		}
	}
	switch chain {
	case "PREROUTING":
		if g.chance(50) {
			s = append(s, g.neg(15), "-i", pick(g.rng, []string{"in0", "in0", "out0", "in+"}))
		}
	case "POSTROUTING", "OUTPUT":
		if g.chance(50) {
			s = append(s, g.neg(15), "-o", pick(g.rng, []string{"out0", "out0", "in0", "out+"}))
		}
	}
	if g.chance(40) {
		s = append(s, g.neg(15), "-s", g.prefix())
	}
	if g.chance(40) {
		s = append(s, g.neg(15), "-d", g.prefix())
	}
	if proto != "" {
		s = append(s, "-p", proto)
		switch {
		case proto == "icmp":
			s = append(s, "-m", "icmp", "--icmp-type", pick(g.rng, []string{"echo-request", "8"}))
		case proto == icmp:
			s = append(s, "-m", "icmp6", "--icmpv6-type", pick(g.rng, []string{"echo-request", "128"}))
		case g.chance(70):
			s = append(s, "--dport", g.portMatch())
		}
	}
	s = append(s, "-j")
	switch {
	case g.chance(10):
		s = append(s, pick(g.rng, []string{"ACCEPT", "RETURN"}))
	case chain == "POSTROUTING":
		s = append(s, g.snat(proto)...)
	default:
		s = append(s, g.dnat(proto)...)
	}
	return dropEmpty(s)
}

// natInputRule returns the spec of one rule of nat INPUT: SNAT of TCP,
// UDP (fw's port unreachable translated back) or ICMP echo, to gen's or
// sink's address (with one port for TCP half of the time) or an address
// or short range beyond them (routed through them), --persistent at
// times, without MASQUERADE (the kernel refuses it there).
func (g *natGen) natInputRule() []string {
	var s []string
	proto := pick(g.rng, []string{"tcp", "tcp", "udp", "icmp"})
	if g.chance(50) {
		s = append(s, g.neg(15), "-i", pick(g.rng, []string{"in0", "in0", "out0", "in+"}))
	}
	if g.chance(40) {
		s = append(s, g.neg(15), "-s", g.prefix())
	}
	if proto == "icmp" {
		proto = g.icmpName()
		s = append(s, "-p", proto)
		if g.plan.Family == ir.IPv6 {
			s = append(s, "-m", "icmp6", "--icmpv6-type", "echo-request")
		} else {
			s = append(s, "-m", "icmp", "--icmp-type", "echo-request")
		}
	} else {
		s = append(s, "-p", proto)
		if g.chance(60) {
			s = append(s, "--dport", g.portMatch())
		}
	}
	s = append(s, "-j")
	if g.chance(10) {
		return dropEmpty(append(s, pick(g.rng, []string{"ACCEPT", "RETURN"})))
	}
	var to string
	if g.chance(50) {
		a := pick(g.rng, []netip.Addr{g.plan.Gen, g.plan.Sink})
		g.targets = append(g.targets, natTarget{addr: a})
		to = a.String()
	} else {
		to = g.addrRange([]netip.Addr{g.farSink(30), g.farGen()})
	}
	// One port at most and no random flags: a port picked at random
	// (--random, --random-fully, a range the source port is outside of)
	// differs on each side by design (docs/differences.md "Tables"), and
	// fw's sockets see it (difftest nat6 seed 31: --random-fully).
	if proto == "tcp" && g.chance(50) {
		p := pick(g.rng, []uint16{22, 80, 443, 8080, 1024, 5000})
		g.targets[len(g.targets)-1].port, g.targets[len(g.targets)-1].proto = p, proto
		to = g.withPorts(to, fmt.Sprint(p))
	}
	return dropEmpty(append(append(s, "SNAT", "--to-source", to), g.flags(false, false, true)...))
}

// dnat returns a DNAT or REDIRECT target for a rule of protocol proto.
func (g *natGen) dnat(proto string) []string {
	ports := proto == "tcp" || proto == "udp"
	// UDP goes to fw itself only untranslated: fw's stack answers it
	// with "port unreachable", which xfw does not translate back
	// (docs/differences.md "Tables": errors the host itself sends about a
	// translated packet); so does a rule without -p. An ICMP echo is
	// answered.
	local := proto == "tcp" || proto == g.icmpName()
	if !ports {
		// The address alone (no --random: the kernel picks an echo's
		// identifier at random, xfw keeps it).
		return g.dnatAddrOnly(local)
	}
	if local && g.chance(25) {
		s := []string{"REDIRECT"}
		if ports && g.chance(70) {
			s = append(s, "--to-ports", g.portRange(proto, "-"))
		}
		if g.chance(20) { // REDIRECT has no --random-fully
			s = append(s, "--random")
		}
		return s
	}
	if local && g.chance(10) {
		// Without an address (TCP only: the destination may be fw's).
		return append([]string{"DNAT", "--to-destination", g.dnatPortsOnly(proto)}, g.flags(true, false, false)...)
	}
	addrs := []netip.Addr{g.plan.Sink, g.farSink(10), g.farSink(20), g.farGen()}
	if local {
		addrs = append(addrs, g.plan.FwOut, g.plan.FwIn)
	}
	to := g.addrRange(addrs)
	if ports && g.chance(60) {
		to = g.withPorts(to, g.portMap(g.portRange(proto, "-")))
	}
	return append([]string{"DNAT", "--to-destination", to}, g.randomFlags(true, false, true)...)
}

// dnatAddrOnly returns a DNAT or REDIRECT target without ports, for a
// rule not restricted to TCP or UDP (local: the destination may be fw's).
func (g *natGen) dnatAddrOnly(local bool) []string {
	if local && g.chance(25) {
		return []string{"REDIRECT"}
	}
	addrs := []netip.Addr{g.plan.Sink, g.farSink(10), g.farSink(20), g.farGen()}
	if local {
		addrs = append(addrs, g.plan.FwOut, g.plan.FwIn)
	}
	return append([]string{"DNAT", "--to-destination", g.addrRange(addrs)}, g.flags(false, false, true)...)
}

// dnatPortsOnly returns a DNAT's ports without an address (the
// destination's own kept): ":PORT", ":PORT-PORT" or a shifted port map.
func (g *natGen) dnatPortsOnly(proto string) string {
	return ":" + g.portMap(g.portRange(proto, "-"))
}

// portMap gives a DNAT's port range a base (a shifted port map,
// "PORT-PORT/BASE") a fifth of the time.
func (g *natGen) portMap(ports string) string {
	if strings.Contains(ports, "-") && g.chance(20) {
		return ports + "/" + fmt.Sprint(pick(g.rng, []uint16{22, 80, 1000, 8000}))
	}
	return ports
}

// snat returns an SNAT or MASQUERADE target for a rule of protocol proto.
func (g *natGen) snat(proto string) []string {
	ports := proto == "tcp" || proto == "udp"
	if g.chance(35) {
		s := []string{"MASQUERADE"}
		if ports && g.chance(50) {
			s = append(s, "--to-ports", g.portRange(proto, "-"))
		}
		return append(s, g.flags(ports, ports, false)...)
	}
	to := g.addrRange([]netip.Addr{g.plan.FwOut, g.plan.FwIn, g.farSink(30)})
	if ports && g.chance(50) {
		to = g.withPorts(to, g.portRange(proto, "-"))
	}
	return append([]string{"SNAT", "--to-source", to}, g.randomFlags(ports, ports, true)...)
}

// flags returns the random and persistent options of a target
// (--random-fully only with SNAT and MASQUERADE, --persistent only with
// DNAT and SNAT; no --random for ICMP, whose echo identifier xfw keeps
// where the kernel picks one at random: docs/differences.md "Tables").
func (g *natGen) flags(random, fully, persistent bool) []string {
	var s []string
	switch k := g.rng.Intn(10); {
	case k < 2 && random:
		s = append(s, "--random")
	case k < 3 && fully:
		s = append(s, "--random-fully")
	}
	if persistent && g.chance(15) {
		s = append(s, "--persistent")
	}
	return s
}

// randomFlags is flags for a target with an address, the last target:
// marked as picking its port at random when the flags say so.
func (g *natGen) randomFlags(random, fully, persistent bool) []string {
	s := g.flags(random, fully, persistent)
	if n := len(g.targets); n > 0 && (slices.Contains(s, "--random") || slices.Contains(s, "--random-fully")) {
		g.targets[n-1].random = true
	}
	return s
}

// addrRange returns one of addrs, or a short range starting at it, and
// remembers it as a target.
func (g *natGen) addrRange(addrs []netip.Addr) string {
	a := pick(g.rng, addrs)
	g.targets = append(g.targets, natTarget{addr: a})
	if g.chance(25) {
		return fmt.Sprintf("%s-%s", a, withLastByte(a, a.AsSlice()[a.BitLen()/8-1]+byte(1+g.rng.Intn(3))))
	}
	return a.String()
}

// withPorts returns a target's address (or range) to followed by ports:
// "ADDR:PORTS", for IPv6 "[ADDR]:PORTS" (ip6tables' spelling).
func (g *natGen) withPorts(to, ports string) string {
	if g.plan.Family == ir.IPv6 {
		return "[" + to + "]:" + ports
	}
	return to + ":" + ports
}

// icmpName returns the name -p gives the family's ICMP.
func (g *natGen) icmpName() string {
	if g.plan.Family == ir.IPv6 {
		return pick(g.rng, []string{"icmpv6", "ipv6-icmp"})
	}
	return "icmp"
}

// withLastByte returns address a with its last byte set to b.
func withLastByte(a netip.Addr, b byte) netip.Addr {
	s := a.AsSlice()
	s[len(s)-1] = b
	out, _ := netip.AddrFromSlice(s)
	return out
}

// portRange returns a port or a range "a<sep>b" for protocol proto, and
// remembers the port with the last target address.
func (g *natGen) portRange(proto, sep string) string {
	p := pick(g.rng, []uint16{22, 80, 443, 8080, 1024, 5000, 65535})
	var t *natTarget // the target this port is remembered with
	if n := len(g.targets); n > 0 && !g.targets[n-1].addr.IsValid() || n > 0 && g.targets[n-1].port == 0 {
		t = &g.targets[n-1]
		t.port, t.proto = p, proto
	}
	if g.chance(30) && p < 65000 {
		hi := p + uint16(1+g.rng.Intn(8))
		if t != nil {
			t.portHi = hi
		}
		return fmt.Sprintf("%d%s%d", p, sep, hi)
	}
	return fmt.Sprint(p)
}

// portMatch returns a --dport value: a common port or a short range.
func (g *natGen) portMatch() string {
	p := pick(g.rng, []uint16{22, 53, 80, 443, 1024, 8080})
	if g.chance(20) {
		return fmt.Sprintf("%d:%d", p, p+100)
	}
	return fmt.Sprint(p)
}

// prefix returns an -s/-d value among the topology's addresses and
// networks.
func (g *natGen) prefix() string {
	p := g.plan
	return pick(g.rng, []string{p.Gen.String(), p.GenNet.String(), p.Sink.String(), p.SinkNet.String(),
		p.FwIn.String(), p.FwOut.String(), p.FarSink.String(), p.FarGen.String(), g.farSink(10).String()})
}

// farSink returns the n-th address of the network beyond sink.
func (g *natGen) farSink(n byte) netip.Addr {
	return withLastByte(g.plan.FarSink.Addr(), n)
}

// farGen returns an address of the network beyond gen.
func (g *natGen) farGen() netip.Addr {
	return withLastByte(g.plan.FarGen.Addr(), 7)
}

// chance returns true pct percent of the time.
func (g *natGen) chance(pct int) bool { return g.rng.Intn(100) < pct }

// neg returns "!" pct percent of the time, "" otherwise.
func (g *natGen) neg(pct int) string {
	if g.chance(pct) {
		return "!"
	}
	return ""
}

// dropEmpty removes the empty words of s.
func dropEmpty(s []string) []string {
	out := s[:0]
	for _, w := range s {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}
