package main

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
)

// rule is one filter rule in a form every firewall under test can express.
// Zero fields match anything.
type rule struct {
	Src, Dst     netip.Addr
	Proto        string // "udp", "tcp" or "" (any)
	Sport, Dport uint16
	// CtState is a conntrack state match ("NEW", "ESTABLISHED,RELATED"),
	// rendered as -m conntrack --ctstate (nftables: ct state); every
	// firewall, xfw included, tracks connections.
	CtState string
	Target  string // "ACCEPT" or "DROP"
}

// ruleset is one base chain's rules and policy (the other base chains are
// empty with policy ACCEPT).
type ruleset struct {
	Chain  string // "FORWARD" or "INPUT"
	Policy string // "ACCEPT" or "DROP"
	Rules  []rule
	// SetDrop, when set, is a list of source addresses to drop that set
	// firewalls (ipset, nft sets) load as one set and one rule, placed
	// before Rules; the others get one DROP rule per address.
	SetDrop []netip.Addr
}

// inputPort is the UDP port of the local sink in fw (INPUT traffic).
const inputPort = 5001

// Seeds of the generated rulesets, fixed so every run measures the same
// rules.
const (
	seedFiveTuple = 1
	seedSet       = 2
	seedDDoS      = 3
	seedLegit     = 4
)

// fiveTupleFlows returns n distinct UDP 5-tuples: random sources in srcNet
// and source ports, destinations in fwdNet with random destination ports
// (FORWARD), or in localNet towards inputPort (INPUT: one local socket
// receives them all).
func fiveTupleFlows(n int, input bool) []flow {
	rng := rand.New(rand.NewSource(seedFiveTuple))
	seen := make(map[flow]bool, n)
	out := make([]flow, 0, n)
	for len(out) < n {
		f := flow{
			Src:   randomIn(rng, srcNet),
			Sport: uint16(1024 + rng.Intn(65536-1024)),
		}
		if input {
			f.Dst, f.Dport = randomIn(rng, localNet), inputPort
		} else {
			f.Dst, f.Dport = randomIn(rng, fwdNet), uint16(1+rng.Intn(65535))
		}
		if seen[f] {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	return out
}

// randomIn returns a random host address of an IPv4 /16 (never .0 or .255
// in the last byte, to stay clear of network and broadcast addresses).
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	b[2] = byte(rng.Intn(256))
	b[3] = byte(1 + rng.Intn(254))
	return netip.AddrFrom4(b)
}

// fiveTupleRuleset returns one ACCEPT rule per flow in chain, with policy
// DROP (so every delivered packet was matched by a rule); no flows means an
// empty chain with policy ACCEPT (the baseline).
func fiveTupleRuleset(chain string, flows []flow) *ruleset {
	rs := &ruleset{Chain: chain, Policy: "DROP"}
	if len(flows) == 0 {
		rs.Policy = "ACCEPT"
	}
	for _, f := range flows {
		rs.Rules = append(rs.Rules, rule{Src: f.Src, Dst: f.Dst, Proto: "udp", Sport: f.Sport, Dport: f.Dport, Target: "ACCEPT"})
	}
	return rs
}

// iptablesArgs renders r as iptables rule arguments (without -A CHAIN).
func (r rule) iptablesArgs() []string {
	var a []string
	if r.Src.IsValid() {
		a = append(a, "-s", r.Src.String()+"/32")
	}
	if r.Dst.IsValid() {
		a = append(a, "-d", r.Dst.String()+"/32")
	}
	if r.Proto != "" {
		a = append(a, "-p", r.Proto)
		if r.Sport != 0 || r.Dport != 0 {
			a = append(a, "-m", r.Proto)
		}
		if r.Sport != 0 {
			a = append(a, "--sport", fmt.Sprint(r.Sport))
		}
		if r.Dport != 0 {
			a = append(a, "--dport", fmt.Sprint(r.Dport))
		}
	}
	if r.CtState != "" {
		a = append(a, "-m", "conntrack", "--ctstate", r.CtState)
	}
	return append(a, "-j", r.Target)
}

// nftExpr renders r as an nftables rule body.
func (r rule) nftExpr() string {
	var b strings.Builder
	if r.Src.IsValid() {
		fmt.Fprintf(&b, "ip saddr %s ", r.Src)
	}
	if r.Dst.IsValid() {
		fmt.Fprintf(&b, "ip daddr %s ", r.Dst)
	}
	if r.Proto != "" {
		if r.Sport == 0 && r.Dport == 0 {
			fmt.Fprintf(&b, "ip protocol %s ", r.Proto)
		}
		if r.Sport != 0 {
			fmt.Fprintf(&b, "%s sport %d ", r.Proto, r.Sport)
		}
		if r.Dport != 0 {
			fmt.Fprintf(&b, "%s dport %d ", r.Proto, r.Dport)
		}
	}
	if r.CtState != "" {
		fmt.Fprintf(&b, "ct state %s ", strings.ToLower(r.CtState))
	}
	b.WriteString(strings.ToLower(r.Target))
	return b.String()
}

// iptablesRestore renders rs in iptables-restore format. With useSet, the
// SetDrop addresses are one rule matching ipset set ipsetName; otherwise
// one rule each.
func (rs *ruleset) iptablesRestore(useSet bool) string {
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
		pol := "ACCEPT"
		if c == rs.Chain {
			pol = rs.Policy
		}
		fmt.Fprintf(&b, ":%s %s [0:0]\n", c, pol)
	}
	if useSet && len(rs.SetDrop) > 0 {
		fmt.Fprintf(&b, "-A %s -m set --match-set %s src -j DROP\n", rs.Chain, ipsetName)
	} else {
		for _, a := range rs.SetDrop {
			fmt.Fprintf(&b, "-A %s -s %s/32 -j DROP\n", rs.Chain, a)
		}
	}
	for _, r := range rs.Rules {
		fmt.Fprintf(&b, "-A %s %s\n", rs.Chain, strings.Join(r.iptablesArgs(), " "))
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// nftTable and nftSet name what the nftables firewall creates.
const (
	nftTable  = "xbench"
	nftSet    = "drop4"
	ipsetName = "xbdrop"
)

// nftChainName returns the nftables chain for an iptables base chain.
func nftChainName(chain string) string { return strings.ToLower(chain) }

// nftScript renders rs as an nft -f script that replaces the whole ruleset
// atomically; SetDrop addresses become one set and one rule.
func (rs *ruleset) nftScript() string {
	var b strings.Builder
	b.WriteString("flush ruleset\n")
	fmt.Fprintf(&b, "table ip %s {\n", nftTable)
	if len(rs.SetDrop) > 0 {
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype ipv4_addr\n\t\tsize %d\n\t\telements = {\n", nftSet, len(rs.SetDrop))
		for i, a := range rs.SetDrop {
			sep := ","
			if i == len(rs.SetDrop)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "\t\t\t%s%s\n", a, sep)
		}
		b.WriteString("\t\t}\n\t}\n")
	}
	fmt.Fprintf(&b, "\tchain %s {\n\t\ttype filter hook %s priority filter; policy %s;\n",
		nftChainName(rs.Chain), nftChainName(rs.Chain), strings.ToLower(rs.Policy))
	if len(rs.SetDrop) > 0 {
		fmt.Fprintf(&b, "\t\tip saddr @%s drop\n", nftSet)
	}
	for _, r := range rs.Rules {
		fmt.Fprintf(&b, "\t\t%s\n", r.nftExpr())
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// ipsetRestore renders the SetDrop addresses for ipset restore.
func (rs *ruleset) ipsetRestore() string {
	var b strings.Builder
	// hashsize: a power of two near the element count keeps buckets short.
	hs := 1024
	for hs < len(rs.SetDrop) {
		hs *= 2
	}
	fmt.Fprintf(&b, "create %s hash:ip family inet hashsize %d maxelem %d\n", ipsetName, hs, max(len(rs.SetDrop), 65536))
	for _, a := range rs.SetDrop {
		fmt.Fprintf(&b, "add %s %s\n", ipsetName, a)
	}
	return b.String()
}
