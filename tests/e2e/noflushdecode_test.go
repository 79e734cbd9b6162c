package e2e

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRestoreNoflushDecodesKeptChainsOnly runs, in xfw and
// iptables-legacy twins, --noflush restores onto a ruleset of three tables
// loaded with counters (-c), as kube-proxy's syncs do: the user chains a
// table's first block declares before any other line are flushed before
// any line can see their rules, so xfw must not decode those rules of the
// running ruleset (XFW_TRACE counts the rules decoded); a chain a line
// uses before its declaration (-D), and the chains of a later block of the
// table, are decoded. After each restore every table's iptables-save -c
// is the kernel's: the kept rules' counters go on (with --counters and
// without), mangle's policy counters (a table the restores do not commit,
// laid out after the skipped rules) go on, a flushed chain's new rules
// start from zero.
func TestRestoreNoflushDecodesKeptChainsOnly(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	const first = "*filter\n:INPUT ACCEPT [3:300]\n:fchain - [0:0]\n[5:500] -A INPUT -p tcp -j fchain\n[6:600] -A OUTPUT -p udp -j DROP\n" +
		"[9:900] -A fchain -s 10.1.0.0/16 -j ACCEPT\n[10:1000] -A fchain -j RETURN\nCOMMIT\n" +
		"*nat\n:PREROUTING ACCEPT [0:0]\n:svc - [0:0]\n:sep - [0:0]\n:keep - [0:0]\n[1:100] -A PREROUTING -j svc\n[2:200] -A svc -j sep\n" +
		"[3:300] -A sep -p tcp -j DNAT --to-destination 10.0.0.1\n[11:1100] -A svc -p udp -j keep\n[4:400] -A keep -p udp -j DNAT --to-destination 10.0.0.2\n" +
		"[12:1200] -A keep -j RETURN\n[13:1300] -A OUTPUT -j RETURN\nCOMMIT\n" +
		"*mangle\n:PREROUTING ACCEPT [8:800]\n[7:700] -A PREROUTING -p udp -j MARK --set-xmark 0x1/0xffffffff\nCOMMIT\n"
	tw := newTwins(t, xfwPath(t))
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, first, "-c")
	})
	if t.Failed() {
		return
	}
	for _, c := range []struct {
		name    string
		reload  string
		extra   []string
		decoded string
	}{
		// kube-proxy's shape: fchain, svc and sep declared first (5 rules).
		{"declared first", "*filter\n:fchain - [0:0]\n[2:20] -A fchain -j RETURN\nCOMMIT\n" +
			"*nat\n:svc - [0:0]\n:sep - [0:0]\n-A svc -j sep\n-A sep -p tcp -j DNAT --to-destination 10.0.0.3\nCOMMIT\n",
			[]string{"--noflush", "--counters"}, "load: 7 of 12 rules decoded"},
		// keep is used (-D) before its declaration; fchain (1 rule) and
		// sep (1) are declared first.
		{"used before declared", "*filter\n:fchain - [0:0]\nCOMMIT\n" +
			"*nat\n:sep - [0:0]\n-D keep -j RETURN\n:keep - [0:0]\n-A keep -p udp -j DNAT --to-destination 10.0.0.4\n-A sep -j keep\nCOMMIT\n",
			[]string{"--noflush"}, "load: 8 of 10 rules decoded"},
		// fchain is declared in filter's second block only; nat is not
		// named.
		{"later block", "*filter\n-A INPUT -p icmp -j ACCEPT\nCOMMIT\n*filter\n:fchain - [0:0]\nCOMMIT\n",
			[]string{"--noflush"}, "load: 8 of 8 rules decoded"},
	} {
		reloadDecoding(t, tw, c.name, c.reload, c.extra, c.decoded)
	}
}
