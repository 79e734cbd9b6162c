package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// takeoverRules drops FORWARD by policy: a connection's packets pass only
// as ESTABLISHED (its SYN as NEW), UDP to 7300 only from a member of set
// tkallow, to 7400 recorded in recent list tkrecent, to 7500 within a
// hashlimit burst of 2 an hour, UDP to 7100 is dropped by a rule of its
// own (whose counter counts every datagram sent there).
const takeoverRules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
	"-A FORWARD -p tcp -m tcp --dport 7200 --tcp-flags FIN,SYN,RST,ACK SYN -m conntrack --ctstate NEW -j ACCEPT\n" +
	"-A FORWARD -p udp -m set --match-set tkallow src -m udp --dport 7300 -j ACCEPT\n" +
	"-A FORWARD -p udp -m udp --dport 7400 -m recent --set --name tkrecent --mask 255.255.255.255 --rsource -j ACCEPT\n" +
	"-A FORWARD -p udp -m udp --dport 7500 -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-name tkhl -j ACCEPT\n" +
	"-A FORWARD -p udp -m udp --dport 7100 -j DROP\nCOMMIT\n"

// takeoverRules6 is the IPv6 ruleset beside takeoverRules: its counters
// must come through the takeover unchanged (no IPv6 traffic meanwhile).
const takeoverRules6 = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A FORWARD -p udp -m udp --dport 7100 -j DROP\nCOMMIT\n"

// dataplanePkg is the package whose test-only variables buildVariant sets.
const dataplanePkg = "github.com/xfw-dev/xfw/internal/dataplane"

// buildVariant builds xfw with the dataplane package's test-only variables
// vars set (-ldflags -X): a second build whose identity (and, as asked,
// handover format or connection layout) differs from bin/xfw's and whose
// behaviour does not. It needs the BPF objects `make build` made.
func buildVariant(t *testing.T, vars map[string]string) string {
	t.Helper()
	xfwPath(t) // make build ran
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out := filepath.Join(t.TempDir(), "xfw")
	var flags []string
	for k, v := range vars {
		flags = append(flags, "-X "+dataplanePkg+"."+k+"="+v)
	}
	cmd := exec.Command("go", "build", "-ldflags", strings.Join(flags, " "), "-o", out, "./cmd/xfw")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the variant %v: %v\n%s", vars, err, b)
	}
	return out
}

// takeoverSetup makes a topology in which the old binary runs
// takeoverRules, the set holding gen's address, with no mid-stream pickup
// of TCP connections (a connection the tables lose is then dropped).
func takeoverSetup(t *testing.T, old string) *nettest.Topology {
	t.Helper()
	requireTools(t, "sysctl")
	tp := nettest.New(t)
	nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0")
	nettest.MustExec(t, tp.FwNS, old, "ipset", "create", "tkallow", "hash:ip")
	nettest.MustExec(t, tp.FwNS, old, "ipset", "add", "tkallow", tp.Gen.IPv4.String())
	firewall{kind: "xfw", bin: old}.restore(t, tp, 4, takeoverRules)
	return tp
}

// takeoverScene builds the old binary of vars, sets the topology up with
// it (takeoverSetup) and opens a connection through it, checked by an
// echo; it returns them with bin/xfw, the new build.
func takeoverScene(t *testing.T, vars map[string]string) (old, bin string, tp *nettest.Topology, conn *echoConn) {
	t.Helper()
	old = buildVariant(t, vars)
	tp = takeoverSetup(t, old)
	conn = openEcho(t, tp)
	if got, err := conn.roundTrip("before", 5*time.Second); err != nil || got != "before" {
		t.Fatalf("echo before the takeover: %q, %v", got, err)
	}
	return old, xfwPath(t), tp, conn
}

// echoConn is an open TCP connection from gen to sink's echo server.
type echoConn struct {
	c *net.TCPConn
	r *bufio.Reader
}

// openEcho listens on sink's port 7200, echoing lines, and connects to it
// from gen.
func openEcho(t *testing.T, tp *nettest.Topology) *echoConn {
	t.Helper()
	return openEchoVia(t, tp, netip.AddrPortFrom(tp.Sink.IPv4, 7200))
}

// openEchoVia listens on sink's port 7200, echoing lines, and connects
// from gen to dst (the listener itself, or an address fw translates to
// it).
func openEchoVia(t *testing.T, tp *nettest.Topology, dst netip.AddrPort) *echoConn {
	t.Helper()
	ln := listenTCP(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7200))
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	}()
	c, err := dialTCP(tp.GenNS, dst, 5*time.Second)
	if err != nil {
		t.Fatalf("connect to sink: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return &echoConn{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends a line and returns the echo, or an error text when none
// came within wait (the connection's packets were dropped).
func (e *echoConn) roundTrip(line string, wait time.Duration) (string, error) {
	_ = e.c.SetDeadline(time.Now().Add(wait))
	if _, err := e.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := e.r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// udpFlood sends datagrams from gen to dst until stopped and counts those
// the socket sent.
type udpFlood struct {
	sent atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startFlood(t *testing.T, ns string, dst netip.AddrPort) *udpFlood {
	t.Helper()
	var conn *net.UDPConn
	if err := nettest.InNamespace(ns, func() (err error) {
		conn, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f := &udpFlood{stop: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer conn.Close()
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			if _, err := conn.Write([]byte("flood")); err == nil {
				f.sent.Add(1)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	return f
}

// halt stops the flood and returns how many datagrams it sent.
func (f *udpFlood) halt() int64 {
	close(f.stop)
	f.wg.Wait()
	return f.sent.Load()
}

// txDropped returns the packets interface ifname of namespace ns dropped
// on transmit (a veth: those its peer's XDP ring had no room for).
func txDropped(t *testing.T, ns, ifname string) uint64 {
	t.Helper()
	var links []struct {
		Stats64 struct {
			TX struct {
				Dropped uint64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	out := nettest.MustExec(t, ns, "ip", "-j", "-s", "link", "show", "dev", ifname)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j -s link show dev %s: %v\n%s", ifname, err, out)
	}
	return links[0].Stats64.TX.Dropped
}

// attachments lists, per interface of namespace ns, the ids of the XDP
// program and of the TCX ingress and egress programs attached.
func attachments(t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	err := nettest.InNamespace(ns, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			fmt.Fprintf(&b, "%s xdp", l.Attrs().Name)
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				fmt.Fprintf(&b, " %d", x.ProgId)
			}
			for _, hook := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: hook})
				if err != nil {
					return err
				}
				fmt.Fprintf(&b, " %v", hook)
				for _, p := range res.Programs {
					fmt.Fprintf(&b, " %d", p.ID)
				}
			}
			b.WriteString("\n")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list the attachments in %s: %v", ns, err)
	}
	return b.String()
}

// xdpProgID returns the id of the XDP program on fw's interface facing gen.
func xdpProgID(t *testing.T, tp *nettest.Topology) string {
	t.Helper()
	out := nettest.MustExec(t, tp.FwNS, "ip", "-d", "link", "show", tp.FwIn.Ifname)
	m := regexp.MustCompile(`prog/xdp id (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no XDP program on %s:\n%s", tp.FwIn.Ifname, out)
	}
	return m[1]
}

// TestTakeoverKeepsFilteringAndConnections loads a DROP-policy ruleset
// with an "old" build (another build identity), opens a TCP connection
// through it and floods a port it drops, and takes over with bin/xfw under
// that traffic: no flooded datagram arrives, the connection goes on, the
// rules, sets and counters are the old build's (the DROP rule's counter
// counts every datagram sent, whichever build judged it), and the old
// build is gone.
func TestTakeoverKeepsFilteringAndConnections(t *testing.T) {
	old, bin, tp, conn := takeoverScene(t, map[string]string{"buildIdentitySalt": "old"})
	if res := execAny(t, tp.FwNS, bin, "iptables", "-w", lockWait, "-S"); res.ExitCode != 1 || !strings.Contains(res.Stderr, "xfw takeover") {
		t.Fatalf("the new build before the takeover: exit %d, %s (want 1, naming xfw takeover)", res.ExitCode, res.Stderr)
	}
	if got := forwardedTo(t, tp, 7400, 1); got != 1 {
		t.Fatalf("%d of 1 datagram to the recent rule's port arrived", got)
	}
	if got := forwardedTo(t, tp, 7500, 2); got != 2 {
		t.Fatalf("%d of 2 datagrams within the hashlimit burst arrived", got)
	}
	firewall{kind: "xfw", bin: old}.restore(t, tp, 6, takeoverRules6)
	for i := 0; i < 3; i++ {
		nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv6, 7100), []byte("six"))
	}
	before6 := nettest.MustExec(t, tp.FwNS, old, "ip6tables-save", "-c")
	if !strings.Contains(before6, "[3:") {
		t.Fatalf("the IPv6 DROP rule did not count the datagrams:\n%s", before6)
	}
	before := nettest.MustExec(t, tp.FwNS, old, "iptables-save", "-c")
	beforePlain := nettest.MustExec(t, tp.FwNS, old, "iptables-save")
	oldXDP := xdpProgID(t, tp)

	lostBefore := txDropped(t, tp.GenNS, tp.Gen.Ifname)
	res, sent := takeoverUnderFlood(t, bin, tp)
	// A datagram gen's veth could not hand to fw (its XDP ring full, on
	// a busy machine) never reached the ruleset.
	reached := uint64(sent) - (txDropped(t, tp.GenNS, tp.Gen.Ifname) - lostBefore)
	if reached != uint64(sent) {
		t.Logf("%d of the %d datagrams sent did not reach fw (gen's veth dropped them)", uint64(sent)-reached, sent)
	}
	if !strings.Contains(res.Stderr, "connections and NAT mappings kept") {
		t.Errorf("the takeover did not keep the connections:\n%s", res.Stderr)
	}
	if got, err := conn.roundTrip("after", 5*time.Second); err != nil || got != "after" {
		t.Errorf("the open connection after the takeover: %q, %v", got, err)
	}
	if xdpProgID(t, tp) == oldXDP {
		t.Errorf("the old XDP program %s still runs", oldXDP)
	}
	if res := execAny(t, tp.FwNS, old, "iptables", "-w", lockWait, "-S"); res.ExitCode != 1 {
		t.Errorf("the old build still finds its own programs: exit %d", res.ExitCode)
	}

	after := nettest.MustExec(t, tp.FwNS, bin, "iptables-save", "-c")
	if got := nettest.MustExec(t, tp.FwNS, bin, "iptables-save"); stripComments(got) != stripComments(beforePlain) {
		t.Errorf("iptables-save differs across the takeover:\nbefore:\n%s\nafter:\n%s", beforePlain, got)
	}
	// fw's own neighbour discovery goes on meanwhile: the policies'
	// counters may grow, the DROP rule's (no IPv6 datagram since) not.
	after6 := nettest.MustExec(t, tp.FwNS, bin, "ip6tables-save", "-c")
	strip := regexp.MustCompile(`\[\d+:\d+\]`)
	if strip.ReplaceAllString(stripComments(after6), "") != strip.ReplaceAllString(stripComments(before6), "") {
		t.Errorf("ip6tables-save differs across the takeover:\nbefore:\n%s\nafter:\n%s", before6, after6)
	}
	b6, a6 := counters(t, before6), counters(t, after6)
	for key, c := range b6 {
		if a := a6[key]; a.packets < c.packets || a.bytes < c.bytes || (!strings.HasPrefix(key, ":") && a != c) {
			t.Errorf("IPv6 counter of %q: %v before, %v after", key, c, a)
		}
	}
	b, a := counters(t, before), counters(t, after)
	drop := "FORWARD -p udp -m udp --dport 7100 -j DROP"
	if a[drop].packets != b[drop].packets+reached {
		t.Errorf("the DROP rule counted %d datagrams across the takeover, %d reached fw (%d sent; before %d, after %d)", a[drop].packets-b[drop].packets, reached, sent, b[drop].packets, a[drop].packets)
	}
	for rule, c := range b {
		if a[rule].packets < c.packets || a[rule].bytes < c.bytes {
			t.Errorf("counter of %q went back: %v before, %v after", rule, c, a[rule])
		}
	}
	allowed := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7300))
	defer allowed.Close()
	nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 7300), []byte("member"))
	if len(allowed.Wait(1, arrivalWait)) != 1 {
		t.Errorf("a datagram from the set's member did not pass after the takeover")
	}
	if list := nettest.MustExec(t, tp.FwNS, bin, "ipset", "list", "tkallow"); !strings.Contains(list, tp.Gen.IPv4.String()) {
		t.Errorf("set tkallow after the takeover:\n%s", list)
	}
	if !strings.Contains(res.Stderr, "hashlimit tables and recent lists kept") {
		t.Errorf("the takeover did not keep the hashlimit tables and recent lists:\n%s", res.Stderr)
	}
	if list := nettest.MustExec(t, tp.FwNS, bin, "recent", "tkrecent"); !strings.Contains(list, "src="+tp.Gen.IPv4.String()+" ") {
		t.Errorf("recent list tkrecent after the takeover:\n%s", list)
	}
	if got := forwardedTo(t, tp, 7500, 1); got != 0 {
		t.Errorf("a datagram past the hashlimit burst arrived after the takeover: the bucket started afresh")
	}
	if res := execAny(t, tp.FwNS, bin, "takeover"); res.ExitCode != 0 || res.Stderr != "" {
		t.Errorf("a second takeover (nothing to take over): exit %d, %s", res.ExitCode, res.Stderr)
	}
}

// TestTakeoverRefusesUnreadableFormat: an old build that records a
// handover format the new build does not read is refused (exit 1, the
// format named), and its programs go on filtering, untouched.
func TestTakeoverRefusesUnreadableFormat(t *testing.T) {
	old, bin, tp, conn := takeoverScene(t, map[string]string{"buildIdentitySalt": "old", "handoverFormatOverride": "99"})
	oldXDP := xdpProgID(t, tp)
	before := attachments(t, tp.FwNS)

	res := execAny(t, tp.FwNS, bin, "takeover")
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "handover format 99") {
		t.Fatalf("xfw takeover of an unreadable format: exit %d, %s (want 1, naming format 99)", res.ExitCode, res.Stderr)
	}
	if got := xdpProgID(t, tp); got != oldXDP {
		t.Errorf("XDP program %s replaced by %s", oldXDP, got)
	}
	checkOldInCharge(t, tp, old, conn, before)
}

// checkOldInCharge checks, after a takeover that failed, that the old
// build runs as before: the attachments (their program ids) are those of
// before, the dropped port is dropped, the connection alive, the old
// build's commands find their state.
func checkOldInCharge(t *testing.T, tp *nettest.Topology, old string, conn *echoConn, before string) {
	t.Helper()
	if after := attachments(t, tp.FwNS); after != before {
		t.Errorf("attachments changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := forwardedTo(t, tp, 7100, 5); got != 0 {
		t.Errorf("%d of 5 datagrams to the dropped port arrived after the failed takeover", got)
	}
	if got, err := conn.roundTrip("still", 5*time.Second); err != nil || got != "still" {
		t.Errorf("the open connection after the failed takeover: %q, %v", got, err)
	}
	if res := execAny(t, tp.FwNS, old, "iptables-save"); res.ExitCode != 0 {
		t.Errorf("the old build lost its state: exit %d, %s", res.ExitCode, res.Stderr)
	}
}

// TestTakeoverLosesConnectionsOfAnotherLayout: when the old build's
// connection tables are laid out otherwise (another fingerprint), the
// takeover says how many tracked connections it leaves behind, and an
// open connection is then cut by the DROP policy, as the log says.
func TestTakeoverLosesConnectionsOfAnotherLayout(t *testing.T) {
	_, bin, tp, conn := takeoverScene(t, map[string]string{"buildIdentitySalt": "old", "connLayoutSalt": "other"})
	res := execAny(t, tp.FwNS, bin, "takeover")
	if res.ExitCode != 0 || !regexp.MustCompile(`: [1-9]\d* tracked connections .* are lost`).MatchString(res.Stderr) {
		t.Fatalf("xfw takeover: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	if got, err := conn.roundTrip("after", 2*time.Second); err == nil {
		t.Errorf("the connection went on (%q) though its tracking was lost", got)
	}
	if got := forwardedTo(t, tp, 7100, 5); got != 0 {
		t.Errorf("%d of 5 datagrams to the dropped port arrived", got)
	}
}

// forwardedTo sends n datagrams from gen to sink's port and returns how
// many arrived.
func forwardedTo(t *testing.T, tp *nettest.Topology, port uint16, n int) int {
	t.Helper()
	dst := netip.AddrPortFrom(tp.Sink.IPv4, port)
	srv := nettest.StartUDPServer(t, tp.SinkNS, dst)
	defer srv.Close()
	for i := 0; i < n; i++ {
		nettest.UDPSend(tp.GenNS, dst, []byte("x"))
	}
	return len(srv.Wait(n, arrivalWait))
}

// TestTakeoverKeepsGuard: with the old build's agent keeping the guard,
// pinned in a bpffs or held by the agent alone, the takeover moves the
// guard's admissions to the new XDP programs: the open connection and the
// set member's datagrams still pass (the guard would drop them, arriving
// by a program it does not know), the dropped port stays dropped. A
// pinned guard outlives the old agent's death and the new build's agent
// takes it over.
func TestTakeoverKeepsGuard(t *testing.T) {
	for _, pinned := range []bool{true, false} {
		t.Run(map[bool]string{true: "pinned", false: "held by the agent"}[pinned], func(t *testing.T) {
			if pinned {
				t.Setenv("XFW_BPFFS", mountBPFFS(t))
			} else {
				t.Setenv("XFW_BPFFS", t.TempDir()) // no bpffs: nothing is pinned
			}
			old, bin, tp, conn := takeoverScene(t, map[string]string{"buildIdentitySalt": "old"})
			agent, out := startAgent(t, old, tp)
			waitFor(t, "the guard", func() bool { return strings.Contains(out.String(), "guard started") })
			takeoverUnderFlood(t, bin, tp)
			if got, err := conn.roundTrip("after", 5*time.Second); err != nil || got != "after" {
				t.Errorf("the open connection after the takeover, through the guard: %q, %v", got, err)
			}
			if got := forwardedTo(t, tp, 7300, 3); got != 3 {
				t.Errorf("%d of 3 datagrams from the set's member passed the guard after the takeover", got)
			}
			if !pinned {
				return
			}
			// The package's postinst restarts the agent; one that dies
			// leaves the guard pinned, and the new build's takes it over.
			if err := agent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			agent.Wait()
			_, out2 := startAgent(t, bin, tp)
			waitFor(t, "the new agent to take the guard over", func() bool { return strings.Contains(out2.String(), "guard found in force") })
			waitFor(t, "every interface covered", func() bool { return status(t, bin, tp).ExitCode == 0 })
			if got, err := conn.roundTrip("agent", 5*time.Second); err != nil || got != "agent" {
				t.Errorf("the open connection under the new agent: %q, %v", got, err)
			}
			if got := forwardedTo(t, tp, 7100, 3); got != 0 {
				t.Errorf("%d of 3 datagrams to the dropped port arrived under the new agent", got)
			}
		})
	}
}

// takeoverUnderFlood takes over with bin while gen floods sink's dropped
// port 7100, fails the test if one datagram arrives, and returns the
// takeover's result and how many datagrams were sent.
func takeoverUnderFlood(t *testing.T, bin string, tp *nettest.Topology) (*nettest.Result, int64) {
	t.Helper()
	sink := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, 7100))
	defer sink.Close()
	flood := startFlood(t, tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, 7100))
	time.Sleep(50 * time.Millisecond) // traffic before, during and after the swap
	res := execAny(t, tp.FwNS, bin, "takeover")
	time.Sleep(50 * time.Millisecond)
	sent := flood.halt()
	if res.ExitCode != 0 {
		t.Fatalf("xfw takeover: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	t.Logf("xfw takeover (%d datagrams sent to the dropped port meanwhile):\n%s", sent, res.Stderr)
	if got := len(sink.Wait(1, arrivalWait)); got != 0 {
		t.Errorf("%d of %d datagrams to the dropped port arrived across the takeover", got, sent)
	}
	return res, sent
}

// TestTakeoverFailedSwapPutsBack: a takeover whose swap fails after two of
// fw's three interfaces (a new build with a failure injected) puts the old
// programs back on them: exit 1, every attachment as before, the ruleset
// still enforced, the connection alive; a takeover that succeeds follows.
func TestTakeoverFailedSwapPutsBack(t *testing.T) {
	old, bin, tp, conn := takeoverScene(t, map[string]string{"buildIdentitySalt": "old"})
	failing := buildVariant(t, map[string]string{"swapFailAfter": "2"})
	before := attachments(t, tp.FwNS)

	res := execAny(t, tp.FwNS, failing, "takeover")
	if res.ExitCode != 1 || !strings.Contains(res.Stderr, "failure injected") || !strings.Contains(res.Stderr, "stay in charge") {
		t.Fatalf("a takeover whose swap fails: exit %d, %s (want 1, the failure named)", res.ExitCode, res.Stderr)
	}
	checkOldInCharge(t, tp, old, conn, before)
	if res := execAny(t, tp.FwNS, bin, "takeover"); res.ExitCode != 0 {
		t.Fatalf("the takeover after the failed one: exit %d, %s", res.ExitCode, res.Stderr)
	}
	if got, err := conn.roundTrip("after", 5*time.Second); err != nil || got != "after" {
		t.Errorf("the open connection after the takeover: %q, %v", got, err)
	}
}

// TestTakeoverKeepsNATConnection: a connection gen opened to fw's port
// 8080, which nat PREROUTING translates to sink's 7200, goes on across the
// takeover (the NAT mapping handed over: its replies are translated back),
// and the nat table's rules and counters come through.
func TestTakeoverKeepsNATConnection(t *testing.T) {
	old := buildVariant(t, map[string]string{"buildIdentitySalt": "old"})
	bin := xfwPath(t)
	tp := nettest.New(t)
	nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_loose=0")
	rules := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A PREROUTING -p tcp -m tcp --dport 8080 -j DNAT --to-destination " + tp.Sink.IPv4.String() + ":7200\nCOMMIT\n" +
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n" +
		"-A FORWARD -p tcp -m tcp --dport 7200 --tcp-flags FIN,SYN,RST,ACK SYN -m conntrack --ctstate DNAT -j ACCEPT\nCOMMIT\n"
	firewall{kind: "xfw", bin: old}.restore(t, tp, 4, rules)
	conn := openEchoVia(t, tp, netip.AddrPortFrom(tp.FwIn.IPv4, 8080))
	if got, err := conn.roundTrip("before", 5*time.Second); err != nil || got != "before" {
		t.Fatalf("echo through the DNAT before the takeover: %q, %v", got, err)
	}
	before := nettest.MustExec(t, tp.FwNS, old, "iptables-save", "-c")

	res := execAny(t, tp.FwNS, bin, "takeover")
	if res.ExitCode != 0 || !strings.Contains(res.Stderr, "connections and NAT mappings kept") {
		t.Fatalf("xfw takeover: exit %d\n%s", res.ExitCode, res.Stderr)
	}
	if got, err := conn.roundTrip("after", 5*time.Second); err != nil || got != "after" {
		t.Errorf("the translated connection after the takeover: %q, %v", got, err)
	}
	after := nettest.MustExec(t, tp.FwNS, bin, "iptables-save", "-c")
	b, a := counters(t, before), counters(t, after)
	dnat := "PREROUTING -p tcp -m tcp --dport 8080 -j DNAT --to-destination " + tp.Sink.IPv4.String() + ":7200"
	if b[dnat].packets != 1 || a[dnat] != b[dnat] {
		t.Errorf("the DNAT rule's counter: %v before the takeover, %v after (want 1 packet, unchanged)\n%s", b[dnat], a[dnat], after)
	}
}
