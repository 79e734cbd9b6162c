package difftest

import (
	"fmt"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes the generator's -m sctp, -m dccp, -m esp, IPv4 -m ah
// and tcp --tcp-option matches, from their own random stream (rgen.hdr4),
// so that the rulesets of other seeds stay the same. A ruleset uses at
// most maxHdr4Specs distinct conditions (xfw takes 7), reused at random;
// sctp and dccp ports alone are no conditions. Inverted --chunk-types and
// --dccp-option are left out: where they hotdrop, the kernel counts the
// rule before dropping and xfw does not (docs/differences.md).

// hdr4SeedMix derives the stream's seed from the ruleset's.
const hdr4SeedMix = 0x5eed_4d4

// maxHdr4Specs bounds the distinct conditions of one ruleset.
const maxHdr4Specs = 6

// Protocol numbers of the matches.
const (
	protoNumSCTP = 132
	protoNumDCCP = 33
	protoNumESP  = 50
	protoNumAH   = 51
)

// hdr4Spec returns, sometimes, the match of the rule's protocol num.
func (g *rgen) hdr4Spec(num int) []string {
	x := g.hdr4
	switch {
	case num == protoNumSCTP && x.chance(40), num == protoNumDCCP && x.chance(40):
		if x.chance(50) {
			return x.hdr4Ports(map[int]string{protoNumSCTP: "sctp", protoNumDCCP: "dccp"}[num])
		}
	case num == protoNumESP && x.chance(40), num == protoNumAH && g.fam == ir.IPv4 && x.chance(40):
	case num == protoNumTCP && x.chance(6):
	default:
		return nil
	}
	key := fmt.Sprint(num)
	if specs := g.hdr4Specs[key]; len(specs) > 0 && (g.hdr4Count == maxHdr4Specs || x.chance(40)) {
		return specs[x.rng.Intn(len(specs))]
	}
	if g.hdr4Count == maxHdr4Specs {
		return nil
	}
	var s []string
	switch num {
	case protoNumSCTP:
		s = append(x.hdr4Ports("sctp"), x.chunkTypes()...)
	case protoNumDCCP:
		s = x.dccpSpec()
	case protoNumESP:
		s = append(append([]string{"-m", "esp"}, x.neg(25)...), "--espspi", x.rangeArg(10))
	case protoNumAH:
		s = append(append([]string{"-m", "ah"}, x.neg(25)...), "--ahspi", x.rangeArg(10))
	default:
		s = append(append([]string{"-m", "tcp"}, x.neg(30)...), "--tcp-option", pick(x.rng, []string{"2", "3", "4", "8", "1", "30"}))
	}
	if g.hdr4Specs == nil {
		g.hdr4Specs = map[string][][]string{}
	}
	g.hdr4Specs[key] = append(g.hdr4Specs[key], s)
	g.hdr4Count++
	return s
}

// hdr4Ports returns -m NAME with some port options.
func (g *rgen) hdr4Ports(name string) []string {
	s := []string{"-m", name}
	if g.chance(50) {
		s = append(append(s, g.neg(25)...), "--sport", fmt.Sprintf("%d:%d", g.port()/2, 32768+g.port()/2))
	}
	if g.chance(60) {
		s = append(append(s, g.neg(25)...), "--dport", fmt.Sprint(g.port()))
	}
	return s
}

// chunkTypes returns --chunk-types with a match type and chunks, some
// with flags.
func (g *rgen) chunkTypes() []string {
	chunks := pick(g.rng, []string{"DATA", "INIT,DATA", "DATA:Be,SACK", "ABORT:T", "ALL", "NONE",
		"INIT_ACK,HEARTBEAT,COOKIE_ECHO", "SHUTDOWN_COMPLETE:t,DATA:i"})
	return []string{"--chunk-types", pick(g.rng, []string{"any", "all", "only"}), chunks}
}

// dccpSpec returns -m dccp with types or an option (and maybe ports).
func (g *rgen) dccpSpec() []string {
	s := g.hdr4Ports("dccp")
	if g.chance(60) {
		s = append(append(s, g.neg(25)...), "--dccp-types",
			pick(g.rng, []string{"REQUEST", "DATA,ACK", "INVALID", "RESET,SYNC,SYNCACK", "DATAACK,CLOSE"}))
	}
	if len(s) == 2 || g.chance(40) {
		s = append(s, "--dccp-option", pick(g.rng, []string{"1", "32", "44", "255"}))
	}
	return s
}
