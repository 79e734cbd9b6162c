package e2e

import (
	"strings"
	"sync"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// tableSteps are the table commands TestTablesMatchKernel runs on both
// twins: the chains a container runtime sets up, empty mangle, raw and
// security tables, a restore of two tables, renames and deletions.
var tableSteps = [][]string{
	{"-A", "FORWARD", "-j", "ACCEPT"},
	{"-t", "nat", "-N", "DOCKER"},
	{"-t", "nat", "-C", "PREROUTING", "-m", "addrtype", "--dst-type", "LOCAL", "-j", "DOCKER"},
	{"-t", "nat", "-A", "PREROUTING", "-j", "NOCHAIN"},
	{"-t", "nat", "-N", "DOCKER-INGRESS"},
	{"-t", "nat", "-E", "DOCKER-INGRESS", "DOCKER-X"},
	{"-t", "mangle", "-N", "MARKS"},
	{"-t", "raw", "-L", "-n"},
	{"-t", "security", "-S"},
	{"-t", "nat", "-A", "OUTPUT", "-j", "DROP"},
	{"-t", "nat", "-A", "INPUT", "-j", "DNAT", "--to-destination", "10.0.0.1"},
	{"-t", "nat", "-X", "DOCKER-X"},
}

// TestTablesMatchKernel runs table commands on the kernel's iptables and
// on xfw and compares exit statuses, messages and iptables-save: xfw keeps
// the nat, mangle, raw and security tables as the kernel does.
func TestTablesMatchKernel(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tw := newTwins(t, bin)
	type outcome struct {
		rc             int
		stdout, stderr string
	}
	results := map[string][]outcome{}
	saves := map[string]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		var got []outcome
		for _, step := range tableSteps {
			argv := append(append(fw.cmd(4, ""), "-w", "60"), step...)
			res, err := nettest.Exec(tp.FwNS, argv...)
			if res == nil {
				t.Errorf("%s %v: %v", kind, step, err)
				return
			}
			got = append(got, outcome{res.ExitCode, res.Stdout, res.Stderr})
		}
		res, err := nettest.Exec(tp.FwNS, fw.cmd(4, "-save")...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s save: %v %s", kind, err, res.Stderr)
			return
		}
		mu.Lock()
		results[kind], saves[kind] = got, stripComments(res.Stdout)
		mu.Unlock()
	})
	for i, step := range tableSteps {
		k, x := results["kernel"][i], results["xfw"][i]
		if k != x {
			t.Errorf("%v: kernel %d %q %q, xfw %d %q %q", step, k.rc, k.stdout, k.stderr, x.rc, x.stdout, x.stderr)
		}
	}
	// -t raw -L and -t security -S create those tables in the kernel;
	// xfw commits nothing for a listing, so the tables appear in the
	// kernel's save only.
	kernel := dropTables(saves["kernel"], "raw", "security")
	if kernel != saves["xfw"] {
		t.Errorf("iptables-save differs\nkernel:\n%s\nxfw:\n%s", kernel, saves["xfw"])
	}
}

// TestTableRulesRefused checks that a rule xfw cannot enforce (NAT
// forms: SNAT's shifted port map, DNAT of DCCP in nat OUTPUT and in nat
// PREROUTING) is refused with a message naming it, in commands and in
// iptables-restore, leaving the running ruleset as it was.
func TestTableRulesRefused(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*nat\n:DOCKER - [0:0]\nCOMMIT\n*filter\n:FORWARD DROP [0:0]\nCOMMIT\n")
	before := fw.save(t, tp, 4)
	for _, step := range [][]string{
		{"-t", "nat", "-A", "POSTROUTING", "-p", "tcp", "-j", "SNAT", "--to-source", "10.0.0.2:1000-2000/3000"},
		{"-t", "nat", "-A", "OUTPUT", "-p", "dccp", "-j", "DNAT", "--to-destination", "10.0.0.2"},
		{"-t", "nat", "-A", "PREROUTING", "-p", "dccp", "-j", "DNAT", "--to-destination", "10.0.0.2:80"},
	} {
		res, err := nettest.Exec(tp.FwNS, append([]string{bin, "iptables", "-w", "60"}, step...)...)
		if res == nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "not supported by xfw's data plane") {
			t.Errorf("%v: exit %d %q, want a refusal", step, res.ExitCode, res.Stderr)
		}
	}
	res, _ := fw.try(tp, 4, "-restore", "*nat\n-A PREROUTING -p dccp -j DNAT --to-destination 10.0.0.1\nCOMMIT\n")
	if res == nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "target DNAT is not supported by xfw") {
		t.Errorf("restore of a nat rule: %+v", res)
	}
	if after := fw.save(t, tp, 4); stripComments(after) != stripComments(before) {
		t.Errorf("ruleset changed by refused commands\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// dropTables removes the blocks of the named tables from save output.
func dropTables(save string, tables ...string) string {
	var b strings.Builder
	skip := false
	for _, l := range strings.SplitAfter(save, "\n") {
		if strings.HasPrefix(l, "*") {
			skip = false
			for _, t := range tables {
				skip = skip || l == "*"+t+"\n"
			}
		}
		if !skip {
			b.WriteString(l)
		}
		if l == "COMMIT\n" {
			skip = false
		}
	}
	return b.String()
}
