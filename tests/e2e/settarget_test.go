package e2e

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// setjRules is TestSetTargetAgainstKernel's ruleset (recentHosts' @Hn):
// a pf-style overload table (H1's connection attempts to port 22 ban it:
// --exist --timeout, then every packet of a banned source dropped, the
// first one included), an add then a delete (H4), a hash:net whose
// elements take its longest prefix (H2), a set's own default timeout
// (H3), a destination added (H5), a full set (maxelem 1) refusing H7,
// a hash:ip with a netmask taking H7's network, and timeouts given by the
// rule (H5's not refreshed without --exist, H6's refreshed with it and cut
// to the longest, H7's 0: permanent).
const setjRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -s @H4 -p udp -m udp --dport 3 -j SET --del-set banned src
-A FORWARD -s @H1 -p udp -m udp --dport 22 -j SET --add-set banned src --exist --timeout 600
-A FORWARD -s @H4 -p udp -m udp --dport 1 -j SET --add-set banned src
-A FORWARD -m set --match-set banned src -j DROP
-A FORWARD -s @H2 -p udp -m udp --dport 1 -j SET --add-set nets src
-A FORWARD -s @H2 -p udp -m udp --dport 2 -m set --match-set nets src -j ACCEPT
-A FORWARD -s @H3 -p udp -m udp --dport 1 -j SET --add-set short src
-A FORWARD -s @H3 -p udp -m udp --dport 2 -m set --match-set short src -j ACCEPT
-A FORWARD -s @H5 -p udp -m udp --dport 1 -j SET --add-set dsts dst
-A FORWARD -s @H5 -m set --match-set dsts dst
-A FORWARD -s @H7 -p udp -m udp --dport 1 -j SET --add-set small src
-A FORWARD -s @H7 -p udp -m udp --dport 2 -m set --match-set small src -j ACCEPT
-A FORWARD -s @H7 -p udp -m udp --dport 3 -j SET --add-set masked src
-A FORWARD -s @H5 -p udp -m udp --dport 4 -j SET --add-set ex src --timeout 100
-A FORWARD -s @H5 -p udp -m udp --dport 5 -j SET --add-set ex src --timeout 1000
-A FORWARD -s @H6 -p udp -m udp --dport 4 -j SET --add-set ex src --timeout 100
-A FORWARD -s @H6 -p udp -m udp --dport 5 -j SET --add-set ex src --exist --timeout 4294967294
-A FORWARD -s @H7 -p udp -m udp --dport 4 -j SET --add-set ex src --timeout 0
COMMIT
`

// setjShortTimeout is the default timeout (seconds) of the set "short":
// long enough for round 1 to list H3 on a loaded machine.
const setjShortTimeout = 10

// setjFirst is the first round's datagrams.
var setjFirst = []recSend{
	{1, 22, 64, 3}, // banned by the first: all three dropped
	{4, 5, 64, 1},  // not banned
	{4, 1, 64, 1},  // added, dropped
	{4, 5, 64, 1},  // dropped
	{4, 3, 64, 1},  // deleted: passes
	{4, 5, 64, 1},  // passes
	{2, 2, 64, 1},  // nets lacks it
	{2, 1, 64, 1},  // H2's /28 (/124) added
	{2, 2, 64, 1},  // accepted
	{3, 1, 64, 1},  // short: added with the set's timeout
	{3, 2, 64, 1},  // accepted
	{5, 1, 64, 1},  // sink added to dsts
	{5, 9, 64, 1},  // counted by the dsts rule
	{7, 1, 64, 1},  // small is full: not added
	{7, 2, 64, 1},  // not accepted
	{7, 3, 64, 1},  // masked: H7's /24 (/64)
	{5, 4, 64, 1},  // ex: 100 s
	{5, 5, 64, 1},  // kept at 100 s: no --exist
	{6, 4, 64, 1},  // ex: 100 s
	{6, 5, 64, 1},  // --exist: refreshed, to the longest timeout
	{7, 4, 64, 1},  // ex: permanent
}

// TestSetTargetAgainstKernel compares -j SET with the kernel's xt_SET and
// ipset in twin topologies, by rule counters and the sets' members (as
// ipset save and xfw ipset save list them, timeouts left out), in both
// families: --add-set with --exist and --timeout, a later rule's
// --match-set seeing what an earlier rule added to the same packet,
// --del-set, hash:net's element prefix, the set's default timeout expiring
// (checked after it has passed), then `ipset add`, a ruleset reload and
// `ipset del` neither losing nor resurrecting the members the data plane
// added.
func TestSetTargetAgainstKernel(t *testing.T) {
	eachFamily(t, setTargetAgainstKernel)
}

func setTargetAgainstKernel(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	members := map[string][]string{}
	var mu sync.Mutex
	results := tw.rounds(t, func(kind string, tp *nettest.Topology, fw firewall, record twinRecorder) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		famName, net := "inet", "192.0.2.0/28"
		if fam == 6 {
			famName, net = "inet6", "2001:db8::/124"
		}
		ipsetCmd("create banned hash:ip family " + famName + " timeout 0")
		ipsetCmd("create nets hash:net family " + famName)
		ipsetCmd("add nets " + net)
		ipsetCmd(fmt.Sprintf("create short hash:ip family %s timeout %d", famName, setjShortTimeout))
		ipsetCmd("create dsts hash:ip family " + famName)
		ipsetCmd("create small hash:ip maxelem 1 family " + famName)
		ipsetCmd("add small " + rh.sink.String())
		netmask := map[int]int{4: 24, 6: 64}[fam]
		ipsetCmd(fmt.Sprintf("create masked hash:ip family %s netmask %d", famName, netmask))
		ipsetCmd("create ex hash:ip timeout 5 family " + famName)
		rules := rh.rules(setjRules)
		fw.restore(t, tp, fam, rules)
		// H2's network as nets holds it: its /28 (/124), named too.
		h2net := netip.PrefixFrom(rh.host(2), rh.host(2).BitLen()-4).Masked().String()
		// H7's network as masked holds it.
		h7net := netip.PrefixFrom(rh.host(7), netmask).Masked().Addr().String()
		list := func(round int) {
			m := setjMembers(t, tp, kind, bin, func(s string) string {
				if s == "add masked "+h7net {
					return "add masked @M7"
				}
				s = strings.ReplaceAll(s, h2net, "@N2")
				return strings.ReplaceAll(nameHosts(s, rh.host, 7), rh.sink.String(), "@SINK")
			})
			mu.Lock()
			members[fmt.Sprintf("%s round %d", kind, round)] = m
			mu.Unlock()
		}
		save := func() {
			drainFw(t, tp)
			record(nameHosts(fw.save(t, tp, fam), rh.host, 7))
		}
		for _, s := range setjFirst {
			rh.send(t, tp, kind, s)
		}
		save()
		list(1)
		// The set's own timeout passes: H3 is no longer in it.
		time.Sleep(setjShortTimeout*time.Second + 500*time.Millisecond)
		rh.send(t, tp, kind, recSend{3, 2, 64, 1})
		ipsetCmd("add banned " + rh.host(6).String())
		rh.send(t, tp, kind, recSend{6, 9, 64, 1})
		// A reload keeps the members the data plane added (H1).
		fw.restore(t, tp, fam, rules)
		rh.send(t, tp, kind, recSend{1, 9, 64, 1})
		// Deleted by ipset, H1 passes and stays out.
		ipsetCmd("del banned " + rh.host(1).String())
		rh.send(t, tp, kind, recSend{1, 9, 64, 1})
		save()
		list(2)
	})
	k := compareRounds(t, results, ":OUTPUT", ":INPUT")
	for round := 1; round <= 2; round++ {
		km, xm := members[fmt.Sprintf("kernel round %d", round)], members[fmt.Sprintf("xfw round %d", round)]
		if strings.Join(km, "\n") != strings.Join(xm, "\n") {
			t.Errorf("round %d: members differ:\nkernel %q\nxfw    %q", round, km, xm)
		}
	}
	// The kernel's own counts show the cases are exercised.
	for key, kc := range k[0] {
		if strings.Contains(key, "--match-set banned src -j DROP") && kc.packets != 5 {
			t.Errorf("kernel: %s: %d packets, want 5", key, kc.packets)
		}
	}
	for _, want := range []string{"add banned @H1 long", "add short @H3"} {
		if !contains(members["kernel round 1"], want) || contains(members["kernel round 2"], want) {
			t.Errorf("kernel members %q: want %q in round 1 only", members, want)
		}
	}
	for _, want := range []string{"add nets @N2", "add dsts @SINK", "add banned @H6 permanent", "add small @SINK", "add masked @M7",
		"add ex @H5", "add ex @H6 long", "add ex @H7 permanent"} {
		if !contains(members["kernel round 2"], want) {
			t.Errorf("kernel members %q: want %q in round 2", members, want)
		}
	}
}

// contains reports whether list has s.
func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// setjMembers returns the "add" lines of fw's ipset save (the kernel's
// ipset, or xfw ipset), renamed by name and sorted, their timeouts told as
// "permanent" (0), "long" (over 500 s) or left out (the seconds left
// differ by the time the twins took).
func setjMembers(t *testing.T, tp *nettest.Topology, kind, bin string, name func(string) string) []string {
	t.Helper()
	argv := []string{"ipset", "save"}
	if kind == "xfw" {
		argv = append([]string{bin}, argv...)
	}
	res, err := nettest.Exec(tp.FwNS, argv...)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: ipset save: %v %s", kind, err, res)
	}
	var out []string
	for _, l := range strings.Split(res.Stdout, "\n") {
		if !strings.HasPrefix(l, "add ") {
			continue
		}
		if i := strings.Index(l, " timeout "); i >= 0 {
			secs, _ := strconv.Atoi(strings.Fields(l[i:])[1])
			l = l[:i]
			switch {
			case secs == 0:
				l += " permanent"
			case secs > 500:
				l += " long"
			}
		}
		out = append(out, name(l))
	}
	sort.Strings(out)
	return out
}

// TestSetTargetRefused checks -j SET's bad input: what iptables refuses
// (a set that does not exist, one of the other family, missing flags,
// --exist without --add-set) fails in xfw with iptables-legacy's message
// and exit status, and what xfw's data plane cannot write (hash:net,iface,
// a set with counters, list:set) is refused with exit status 2; the
// running ruleset stays as it was.
func TestSetTargetRefused(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ipset")
	bin := xfwPath(t)
	tp := nettest.New(t)
	xfw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { xfw.stop(t, tp) })
	for _, kind := range []string{"kernel", "xfw"} {
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		ipsetCmd("create banned hash:ip")
		ipsetCmd("create banned6 hash:ip family inet6")
		ipsetCmd("create nif hash:net,iface")
		ipsetCmd("create ctr hash:ip counters")
		ipsetCmd("create lst list:set")
	}
	run := func(fw firewall, args ...string) *nettest.Result {
		t.Helper()
		// A failing command is a result here, not an error.
		res, err := nettest.Exec(tp.FwNS, append(append(fw.cmd(4, ""), "-w", lockWait), args...)...)
		if res == nil || res.ExitCode < 0 {
			t.Fatalf("%s: %v", fw.kind, err)
		}
		return res
	}
	kernel := firewall{kind: "kernel"}
	run(xfw, "-A", "INPUT", "-j", "SET", "--add-set", "banned", "src")
	before := run(xfw, "-S").Stdout
	for _, args := range [][]string{
		{"--add-set", "nosuch", "src"},
		{"--add-set", "banned6", "src"},
		{"--add-set", "banned"},
		{"--del-set", "banned", "src", "--exist"},
	} {
		argv := append([]string{"-A", "INPUT", "-j", "SET"}, args...)
		k, x := run(kernel, argv...), run(xfw, argv...)
		if k.ExitCode != 2 || x.ExitCode != k.ExitCode || x.Stderr != k.Stderr {
			t.Errorf("%v:\nkernel %d %q\nxfw    %d %q", args, k.ExitCode, k.Stderr, x.ExitCode, x.Stderr)
		}
	}
	for _, set := range []string{"nif", "ctr", "lst"} {
		x := run(xfw, "-A", "INPUT", "-j", "SET", "--add-set", set, "src,src")
		if x.ExitCode != 2 || !strings.Contains(x.Stderr, "not supported by xfw") {
			t.Errorf("--add-set %s: exit %d %q, want 2 and not supported by xfw", set, x.ExitCode, x.Stderr)
		}
	}
	if after := run(xfw, "-S").Stdout; after != before {
		t.Errorf("the ruleset changed:\n%s\nnow:\n%s", before, after)
	}
}

// TestSetTargetOnlyWrites checks a set that rules write but never match,
// against the kernel: the data plane's members are listed, the set is in
// use (destroy refused), and a flush followed by an add leaves the added
// member alone (the flushed ones are not brought back), after which the
// SET rule adds again.
func TestSetTargetOnlyWrites(t *testing.T) {
	eachFamily(t, setTargetOnlyWrites)
}

func setTargetOnlyWrites(t *testing.T, bin string, fam int) {
	tw := newTwins(t, bin)
	var mu sync.Mutex
	lists := map[string][]string{}
	destroy := map[string]string{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		rh := newRecentHosts(tp, fam)
		ipsetCmd := ipsetRunner(t, tp, kind, bin)
		famName := map[int]string{4: "inet", 6: "inet6"}[fam]
		ipsetCmd("create w hash:ip family " + famName)
		fw.restore(t, tp, fam, rh.rules("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
			"-A FORWARD -p udp -m udp --dport 9 -j SET --add-set w src\nCOMMIT\n"))
		list := func(step string) {
			m := setjMembers(t, tp, kind, bin, func(s string) string { return nameHosts(s, rh.host, 7) })
			mu.Lock()
			lists[kind+" "+step] = m
			mu.Unlock()
		}
		rh.send(t, tp, kind, recSend{1, 9, 64, 1})
		drainFw(t, tp)
		list("added")
		argv := []string{"ipset", "destroy", "w"}
		if kind == "xfw" {
			argv = append([]string{bin}, argv...)
		}
		res, _ := nettest.Exec(tp.FwNS, argv...)
		mu.Lock()
		destroy[kind] = fmt.Sprintf("exit %d: %s", res.ExitCode, res.Stderr)
		mu.Unlock()
		ipsetCmd("flush w")
		ipsetCmd("add w " + rh.host(2).String())
		list("flushed")
		rh.send(t, tp, kind, recSend{1, 9, 64, 1})
		drainFw(t, tp)
		list("again")
	})
	if destroy["kernel"] != destroy["xfw"] || !strings.HasPrefix(destroy["kernel"], "exit 1") {
		t.Errorf("ipset destroy of a written set:\nkernel %s\nxfw    %s", destroy["kernel"], destroy["xfw"])
	}
	for _, step := range []string{"added", "flushed", "again"} {
		k, x := lists["kernel "+step], lists["xfw "+step]
		if strings.Join(k, "\n") != strings.Join(x, "\n") {
			t.Errorf("%s: members differ:\nkernel %q\nxfw    %q", step, k, x)
		}
	}
	if want := []string{"add w @H2"}; strings.Join(lists["kernel flushed"], ",") != strings.Join(want, ",") {
		t.Errorf("kernel after flush and add: %q, want %q", lists["kernel flushed"], want)
	}
}
