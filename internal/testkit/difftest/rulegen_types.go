package difftest

import (
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes the generator's -m addrtype and -m pkttype matches,
// from the generator's second random stream (rgen.types).

// typesSeedMix derives the second stream's seed from the ruleset's.
const typesSeedMix = 0x5eed_7e5

// addrTypeNames are the address types a rule may name, by family: in IPv6
// the kernel refuses BROADCAST, BLACKHOLE and the types after UNREACHABLE,
// and xfw refuses UNREACHABLE (docs/differences.md).
var addrTypeNames = map[ir.Family][]string{
	ir.IPv4: {"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST", "BLACKHOLE", "UNREACHABLE",
		"PROHIBIT", "THROW", "NAT", "XRESOLVE"},
	ir.IPv6: {"UNSPEC", "UNICAST", "LOCAL", "ANYCAST", "MULTICAST"},
}

// addrTypeList returns a --src-type / --dst-type value: one to three types,
// the common ones more often, sometimes in lower case or abbreviated as
// iptables allows (a prefix of the name: "LOC").
func (g *rgen) addrTypeList() string {
	names := addrTypeNames[g.fam]
	common := []string{"LOCAL", "UNICAST", "MULTICAST"}
	if g.fam == ir.IPv4 {
		common = append(common, "BROADCAST")
	}
	var out []string
	for n := 1 + g.rng.Intn(3); len(out) < n; {
		name := pick(g.rng, names)
		if g.chance(60) {
			name = pick(g.rng, common)
		}
		switch {
		case g.chance(10):
			name = strings.ToLower(name)
		case name == "LOCAL" && g.chance(10):
			name = "LOC"
		}
		out = append(out, name)
	}
	return strings.Join(out, ",")
}

// addrTypeSpec returns an addrtype match for a rule of a chain reached
// from hooks: --limit-iface-in only where OUTPUT does not reach, and
// --limit-iface-out only where INPUT does not (the kernel refuses them
// there), never in IPv6 (xfw refuses them).
func (g *rgen) addrTypeSpec(hooks uint8) []string {
	s := []string{"-m", "addrtype"}
	both := g.chance(30)
	if both || g.chance(50) {
		s = append(s, g.neg(25)...)
		s = append(s, "--src-type", g.addrTypeList())
	}
	if both || len(s) == 2 {
		s = append(s, g.neg(25)...)
		s = append(s, "--dst-type", g.addrTypeList())
	}
	if g.fam == ir.IPv4 && g.chance(30) {
		switch {
		case hooks&hookOut == 0 && g.chance(50):
			s = append(s, "--limit-iface-in")
		case hooks&hookIn == 0:
			s = append(s, "--limit-iface-out")
		}
	}
	return s
}

// pktTypeSpec returns a pkttype match.
func (g *rgen) pktTypeSpec() []string {
	s := []string{"-m", "pkttype"}
	s = append(s, g.neg(25)...)
	return append(s, "--pkt-type", pick(g.rng, []string{"unicast", "unicast", "broadcast", "multicast", "multicast",
		"otherhost", "host", "bcast", "mcast", "Broadcast"}))
}
