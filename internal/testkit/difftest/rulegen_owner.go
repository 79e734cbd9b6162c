package difftest

import "fmt"

// This file writes the generator's -m owner matches, for chains only
// OUTPUT reaches (the kernel refuses the match elsewhere), and -m devgroup
// matches, from the connmark stream (rgen.cm), so that they leave the rest
// of a seed's ruleset as it was before they existed. fw's own packets come
// from root's sockets, or from the kernel's (replies, errors).

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

// devGroupSpec returns a devgroup match for a chain reached from hooks:
// --src-group where OUTPUT does not reach, --dst-group where INPUT does
// not (the kernel refuses them there); nil when neither is allowed. The
// test topology's devices are all in group 0: masks and ! decide.
func (g *rgen) devGroupSpec(hooks uint8) []string {
	val := func() string {
		return pick(g.rng, []string{"0", "1", "0x0/0x1", "0x2/0x2", "default", "0xffffffff/0x0"})
	}
	var s []string
	if hooks&hookOut == 0 && g.chance(70) {
		s = append(s, g.neg(30)...)
		s = append(s, "--src-group", val())
	}
	if hooks&hookIn == 0 && (len(s) == 0 || g.chance(30)) {
		s = append(s, g.neg(30)...)
		s = append(s, "--dst-group", val())
	}
	if len(s) == 0 {
		return nil
	}
	return append([]string{"-m", "devgroup"}, s...)
}
