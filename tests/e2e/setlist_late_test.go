package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// listLatePorts are the UDP ports of TestListSetLateMembersAgainstKernel,
// one rule each.
var listLatePorts = []uint16{7520, 7521, 7522, 7523}

// listLateRules are its FORWARD rules: a list:set empty when the rules
// are loaded, one with timeouts empty too, one holding only a set of the
// other family, and the member set itself (the control).
const listLateRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 7520 -m set --match-set ls src -j DROP
-A FORWARD -p udp -m udp --dport 7521 -m set --match-set lt src -j DROP
-A FORWARD -p udp -m udp --dport 7522 -m set --match-set lo src -j DROP
-A FORWARD -p udp -m udp --dport 7523 -m set --match-set m src -j DROP
COMMIT
`

// TestListSetLateMembersAgainstKernel runs the same ipset commands and
// set-match rules through the kernel (ipset, iptables-legacy) and through
// xfw in twin topologies, both families, and requires the same datagrams
// to cross fw after every step: members added to list:sets that had no
// member the rules could look up when the rules were loaded (empty, with
// timeouts, only a member of the other family), all members deleted then
// one added again, a list swapped with an empty one and a member added to
// it; then the rules' counters. Members added are in force for the next
// packet, with no reload of the rules.
func TestListSetLateMembersAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ipset", "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	type outcome struct {
		steps    []string
		counters string
	}
	run := func(kind string) map[int]outcome {
		tp := nettest.New(t, nettest.WithStaticNeighbors())
		fw := firewall{kind: kind, bin: bin}
		t.Cleanup(func() { fw.stop(t, tp) })
		ipset := func(args string) {
			t.Helper()
			argv := append([]string{"ipset"}, strings.Fields(args)...)
			if kind == "xfw" {
				argv = append([]string{bin}, argv...)
			}
			if res, err := nettest.Exec(tp.FwNS, argv...); err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: ipset %s: %v: %s", kind, args, err, res.Stderr)
			}
		}
		out := map[int]outcome{}
		for _, fam := range []int{4, 6} {
			gen, sink, famName, other := tp.Gen.IPv4, tp.Sink.IPv4, "inet", "inet6"
			if fam == 6 {
				gen, sink, famName, other = tp.Gen.IPv6, tp.Sink.IPv6, "inet6", "inet"
			}
			// The sets are per family: the v6 ones take a suffix.
			sfx := map[int]string{4: "", 6: "6"}[fam]
			for _, c := range []string{
				"create m%[1]s hash:ip family " + famName, "add m%[1]s " + gen.String(),
				"create mo%[1]s hash:ip family " + other,
				"create ls%[1]s list:set", "create lt%[1]s list:set timeout 600",
				"create lo%[1]s list:set", "add lo%[1]s mo%[1]s",
				"create lx%[1]s list:set",
			} {
				ipset(fmt.Sprintf(c, sfx))
			}
			rules := listLateRules
			for _, s := range []string{"ls", "lt", "lo", "m"} {
				rules = strings.ReplaceAll(rules, "match-set "+s+" ", "match-set "+s+sfx+" ")
			}
			fw.restore(t, tp, fam, rules)

			probe := setStepProbe(t, tp, sink, listLatePorts)
			var o outcome
			send := func(step string) {
				t.Helper()
				o.steps = append(o.steps, probe(step))
			}
			send("initial")
			ipset(fmt.Sprintf("add ls%[1]s m%[1]s", sfx))
			ipset(fmt.Sprintf("add lt%[1]s m%[1]s timeout 600", sfx))
			ipset(fmt.Sprintf("add lo%[1]s m%[1]s", sfx))
			send("added")
			ipset(fmt.Sprintf("del ls%[1]s m%[1]s", sfx))
			ipset(fmt.Sprintf("del lt%[1]s m%[1]s", sfx))
			send("deleted")
			ipset(fmt.Sprintf("add ls%[1]s m%[1]s", sfx))
			send("added-again")
			ipset(fmt.Sprintf("swap ls%[1]s lx%[1]s", sfx))
			send("swapped-with-empty")
			ipset(fmt.Sprintf("add ls%[1]s m%[1]s", sfx))
			send("added-after-swap")
			o.counters = matchSetCounters(t, tp, fw, fam)
			out[fam] = o
		}
		return out
	}
	kernel := run("kernel")
	xfw := run("xfw")
	for _, fam := range []int{4, 6} {
		// A list that takes no members and one that does differ only if
		// the kernel's outcomes vary (compareSetOutcomes).
		k, x := kernel[fam], xfw[fam]
		compareSetOutcomes(t, fam, k.steps, x.steps, k.counters, x.counters)
	}
}
