package compiler

import (
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// dockerRules is the ruleset Docker 20.10 writes with one container
// publishing port 8080 (recorded from iptables-legacy-save).
var dockerRules = []string{
	"-t nat -N DOCKER",
	"-t nat -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER",
	"-t nat -A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER",
	"-t nat -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE",
	"-t nat -A POSTROUTING -s 172.17.0.2/32 -d 172.17.0.2/32 -p tcp -m tcp --dport 80 -j MASQUERADE",
	"-t nat -A DOCKER -i docker0 -j RETURN",
	"-t nat -A DOCKER ! -i docker0 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80",
	"-P FORWARD DROP",
	"-N DOCKER", "-N DOCKER-ISOLATION-STAGE-1", "-N DOCKER-ISOLATION-STAGE-2", "-N DOCKER-USER",
	"-A FORWARD -j DOCKER-USER",
	"-A FORWARD -j DOCKER-ISOLATION-STAGE-1",
	"-A FORWARD -o docker0 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
	"-A FORWARD -o docker0 -j DOCKER",
	"-A FORWARD -i docker0 ! -o docker0 -j ACCEPT",
	"-A FORWARD -i docker0 -o docker0 -j ACCEPT",
	"-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m tcp --dport 80 -j ACCEPT",
	"-A DOCKER-ISOLATION-STAGE-1 -i docker0 ! -o docker0 -j DOCKER-ISOLATION-STAGE-2",
	"-A DOCKER-ISOLATION-STAGE-1 -j RETURN",
	"-A DOCKER-ISOLATION-STAGE-2 -o docker0 -j DROP",
	"-A DOCKER-ISOLATION-STAGE-2 -j RETURN",
	"-A DOCKER-USER -j RETURN",
}

// TestDockerRuleset checks that Docker's ruleset compiles: the DNAT is
// translated in nat PREROUTING (the INPUT and FORWARD walks) and ends nat
// OUTPUT untranslated for the host's own addresses; the MASQUERADE of any
// protocol and the hairpin one are SNAT entries of the FORWARD and OUTPUT
// walks.
func TestDockerRuleset(t *testing.T) {
	g, err := Compile(parseRuleset(t, ir.IPv4, dockerRules...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := target{172<<24 | 17<<16 | 2, 80}
	dnat := natTargets(g, ActDNAT)
	if len(dnat) != 2 || dnat[0] != want || dnat[1] != want {
		t.Errorf("DNAT entries %+v, want %+v in the INPUT and FORWARD walks only", dnat, want)
	}
	if snat := natTargets(g, ActSNAT); len(snat) != 4 {
		t.Errorf("SNAT entries %+v, want two in each of the FORWARD and OUTPUT walks", snat)
	}
}

// TestNatOutputRefusals checks that a DNAT or REDIRECT in nat OUTPUT that
// may see a destination other than the host's own is refused.
func TestNatOutputRefusals(t *testing.T) {
	for _, rules := range [][]string{
		{"-t nat -A OUTPUT -p tcp -j DNAT --to-destination 10.0.0.2"},
		{"-t nat -A OUTPUT -p tcp -m addrtype ! --dst-type LOCAL -j DNAT --to-destination 10.0.0.2"},
		{"-t nat -A OUTPUT -p tcp -m addrtype --dst-type LOCAL,UNICAST -j DNAT --to-destination 10.0.0.2"},
		{"-t nat -A OUTPUT -p tcp -m addrtype --src-type LOCAL -j REDIRECT --to-ports 8080"},
		{"-t nat -N D", "-t nat -A OUTPUT -m addrtype --dst-type LOCAL -j D", "-t nat -A OUTPUT -j D",
			"-t nat -A D -p tcp -j DNAT --to-destination 10.0.0.2"},
	} {
		_, err := Compile(parseRuleset(t, ir.IPv4, rules...), Options{})
		if err == nil || !strings.Contains(err.Error(), "nat OUTPUT is not supported by xfw") {
			t.Errorf("%q: got %v, want a refusal", rules, err)
		}
	}
	for _, rules := range [][]string{
		{"-t nat -A OUTPUT -p tcp -m addrtype --dst-type LOCAL -j DNAT --to-destination 10.0.0.2"},
		{"-t nat -A OUTPUT -m addrtype --dst-type LOCAL -p tcp -j REDIRECT --to-ports 8080"},
	} {
		if _, err := Compile(parseRuleset(t, ir.IPv4, rules...), Options{}); err != nil {
			t.Errorf("%q: %v", rules, err)
		}
	}
}
