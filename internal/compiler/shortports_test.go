package compiler

import (
	"errors"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestShortPortsOnlyWhenNeeded checks that a generation's port arrays have
// the cut-short part (ValShort + port) exactly when some condition tells
// those values from ValTrunc (multiport's, inverted or not), and that a
// packet cut short after its ports is judged alike either way: the tcp
// and udp matches hotdrop it, multiport reads its ports.
func TestShortPortsOnlyWhenNeeded(t *testing.T) {
	tests := []struct {
		name  string
		rules []string
		short bool
		// a TCP header cut short after ports 1234 → 80: dropped?
		drop bool
	}{
		{"no ports", []string{"-A INPUT -p tcp -j ACCEPT", "-P INPUT DROP"}, false, false},
		{"tcp --dport", []string{"-A INPUT -p tcp --dport 80 -j ACCEPT", "-P INPUT DROP"}, false, true},
		{"tcp ! --dport, hotdrop", []string{"-A INPUT -p tcp ! --dport 80 -j DROP"}, false, true},
		{"udp --sport", []string{"-A INPUT -p udp --sport 53 -j DROP"}, false, false},
		{"multiport --dports", []string{"-A INPUT -p tcp -m multiport --dports 80,443 -j ACCEPT", "-P INPUT DROP"}, true, false},
		{"multiport ! --sports", []string{"-A INPUT -p tcp -m multiport ! --sports 1:1024 -j DROP"}, true, true},
		{"multiport --ports", []string{"-A INPUT -p tcp -m multiport --ports 22 -j DROP"}, true, false},
		{"multiport then tcp", []string{"-A INPUT -p tcp -m multiport --dports 80 -m tcp --sport 1234 -j ACCEPT", "-P INPUT DROP"}, true, true},
		// A match after --ports is evaluated only when either port is
		// in the list (xfw difftest, IPv6 conntrack seed 232).
		{"multiport --ports then tcp, ports not listed", []string{"-A INPUT -p tcp -m multiport --ports 5000 -m tcp --tcp-option 8 -j DROP"}, true, false},
		{"multiport --ports then tcp, dport listed", []string{"-A INPUT -p tcp -m multiport --ports 80 -m tcp --tcp-option 8 -j DROP"}, true, true},
		{"multiport --ports then tcp, sport listed", []string{"-A INPUT -p tcp -m multiport --ports 1234 -m tcp --tcp-option 8 -j DROP"}, true, true},
		{"multiport --ports then udp, ports not listed", []string{"-A INPUT -p udp -m multiport --ports 5000 -m udp --sport 1 -j DROP"}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Compile(parseRuleset(t, ir.IPv4, tc.rules...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if g.NoShortPorts == tc.short {
				t.Errorf("NoShortPorts %v, want %v", g.NoShortPorts, !tc.short)
			}
			for _, f := range []Field{FieldSport, FieldDport} {
				want := ValShort + 65536
				if !tc.short {
					want = ValShort
				}
				if got := g.SmallDomain(f); g.Active&(1<<uint(f)) != 0 && got != want {
					t.Errorf("%s: %d values, want %d", f, got, want)
				}
			}
			proto := uint32(6)
			if strings.HasSuffix(tc.name, "then udp, ports not listed") {
				proto = 17
			}
			p := &Packet{Proto: proto, Sport: ValShort + 1234, Dport: ValShort + 80, TCPFlags: FlagsTrunc, ICMP: ValNone}
			res := g.Classify(p, ChainInput)
			got := res.Hotdrop || res.Entry < 0 && g.PolicyDrop[ChainInput] ||
				res.Entry >= 0 && g.Entries[res.Entry].Action == ActDrop
			if got != tc.drop {
				t.Errorf("cut-short header: dropped %v, want %v (%+v)", got, tc.drop, res)
			}
		})
	}
}

// TestAppendNeedingShortPorts checks that a rule whose conditions need the
// cut-short part is not appended in place to a generation without it
// (the caller compiles in full), and that one that does not is.
func TestAppendNeedingShortPorts(t *testing.T) {
	for _, tc := range []struct {
		rule string
		ok   bool
	}{
		{"-A INPUT -p tcp --dport 22 -j DROP", true},
		{"-A INPUT -p udp -m multiport --dports 53,123 -j DROP", false},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv4, "-A INPUT -p tcp --dport 80 -j ACCEPT"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !g.NoShortPorts {
			t.Fatal("a ruleset without multiport has the cut-short part")
		}
		r := parseRuleset(t, ir.IPv4, tc.rule).Chain(ir.ChainInput).Rules[0]
		_, err = AppendRule(g, r, ChainInput, NumChains+1, RuleRef{Chain: ir.ChainInput, Index: 1}, nil)
		if ok := err == nil; ok != tc.ok || err != nil && !errors.Is(err, ErrNotAppendable) {
			t.Errorf("%s: appended %v (%v), want %v", tc.rule, ok, err, tc.ok)
		}
	}
}

// TestShortUniform checks shortUniform on sets around the cut-short
// values (ValTrunc, ValShort to ValShort+65535).
func TestShortUniform(t *testing.T) {
	r := func(lo, hi uint64) Interval { return Interval{U64(lo), U64(hi)} }
	for _, tc := range []struct {
		name string
		s    *Set
		want bool
	}{
		{"any", nil, true},
		{"empty", &Set{}, true},
		{"ports", NewSet(r(0, 65535)), true},
		{"ports and none", NewSet(r(0, ValNone)), true},
		{"all cut short", NewSet(r(80, 80), r(ValTrunc, ValShort+65535)), true},
		{"beyond", NewSet(r(ValTrunc, ValShort+70000)), true},
		{"ValTrunc alone", NewSet(r(ValTrunc, ValTrunc)), false},
		{"cut short alone", NewSet(r(ValShort, ValShort+65535)), false},
		{"one twin", NewSet(r(80, 80), r(ValShort+80, ValShort+80)), false},
		{"a hole", NewSet(r(ValTrunc, ValShort+79), r(ValShort+81, ValShort+65535)), false},
		{"last twin", NewSet(r(ValShort+65535, ValShort+65535)), false},
	} {
		if got := shortUniform(tc.s); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
