package difftest

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes the generator's rate-limiting rules (-m limit and -m
// hashlimit), from a random stream of their own (rgen.rate), so that they
// leave the rest of a seed's ruleset as it was before they existed.
//
// Their rates are so slow (a token an hour at most) that no bucket refills
// during a run: which packets pass depends only on the sequence of packets
// that reached the rule, which both firewalls see in the same order. Each
// rule is first in INPUT and selects UDP to a port of its own (ratePorts),
// followed by a rule with the opposite verdict for the same port, so that
// the packets a bucket refuses are told apart from those it passes. The
// packet generator sends bursts to these ports (packetgen_rate.go); its
// other probes may reach the rules too and take tokens, the same ones on
// both sides. Every run starts with fresh buckets on both sides: a
// restore fills -m limit's again, and hashlimit's tables are dropped
// before each load (Session.loadBoth), so that retries and reductions see
// what a first run sees.

// rateSeedMix derives the rate rules' stream from the seed.
const rateSeedMix = 0x5eed_4a7e

// drawRateLimits says whether the random rulesets use -m limit and -m
// hashlimit: a switch to leave them out while a difference they find is
// open (docs/difftest.md, "Open differences").
const drawRateLimits = true

// ratePorts are the UDP ports the rate rules select (one rule each), far
// from the ports the other rules name.
var ratePorts = []int{4701, 4702, 4703}

// rateSlow are rates slow enough that nothing refills during a run,
// spelled in the ways iptables accepts.
var rateSlow = []string{"1/hour", "1/h", "2/hour", "3/hour"}

// hashlimitModes are --hashlimit-mode values (with the masks that apply).
var hashlimitModes = []string{"srcip", "dstip", "srcport", "dstport", "srcip,dstport", "srcip,srcport", "dstip,dstport"}

// rateRules returns the rate rules of INPUT (chain 0), or none.
func (g *rgen) rateRules() []*grule {
	if !drawRateLimits || !g.chance(60) {
		return nil
	}
	var rules []*grule
	for i, port := range ratePorts[:1+g.rng.Intn(len(ratePorts))] {
		var m []string
		if g.chance(45) {
			m = g.limitSpec()
		} else {
			m = g.hashlimitSpec(i)
		}
		pass, rest := "ACCEPT", "DROP"
		if g.chance(40) {
			pass, rest = "DROP", "ACCEPT"
		}
		sel := []string{"-p", "udp", "-m", "udp", "--dport", fmt.Sprint(port)}
		rules = append(rules,
			&grule{chain: 0, target: pass, fixed: true, spec: append(append(append([]string(nil), sel...), m...), "-j", pass)},
			&grule{chain: 0, target: rest, fixed: true, spec: append(append([]string(nil), sel...), "-j", rest)})
	}
	return rules
}

// limitSpec returns a -m limit match with a slow rate and a burst of 1–5
// (or the default 5).
func (g *rgen) limitSpec() []string {
	s := []string{"-m", "limit", "--limit", pick(g.rng, rateSlow)}
	if g.chance(80) {
		s = append(s, "--limit-burst", fmt.Sprint(1+g.rng.Intn(5)))
	}
	return s
}

// hashlimitSpec returns a -m hashlimit match (table name dt-rate-I) with
// a slow rate, a burst of 1–5, a mode and masks.
func (g *rgen) hashlimitSpec(i int) []string {
	op := "--hashlimit-upto"
	if g.chance(25) {
		op = "--hashlimit-above"
	}
	mode := pick(g.rng, hashlimitModes)
	s := []string{"-m", "hashlimit", op, pick(g.rng, rateSlow), "--hashlimit-burst", fmt.Sprint(1 + g.rng.Intn(5)),
		"--hashlimit-mode", mode}
	bits := 32
	if g.fam == ir.IPv6 {
		bits = 128
	}
	if strings.Contains(mode, "srcip") && g.chance(60) {
		s = append(s, "--hashlimit-srcmask", fmt.Sprint(pick(g.rng, []int{bits, bits - 1, 24, 8, 1})))
	}
	if strings.Contains(mode, "dstip") && g.chance(60) {
		s = append(s, "--hashlimit-dstmask", fmt.Sprint(pick(g.rng, []int{bits, 24, 0})))
	}
	return append(s, "--hashlimit-name", fmt.Sprintf("dt-rate-%d", i))
}
