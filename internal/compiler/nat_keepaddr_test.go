package compiler

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatWithoutAddress checks DNAT and SNAT without an address
// (`:PORT`, `:PORT-PORT`): the entry keeps the packet's own address
// (KeepAddr) with the port, or names a range without NatMapIPs; a
// translation to 255.255.255.255 (KeepAddr's value) is refused.
func TestNatWithoutAddress(t *testing.T) {
	for _, tc := range []struct {
		rule   string
		act    Action
		port   uint16
		ranged bool
	}{
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination :8080", ActDNAT, 8080, false},
		{"-t nat -A OUTPUT -p udp -j DNAT --to-destination :53", ActDNAT, 53, false},
		{"-t nat -A PREROUTING -p udp -j DNAT --to-destination :7000-7009", ActDNAT, 0, true},
		{"-t nat -A POSTROUTING -p udp -j SNAT --to-source :2000", ActSNAT, 2000, false},
		{"-t nat -A POSTROUTING -p tcp -j SNAT --to-source :2000-2009", ActSNAT, 0, true},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv4, tc.rule), Options{})
		if err != nil {
			t.Errorf("%q: %v", tc.rule, err)
			continue
		}
		found := false
		for _, e := range g.Entries {
			if e.Action != tc.act {
				continue
			}
			found = true
			if e.Next != KeepAddr {
				t.Errorf("%q: address %#x, want KeepAddr", tc.rule, e.Next)
			}
			ranged := e.Flags&EFNatRange != 0
			if ranged != tc.ranged || (!ranged && e.Aux != tc.port) {
				t.Errorf("%q: port %d ranged %v, want %d ranged %v", tc.rule, e.Aux, ranged, tc.port, tc.ranged)
			}
			if ranged {
				pr := g.Probes[e.Aux]
				if pr.Arg&uint32(ir.NatMapIPs) != 0 || pr.Wide == 0 {
					t.Errorf("%q: range probe %+v, want ports without addresses", tc.rule, pr)
				}
			}
		}
		if !found {
			t.Errorf("%q: no entry of action %d", tc.rule, tc.act)
		}
	}
	for _, rule := range []string{
		"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 255.255.255.255",
		"-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.1-255.255.255.255",
		"-t nat -A POSTROUTING -p tcp -j SNAT --to-source 255.255.255.255:80",
	} {
		_, err := Compile(parseRuleset(t, ir.IPv4, rule), Options{})
		if err == nil || !strings.Contains(err.Error(), "not supported by xfw") {
			t.Errorf("%q: got %v, want a refusal", rule, err)
		}
	}
}
