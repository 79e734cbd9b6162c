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
// rule is first in INPUT, FORWARD or OUTPUT and selects UDP to a port of its own
// (rateChain.ports), followed by a rule with the opposite verdict for the
// same port, so that the packets a bucket refuses are told apart from
// those it passes. The
// packet generator sends bursts to these ports (packetgen_rate.go); its
// other probes may reach the rules too and take tokens, the same ones on
// both sides. Every run starts with fresh buckets on both sides: a
// restore fills -m limit's again, and hashlimit's tables are dropped
// before each load (Session.loadBoth), so that retries and reductions see
// what a first run sees.

// rateSeedMix, rateFwdSeedMix and rateOutSeedMix derive the INPUT,
// FORWARD and OUTPUT rate rules' streams from the seed (OUTPUT's also
// drives its bursts, so that the INPUT and FORWARD ones stay as they were).
const (
	rateSeedMix    = 0x5eed_4a7e
	rateFwdSeedMix = 0x5eed_4a7f
	rateOutSeedMix = 0x5eed_4a80
)

// drawRateLimits says whether the random rulesets use -m limit and -m
// hashlimit: a switch to leave them out while a difference they find is
// open (docs/difftest.md, "Open differences").
const drawRateLimits = true

// rateChain is where rate rules go: a built-in chain (its index among the
// generator's chains), the UDP ports its rules select (one rule each, far
// from the ports the other rules name), the chance of any, and the
// hashlimit tables' name prefix.
type rateChain struct {
	chain  int
	ports  []int
	chance int
	table  string
}

// rateInput, rateForward and rateOutput are INPUT's rate rules (to fw's
// addresses), FORWARD's (to sink and beyond) and OUTPUT's (fw's own
// packets, to sink, beyond it and to gen).
var (
	rateInput   = rateChain{chain: 0, ports: []int{4701, 4702, 4703}, chance: 60, table: "dt-rate-"}
	rateForward = rateChain{chain: 1, ports: []int{4711, 4712}, chance: 50, table: "dt-ratef-"}
	rateOutput  = rateChain{chain: 2, ports: []int{4721, 4722}, chance: 50, table: "dt-rateo-"}
)

// rateSlow are rates slow enough that nothing refills during a run,
// spelled in the ways iptables accepts.
var rateSlow = []string{"1/hour", "1/h", "2/hour", "3/hour"}

// hashlimitModes are --hashlimit-mode values (with the masks that apply).
var hashlimitModes = []string{"srcip", "dstip", "srcport", "dstport", "srcip,dstport", "srcip,srcport", "dstip,dstport"}

// rateRules returns the rate rules of rc's chain, or none.
func (g *rgen) rateRules(rc rateChain) []*grule {
	if !drawRateLimits || !g.chance(rc.chance) {
		return nil
	}
	var rules []*grule
	for i, port := range rc.ports[:1+g.rng.Intn(len(rc.ports))] {
		var m []string
		if g.chance(45) {
			m = g.limitSpec()
		} else {
			m = g.hashlimitSpec(rc.table + fmt.Sprint(i))
		}
		pass, rest := "ACCEPT", "DROP"
		if g.chance(40) {
			pass, rest = "DROP", "ACCEPT"
		}
		sel := []string{"-p", "udp", "-m", "udp", "--dport", fmt.Sprint(port)}
		rules = append(rules,
			&grule{chain: rc.chain, target: pass, fixed: true, spec: append(append(append([]string(nil), sel...), m...), "-j", pass)},
			&grule{chain: rc.chain, target: rest, fixed: true, spec: append(append([]string(nil), sel...), "-j", rest)})
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

// hashlimitSpec returns a -m hashlimit match of table name with a slow
// rate, a burst of 1–5, a mode and masks.
func (g *rgen) hashlimitSpec(name string) []string {
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
	return append(s, "--hashlimit-name", name)
}
