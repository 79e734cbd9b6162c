package e2e

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// cmdSetSteps add and remove a set match beside rules without sets, so
// that each bank (served commands alternate between the two) in turn
// gains set tables, keeps them, and loses them, while the set's members
// change: udp port 7200 is dropped exactly while a rule matching a set
// that holds gen's address (10.0.0.0/8) is in FORWARD.
var cmdSetSteps = []cmdStep{
	{argv: []string{"iptables-restore", "-w"}, stdin: "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"},
	{argv: []string{"ipset", "create", "CS1", "hash:net"}},
	{argv: []string{"ipset", "add", "CS1", "10.0.0.0/8"}},
	{argv: []string{"ipset", "create", "CS2", "hash:net"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS1", "src", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-D", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS1", "src", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS2", "src", "-j", "DROP"}},
	{argv: []string{"ipset", "add", "CS2", "10.0.0.0/8"}},
	{argv: []string{"iptables", "-w", "-D", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS2", "src", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7201", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS1", "src", "-j", "DROP"}},
	{argv: []string{"ipset", "del", "CS1", "10.0.0.0/8"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7202", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-D", "FORWARD", "-p", "udp", "--dport", "7202", "-j", "DROP"}},
	{argv: []string{"ipset", "add", "CS1", "10.0.0.0/8"}},
	{argv: []string{"iptables", "-w", "-D", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS1", "src", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-D", "FORWARD", "-p", "udp", "--dport", "7201", "-j", "DROP"}},
	{argv: []string{"iptables", "-w", "-A", "FORWARD", "-p", "udp", "--dport", "7200", "-m", "set", "--match-set", "CS2", "src", "-j", "DROP"}},
}

// TestCmdServerSetTablesAcrossBanks runs cmdSetSteps in a namespace
// without an agent and in one whose agent serves them through xfw-cmd
// (the ipset commands, which no agent serves, in their own process),
// and after every step requires the same output and the same fate for
// datagrams to port 7200: the agent keeps what each bank's set lookup
// elements hold between commands (the opened state's setIDs), which must
// follow every table installed, kept or freed.
func TestCmdServerSetTablesAcrossBanks(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	client := cmdClientPath(t, bin)
	own := nettest.New(t, nettest.WithStaticNeighbors())
	served := nettest.New(t, nettest.WithStaticNeighbors())
	for _, tp := range []*nettest.Topology{own, served} {
		fw := firewall{kind: "xfw", bin: bin}
		t.Cleanup(func() {
			nettest.Exec(tp.FwNS, bin, "ipset", "destroy")
			fw.stop(t, tp)
		})
	}
	startAgent(t, bin, served)
	for _, s := range cmdSetSteps {
		want := runStep(t, own.FwNS, bin, "off", s)
		by, mode := client, "only"
		if s.argv[0] == "ipset" {
			by, mode = bin, "off" // not served: its own process
		}
		if got := runStep(t, served.FwNS, by, mode, s); got != want {
			t.Errorf("%v: served by the agent, asked by xfw-cmd:\n%s\n\nin its own process:\n%s", s.argv, got, want)
		}
		a, b := udpArrivals(t, own, 7200), udpArrivals(t, served, 7200)
		if a != b {
			t.Errorf("after %v: %d of 3 datagrams to port 7200 forwarded with the agent serving, %d without", s.argv, b, a)
		}
	}
}
