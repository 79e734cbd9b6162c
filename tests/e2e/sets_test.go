package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// setPorts are the UDP ports of TestSetMatchAgainstKernel, one rule each.
var setPorts = []uint16{7500, 7501, 7502, 7503, 7504}

// setRules are the FORWARD rules of TestSetMatchAgainstKernel: plain,
// negated, --return-nomatch, destination, and more directions than the
// set has dimensions (the kernel uses the first only).
const setRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 7500 -m set --match-set bl src -j DROP
-A FORWARD -p udp -m udp --dport 7501 -m set ! --match-set bl src -j DROP
-A FORWARD -p udp -m udp --dport 7502 -m set --match-set bl src --return-nomatch -j DROP
-A FORWARD -p udp -m udp --dport 7503 -m set --match-set al dst -j DROP
-A FORWARD -p udp -m udp --dport 7504 -m set --match-set al src,dst -j DROP
COMMIT
`

// TestSetMatchAgainstKernel runs the same ipset commands and set-match
// rules through the kernel (ipset, iptables-legacy) and through xfw (xfw
// ipset, xfw iptables-restore) in twin topologies, both families, and
// requires the same datagrams to cross fw after every step: the initial
// sets (a hash:net with a nomatch entry inside a listed network, a
// hash:ip), then removing the nomatch entry, adding an address, flushing,
// a destroy refused while rules use the set, and the counters.
func TestSetMatchAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ipset", "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	type outcome struct {
		steps    []string
		destroy  string
		counters string
	}
	run := func(kind string) map[int]outcome {
		tp := nettest.New(t, nettest.WithStaticNeighbors())
		fw := firewall{kind: kind, bin: bin}
		t.Cleanup(func() { fw.stop(t, tp) })
		ipsetCmd := func(args string) *nettest.Result {
			t.Helper()
			argv := append([]string{"ipset"}, strings.Fields(args)...)
			if kind == "xfw" {
				argv = append([]string{bin}, argv...)
			}
			// A non-zero exit is an outcome to compare, not a failure to
			// run (ExitCode -1).
			res, err := nettest.Exec(tp.FwNS, argv...)
			if res.ExitCode < 0 {
				t.Fatalf("%s: ipset %s: %v", kind, args, err)
			}
			return res
		}
		mustIpset := func(args string) {
			t.Helper()
			if res := ipsetCmd(args); res.ExitCode != 0 {
				t.Fatalf("%s: ipset %s: exit %d: %s", kind, args, res.ExitCode, res.Stderr)
			}
		}
		out := map[int]outcome{}
		for _, fam := range []int{4, 6} {
			gen, sink, famName, net := tp.Gen.IPv4, tp.Sink.IPv4, "inet", 28
			if fam == 6 {
				gen, sink, famName, net = tp.Gen.IPv6, tp.Sink.IPv6, "inet6", 124
			}
			// The sets are per family: the v6 ones take a suffix.
			sfx := map[int]string{4: "", 6: "6"}[fam]
			mustIpset(fmt.Sprintf("create bl%s hash:net family %s", sfx, famName))
			mustIpset(fmt.Sprintf("create al%s hash:ip family %s", sfx, famName))
			mustIpset(fmt.Sprintf("add bl%s %s", sfx, netip.PrefixFrom(gen, net).Masked()))
			mustIpset(fmt.Sprintf("add bl%s %s nomatch", sfx, gen))
			mustIpset(fmt.Sprintf("add al%s %s", sfx, sink))
			rules := strings.ReplaceAll(strings.ReplaceAll(setRules, "match-set bl ", "match-set bl"+sfx+" "), "match-set al ", "match-set al"+sfx+" ")
			fw.restore(t, tp, fam, rules)

			probe := setStepProbe(t, tp, sink, setPorts)
			var o outcome
			send := func(step string) {
				t.Helper()
				o.steps = append(o.steps, probe(step))
			}
			send("initial")
			mustIpset(fmt.Sprintf("del bl%s %s", sfx, gen))
			send("nomatch-removed")
			mustIpset(fmt.Sprintf("add al%s %s", sfx, gen))
			send("gen-added")
			mustIpset("flush bl" + sfx)
			send("flushed")
			res := ipsetCmd("destroy bl" + sfx)
			o.destroy = fmt.Sprintf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
			o.counters = matchSetCounters(t, tp, fw, fam)
			out[fam] = o
		}
		return out
	}
	kernel := run("kernel")
	xfw := run("xfw")
	for _, fam := range []int{4, 6} {
		k, x := kernel[fam], xfw[fam]
		compareSetOutcomes(t, fam, k.steps, x.steps, k.counters, x.counters)
		if k.destroy != x.destroy {
			t.Errorf("IPv%d: destroying a set in use: kernel %q, xfw %q", fam, k.destroy, x.destroy)
		}
	}
	t.Run("types", func(t *testing.T) { setTypesAgainstKernel(t, bin) })
	t.Run("timeouts", func(t *testing.T) { setTimeoutsAgainstKernel(t, bin) })
}

// TestIpsetsLiveInNamespace checks where `xfw ipset` keeps its sets: in the
// network namespace (xfw's data plane), one namespace's sets unseen by
// another, reading them loads nothing, and `xfw stop` removes them with
// the rules.
func TestIpsetsLiveInNamespace(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	a := nettest.New(t, nettest.WithStaticNeighbors())
	b := nettest.New(t, nettest.WithStaticNeighbors())
	t.Cleanup(func() {
		firewall{kind: "xfw", bin: bin}.stop(t, a)
		firewall{kind: "xfw", bin: bin}.stop(t, b)
	})
	ipset := func(tp *nettest.Topology, args string) string {
		t.Helper()
		res, err := nettest.Exec(tp.FwNS, append([]string{bin, "ipset"}, strings.Fields(args)...)...)
		if err != nil {
			t.Fatalf("ipset %s: %v", args, err)
		}
		return res.Stdout
	}
	xdpAttached := func(tp *nettest.Topology) bool {
		t.Helper()
		out, err := nettest.Exec(tp.FwNS, "ip", "link", "show")
		if err != nil {
			t.Fatalf("ip link: %v", err)
		}
		return strings.Contains(out.Stdout, "xdp")
	}
	if got := ipset(a, "list"); got != "" {
		t.Fatalf("a new namespace lists sets: %q", got)
	}
	if xdpAttached(a) {
		t.Fatal("listing sets attached xfw")
	}
	ipset(a, "create s hash:ip")
	ipset(a, "add s 192.0.2.7")
	if got := ipset(a, "list s"); !strings.Contains(got, "\n192.0.2.7\n") {
		t.Errorf("the set lost its member across commands:\n%s", got)
	}
	if got := ipset(b, "list"); got != "" {
		t.Errorf("another namespace sees the sets: %q", got)
	}
	if res, err := nettest.Exec(a.FwNS, bin, "stop"); err != nil {
		t.Fatalf("xfw stop: %v %s", err, res.Stderr)
	}
	if got := ipset(a, "list"); got != "" {
		t.Errorf("xfw stop left sets behind: %q", got)
	}
}

// TestSingleSetUpdatePatchesRules checks that `xfw ipset add` and `del` of
// one member of sets rules use reach the packets at once, by patching the
// running generation's set tables in place (not by loading the rulesets
// again), and that the rules keep their counters: real datagrams through
// fw after every step, both families, hash:ip and hash:net with nomatch
// entries, in sets with neighbours of the changed members (so the patched
// blocks hold more than the changed member).
func TestSingleSetUpdatePatchesRules(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	const port = 7600
	ipset := func(args string) *nettest.Result {
		t.Helper()
		argv := append([]string{"env", "XFW_TRACE=1", bin, "ipset"}, strings.Fields(args)...)
		res, err := nettest.Exec(tp.FwNS, argv...)
		if res.ExitCode < 0 {
			t.Fatalf("ipset %s: %v", args, err)
		}
		return res
	}
	for _, fam := range []int{4, 6} {
		gen, sink, famName := tp.Gen.IPv4, tp.Sink.IPv4, "inet"
		if fam == 6 {
			gen, sink, famName = tp.Gen.IPv6, tp.Sink.IPv6, "inet6"
		}
		sfx := map[int]string{4: "", 6: "6"}[fam]
		// Neighbours of gen's address in the same /18 (IPv4) or /64, and
		// a few thousand others elsewhere.
		var restore strings.Builder
		fmt.Fprintf(&restore, "create hosts%s hash:ip family %s\ncreate nets%s hash:net family %s\n", sfx, famName, sfx, famName)
		// A set looked up by hash (hash:net,port with timeouts).
		fmt.Fprintf(&restore, "create ports%s hash:net,port family %s timeout 600\nadd ports%s %s,udp:7601\n", sfx, famName, sfx, gen)
		near := gen
		for i := 0; i < 40; i++ {
			near = near.Next().Next()
			fmt.Fprintf(&restore, "add hosts%s %s\n", sfx, near)
		}
		for i := 0; i < 3000; i++ {
			a := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
			if fam == 6 {
				a = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 8), byte(i)})
			}
			fmt.Fprintf(&restore, "add hosts%s %s\nadd nets%s %s\n", sfx, a, sfx, netip.PrefixFrom(a, a.BitLen()-2).Masked())
		}
		f := filepath.Join(t.TempDir(), "sets")
		if err := os.WriteFile(f, []byte(restore.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := ipset("-exist restore -file " + f); res.ExitCode != 0 {
			t.Fatalf("ipset restore: exit %d: %s", res.ExitCode, res.Stderr)
		}
		fw.restore(t, tp, fam, fmt.Sprintf(`*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport %d
-A FORWARD -p udp -m udp --dport %d -m set --match-set hosts%s src -j DROP
-A FORWARD -p udp -m udp --dport %d -m set --match-set nets%s src -j DROP
-A FORWARD -p udp -m udp --dport %d -m set --match-set ports%s src,dst -j DROP
COMMIT
`, port, port, sfx, port, sfx, port, sfx))
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, port))
		netBits := 64
		if fam == 4 {
			netBits = 24
		}
		genNet := netip.PrefixFrom(gen, netBits).Masked()
		steps := []struct {
			ipset  string // the command, "" for none
			status int    // its exit status
			passes bool   // whether a datagram from gen then crosses fw
		}{
			{"", 0, true},
			{fmt.Sprintf("add hosts%s %s", sfx, gen), 0, false},
			{fmt.Sprintf("add hosts%s %s", sfx, gen), 1, false}, // already added: nothing changes
			{fmt.Sprintf("del hosts%s %s", sfx, gen), 0, true},
			{fmt.Sprintf("del hosts%s %s", sfx, gen), 1, true},
			{fmt.Sprintf("add nets%s %s", sfx, genNet), 0, false},
			{fmt.Sprintf("add nets%s %s nomatch", sfx, gen), 0, true},
			{fmt.Sprintf("del nets%s %s", sfx, gen), 0, false},
			{fmt.Sprintf("del nets%s %s", sfx, genNet), 0, true},
			{fmt.Sprintf("add ports%s %s,udp:%d", sfx, genNet, port), 0, false},
			{fmt.Sprintf("add ports%s %s,udp:%d nomatch timeout 100", sfx, gen, port), 0, true},
			{fmt.Sprintf("del ports%s %s,udp:%d", sfx, gen, port), 0, false},
			{fmt.Sprintf("del ports%s %s,udp:%d", sfx, genNet, port), 0, true},
			{fmt.Sprintf("add ports%s %s,udp:%d timeout 100", sfx, gen, port), 0, false},
			{fmt.Sprintf("del ports%s %s,udp:%d", sfx, gen, port), 0, true},
			{fmt.Sprintf("add hosts%s %s", sfx, gen), 0, false},
		}
		dropped := 0
		for i, st := range steps {
			if st.ipset != "" {
				res := ipset(st.ipset)
				if res.ExitCode != st.status {
					t.Fatalf("IPv%d step %d: ipset %s: exit %d, want %d: %s", fam, i, st.ipset, res.ExitCode, st.status, res.Stderr)
				}
				if st.status == 0 && !strings.Contains(res.Stderr, "ipset: patch set tables (true, <nil>)") {
					t.Errorf("IPv%d step %d: ipset %s did not patch the set tables in place:\n%s", fam, i, st.ipset, res.Stderr)
				}
			}
			payload := fmt.Sprintf("step-%d-%d", fam, i)
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, port), []byte(payload))
			_, ok := srv.WaitFor(func(d nettest.Datagram) bool { return string(d.Payload) == payload }, arrivalWait)
			if !st.passes {
				dropped++
				if ok {
					t.Errorf("IPv%d step %d (after %q): the datagram crossed fw, want it dropped", fam, i, st.ipset)
				}
			} else if !ok {
				// A lost datagram on a busy machine: send once more.
				nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, port), []byte(payload))
				if _, ok := srv.WaitFor(func(d nettest.Datagram) bool { return string(d.Payload) == payload }, 3*time.Second); !ok {
					t.Errorf("IPv%d step %d (after %q): the datagram was dropped, want it through", fam, i, st.ipset)
				}
			}
		}
		cs := counters(t, fw.save(t, tp, fam))
		var all, drops uint64
		for k, c := range cs {
			switch {
			case strings.HasSuffix(k, fmt.Sprintf("--dport %d", port)):
				all = c.packets
			case strings.Contains(k, "match-set"):
				drops += c.packets
			}
		}
		if all < uint64(len(steps)) || drops != uint64(dropped) {
			t.Errorf("IPv%d: counters: %d datagrams counted (want at least %d), %d dropped by the set rules (want %d):\n%v", fam, all, len(steps), drops, dropped, cs)
		}
	}
}

// matchSetCounters returns the packet counters of fw's -m set rules as
// sorted "rule=packets" lines.
func matchSetCounters(t *testing.T, tp *nettest.Topology, fw firewall, fam int) string {
	t.Helper()
	var cs []string
	for k, c := range counters(t, fw.save(t, tp, fam)) {
		if strings.Contains(k, "match-set") {
			cs = append(cs, fmt.Sprintf("%s=%d", k, c.packets))
		}
	}
	slices.Sort(cs)
	return strings.Join(cs, "\n")
}

// compareSetOutcomes compares the twins' outcomes of each step ("name:
// verdict" strings) and their -m set counters. The kernel's own outcomes
// must hold both verdicts, or the test could not tell a broken set match
// from a working one.
func compareSetOutcomes(t *testing.T, fam int, kernelSteps, xfwSteps []string, kernelCounters, xfwCounters string) {
	t.Helper()
	all := strings.Join(kernelSteps, " ")
	if !strings.Contains(all, ":true") || !strings.Contains(all, ":false") {
		t.Fatalf("IPv%d: the kernel's outcomes do not vary: %v", fam, kernelSteps)
	}
	for i := range kernelSteps {
		if i >= len(xfwSteps) || xfwSteps[i] != kernelSteps[i] {
			x := "(none)"
			if i < len(xfwSteps) {
				x = xfwSteps[i]
			}
			t.Errorf("IPv%d: step %d: kernel %q, xfw %q", fam, i, kernelSteps[i], x)
		}
	}
	if kernelCounters != xfwCounters {
		t.Errorf("IPv%d: counters:\nkernel:\n%s\nxfw:\n%s", fam, kernelCounters, xfwCounters)
	}
}

// setStepProbe starts a UDP server on each of sink's ports and returns a
// probe of one step: it sends the step's name from gen to every port and
// returns "step port:arrived ..." in the ports' order.
func setStepProbe(t *testing.T, tp *nettest.Topology, sink netip.Addr, ports []uint16) func(step string) string {
	t.Helper()
	var servers []*nettest.UDPServer
	for _, port := range ports {
		servers = append(servers, nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, port)))
	}
	return func(step string) string {
		t.Helper()
		for _, port := range ports {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, port), []byte(step))
		}
		var got []string
		for i, srv := range servers {
			_, ok := srv.WaitFor(func(d nettest.Datagram) bool { return string(d.Payload) == step }, arrivalWait)
			got = append(got, fmt.Sprintf("%d:%v", ports[i], ok))
		}
		return step + " " + strings.Join(got, " ")
	}
}
