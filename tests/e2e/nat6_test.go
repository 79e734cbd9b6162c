package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// nat6Refused are ip6tables nat rules (Docker's and kube-proxy's forms
// among them) that iptables-legacy accepts and xfw refuses until its data
// plane translates IPv6, with the target the refusal names. The
// interface xt-absent0 does not exist: such a rule, none of whose terms
// can match yet, is refused as well.
var nat6Refused = []struct {
	rule   []string
	target string
}{
	{[]string{"-A", "PREROUTING", "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", "[fd00::2]:8080"}, "DNAT"},
	{[]string{"-A", "PREROUTING", "-p", "tcp", "-j", "REDIRECT", "--to-ports", "3128"}, "REDIRECT"},
	{[]string{"-A", "OUTPUT", "-p", "udp", "-j", "DNAT", "--to-destination", "fd00::2"}, "DNAT"},
	{[]string{"-A", "POSTROUTING", "-s", "fd00:17::/64", "!", "-o", "xt-absent0", "-j", "MASQUERADE"}, "MASQUERADE"},
	{[]string{"-A", "POSTROUTING", "-o", "xt-absent0", "-j", "MASQUERADE"}, "MASQUERADE"},
	{[]string{"-A", "POSTROUTING", "-p", "tcp", "-j", "SNAT", "--to-source", "[fd00::1]:1000-2000", "--random"}, "SNAT"},
}

// TestNatIPv6RefusedAgainstKernel checks that every ip6tables NAT target
// is refused by xfw (exit 1, the target and IPv6 named) in commands and
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
		want := "target " + tc.target + " is not supported by xfw's data plane for IPv6 yet"
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
	jump := "*nat\n:X - [0:0]\n-A X -j MASQUERADE\n-A POSTROUTING -o xt-absent0 -j X\nCOMMIT\n"
	want := "chain X rule 1: target MASQUERADE is not supported by xfw's data plane for IPv6 yet"
	if res, _ := fw.try(tp, 6, "-restore", jump, "--noflush"); res == nil || res.ExitCode != 1 ||
		!strings.Contains(res.Stderr, want) {
		t.Errorf("ip6tables-restore of a jump to a MASQUERADE chain: %+v, want exit 1 saying %q", res, want)
	}
	if res, _ := kernel.try(tp, 6, "-restore", jump, "--test"); res == nil || res.ExitCode != 0 {
		t.Errorf("ip6tables-legacy refused a jump to a MASQUERADE chain: %+v", res)
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
