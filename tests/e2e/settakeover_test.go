package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestSetTablesTakenOver checks that a ruleset change takes the running
// generation's hash set tables over only while they hold the sets' current
// members: members patched in by `ipset add/del` (in place) stay matched
// after later iptables commands (which take the patched tables over), and
// a swap (the set's contents change name) rebuilds them. Each step sends
// one datagram per source and reads which DROP rule counted it.
func TestSetTablesTakenOver(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) { setTablesTakenOver(t, bin, fam) })
	}
}

func setTablesTakenOver(t *testing.T, bin string, fam int) {
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	ipsetCmd := ipsetRunner(t, tp, "xfw", bin)
	silenceSink(t, tp)
	gen, sink, famName := tp.Gen.IPv4, tp.Sink.IPv4, "inet"
	if fam == 6 {
		gen, sink, famName = tp.Gen.IPv6, tp.Sink.IPv6, "inet6"
	}
	host := func(h byte) netip.Addr {
		b := gen.AsSlice()
		b[len(b)-1] = h
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	h1, h2 := host(21), host(22)
	// t: a hash table (timeouts); p: hash:ip,port, looked up by two
	// conditions (src,dst and dst,dst), which share its table.
	for _, c := range []string{
		"create t hash:ip family " + famName + " timeout 3600",
		"add t " + h1.String(),
		"create p hash:ip,port family " + famName,
		"add p " + h1.String() + ",udp:7101",
		"add p " + sink.String() + ",udp:7102",
		"create t2 hash:ip family " + famName + " timeout 3600",
		"add t2 " + h2.String(),
	} {
		ipsetCmd(c)
	}
	rules := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp --dport 7100 -m set --match-set t src -j DROP
-A FORWARD -p udp --dport 7101 -m set --match-set p src,dst -j DROP
-A FORWARD -p udp --dport 7102 -m set --match-set p dst,dst -j DROP
COMMIT
`
	fw.restore(t, tp, fam, rules)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	ruleT := "FORWARD -p udp -m udp --dport 7100 -m set --match-set t src -j DROP"
	ruleP := "FORWARD -p udp -m udp --dport 7101 -m set --match-set p src,dst -j DROP"
	ruleP2 := "FORWARD -p udp -m udp --dport 7102 -m set --match-set p dst,dst -j DROP"
	// check sends one datagram from each source to port and wants the
	// DROP rule's counter to grow by the number of sources dropped.
	check := func(step, rule string, port uint16, srcs []netip.Addr, dropped int) {
		t.Helper()
		before := counters(t, fw.save(t, tp, fam))[rule]
		for _, s := range srcs {
			frame := eth.Frame(nettest.IPPacket(s, sink, nettest.UDP{SrcPort: 5000, DstPort: port, Payload: []byte("x")}))
			if err := nettest.Inject(tp.GenNS, nettest.GenIfname, frame); err != nil {
				t.Fatalf("%s: inject: %v", step, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		drainFw(t, tp)
		save := fw.save(t, tp, fam)
		after, ok := counters(t, save)[rule]
		if !ok {
			t.Fatalf("%s: no rule %q in:\n%s", step, rule, save)
		}
		if got := after.packets - before.packets; got != uint64(dropped) {
			t.Errorf("IPv%d, %s: %d of %v dropped by %q, want %d\n%s", fam, step, got, srcs, rule, dropped, save)
		}
	}
	iptables := func(args string) {
		t.Helper()
		argv := append(fw.cmd(fam, ""), append([]string{"-w", lockWait}, strings.Fields(args)...)...)
		if res, err := nettest.Exec(tp.FwNS, argv...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %s", args, err, res)
		}
	}
	both := []netip.Addr{h1, h2}
	check("loaded", ruleT, 7100, both, 1)
	check("loaded", ruleP, 7101, both, 1)

	ipsetCmd("add t " + h2.String())
	ipsetCmd("add p " + h2.String() + ",udp:7101")
	check("after ipset add (patched in place)", ruleT, 7100, both, 2)
	iptables("-A INPUT -p tcp --dport 1234 -j ACCEPT")
	check("after ipset add and iptables -A (tables taken over)", ruleT, 7100, both, 2)
	check("after ipset add and iptables -A (tables taken over)", ruleP, 7101, both, 2)
	check("after ipset add and iptables -A (tables taken over)", ruleP2, 7102, both, 2)

	ipsetCmd("del t " + h1.String())
	ipsetCmd("del p " + h1.String() + ",udp:7101")
	iptables("-I INPUT -p tcp --dport 1235 -j ACCEPT")
	check("after ipset del and iptables -I", ruleT, 7100, both, 1)
	check("after ipset del and iptables -I", ruleP, 7101, []netip.Addr{h1}, 0)
	check("after ipset del and iptables -I", ruleP, 7101, []netip.Addr{h2}, 1)
	ipsetCmd("del p " + sink.String() + ",udp:7102")
	check("after ipset del of the dst,dst member", ruleP2, 7102, both, 0)

	// t now holds t2's members ({h2}) and t2 t's ({h2} too after the
	// del): add h1 to t2 first so the swap changes what t matches.
	ipsetCmd("add t2 " + h1.String())
	ipsetCmd("del t2 " + h2.String())
	ipsetCmd("swap t t2")
	check("after ipset swap t t2", ruleT, 7100, []netip.Addr{h1}, 1)
	check("after ipset swap t t2", ruleT, 7100, []netip.Addr{h2}, 0)
	iptables("-D INPUT 1")
	check("after the swap and iptables -D", ruleT, 7100, []netip.Addr{h1}, 1)
	check("after the swap and iptables -D", ruleT, 7100, []netip.Addr{h2}, 0)
}
