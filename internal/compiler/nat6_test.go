package compiler

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// TestNatIPv6Refused checks that every NAT target of an ip6tables nat
// table is refused, naming the target and IPv6, until the data plane
// translates IPv6 (docs/compatibility.md, "NAT in IPv6"), while an IPv6
// nat table without NAT targets (the chains Docker and kube-proxy create
// first) compiles.
func TestNatIPv6Refused(t *testing.T) {
	for _, tc := range []struct {
		rule, target string
	}{
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [fd00::2]", "DNAT"},
		{"-t nat -A PREROUTING -p udp --dport 53 -j DNAT --to-destination [fd00::2]:5353", "DNAT"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination [fd00::2-fd00::9]:80-90 --random", "DNAT"},
		{"-t nat -A PREROUTING -p tcp -j DNAT --to-destination :8080", "DNAT"},
		{"-t nat -A OUTPUT -p tcp -j DNAT --to-destination [fd00::2]", "DNAT"},
		{"-t nat -A PREROUTING -p tcp -j REDIRECT --to-ports 3128", "REDIRECT"},
		{"-t nat -A OUTPUT -p tcp -j REDIRECT", "REDIRECT"},
		{"-t nat -A POSTROUTING -p tcp -j SNAT --to-source [fd00::1]:1000-2000 --persistent", "SNAT"},
		{"-t nat -A POSTROUTING -j SNAT --to-source fd00::1", "SNAT"},
		{"-t nat -A POSTROUTING -p udp -j MASQUERADE --to-ports 6000 --random-fully", "MASQUERADE"},
		{"-t nat -A POSTROUTING -o eth0 -j MASQUERADE", "MASQUERADE"},
		{"-t nat -A POSTROUTING -s fd00:17::/64 ! -o docker0 -j MASQUERADE", "MASQUERADE"},
		{"-t nat -A PREROUTING -i eth0 -p tcp -j DNAT --to-destination [fd00::2]:80", "DNAT"},
	} {
		_, err := Compile(parseRuleset(t, ir.IPv6, tc.rule), Options{})
		want := "target " + tc.target + " is not supported by xfw's data plane for IPv6 yet"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", tc.rule, err, want)
		}
	}
	unreached := parseRuleset(t, ir.IPv6, "-t nat -N X", "-t nat -A X -j MASQUERADE")
	if _, err := Compile(unreached, Options{}); err != nil {
		t.Errorf("an IPv6 MASQUERADE in a chain nothing jumps to: %v", err)
	}
	rs := parseRuleset(t, ir.IPv6,
		"-t nat -N DOCKER",
		"-t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
		"-t nat -A OUTPUT ! -d ::1/128 -m addrtype --dst-type LOCAL -j DOCKER",
		"-t nat -A DOCKER -i docker0 -j RETURN")
	if _, err := Compile(rs, Options{}); err != nil {
		t.Errorf("an IPv6 nat table without NAT targets: %v", err)
	}
}

// TestNatRefusedWithoutTerms checks that a NAT rule the data plane cannot
// translate is refused even when none of its terms can match yet (an
// interface the compiler was not told about), in its chain or in a chain
// only such a rule jumps to: the compile the interface's appearance
// triggers would refuse it after the command had succeeded
// (checkNatReach). A chain no nat chain reaches is not checked (the
// command that jumps to it is).
func TestNatRefusedWithoutTerms(t *testing.T) {
	for _, tc := range []struct {
		fam        ir.Family
		rule, want string
	}{
		{ir.IPv6, "-t nat -A POSTROUTING -o eth0 -j MASQUERADE", "for IPv6"},
		{ir.IPv4, "-t nat -A POSTROUTING -o eth0 -p tcp -j SNAT --to-source 10.0.0.2:80-90/100", "port maps"},
		{ir.IPv4, "-t nat -A PREROUTING -i eth0 -p icmp -j DNAT --to-destination 10.0.0.2", "-p tcp or -p udp"},
		// Only a rule that cannot match yet jumps to the chain.
		{ir.IPv6, "-t nat -N X;-t nat -A X -j MASQUERADE;-t nat -A POSTROUTING -o eth0 -j X", "for IPv6"},
		{ir.IPv4, "-t nat -N X;-t nat -A X -j SNAT --to-source 10.0.0.1;-t nat -A INPUT -i eth0 -g X",
			"outside nat POSTROUTING"},
	} {
		rs := parseRuleset(t, tc.fam, strings.Split(tc.rule, ";")...)
		_, err := Compile(rs, Options{Interfaces: []Interface{{Index: 1, Name: "lo"}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want a refusal saying %q", tc.rule, err, tc.want)
		}
	}
}
