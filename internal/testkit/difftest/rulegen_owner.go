package difftest

import "fmt"

// This file writes the generator's -m owner matches, for chains only
// OUTPUT reaches (the kernel refuses the match elsewhere), from the
// connmark stream (rgen.cm), so that they leave the rest of a seed's
// ruleset as it was before they existed. fw's own packets come from
// root's sockets, or from the kernel's (replies, errors).

// ownerSpec returns an owner match.
func (g *rgen) ownerSpec() []string {
	s := []string{"-m", "owner"}
	n := 0
	if g.chance(60) {
		s = append(s, g.neg(30)...)
		s = append(s, "--uid-owner", pick(g.rng, []string{"0", "root", "1-10", "0-65534", "1000"}))
		n++
	}
	if g.chance(40) {
		s = append(s, g.neg(30)...)
		s = append(s, "--gid-owner", fmt.Sprint(pick(g.rng, []int{0, 1, 100})))
		n++
	}
	if n == 0 || g.chance(30) {
		s = append(s, g.neg(40)...)
		s = append(s, "--socket-exists")
	}
	return s
}
