package difftest

import (
	"fmt"
	"math/rand"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes random rulesets as iptables-restore text. Text rather
// than IR: both firewalls parse the very same lines, spelled in the many
// ways iptables accepts (long and short options, names and numbers,
// netmasks and prefix lengths), so the comparison covers the front end too.
//
// The generator respects what iptables and the kernel refuse (-i in OUTPUT,
// -o in INPUT, mac in chains OUTPUT reaches, addrtype's device limits in
// the chains the kernel refuses them in, tcp-reset without -p tcp,
// protocol matches without their -p, jump loops) and what xfw documents it
// does not support (docs/compatibility.md: --tcp-option, more than one
// multiport --ports per rule, netmasks with more than 16 non-contiguous
// bits, addrtype's UNREACHABLE and device limits in IPv6).

// GenOptions bound the size of a generated ruleset.
type GenOptions struct {
	// MaxRules bounds the number of rules over all chains.
	MaxRules int
	// MaxUserChains bounds the number of user-defined chains (negative:
	// none).
	MaxUserChains int
	// Sets adds ipsets (hash:net with nomatch entries, hash:ip,
	// hash:ip,port, hash:net,port, bitmap:port, a list:set) of the plan's
	// addresses and ports, and set matches on them (SetLines).
	Sets bool
	// Conntrack makes the ruleset stateful: -m conntrack (--ctstate,
	// --ctproto, --ctstatus, --ctdir, inverted or not) and -m state
	// among the other matches, and often the usual shapes first in a base
	// chain ("accept ESTABLISHED,RELATED", "drop INVALID").
	Conntrack bool
}

// DefaultGenOptions are the sizes GenerateRuleset uses for zero fields.
var DefaultGenOptions = GenOptions{MaxRules: 40, MaxUserChains: 5}

// userChainNames are the names user chains get, in creation order (the
// first ones are short; one is as long as iptables allows: 28 characters).
var userChainNames = []string{"U1", "zone-in", "DOCKER-USER", "f2b_ssh", "Z", "a-chain-name-of-28-chars-xyz"}

// hook bits: which built-in chains reach a chain.
const (
	hookIn uint8 = 1 << iota
	hookFwd
	hookOut
)

// grule is one rule being generated.
type grule struct {
	chain  int
	target string // "ACCEPT", "DROP", "REJECT", "LOG", "RETURN", "", "jump", "goto"
	to     int    // jump / goto destination chain index
	spec   []string
	// fixed rules come with their spec (the stateful shapes).
	fixed bool
}

// rgen holds the state of one ruleset's generation.
type rgen struct {
	rng    *rand.Rand
	plan   Plan
	fam    ir.Family
	chains []string
	hooks  []uint8
	// setLines are the ipset restore lines of the generated sets.
	setLines []string
	// setConds are the set conditions (set, directions,
	// --return-nomatch) rules pick from: few enough for xfw's limits of
	// 8 conditions and 16 lookups per family (a list:set takes one per
	// member).
	setConds [][]string
	// ct is set for stateful rulesets (GenOptions.Conntrack).
	ct bool
	// types draws the addrtype and pkttype matches (rulegen_types.go)
	// from a stream of its own, so that they leave the rest of a seed's
	// ruleset as it was before they existed.
	types *rgen
	// hdr draws the dscp, tos, ecn and tcpmss matches (rulegen_header.go)
	// from a third stream, for the same reason.
	hdr *rgen
	// ext6 draws the IPv6 extension header matches (rulegen_ip6ext.go)
	// from a stream of its own, and keeps the ruleset's distinct ones.
	ext6      *rgen
	ext6Specs [][]string
	// hdr4 draws the sctp, dccp, esp, ah and tcp option matches
	// (rulegen_hdr4.go) from a stream of its own, and keeps the
	// ruleset's distinct conditions by protocol.
	hdr4      *rgen
	hdr4Specs map[string][][]string
	hdr4Count int
	// cm draws the connmark matches and CONNMARK targets
	// (rulegen_connmark.go) of stateful rulesets from a stream of its own.
	cm *rgen
	// rate draws the rate-limiting rules of INPUT (rulegen_rate.go) from
	// a stream of its own, rateFwd those of FORWARD and rateOut those of
	// OUTPUT from others (so the INPUT ones stay what they were before
	// FORWARD's and OUTPUT's existed).
	rate, rateFwd, rateOut *rgen
	// setw draws the SET targets and the matches of the set they write
	// (rulegen_setw.go) from a stream of its own.
	setw *rgen
}

// drawTransportHeaders and drawIP6ExtHeaders say whether the random
// rulesets use the sctp, dccp, esp, IPv4 ah and --tcp-option matches
// (rulegen_hdr4.go) and the IPv6 extension header matches
// (rulegen_ip6ext.go): a switch to leave one out while a difference it
// finds is open (docs/difftest.md, "Open differences"). Each draws from a
// random stream of its own, so turning one off changes no other part of a
// seed's ruleset.
const (
	drawTransportHeaders = true
	drawIP6ExtHeaders    = true
)

// GenerateRuleset returns a random filter table for plan's family, as
// iptables-restore text, determined by seed alone.
func GenerateRuleset(seed int64, plan Plan, opts GenOptions) string {
	if opts.MaxRules <= 0 {
		opts.MaxRules = DefaultGenOptions.MaxRules
	}
	switch {
	case opts.MaxUserChains == 0:
		opts.MaxUserChains = DefaultGenOptions.MaxUserChains
	case opts.MaxUserChains < 0:
		opts.MaxUserChains = 0
	case opts.MaxUserChains > len(userChainNames):
		opts.MaxUserChains = len(userChainNames)
	}
	g := &rgen{rng: rand.New(rand.NewSource(seed)), plan: plan, fam: plan.Family, ct: opts.Conntrack}
	g.types = &rgen{rng: rand.New(rand.NewSource(seed ^ typesSeedMix)), plan: plan, fam: plan.Family}
	g.hdr = &rgen{rng: rand.New(rand.NewSource(seed ^ headerSeedMix)), plan: plan, fam: plan.Family}
	g.ext6 = &rgen{rng: rand.New(rand.NewSource(seed ^ ext6SeedMix)), plan: plan, fam: plan.Family}
	g.hdr4 = &rgen{rng: rand.New(rand.NewSource(seed ^ hdr4SeedMix)), plan: plan, fam: plan.Family}
	g.cm = &rgen{rng: rand.New(rand.NewSource(seed ^ connmarkSeedMix)), plan: plan, fam: plan.Family}
	g.rate = &rgen{rng: rand.New(rand.NewSource(seed ^ rateSeedMix)), plan: plan, fam: plan.Family}
	g.rateFwd = &rgen{rng: rand.New(rand.NewSource(seed ^ rateFwdSeedMix)), plan: plan, fam: plan.Family}
	g.rateOut = &rgen{rng: rand.New(rand.NewSource(seed ^ rateOutSeedMix)), plan: plan, fam: plan.Family}
	g.setw = &rgen{rng: rand.New(rand.NewSource(seed ^ setwSeedMix)), plan: plan, fam: plan.Family}
	g.chains = append([]string(nil), ir.BuiltinChains...)
	nuser := 0
	if opts.MaxUserChains > 0 {
		nuser = g.rng.Intn(opts.MaxUserChains + 1)
	}
	g.chains = append(g.chains, userChainNames[:nuser]...)

	// Phase 1: rules and their targets, jumps only to later chains (no
	// loops, which the kernel refuses).
	rules := g.rate.rateRules(rateInput)
	rules = append(rules, g.rateFwd.rateRules(rateForward)...)
	rules = append(rules, g.rateOut.rateRules(rateOutput)...)
	if g.ct {
		rules = append(rules, g.statefulShapes()...)
	}
	budget := 1 + g.rng.Intn(opts.MaxRules)
	for budget > 0 {
		ci := g.rng.Intn(len(g.chains))
		n := 1 + g.rng.Intn(4)
		for k := 0; k < n && budget > 0; k++ {
			rules = append(rules, g.pickTarget(ci))
			budget--
		}
	}
	// Phase 2: which hooks reach each chain (chains are in topological
	// order: built-ins first, jumps go to later chains).
	g.hooks = make([]uint8, len(g.chains))
	g.hooks[0], g.hooks[1], g.hooks[2] = hookIn, hookFwd, hookOut
	for ci := range g.chains {
		for _, r := range rules {
			if r.chain == ci && (r.target == "jump" || r.target == "goto") {
				g.hooks[r.to] |= g.hooks[ci]
			}
		}
	}
	// Phase 3: matches, within what each chain's hooks allow.
	if opts.Sets {
		g.genSets()
	}
	for _, r := range rules {
		if !r.fixed {
			g.fillRule(r)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# xfw difftest random ruleset, %s, seed %d\n", g.fam, seed)
	for _, line := range g.setLines {
		b.WriteString(setLinePrefix + line + "\n")
	}
	b.WriteString("*filter\n")
	for ci, name := range g.chains {
		if ci < len(ir.BuiltinChains) {
			pol := "ACCEPT"
			if g.rng.Intn(3) == 0 {
				pol = "DROP"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", name, pol)
		} else {
			fmt.Fprintf(&b, ":%s - [0:0]\n", name)
		}
	}
	// Rules appear grouped by chain in a random chain order, each chain's
	// rules in generation order.
	for _, ci := range g.rng.Perm(len(g.chains)) {
		for _, r := range rules {
			if r.chain == ci {
				fmt.Fprintf(&b, "-A %s %s\n", g.chains[ci], strings.Join(r.spec, " "))
			}
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// pickTarget chooses the target of a new rule in chain ci.
func (g *rgen) pickTarget(ci int) *grule {
	r := &grule{chain: ci}
	var later []int
	for j := len(ir.BuiltinChains); j < len(g.chains); j++ {
		if j > ci {
			later = append(later, j)
		}
	}
	switch k := g.rng.Intn(100); {
	case k < 17:
		r.target = "ACCEPT"
	case k < 32:
		r.target = "DROP"
	case k < 43:
		r.target = "REJECT"
	case k < 55:
		r.target = "LOG"
	case k < 60:
		r.target = ""
	case k < 67:
		r.target = "RETURN"
	case len(later) == 0:
		r.target = "DROP"
	case k < 88:
		r.target, r.to = "jump", later[g.rng.Intn(len(later))]
	default:
		r.target, r.to = "goto", later[g.rng.Intn(len(later))]
	}
	return r
}

// chance returns true with probability pct percent.
func (g *rgen) chance(pct int) bool { return g.rng.Intn(100) < pct }

// pick returns a random element.
func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }

// neg returns "!" with probability pct percent, else nil.
func (g *rgen) neg(pct int) []string {
	if g.chance(pct) {
		return []string{"!"}
	}
	return nil
}

// protoChoice is a -p value and what it means for the protocol matches.
type protoChoice struct {
	spell  string
	num    int // -1: none given
	invert bool
}

// fillRule writes the rule's specification.
func (g *rgen) fillRule(r *grule) {
	hooks := g.hooks[r.chain]
	name := g.chains[r.chain]
	var s []string
	add := func(xs ...string) { s = append(s, xs...) }

	// iptables refuses "!" on -s or -d when either names several
	// addresses.
	multiOK, negOK := true, true
	for _, opts := range [][]string{{"-s", "--source", "--src", "-s"}, {"-d", "--destination", "--dst", "-d"}} {
		if !g.chance(33) {
			continue
		}
		var n []string
		if negOK {
			n = g.neg(20)
		}
		add(n...)
		v := g.addrSpec(multiOK && n == nil)
		add(pick(g.rng, opts), v)
		if n != nil {
			multiOK = false
		}
		if strings.Contains(v, ",") {
			negOK = false
		}
	}
	if name != ir.ChainOutput && g.chance(18) {
		add(g.neg(25)...)
		add(pick(g.rng, []string{"-i", "--in-interface"}), g.ifaceSpec(true))
	}
	if name != ir.ChainInput && g.chance(15) {
		add(g.neg(25)...)
		add(pick(g.rng, []string{"-o", "--out-interface"}), g.ifaceSpec(false))
	}
	pc := g.protoSpec(r)
	if pc.num >= 0 || pc.spell != "" {
		if pc.invert {
			add("!")
		}
		add(pick(g.rng, []string{"-p", "--protocol"}), pc.spell)
	}
	if g.fam == ir.IPv4 && g.chance(6) {
		add(g.neg(50)...)
		add(pick(g.rng, []string{"-f", "--fragment"}))
	}
	if !pc.invert {
		add(g.protoMatches(pc.num)...)
		if drawTransportHeaders {
			add(g.hdr4Spec(pc.num)...)
		}
	}
	if g.chance(8) {
		add(g.iprangeSpec()...)
	}
	if g.chance(10) {
		add("-m", "length")
		add(g.neg(20)...)
		add("--length", g.lengthSpec())
	}
	if g.chance(10) {
		add(g.ttlSpec()...)
	}
	// The mac match is valid from PREROUTING, INPUT and FORWARD only: the
	// kernel refuses a table where OUTPUT reaches it.
	if hooks&hookOut == 0 && g.chance(8) {
		add("-m", "mac")
		add(g.neg(25)...)
		add("--mac-source", g.macSpec())
	}
	if len(g.setLines) > 0 && g.chance(15) {
		add(g.setSpec()...)
	}
	if drawSetTargets && len(g.setLines) > 0 && g.setw.chance(15) {
		add(g.setw.writtenSetMatchSpec()...)
	}
	if g.ct && g.chance(35) {
		add(g.ctSpec()...)
	}
	if g.types.chance(8) {
		add(g.types.addrTypeSpec(hooks)...)
	}
	if drawIP6ExtHeaders && g.fam == ir.IPv6 && g.ext6.chance(10) {
		add(g.ip6extSpec()...)
	}
	if g.types.chance(5) {
		add(g.types.pktTypeSpec()...)
	}
	if g.ct && g.cm.chance(8) {
		add(g.cm.connmarkSpec()...)
	}
	if hooks&^hookOut == 0 && g.cm.chance(10) {
		add(g.cm.ownerSpec()...)
	}
	if g.cm.chance(5) {
		add(g.cm.devGroupSpec(hooks)...)
	}
	add(g.hdr.headerSpecs(pc.num == protoNumTCP && !pc.invert)...)
	if g.chance(8) {
		add("-m", "comment", "--comment", quote(pick(g.rng, []string{"allow web", "block-it", "say \\\"hi\\\"", "x", "ssh from lan"})))
	}
	add(g.targetSpec(r, pc)...)
	r.spec = s
}

// quote returns s in double quotes for iptables-restore's tokenizer.
func quote(s string) string { return "\"" + s + "\"" }

// rejectTypes are the --reject-with values of each family (canonical names
// and the aliases iptables accepts), tcp-reset apart.
var rejectTypes = map[ir.Family][]string{
	ir.IPv4: {"icmp-net-unreachable", "icmp-host-unreachable", "icmp-port-unreachable", "icmp-proto-unreachable",
		"icmp-net-prohibited", "icmp-host-prohibited", "icmp-admin-prohibited", "net-unreach", "host-prohib", "port-unreach"},
	ir.IPv6: {"icmp6-no-route", "no-route", "icmp6-adm-prohibited", "adm-prohibited", "icmp6-addr-unreachable",
		"addr-unreach", "icmp6-port-unreachable", "port-unreach", "icmp6-policy-fail", "icmp6-reject-route"},
}

// logLevels are the --log-level values used. Levels 0–3 are left out on
// purpose: the console prints them (kernel.printk's console level is
// usually 4), and a serial console makes thousands of lines slow. The level
// changes nothing but the syslog priority of the line.
var logLevels = []string{"4", "5", "6", "7", "warning", "notice", "info", "debug"}

// logPrefixes are --log-prefix values (iptables allows 29 characters).
var logPrefixes = []string{"dt: ", "IN-DROP ", "[UFW BLOCK] ", "fw", "a b c: ", "x-29-characters-long-prefix:"}

// targetSpec returns the target's options.
func (g *rgen) targetSpec(r *grule, pc protoChoice) []string {
	switch r.target {
	case "":
		if g.ct && g.cm.chance(40) {
			return g.cm.connmarkTargetSpec()
		}
		if drawSetTargets && len(g.setLines) > 0 && g.setw.chance(60) {
			return g.setw.setTargetSpec()
		}
		return nil
	case "jump":
		return []string{"-j", g.chains[r.to]}
	case "goto":
		return []string{pick(g.rng, []string{"-g", "--goto"}), g.chains[r.to]}
	case "REJECT":
		s := []string{"-j", "REJECT"}
		if g.chance(20) {
			return s
		}
		types := rejectTypes[g.fam]
		if pc.num == 6 && !pc.invert {
			types = append(types, "tcp-reset", "tcp-reset", "tcp-reset")
			if g.fam == ir.IPv4 {
				types = append(types, "tcp-rst")
			}
		}
		return append(s, "--reject-with", pick(g.rng, types))
	case "LOG":
		s := []string{"-j", "LOG"}
		if g.chance(75) {
			s = append(s, "--log-prefix", quote(pick(g.rng, logPrefixes)))
		}
		if g.chance(70) {
			s = append(s, "--log-level", pick(g.rng, logLevels))
		}
		for _, f := range []string{"--log-tcp-sequence", "--log-tcp-options", "--log-ip-options", "--log-uid", "--log-macdecode"} {
			if g.chance(20) {
				s = append(s, f)
			}
		}
		return s
	default:
		return []string{pick(g.rng, []string{"-j", "-j", "--jump"}), r.target}
	}
}
