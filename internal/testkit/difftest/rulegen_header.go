package difftest

import "fmt"

// This file writes the generator's -m dscp, -m tos, -m ecn and -m tcpmss
// matches, from the generator's third random stream (rgen.hdr).

// headerSeedMix derives the third stream's seed from the ruleset's.
const headerSeedMix = 0x7e_ad_e5

// protoNumTCP is the protocol number -p tcp gives.
const protoNumTCP = 6

// headerSpecs returns, sometimes, dscp, tos, ecn and tcpmss matches; the
// TCP tests only when the rule says -p tcp (tcp true).
func (g *rgen) headerSpecs(tcp bool) []string {
	var s []string
	if g.chance(6) {
		s = append(s, "-m", "dscp")
		s = append(s, g.neg(25)...)
		if g.chance(50) {
			s = append(s, "--dscp", fmt.Sprint(pick(g.rng, []int{0, 0x0a, 0x2e, 0x08, 63})))
		} else {
			s = append(s, "--dscp-class", pick(g.rng, []string{"EF", "af41", "CS1", "BE", "AF11"}))
		}
	}
	if g.chance(5) {
		s = append(s, "-m", "tos")
		s = append(s, g.neg(25)...)
		s = append(s, "--tos", pick(g.rng, []string{"Minimize-Delay", "Normal-Service", "0x10/0x3f", "0/0xfc", "0x02/0x03", "0xb8"}))
	}
	if g.chance(5) {
		s = append(s, "-m", "ecn")
		n := len(s)
		if tcp && g.chance(50) {
			s = append(s, g.neg(30)...)
			s = append(s, "--ecn-tcp-ece")
		}
		if tcp && g.chance(40) {
			s = append(s, g.neg(30)...)
			s = append(s, "--ecn-tcp-cwr")
		}
		if len(s) == n || g.chance(40) {
			s = append(s, g.neg(30)...)
			s = append(s, "--ecn-ip-ect", fmt.Sprint(g.rng.Intn(4)))
		}
	}
	if tcp && g.chance(12) {
		s = append(s, "-m", "tcpmss")
		s = append(s, g.neg(25)...)
		s = append(s, "--mss", pick(g.rng, []string{"1460", "536:1460", "1000:", ":1400", "1461:65535", "0"}))
	}
	return s
}
