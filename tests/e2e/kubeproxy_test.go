package e2e

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// kube-proxy's own ruleset (internal/testkit/kubeproxy: 3 services × 3
// endpoints, one a NodePort service) in xfw and in iptables-legacy twins:
// new TCP connections from gen to every ClusterIP, then the counters of
// every rule of nat and filter compared. The endpoint choice is random
// (-m statistic --mode random), so the endpoint rules are compared by
// their sum per service and each must have taken a fair share in both.

// kpConnections is the number of new connections sent to each service.
const kpConnections = 60

// kpShare bounds an endpoint's share of kpConnections among 3 endpoints
// (mean 20, standard deviation 3.65: about 3.8 deviations each side).
const kpShareLow, kpShareHigh = 6, 34

// kpRuleset returns the ruleset of tp: ClusterIPs 172.30.0.1-3, endpoints
// 10.180.0.1-9 (routed to sink), pods in 10.244.0.0/16 (gen is outside:
// every connection is masqueraded).
func kpRuleset(t *testing.T) ([]kubeproxy.Service, string) {
	t.Helper()
	return kpRulesetWith(t, 0)
}

// kpRulesetWith is kpRuleset with every sctpEvery-th service an SCTP
// service (0: none).
func kpRulesetWith(t *testing.T, sctpEvery int) ([]kubeproxy.Service, string) {
	t.Helper()
	o := kubeproxy.DefaultOptions(3, 3)
	o.SCTPEvery = sctpEvery
	o.NodePortEvery = 2
	o.EndpointCIDR = netip.MustParsePrefix("10.180.0.0/24")
	o.ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	svcs, err := kubeproxy.Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	return svcs, kubeproxy.IPTables(svcs, o.ClusterCIDR, kubeproxy.IPTablesOptions{Bootstrap: true})
}

// TestKubeProxyAgainstKernel sends new connections to each ClusterIP of
// kube-proxy's ruleset through xfw and iptables-legacy and compares the
// counters of every rule.
func TestKubeProxyAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	svcs, rules := kpRuleset(t)
	tw := newTwins(t, xfwPath(t))
	if !kpLoad(t, tw, rules) {
		return
	}
	kpConnect(t, tw, svcs, 20000)
	drainTwins(t, tw)
	compareKubeProxyCounters(t, svcs, kpCounters(t, tw))
}

// TestKubeProxySCTPAgainstKernel is TestKubeProxyAgainstKernel with an
// SCTP service among the TCP ones (kube-proxy's SCTP rules: -m sctp -p
// sctp, DNAT to the endpoints, MASQUERADE --random-fully), an INIT per
// new connection: the ruleset loads and the counters are the kernel's.
func TestKubeProxySCTPAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	svcs, rules := kpRulesetWith(t, 2)
	if !strings.Contains(rules, "-p sctp") {
		t.Fatalf("the ruleset has no SCTP service:\n%s", rules)
	}
	tw := newTwins(t, xfwPath(t))
	if !kpLoad(t, tw, rules) {
		return
	}
	kpConnect(t, tw, svcs, 21000)
	drainTwins(t, tw)
	compareKubeProxyCounters(t, svcs, kpCounters(t, tw))
}

// kpLocalConnections is the number of fw's own connections per service
// in TestKubeProxyLocalAndForwardedAgainstKernel.
const kpLocalConnections = 30

// TestKubeProxyLocalAndForwardedAgainstKernel sends new connections to
// each ClusterIP from gen (nat PREROUTING) and from fw itself (nat
// OUTPUT) through xfw and iptables-legacy and compares the counters of
// every rule: kube-proxy's nat chains, reached from both, are one region
// of both views in xfw (docs/design.md, Classification), which the two
// paths must reach with the kernel's counts and endpoint distribution.
func TestKubeProxyLocalAndForwardedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	svcs, rules := kpRuleset(t)
	tw := newTwins(t, xfwPath(t))
	if !kpLoad(t, tw, rules) {
		return
	}
	kpConnect(t, tw, svcs, 20000)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		var wg sync.WaitGroup
		for i := range svcs {
			dst := netip.AddrPortFrom(svcs[i].ClusterIP, svcs[i].Port)
			for c := 0; c < kpLocalConnections; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// sink drops the SYN: the attempt times out
					// before the SYN's first retransmission (1 s).
					nettest.TCPConnect(tp.FwNS, dst, nettest.WithTimeout(500*time.Millisecond))
				}()
			}
		}
		wg.Wait()
	})
	drainTwins(t, tw)
	want := make([]uint64, len(svcs))
	for i := range want {
		want[i] = kpConnections + kpLocalConnections
	}
	compareKubeProxySums(t, svcs, kpCounters(t, tw), want)
	// Translated, both ways: every connection's reply comes from an
	// endpoint (10.180.0.0/24), in both twins' connection tables.
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		argv := []string{"conntrack", "-L"}
		if kind == "xfw" {
			argv = append([]string{fw.bin}, argv...)
		}
		res, err := nettest.Exec(tp.FwNS, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s conntrack -L: %v %v", kind, err, res)
			return
		}
		local, forwarded := 0, 0
		for _, line := range strings.Split(res.Stdout, "\n") {
			var srcs []string
			for _, w := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(w, "src="); ok {
					srcs = append(srcs, v)
				}
			}
			if len(srcs) != 2 || !strings.HasPrefix(srcs[1], "10.180.0.") {
				continue
			}
			if srcs[0] == tp.Gen.IPv4.String() {
				forwarded++
			} else {
				local++
			}
		}
		if local != len(svcs)*kpLocalConnections || forwarded != len(svcs)*kpConnections {
			t.Errorf("%s: %d of fw's own and %d forwarded connections translated to an endpoint, want %d and %d",
				kind, local, forwarded, len(svcs)*kpLocalConnections, len(svcs)*kpConnections)
		}
	})
}

// kpLoad routes the endpoints and a default route through sink in both
// twins and loads rules (kernel: iptables-legacy-restore, xfw: its
// restore); false when xfw's restore failed (reported).
func kpLoad(t *testing.T, tw *twins, rules string) bool {
	t.Helper()
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", "10.180.0.0/24", "via", in4(tp, 2, 2).String())
		// A node's default route: xfw routes a packet before its nat
		// PREROUTING walk, and passes one without a route unjudged
		// (docs/differences.md), where the kernel translates it first.
		nettest.MustExec(t, tp.FwNS, "ip", "route", "add", "default", "via", in4(tp, 2, 2).String())
		silenceSink(t, tp)
		if kind == "kernel" {
			fw.restore(t, tp, 4, rules)
			return
		}
		res, err := fw.try(tp, 4, "-restore", rules)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("xfw restore failed (%v): %v", err, res)
		}
	})
	return !t.Failed()
}

// kpConnect sends kpConnections new TCP connections (SYNs from gen, source
// ports from firstPort up) to each service's ClusterIP in both twins.
func kpConnect(t *testing.T, tw *twins, svcs []kubeproxy.Service, firstPort int) {
	t.Helper()
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		var frames [][]byte
		for i := range svcs {
			dst := netip.AddrPortFrom(svcs[i].ClusterIP, svcs[i].Port)
			for c := 0; c < kpConnections; c++ {
				src := netip.AddrPortFrom(tp.Gen.IPv4, uint16(firstPort+i*kpConnections+c))
				if svcs[i].Proto == "sctp" {
					init := natSCTPPacket(src.Port(), dst.Port(), 0, natSCTPInit, uint32(0x1000+c))
					pkt := nettest.IPv4{Src: src.Addr(), Dst: dst.Addr()}.Packet(nettest.Raw{Proto: nettest.ProtoSCTP, Data: init})
					frames = append(frames, tp.GenToFw().Frame(pkt))
					continue
				}
				frames = append(frames, tp.GenToFw().Frame(nettest.TCPPacket(src, dst, nettest.TCPSyn, 1, nil)))
			}
		}
		if err := tp.InjectFromGen(frames...); err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
	})
}

// kpCounters returns each twin's counters of every nat and filter rule
// (keys "TABLE CHAIN RULE").
func kpCounters(t *testing.T, tw *twins) map[string]map[string]counter {
	t.Helper()
	got := map[string]map[string]counter{}
	for kind, tp := range tw.tps {
		got[kind] = map[string]counter{}
		for _, table := range []string{"nat", "filter"} {
			argv := append(tw.fws[kind].cmd(4, "-save"), "-c", "-t", table)
			for k, v := range ruleCountersOf(t, nettest.MustExec(t, tp.FwNS, argv...)) {
				got[kind][table+" "+k] = v
			}
		}
	}
	return got
}

// compareKubeProxyCounters compares the packet counters (keys "TABLE
// CHAIN RULE"): equal for every rule but the endpoint choice's (the jumps
// "SERVICE -> ENDPOINT" and the KUBE-SEP chains' rules), which must add up
// to the connections sent per service and give each endpoint a fair share,
// in both.
func compareKubeProxyCounters(t *testing.T, svcs []kubeproxy.Service, got map[string]map[string]counter) {
	t.Helper()
	want := make([]uint64, len(svcs))
	for i := range want {
		want[i] = kpConnections
	}
	compareKubeProxySums(t, svcs, got, want)
}

// compareKubeProxySums is compareKubeProxyCounters with want[i]
// connections through service i's endpoint jumps.
func compareKubeProxySums(t *testing.T, svcs []kubeproxy.Service, got map[string]map[string]counter, want []uint64) {
	t.Helper()
	kernel, xfw := got["kernel"], got["xfw"]
	sums := map[string][]uint64{"kernel": make([]uint64, len(svcs)), "xfw": make([]uint64, len(svcs))}
	for key, k := range kernel {
		x, ok := xfw[key]
		if !ok {
			t.Errorf("rule %q: in the kernel's ruleset, not in xfw's", key)
			continue
		}
		if f := strings.Fields(key); len(f) > 1 && strings.HasPrefix(f[1], "KUBE-SEP-") {
			continue // the endpoints' chains: checked through the jumps to them
		}
		svc := -1
		for i := range svcs {
			if strings.Contains(key, `"`+svcs[i].String()+" -> ") {
				svc = i
			}
		}
		if svc < 0 {
			if k.packets != x.packets {
				t.Errorf("rule %q: kernel %d packets, xfw %d", key, k.packets, x.packets)
			}
			continue
		}
		// A fair share of want[svc] connections (kpShareLow and
		// kpShareHigh scaled: looser than the bounds' 3.8 deviations).
		lo, hi := kpShareLow*want[svc]/kpConnections, kpShareHigh*want[svc]/kpConnections
		for kind, c := range map[string]uint64{"kernel": k.packets, "xfw": x.packets} {
			sums[kind][svc] += c
			if c < lo || c > hi {
				t.Errorf("%s: %q took %d of %d connections, want %d..%d", kind, key, c, want[svc], lo, hi)
			}
		}
	}
	for key := range xfw {
		if _, ok := kernel[key]; !ok {
			t.Errorf("rule %q: in xfw's ruleset, not in the kernel's", key)
		}
	}
	for kind, s := range sums {
		for i := range svcs {
			if s[i] != want[i] {
				t.Errorf("%s: service %s: its endpoint jumps took %d connections, want %d", kind, svcs[i].String(), s[i], want[i])
			}
		}
	}
}
