package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// protectRules drops UDP to port 7100 in FORWARD: a packet of gen's that
// reaches sink on that port went past the ruleset.
const protectRules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A FORWARD -p udp -m udp --dport 7100 -j DROP\nCOMMIT\n"

// forwardedTo7100 sends n datagrams from gen to sink's port 7100 and
// returns how many arrived.
func forwardedTo7100(t *testing.T, tp *nettest.Topology, n int) int {
	t.Helper()
	return forwardedTo(t, tp, 7100, n)
}

// status runs xfw status in fw's namespace.
func status(t *testing.T, bin string, tp *nettest.Topology) *nettest.Result {
	t.Helper()
	return execAny(t, tp.FwNS, bin, "status")
}

// execAny runs argv in ns and returns its result whatever its exit status;
// it fails the test only when the command could not run.
func execAny(t *testing.T, ns string, argv ...string) *nettest.Result {
	t.Helper()
	res, err := nettest.Exec(ns, argv...)
	if err != nil && res.ExitCode < 0 {
		t.Fatalf("%v: %v", argv, err)
	}
	return res
}

// detachXDP removes every XDP program from the fw namespace's interfaces,
// as an administrator's `ip link set dev X xdp off` does.
func detachXDP(t *testing.T, tp *nettest.Topology, ifnames ...string) {
	t.Helper()
	for _, n := range ifnames {
		for _, mode := range []string{"xdp", "xdpgeneric"} {
			if res, err := nettest.Exec(tp.FwNS, "ip", "link", "set", "dev", n, mode, "off"); err != nil || res.ExitCode != 0 {
				t.Fatalf("ip link set dev %s %s off: %v %v", n, mode, err, res)
			}
		}
	}
}

// TestDetachedProgramsKeepRuleset: with XDP removed from one interface the
// ruleset no longer covers it and xfw status says so (exit 1); with XDP
// removed from every interface the ruleset is still there (iptables-save
// prints it) and xfw sync puts the programs back.
func TestDetachedProgramsKeepRuleset(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, protectRules)
	if res := status(t, bin, tp); res.ExitCode != 0 {
		t.Fatalf("xfw status after restore: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Fatalf("%d datagrams to port 7100 forwarded before any detach", got)
	}

	detachXDP(t, tp, nettest.FwInIfname)
	res := status(t, bin, tp)
	if res.ExitCode != 1 || !strings.Contains(res.Stdout, "UNPROTECTED") || !strings.Contains(res.Stdout, nettest.FwInIfname) {
		t.Errorf("xfw status with %s's XDP detached: exit %d, want 1 naming it\n%s%s", nettest.FwInIfname, res.ExitCode, res.Stdout, res.Stderr)
	}

	detachXDP(t, tp, nettest.FwInIfname, nettest.FwOutIfname, "lo")
	if save := fw.save(t, tp, 4); !strings.Contains(save, "--dport 7100 -j DROP") {
		t.Errorf("with XDP detached everywhere iptables-save lost the ruleset:\n%s", save)
	}
	nettest.MustExec(t, tp.FwNS, bin, "sync")
	if res := status(t, bin, tp); res.ExitCode != 0 {
		t.Errorf("xfw status after sync: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Errorf("%d datagrams to port 7100 forwarded after xfw sync", got)
	}
	if save := fw.save(t, tp, 4); !strings.Contains(save, "[6:") {
		t.Errorf("the rule's counters were not kept across the detach and sync:\n%s", save)
	}
}

// startAgent runs xfw agent in fw's namespace; the returned buffer fills
// with its messages. The test ends it (by pid) at cleanup.
func startAgent(t testing.TB, bin string, tp *nettest.Topology, extra ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command("ip", append([]string{"netns", "exec", tp.FwNS, bin, "agent", "--no-log"}, extra...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start xfw agent: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() || testing.Verbose() {
			t.Logf("agent's output:\n%s", out.String())
		}
	})
	waitFor(t, "the agent to start", func() bool { return strings.Contains(out.String(), "following the interfaces") })
	return cmd, out
}

// agentMetricsAddr is where the agent serves metrics in fw's namespace
// (its own loopback: the namespace is the test's).
const agentMetricsAddr = "127.0.0.1:9741"

// scrape fetches http://addr/metrics from inside namespace ns (the
// connection is made on a thread in ns: an http.Client would dial from
// another goroutine, in another namespace).
func scrape(ns, addr string) (string, error) {
	var conn net.Conn
	err := nettest.InNamespace(ns, func() error {
		var err error
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(conn, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s: %s", resp.Status, body)
	}
	return string(body), err
}

// waitFor polls cond for up to waitForBound (a bound against hanging, not
// a timing requirement).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForOr(t, what, cond, func() {})
}

// waitForBound bounds waitFor. It was 10 s: with make test's test
// processes beside other work (load 16 on 2 cores), an agent took longer
// than that to start (TestCmdClientWithoutAgent).
const waitForBound = 60 * time.Second

// waitForOr is waitFor that calls explain, to log what the test saw last,
// before it fails.
func waitForOr(t testing.TB, what string, cond func() bool, explain func()) {
	t.Helper()
	deadline := time.Now().Add(waitForBound)
	for !cond() {
		if time.Now().After(deadline) {
			explain()
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAgentKeepsInterfacesProtected: the agent puts a detached XDP program
// back and attaches to a new interface, logging both; killed with
// SIGKILL, it leaves filtering as it was.
func TestAgentKeepsInterfacesProtected(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, protectRules)
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "dev", "lo", "up") // the metrics' listener
	cmd, out := startAgent(t, bin, tp, "--metrics", agentMetricsAddr)
	waitFor(t, "the metrics server", func() bool { return strings.Contains(out.String(), "serving metrics") })

	detachXDP(t, tp, nettest.FwInIfname)
	waitFor(t, "the agent to re-attach", func() bool { return strings.Contains(out.String(), "re-attached to "+nettest.FwInIfname) })
	if res := status(t, bin, tp); res.ExitCode != 0 {
		t.Errorf("xfw status after the agent's re-attach: exit %d\n%s", res.ExitCode, res.Stdout)
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Errorf("%d datagrams to port 7100 forwarded after the re-attach", got)
	}

	nettest.MustExec(t, tp.FwNS, "ip", "link", "add", "name", "hot0", "type", "veth", "peer", "name", "hot1")
	waitFor(t, "the agent to attach to hot0", func() bool { return strings.Contains(out.String(), "attached to new interface hot0") })
	if res := status(t, bin, tp); res.ExitCode != 0 || !strings.Contains(res.Stdout, "hot0") {
		t.Errorf("xfw status after the agent attached to hot0: exit %d\n%s", res.ExitCode, res.Stdout)
	}

	var m string
	waitFor(t, "a scrape of the agent's metrics", func() bool {
		var err error
		m, err = scrape(tp.FwNS, agentMetricsAddr)
		return err == nil
	})
	for _, want := range []string{
		`xfw_attach_events_total{interface="` + nettest.FwInIfname + `",kind="reattach"} 1`,
		`xfw_attach_events_total{interface="hot0",kind="attach"} 1`,
		`xfw_guard_drops_packets_total{hook="prerouting"} `,
		`xfw_interfaces_attached{interface="hot0",hook="xdp"} 1`,
		`xfw_rule_packets_total{family="ipv4",table="filter",chain="FORWARD",rule="1",comment=""} 3`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("the agent's metrics lack %s\n%s", want, m)
		}
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if res := status(t, bin, tp); res.ExitCode != 0 {
		t.Errorf("xfw status after kill -9 of the agent: exit %d\n%s", res.ExitCode, res.Stdout)
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Errorf("%d datagrams to port 7100 forwarded after the agent was killed", got)
	}
}

// TestUnprivilegedCommands: run as nobody, commands that read xfw's state
// say they need root and exit as the tools they stand for exit; they never
// print an empty ruleset or "not loaded".
func TestUnprivilegedCommands(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "setpriv")
	bin := xfwPath(t)
	tp := nettest.New(t)
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, protectRules)
	// A copy nobody can run: the checkout may sit below a private directory.
	dir, err := os.MkdirTemp("", "xfw-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	copyBin := filepath.Join(dir, "xfw")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyBin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		exit int
		msg  string
	}{
		{[]string{"status"}, 1, "xfw status: Permission denied (you must be root"},
		{[]string{"iptables-save"}, 4, "iptables-save v1.8.9 (xfw): Could not read xfw's state: Permission denied (you must be root)"},
		{[]string{"ip6tables", "-S"}, 4, "ip6tables v1.8.9 (xfw): Could not read xfw's state: Permission denied (you must be root)"},
		{[]string{"iptables", "-A", "INPUT", "-j", "ACCEPT"}, 4, "Permission denied (you must be root)"},
		{[]string{"ipset", "list"}, 1, "ipset v7.17: Kernel error received: Operation not permitted"},
		{[]string{"conntrack", "-L"}, 1, "you must be root or get CAP_NET_ADMIN capability"},
		{[]string{"sync"}, 1, "xfw sync: Permission denied"},
		{[]string{"iptables", "--version"}, 0, ""},
	} {
		argv := append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", copyBin}, tc.args...)
		res := execAny(t, tp.FwNS, argv...)
		if res.ExitCode != tc.exit || !strings.Contains(res.Stderr, tc.msg) || strings.Contains(res.Stdout, "*filter") {
			t.Errorf("%v as nobody: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, res.ExitCode, tc.exit, tc.msg, res.Stdout, res.Stderr)
		}
	}
}

// TestBootRestore runs the boot unit's command in fresh namespaces: the
// files load (sets first); a damaged file is reported, exits 1 and its
// last good copy is loaded instead.
func TestBootRestore(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	etc, state := t.TempDir(), t.TempDir()
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	// Every topology's addresses are in 10.0.0.0/8: the set blocks the
	// sink of the second, fresh namespace too.
	sets := "create blk hash:net family inet hashsize 1024 maxelem 65536\nadd blk 10.0.0.0/8\n"
	v4 := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A FORWARD -p udp -m set --match-set blk dst -m udp --dport 7100 -j DROP\nCOMMIT\n"
	v6 := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	for name, text := range map[string]string{"ipsets": sets, "rules.v4": v4, "rules.v6": v6} {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	boot := func(tp *nettest.Topology) *nettest.Result {
		return execAny(t, tp.FwNS, bin, "boot-restore", "--dir", etc, "--state-dir", state)
	}
	if res := boot(tp); res.ExitCode != 0 {
		t.Fatalf("boot-restore: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Errorf("%d datagrams to the blocked set member forwarded after boot-restore", got)
	}
	if save := fw.save(t, tp, 6); !strings.Contains(save, ":FORWARD DROP") {
		t.Errorf("IPv6 ruleset not restored:\n%s", save)
	}

	// A damaged rules.v4 at the next boot (a fresh namespace).
	if err := os.WriteFile(filepath.Join(etc, "rules.v4"), []byte("*filter\n-A FORWARD --bogus\nCOMMIT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tp2 := nettest.New(t, nettest.WithStaticNeighbors())
	t.Cleanup(func() { fw.stop(t, tp2) })
	res := boot(tp2)
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "rules.v4 not loaded") || !strings.Contains(res.Stderr, "loaded the last good copy") {
		t.Errorf("boot-restore with a damaged rules.v4: exit %d, want 1 naming the file and the last good copy\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	if got := forwardedTo7100(t, tp2, 3); got != 0 {
		t.Errorf("%d datagrams forwarded: the last good IPv4 ruleset is not in force", got)
	}
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// hotplugRounds is how many interfaces TestHotplugNeverUnfiltered adds.
const hotplugRounds = 12

// hotplugTarget is fw's address (on lo, present before the ruleset loads)
// that gen reaches through the newest hot-plugged interface.
var hotplugTarget = netip.MustParseAddr("10.252.0.1")

// hotplugTopology builds a topology whose fw has hotplugTarget on lo and
// an xfw ruleset whose INPUT drops UDP to port 7200.
func hotplugTopology(t *testing.T) (string, *nettest.Topology) {
	t.Helper()
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	nettest.MustExec(t, tp.FwNS, "ip", "addr", "add", hotplugTarget.String()+"/32", "dev", "lo")
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A INPUT -p udp -m udp --dport 7200 -j DROP\nCOMMIT\n")
	return bin, tp
}

// TestHotplugNeverUnfiltered adds interfaces to fw, one after another,
// each brought up at once with its address, while gen sends without pause
// through the newest one to an address of fw's: to port 7200, which INPUT
// drops, and to port 7201, which it accepts. With the agent and its guard
// running, no datagram to 7200 may reach fw's socket (the guard drops what
// arrives before the programs run, the programs drop the rest); datagrams
// to 7201 show that the new interfaces carry traffic once protected. (The
// target address exists before the interfaces: a new address has a window
// of its own, docs/design.md.)
func TestHotplugNeverUnfiltered(t *testing.T) {
	nettest.RequireRoot(t)
	bin, tp := hotplugTopology(t)
	_, out := startAgent(t, bin, tp)
	waitFor(t, "the guard", func() bool { return strings.Contains(out.String(), "guard started") })
	dropped := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(hotplugTarget, 7200))
	allowed := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(hotplugTarget, 7201))

	stop, sent := make(chan struct{}), make(chan int, 1)
	err := nettest.InNamespace(tp.GenNS, func() error {
		conn, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		go flood(conn, []netip.AddrPort{netip.AddrPortFrom(hotplugTarget, 7200), netip.AddrPortFrom(hotplugTarget, 7201)}, stop, sent)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= hotplugRounds; i++ {
		addHotplugLink(t, tp, i)
		time.Sleep(50 * time.Millisecond) // traffic flows while the agent works
	}
	var last *nettest.Result
	waitForOr(t, "every new interface to be protected", func() bool {
		last = status(t, bin, tp)
		return last.ExitCode == 0
	}, func() { t.Logf("xfw status (exit %d):\n%s%s", last.ExitCode, last.Stdout, last.Stderr) })
	// Each attachment is logged, also those a sync made for an address
	// change or for a link event of another interface.
	waitFor(t, "the agent to log every new interface", func() bool {
		for i := 1; i <= hotplugRounds; i++ {
			if !strings.Contains(out.String(), fmt.Sprintf("attached to new interface hp%d ", i)) {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond)
	close(stop)
	n := <-sent
	leaked, passed := len(dropped.Wait(1, arrivalWait)), len(allowed.Wait(1, arrivalWait))
	t.Logf("%d datagrams sent over %d new interfaces: %d to the dropped port arrived, %d to the accepted one", n, hotplugRounds, leaked, passed)
	if leaked != 0 {
		t.Errorf("%d datagrams to port 7200 reached fw's socket: a new interface carried traffic the ruleset drops", leaked)
	}
	if passed == 0 {
		t.Errorf("no datagram to port 7201 arrived: the new interfaces carried nothing, so the test proved nothing")
	}
	t.Logf("agent:\n%s", out.String())
}

// flood sends, until stop, one datagram to each of dsts in turn, again and
// again, and reports how many the kernel took.
func flood(conn *net.UDPConn, dsts []netip.AddrPort, stop chan struct{}, sent chan int) {
	defer conn.Close()
	n := 0
	for {
		select {
		case <-stop:
			sent <- n
			return
		default:
		}
		for _, dst := range dsts {
			if _, err := conn.WriteToUDPAddrPort([]byte("flood"), dst); err == nil {
				n++
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// addHotplugLink adds veth hpI (fw, 10.251.I.1/30) — hpIp (gen,
// 10.251.I.2/30), both up, and points gen's route to hotplugTarget at it
// (with a static neighbour entry, so frames flow at once).
func addHotplugLink(t *testing.T, tp *nettest.Topology, i int) {
	t.Helper()
	fwName, genName := fmt.Sprintf("hp%d", i), fmt.Sprintf("hp%dp", i)
	fwMAC, genMAC := fmt.Sprintf("02:51:00:00:%02x:01", i), fmt.Sprintf("02:51:00:00:%02x:02", i)
	fwAddr, genAddr := fmt.Sprintf("10.251.%d.1", i), fmt.Sprintf("10.251.%d.2", i)
	for _, c := range []struct {
		ns   string
		argv []string
	}{
		{tp.FwNS, []string{"ip", "link", "add", fwName, "address", fwMAC, "type", "veth", "peer", "name", genName, "address", genMAC, "netns", tp.GenNS}},
		{tp.FwNS, []string{"ip", "addr", "add", fwAddr + "/30", "dev", fwName}},
		{tp.FwNS, []string{"ip", "link", "set", fwName, "up"}},
		{tp.GenNS, []string{"ip", "addr", "add", genAddr + "/30", "dev", genName}},
		{tp.GenNS, []string{"ip", "link", "set", genName, "up"}},
		{tp.GenNS, []string{"ip", "neigh", "replace", fwAddr, "lladdr", fwMAC, "dev", genName, "nud", "permanent"}},
		{tp.GenNS, []string{"ip", "route", "replace", hotplugTarget.String() + "/32", "via", fwAddr, "dev", genName}},
	} {
		nettest.MustExec(t, c.ns, c.argv...)
	}
}

// attachForeignXDP attaches an XDP program that is not xfw's (it passes
// every frame) to ifname in ns, as another tool would.
func attachForeignXDP(t *testing.T, ns, ifname string) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "other_pass", Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load a foreign XDP program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	err = nettest.InNamespace(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		return netlink.LinkSetXdpFdWithFlags(l, prog.FD(), nl.XDP_FLAGS_SKB_MODE)
	})
	if err != nil {
		t.Fatalf("attach a foreign XDP program to %s: %v", ifname, err)
	}
	return prog
}

// attachForeignTCX attaches a TCX egress program that is not xfw's (it
// passes every packet) to ifname in ns, held by a link the test closes.
func attachForeignTCX(t *testing.T, ns, ifname string) {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "other_tc", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1 /* TCX_NEXT */), asm.Return()},
	})
	if err != nil {
		t.Fatalf("load a foreign TC program: %v", err)
	}
	t.Cleanup(func() { prog.Close() })
	err = nettest.InNamespace(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		tl, err := link.AttachTCX(link.TCXOptions{Interface: l.Attrs().Index, Program: prog, Attach: ebpf.AttachTCXEgress})
		if err != nil {
			return err
		}
		t.Cleanup(func() { tl.Close() })
		return nil
	})
	if err != nil {
		t.Fatalf("attach a foreign TCX egress program to %s: %v", ifname, err)
	}
}

// TestForeignXDPNotReplaced: an interface that runs another XDP program
// makes a restore fail, naming it, with nothing loaded; xfw status shows
// the program; once it is gone the restore succeeds.
func TestForeignXDPNotReplaced(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	attachForeignXDP(t, tp.FwNS, nettest.FwOutIfname)
	res, err := fw.try(tp, 4, "-restore", protectRules)
	if err == nil || res.ExitCode == 0 || !strings.Contains(res.Stderr, "interface "+nettest.FwOutIfname+" runs another XDP program") || !strings.Contains(res.Stderr, "other_pass") {
		t.Fatalf("restore beside a foreign XDP program: exit %d, want a failure naming %s and the program\n%s", res.ExitCode, nettest.FwOutIfname, res.Stderr)
	}
	if st := status(t, bin, tp); !strings.Contains(st.Stdout, "not loaded") {
		t.Errorf("the failed restore left xfw loaded:\n%s", st.Stdout)
	}
	if out, _ := nettest.Exec(tp.FwNS, "ip", "link", "show", "dev", nettest.FwOutIfname); !strings.Contains(out.Stdout, "xdpgeneric") {
		t.Errorf("the foreign program was removed:\n%s", out.Stdout)
	}
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "dev", nettest.FwOutIfname, "xdpgeneric", "off")
	attachForeignTCX(t, tp.FwNS, nettest.FwOutIfname)
	fw.restore(t, tp, 4, protectRules)
	if st := status(t, bin, tp); st.ExitCode != 0 || !strings.Contains(st.Stdout, `TCX egress also runs: "other_tc"`) {
		t.Errorf("xfw status beside another TCX egress program: exit %d, want 0 naming it\n%s", st.ExitCode, st.Stdout)
	}
	if got := forwardedTo7100(t, tp, 3); got != 0 {
		t.Errorf("%d datagrams to port 7100 forwarded once the foreign program was gone and the restore done", got)
	}
}

// detachRounds is how often TestDetachUnderTraffic removes the XDP program.
const detachRounds = 10

// TestDetachUnderTraffic removes xfw's XDP program from fw's input
// interface again and again while gen sends, without pause, datagrams
// FORWARD drops: with the agent running, none may reach sink (the guard
// reads the program the device runs for every packet, the agent puts it
// back), with the program attached natively (veth's own) or generically.
func TestDetachUnderTraffic(t *testing.T) {
	nettest.RequireRoot(t)
	for _, mode := range []string{"auto", "generic"} {
		t.Run(mode, func(t *testing.T) { detachUnderTraffic(t, mode) })
	}
}

// detachUnderTraffic is TestDetachUnderTraffic with the XDP mode given.
func detachUnderTraffic(t *testing.T, mode string) {
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	if res, err := nettest.ExecStdin(nettest.DefaultExecTimeout, tp.FwNS, protectRules, bin, "--xdp-mode", mode, "iptables-restore", "-w", lockWait); err != nil {
		t.Fatalf("restore (XDP mode %s): %v", mode, err)
	} else if res.ExitCode != 0 {
		t.Fatalf("restore (XDP mode %s): %s", mode, res)
	}
	t.Setenv("XFW_XDP_MODE", mode) // the agent's re-attachments too
	_, out := startAgent(t, bin, tp)
	waitFor(t, "the guard", func() bool { return strings.Contains(out.String(), "guard started") })
	t.Log(nettest.MustExec(t, tp.FwNS, "ip", "link", "show", "dev", nettest.FwInIfname))
	dst := netip.AddrPortFrom(tp.Sink.IPv4, 7100)
	srv := nettest.StartUDPServer(t, tp.SinkNS, dst)
	stop, sent := make(chan struct{}), make(chan int, 1)
	err := nettest.InNamespace(tp.GenNS, func() error {
		conn, err := net.ListenUDP("udp4", nil)
		if err != nil {
			return err
		}
		go flood(conn, []netip.AddrPort{dst}, stop, sent)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	reattachedNow := func() int { return strings.Count(out.String(), "re-attached to "+nettest.FwInIfname) }
	for i := 0; i < detachRounds; i++ {
		detachXDP(t, tp, nettest.FwInIfname)
		// The next removal once the agent put this one back: a fixed
		// 150 ms between removals was shorter than the agent's check
		// and re-attachment on a loaded machine (a removal found
		// nothing to remove and the count fell short).
		waitFor(t, fmt.Sprintf("re-attachment %d", i+1), func() bool { return reattachedNow() > i })
	}
	waitFor(t, "the programs back", func() bool { return status(t, bin, tp).ExitCode == 0 })
	close(stop)
	n := <-sent
	leaked := len(srv.Wait(1, arrivalWait))
	reattached := reattachedNow()
	t.Logf("%d datagrams sent through %d removals (%d re-attachments): %d reached sink", n, detachRounds, reattached, leaked)
	if leaked != 0 {
		t.Errorf("%d datagrams FORWARD drops reached sink while the XDP program was being removed and put back", leaked)
	}
	if reattached < detachRounds {
		t.Errorf("the agent re-attached %d times for %d removals", reattached, detachRounds)
	}
}

// mountBPFFS mounts a BPF file system of the test's own for the guard's
// pins (GuardPinEnv) and unmounts it at the end.
func mountBPFFS(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/run", "xfw-test-bpffs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(dir)
		t.Fatalf("mount a bpffs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// TestGuardOutlivesAgent: with a bpffs, the guard is pinned. An agent
// killed with SIGKILL leaves it in force: an interface added afterwards
// carries nothing (no agent attaches to it) instead of carrying traffic
// unfiltered; the next agent takes the guard over and covers the
// interface; xfw stop removes the guard.
func TestGuardOutlivesAgent(t *testing.T) {
	nettest.RequireRoot(t)
	pins := mountBPFFS(t)
	t.Setenv("XFW_BPFFS", pins)
	bin, tp := hotplugTopology(t)
	cmd, out := startAgent(t, bin, tp)
	waitFor(t, "the guard", func() bool { return strings.Contains(out.String(), "guard started") })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	addHotplugLink(t, tp, 1)
	dropped := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(hotplugTarget, 7200))
	allowed := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(hotplugTarget, 7201))
	send := func() {
		for i := 0; i < 5; i++ {
			for _, port := range []uint16{7200, 7201} {
				nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(hotplugTarget, port), []byte("x"))
			}
		}
	}
	send()
	if d, a := len(dropped.Wait(1, arrivalWait)), len(allowed.Wait(1, arrivalWait)); d+a != 0 {
		t.Errorf("with the agent dead, the new interface carried %d datagrams to the dropped port and %d to the accepted one; want none (the pinned guard)", d, a)
	}

	_, out2 := startAgent(t, bin, tp)
	waitFor(t, "the next agent to take the guard over", func() bool { return strings.Contains(out2.String(), "guard found in force") })
	waitFor(t, "the new interface covered", func() bool { return status(t, bin, tp).ExitCode == 0 })
	send()
	if d, a := len(dropped.Wait(1, arrivalWait)), len(allowed.Wait(5, arrivalWait)); d != 0 || a == 0 {
		t.Errorf("after the next agent: %d datagrams to the dropped port, %d to the accepted one; want 0 and some", d, a)
	}
	nettest.MustExec(t, tp.FwNS, bin, "stop")
	if ents, _ := os.ReadDir(filepath.Join(pins, "xfw")); len(ents) != 0 {
		t.Errorf("xfw stop left the guard pinned: %v", ents)
	}
}
