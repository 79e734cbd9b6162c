package difftest_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
)

// The bounded run's nat rulesets (IPv4: xfw refuses IPv6 NAT): natRulesets
// random ones (seeds after the stateful ones; DIFFTEST_NAT_COUNT changes
// it) and a kube-proxy one, natPackets independent probes each
// (DIFFTEST_NAT_PACKETS), followed by the answers of sink or gen to a share
// of them. The Docker-style nat ruleset is among the realistic ones
// (internal/testkit/difftest/testdata/docker-nat.v4.rules).
const (
	natRulesets = 6
	natPackets  = 1000
)

// kubeProxyServices are the kube-proxy ruleset's services: one endpoint
// each (with more, -m statistic picks one at random, differently in each
// firewall), every second one a NodePort service.
const kubeProxyServices = 6

// TestNATRulesets compares rulesets with a nat table (DNAT and REDIRECT in
// PREROUTING and OUTPUT, SNAT and MASQUERADE in POSTROUTING, with address
// and port ranges, --random, --random-fully, --persistent) against the
// kernel's: every probe where it arrives after translation, and the
// answers from the far end as they arrive back, translated in reverse.
func TestNATRulesets(t *testing.T) {
	seed := envInt(t, "DIFFTEST_SEED", defaultSeed) + envInt(t, "DIFFTEST_COUNT", defaultCount) +
		setRulesets + appendRulesets + envInt(t, "DIFFTEST_STATEFUL_COUNT", statefulRulesets)
	count := envInt(t, "DIFFTEST_NAT_COUNT", natRulesets)
	packets := int(envInt(t, "DIFFTEST_NAT_PACKETS", natPackets))
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	var cases []difftest.Case
	for i := int64(0); i < count; i++ {
		sd := seed + i
		cases = append(cases, difftest.Case{Name: fmt.Sprintf("random nat ruleset, seed %d", sd), Ruleset: difftest.GenerateNATRuleset(sd, s.Plan()),
			Rerun: fmt.Sprintf("xfw-difftest --nat --seed %d --rulesets 1 --packets %d", sd, packets)})
	}
	cases = append(cases, difftest.Case{Name: "kube-proxy nat ruleset", Ruleset: kubeProxyRuleset(t)})
	for i, c := range cases {
		corpus, err := difftest.GenerateStatefulCorpus(seed+int64(i), s.Plan(), c.Ruleset, difftest.StatefulOptions{Probes: packets})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		answers := 0
		for _, p := range corpus.Probes {
			if p.Answer {
				answers++
			}
		}
		if answers == 0 {
			t.Fatalf("%s: no answers in the corpus", c.Name)
		}
		c.Corpus = corpus
		check(t, s, c)
	}
}

// kubeProxyRuleset returns kube-proxy's ruleset for kubeProxyServices
// services in the test topology: ClusterIPs beyond sink, their endpoints
// (pods) beyond sink too, gen outside the cluster network (masqueraded).
func kubeProxyRuleset(t *testing.T) string {
	t.Helper()
	o := kubeproxy.Options{Services: kubeProxyServices, Endpoints: 1, NodePortEvery: 2,
		ServiceCIDR:  netip.MustParsePrefix("203.0.113.64/26"),
		EndpointCIDR: netip.MustParsePrefix("172.16.0.0/24"),
		ClusterCIDR:  netip.MustParsePrefix("172.16.0.0/12")}
	svcs, err := kubeproxy.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: true})
}
