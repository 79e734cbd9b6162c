package compiler

import (
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestReroute checks Layout.Reroute and the entries before it (a
// ProbeMarkMoved probe, an ActReroute entry): set for the INPUT and FORWARD walks
// exactly when a PREROUTING chain, or a user chain it reaches, can change
// the packet's mark, and then just after the walk's PREROUTING segments
// (before filter's chain; at the DNAT resume position when nat PREROUTING
// is the last of them); set for the OUTPUT walk exactly when mangle
// OUTPUT can, and then after that segment (by filter's chain).
func TestReroute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rules  []string
		in     bool // INPUT and FORWARD
		output bool
		inputs uint32 // the probe's Arg (RerouteTTL, RerouteTOS)
	}{
		{"filter only", []string{"-A INPUT -j ACCEPT"}, false, false, 0},
		{"MARK in mangle PREROUTING", []string{"-t mangle -A PREROUTING -p udp -j MARK --set-mark 1"}, true, false, 0},
		{"MARK in raw PREROUTING, nat present", []string{"-t raw -A PREROUTING -j MARK --set-mark 1",
			"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1"}, true, false, 0},
		{"MARK in a chain mangle PREROUTING jumps to", []string{"-t mangle -N M", "-t mangle -N N",
			"-t mangle -A M -j N", "-t mangle -A N -j MARK --set-mark 1", "-t mangle -A PREROUTING -g M"}, true, false, 0},
		{"CONNMARK --restore-mark in mangle PREROUTING", []string{"-t mangle -A PREROUTING -j CONNMARK --restore-mark"}, true, false, 0},
		{"CONNMARK --save-mark in mangle PREROUTING", []string{"-t mangle -A PREROUTING -j CONNMARK --save-mark"}, false, false, 0},
		{"MARK in mangle FORWARD and POSTROUTING only", []string{"-t mangle -A FORWARD -j MARK --set-mark 1",
			"-t mangle -A POSTROUTING -j MARK --set-mark 2", "-t mangle -A PREROUTING -p udp"}, false, false, 0},
		{"MARK in a user chain PREROUTING does not reach", []string{"-t mangle -N M",
			"-t mangle -A M -j MARK --set-mark 1", "-t mangle -A FORWARD -j M"}, false, false, 0},
		{"MARK in mangle OUTPUT", []string{"-t mangle -A OUTPUT -p tcp --dport 25 -j MARK --set-mark 1",
			"-t nat -A OUTPUT -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1"}, false, true, 0},
		{"MARK in raw and nat OUTPUT (no reroute in the kernel)", []string{"-t raw -A OUTPUT -j MARK --set-mark 1",
			"-t nat -A OUTPUT -j MARK --set-mark 2"}, false, false, 0},
		{"TTL in mangle PREROUTING", []string{"-t mangle -A PREROUTING -p udp -j TTL --ttl-inc 1"}, true, false, RerouteTTL},
		{"TTL in a chain mangle PREROUTING jumps to, MARK", []string{"-t mangle -N M", "-t mangle -A M -j TTL --ttl-set 9",
			"-t mangle -A PREROUTING -j M", "-t mangle -A PREROUTING -j MARK --set-mark 1"}, true, false, RerouteTTL},
		{"TTL in mangle FORWARD and OUTPUT only", []string{"-t mangle -A FORWARD -j TTL --ttl-set 9",
			"-t mangle -A OUTPUT -j TTL --ttl-set 9", "-t mangle -A PREROUTING -p udp"}, false, false, 0},
		{"TOS in mangle PREROUTING", []string{"-t mangle -A PREROUTING -p udp -j TOS --set-tos 0x10"}, true, false, RerouteTOS},
		{"DSCP and TTL in mangle PREROUTING", []string{"-t mangle -A PREROUTING -p udp -j DSCP --set-dscp 1",
			"-t mangle -A PREROUTING -p udp -j TTL --ttl-set 9"}, true, false, RerouteTTL | RerouteTOS},
		{"DSCP in mangle OUTPUT only", []string{"-t mangle -A OUTPUT -j DSCP --set-dscp 1"}, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile(parseRuleset(t, ir.IPv4, tc.rules...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range []int{ChainInput, ChainForward, ChainOutput} {
				want := tc.in
				if h == ChainOutput {
					want = tc.output
				}
				p := g.Layout.Reroute[h]
				if (p != 0) != want {
					t.Fatalf("chain %d: Reroute %d, want set %v", h, p, want)
				}
				if p == 0 {
					continue
				}
				if start, _ := g.Walk(h); p-1 <= start || p-1 > g.ChainStart[h] {
					t.Errorf("chain %d: Reroute-1 %d not after the walk's start %d and by filter's %d",
						h, p-1, start, g.ChainStart[h])
				}
				probe, stop := g.Entries[p-3], g.Entries[p-2]
				if probe.Flags&EFProbe == 0 || g.Probes[probe.Aux].Kind != ProbeMarkMoved || probe.Next != p-1 ||
					stop.Action != ActReroute || stop.Next != p-1 || stop.Rule != NoRule {
					t.Errorf("chain %d: entries before Reroute %d: %+v, %+v; want the ProbeMarkMoved probe and ActReroute",
						h, p, probe, stop)
				}
				inputs := tc.inputs
				if h == ChainOutput {
					inputs = 0
				}
				if arg := g.Probes[probe.Aux].Arg; arg != inputs {
					t.Errorf("chain %d: the probe's Arg %d, want %d", h, arg, inputs)
				}
				if r := g.Layout.NatResume[h]; h != ChainOutput && r != 0 && r != p {
					t.Errorf("chain %d: Reroute %d, DNAT resumes at %d", h, p, r)
				}
				if r := g.Layout.NatResume[h]; h == ChainOutput && r != 0 && r <= p {
					t.Errorf("OUTPUT: Reroute %d not before nat OUTPUT's resume position %d", p, r)
				}
			}
		})
	}
}

// TestNatGatePastReroute checks where nat PREROUTING's gate sends a packet
// that is not its connection's first: past the reroute entries when nat
// PREROUTING is the walk's first segment (no chain before it can have
// changed the mark), to them when mangle PREROUTING comes first; and that
// such a packet's walk meets the reroute probe only then, a first packet
// always.
func TestNatGatePastReroute(t *testing.T) {
	nat := []string{"-t nat -N MASQ", "-t nat -A MASQ -j MARK --or-mark 0x4000",
		"-t nat -A PREROUTING -p tcp --dport 80 -j MASQ", "-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.0.1",
		"-A FORWARD -m conntrack --ctstate INVALID -j DROP"}
	for _, tc := range []struct {
		name string
		pre  []string
		past bool
	}{
		{"nat first", nil, true},
		{"mangle PREROUTING before nat", []string{"-t mangle -A PREROUTING -p udp -j MARK --set-mark 1"}, false},
		{"empty mangle PREROUTING before nat", []string{"-t mangle -A PREROUTING -p udp"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile(parseRuleset(t, ir.IPv4, append(tc.pre, nat...)...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range []int{ChainInput, ChainForward} {
				r := g.Layout.Reroute[h]
				if r == 0 {
					t.Fatalf("chain %d: no reroute entries", h)
				}
				start, _ := g.Walk(h)
				probe := r - 3
				// Port 81: nat PREROUTING's rules let the first
				// packet go on through the walk (80: DNAT ends it).
				packet := func(ct uint32) *Packet {
					return &Packet{Proto: 6, Sport: 1024, Dport: 81, TCPFlags: 2, TTL: 63, IIF: 1, OIF: 2,
						Src: U64(0x0a640001), Dst: U64(0x0a000001), Ct: ct}
				}
				later := g.Classify(packet(CtValue(CtsNew, false, uint8(ir.CtStatusConfirmed), 6)), h)
				first := g.Classify(packet(CtValue(CtsNew, false, 0, 6)), h)
				if got := slices.Contains(later.Path, int(probe)); got == tc.past {
					t.Errorf("chain %d: a later packet meets the reroute probe %v, want %v (path %v)", h, got, !tc.past, later.Path)
				}
				if !slices.Contains(first.Path, int(probe)) {
					t.Errorf("chain %d: a first packet does not meet the reroute probe (path %v)", h, first.Path)
				}
				if tc.past {
					if gate := g.Entries[start]; gate.Action != ActContinue || gate.Next != r-1 {
						t.Errorf("chain %d: the gate %+v, want a CONTINUE to %d", h, gate, r-1)
					}
				}
			}
		})
	}
}
