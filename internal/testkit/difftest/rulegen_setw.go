package difftest

// The SET target in rulesets with sets (GenOptions.Sets): rules without a
// target of their own add the packet's source or destination to a hash:ip
// of its own (genWrittenSet) or delete it, and rules match it, so that
// later packets (and later rules for the same packet) see what earlier
// ones wrote. Drawn from a stream of their own, so that the rest of a
// seed's ruleset stays as it was.

// setwSeedMix derives the stream's seed from the ruleset's.
const setwSeedMix = 0x5eed_5e7

// genWrittenSet is the set the SET targets write: a hash:ip no list:set
// holds (a written set matched through a list:set is refused by xfw).
const genWrittenSet = "xs-w"

// drawSetTargets says whether the random rulesets with sets use the SET
// target (a switch to leave it out while a difference it finds is open).
const drawSetTargets = true

// setTargetSpec returns a SET target's options.
func (g *rgen) setTargetSpec() []string {
	dir := pick(g.rng, []string{"src", "dst"})
	if g.chance(30) {
		return []string{"-j", "SET", "--del-set", genWrittenSet, dir}
	}
	s := []string{"-j", "SET", "--add-set", genWrittenSet, dir}
	if g.chance(40) {
		s = append(s, "--exist")
	}
	return s
}

// writtenSetMatchSpec returns a set match on the written set.
func (g *rgen) writtenSetMatchSpec() []string {
	s := append([]string{"-m", "set"}, g.neg(25)...)
	return append(s, "--match-set", genWrittenSet, pick(g.rng, []string{"src", "dst"}))
}
