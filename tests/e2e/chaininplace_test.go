package e2e

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestUserChainInPlace checks the in-place paths of `iptables -I`, `-A`
// and `-D` on a user chain (compiler.InsertRuleInChain, AppendRuleInChain,
// DeleteRuleInChain, as XFW_TRACE reports them), as fail2ban bans and
// unbans in its f2b-* chains: a rule inserted at the chain's head judges
// the very next packets, an appended one too (after the chain's other
// rules, RETURN among them), a deleted one no longer matches, and the
// counters are the kernel's. Once with each command in its own process,
// once served by the agent (asked by the C client), and once with the
// kernel's iptables-legacy, which must give the same.
func TestUserChainInPlace(t *testing.T) {
	for _, mode := range []string{"kernel", "own process", "served"} {
		t.Run(mode, func(t *testing.T) { userChainInPlace(t, mode) })
	}
}

// userChainInPlace is TestUserChainInPlace on the kernel's iptables or
// xfw's, its commands served by the agent or not.
func userChainInPlace(t *testing.T, how string) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	if how == "kernel" {
		requireTools(t, "iptables-legacy")
		fw.kind = "kernel"
	}
	t.Cleanup(func() { fw.stop(t, tp) })
	t.Setenv("XFW_TRACE", "1") // the agent's environment must be the client's
	// A jail's chain as fail2ban's iptables-multiport action makes it,
	// one address banned already (the source field is classified).
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:f2b-test - [0:0]\n"+
		"-A FORWARD -p udp -m multiport --dports 7500:7510 -j f2b-test\n-A FORWARD -p udp -m udp --dport 7505 -j DROP\n"+
		"-A f2b-test -s 10.77.0.1/32 -j REJECT --reject-with icmp-port-unreachable\n-A f2b-test -j RETURN\nCOMMIT\n")
	command := []string{"env", "XFW_CMDSERVER=off", bin, "iptables", "-w"}
	var trace func() string
	switch how {
	case "served":
		_, out := startAgent(t, bin, tp)
		command, trace = []string{"env", "XFW_CMDSERVER=only", cmdClientPath(t, bin), "iptables", "-w"}, out.String
	case "kernel":
		command = []string{"iptables-legacy", "-w"}
	}
	seen := 0 // the agent's trace read so far
	change := func(args ...string) {
		t.Helper()
		res, err := nettest.Exec(tp.FwNS, append(slices.Clip(command), args...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", args, err, res)
		}
		if how == "kernel" {
			return
		}
		out := res.Stderr
		if trace != nil {
			all := trace()
			out, seen = all[seen:], len(all)
		}
		if !strings.Contains(out, " in place ") {
			t.Errorf("%v: not in place; trace:\n%s", args, out)
		}
	}
	send := func(port uint16) int {
		t.Helper()
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port))
		defer srv.Close()
		for range 3 {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, port), []byte("x"),
				nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, freshSourcePort())))
		}
		return len(srv.Wait(3, arrivalWait))
	}
	gen := tp.Gen.IPv4.String()
	expect := func(when string, ports map[uint16]int) {
		t.Helper()
		for port, want := range ports {
			if got := send(port); got != want {
				t.Errorf("%s: port %d: %d of 3 datagrams arrived, want %d", when, port, got, want)
			}
		}
	}
	// A ban: inserted at the head.
	change("-I", "f2b-test", "1", "-s", gen, "-p", "udp", "--dport", "7501", "-j", "REJECT", "--reject-with", "icmp-port-unreachable")
	expect("after the ban", map[uint16]int{7501: 0, 7502: 3, 7505: 0})
	// Appended after the RETURN: never reached; then one inserted
	// before it, and a RETURN of its own.
	change("-A", "f2b-test", "-s", gen, "-p", "udp", "--dport", "7502", "-j", "DROP")
	change("-I", "f2b-test", "-p", "udp", "--dport", "7503", "-j", "RETURN")
	change("-I", "f2b-test", "-s", gen, "-p", "udp", "--dport", "7504", "-j", "DROP")
	expect("after the appends and inserts", map[uint16]int{7501: 0, 7502: 3, 7503: 3, 7504: 0})
	// Unbans: deleted by specification and by number.
	change("-D", "f2b-test", "-s", gen, "-p", "udp", "--dport", "7501", "-j", "REJECT", "--reject-with", "icmp-port-unreachable")
	change("-D", "f2b-test", "1")
	expect("after the unbans", map[uint16]int{7501: 3, 7504: 3, 7505: 0})
	want := "-P FORWARD ACCEPT\n" +
		"-A FORWARD -p udp -m multiport --dports 7500:7510 -j f2b-test\n-A FORWARD -p udp -m udp --dport 7505 -j DROP\n"
	if out := nettest.MustExec(t, tp.FwNS, append(slices.Clip(command), "-S", "FORWARD")...); out != want {
		t.Errorf("-S FORWARD:\n%s\nwant:\n%s", out, want)
	}
	cs := counters(t, fw.save(t, tp, 4))
	for rule, want := range map[string]uint64{
		"FORWARD -p udp -m multiport --dports 7500:7510 -j f2b-test":             30,
		"FORWARD -p udp -m udp --dport 7505 -j DROP":                             6,
		"f2b-test -p udp -m udp --dport 7503 -j RETURN":                          3,
		"f2b-test -s 10.77.0.1/32 -j REJECT --reject-with icmp-port-unreachable": 0,
		"f2b-test -j RETURN": 18,
		"f2b-test -s " + gen + "/32 -p udp -m udp --dport 7502 -j DROP": 0,
	} {
		if got, ok := cs[rule]; !ok || got.packets != want {
			t.Errorf("%s: %d packets (listed %v), want %d", rule, got.packets, ok, want)
		}
	}
}
