package difftest

import (
	"fmt"
	"strings"
)

// This file writes the generator's IPv6 extension header matches (-m rt,
// -m frag, -m ah), from their own random stream (rgen.ext6), so that the
// rulesets of other seeds stay the same. A ruleset uses at most
// maxExt6Specs distinct ones (xfw takes 8), reused at random, with few
// type-0 addresses among them (xfw takes 16).

// ext6SeedMix derives the stream's seed from the ruleset's.
const ext6SeedMix = 0x5eed_6e6

// maxExt6Specs bounds the distinct matches of one ruleset.
const maxExt6Specs = 6

// ip6extSpec returns an IPv6 extension header match for a rule.
func (g *rgen) ip6extSpec() []string {
	x := g.ext6
	if len(g.ext6Specs) > 0 && (len(g.ext6Specs) == maxExt6Specs || x.chance(40)) {
		return g.ext6Specs[x.rng.Intn(len(g.ext6Specs))]
	}
	var s []string
	switch x.rng.Intn(3) {
	case 0:
		s = x.rtSpec()
	case 1:
		s = x.fragSpec()
	default:
		s = x.ah6Spec()
	}
	g.ext6Specs = append(g.ext6Specs, s)
	return s
}

// rangeArg returns a value or a range, from small numbers the packet
// generator's headers carry (routing types 0, 2, 4; segments left 0).
func (g *rgen) rangeArg(max int) string {
	lo := g.rng.Intn(max + 1)
	switch g.rng.Intn(4) {
	case 0:
		return fmt.Sprintf("%d:%d", lo, lo+g.rng.Intn(max+1))
	case 1:
		return fmt.Sprintf("%d:", lo)
	}
	return fmt.Sprint(lo)
}

// rtSpec returns -m rt with some of its options; the type-0 options only
// after --rt-type 0, as iptables requires.
func (g *rgen) rtSpec() []string {
	s := []string{"-m", "rt"}
	type0 := g.chance(50)
	if type0 {
		s = append(s, "--rt-type", "0")
	} else if g.chance(60) {
		s = append(append(s, g.neg(30)...), "--rt-type", pick(g.rng, []string{"0", "2", "4"}))
	}
	if g.chance(40) {
		s = append(append(s, g.neg(30)...), "--rt-segsleft", g.rangeArg(2))
	}
	if g.chance(30) {
		s = append(append(s, g.neg(30)...), "--rt-len", pick(g.rng, []string{"8", "24", "40"}))
	}
	if type0 && g.chance(30) {
		s = append(s, "--rt-0-res")
	}
	if type0 && g.chance(20) {
		s = append(s, "--rt-0-addrs", strings.Join([]string{"2001:db8::1", "::1"}[:1+g.rng.Intn(2)], ","))
		if g.chance(50) {
			s = append(s, "--rt-0-not-strict")
		}
	}
	return s
}

// fragSpec returns -m frag with some of its options (--fragmore and
// --fraglast exclude each other).
func (g *rgen) fragSpec() []string {
	s := []string{"-m", "frag"}
	if g.chance(50) {
		s = append(append(s, g.neg(30)...), "--fragid", g.rangeArg(1000))
	}
	if g.chance(20) {
		s = append(append(s, g.neg(30)...), "--fraglen", "8")
	}
	for _, o := range []string{"--fragres", "--fragfirst"} {
		if g.chance(30) {
			s = append(s, o)
		}
	}
	if g.chance(40) {
		s = append(s, pick(g.rng, []string{"--fragmore", "--fraglast"}))
	}
	return s
}

// ah6Spec returns IPv6's -m ah with some of its options.
func (g *rgen) ah6Spec() []string {
	s := []string{"-m", "ah"}
	if g.chance(60) {
		s = append(append(s, g.neg(30)...), "--ahspi", g.rangeArg(1000))
	}
	if g.chance(30) {
		s = append(append(s, g.neg(30)...), "--ahlen", pick(g.rng, []string{"12", "16", "20"}))
	}
	if g.chance(30) {
		s = append(s, "--ahres")
	}
	return s
}
