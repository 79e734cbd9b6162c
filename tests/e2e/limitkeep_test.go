package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// limKeepRules is TestLimitKeptAcrossResync's ruleset: a 1/min limit (no
// token comes back within the test) before a DROP, and a set rule that
// makes an ipset change reload the ruleset.
const limKeepRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m set --match-set limkeep src -j DROP
-A FORWARD -p udp -m udp --dport 7200 -m limit --limit 1/min --limit-burst 3 -j ACCEPT
-A FORWARD -p udp -m udp --dport 7200 -j DROP
COMMIT
`

// limKeepRule is the limit rule as iptables-save prints it.
const limKeepRule = "FORWARD -p udp -m udp --dport 7200 -m limit --limit 1/min --limit-burst 3 -j ACCEPT"

// TestLimitKeptAcrossResync checks that the limit buckets go on where the
// kernel replaces no table: xfw sync, a new interface and a sync, and
// ipset changes (a member added, patched in place; a set created, which
// reloads the rules that use sets) leave an emptied bucket empty; iptables -A of an unrelated rule fills it again, as the
// kernel's iptables-legacy does. Each step sends three packets into a
// burst-3 bucket; the kernel's twin runs the same steps (the syncs are
// xfw's only) and the counts must agree.
func TestLimitKeptAcrossResync(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ipset", "iptables-legacy")
	bin := xfwPath(t)
	run := func(kind string) []uint64 {
		tp := nettest.New(t, nettest.WithStaticNeighbors())
		fw := firewall{kind: kind, bin: bin}
		t.Cleanup(func() { fw.stop(t, tp) })
		silenceSink(t, tp)
		xfwOnly := func(args ...string) {
			t.Helper()
			if kind == "xfw" {
				nettest.MustExec(t, tp.FwNS, append([]string{bin}, args...)...)
			}
		}
		ipset := func(args ...string) {
			t.Helper()
			argv := append([]string{"ipset"}, args...)
			if kind == "xfw" {
				argv = append([]string{bin}, argv...)
			}
			nettest.MustExec(t, tp.FwNS, argv...)
		}
		ipset("create", "limkeep", "hash:ip")
		fw.restore(t, tp, 4, limKeepRules)
		frame := tp.GenToFw().Frame(nettest.UDPPacket(netip.AddrPortFrom(tp.Gen.IPv4, 5000), netip.AddrPortFrom(tp.Sink.IPv4, 7200), []byte("x")))
		var passed []uint64
		step := func(then func()) {
			t.Helper()
			then()
			for i := 0; i < 3; i++ {
				if err := tp.InjectFromGen(frame); err != nil {
					t.Fatalf("%s: inject: %v", kind, err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			drainFw(t, tp)
			passed = append(passed, counters(t, fw.save(t, tp, 4))[limKeepRule].packets)
		}
		step(func() {})
		step(func() { xfwOnly("sync") })
		step(func() {
			nettest.MustExec(t, tp.FwNS, "ip", "link", "add", "limk0", "type", "veth", "peer", "name", "limk1")
			xfwOnly("sync")
		})
		// A member added: xfw patches the set's table in place.
		step(func() { ipset("add", "limkeep", "192.0.2.1") })
		// A set created: xfw reloads the rules that use sets.
		step(func() { ipset("create", "limkeep2", "hash:ip") })
		step(func() {
			res, err := nettest.Exec(tp.FwNS, append(fw.cmd(4, ""), "-w", lockWait, "-A", "INPUT", "-p", "tcp", "--dport", "1", "-j", "ACCEPT")...)
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: iptables -A: %v %s", kind, err, res)
			}
		})
		return passed
	}
	// The rule's count after each step: the burst, kept empty by the
	// resyncs and the set change, then a full bucket again.
	want := []uint64{3, 3, 3, 3, 3, 6}
	k, x := run("kernel"), run("xfw")
	if fmt.Sprint(k) != fmt.Sprint(want) {
		t.Errorf("kernel: the limit rule's counts after each step %v, want %v", k, want)
	}
	if fmt.Sprint(x) != fmt.Sprint(want) {
		t.Errorf("xfw: the limit rule's counts after each step %v, want %v (kernel %v)", x, want, k)
	}
}
