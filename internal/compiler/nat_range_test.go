package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatRangeEntries checks that NAT targets with ranges or random flags
// compile to an EFNatRange entry naming a ProbeNatRange with the kernel's
// flags, addresses and ports, and that the others stay plain entries.
func TestNatRangeEntries(t *testing.T) {
	const a1, a3 = 10<<24 | 9<<16 | 1, 10<<24 | 9<<16 | 3
	for _, tc := range []struct {
		rule   string
		act    Action
		ranged bool
		want   Probe // with ranged
		next   uint32
	}{
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.9.0.1-10.9.0.3", ActDNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs), Val: a1, Mask: a3}, a1},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.9.0.1:8000-8009", ActDNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified), Val: a1, Mask: a1,
				Wide: 8000<<16 | 8009}, a1},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.9.0.1-10.9.0.3 --persistent", ActDNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatPersistent), Val: a1, Mask: a3}, a1},
		{"-t nat -A PREROUTING -p udp -j REDIRECT --to-ports 5000-5010 --random", ActDNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatProtoSpecified | ir.NatRandom), Wide: 5000<<16 | 5010},
			RedirectAddr},
		{"-t nat -A POSTROUTING -j MASQUERADE --random-fully", ActSNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatRandomFully)}, MasqueradeAddr},
		{"-t nat -A POSTROUTING -p udp -j MASQUERADE --to-ports 20000-20999", ActSNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatProtoSpecified), Wide: 20000<<16 | 20999}, MasqueradeAddr},
		{"-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.9.0.1-10.9.0.3:1000-2000 --random", ActSNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified | ir.NatRandom),
				Val: a1, Mask: a3, Wide: 1000<<16 | 2000}, a1},
		{"-t nat -A POSTROUTING -p udp -j SNAT --to-source 10.9.0.1:1000", ActSNAT, false, Probe{}, a1},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.9.0.1:8000-8009/100", ActDNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatMapIPs | ir.NatProtoSpecified | ir.NatProtoOffset), Val: a1, Mask: a1,
				Wide: 100<<32 | 8000<<16 | 8009}, a1},
		{"-t nat -A OUTPUT -p udp -j DNAT --to-destination :8000-8009/100", ActDNAT, true,
			Probe{Kind: ProbeNatRange, Arg: uint32(ir.NatProtoSpecified | ir.NatProtoOffset), Wide: 100<<32 | 8000<<16 | 8009},
			KeepAddr},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.9.0.1-10.9.0.1:80", ActDNAT, false, Probe{}, a1},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv4, tc.rule), Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.rule, err)
			continue
		}
		n := 0
		for _, e := range g.Entries {
			if e.Action != tc.act {
				continue
			}
			n++
			if e.Next != tc.next {
				t.Errorf("%s: entry address %#x, want %#x", tc.rule, e.Next, tc.next)
			}
			if (e.Flags&EFNatRange != 0) != tc.ranged {
				t.Errorf("%s: EFNatRange %v, want %v", tc.rule, e.Flags&EFNatRange != 0, tc.ranged)
				continue
			}
			if tc.ranged && (int(e.Aux) >= len(g.Probes) || g.Probes[e.Aux] != tc.want) {
				t.Errorf("%s: probe %d of %+v, want %+v", tc.rule, e.Aux, g.Probes, tc.want)
			}
		}
		if n == 0 {
			t.Errorf("%s: no entry of action %d", tc.rule, tc.act)
		}
	}
}

// TestCtNatProbe checks --ctstate with SNAT or DNAT: a ProbeCtNat with the
// option's states, answered as conntrack_mt answers.
func TestCtNatProbe(t *testing.T) {
	est := CtValue(CtsEstablished, false, 0, 6)
	for _, tc := range []struct {
		match      string
		ct         uint32
		snat, dnat bool
		want       bool
	}{
		{"--ctstate DNAT", est, false, true, true},
		{"--ctstate DNAT", est, true, false, false},
		{"--ctstate SNAT", est, true, false, true},
		{"! --ctstate DNAT", est, false, false, true},
		{"--ctstate RELATED,ESTABLISHED,DNAT", est, false, false, true},
		{"! --ctstate RELATED,ESTABLISHED,DNAT", CtValue(CtsNew, false, 0, 6), false, true, false},
		{"! --ctstate RELATED,ESTABLISHED,DNAT", CtValue(CtsNew, false, 0, 6), false, false, true},
		{"--ctstate INVALID,DNAT", 0, false, true, true},
		{"--ctstate DNAT", 0, false, true, false}, // no connection, no translation
	} {
		rs := parseRuleset(t, ir.IPv4, "-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.2",
			"-A FORWARD -m conntrack "+tc.match+" -j ACCEPT")
		g, err := Compile(rs, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.match, err)
		}
		var pr *Probe
		for i := range g.Probes {
			if g.Probes[i].Kind == ProbeCtNat {
				pr = &g.Probes[i]
			}
		}
		if pr == nil {
			t.Fatalf("%s: no ProbeCtNat in %+v", tc.match, g.Probes)
		}
		if got := CtNatAnswer(*pr, tc.ct, tc.snat, tc.dnat); got != tc.want {
			t.Errorf("%s (ct %#x snat %v dnat %v): %v, want %v", tc.match, tc.ct, tc.snat, tc.dnat, got, tc.want)
		}
	}
}

// TestNatReplyTupleOptions checks the reply tuple options in a ruleset
// with NAT: the ports stay the rule's terms (the data plane gives the
// translated ones), --ctreplsrc and --ctrepldst become a ProbeCtRepl
// answered from the translated tuple, and the ruleset given is left as it
// was.
func TestNatReplyTupleOptions(t *testing.T) {
	const fw, gen = 10<<24 | 9<<16 | 1, 10<<24 | 1
	est := CtValue(CtsEstablished, true, 0, 17)
	for _, tc := range []struct {
		match    string
		probed   bool
		src, dst uint32 // the reply tuple
		want     bool
	}{
		{"--ctrepldstport 20000:20009", false, 0, 0, false},
		{"--ctreplsrcport 8000", false, 0, 0, false},
		{"--ctrepldst 10.9.0.1", true, gen, fw, true},
		{"--ctrepldst 10.9.0.1", true, fw, gen, false},
		{"! --ctrepldst 10.9.0.0/16", true, gen, fw, false},
		{"--ctreplsrc 10.0.0.0/8 --ctrepldst 10.9.0.1", true, gen, fw, true},
		{"--ctstate NEW --ctreplsrc 10.9.0.1", true, gen, fw, false},
	} {
		rs := parseRuleset(t, ir.IPv4, "-t nat -A POSTROUTING -p udp -j MASQUERADE --to-ports 20000-20009",
			"-A FORWARD -m conntrack "+tc.match+" -j ACCEPT")
		g, err := Compile(rs, Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.match, err)
			continue
		}
		if _, ok := rs.Chain("FORWARD").Rules[0].Matches[0].(*ir.ConntrackMatch); !ok || len(rs.Chain("FORWARD").Rules[0].Matches) != 1 {
			t.Errorf("%s: Compile changed the ruleset given: %+v", tc.match, rs.Chain("FORWARD").Rules[0].Matches)
		}
		var pr *Probe
		for i := range g.Probes {
			if g.Probes[i].Kind == ProbeCtRepl {
				pr = &g.Probes[i]
			}
		}
		if (pr != nil) != tc.probed {
			t.Errorf("%s: ProbeCtRepl %v, want %v", tc.match, pr != nil, tc.probed)
			continue
		}
		if pr != nil && CtReplAnswer(*pr, est, tc.src, tc.dst) != tc.want {
			t.Errorf("%s: answer for reply %#x -> %#x: %v, want %v", tc.match, tc.src, tc.dst, !tc.want, tc.want)
		}
		if pr != nil && !CtReplAnswer(*pr, 0, 0, 0) {
			t.Errorf("%s: a packet without a connection fails the probe", tc.match)
		}
	}
}
