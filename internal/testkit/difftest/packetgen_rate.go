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

// This file writes rate-aware probes: for each INPUT, FORWARD or OUTPUT
// rule of a ruleset that selects UDP to one port with -m limit or -m
// hashlimit, bursts of identical packets (but for the marker) to that port
// from gen (to fw, or through fw to sink and beyond) or from fw itself
// (OUTPUT: sent from fw's namespace to sink, beyond it and to gen), a few
// more than the rule's burst, from a few sources and source ports to a few
// destinations, so that hashlimit's keys (masked addresses, ports) get
// buckets of their own. A burst's packets are consecutive probes of step
// 0: both sides send them in the same order, and with rates of a token an
// hour at most (rulegen_rate.go) the kernel passes exactly the first ones
// its buckets hold; they are compared packet by packet as every probe is.

// rateRuleLine finds an INPUT, FORWARD or OUTPUT rule with a UDP
// destination port and a rate match in ruleset text.
var rateRuleLine = regexp.MustCompile(`^-A (INPUT|FORWARD|OUTPUT) .*-p udp .*--dport (\d+) .*-m (limit|hashlimit) `)

// rateBurstOption finds the rule's burst (the default is 5 for both).
var rateBurstOption = regexp.MustCompile(`--(?:limit|hashlimit)-burst (\d+)`)

// defaultRateBurst is the burst of -m limit and -m hashlimit when the
// rule gives none.
const defaultRateBurst = 5

// rateTarget is one rate rule the bursts aim at.
type rateTarget struct {
	port  uint16
	burst int
	path  Path // the rule's chain: PathInput, PathForward or PathOutput
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
		t := rateTarget{port: uint16(port), burst: defaultRateBurst,
			path: map[string]Path{"INPUT": PathInput, "FORWARD": PathForward, "OUTPUT": PathOutput}[m[1]]}
		if b := rateBurstOption.FindStringSubmatch(line); b != nil {
			t.burst, _ = strconv.Atoi(b[1])
		}
		out = append(out, t)
	}
	return out
}

// burstKey is one bucket's packets: their addresses and source port.
type burstKey struct {
	src, dst netip.Addr
	sport    uint16
}

// rateBursts returns the burst probes for ruleset's rate rules, determined
// by seed (none when it has none). INPUT's and FORWARD's come first, from
// one stream, OUTPUT's after them from a stream of their own, so that the
// INPUT and FORWARD bursts of a seed are what they were before OUTPUT's
// existed.
func rateBursts(seed int64, plan Plan, ruleset string) []Probe {
	targets := rateTargets(ruleset)
	if len(targets) == 0 {
		return nil
	}
	g := &pgen{rng: rand.New(rand.NewSource(seed ^ rateSeedMix)), plan: plan, fam: plan.Family}
	out := &pgen{rng: rand.New(rand.NewSource(seed ^ rateOutSeedMix)), plan: plan, fam: plan.Family}
	var in, outs []Probe
	for _, t := range targets {
		switch t.path {
		case PathOutput:
			outs = append(outs, out.bursts(t, out.outputKeys(), FromFw)...)
		default:
			in = append(in, g.bursts(t, g.inboundKeys(t.path), FromGen)...)
		}
	}
	return append(in, outs...)
}

// inboundKeys returns the keys of bursts from gen's side to fw (path
// PathInput) or through it (PathForward): gen itself twice (one bucket
// taken twice), a far source (another srcip key), another source port,
// another of fw's addresses (another dstip key); FORWARD's go to sink and
// to an address beyond it instead of fw's.
func (g *pgen) inboundKeys(path Path) []burstKey {
	plan := g.plan
	near, other := plan.FwIn, plan.FwOut
	if path == PathForward {
		near, other = plan.Sink, g.randomIn(plan.FarSink)
	}
	return []burstKey{
		{plan.Gen, near, 1024},
		{g.randomIn(plan.FarGen), near, 1024},
		{plan.Gen, near, 2048},
		{plan.Gen, other, 1024},
		{plan.Gen, near, 1024},
	}
}

// outputKeys returns the keys of bursts fw sends: from out0's address to
// sink twice (one bucket taken twice), from in0's (another srcip key),
// another source port, to an address beyond sink (another dstip key), and
// from in0's address to gen (out of the other interface).
func (g *pgen) outputKeys() []burstKey {
	plan := g.plan
	return []burstKey{
		{plan.FwOut, plan.Sink, 1024},
		{plan.FwIn, plan.Sink, 1024},
		{plan.FwOut, plan.Sink, 2048},
		{plan.FwOut, g.randomIn(plan.FarSink), 1024},
		{plan.FwIn, plan.Gen, 1024},
		{plan.FwOut, plan.Sink, 1024},
	}
}

// bursts returns the bursts to rule t from two or more of keys (in order),
// each a few packets more than the rule's burst.
func (g *pgen) bursts(t rateTarget, keys []burstKey, from Origin) []Probe {
	var out []Probe
	for k, key := range keys[:2+g.rng.Intn(len(keys)-1)] {
		n := t.burst + 1 + g.rng.Intn(3)
		for i := 0; i < n; i++ {
			out = append(out, burstProbe(g.plan, from, key, t.port, t.path,
				fmt.Sprintf("rate burst %d/%d key %d port %d", i+1, n, k, t.port)))
		}
	}
	return out
}

// burstProbe is one packet of a burst: UDP from gen's side to fw (path
// PathInput) or through it (PathForward), or from fw itself (PathOutput:
// an IP packet its raw socket sends).
func burstProbe(plan Plan, from Origin, key burstKey, dport uint16, path Path, note string) Probe {
	u := nettest.UDP{SrcPort: key.sport, DstPort: dport, Payload: payload(8)}
	var pkt []byte
	if key.src.Is4() {
		pkt = nettest.IPv4{Src: key.src, Dst: key.dst, TTL: 64}.Packet(u)
	} else {
		pkt = nettest.IPv6{Src: key.src, Dst: key.dst, HopLimit: 64}.Packet(u)
	}
	if from == FromFw {
		return Probe{From: FromFw, Path: path, Frames: [][]byte{pkt}, Note: note}
	}
	eth := nettest.Ethernet{Src: plan.GenMAC, Dst: plan.FwInMAC}
	return Probe{From: from, Path: path, Frames: [][]byte{eth.Frame(pkt)}, Note: note}
}
