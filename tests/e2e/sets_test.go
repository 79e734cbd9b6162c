package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/nettest"
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

			var servers []*nettest.UDPServer
			for _, port := range setPorts {
				servers = append(servers, nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, port)))
			}
			var o outcome
			send := func(step string) {
				t.Helper()
				for _, port := range setPorts {
					nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(sink, port), []byte(step))
				}
				var got []string
				for i, srv := range servers {
					_, ok := srv.WaitFor(func(d nettest.Datagram) bool { return string(d.Payload) == step }, arrivalWait)
					got = append(got, fmt.Sprintf("%d:%v", setPorts[i], ok))
				}
				o.steps = append(o.steps, step+" "+strings.Join(got, " "))
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
			var cs []string
			for k, c := range counters(t, fw.save(t, tp, fam)) {
				if strings.Contains(k, "match-set") {
					cs = append(cs, fmt.Sprintf("%s=%d", k, c.packets))
				}
			}
			slices.Sort(cs)
			o.counters = strings.Join(cs, "\n")
			out[fam] = o
		}
		return out
	}
	kernel := run("kernel")
	xfw := run("xfw")
	for _, fam := range []int{4, 6} {
		k, x := kernel[fam], xfw[fam]
		// The kernel's own outcome must exercise both verdicts, or this
		// test could not tell a broken set match from a working one.
		all := strings.Join(k.steps, " ")
		if !strings.Contains(all, ":true") || !strings.Contains(all, ":false") {
			t.Fatalf("IPv%d: the kernel's outcomes do not vary: %v", fam, k.steps)
		}
		for i := range k.steps {
			if i >= len(x.steps) || x.steps[i] != k.steps[i] {
				t.Errorf("IPv%d: step %d: kernel %q, xfw %q", fam, i, k.steps[i], x.steps[i])
			}
		}
		if k.destroy != x.destroy {
			t.Errorf("IPv%d: destroying a set in use: kernel %q, xfw %q", fam, k.destroy, x.destroy)
		}
		if k.counters != x.counters {
			t.Errorf("IPv%d: counters:\nkernel:\n%s\nxfw:\n%s", fam, k.counters, x.counters)
		}
	}
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
