package compiler

import (
	"slices"
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
// translated in nat PREROUTING (the DOCKER chain's region the INPUT and
// FORWARD walks share) and in nat OUTPUT (its region in the OUTPUT walk's
// view); the MASQUERADE of any protocol and the
// hairpin one are SNAT entries of the FORWARD and OUTPUT walks.
func TestDockerRuleset(t *testing.T) {
	g, err := Compile(parseRuleset(t, ir.IPv4, dockerRules...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := target{172<<24 | 17<<16 | 2, 80}
	dnat := natTargets(g, ActDNAT)
	if len(dnat) != 2 || dnat[0] != want || dnat[1] != want {
		t.Errorf("DNAT entries %+v, want %+v in nat PREROUTING's and nat OUTPUT's regions", dnat, want)
	}
	if snat := natTargets(g, ActSNAT); len(snat) != 4 {
		t.Errorf("SNAT entries %+v, want two in each of the FORWARD and OUTPUT walks", snat)
	}
}

// TestNatOutputEntries checks DNAT and REDIRECT in nat OUTPUT: entries of
// the OUTPUT walk before its resume position, REDIRECT to 127.0.0.1
// (nf_nat_redirect_ipv4 at LOCAL_OUT), to any destination, of any
// protocol without ports (the address alone); POSTROUTING's
// start after the resume position.
func TestNatOutputEntries(t *testing.T) {
	for _, tc := range []struct {
		rules []string
		want  []target
	}{
		{[]string{"-t nat -A OUTPUT -p tcp -j DNAT --to-destination 10.0.0.2"},
			[]target{{10<<24 | 2, 0}}},
		{[]string{"-t nat -A OUTPUT -p udp -m addrtype ! --dst-type LOCAL -j DNAT --to-destination 10.0.0.2:53"},
			[]target{{10<<24 | 2, 53}}},
		{[]string{"-t nat -A OUTPUT -p tcp -m addrtype --dst-type LOCAL -j REDIRECT --to-ports 8080"},
			[]target{{redirectOutputAddr, 8080}}},
		// Without ports, any protocol: by the address (bpf/nat_out.h).
		{[]string{"-t nat -A OUTPUT -j DNAT --to-destination 10.0.0.2"},
			[]target{{10<<24 | 2, 0}}},
		{[]string{"-t nat -A OUTPUT -p icmp -j REDIRECT", "-t nat -A OUTPUT -p sctp -j DNAT --to-destination 10.0.0.3"},
			[]target{{redirectOutputAddr, 0}, {10<<24 | 3, 0}}},
		{[]string{"-t nat -N D", "-t nat -A OUTPUT -j D", "-t nat -A D -p tcp -j REDIRECT",
			"-t nat -A PREROUTING -p tcp -j REDIRECT"},
			[]target{{RedirectAddr, 0}, {RedirectAddr, 0}, {redirectOutputAddr, 0}}},
	} {
		g, err := Compile(parseRuleset(t, ir.IPv4, tc.rules...), Options{})
		if err != nil {
			t.Errorf("%q: %v", tc.rules, err)
			continue
		}
		if got := natTargets(g, ActDNAT); !slices.Equal(got, tc.want) {
			t.Errorf("%q: DNAT entries %+v, want %+v", tc.rules, got, tc.want)
		}
		r := g.Layout.NatResume[ChainOutput]
		start, end := g.Walk(ChainOutput)
		if r == 0 || r-1 <= start || r-1 >= end {
			t.Errorf("%q: OUTPUT resume %d outside its walk [%d,%d)", tc.rules, r, start, end)
			continue
		}
		for i := start; i < end; i++ {
			if g.Entries[i].Action == ActDNAT && i >= r-1 {
				t.Errorf("%q: DNAT entry %d after OUTPUT's resume position %d", tc.rules, i, r-1)
			}
		}
		// POSTROUTING (nat's, at least) follows the OUTPUT chains.
		if p := g.Layout.PostStart[ChainOutput]; p <= r || p-1 >= end {
			t.Errorf("%q: OUTPUT's POSTROUTING start %d outside (%d,%d)", tc.rules, p, r, end)
		}
	}
}
