package kubeproxy

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// kernelTimeout bounds one restore of the small ruleset.
const kernelTimeout = 30 * time.Second

// TestKernelAcceptsRulesets loads the generated rulesets into the kernel in
// a namespace of the test's own: the iptables mode with iptables-legacy-
// restore (full sync, then the partial sync with --noflush, which must
// leave what a full sync of the new state leaves) and the nftables mode
// with nft -f (full, then the partial update).
func TestKernelAcceptsRulesets(t *testing.T) {
	topo := nettest.New(t)
	ns := topo.FwNS
	svcs, o := small(t)
	old := svcs[1]
	moved := append([]Service(nil), svcs...)
	moved[1] = MoveEndpoint(&old, netip.MustParseAddr("10.180.9.9"))

	load := func(stdin string, argv ...string) {
		t.Helper()
		_, err := nettest.ExecStdin(kernelTimeout, ns, stdin, argv...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stdin)
		}
	}
	opts := IPTablesOptions{Bootstrap: true}
	load(IPTables(svcs, o.ClusterCIDR, opts), "iptables-legacy-restore", "-w")
	load(IPTablesUpdate(moved, 1, &old, o.ClusterCIDR, opts), "iptables-legacy-restore", "-w", "--noflush")
	got := kernelSave(t, ns)
	load(IPTables(moved, o.ClusterCIDR, opts), "iptables-legacy-restore", "-w")
	if want := kernelSave(t, ns); got != want {
		t.Errorf("after the partial sync:\n%s\nwant (full sync):\n%s", got, want)
	}
	if !strings.Contains(got, "--probability 0.33333333349") {
		t.Errorf("iptables-legacy-save lost the statistic match:\n%s", got)
	}

	nodeIP := topo.FwIn.IPv4
	load(NFTables(svcs, o.ServiceCIDR, o.ClusterCIDR, nodeIP), "nft", "-f", "-")
	load(NFTablesUpdate(&moved[1], &old, o.ClusterCIDR), "nft", "-f", "-")
	listing := nettest.MustExec(t, ns, "nft", "list", "chain", "ip", "kube-proxy", old.NFTServiceChain())
	if !strings.Contains(listing, "10.180.9.9") || strings.Contains(listing, old.NFTEndpointChain(old.Endpoints[0])) {
		t.Errorf("nft update did not move endpoint 0:\n%s", listing)
	}
}

// kernelSave is iptables-legacy-save of nat and filter without comments
// and counters.
func kernelSave(t *testing.T, ns string) string {
	t.Helper()
	var lines []string
	for _, table := range []string{"filter", "nat"} {
		out := nettest.MustExec(t, ns, "iptables-legacy-save", "-t", table)
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
	}
	return strings.Join(lines, "\n")
}
