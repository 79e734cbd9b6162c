package difftest

import "fmt"

// This file writes the generator's -m connmark matches and -j CONNMARK
// targets (stateful rulesets only: a connection's mark needs tracking),
// from a random stream of their own (rgen.cm), so that they leave the rest
// of a seed's ruleset as it was before they existed.

// connmarkSeedMix derives the stream's seed from the ruleset's.
const connmarkSeedMix = 0x5eed_c3c

// connmarkValues are the marks the rules set and test: few, so that rules
// meet each other's marks.
var connmarkValues = []uint32{0, 1, 2, 3, 0x10, 0x11}

// markMaskText returns VALUE[/MASK] in one of iptables' spellings.
func (g *rgen) markMaskText(value uint32) string {
	switch g.rng.Intn(4) {
	case 0:
		return fmt.Sprint(value)
	case 1:
		return fmt.Sprintf("0x%x", value)
	case 2:
		return fmt.Sprintf("0x%x/0x%x", value, pick(g.rng, []uint32{0xf, 0x1, 0x10, 0xffffffff}))
	}
	return fmt.Sprintf("%d/%d", value, pick(g.rng, []uint32{3, 15, 17}))
}

// connmarkSpec returns a connmark match.
func (g *rgen) connmarkSpec() []string {
	s := []string{"-m", "connmark"}
	s = append(s, g.neg(25)...)
	return append(s, "--mark", g.markMaskText(pick(g.rng, connmarkValues)))
}

// connmarkTargetSpec returns a CONNMARK target in one of its spellings.
func (g *rgen) connmarkTargetSpec() []string {
	s := []string{"-j", "CONNMARK"}
	v := pick(g.rng, connmarkValues)
	switch g.rng.Intn(7) {
	case 0:
		s = append(s, "--set-mark", g.markMaskText(v))
	case 1:
		s = append(s, "--set-xmark", g.markMaskText(v))
	case 2:
		s = append(s, pick(g.rng, []string{"--and-mark", "--or-mark", "--xor-mark"}), fmt.Sprint(v))
	case 3:
		s = append(s, pick(g.rng, []string{"--save-mark", "--restore-mark"}))
		if g.chance(40) {
			s = append(s, "--mask", "0xf")
		}
	default:
		s = append(s, "--set-mark", fmt.Sprint(v))
	}
	if g.chance(10) {
		s = append(s, pick(g.rng, []string{"--left-shift-mark", "--right-shift-mark"}), fmt.Sprint(g.rng.Intn(5)))
	}
	return s
}
