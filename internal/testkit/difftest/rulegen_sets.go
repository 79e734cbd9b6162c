package difftest

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/iptables"
	"github.com/xfw-dev/xfw/internal/ir"
)

// This file gives generated rulesets their ipsets (GenOptions.Sets): the
// sets themselves, carried as ruleset comments (SetLines), and the set
// matches on them.

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
	if drawSetTargets {
		g.setLines = append(g.setLines, "create "+genWrittenSet+" hash:ip family "+fam)
	}
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
