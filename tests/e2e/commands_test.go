package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestConcurrentCommandsLoseNothing runs 40 `iptables -w -A` commands at
// once (xfw's lock serialises them, as the xtables lock does) and requires
// every rule to be there afterwards.
func TestConcurrentCommandsLoseNothing(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := nettest.Exec(tp.FwNS, bin, "iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", fmt.Sprint(10000+i), "-j", "ACCEPT")
			if err != nil || res.ExitCode != 0 {
				errs <- fmt.Sprintf("command %d: %v %s", i, err, res.Stderr)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	save := fw.save(t, tp, 4)
	for i := 0; i < n; i++ {
		if !strings.Contains(save, fmt.Sprintf("--dport %d -j ACCEPT", 10000+i)) {
			t.Errorf("rule for port %d lost", 10000+i)
		}
	}
	// Without -w a command fails at once while the lock is held, with
	// iptables' message and exit status 4.
	lockf, err := os.OpenFile("/run/xfw.lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lockf.Close()
	if err := lockFile(lockf); err != nil {
		t.Fatal(err)
	}
	res, _ := nettest.Exec(tp.FwNS, bin, "iptables", "-A", "INPUT", "-j", "ACCEPT")
	unlockFile(lockf)
	if res == nil || res.ExitCode != 4 || !strings.Contains(res.Stderr, "xtables lock") {
		t.Errorf("command while the lock is held: %+v", res)
	}
}

// TestCommandsKeepCounters checks that appending, inserting and deleting
// rules keeps the counters of the rules the command did not touch, and that
// -Z zeroes them.
func TestCommandsKeepCounters(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -p udp -m udp --dport 7400 -j ACCEPT\nCOMMIT\n")
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7400))
	for i := 0; i < 3; i++ {
		nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 7400), []byte("x"))
	}
	if got := srv.Wait(3, arrivalWait); len(got) != 3 {
		t.Fatalf("%d of 3 datagrams arrived", len(got))
	}
	key := "FORWARD -p udp -m udp --dport 7400 -j ACCEPT"
	run := func(args ...string) {
		t.Helper()
		res, err := nettest.Exec(tp.FwNS, append([]string{bin, "iptables", "-w"}, args...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("iptables %v: %v %s", args, err, res.Stderr)
		}
	}
	run("-A", "FORWARD", "-p", "tcp", "-j", "ACCEPT")
	run("-I", "FORWARD", "1", "-p", "icmp", "-j", "ACCEPT")
	run("-D", "FORWARD", "-p", "tcp", "-j", "ACCEPT")
	run("-N", "extra")
	if c := counters(t, fw.save(t, tp, 4))[key]; c.packets != 3 {
		t.Errorf("after -A/-I/-D/-N the untouched rule has %d packets, want 3", c.packets)
	}
	run("-Z", "FORWARD")
	if c := counters(t, fw.save(t, tp, 4))[key]; c.packets != 0 {
		t.Errorf("after -Z the rule has %d packets, want 0", c.packets)
	}
	nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 7400), []byte("x"))
	srv.Wait(4, arrivalWait)
	if c := counters(t, fw.save(t, tp, 4))[key]; c.packets != 1 {
		t.Errorf("after -Z and one packet the rule has %d packets, want 1", c.packets)
	}
}

// TestCounterCarryMatchesKernel runs the same commands through
// iptables-legacy (in the sink namespace) and xfw (in fw's) and compares the
// rules' counters: a running rule keeps its counters through -I, -E and
// --noflush, while a rule a command adds starts from zero even when a
// running rule has the same text (-I of a duplicate, -R, re-adding a
// flushed chain's rules).
func TestCounterCarryMatchesKernel(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
	steps := [][]string{
		{"-A", "INPUT", "-s", "1.2.3.4", "-j", "ACCEPT", "-c", "5", "500"},
		{"-I", "INPUT", "-s", "1.2.3.4", "-j", "ACCEPT"},
		{"-A", "INPUT", "-s", "1.2.3.4", "-j", "ACCEPT", "-c", "6", "600"},
		{"-R", "INPUT", "3", "-s", "1.2.3.4", "-j", "ACCEPT"},
		{"-A", "INPUT", "-s", "1.2.3.5", "-c", "7", "700"},
		{"-N", "foo"},
		{"-A", "foo", "-s", "9.9.9.9", "-c", "3", "300"},
		{"-A", "foo", "-s", "9.9.9.8", "-c", "4", "400"},
		{"-E", "foo", "bar"},
		{"-A", "INPUT", "-j", "bar", "-c", "1", "100"},
		{"-D", "INPUT", "1"},
		{"-N", "baz"},
		{"-A", "baz", "-s", "8.8.8.8", "-c", "2", "200"},
		{"-N", "qux"},
		{"-A", "qux", "-s", "7.7.7.7", "-c", "9", "900"},
	}
	run := func(ns string, argv ...string) string {
		t.Helper()
		res, err := nettest.Exec(ns, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", argv, err, res)
		}
		return res.Stdout
	}
	for _, st := range steps {
		run(tp.SinkNS, append([]string{"iptables-legacy", "-w"}, st...)...)
		run(tp.FwNS, append([]string{bin, "iptables", "-w"}, st...)...)
	}
	noflush := "*filter\n:qux - [0:0]\n-A qux -s 7.7.7.7/32\n-A INPUT -s 2.2.2.2/32\nCOMMIT\n"
	for _, argv := range [][]string{{"iptables-legacy-restore", "--noflush"}, {bin, "iptables-restore", "-w", "--noflush"}} {
		ns := tp.SinkNS
		if argv[0] == bin {
			ns = tp.FwNS
		}
		if res, err := nettest.ExecStdin(30*time.Second, ns, noflush, argv...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", argv, err, res)
		}
	}
	rules := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "-A ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	want := rules(run(tp.SinkNS, "iptables-legacy", "-w", "-S", "-v"))
	got := rules(run(tp.FwNS, bin, "iptables", "-w", "-S", "-v"))
	if got != want {
		t.Errorf("counters differ from the kernel's\nxfw:\n%s\niptables-legacy:\n%s", got, want)
	}
	if !strings.Contains(want, "-A bar -s 9.9.9.8/32 -c 4 400") || !strings.Contains(want, "-A qux -s 7.7.7.7/32 -c 0 0") {
		t.Errorf("kernel listing lacks the renamed chain's counters or the re-added rule's zero (test premise):\n%s", want)
	}
}

// TestCountersExactAcrossUpdates streams datagrams through fw while rule
// updates swap generations under them, and requires the accepting rule's
// counter to equal what the sink's kernel counted arriving: no packet judged
// by an old generation may be lost from the counters (the control plane
// waits for the old bank's packets before carrying its counters) or counted
// twice.
func TestCountersExactAcrossUpdates(t *testing.T) {
	countersExactAcrossUpdates(t, "")
}

// TestCountersExactAcrossUpdatesBesideNat is TestCountersExactAcrossUpdates
// with a nat table loaded: the updates change a generation that walks
// nat's chains in place, and the accepting rule's counter (the packets
// its ACCEPT passes on into nat POSTROUTING) stays exact.
func TestCountersExactAcrossUpdatesBesideNat(t *testing.T) {
	countersExactAcrossUpdates(t, appendInPlaceNat)
}

// countersExactAcrossUpdates is TestCountersExactAcrossUpdates with other
// tables loaded first.
func countersExactAcrossUpdates(t *testing.T, otherTables string) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, otherTables+"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -p udp -m udp --dport 7400 -j ACCEPT\nCOMMIT\n")
	nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-w", "-A", "INPUT", "-p", "udp", "--dport", "7400")
	const updates = 30
	done := make(chan error, 1)
	inPlace := 0
	go func() {
		var err error
		run := func(args ...string) {
			var res *nettest.Result
			res, err = nettest.Exec(tp.FwNS, append([]string{"env", "XFW_TRACE=1", bin, "iptables", "-w"}, args...)...)
			if err == nil && (strings.Contains(res.Stderr, "commit: insert in place") || strings.Contains(res.Stderr, "commit: delete in place")) {
				inPlace++
			}
		}
		for i := 0; i < updates && err == nil; i++ {
			rule := []string{"FORWARD", "-s", fmt.Sprintf("10.250.%d.1", i), "-j", "DROP"}
			if run(append([]string{"-I"}, rule...)...); err == nil && i%2 == 1 {
				run(append([]string{"-D"}, rule...)...)
			}
		}
		done <- err
	}()
	sent := 0
	err := nettest.InNamespace(tp.GenNS, func() error {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(tp.Sink.IPv4, 7400)))
		if err != nil {
			return err
		}
		defer conn.Close()
		for updating := true; updating; {
			select {
			case err := <-done:
				if err != nil {
					return fmt.Errorf("update: %w", err)
				}
				updating = false
			default:
			}
			for i := 0; i < 20; i++ {
				if _, err := conn.Write([]byte("count me")); err == nil {
					sent++
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	drainFw(t, tp) // through fw and counted in sink's INPUT
	out := nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-w", "-L", "INPUT", "-v", "-x", "-n")
	var arrived int
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && strings.Contains(l, "dpt:7400") {
			fmt.Sscan(f[0], &arrived)
		}
	}
	got := counters(t, fw.save(t, tp, 4))["FORWARD -p udp -m udp --dport 7400 -j ACCEPT"]
	t.Logf("%d datagrams sent during %d updates, %d arrived, counter %d", sent, updates, arrived, got.packets)
	if arrived == 0 || arrived < sent/2 {
		t.Fatalf("only %d of %d datagrams arrived at the sink", arrived, sent)
	}
	if int(got.packets) != arrived {
		t.Errorf("rule counter %d, but the sink's kernel counted %d datagrams arriving", got.packets, arrived)
	}
	if inPlace == 0 {
		t.Errorf("none of the updates changed the running generation in place")
	}
}

// TestAppendInPlace checks the in-place paths of `iptables -A`, `-D` and
// `-I` on a base chain (compiler.AppendRule, DeleteRule and InsertRule, as
// XFW_TRACE reports them): the appended rules judge the very next packets
// and count them, the rules before them keep working, a deleted rule no
// longer matches and the others keep their counters, a rule inserted at
// the head comes first, and a rule the path cannot take (a jump) is
// compiled in full.
func TestAppendInPlace(t *testing.T) {
	appendInPlace(t, "")
}

// appendInPlaceNat is a Docker host's nat table for
// TestAppendInPlaceBesideNat: its POSTROUTING counts the datagrams to
// 7401 and 7404 that filter's FORWARD accepted.
const appendInPlaceNat = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:DOCKER - [0:0]\n" +
	"-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER\n" +
	"-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n" +
	"-A POSTROUTING -p udp -m udp --dport 7401 -j ACCEPT\n-A POSTROUTING -p udp -m udp --dport 7404 -j ACCEPT\n" +
	"-A DOCKER -i docker0 -j RETURN\nCOMMIT\n"

// TestAppendInPlaceBesideNat is TestAppendInPlace with a nat table loaded
// beside filter, as on every Docker host: the changes are still made in
// place, filter's ACCEPT (appended, inserted) goes on into nat's
// POSTROUTING, whose rules count the datagrams, and nat's counters are
// kept through the changes.
func TestAppendInPlaceBesideNat(t *testing.T) {
	appendInPlace(t, appendInPlaceNat)
}

// appendInPlace is TestAppendInPlace with other tables loaded first.
func appendInPlace(t *testing.T, otherTables string) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	var rules strings.Builder
	rules.WriteString(otherTables)
	rules.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:side - [0:0]\n")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&rules, "-A FORWARD -s 10.77.%d.%d/32 -p udp -m udp --dport %d -j DROP\n", i/250, i%250+1, 8000+i)
	}
	rules.WriteString("-A FORWARD -p udp -m udp --dport 7402 -j DROP\nCOMMIT\n")
	fw.restore(t, tp, 4, rules.String())
	change := func(wantInPlace bool, args ...string) {
		t.Helper()
		res, err := nettest.Exec(tp.FwNS, append([]string{"env", "XFW_TRACE=1", bin, "iptables", "-w"}, args...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", args, err, res)
		}
		got := strings.Contains(res.Stderr, "commit: append in place") || strings.Contains(res.Stderr, "commit: delete in place") || strings.Contains(res.Stderr, "commit: insert in place")
		if got != wantInPlace {
			t.Errorf("%v: in place %v, want %v; trace:\n%s", args, got, wantInPlace, res.Stderr)
		}
	}
	appendRule := func(wantInPlace bool, args ...string) {
		t.Helper()
		change(wantInPlace, append([]string{"-A"}, args...)...)
	}
	// Each datagram from a port of its own (freshSourcePort): nat counts
	// new connections only, and a random ephemeral port repeats a tracked
	// one with odds 1 in 28,232 per pair.
	send := func(port uint16, n int) int {
		t.Helper()
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port))
		defer srv.Close()
		for i := 0; i < n; i++ {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, port), []byte("x"),
				nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, freshSourcePort())))
		}
		return len(srv.Wait(n, arrivalWait))
	}
	if got := send(7400, 3); got != 3 {
		t.Fatalf("before the appends %d of 3 datagrams to 7400 arrived", got)
	}
	appendRule(true, "FORWARD", "-p", "udp", "--dport", "7400", "-j", "DROP")
	appendRule(true, "FORWARD", "-p", "udp", "--dport", "7401", "-j", "ACCEPT")
	appendRule(true, "FORWARD", "-p", "udp", "-j", "DROP")
	for _, c := range []struct {
		port    uint16
		arrives bool
	}{{7400, false}, {7401, true}, {7402, false}, {7403, false}, {7404, false}} {
		if got := send(c.port, 3); (got == 3) != c.arrives || (got != 0 && got != 3) {
			t.Errorf("port %d: %d of 3 datagrams arrived, want all %v", c.port, got, c.arrives)
		}
	}
	cs := counters(t, fw.save(t, tp, 4))
	for rule, want := range map[string]uint64{
		"FORWARD -p udp -m udp --dport 7400 -j DROP":   3,
		"FORWARD -p udp -m udp --dport 7401 -j ACCEPT": 3,
		"FORWARD -p udp -m udp --dport 7402 -j DROP":   3,
		"FORWARD -p udp -j DROP":                       6,
	} {
		if got := cs[rule]; got.packets != want {
			t.Errorf("%s: %d packets, want %d", rule, got.packets, want)
		}
	}
	// A jump is compiled in full; the changes after it are made in place
	// again, in the generation compiled.
	appendRule(false, "FORWARD", "-p", "udp", "--dport", "7403", "-j", "side")
	// Delete the ACCEPT of 7401 by specification and the first rule by
	// number: 7401 now meets the catch-all DROP, 8000 from 10.77.0.1 is
	// no longer dropped by rule 1 but by the catch-all as well.
	change(true, "-D", "FORWARD", "-p", "udp", "--dport", "7401", "-j", "ACCEPT")
	change(true, "-D", "FORWARD", "1")
	if got := send(7401, 3); got != 0 {
		t.Errorf("port 7401 after deleting its ACCEPT: %d of 3 datagrams arrived", got)
	}
	// Insert an ACCEPT at the head: it wins over every rule after it.
	change(true, "-I", "FORWARD", "-p", "udp", "--dport", "7404", "-j", "ACCEPT")
	if got := send(7404, 3); got != 3 {
		t.Errorf("port 7404 after inserting its ACCEPT at the head: %d of 3 datagrams arrived", got)
	}
	if out := nettest.MustExec(t, tp.FwNS, bin, "iptables", "-w", "-S", "FORWARD"); !strings.HasPrefix(strings.Split(out, "\n")[1], "-A FORWARD -p udp -m udp --dport 7404 -j ACCEPT") {
		t.Errorf("the inserted rule is not first:\n%s", out)
	}
	cs = counters(t, fw.save(t, tp, 4))
	if _, ok := cs["FORWARD -p udp -m udp --dport 7401 -j ACCEPT"]; ok {
		t.Errorf("the deleted rule is still listed")
	}
	if _, ok := cs["FORWARD -s 10.77.0.1/32 -p udp -m udp --dport 8000 -j DROP"]; ok {
		t.Errorf("rule 1, deleted by number, is still listed")
	}
	for rule, want := range map[string]uint64{
		"FORWARD -p udp -m udp --dport 7400 -j DROP": 3,
		"FORWARD -p udp -j DROP":                     9,
	} {
		if got := cs[rule]; got.packets != want {
			t.Errorf("after the deletions %s: %d packets, want %d", rule, got.packets, want)
		}
	}
	if otherTables == "" {
		return
	}
	// The datagrams filter's in-place ACCEPTs passed went on into nat's
	// POSTROUTING, whose counters the changes kept.
	for rule, want := range map[string]uint64{
		"POSTROUTING -p udp -m udp --dport 7401 -j ACCEPT": 3,
		"POSTROUTING -p udp -m udp --dport 7404 -j ACCEPT": 3,
	} {
		if got := cs[rule]; got.packets != want {
			t.Errorf("nat %s: %d packets, want %d", rule, got.packets, want)
		}
	}
}

// TestNewChainInPlace checks `iptables -N` without a compile: an empty
// user chain changes no packet's path, so the running generation is
// installed again (commitNewChain, as XFW_TRACE reports it) and is what a
// compile gives (XFW_CHECK_REUSE compiles as well and fails the command
// otherwise), with the nat table loaded beside filter and in nat itself;
// the rules keep judging and counting, and a jump to the new chain, a
// rule change compiled in full, works.
func TestNewChainInPlace(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
		":DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A DOCKER -i lo -j RETURN\nCOMMIT\n"+
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:side - [0:0]\n"+
		"-A FORWARD -p udp -m udp --dport 7500 -j DROP\n-A FORWARD -j side\n-A side -p udp -m udp --dport 7501 -j DROP\nCOMMIT\n")
	send := func(port uint16) int {
		t.Helper()
		srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port))
		defer srv.Close()
		for range 3 {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, port), []byte("x"))
		}
		return len(srv.Wait(3, arrivalWait))
	}
	if got := send(7500); got != 0 {
		t.Fatalf("before -N: %d of 3 datagrams to 7500 arrived through its DROP", got)
	}
	for _, args := range [][]string{{"-N", "f2b-sshd"}, {"-N", "AAA"}, {"-t", "nat", "-N", "NEWNAT"}} {
		res, err := nettest.Exec(tp.FwNS, append([]string{"env", "XFW_TRACE=1", "XFW_CHECK_REUSE=1", bin, "iptables", "-w"}, args...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", args, err, res)
		}
		for _, step := range []string{"commit: read running generation (new chain)", "XFW_CHECK_REUSE: compiled, the same"} {
			if !strings.Contains(res.Stderr, step) {
				t.Errorf("%v: no %q in the trace:\n%s", args, step, res.Stderr)
			}
		}
	}
	for port, want := range map[uint16]int{7500: 0, 7501: 0, 7502: 3} {
		if got := send(port); got != want {
			t.Errorf("after -N: %d of 3 datagrams to %d arrived, want %d", got, port, want)
		}
	}
	cs := counters(t, fw.save(t, tp, 4))
	if got := cs["FORWARD -p udp -m udp --dport 7500 -j DROP"].packets; got != 6 {
		t.Errorf("the DROP of 7500 counted %d packets over the -N commands, want 6", got)
	}
	nettest.MustExec(t, tp.FwNS, bin, "iptables", "-w", "-A", "f2b-sshd", "-p", "udp", "--dport", "7502", "-j", "DROP")
	nettest.MustExec(t, tp.FwNS, bin, "iptables", "-w", "-I", "FORWARD", "-j", "f2b-sshd")
	if got := send(7502); got != 0 {
		t.Errorf("after the jump to the new chain: %d of 3 datagrams to 7502 arrived", got)
	}
}

// TestMultiCall runs the binary under the names iptables, iptables-save and
// iptables-restore (symbolic links), as a drop-in in PATH would.
func TestMultiCall(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	dir := t.TempDir()
	for _, name := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	tp := nettest.New(t)
	t.Cleanup(func() { firewall{kind: "xfw", bin: bin}.stop(t, tp) })
	run := func(name string, args ...string) *nettest.Result {
		t.Helper()
		if name == "iptables" || name == "ip6tables" {
			// Wait for the lock, as Docker's calls do: other xfw
			// commands may run on the machine at the same time.
			args = append([]string{"-w"}, args...)
		}
		res, err := nettest.Exec(tp.FwNS, append([]string{filepath.Join(dir, name)}, args...)...)
		if res == nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run("iptables", "-A", "INPUT", "-s", "192.0.2.1", "-j", "DROP"); res.ExitCode != 0 {
		t.Fatalf("iptables -A: %s", res.Stderr)
	}
	if res := run("ip6tables", "-A", "INPUT", "-s", "2001:db8::1", "-j", "DROP"); res.ExitCode != 0 {
		t.Fatalf("ip6tables -A: %s", res.Stderr)
	}
	if res := run("iptables-save"); !strings.Contains(res.Stdout, "-A INPUT -s 192.0.2.1/32 -j DROP") {
		t.Errorf("iptables-save:\n%s", res.Stdout)
	}
	if res := run("ip6tables-save"); !strings.Contains(res.Stdout, "-A INPUT -s 2001:db8::1/128 -j DROP") {
		t.Errorf("ip6tables-save:\n%s", res.Stdout)
	}
	if res := run("iptables", "-S", "INPUT"); res.Stdout != "-P INPUT ACCEPT\n-A INPUT -s 192.0.2.1/32 -j DROP\n" {
		t.Errorf("iptables -S INPUT: %q", res.Stdout)
	}
	// An unknown chain: iptables' message and exit status 1.
	if res := run("iptables", "-D", "nochain", "1"); res.ExitCode != 1 || !strings.Contains(res.Stderr, "No chain/target/match by that name") {
		t.Errorf("iptables -D nochain 1: %d %q", res.ExitCode, res.Stderr)
	}
	// An option xfw cannot enforce: refused, not ignored.
	if res := run("iptables", "-t", "nat", "-A", "POSTROUTING", "-p", "tcp", "-j", "SNAT", "--to-source", "10.0.0.2:1000-2000/3000"); res.ExitCode == 0 {
		t.Errorf("iptables -t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.2:1000-2000/3000 accepted")
	}
}

// TestSyncAttachesNewInterfaces adds an interface after the ruleset was
// loaded: `xfw sync` attaches the programs to it and resolves -i names
// against it.
func TestSyncAttachesNewInterfaces(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -i late+ -j DROP\nCOMMIT\n")
	nettest.MustExec(t, tp.FwNS, "ip", "link", "add", "late0", "type", "veth", "peer", "name", "late1")
	// Before the sync, status names the new interfaces and exits 1.
	before, _ := nettest.Exec(tp.FwNS, bin, "status")
	if before.ExitCode != 1 || !strings.Contains(before.Stdout, "late0            XDP -") || !strings.Contains(before.Stdout, "UNPROTECTED") {
		t.Fatalf("before sync, xfw status: exit %d, want 1 with late0 unprotected\n%s", before.ExitCode, before.Stdout)
	}
	nettest.MustExec(t, tp.FwNS, bin, "sync")
	s := nettest.MustExec(t, tp.FwNS, bin, "status")
	for _, name := range []string{"late0", "late1"} {
		if !strings.Contains(s, name) || strings.Contains(s, name+"            XDP -") || !strings.Contains(s, "TCX egress loaded") {
			t.Errorf("%s not attached after sync:\n%s", name, s)
		}
	}
}

// TestRestoreOptions checks --counters, --noflush and --test through the
// whole path (front end, compiler, data plane).
func TestRestoreOptions(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	base := "*filter\n:INPUT ACCEPT [7:700]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n[5:500] -A INPUT -p tcp -m tcp --dport 22 -j ACCEPT\nCOMMIT\n"
	fw.restore(t, tp, 4, base, "--counters")
	c := counters(t, fw.save(t, tp, 4))
	if got := c["INPUT -p tcp -m tcp --dport 22 -j ACCEPT"]; got != (counter{5, 500}) {
		t.Errorf("--counters: rule counters %v, want 5:500", got)
	}
	if got := c[":INPUT"]; got.packets < 7 {
		t.Errorf("--counters: policy counters %v, want at least 7:700", got)
	}
	// --noflush appends to the running ruleset and keeps its counters.
	fw.restore(t, tp, 4, "*filter\n-A INPUT -p udp -m udp --dport 53 -j ACCEPT\nCOMMIT\n", "--noflush")
	c = counters(t, fw.save(t, tp, 4))
	if got := c["INPUT -p tcp -m tcp --dport 22 -j ACCEPT"]; got != (counter{5, 500}) {
		t.Errorf("--noflush: kept rule's counters %v, want 5:500", got)
	}
	if _, ok := c["INPUT -p udp -m udp --dport 53 -j ACCEPT"]; !ok {
		t.Errorf("--noflush: appended rule missing")
	}
	// --test checks and changes nothing; a bad ruleset fails.
	before := stripComments(fw.save(t, tp, 4))
	fw.restore(t, tp, 4, "*filter\n-A INPUT -j DROP\nCOMMIT\n", "--test")
	if after := stripComments(fw.save(t, tp, 4)); after != before {
		t.Errorf("--test changed the ruleset:\n%s", after)
	}
	if res, _ := fw.try(tp, 4, "-restore", "*filter\n-A INPUT -p tcp -m connlimit --connlimit-above 100 -j DROP\nCOMMIT\n", "--test"); res == nil || res.ExitCode == 0 {
		t.Errorf("--test accepted a rule xfw cannot enforce (--connlimit-above 100): %+v", res)
	}
	// Without flags the table is replaced and counters start from zero.
	fw.restore(t, tp, 4, base)
	if got := counters(t, fw.save(t, tp, 4))["INPUT -p tcp -m tcp --dport 22 -j ACCEPT"]; got != (counter{}) {
		t.Errorf("plain restore: counters %v, want 0:0", got)
	}
}

// TestUpdatesKeepPrograms checks the update path of the data plane: rule
// changes swap generations of maps under the programs loaded once (the XDP
// and TCX programs attached to every interface keep their ids), and each
// change is in force for the very next packet.
func TestUpdatesKeepPrograms(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n")
	progIDs := func() string {
		t.Helper()
		out := nettest.MustExec(t, tp.FwNS, "ip", "-d", "link", "show")
		ids := regexp.MustCompile(`prog/xdp id (\d+)`).FindAllString(out, -1)
		if len(ids) < 2 {
			t.Fatalf("xfw's XDP program is not attached to fw's interfaces:\n%s", out)
		}
		var tcx []string
		err := nettest.InNamespace(tp.FwNS, func() error {
			links, err := net.Interfaces()
			if err != nil {
				return err
			}
			for _, l := range links {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Index, Attach: ebpf.AttachTCXEgress})
				if err != nil {
					return fmt.Errorf("query TCX egress of %s: %w", l.Name, err)
				}
				for _, p := range res.Programs {
					tcx = append(tcx, fmt.Sprintf("%s:tcx/egress id %d", l.Name, p.ID))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(tcx) < 2 {
			t.Fatalf("xfw's egress program is not attached to fw's interfaces: %v", tcx)
		}
		return strings.Join(ids, ",") + "\n" + strings.Join(tcx, ",")
	}
	before := progIDs()
	t.Logf("programs: %s", strings.ReplaceAll(before, "\n", "; "))
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7401))
	run := func(args ...string) {
		t.Helper()
		res, err := nettest.Exec(tp.FwNS, append([]string{bin, "iptables", "-w"}, args...)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("iptables %v: %v %s", args, err, res.Stderr)
		}
	}
	send := func(n int) {
		for i := 0; i < n; i++ {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 7401), []byte("x"))
		}
	}
	arrived := 0
	for round := 0; round < 3; round++ {
		run("-A", "FORWARD", "-p", "udp", "--dport", "7401", "-j", "DROP")
		send(2)
		time.Sleep(arrivalWait)
		if got := len(srv.Wait(arrived+1, 50*time.Millisecond)); got != arrived {
			t.Fatalf("round %d: a datagram passed the DROP rule just appended (%d arrived, want %d)", round, got, arrived)
		}
		run("-D", "FORWARD", "-p", "udp", "--dport", "7401", "-j", "DROP")
		send(2)
		arrived += 2
		if got := len(srv.Wait(arrived, arrivalWait)); got != arrived {
			t.Fatalf("round %d: %d datagrams arrived after the rule was deleted, want %d", round, got, arrived)
		}
	}
	// Each command restarts the policy counters, as iptables-legacy's
	// commits do: the policy counted the datagrams after the last one.
	if c := counters(t, fw.save(t, tp, 4))[":FORWARD"]; c.packets != 2 {
		t.Errorf("FORWARD policy counted %d packets, want 2 (the datagrams after the last command)", c.packets)
	}
	if after := progIDs(); after != before {
		t.Errorf("rule changes replaced the programs:\nbefore %s\nafter  %s", before, after)
	}
}

// TestSyncForgetsRemovedAddresses checks that interface facts outlive no
// address: with forwarding off, xfw tells packets for this host (INPUT)
// from packets the kernel drops by its copy of the local routing table, and
// that copy must lose an address removed from the host (`xfw sync`), or a
// packet for the old address would be judged by INPUT, which the kernel
// never shows it.
func TestSyncForgetsRemovedAddresses(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.conf.all.forwarding=0")
	extra := tp.GenNet4.Addr().Next().Next().Next().Next().Next().Next().Next() // .7 of gen's subnet
	for extra == tp.Gen.IPv4 || extra == tp.FwIn.IPv4 {
		extra = extra.Next()
	}
	nettest.MustExec(t, tp.FwNS, "ip", "addr", "add", extra.String()+"/32", "dev", tp.FwIn.Ifname)
	nettest.MustExec(t, tp.GenNS, "ip", "neigh", "replace", extra.String(), "lladdr", tp.FwIn.MAC.String(), "dev", tp.Gen.Ifname, "nud", "permanent")
	fw.restore(t, tp, 4, fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -d %s/32 -p udp -j ACCEPT\nCOMMIT\n", extra))
	key := fmt.Sprintf("INPUT -d %s/32 -p udp -j ACCEPT", extra)
	nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(extra, 7402), []byte("x"))
	drainFw(t, tp)
	if c := counters(t, fw.save(t, tp, 4))[key]; c.packets != 1 {
		t.Fatalf("INPUT rule for fw's address counted %d packets, want 1", c.packets)
	}
	nettest.MustExec(t, tp.FwNS, "ip", "addr", "del", extra.String()+"/32", "dev", tp.FwIn.Ifname)
	nettest.MustExec(t, tp.FwNS, bin, "sync")
	nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(extra, 7402), []byte("x"))
	drainFw(t, tp)
	if c := counters(t, fw.save(t, tp, 4))[key]; c.packets != 1 {
		t.Errorf("after the address was removed and synced, the INPUT rule counted %d packets, want 1 (the kernel drops the packet before INPUT)", c.packets)
	}
}
