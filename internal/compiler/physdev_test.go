package compiler

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// physState is a packet's bridge information as xt_physdev sees it:
// whether it has any, and the names of its ports ("" for none; "?" for a
// port whose name the data plane does not know).
type physState struct {
	bridged bool
	in, out string
}

// refPhysdev is physdev_mt of xt_physdev.c over st; undecided is true
// when it would compare a name the data plane does not know.
func refPhysdev(m *ir.PhysdevMatch, st physState) (match, undecided bool) {
	has := func(bit uint8) bool { return m.Bitmask&bit != 0 }
	inv := func(bit uint8) bool { return m.Invert&bit != 0 }
	if !st.bridged {
		for _, bit := range []uint8{ir.PhysdevBridged, ir.PhysdevIsIn, ir.PhysdevIsOut, ir.PhysdevIn, ir.PhysdevOut} {
			if has(bit) && !inv(bit) {
				return false, false
			}
		}
		return true, false
	}
	if has(ir.PhysdevBridged) && (st.out != "") == inv(ir.PhysdevBridged) {
		return false, false
	}
	if (has(ir.PhysdevIsIn) && (st.in == "") != inv(ir.PhysdevIsIn)) ||
		(has(ir.PhysdevIsOut) && (st.out == "") != inv(ir.PhysdevIsOut)) {
		return false, false
	}
	if has(ir.PhysdevIn) && st.in != "" {
		if st.in == "?" && m.In != "" && m.In != "+" {
			return false, true
		}
		if ir.PhysdevNameMatches(m.In, st.in) == inv(ir.PhysdevIn) {
			return false, false
		}
	}
	if !has(ir.PhysdevOut) {
		return true, false
	}
	if st.out == "" {
		return false, false
	}
	if st.out == "?" && m.Out != "" && m.Out != "+" {
		return false, true
	}
	return ir.PhysdevNameMatches(m.Out, st.out) != inv(ir.PhysdevOut), false
}

// physValue is the data plane's field value of a port name.
func physValue(name string, anyPort bool) uint32 {
	switch name {
	case "":
		return PhysNull
	case "?":
		if anyPort {
			return PhysAnyPort
		}
		return ifaceUnknown
	}
	for _, i := range testIfaces {
		if i.Name == name {
			return i.Index
		}
	}
	panic("no test interface " + name)
}

// TestPhysdevMatchesKernel compiles random physdev matches, one rule
// each, and checks every rule's counter against xt_physdev's logic for
// packets without bridge information, bridged between known and unknown
// ports, and passed up by a bridge from an unnamed port: a rule that would
// compare an unknown name drops the packet, uncounted.
func TestPhysdevMatchesKernel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	names := []string{"eth0", "eth1", "eth+", "wlan0", "+", "", "lo", "x+"}
	var rules []string
	var matches []*ir.PhysdevMatch
	for len(rules) < 200 {
		m := &ir.PhysdevMatch{Bitmask: uint8(rng.Intn(31) + 1)}
		m.Invert = uint8(rng.Intn(32)) & m.Bitmask
		if m.Bitmask&ir.PhysdevIn != 0 {
			m.In = names[rng.Intn(len(names))]
		}
		if m.Bitmask&ir.PhysdevOut != 0 {
			m.Out = names[rng.Intn(len(names))]
		}
		spec := "-A FORWARD -m physdev" + physdevSpec(m)
		rules = append(rules, spec)
		matches = append(matches, m)
	}
	rs := parseRuleset(t, ir.IPv4, rules...)
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	states := []struct {
		st      physState
		anyPort bool
	}{
		{physState{}, false},
		{physState{true, "eth0", "eth1"}, false},
		{physState{true, "wlan0", "eth0"}, false},
		{physState{true, "?", "eth0"}, false},
		{physState{true, "eth1", "?"}, false},
		{physState{true, "?", ""}, true},
		{physState{true, "lo", ""}, false},
	}
	for _, s := range states {
		p := tcpPacket(0, 64)
		if s.st.bridged {
			p.PhysIn, p.PhysOut = physValue(s.st.in, s.anyPort), physValue(s.st.out, false)
		}
		var want []string
		hot := false
		for k, m := range matches {
			match, undecided := refPhysdev(m, s.st)
			if undecided {
				hot = true
				break
			}
			if match {
				want = append(want, fmt.Sprintf("filter/FORWARD/%d", k+1))
			}
		}
		if !hot {
			want = append(want, "filter/FORWARD/policy")
		}
		got := walk(g, p, ChainForward)
		if !slices.Equal(got.counted, want) || (got.verdict == ActDrop) != hot {
			t.Errorf("%+v: counted %v verdict %v, want %v (hotdrop %v)", s.st, got.counted, got.verdict, want, hot)
		}
	}
}

// physdevSpec is a physdev match's options as iptables takes them.
func physdevSpec(m *ir.PhysdevMatch) string {
	s := ""
	opt := func(bit uint8, text string) {
		if m.Bitmask&bit == 0 {
			return
		}
		if m.Invert&bit != 0 {
			s += " !"
		}
		s += text
	}
	quote := func(n string) string {
		if n == "" {
			return `""`
		}
		return n
	}
	opt(ir.PhysdevIn, " --physdev-in "+quote(m.In))
	opt(ir.PhysdevOut, " --physdev-out "+quote(m.Out))
	opt(ir.PhysdevIsIn, " --physdev-is-in")
	opt(ir.PhysdevIsOut, " --physdev-is-out")
	opt(ir.PhysdevBridged, " --physdev-is-bridged")
	return s
}

// TestPhysdevAppendInPlace appends physdev rules, hotdrop terms included,
// to a generation that already classifies the ports, and checks that the
// result walks packets as the full compile of the same ruleset does.
func TestPhysdevAppendInPlace(t *testing.T) {
	base := []string{"-A FORWARD -m physdev --physdev-is-bridged -j ACCEPT"}
	added := []string{
		"-A FORWARD -m physdev --physdev-in eth+ ! --physdev-out wlan0",
		"-A FORWARD -m physdev ! --physdev-in eth1 --physdev-is-in -j DROP",
	}
	rs := parseRuleset(t, ir.IPv4, base...)
	g, err := Compile(rs, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	full := parseRuleset(t, ir.IPv4, append(base, added...)...)
	chain := full.Chain("FORWARD")
	for k := range added {
		i := len(base) + k
		g, err = AppendRule(g, chain.Rules[i], ChainForward, uint32(NumChains+i), RuleRef{Chain: "FORWARD", Index: i}, testIfaces)
		if err != nil {
			t.Fatalf("append %q: %v", added[k], err)
		}
	}
	want, err := Compile(full, Options{Interfaces: testIfaces})
	if err != nil {
		t.Fatal(err)
	}
	values := []uint32{PhysNone, PhysNull, PhysAnyPort, ifaceUnknown, 1, 2, 3, 4}
	for _, in := range values {
		for _, out := range values {
			if (in == PhysNone) != (out == PhysNone) {
				continue
			}
			p := tcpPacket(0, 64)
			p.PhysIn, p.PhysOut = in, out
			a, b := walk(g, p, ChainForward), walk(want, p, ChainForward)
			if !slices.Equal(a.counted, b.counted) || a.verdict != b.verdict {
				t.Errorf("in %#x out %#x: appended %v %v, compiled %v %v", in, out, a.counted, a.verdict, b.counted, b.verdict)
			}
		}
	}
}
