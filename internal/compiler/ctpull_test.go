package compiler

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatTableWithoutConntrackIsNotWalked checks that a nat table is in
// the walks only when some rule of the family asks the kernel to track
// connections (ctpull.go), as iptables-legacy counts it: without such a
// rule no entry counts or logs for the nat table and the generation does
// not track; with one (anywhere, reached or not) the nat chains are
// walked. The cases are the ones checked against the kernel.
func TestNatTableWithoutConntrackIsNotWalked(t *testing.T) {
	nat := []string{
		"-t nat -N UNUSED",
		"-t nat -A PREROUTING -p tcp",
		"-t nat -A INPUT -j LOG",
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-N UNUSEDF",
	}
	tests := []struct {
		name   string
		fam    ir.Family
		rules  []string
		walked bool
	}{
		{"empty nat table", ir.IPv4, []string{"-t nat -P POSTROUTING ACCEPT"}, false},
		{"nat rules without NAT", ir.IPv4, nil, false},
		{"ipv6 nat rules without NAT", ir.IPv6, nil, false},
		{"raw NOTRACK", ir.IPv4, []string{"-t raw -A PREROUTING -j NOTRACK"}, false},
		{"raw CT --notrack", ir.IPv6, []string{"-t raw -A PREROUTING -j CT --notrack"}, false},
		{"filter LOG and REJECT", ir.IPv4, []string{"-A INPUT -j LOG", "-A INPUT -j REJECT"}, false},
		{"-m conntrack", ir.IPv4, []string{"-A INPUT -m conntrack --ctstate NEW"}, true},
		{"-m state", ir.IPv6, []string{"-A INPUT -m state --state NEW"}, true},
		{"-m connmark", ir.IPv4, []string{"-A INPUT -m connmark --mark 1"}, true},
		{"-m connlimit", ir.IPv4, []string{"-A INPUT -p tcp -m connlimit --connlimit-above 10"}, true},
		{"CONNMARK", ir.IPv4, []string{"-t mangle -A PREROUTING -j CONNMARK --set-mark 1"}, true},
		{"DNAT in an unused chain", ir.IPv4, []string{"-t nat -A UNUSED -p tcp -j DNAT --to-destination 10.0.0.1"}, true},
		{"conntrack in an unused chain", ir.IPv6, []string{"-A UNUSEDF -m conntrack --ctstate NEW"}, true},
		{"MASQUERADE", ir.IPv4, []string{"-t nat -A POSTROUTING -o eth0 -j MASQUERADE"}, true},
		{"REDIRECT", ir.IPv6, []string{"-t nat -A OUTPUT -p tcp --dport 80 -j REDIRECT --to-ports 8080"}, true},
	}
	for _, tt := range tests {
		rs := parseRuleset(t, tt.fam, append(append([]string{}, nat...), tt.rules...)...)
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		natCounters := map[uint32]bool{}
		ForEachCounter(rs, func(counter int, ref RuleRef, _ *ir.Chain, _ *ir.Rule) {
			if ref.Table == ir.TableNat {
				natCounters[uint32(counter)] = true
			}
		})
		counted := 0
		for _, e := range g.Entries {
			if natCounters[e.Rule] {
				counted++
			}
		}
		if tracks := g.Active&(1<<FieldCt) != 0; tracks != tt.walked || (counted > 0) != tt.walked {
			t.Errorf("%s: tracking %v, %d entries count nat's counters; want walked %v", tt.name, tracks, counted, tt.walked)
		}
		if got := natWalked(rs); got != tt.walked {
			t.Errorf("%s: natWalked %v, want %v", tt.name, got, tt.walked)
		}
	}
}
