package difftest_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The bounded run's nat rulesets: natRulesets random IPv4 ones (seeds
// after the stateful ones; DIFFTEST_NAT_COUNT changes it), nat6Rulesets
// random IPv6 ones (DIFFTEST_NAT6_COUNT) and a kube-proxy one, natPackets
// independent probes each (DIFFTEST_NAT_PACKETS), followed by the answers
// of sink or gen to a share of them. The Docker-style nat rulesets are
// among the realistic ones
// (internal/testkit/difftest/testdata/docker-nat.v4.rules, .v6.rules).
const (
	natRulesets  = 6
	nat6Rulesets = 2
	natPackets   = 1000
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
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	cases := randomNATCases(t, s, 4, envInt(t, "DIFFTEST_NAT_COUNT", natRulesets))
	cases = append(cases, difftest.Case{Name: "kube-proxy nat ruleset", Ruleset: kubeProxyRuleset(t)})
	checkNATCases(t, s, cases)
}

// natAppendRulesets is how many random IPv4 nat rulesets the bounded
// run loads into xfw with their filter base chains' first and last rules
// inserted, appended and deleted one by one (DIFFTEST_NAT_APPEND_COUNT
// changes it).
const natAppendRulesets = 2

// TestNATRulesetsAppended is TestNATRulesets for rulesets xfw loads
// partly by `iptables -I`, `-A` and `-D` of filter's base chains beside
// the nat table (Config.AppendTail, as TestRandomRulesetsAppended), which
// change the running generation in place; the kernel restores the whole.
// Filter's ACCEPTs added so must go on into nat's POSTROUTING and INPUT
// as the compiled ones do.
func TestNATRulesetsAppended(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack, c.AppendTail = true, appendTail })
	checkNATCases(t, s, randomNATCases(t, s, 4, envInt(t, "DIFFTEST_NAT_APPEND_COUNT", natAppendRulesets)))
	rules, inPlace := s.Appended()
	t.Logf("%d iptables -I, -A and -D commands, %d of them done in place", rules, inPlace)
	if rules == 0 || inPlace == 0 {
		t.Errorf("%d -I, -A and -D commands, %d of them in place: the in-place path beside nat was not taken", rules, inPlace)
	}
}

// TestNAT6Rulesets compares random IPv6 rulesets with a nat table (as
// TestNATRulesets: DNAT and REDIRECT in PREROUTING and OUTPUT, SNAT and
// MASQUERADE in POSTROUTING, with and without -p, ICMPv6 echo) against
// the kernel's: every probe where it arrives after translation, and the
// far end's answers as they arrive back, translated in reverse.
func TestNAT6Rulesets(t *testing.T) {
	s := session(t, ir.IPv6, func(c *difftest.Config) { c.Conntrack = true })
	checkNATCases(t, s, randomNATCases(t, s, 6, envInt(t, "DIFFTEST_NAT6_COUNT", nat6Rulesets)))
}

// natFirstSeed is the seed of the bounded run's first random nat ruleset
// (after the stateful ones), and of its first nat corpus.
func natFirstSeed(t *testing.T) int64 {
	return envInt(t, "DIFFTEST_SEED", defaultSeed) + envInt(t, "DIFFTEST_COUNT", defaultCount) +
		setRulesets + appendRulesets + envInt(t, "DIFFTEST_STATEFUL_COUNT", statefulRulesets)
}

// randomNATCases returns count random nat rulesets of family fam (4 or 6,
// s's) from natFirstSeed on.
func randomNATCases(t *testing.T, s *difftest.Session, fam int, count int64) []difftest.Case {
	seed, packets := natFirstSeed(t), envInt(t, "DIFFTEST_NAT_PACKETS", natPackets)
	var cases []difftest.Case
	for i := int64(0); i < count; i++ {
		sd := seed + i
		cases = append(cases, difftest.Case{Name: fmt.Sprintf("random ipv%d nat ruleset, seed %d", fam, sd),
			Ruleset: difftest.GenerateNATRuleset(sd, s.Plan()),
			Rerun:   fmt.Sprintf("xfw-difftest --family %d --nat --seed %d --rulesets 1 --packets %d", fam, sd, packets)})
	}
	return cases
}

// checkNATCases compares each nat case with its stateful corpus (seed
// natFirstSeed plus its index): natPackets independent probes and the far
// end's answers to a share of them (there must be some).
func checkNATCases(t *testing.T, s *difftest.Session, cases []difftest.Case) {
	seed, packets := natFirstSeed(t), int(envInt(t, "DIFFTEST_NAT_PACKETS", natPackets))
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

// TestNATNullBindingClash compares, with the Docker-style nat ruleset,
// packets of protocols without ports whose tuples clash after a
// translation: a container's packet to sink masqueraded to fw's address,
// then fw's own packet of that protocol from that address to sink (its
// reply tuple is the masqueraded one's: the kernel's confirmation drops
// it, bpf/nat_null.h); and the other order, fw's own first, then the
// container's, whose masquerade clashes (both drop it). Of the four
// probes each firewall must deliver exactly the two first ones of each
// pair: any other count means the clash did not happen as in the kernel.
func TestNATNullBindingClash(t *testing.T) {
	sets, err := difftest.Realistic()
	if err != nil {
		t.Fatal(err)
	}
	var ruleset string
	for _, n := range sets {
		if n.Name == "testdata/docker-nat.v4.rules" {
			ruleset = n.Text
		}
	}
	if ruleset == "" {
		t.Fatal("testdata/docker-nat.v4.rules not found")
	}
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	container := p.Gen // in 10.X.1.0/24: masqueraded
	fromGen := func(proto uint8, step int) difftest.Probe {
		pkt := nettest.IPv4{Src: container, Dst: p.Sink, TTL: 63}.Packet(nettest.Raw{Proto: proto, Data: []byte("null binding")})
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathForward, Frames: [][]byte{frame}, Step: step,
			Note: fmt.Sprintf("container's protocol %d", proto)}
	}
	fromFw := func(proto uint8, step int) difftest.Probe {
		pkt := nettest.IPv4{Src: p.FwOut, Dst: p.Sink}.Packet(nettest.Raw{Proto: proto, Data: []byte("null binding")})
		return difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{pkt}, Step: step,
			Note: fmt.Sprintf("fw's own protocol %d", proto)}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{fromGen(255, 0), fromFw(255, 1), fromFw(253, 2), fromGen(253, 3)}}
	checkObserved(t, s, difftest.Case{Name: "null binding clash", Ruleset: ruleset, Corpus: corpus}, [2]int{2, 2},
		"the first packet of each pair delivered, the second dropped")
}

// checkObserved runs a case that must show no difference, compared in
// full (no frames lost, loaded by both), and fails the test unless each
// firewall made exactly the observations want counts (kernel, xfw): what
// says which ones, for the report. A case where both firewalls lost the
// packets that matter would show no difference.
func checkObserved(t *testing.T, s *difftest.Session, c difftest.Case, want [2]int, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	o, err := s.Check(ctx, c, difftest.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Failed() || o.Result.Lossy != "" || o.Result.Rejected != "" {
		t.Fatalf("%s\nlossy: %q rejected: %q", o.Report(), o.Result.Lossy, o.Result.Rejected)
	}
	if o.Result.Observed != want {
		t.Errorf("observations (kernel, xfw) = %v, want %v: %s\n%s", o.Result.Observed, want, what, o.Report())
	}
}

// TestNATSnatOnePortClash compares an SNAT to a range of one port whose
// translated tuple is taken: a datagram and a SYN of gen's to sink
// translated to fw's in0 address and port 22, then fw's own datagram and
// SYN from port 22 of its out0 address to the same sink ports, translated
// to the same tuples. get_unique_tuple keeps the one port even when taken;
// the kernel's confirmation then drops fw's packets (nf_ct_resolve_clash:
// the rival is translated; bpf/nat_range.h xfw_snat_clash_drops; found by
// xfw difftest, nat seed 308). Each firewall must deliver exactly gen's
// two packets.
func TestNATSnatOnePortClash(t *testing.T) {
	s := session(t, ir.IPv4, func(c *difftest.Config) { c.Conntrack = true })
	p := s.Plan()
	ruleset := fmt.Sprintf("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		"-A POSTROUTING -p udp --dport 79 -j SNAT --to-source %s:22 --persistent\n"+
		"-A POSTROUTING -p tcp --dport 80 -j SNAT --to-source %s:22\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n", p.FwIn, p.FwIn)
	l4 := func(tcp bool, sport uint16) nettest.Transport {
		if tcp {
			return nettest.TCP{SrcPort: sport, DstPort: 80, Seq: 1000, Flags: nettest.TCPSyn, Window: 512}
		}
		return nettest.UDP{SrcPort: sport, DstPort: 79, Payload: []byte("one port clash")}
	}
	fromGen := func(tcp bool, step int) difftest.Probe {
		pkt := nettest.IPv4{Src: p.Gen, Dst: p.Sink, TTL: 64}.Packet(l4(tcp, 59879))
		frame := nettest.Ethernet{Dst: p.FwInMAC, Src: p.GenMAC}.Frame(pkt)
		return difftest.Probe{From: difftest.FromGen, Path: difftest.PathForward, Frames: [][]byte{frame}, Step: step,
			Note: fmt.Sprintf("gen's (tcp %v)", tcp)}
	}
	fromFw := func(tcp bool, step int) difftest.Probe {
		pkt := nettest.IPv4{Src: p.FwOut, Dst: p.Sink}.Packet(l4(tcp, 22))
		return difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput, Frames: [][]byte{pkt}, Step: step,
			Note: fmt.Sprintf("fw's own (tcp %v)", tcp)}
	}
	corpus := &difftest.Corpus{Probes: []difftest.Probe{fromGen(false, 0), fromFw(false, 1), fromGen(true, 2), fromFw(true, 3)}}
	checkObserved(t, s, difftest.Case{Name: "SNAT one port clash", Ruleset: ruleset, Corpus: corpus}, [2]int{2, 2},
		"gen's packets delivered, fw's dropped")
}
