package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// nat6Refused are ip6tables nat rules (Docker's and kube-proxy's forms
// among them) that iptables-legacy accepts and xfw refuses while its data
// plane does not translate them (IPv4-mapped addresses, DNAT of DCCP,
// SCTP ports), with the refusal's words. The
// interface xt-absent0 does not exist: such a rule, none of whose terms
// can match yet, is refused as well.
var nat6Refused = []struct {
	rule []string
	want string
}{
	{[]string{"-A", "PREROUTING", "-p", "tcp", "-j", "DNAT", "--to-destination", "[::ffff:10.0.0.1]:80"},
		"target DNAT is not supported by xfw's data plane for IPv6 yet to ::ffff:10.0.0.1"},
	{[]string{"-A", "OUTPUT", "-p", "tcp", "-j", "DNAT", "--to-destination", "::ffff:10.0.0.1"},
		"target DNAT is not supported by xfw's data plane for IPv6 yet to ::ffff:10.0.0.1"},
	{[]string{"-A", "PREROUTING", "-i", "xt-absent0", "-p", "dccp", "-j", "DNAT", "--to-destination", "[fd00::2]:80"},
		"target DNAT is not supported by xfw's data plane for -p dccp"},
	{[]string{"-A", "PREROUTING", "-p", "dccp", "-j", "DNAT", "--to-destination", "fd00::2"},
		"target DNAT is not supported by xfw's data plane for -p dccp"},
	{[]string{"-A", "OUTPUT", "-p", "dccp", "-j", "DNAT", "--to-destination", "fd00::2"},
		"target DNAT is not supported by xfw's data plane for -p dccp"},
}

// TestNatIPv6RefusedAgainstKernel checks that the ip6tables NAT forms xfw
// does not translate are refused (exit 1, the target and IPv6 named) in commands and
// in ip6tables-restore (also in a chain only a rule that cannot match
// yet jumps to), leaving the running ruleset as it was, while
// ip6tables-legacy accepts the same rules: xfw never accepts a
// translation it would not apply.
func TestNatIPv6RefusedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy")
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw, kernel := firewall{kind: "xfw", bin: bin}, firewall{kind: "kernel"}
	t.Cleanup(func() { fw.stop(t, tp) })
	base := "*nat\n:DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\nCOMMIT\n" +
		"*filter\n:FORWARD DROP [0:0]\nCOMMIT\n"
	fw.restore(t, tp, 6, base)
	before := fw.save(t, tp, 6)
	for _, tc := range nat6Refused {
		want := tc.want
		argv := append([]string{bin, "ip6tables", "-w", "60", "-t", "nat"}, tc.rule...)
		res, err := nettest.Exec(tp.FwNS, argv...)
		if res == nil {
			t.Fatal(err)
		}
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, want) {
			t.Errorf("%v: exit %d %q, want exit 1 saying %q", tc.rule, res.ExitCode, res.Stderr, want)
		}
		rules := "*nat\n" + strings.Join(tc.rule, " ") + "\nCOMMIT\n"
		res, _ = fw.try(tp, 6, "-restore", rules, "--noflush")
		if res == nil || res.ExitCode != 1 || !strings.Contains(res.Stderr, want) {
			t.Errorf("ip6tables-restore of %v: %+v, want exit 1 saying %q", tc.rule, res, want)
		}
		res, _ = kernel.try(tp, 6, "-restore", rules, "--test")
		if res == nil || res.ExitCode != 0 {
			t.Errorf("ip6tables-legacy refused %v: %+v", tc.rule, res)
		}
	}
	// The policies' counters count the namespace's own traffic meanwhile
	// (neighbour discovery): the rules are compared.
	// A chain only a rule that cannot match yet jumps to.
	jump := "*nat\n:X - [0:0]\n-A X -p tcp -j DNAT --to-destination [::ffff:10.0.0.1]\n-A PREROUTING -i xt-absent0 -j X\nCOMMIT\n"
	want := "chain X rule 1: target DNAT is not supported by xfw's data plane for IPv6 yet to ::ffff:10.0.0.1"
	if res, _ := fw.try(tp, 6, "-restore", jump, "--noflush"); res == nil || res.ExitCode != 1 ||
		!strings.Contains(res.Stderr, want) {
		t.Errorf("ip6tables-restore of a jump to a refused chain: %+v, want exit 1 saying %q", res, want)
	}
	if res, _ := kernel.try(tp, 6, "-restore", jump, "--test"); res == nil || res.ExitCode != 0 {
		t.Errorf("ip6tables-legacy refused a jump to a refused chain: %+v", res)
	}
	if after := fw.save(t, tp, 6); saveRules(after) != saveRules(before) {
		t.Errorf("ruleset changed by refused commands\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// saveCounters matches iptables-save -c's counters.
var saveCounters = regexp.MustCompile(`\[\d+:\d+\]`)

// saveRules returns iptables-save -c output without its comments and
// counters.
func saveRules(save string) string {
	return saveCounters.ReplaceAllString(stripComments(save), "")
}
