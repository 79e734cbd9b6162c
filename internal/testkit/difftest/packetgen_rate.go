package difftest

import (
	"fmt"
	"math/rand"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// This file writes rate-aware probes: for each INPUT or FORWARD rule of a
// ruleset that selects UDP to one port with -m limit or -m hashlimit,
// bursts of identical packets (but for the marker) to that port from gen
// (to fw, or through fw to sink and beyond), a few more than the rule's
// burst, from a few sources and source ports to a few destinations, so
// that hashlimit's keys (masked addresses, ports) get buckets of their
// own. A burst's packets are consecutive probes of step 0: both sides
// send them in the same order, and with rates of a token an hour at most
// (rulegen_rate.go) the kernel passes exactly the first ones its buckets
// hold; they are compared packet by packet as every probe is.

// rateRuleLine finds an INPUT or FORWARD rule with a UDP destination port
// and a rate match in ruleset text.
var rateRuleLine = regexp.MustCompile(`^-A (INPUT|FORWARD) .*-p udp .*--dport (\d+) .*-m (limit|hashlimit) `)

// rateBurstOption finds the rule's burst (the default is 5 for both).
var rateBurstOption = regexp.MustCompile(`--(?:limit|hashlimit)-burst (\d+)`)

// defaultRateBurst is the burst of -m limit and -m hashlimit when the
// rule gives none.
const defaultRateBurst = 5

// rateTarget is one rate rule the bursts aim at.
type rateTarget struct {
	port    uint16
	burst   int
	forward bool // a FORWARD rule: the bursts go through fw
}

// rateTargets returns the rate rules of ruleset the bursts aim at.
func rateTargets(ruleset string) []rateTarget {
	var out []rateTarget
	for _, line := range strings.Split(ruleset, "\n") {
		m := rateRuleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		port, err := strconv.ParseUint(m[2], 10, 16)
		if err != nil {
			continue
		}
		t := rateTarget{port: uint16(port), burst: defaultRateBurst, forward: m[1] == "FORWARD"}
		if b := rateBurstOption.FindStringSubmatch(line); b != nil {
			t.burst, _ = strconv.Atoi(b[1])
		}
		out = append(out, t)
	}
	return out
}

// rateBursts returns the burst probes for ruleset's rate rules, determined
// by seed (none when it has none).
func rateBursts(seed int64, plan Plan, ruleset string) []Probe {
	targets := rateTargets(ruleset)
	if len(targets) == 0 {
		return nil
	}
	g := &pgen{rng: rand.New(rand.NewSource(seed ^ rateSeedMix)), plan: plan, fam: plan.Family}
	var out []Probe
	for _, t := range targets {
		// Keys: gen itself twice (one bucket taken twice), a far source
		// (another srcip key), another source port, another of fw's
		// addresses (another dstip key).
		// FORWARD's: sink and an address beyond it for fw's.
		near, other, path := plan.FwIn, plan.FwOut, PathInput
		if t.forward {
			near, other, path = plan.Sink, g.randomIn(plan.FarSink), PathForward
		}
		keys := []struct {
			src, dst netip.Addr
			sport    uint16
		}{
			{plan.Gen, near, 1024},
			{g.randomIn(plan.FarGen), near, 1024},
			{plan.Gen, near, 2048},
			{plan.Gen, other, 1024},
			{plan.Gen, near, 1024},
		}
		for k, key := range keys[:2+g.rng.Intn(len(keys)-1)] {
			n := t.burst + 1 + g.rng.Intn(3)
			for i := 0; i < n; i++ {
				out = append(out, burstProbe(plan, key.src, key.dst, key.sport, t.port, path,
					fmt.Sprintf("rate burst %d/%d key %d port %d", i+1, n, k, t.port)))
			}
		}
	}
	return out
}

// burstProbe is one packet of a burst: UDP from gen's side to fw (path
// PathInput) or through it (PathForward).
func burstProbe(plan Plan, src, dst netip.Addr, sport, dport uint16, path Path, note string) Probe {
	u := nettest.UDP{SrcPort: sport, DstPort: dport, Payload: payload(8)}
	var pkt []byte
	if src.Is4() {
		pkt = nettest.IPv4{Src: src, Dst: dst, TTL: 64}.Packet(u)
	} else {
		pkt = nettest.IPv6{Src: src, Dst: dst, HopLimit: 64}.Packet(u)
	}
	eth := nettest.Ethernet{Src: plan.GenMAC, Dst: plan.FwInMAC}
	return Probe{From: FromGen, Path: path, Frames: [][]byte{eth.Frame(pkt)}, Note: note}
}
