package nettest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Integration tests: they build topologies and need root (RequireRoot
// fails them otherwise).

const (
	// waitTime bounds every wait for a packet that should arrive.
	waitTime = 3 * time.Second
	// quietTime is how long a test watches for a packet that should not come.
	quietTime = 300 * time.Millisecond
)

// TestMain checks, after all tests, that no namespace of this process is
// left behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := ourNamespaces(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "nettest: namespaces left behind: %v\n", left)
		for _, ns := range left {
			_ = deleteNamespace(ns)
		}
		code = 1
	}
	os.Exit(code)
}

// ourNamespaces lists the namespaces named after this process.
func ourNamespaces() []string {
	entries, _ := os.ReadDir(netnsDir)
	var out []string
	mark := fmt.Sprintf("-%d-", os.Getpid())
	for _, e := range entries {
		if strings.Contains(e.Name(), mark) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestTopologyForwardsUDP(t *testing.T) {
	t.Parallel()
	topo := New(t)
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
	}{
		{"ipv4", topo.Gen.IPv4, topo.Sink.IPv4},
		{"ipv6", topo.Gen.IPv6, topo.Sink.IPv6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(tc.dst, 0))
			payload := []byte("through fw " + tc.name)
			if a := UDPSend(topo.GenNS, srv.Addr, payload); a.Outcome != OK {
				t.Fatalf("UDPSend: %v", a)
			}
			got := srv.Wait(1, waitTime)
			if len(got) != 1 {
				t.Fatalf("sink received %d datagrams, want 1", len(got))
			}
			if got[0].From.Addr() != tc.src || !bytes.Equal(got[0].Payload, payload) {
				t.Fatalf("sink received %q from %s, want %q from %s", got[0].Payload, got[0].From, payload, tc.src)
			}
		})
	}
	// fw forwards, gen and sink do not.
	for ns, want := range map[string]string{topo.FwNS: "1", topo.GenNS: "0", topo.SinkNS: "0"} {
		res := MustExec(t, ns, "cat", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding")
		if got := strings.Fields(res); len(got) != 2 || got[0] != want || got[1] != want {
			t.Errorf("forwarding in %s = %q, want %s", ns, res, want)
		}
	}
}

func TestInjectIPv6ExtensionHeaders(t *testing.T) {
	t.Parallel()
	topo := New(t)
	srv := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv6, 0))
	capture := StartCapture(t, topo.SinkNS, topo.Sink.Ifname, func(c Captured) bool {
		return !c.Outgoing && c.Protocol == ProtoUDP && c.DstPort == srv.Addr.Port()
	})
	payload := []byte("hop-by-hop and destination options")
	pkt := IPv6{
		Src: topo.Gen.IPv6, Dst: topo.Sink.IPv6,
		Ext: []ExtHeader{HopByHop(PadNOption(4)), DestOpts(PadNOption(6))},
	}.Packet(UDP{SrcPort: 4242, DstPort: srv.Addr.Port(), Payload: payload})
	if err := topo.InjectFromGen(topo.GenToFw().Frame(pkt)); err != nil {
		t.Fatal(err)
	}
	got := srv.Wait(1, waitTime)
	if len(got) != 1 || !bytes.Equal(got[0].Payload, payload) ||
		got[0].From != netip.AddrPortFrom(topo.Gen.IPv6, 4242) {
		t.Fatalf("sink received %+v, want %q from [%s]:4242", got, payload, topo.Gen.IPv6)
	}
	frames := capture.Wait(1, waitTime)
	if len(frames) != 1 {
		t.Fatalf("captured %d frames at sink, want 1", len(frames))
	}
	f := frames[0]
	if !bytes.Equal(f.ExtHeaders, []uint8{ProtoHopByHop, ProtoDestOpts}) || f.TTL != defaultTTL-1 ||
		f.SrcMAC.String() != topo.FwOut.MAC.String() || f.DstMAC.String() != topo.Sink.MAC.String() {
		t.Fatalf("captured %s (ttl %d, %s > %s)", f.Packet, f.TTL, f.SrcMAC, f.DstMAC)
	}
}

func TestCloseRemovesNamespaces(t *testing.T) {
	t.Parallel()
	topo := New(t, WithStaticNeighbors())
	names := topo.Namespaces()
	for _, ns := range names {
		if !NamespaceExists(ns) {
			t.Fatalf("namespace %s missing", ns)
		}
	}
	if !strings.HasPrefix(names[0], "xt-") || topo.GenNS != topo.Prefix+"-gen" {
		t.Fatalf("unexpected names %v", names)
	}
	neigh := MustExec(t, topo.GenNS, "ip", "neigh", "show", "dev", topo.Gen.Ifname)
	if !strings.Contains(neigh, topo.FwIn.IPv4.String()) || !strings.Contains(neigh, "PERMANENT") {
		t.Fatalf("static neighbours missing: %q", neigh)
	}
	if err := topo.Close(); err != nil {
		t.Fatal(err)
	}
	if err := topo.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
	list, err := ipCmd("netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range names {
		if NamespaceExists(ns) || strings.Contains(list.Stdout, ns) {
			t.Fatalf("namespace %s still exists after Close", ns)
		}
	}
}

func TestCleanupStale(t *testing.T) {
	t.Parallel()
	// A base of its own, so that no other test's (or process's) New cleans
	// these namespaces first.
	const base = "xtstale"
	live := New(t, WithBase(base))
	// A pid that existed and is gone: a finished child of ours.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("%s-%d-abcdef-gen", base, cmd.Process.Pid)
	if _, err := ipCmd("netns", "add", stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteNamespace(stale) })
	other := "xtother-1-abcdef-gen" // another base: never touched
	if _, err := ipCmd("netns", "add", other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteNamespace(other) })

	removed, err := CleanupStale(base)
	if err != nil {
		t.Fatal(err)
	}
	if !NamespaceExists(other) {
		t.Fatal("CleanupStale removed a namespace of another base")
	}
	for _, ns := range live.Namespaces() {
		if !NamespaceExists(ns) {
			t.Fatalf("CleanupStale removed live namespace %s", ns)
		}
	}
	if NamespaceExists(stale) || len(removed) != 1 || removed[0] != stale {
		t.Fatalf("stale namespace %s not removed (removed %v)", stale, removed)
	}
	if _, err := CleanupStale("../x"); err == nil {
		t.Fatal("CleanupStale accepted an invalid base")
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	topo := New(t)
	out := MustExec(t, topo.FwNS, "ip", "-br", "addr", "show", "dev", topo.FwOut.Ifname)
	if !strings.Contains(out, topo.FwOut.IPv4.String()) || !strings.Contains(out, topo.FwOut.IPv6.String()) {
		t.Fatalf("fw out0 addresses: %q", out)
	}
	res, err := Run(topo.GenNS, "echo out; echo err >&2; exit 3")
	if err == nil || res.ExitCode != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" {
		t.Fatalf("Run: %v, %v", res, err)
	}
	if res, err := ExecTimeout(100*time.Millisecond, topo.GenNS, "sleep", "5"); err == nil || res.ExitCode != -1 {
		t.Fatalf("ExecTimeout: %v, %v", res, err)
	}
	if _, err := Exec("", "true"); err == nil {
		t.Fatal("Exec ran in the current namespace")
	}
	// Nothing but lo and the veth exists in gen, and no default route.
	links := MustExec(t, topo.GenNS, "ip", "-br", "link")
	if n := len(strings.Split(strings.TrimSpace(links), "\n")); n != 2 {
		t.Fatalf("gen has %d links: %q", n, links)
	}
	if routes := MustExec(t, topo.GenNS, "ip", "route", "show", "default"); routes != "" {
		t.Fatalf("gen has a default route: %q", routes)
	}
}

func TestTCP(t *testing.T) {
	t.Parallel()
	topo := New(t)
	for _, dst := range []netip.Addr{topo.Sink.IPv4, topo.Sink.IPv6} {
		srv := StartTCPServer(t, topo.SinkNS, netip.AddrPortFrom(dst, 0), Echo())
		a := TCPConnect(topo.GenNS, srv.Addr, WithPayload([]byte("echo me")))
		if a.Outcome != OK || string(a.Reply) != "echo me" {
			t.Fatalf("TCPConnect to %s: %v reply %q", srv.Addr, a, a.Reply)
		}
		conns := srv.WaitFinished(1, waitTime)
		if len(conns) != 1 || conns[0].From != a.Local || string(conns[0].Data) != "echo me" {
			t.Fatalf("server saw %+v, want one from %s", conns, a.Local)
		}
		closed := netip.AddrPortFrom(dst, 9) // nothing listens on the discard port
		if a := TCPConnect(topo.GenNS, closed); a.Outcome != Refused {
			t.Fatalf("TCPConnect to closed %s: %v", closed, a)
		}
	}
	// A raw SYN from gen is answered by a SYN-ACK from sink, through fw.
	srv := StartTCPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 0))
	const sport = 40000
	capture := StartCapture(t, topo.GenNS, topo.Gen.Ifname, func(c Captured) bool {
		return !c.Outgoing && c.Protocol == ProtoTCP && c.DstPort == sport
	})
	syn := TCPPacket(netip.AddrPortFrom(topo.Gen.IPv4, sport), srv.Addr, TCPSyn, 1000, nil)
	if err := topo.InjectFromGen(topo.GenToFw().Frame(syn)); err != nil {
		t.Fatal(err)
	}
	got, ok := capture.WaitFor(func(c Captured) bool { return c.TCPFlags == TCPSyn|TCPAck }, waitTime)
	if !ok || got.Ack != 1001 {
		t.Fatalf("no SYN-ACK for the raw SYN; captured %v", capture.Frames())
	}
}

func TestUDPRefusedAndICMPCapture(t *testing.T) {
	t.Parallel()
	topo := New(t)
	capture := StartCapture(t, topo.GenNS, topo.Gen.Ifname, func(c Captured) bool {
		return !c.Outgoing && c.IsICMPUnreachable()
	})
	for _, dst := range []netip.Addr{topo.Sink.IPv4, topo.Sink.IPv6} {
		closed := netip.AddrPortFrom(dst, 9)
		a := UDPSend(topo.GenNS, closed, []byte("anyone?"), ExpectReply())
		if a.Outcome != Refused {
			t.Fatalf("UDPSend to closed %s: %v", closed, a)
		}
		icmp, ok := capture.WaitFor(func(c Captured) bool { return c.Src == dst }, waitTime)
		if !ok {
			t.Fatalf("no ICMP unreachable from %s captured at gen", dst)
		}
		wantCode := uint8(3) // IPv4 port unreachable
		if dst.Is6() {
			wantCode = 4 // ICMPv6 port unreachable
		}
		if icmp.ICMPCode != wantCode || icmp.Inner == nil || icmp.Inner.DstPort != 9 || icmp.Inner.SrcPort != a.Local.Port() {
			t.Fatalf("ICMP error %s, want code %d quoting port 9 from %s", icmp.Packet, wantCode, a.Local)
		}
	}
	// Echo server: ExpectReply gets the reply.
	srv := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 0), Echo())
	if a := UDPSend(topo.GenNS, srv.Addr, []byte("ping"), ExpectReply()); a.Outcome != OK || string(a.Reply) != "ping" {
		t.Fatalf("UDPSend to echo server: %v reply %q", a, a.Reply)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	topo := New(t)
	for _, dst := range []netip.Addr{topo.Sink.IPv4, topo.Sink.IPv6, topo.FwIn.IPv4, topo.FwOut.IPv6} {
		if a := Ping(topo.GenNS, dst); a.Outcome != OK || a.From != dst {
			t.Fatalf("Ping %s: %v", dst, a)
		}
	}
	// Nothing routes 192.0.2.0/24 (TEST-NET-1) out of gen: the kernel says so.
	if a := Ping(topo.GenNS, netip.MustParseAddr("192.0.2.1")); a.Outcome != Unreachable {
		t.Fatalf("Ping without a route: %v", a)
	}
	// fw has no route either: it answers with ICMP net unreachable.
	Exec(topo.GenNS, "ip", "route", "add", "192.0.2.0/24", "via", topo.FwIn.IPv4.String())
	a := Ping(topo.GenNS, netip.MustParseAddr("192.0.2.1"))
	if a.Outcome != Unreachable || a.ICMPType != ICMPv4DestUnreachable || a.From != topo.FwIn.IPv4 {
		t.Fatalf("Ping through fw without a route: %v", a)
	}
}

// TestEchoIDsDistinct: Ping's default echo identifiers do not repeat
// within 32,768 pings and stay clear of the fixed ones below 0x8000.
func TestEchoIDsDistinct(t *testing.T) {
	seen := map[uint16]bool{}
	for i := 0; i < 0x8000; i++ {
		id, err := nextEchoID()
		if err != nil {
			t.Fatal(err)
		}
		if id < 0x8000 || seen[id] {
			t.Fatalf("ping %d: echo identifier %#x (below 0x8000 or repeated)", i, id)
		}
		seen[id] = true
	}
}

func TestOutputDropIsNotPermitted(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("iptables not installed (run scripts/deps.sh): %v", err)
	}
	topo := New(t)
	// Rules go into gen, a namespace of this test, never the host's.
	MustExec(t, topo.GenNS, "iptables", "-A", "OUTPUT", "-p", "udp", "-j", "DROP")
	MustExec(t, topo.GenNS, "iptables", "-A", "OUTPUT", "-p", "icmp", "-j", "DROP")
	MustExec(t, topo.GenNS, "iptables", "-A", "OUTPUT", "-p", "tcp", "--syn", "-j", "DROP")
	srv := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 0))
	if a := UDPSend(topo.GenNS, srv.Addr, []byte("x")); a.Outcome != NotPermitted {
		t.Fatalf("UDPSend through OUTPUT DROP: %v", a)
	}
	if a := Ping(topo.GenNS, topo.Sink.IPv4); a.Outcome != NotPermitted {
		t.Fatalf("Ping through OUTPUT DROP: %v", a)
	}
	tcp := StartTCPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 0))
	a := TCPConnect(topo.GenNS, tcp.Addr, WithTimeout(500*time.Millisecond))
	if a.Outcome != NotPermitted && a.Outcome != TimedOut {
		t.Fatalf("TCPConnect through OUTPUT DROP: %v", a)
	}
	t.Logf("TCP connect through an OUTPUT DROP of SYNs: %v", a)
	if got := srv.Wait(1, quietTime); len(got) != 0 {
		t.Fatalf("sink received %d datagrams despite the drop", len(got))
	}
}

func TestInjectFragments(t *testing.T) {
	t.Parallel()
	topo := New(t)
	payload := bytes.Repeat([]byte("fragment"), 400) // 3200 bytes > MTU
	for _, tc := range []struct {
		src, dst netip.Addr
	}{{topo.Gen.IPv4, topo.Sink.IPv4}, {topo.Gen.IPv6, topo.Sink.IPv6}} {
		srv := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(tc.dst, 0))
		var frags [][]byte
		var err error
		if tc.src.Is4() {
			pkt := IPv4{Src: tc.src, Dst: tc.dst, ID: 0x4242}.Packet(UDP{SrcPort: 7, DstPort: srv.Addr.Port(), Payload: payload})
			frags, err = FragmentIPv4(pkt, 1200)
		} else {
			pkt := IPv6{Src: tc.src, Dst: tc.dst}.Packet(UDP{SrcPort: 7, DstPort: srv.Addr.Port(), Payload: payload})
			frags, err = FragmentIPv6(pkt, 1200, 0x4242)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Send them in reverse order: reassembly must not care.
		var frames [][]byte
		for i := len(frags) - 1; i >= 0; i-- {
			frames = append(frames, topo.GenToFw().Frame(frags[i]))
		}
		if err := topo.InjectFromGen(frames...); err != nil {
			t.Fatal(err)
		}
		got := srv.Wait(1, waitTime)
		if len(got) != 1 || !bytes.Equal(got[0].Payload, payload) {
			t.Fatalf("%s: sink received %d datagrams, want the reassembled one", tc.dst, len(got))
		}
	}
}

func TestCaptureRestoresVLANTag(t *testing.T) {
	t.Parallel()
	topo := New(t)
	capture := StartCapture(t, topo.FwNS, topo.FwIn.Ifname, func(c Captured) bool {
		return !c.Outgoing && len(c.VLANs) > 0
	})
	eth := topo.GenToFw().WithVLAN(VLANTag{ID: 42, PCP: 5})
	frame := eth.Frame(UDPPacket(netip.AddrPortFrom(topo.Gen.IPv4, 1), netip.AddrPortFrom(topo.Sink.IPv4, 2), []byte("tagged")))
	if err := topo.InjectFromGen(frame); err != nil {
		t.Fatal(err)
	}
	got := capture.Wait(1, waitTime)
	if len(got) != 1 {
		t.Fatalf("captured %d tagged frames, want 1", len(got))
	}
	if v := got[0].VLANs[0]; v.ID != 42 || v.PCP != 5 || v.TPID != EtherTypeVLAN || !bytes.Equal(got[0].Raw, frame) {
		t.Fatalf("captured %s with tag %+v; raw equal %v", got[0].Packet, v, bytes.Equal(got[0].Raw, frame))
	}
	if err := capture.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestInNamespace(t *testing.T) {
	t.Parallel()
	topo := New(t)
	var hostname string
	err := InNamespace(topo.FwNS, func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
		hostname = strings.TrimSpace(string(b))
		return err
	})
	if err != nil || hostname != "1" {
		t.Fatalf("ip_forward read in fw: %q, %v", hostname, err)
	}
	err = InNamespace(topo.FwNS, func() error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic not reported: %v", err)
	}
	if err := InNamespace(topo.Prefix+"-nonexistent", func() error { return nil }); err == nil {
		t.Fatal("InNamespace succeeded for a missing namespace")
	}
}

// TestNoGoroutineLeak runs a scenario with every helper, lets its cleanups
// run, and checks that the goroutine count comes back.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("scenario", func(t *testing.T) {
		topo := New(t)
		udp := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 0), Echo())
		tcp := StartTCPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 0), Echo())
		capture := StartCapture(t, topo.SinkNS, topo.Sink.Ifname, nil)
		UDPSend(topo.GenNS, udp.Addr, []byte("x"), ExpectReply())
		TCPConnect(topo.GenNS, tcp.Addr, WithPayload([]byte("y")))
		Ping(topo.GenNS, topo.Sink.IPv6)
		capture.Wait(1, waitTime)
	})
	deadline := time.Now().Add(waitTime)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(pollInterval)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before, %d after", before, after)
	}
}

// helperBase is the namespace base of the helper process, so that only
// TestPanicAndCrashCleanup cleans its leftovers.
const helperBase = "xtcrash"

// helperEnv selects what TestHelperProcess does when this test binary is
// re-run by TestPanicAndCrashCleanup.
const helperEnv = "NETTEST_HELPER"

// TestHelperProcess is not a test on its own: run by
// TestPanicAndCrashCleanup with helperEnv set, it builds a topology, prints
// its namespaces and then panics or exits without cleaning up.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return // a normal run: nothing to do
	}
	topo := New(t, WithBase(helperBase))
	fmt.Printf("NAMESPACES %s\n", strings.Join(topo.Namespaces(), " "))
	switch mode {
	case "panic":
		panic("helper panics with a live topology")
	case "exit":
		os.Exit(3) // like a crash: no cleanup runs
	}
}

// runHelper re-runs this test binary's TestHelperProcess in mode and returns
// the namespaces it created.
func runHelper(t *testing.T, mode string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("helper in mode %s succeeded; output:\n%s", mode, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "NAMESPACES "); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("helper in mode %s printed no namespaces; output:\n%s", mode, out)
	return nil
}

// TestPanicAndCrashCleanup checks that a panicking test still removes its
// namespaces, and that those of a process that died without cleanup are
// removed by CleanupStale.
func TestPanicAndCrashCleanup(t *testing.T) {
	t.Parallel()
	RequireRoot(t)
	for _, ns := range runHelper(t, "panic") {
		if NamespaceExists(ns) {
			_ = deleteNamespace(ns)
			t.Fatalf("namespace %s survived a panicking test", ns)
		}
	}
	crashed := runHelper(t, "exit")
	t.Cleanup(func() {
		for _, ns := range crashed {
			_ = deleteNamespace(ns)
		}
	})
	for _, ns := range crashed {
		if !NamespaceExists(ns) {
			t.Fatalf("namespace %s of the crashed helper is already gone", ns)
		}
	}
	removed, err := CleanupStale(helperBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range crashed {
		if NamespaceExists(ns) {
			t.Fatalf("CleanupStale left %s of a dead process (removed %v)", ns, removed)
		}
	}
}

// TestBuildRollsBack checks that a topology that fails half-way leaves no
// namespace behind, including when the failure is a panic.
func TestBuildRollsBack(t *testing.T) {
	RequireRoot(t) // not parallel: it sets a package-level hook
	var created []string
	testHookAfterNamespaces = func(topo *Topology) error {
		created = topo.Namespaces()
		for _, ns := range created {
			if !NamespaceExists(ns) {
				return fmt.Errorf("namespace %s missing in the hook", ns)
			}
		}
		return errors.New("injected failure")
	}
	defer func() { testHookAfterNamespaces = nil }()
	if _, err := build(config{base: defaultBase}); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("build: %v, want the injected failure", err)
	}
	for _, ns := range created {
		if NamespaceExists(ns) {
			t.Fatalf("namespace %s left after a failed build", ns)
		}
	}

	testHookAfterNamespaces = func(topo *Topology) error {
		created = topo.Namespaces()
		panic("injected panic")
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("build did not panic")
			}
		}()
		_, _ = build(config{base: defaultBase})
	}()
	for _, ns := range created {
		if NamespaceExists(ns) {
			t.Fatalf("namespace %s left after a panicking build", ns)
		}
	}
}

// TestNoListenerReportsAfterBuild checks that a built topology has sent its
// multicast listener reports: none crosses a veth link in the 1.5 s after
// New returns (the default unsolicited report interval, 1 s, let the
// repetitions of gen's and sink's reports reach fw's PREROUTING up to a
// second into a test).
func TestNoListenerReportsAfterBuild(t *testing.T) {
	const watch = 1500 * time.Millisecond
	for round := 0; round < 3; round++ {
		topo := New(t)
		mld := func(c Captured) bool { return c.Dst == netip.MustParseAddr("ff02::16") }
		start := time.Now()
		caps := []*Capture{
			StartCapture(t, topo.FwNS, FwInIfname, mld),
			StartCapture(t, topo.FwNS, FwOutIfname, mld),
		}
		time.Sleep(watch)
		for _, c := range caps {
			for _, f := range c.Stop() {
				t.Errorf("round %d: %s %s: listener report from %s %v after the topology was built",
					round, c.NS, c.Ifname, f.Src, f.Time.Sub(start))
			}
		}
	}
}

// TestDrain checks the barrier: once Drain returns, every frame injected at
// gen before it has been forwarded by fw (sink's interface counted it).
func TestDrain(t *testing.T) {
	topo := New(t, WithStaticNeighbors())
	const n = 300
	rx := func() uint64 {
		res, err := ipCmd("-n", topo.SinkNS, "-s", "-j", "link", "show", SinkIfname)
		if err != nil {
			t.Fatal(err)
		}
		var links []struct {
			Stats64 struct {
				Rx struct{ Packets uint64 } `json:"rx"`
			} `json:"stats64"`
		}
		if err := json.Unmarshal([]byte(res.Stdout), &links); err != nil || len(links) != 1 {
			t.Fatalf("ip -s -j link: %v %q", err, res.Stdout)
		}
		return links[0].Stats64.Rx.Packets
	}
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = topo.GenToFw().Frame(UDPPacket(netip.AddrPortFrom(topo.Gen.IPv4, uint16(20000+i)), netip.AddrPortFrom(topo.Sink.IPv4, 7777), []byte("probe")))
	}
	before := rx()
	if err := topo.InjectFromGen(frames...); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := topo.Drain(); err != nil {
		t.Fatal(err)
	}
	t.Logf("drained in %v", time.Since(start))
	if got := rx() - before; got < n {
		t.Errorf("sink received %d frames when Drain returned, want the %d forwarded", got, n)
	}
}

// TestStopQueued checks that a capture stopped with StopQueued after Drain
// has every frame fw forwarded before: none is left on the socket. (n
// frames fit in the socket's default buffer.)
func TestStopQueued(t *testing.T) {
	topo := New(t, WithStaticNeighbors())
	const n = 64
	const dport = 7778
	capt := StartCapture(t, topo.SinkNS, topo.Sink.Ifname, func(c Captured) bool {
		return !c.Outgoing && c.Protocol == ProtoUDP && c.DstPort == dport
	})
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = topo.GenToFw().Frame(UDPPacket(netip.AddrPortFrom(topo.Gen.IPv4, uint16(20000+i)), netip.AddrPortFrom(topo.Sink.IPv4, dport), []byte("probe")))
	}
	if err := topo.InjectFromGen(frames...); err != nil {
		t.Fatal(err)
	}
	if err := topo.Drain(); err != nil {
		t.Fatal(err)
	}
	dropped, err := capt.Dropped()
	if err != nil || dropped != 0 {
		t.Fatalf("the capture dropped %d frames (%v)", dropped, err)
	}
	if got := len(capt.StopQueued()); got != n {
		t.Errorf("StopQueued after Drain recorded %d frames, want the %d forwarded", got, n)
	}
	if err := capt.Err(); err != nil {
		t.Errorf("capture: %v", err)
	}
	if got := len(capt.Stop()); got != n {
		t.Errorf("Stop after StopQueued: %d frames, want %d", got, n)
	}
}

// TestUDPServerSync checks that after Drain and Sync a server has every
// datagram fw forwarded to it, and that Sync's markers are not recorded.
func TestUDPServerSync(t *testing.T) {
	topo := New(t, WithStaticNeighbors())
	const n = 20
	srv := StartUDPServer(t, topo.SinkNS, netip.AddrPortFrom(topo.Sink.IPv4, 7779))
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = topo.GenToFw().Frame(UDPPacket(netip.AddrPortFrom(topo.Gen.IPv4, uint16(21000+i)), srv.Addr, []byte("probe")))
	}
	if err := topo.InjectFromGen(frames...); err != nil {
		t.Fatal(err)
	}
	if err := topo.Drain(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Sync(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	got := srv.Received()
	if len(got) != n {
		t.Errorf("after Drain and Sync the server has %d datagrams, want the %d forwarded", len(got), n)
	}
	for _, d := range got {
		if string(d.Payload) != "probe" {
			t.Errorf("recorded %q from %s, not a probe", d.Payload, d.From)
		}
	}
}
