package main

import (
	"context"
	"math/rand"
	"net/netip"
)

// Set-friendly rulesets: n source addresses to drop, as one ipset or nft
// set and one rule, or as one rule per address (iptables, xfw).

// setSizes are the numbers of addresses.
var setSizes = []int{10_000, 100_000, 1_000_000}

// setFirewalls are compared in the sets section.
var setFirewalls = []string{fwXFWSet, fwXFW, fwIpset, fwNFTSet, fwLegacy, fwIptNFT}

// setLegitFlows is the number of legitimate flows the generator cycles
// through.
const setLegitFlows = 1000

// setNet holds the blocked addresses and the legitimate sources alike, so
// they interleave (2^23 addresses: room for a million of each).
var setNet = netip.MustParsePrefix("10.128.0.0/9")

// setUpdates is how many single-member deletes and adds are timed on the
// loaded set of xfw-set and ipset (the command's wall time: issue 7).
const setUpdates = 10

// setPerRuleLimit caps the one-rule-per-address firewalls: above it they
// take long to load and forward next to nothing (iptables), or the
// class × chunk table grows with n²/4096 (xfw).
const setPerRuleLimit = 100_000

// setAddrs returns n blocked addresses and setLegitFlows legitimate flows
// whose sources are not blocked.
func setAddrs(n int) ([]netip.Addr, []flow) {
	rng := rand.New(rand.NewSource(seedSet))
	blocked := make(map[netip.Addr]bool, n)
	addrs := make([]netip.Addr, 0, n)
	random := func() netip.Addr {
		b := setNet.Addr().As4()
		v := rng.Uint32() & (1<<(32-setNet.Bits()) - 1)
		b[1] |= byte(v >> 16)
		b[2] = byte(v >> 8)
		b[3] = byte(v)
		return netip.AddrFrom4(b)
	}
	for len(addrs) < n {
		a := random()
		if !blocked[a] {
			blocked[a] = true
			addrs = append(addrs, a)
		}
	}
	lrng := rand.New(rand.NewSource(seedLegit))
	var flows []flow
	for len(flows) < setLegitFlows {
		a := random()
		if blocked[a] {
			continue
		}
		flows = append(flows, flow{Src: a, Dst: randomIn(lrng, fwdNet), Sport: uint16(1024 + lrng.Intn(60000)), Dport: uint16(1 + lrng.Intn(65535))})
	}
	return addrs, flows
}

// runSets measures legitimate FORWARD traffic (sources not in the set)
// through each firewall holding n blocked addresses.
func runSets(ctx context.Context, o *options, all map[string]*firewall) (*throughputSection, error) {
	var fws []*firewall
	for _, n := range setFirewalls {
		fws = append(fws, all[n])
	}
	rigs, err := newRigs(ctx, fws)
	if err != nil {
		return nil, err
	}
	defer closeRigs(rigs)
	sec, err := runScaling(ctx, o, rigs, scaleConfig{
		title:  "Set-friendly rulesets, FORWARD",
		xLabel: "blocked source addresses",
		xs:     setSizes,
		rulesets: func(n int) (*ruleset, []flow) {
			addrs, flows := setAddrs(n)
			return &ruleset{Chain: "FORWARD", Policy: "ACCEPT", SetDrop: addrs}, flows
		},
		maxRules:   map[string]int{fwXFW: setPerRuleLimit, fwLegacy: setPerRuleLimit, fwIptNFT: setPerRuleLimit},
		setUpdates: setUpdates,
	})
	if err != nil {
		return nil, err
	}
	sec.Notes = []string{
		"FORWARD policy ACCEPT; n random addresses of 10.128.0.0/9 are dropped: xfw-set (`xfw ipset` hash:ip, one `-m set --match-set` rule: a DXR lookup per packet), ipset (hash:ip, one iptables-nft rule `-m set --match-set`), nft-set (one `ip saddr @set drop` rule), iptables-legacy, iptables-nft and xfw with one `-s ADDR -j DROP` rule per address.",
		"Traffic: 1,000 legitimate flows whose sources lie in the same range but not in the set, so every packet is checked against the whole set or every rule, and is forwarded.",
		"Single update: the wall time of one `ipset add blk ADDR` or `ipset del blk ADDR` command (`xfw ipset` for xfw-set, the kernel's ipset for ipset) on the loaded set while the rule uses it, 10 deletes of a member each followed by its add; xfw patches the rule's lookup table in place.",
		"One rule per address stops at 100K: iptables then forwards about 2–3 kpps and a million rules would only take longer to load; xfw's class → chunk table grows with the square of the number of addresses (about 245 million entries at a million).",
	}
	if o.runInfo != "" {
		sec.Notes = append(sec.Notes, o.runInfo)
	}
	return sec, nil
}
