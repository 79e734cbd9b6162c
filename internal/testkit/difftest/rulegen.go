package difftest

import (
	"fmt"
	"math/rand"
	"net"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes random rulesets as iptables-restore text. Text rather
// than IR: both firewalls parse the very same lines, spelled in the many
// ways iptables accepts (long and short options, names and numbers,
// netmasks and prefix lengths), so the comparison covers the front end too.
//
// The generator respects what iptables and the kernel refuse (-i in OUTPUT,
// -o in INPUT, mac in chains OUTPUT reaches, tcp-reset without -p tcp,
// protocol matches without their -p, jump loops) and what xfw documents it
// does not support (README: --tcp-option, more than one multiport --ports
// per rule, netmasks with more than 16 non-contiguous bits).

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

// setLinePrefix starts the ruleset comment lines that carry the ipsets a
// ruleset uses, as ipset restore lines: both sides load them into their
// ipset (the kernel's, xfw's) before the rules (SetLines).
const setLinePrefix = "# ipset: "

// SetLines returns the ipset restore lines a ruleset carries.
func SetLines(ruleset string) []string {
	var out []string
	for _, line := range strings.Split(ruleset, "\n") {
		if rest, ok := strings.CutPrefix(line, setLinePrefix); ok {
			out = append(out, rest)
		}
	}
	return out
}

// SetLookup returns what iptables' set match needs to know of the sets a
// ruleset carries (SetLines: their create lines).
func SetLookup(ruleset string) iptables.SetLookup {
	sets := map[string]iptables.SetInfo{}
	for _, line := range SetLines(ruleset) {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "create" {
			continue
		}
		info := iptables.SetInfo{Family: ir.IPv4, Type: f[2]}
		for i := 3; i+1 < len(f); i++ {
			if f[i] == "family" && f[i+1] == "inet6" {
				info.Family = ir.IPv6
			}
		}
		_, parts, _ := strings.Cut(f[2], ":")
		info.Dims = strings.Count(parts, ",") + 1
		// list:set and bitmap:port have no family (either applies);
		// list:set's members decide its dimensions.
		switch f[2] {
		case "list:set":
			info.Family, info.Dims = 0, 0
		case "bitmap:port":
			info.Family = 0
		}
		sets[f[1]] = info
	}
	return func(name string) (iptables.SetInfo, bool) {
		info, ok := sets[name]
		return info, ok
	}
}

// genSetNames are the generated sets: a hash:net, a hash:ip, a
// hash:ip,port, a hash:net,port, a bitmap:port and a list:set of three of
// them.
var genSetNames = [6]string{"xs-net", "xs-ip", "xs-ipp", "xs-np", "xs-bp", "xs-ls"}

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
}

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
	g.chains = append([]string(nil), ir.BuiltinChains...)
	nuser := 0
	if opts.MaxUserChains > 0 {
		nuser = g.rng.Intn(opts.MaxUserChains + 1)
	}
	g.chains = append(g.chains, userChainNames[:nuser]...)

	// Phase 1: rules and their targets, jumps only to later chains (no
	// loops, which the kernel refuses).
	var rules []*grule
	if g.ct {
		rules = g.statefulShapes()
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
	if g.ct && g.chance(35) {
		add(g.ctSpec()...)
	}
	if g.chance(8) {
		add("-m", "comment", "--comment", quote(pick(g.rng, []string{"allow web", "block-it", "say \\\"hi\\\"", "x", "ssh from lan"})))
	}
	add(g.targetSpec(r, pc)...)
	r.spec = s
}

// genSets makes the sets of the ruleset (g.setLines): a hash:net of
// prefixes around the plan's interesting addresses, some of them nomatch
// entries inside listed networks, a hash:ip of some of them, and the sets
// with ports (genPortSets); and the set conditions rules pick from.
func (g *rgen) genSets() {
	fam := "inet"
	if g.fam == ir.IPv6 {
		fam = "inet6"
	}
	bits := g.fam.AddrBits()
	g.setLines = append(g.setLines,
		fmt.Sprintf("create %s hash:net family %s", genSetNames[0], fam),
		fmt.Sprintf("create %s hash:ip family %s", genSetNames[1], fam))
	addrs := g.interestingAddrs()
	seen := map[string]bool{}
	for n := 2 + g.rng.Intn(5); n > 0; n-- {
		a := pick(g.rng, addrs)
		// hash:net takes /1 to /bits (not /0).
		l := 1 + g.rng.Intn(bits)
		if g.chance(50) {
			l = bits - g.rng.Intn(bits/4)
		}
		p := netip.PrefixFrom(a, l).Masked()
		if seen[p.String()] {
			continue
		}
		seen[p.String()] = true
		line := fmt.Sprintf("add %s %s", genSetNames[0], p)
		if l > bits/2 && g.chance(30) {
			line += " nomatch"
		}
		g.setLines = append(g.setLines, line)
	}
	for n := 1 + g.rng.Intn(4); n > 0; n-- {
		a := pick(g.rng, addrs)
		if seen[a.String()] {
			continue
		}
		seen[a.String()] = true
		g.setLines = append(g.setLines, fmt.Sprintf("add %s %s", genSetNames[1], a))
	}
	g.genPortSets(fam, addrs)
	for len(g.setConds) < 5 {
		c := []string{"--match-set", pick(g.rng, genSetNames[:]), pick(g.rng, []string{"src", "dst", "src,dst", "dst,src", "dst,dst", "src,src"})}
		if g.chance(20) {
			c = append(c, "--return-nomatch")
		}
		g.setConds = append(g.setConds, c)
	}
}

// genPortSets makes the sets with ports (hash:ip,port, hash:net,port,
// bitmap:port, some entries nomatch or of other protocols) and the
// list:set of xs-ip, xs-np and xs-bp.
func (g *rgen) genPortSets(fam string, addrs []netip.Addr) {
	bits := g.fam.AddrBits()
	icmp := "icmp:echo-request"
	if g.fam == ir.IPv6 {
		icmp = "icmpv6:echo-request"
	}
	portSpec := func() string {
		switch g.rng.Intn(6) {
		case 0:
			return icmp
		case 1:
			return "gre:0"
		case 2, 3:
			return fmt.Sprintf("udp:%d", g.port())
		}
		return fmt.Sprintf("tcp:%d", g.port())
	}
	// Counters on some (their counting probes must not change a
	// verdict); hash:ip and hash:net keep the DXR tables.
	g.setLines = append(g.setLines,
		fmt.Sprintf("create %s hash:ip,port family %s counters", genSetNames[2], fam),
		fmt.Sprintf("create %s hash:net,port family %s", genSetNames[3], fam),
		fmt.Sprintf("create %s bitmap:port range 0-65535 counters", genSetNames[4]),
		fmt.Sprintf("create %s list:set counters", genSetNames[5]))
	seen := map[string]bool{}
	add := func(line string) {
		if !seen[line] {
			seen[line] = true
			g.setLines = append(g.setLines, line)
		}
	}
	for n := 1 + g.rng.Intn(4); n > 0; n-- {
		add(fmt.Sprintf("add %s %s,%s", genSetNames[2], pick(g.rng, addrs), portSpec()))
	}
	for n := 1 + g.rng.Intn(4); n > 0; n-- {
		l := bits - g.rng.Intn(bits/2)
		line := fmt.Sprintf("add %s %s,%s", genSetNames[3], netip.PrefixFrom(pick(g.rng, addrs), l).Masked(), portSpec())
		if l > bits/2 && g.chance(30) {
			line += " nomatch"
		}
		add(line)
	}
	for n := 1 + g.rng.Intn(4); n > 0; n-- {
		add(fmt.Sprintf("add %s %d", genSetNames[4], g.port()))
	}
	for _, m := range []string{genSetNames[1], genSetNames[3], genSetNames[4]} {
		add(fmt.Sprintf("add %s %s", genSetNames[5], m))
	}
}

// setSpec returns a set match on one of the generated sets.
func (g *rgen) setSpec() []string {
	s := []string{"-m", "set"}
	s = append(s, g.neg(25)...)
	return append(s, pick(g.rng, g.setConds)...)
}

// quote returns s in double quotes for iptables-restore's tokenizer.
func quote(s string) string { return "\"" + s + "\"" }

// interestingAddrs returns addresses worth naming in rules.
func (g *rgen) interestingAddrs() []netip.Addr {
	p := g.plan
	out := []netip.Addr{p.Gen, p.FwIn, p.FwOut, p.Sink, p.FwVLAN, p.GenVLAN,
		p.GenNet.Addr(), p.SinkNet.Addr(), p.FarGen.Addr(), p.FarSink.Addr()}
	out = append(out, g.randomIn(p.FarGen), g.randomIn(p.FarSink), g.randomIn(p.GenNet), g.randomIn(p.SinkNet))
	return out
}

// randomIn returns a random address of prefix pr.
func (g *rgen) randomIn(pr netip.Prefix) netip.Addr {
	b := pr.Addr().AsSlice()
	for i := pr.Bits(); i < len(b)*8; i++ {
		if g.rng.Intn(2) == 1 {
			b[i/8] |= 0x80 >> uint(i%8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// randomAddr returns a completely random address of the family.
func (g *rgen) randomAddr() netip.Addr {
	b := make([]byte, g.fam.AddrBits()/8)
	g.rng.Read(b)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// prefixLen returns a prefix length, biased to the interesting ones.
func (g *rgen) prefixLen() int {
	bits := g.fam.AddrBits()
	if g.chance(40) {
		return g.rng.Intn(bits + 1) // every length, 0 included
	}
	if g.fam == ir.IPv4 {
		return pick(g.rng, []int{0, 1, 8, 16, 23, 24, 25, 30, 31, 32, 32})
	}
	return pick(g.rng, []int{0, 1, 16, 47, 48, 63, 64, 65, 120, 127, 128, 128})
}

// maxFreeMaskBits keeps non-contiguous netmasks within what xfw's compiler
// supports (16 free bits above the lowest set bit; README "What works").
const maxFreeMaskBits = 12

// addrSpec returns an -s/-d value: an address, with a prefix length, a
// contiguous netmask or a non-contiguous one; with multi, sometimes two
// addresses (iptables refuses "!" with several).
func (g *rgen) addrSpec(multi bool) string {
	var a netip.Addr
	if g.chance(85) {
		a = pick(g.rng, g.interestingAddrs())
	} else {
		a = g.randomAddr()
	}
	switch k := g.rng.Intn(10); {
	case k < 1:
		return a.String() // a host
	case k < 6:
		return fmt.Sprintf("%s/%d", a, g.prefixLen())
	case k < 8:
		return fmt.Sprintf("%s/%s", a, maskAddr(g.fam, prefixMask(g.fam, g.prefixLen())))
	case k < 9 && multi:
		// Two addresses: iptables makes one rule per address.
		return fmt.Sprintf("%s/%d,%s", a, g.prefixLen(), pick(g.rng, g.interestingAddrs()))
	default:
		return fmt.Sprintf("%s/%s", a, maskAddr(g.fam, g.oddMask()))
	}
}

// prefixMask returns the netmask of a prefix length as bytes.
func prefixMask(fam ir.Family, n int) []byte {
	b := make([]byte, fam.AddrBits()/8)
	for i := 0; i < n; i++ {
		b[i/8] |= 0x80 >> uint(i%8)
	}
	return b
}

// maskAddr prints a netmask as an address.
func maskAddr(fam ir.Family, m []byte) string {
	a, _ := netip.AddrFromSlice(m)
	return a.String()
}

// oddMask returns a non-contiguous netmask: a prefix mask with up to
// maxFreeMaskBits of its bits cleared (its lowest set bit kept).
func (g *rgen) oddMask() []byte {
	bits := g.fam.AddrBits()
	n := 2 + g.rng.Intn(bits-1) // at least two bits set
	m := prefixMask(g.fam, n)
	clear := 1 + g.rng.Intn(maxFreeMaskBits)
	for i := 0; i < clear; i++ {
		pos := g.rng.Intn(n - 1) // never the lowest set bit (n-1)
		m[pos/8] &^= 0x80 >> uint(pos%8)
	}
	return m
}

// ifaceSpec returns an -i/-o value: names of fw's devices, wildcards, and
// names no device has.
func (g *rgen) ifaceSpec(in bool) string {
	names := []string{"in0", "out0", "lo", VLANIfname, "in+", "out+", "+", "in0.+", "i+", "eth+", "eth0", "o+", "lo+"}
	if in {
		names = append(names, "in0", "in+")
	} else {
		names = append(names, "out0", "out+")
	}
	return pick(g.rng, names)
}

// protoSpec chooses the rule's -p.
func (g *rgen) protoSpec(r *grule) protoChoice {
	icmpSpell, icmpNum := "icmp", 1
	if g.fam == ir.IPv6 {
		icmpSpell, icmpNum = pick(g.rng, []string{"ipv6-icmp", "icmpv6", "58"}), 58
	}
	switch k := g.rng.Intn(100); {
	case k < 30 && r.target != "REJECT":
		return protoChoice{num: -1}
	case k < 30:
		// REJECT with tcp-reset needs -p tcp: give it one more often.
		return protoChoice{spell: "tcp", num: 6}
	case k < 52:
		return protoChoice{spell: pick(g.rng, []string{"tcp", "tcp", "6", "TCP"}), num: 6}
	case k < 70:
		return protoChoice{spell: pick(g.rng, []string{"udp", "udp", "17"}), num: 17}
	case k < 82:
		return protoChoice{spell: icmpSpell, num: icmpNum}
	case k < 88:
		other := []protoChoice{{"gre", 47, false}, {"47", 47, false}, {"esp", 50, false}, {"ah", 51, false},
			{"sctp", 132, false}, {"udplite", 136, false}, {"dccp", 33, false}, {"255", 255, false}}
		if g.fam == ir.IPv6 {
			// ip6tables' -p icmp is protocol 1, not ICMPv6.
			other = append(other, protoChoice{"icmp", 1, false}, protoChoice{"ipv6-frag", 44, false},
				protoChoice{"ipv6-nonxt", 59, false}, protoChoice{"60", 60, false})
		} else {
			other = append(other, protoChoice{"igmp", 2, false})
		}
		return pick(g.rng, other)
	case k < 92:
		return protoChoice{spell: pick(g.rng, []string{"all", "0"}), num: 0}
	default:
		return protoChoice{spell: pick(g.rng, []string{"tcp", "udp", icmpSpell}), num: 0, invert: true}
	}
}

// interestingPorts are port values rules name.
var interestingPorts = []int{0, 1, 22, 53, 80, 443, 1023, 1024, 5000, 8080, 32768, 65534, 65535}

// port returns a port number.
func (g *rgen) port() int {
	if g.chance(75) {
		return pick(g.rng, interestingPorts)
	}
	return g.rng.Intn(65536)
}

// portSpec returns a port or range as tcp/udp spell it.
func (g *rgen) portSpec() string {
	switch k := g.rng.Intn(10); {
	case k < 4:
		return fmt.Sprint(g.port())
	case k < 5:
		return pick(g.rng, []string{"ssh", "domain", "http", "https"})
	case k < 8:
		a, b := g.port(), g.port()
		if a > b {
			a, b = b, a
		}
		return fmt.Sprintf("%d:%d", a, b)
	case k < 9:
		return fmt.Sprintf(":%d", g.port())
	default:
		return fmt.Sprintf("%d:", g.port())
	}
}

// protoMatches returns the matches that need -p: tcp, udp, multiport,
// icmp and icmp6.
func (g *rgen) protoMatches(num int) []string {
	var s []string
	add := func(xs ...string) { s = append(s, xs...) }
	switch num {
	case 6, 17:
		if g.chance(70) {
			if g.chance(70) {
				add("-m", map[int]string{6: "tcp", 17: "udp"}[num])
			}
			// Without "-m tcp/udp" iptables loads the match implicitly
			// when an option needs it.
			if g.chance(35) {
				add(g.neg(25)...)
				add(pick(g.rng, []string{"--sport", "--source-port"}), g.portSpec())
			}
			if g.chance(60) {
				add(g.neg(25)...)
				add(pick(g.rng, []string{"--dport", "--destination-port"}), g.portSpec())
			}
			if num == 6 && g.chance(40) {
				if g.chance(30) {
					add(g.neg(30)...)
					add("--syn")
				} else {
					add(g.neg(25)...)
					add("--tcp-flags", g.flagList(true), g.flagList(false))
				}
			}
		}
	case 1, 58:
		if (num == 1) != (g.fam == ir.IPv4) {
			break // ip6tables -p icmp: no icmp match applies
		}
		if g.chance(75) {
			if num == 1 {
				add("-m", "icmp")
				add(g.neg(20)...)
				add("--icmp-type", g.icmpSpec(false))
			} else {
				add("-m", "icmp6")
				add(g.neg(20)...)
				add("--icmpv6-type", g.icmpSpec(true))
			}
		}
	}
	switch num {
	case 6, 17, 132, 136, 33:
		if g.chance(25) {
			add("-m", "multiport")
			add(g.neg(25)...)
			add(pick(g.rng, []string{"--dports", "--sports", "--ports", "--destination-ports", "--source-ports"}), g.portList())
		}
	}
	return s
}

// tcpFlagNames are the names --tcp-flags takes.
var tcpFlagNames = []string{"FIN", "SYN", "RST", "PSH", "ACK", "URG"}

// flagList returns a --tcp-flags mask (mask true) or comparison list.
func (g *rgen) flagList(mask bool) string {
	if g.chance(15) {
		if mask {
			return "ALL"
		}
		return pick(g.rng, []string{"NONE", "ALL"})
	}
	var out []string
	for _, f := range tcpFlagNames {
		if g.chance(35) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		if mask {
			return "SYN,ACK,FIN,RST"
		}
		return "NONE"
	}
	return strings.Join(out, ",")
}

// portList returns a multiport list: up to 15 ports, a range counting two.
func (g *rgen) portList() string {
	var items []string
	n := 0
	for n < 15 && (len(items) == 0 || g.chance(55)) {
		if n <= 13 && g.chance(30) {
			a, b := g.port(), g.port()
			if a > b {
				a, b = b, a
			}
			if a == b { // multiport wants first < last in a range
				items = append(items, fmt.Sprint(a))
				n++
				continue
			}
			items = append(items, fmt.Sprintf("%d:%d", a, b))
			n += 2
		} else {
			items = append(items, fmt.Sprint(g.port()))
			n++
		}
	}
	return strings.Join(items, ",")
}

// icmpSpec returns an --icmp-type / --icmpv6-type value.
func (g *rgen) icmpSpec(v6 bool) string {
	names4 := []string{"echo-request", "echo-reply", "destination-unreachable", "port-unreachable", "host-unreachable",
		"fragmentation-needed", "time-exceeded", "parameter-problem", "timestamp-request", "redirect", "source-quench", "any"}
	names6 := []string{"echo-request", "echo-reply", "destination-unreachable", "port-unreachable", "packet-too-big",
		"time-exceeded", "parameter-problem", "neighbour-solicitation", "router-advertisement", "no-route"}
	// Not the MLD names, which xfw knows and iptables 1.8.9 does not (a
	// deliberate deviation, internal/iptables match_icmp.go).
	types4 := []int{0, 3, 4, 5, 8, 11, 12, 13, 14, 255}
	types6 := []int{1, 2, 3, 4, 128, 129, 133, 134, 135, 136, 255}
	names, types := names4, types4
	if v6 {
		names, types = names6, types6
	}
	switch k := g.rng.Intn(10); {
	case k < 4:
		return pick(g.rng, names)
	case k < 7:
		return fmt.Sprint(pick(g.rng, types))
	case k < 9:
		return fmt.Sprintf("%d/%d", pick(g.rng, types), pick(g.rng, []int{0, 1, 3, 4, 255}))
	default:
		a, b := g.rng.Intn(6), g.rng.Intn(6)
		if a > b {
			a, b = b, a
		}
		return fmt.Sprintf("%d/%d:%d", pick(g.rng, types), a, b)
	}
}

// iprangeSpec returns an iprange match.
func (g *rgen) iprangeSpec() []string {
	s := []string{"-m", "iprange"}
	rng := func() string {
		a := pick(g.rng, g.interestingAddrs())
		b := a
		for i := g.rng.Intn(300); i > 0; i-- {
			b = b.Next()
		}
		if g.chance(20) {
			b = g.randomIn(netip.PrefixFrom(a, a.BitLen()-8).Masked())
			if b.Less(a) {
				a, b = b, a
			}
		}
		return a.String() + "-" + b.String()
	}
	both := g.chance(25)
	if both || g.chance(50) {
		s = append(s, g.neg(25)...)
		s = append(s, "--src-range", rng())
		if !both {
			return s
		}
	}
	s = append(s, g.neg(25)...)
	return append(s, "--dst-range", rng())
}

// lengthSpec returns a --length value.
func (g *rgen) lengthSpec() string {
	edges := []int{0, 20, 28, 40, 41, 48, 60, 64, 100, 576, 1280, 1400, 1401, 1500, 65535}
	a, b := pick(g.rng, edges), pick(g.rng, edges)
	if g.chance(30) {
		a = g.rng.Intn(200)
	}
	if a > b {
		a, b = b, a
	}
	if g.chance(25) {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d:%d", a, b)
}

// ttlSpec returns a ttl (IPv4) or hl (IPv6) match.
func (g *rgen) ttlSpec() []string {
	name := "ttl"
	if g.fam == ir.IPv6 {
		name = "hl"
	}
	v := pick(g.rng, []int{0, 1, 2, 63, 64, 65, 127, 128, 254, 255, g.rng.Intn(256)})
	switch g.rng.Intn(4) {
	case 0:
		return []string{"-m", name, "--" + name + "-eq", fmt.Sprint(v)}
	case 1:
		return []string{"-m", name, "!", "--" + name + "-eq", fmt.Sprint(v)}
	case 2:
		return []string{"-m", name, "--" + name + "-lt", fmt.Sprint(v)}
	default:
		return []string{"-m", name, "--" + name + "-gt", fmt.Sprint(v)}
	}
}

// otherMACs are source MACs rules name that no interface has; the packet
// generator sends frames from them.
var otherMACs = []net.HardwareAddr{{0x02, 0, 0, 0, 0, 0x99}, {0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff}}

// macSpec returns a --mac-source value.
func (g *rgen) macSpec() string {
	m := pick(g.rng, []net.HardwareAddr{g.plan.GenMAC, g.plan.SinkMAC, otherMACs[0], otherMACs[1]})
	if g.chance(30) {
		return strings.ToUpper(m.String())
	}
	return m.String()
}

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

// ctStates are the --ctstate names (SNAT and DNAT never hold here: no
// NAT), with the spellings conntrack_ps_state accepts (any case, any
// prefix: "E" is ESTABLISHED).
var ctStates = []string{"INVALID", "NEW", "ESTABLISHED", "RELATED", "UNTRACKED", "SNAT", "DNAT"}

// ctStatuses are the --ctstatus names.
var ctStatuses = []string{"NONE", "EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED"}

// nameList returns a comma list of one or more of names (the first n of
// them only), sometimes in lower case.
func (g *rgen) nameList(names []string, n int) string {
	var out []string
	for _, i := range g.rng.Perm(n)[:1+g.rng.Intn(min(n, 3))] {
		out = append(out, names[i])
	}
	s := strings.Join(out, ",")
	if g.chance(10) {
		s = strings.ToLower(s)
	}
	return s
}

// ctSpec returns a conntrack or state match.
func (g *rgen) ctSpec() []string {
	if g.chance(35) {
		s := []string{"-m", "state"}
		s = append(s, g.neg(15)...)
		return append(s, "--state", g.nameList(ctStates, 5))
	}
	s := []string{"-m", "conntrack"}
	opts := 0
	for opts == 0 {
		if g.chance(75) {
			s = append(s, g.neg(20)...)
			n := 5
			if g.chance(10) {
				n = len(ctStates)
			}
			s = append(s, "--ctstate", g.nameList(ctStates, n))
			opts++
		}
		if g.chance(20) {
			s = append(s, g.neg(25)...)
			protos := []string{"tcp", "udp", "icmp", "6", "17", "47"}
			if g.fam == ir.IPv6 {
				protos = []string{"tcp", "udp", "ipv6-icmp", "58", "6", "17"}
			}
			s = append(s, "--ctproto", pick(g.rng, protos))
			opts++
		}
		if g.chance(20) {
			s = append(s, g.neg(25)...)
			s = append(s, "--ctstatus", g.nameList(ctStatuses, len(ctStatuses)))
			opts++
		}
		if g.chance(20) {
			s = append(s, "--ctdir", pick(g.rng, []string{"ORIGINAL", "REPLY"}))
			opts++
		}
		if g.chance(25) {
			s = append(s, g.ctTupleSpec()...)
			opts++
		}
	}
	return s
}

// ctTupleSpec returns one or two options on the connection's tuple:
// addresses (prefix, netmask or non-contiguous mask) and ports or port
// ranges, some inverted. ICMP connections' "ports" are the identifier and
// type << 8 | code: the echo types' values (0x0000, 0x0800, 0x8000,
// 0x8100) come up among the ports.
func (g *rgen) ctTupleSpec() []string {
	var s []string
	used := map[string]bool{} // iptables takes each option once
	for n := 0; n == 0 || (n < 2 && g.chance(30)); n++ {
		if g.chance(55) {
			opt := pick(g.rng, []string{"--ctorigsrc", "--ctorigdst", "--ctreplsrc", "--ctrepldst"})
			if used[opt] {
				continue
			}
			used[opt] = true
			s = append(s, g.neg(25)...)
			s = append(s, opt, g.addrSpec(false))
			continue
		}
		opt := pick(g.rng, []string{"--ctorigsrcport", "--ctorigdstport", "--ctreplsrcport", "--ctrepldstport"})
		if used[opt] {
			continue
		}
		used[opt] = true
		s = append(s, g.neg(25)...)
		port := func() int {
			if g.chance(15) {
				return pick(g.rng, []int{0, 0x0800, 0x8000, 0x8100})
			}
			return g.port()
		}
		a, b := port(), port()
		if a > b {
			a, b = b, a
		}
		if g.chance(50) {
			s = append(s, opt, fmt.Sprint(a))
		} else {
			s = append(s, opt, fmt.Sprintf("%d:%d", a, b))
		}
	}
	return s
}

// statefulShapes returns the rules stateful rulesets usually start their
// base chains with: accept what belongs to known connections (the fast
// path xfw takes for a chain's first such rule, compiler.CtFastPath), drop
// what conntrack calls INVALID.
func (g *rgen) statefulShapes() []*grule {
	var out []*grule
	for ci := range ir.BuiltinChains {
		if g.chance(60) {
			var spec []string
			switch g.rng.Intn(4) {
			case 0:
				spec = []string{"-m", "state", "--state", "RELATED,ESTABLISHED"}
			case 1:
				spec = []string{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED"}
			case 2:
				spec = []string{"-m", "conntrack", "--ctstate", "ESTABLISHED"}
			default:
				spec = []string{"-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "--ctstatus", "SEEN_REPLY"}
			}
			out = append(out, &grule{chain: ci, target: "ACCEPT", fixed: true, spec: append(spec, "-j", "ACCEPT")})
		}
		if g.chance(35) {
			spec := []string{"-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP"}
			if g.chance(30) {
				spec = []string{"-m", "state", "--state", "INVALID", "-j", pick(g.rng, []string{"DROP", "LOG"})}
			}
			out = append(out, &grule{chain: ci, target: spec[len(spec)-1], fixed: true, spec: spec})
		}
	}
	return out
}
