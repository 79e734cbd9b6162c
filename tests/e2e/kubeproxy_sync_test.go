package e2e

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/kubeproxy"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestKubeProxyUnchangedSyncAgainstKernel loads kube-proxy's ruleset in
// xfw and iptables-legacy twins, sends connections to every service, then
// runs kube-proxy's partial sync with nothing changed (iptables-restore
// --noflush of the filter table, nat's fixed chains and one service's
// chains, as they are), sends as many connections again and compares every
// rule's counters: the chains the sync wrote start again from zero in
// both, the others go on. xfw must install its running generation again
// without compiling (XFW_TRACE names the step) and, with XFW_CHECK_REUSE,
// compile anyway and find the same generation; a rule with limit and
// --ctexpire in INPUT, which the sync leaves alone, covers what the
// generation's metadata must carry.
func TestKubeProxyUnchangedSyncAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	svcs, rules := kpRuleset(t)
	const changed = 1 // the service whose chains the sync writes again
	sync := kubeproxy.IPTablesUpdate(svcs, changed, &svcs[changed], netip.MustParsePrefix("10.244.0.0/16"), kubeproxy.IPTablesOptions{})
	tw := newTwins(t, xfwPath(t))
	if !kpLoad(t, tw, rules) {
		return
	}
	extra := []string{"-A", "INPUT", "-p", "udp", "--dport", "9", "-m", "conntrack", "--ctexpire", "1:2", "-m", "limit", "--limit", "5/s", "-j", "DROP"}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, append(append(fw.cmd(4, ""), "-w", lockWait), extra...)...)
	})
	kpConnect(t, tw, svcs, 20000)
	drainTwins(t, tw)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		if kind == "kernel" {
			fw.restore(t, tp, 4, sync, "--noflush")
			return
		}
		f, err := os.CreateTemp("", "xfw-sync-*.txt")
		if err != nil {
			t.Error(err)
			return
		}
		defer os.Remove(f.Name())
		if _, err := f.WriteString(sync); err != nil {
			t.Error(err)
			return
		}
		f.Close()
		res, err := nettest.Exec(tp.FwNS, "env", "XFW_TRACE=1", "XFW_CHECK_REUSE=1", fw.bin, "iptables-restore", "-w", lockWait, "--noflush", f.Name())
		if err != nil || res.ExitCode != 0 {
			t.Errorf("xfw partial sync failed (%v): %v", err, res)
			return
		}
		for _, step := range []string{"read running generation (unchanged rules)", "XFW_CHECK_REUSE: compiled, the same"} {
			if !strings.Contains(res.Stderr, step) {
				t.Errorf("xfw partial sync: no %q in its trace:\n%s", step, res.Stderr)
			}
		}
		if strings.Contains(res.Stderr, "commit: compile") {
			t.Errorf("xfw partial sync compiled:\n%s", res.Stderr)
		}
	})
	if t.Failed() {
		return
	}
	kpConnect(t, tw, svcs, 40000)
	drainTwins(t, tw)
	// The service whose chains the sync wrote counts the second round
	// only; the others both.
	want := make([]uint64, len(svcs))
	for i := range want {
		want[i] = 2 * kpConnections
	}
	want[changed] = kpConnections
	got := kpCounters(t, tw)
	compareKubeProxySums(t, svcs, got, want)
	for kind, c := range got {
		found := false
		for key := range c {
			found = found || strings.HasPrefix(key, "filter INPUT ") && strings.Contains(key, "--ctexpire 1:2")
		}
		if !found {
			t.Errorf("%s: the INPUT rule the sync leaves alone is gone", kind)
		}
	}
}
