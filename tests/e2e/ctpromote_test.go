package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Addresses of TestCtPromoteRace: gen's and fw's links, and the two
// endpoints of its connections, which no namespace has (fw reaches them by
// permanent neighbour entries, and gen and sink drop what fw forwards to
// them, answering nothing).
var (
	prGenNet  = "10.231.0."
	prSinkNet = "10.231.1."
	prClient  = netip.MustParseAddr("10.231.0.77")
	prServer  = netip.MustParseAddr("10.231.1.88")
)

// prRounds is how many connections TestCtPromoteRace races.
const prRounds = 400

// TestCtPromoteRace races a connection's promotion to xfw_ct against an
// update on the other CPU (bpf/ct_track.h xfw_ct_promote): for each of
// prRounds connections gen sends the SYN and sink the SYN-ACK, then gen
// sends the handshake's ACK (which makes the connection ASSURED and moves
// it) from CPU 0 and a data segment from CPU 1 at the same moment, through
// a veth with two queues (XPS: each CPU its own), so fw's XDP runs the two
// packets on two CPUs at once. In whichever order the tracker takes them,
// the data segment is left unacknowledged and the connection's timeout is
// the 300 s of nf_conntrack_tcp_timeout_unacknowledged; a connection
// showing ESTABLISHED's 432000 s lost the data segment's update. (The
// promotion that copied the entry after releasing its lock lost it in 42
// and 53 connections of 400 here, a lock that gave up after 64 attempts
// in 17; the test cannot force the overlap, so a pass on a machine that
// never ran the two at once proves less than a failure.)
func TestCtPromoteRace(t *testing.T) {
	nettest.RequireRoot(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to race on")
	}
	bin := xfwPath(t)
	// The racers spin on their CPUs' threads: room for the rest.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.NumCPU() + 2))
	pfx := fmt.Sprintf("xfwpr%d", os.Getpid()%100000)
	gen, fw, sink := pfx+"g", pfx+"f", pfx+"s"
	for _, ns := range []string{gen, fw, sink} {
		ns := ns
		prMust(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", ns).Run() })
	}
	prMust(t, "ip", "-n", fw, "link", "add", "fg", "numtxqueues", "2", "numrxqueues", "2", "type", "veth",
		"peer", "name", "gf", "numtxqueues", "2", "numrxqueues", "2", "netns", gen)
	prMust(t, "ip", "-n", fw, "link", "add", "fs", "type", "veth", "peer", "name", "sf", "netns", sink)
	for _, c := range [][]string{
		{fw, "fg", prGenNet + "1/24"}, {gen, "gf", prGenNet + "2/24"},
		{fw, "fs", prSinkNet + "1/24"}, {sink, "sf", prSinkNet + "2/24"},
	} {
		prMust(t, "ip", "-n", c[0], "addr", "add", c[2], "dev", c[1])
		prMust(t, "ip", "-n", c[0], "link", "set", c[1], "up")
		prMust(t, "ip", "-n", c[0], "link", "set", "lo", "up")
	}
	prMust(t, "ip", "netns", "exec", fw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	prMust(t, "ip", "netns", "exec", gen, "sh", "-c",
		"echo 1 > /sys/class/net/gf/queues/tx-0/xps_cpus && echo 2 > /sys/class/net/gf/queues/tx-1/xps_cpus")
	genMAC, fgMAC := prMAC(t, gen, "gf"), prMAC(t, fw, "fg")
	sinkMAC, fsMAC := prMAC(t, sink, "sf"), prMAC(t, fw, "fs")
	prMust(t, "ip", "-n", fw, "neigh", "replace", prClient.String(), "lladdr", genMAC.String(), "dev", "fg", "nud", "permanent")
	prMust(t, "ip", "-n", fw, "neigh", "replace", prServer.String(), "lladdr", sinkMAC.String(), "dev", "fs", "nud", "permanent")

	rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A FORWARD -m conntrack --ctstate INVALID -j DROP\nCOMMIT\n"
	if res, err := nettest.ExecStdin(time.Minute, fw, rules, bin, "iptables-restore", "-w"); err != nil || res.ExitCode != 0 {
		t.Fatalf("xfw iptables-restore: %v %+v", err, res)
	}
	t.Cleanup(func() { _, _ = nettest.Exec(fw, bin, "stop") })

	toFw := nettest.Ethernet{Src: genMAC, Dst: fgMAC}
	seg := func(port uint16, flags uint16, payload int) []byte {
		return toFw.Frame(nettest.IPPacket(prClient, prServer, nettest.TCP{
			SrcPort: port, DstPort: 80, Seq: 1001, Ack: 5001, Flags: flags, Window: 512,
			Payload: []byte(strings.Repeat("x", payload)),
		}))
	}
	// Every frame of a round goes through fw before the next is sent
	// (sink sees the SYN, gen the SYN-ACK, sink both raced segments): a
	// veth only queues a frame and fw takes it in in softirq, on a loaded
	// machine in ksoftirqd long after the send, so without the waits a
	// SYN-ACK could reach fw after a raced segment (which fw then judges
	// INVALID in SYN_SENT: a data segment dropped so is an update lost
	// without any race).
	atSink := prWatch(t, sink, "sf", func(c nettest.Captured) bool { return c.Dst == prServer })
	atGen := prWatch(t, gen, "gf", func(c nettest.Captured) bool { return c.Src == prServer })
	racers := [2]*prRacer{newPrRacer(t, gen, "gf", 0), newPrRacer(t, gen, "gf", 1)}
	for i := 0; i < prRounds; i++ {
		port := uint16(20000 + i)
		syn := toFw.Frame(nettest.IPPacket(prClient, prServer, nettest.TCP{
			SrcPort: port, DstPort: 80, Seq: 1000, Flags: nettest.TCPSyn, Window: 512,
		}))
		synAck := nettest.Ethernet{Src: sinkMAC, Dst: fsMAC}.Frame(nettest.IPPacket(prServer, prClient, nettest.TCP{
			SrcPort: 80, DstPort: port, Seq: 5000, Ack: 1001, Flags: nettest.TCPSyn | nettest.TCPAck, Window: 512,
		}))
		if err := nettest.Inject(gen, "gf", syn); err != nil {
			t.Fatal(err)
		}
		atSink.await(t, port, nettest.TCPSyn, 0)
		if err := nettest.Inject(sink, "sf", synAck); err != nil {
			t.Fatal(err)
		}
		atGen.await(t, port, nettest.TCPSyn|nettest.TCPAck, 0)
		race(t, racers, seg(port, nettest.TCPAck, 0), seg(port, nettest.TCPAck|nettest.TCPPsh, 100))
		atSink.await(t, port, nettest.TCPAck, 0)
		atSink.await(t, port, nettest.TCPAck|nettest.TCPPsh, 100)
	}
	for _, r := range racers {
		close(r.frames)
	}

	res, err := nettest.Exec(fw, bin, "conntrack", "-L", "-p", "tcp")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("xfw conntrack -L: %v %+v", err, res)
	}
	// A connection whose data segment's update is kept is ESTABLISHED
	// with data unacknowledged: at most 300 s left (less the test's time
	// since); one that lost it has ESTABLISHED's 432000 s.
	kept, lost, seen := 0, 0, 0
	sc := bufio.NewScanner(strings.NewReader(res.Stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.Contains(sc.Text(), "dst="+prServer.String()) {
			continue
		}
		secs, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("conntrack line %q: %v", sc.Text(), err)
		}
		seen++
		switch {
		case f[3] == "ESTABLISHED" && secs <= 300:
			kept++
		case f[3] == "ESTABLISHED" && secs >= 431000:
			lost++
			t.Logf("the data segment's update lost: %s", sc.Text())
		default:
			t.Errorf("neither the data segment's timeout nor ESTABLISHED's: %s", sc.Text())
		}
	}
	// A lock given up lets an update go ahead unserialised: the one way
	// left to lose one (bpf/ct_conn.h xfw_ct_lock), when the lock's
	// holder stalls for milliseconds (a virtual CPU descheduled; seen
	// once, 1 of 400, on this 2-core VM). Each loss must be one of those,
	// counted; any other is the race.
	timeouts := prLockTimeouts(t, fw, bin)
	t.Logf("%d connections: %d kept the data segment's update, %d lost it; entry locks given up: %d", seen, kept, lost, timeouts)
	if lost > timeouts {
		t.Errorf("%d updates lost, only %d of them explained by a lock given up", lost, timeouts)
	}
	if seen != prRounds {
		t.Errorf("%d connections listed, want %d:\n%s", seen, prRounds, res.Stdout)
	}
}

// prLockTimeouts returns fw's xfw_conntrack_lock_timeouts_total sample
// (xfw metrics).
func prLockTimeouts(t *testing.T, fw, bin string) int {
	t.Helper()
	res, err := nettest.Exec(fw, bin, "metrics")
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("xfw metrics: %v %+v", err, res)
	}
	for _, line := range strings.Split(res.Stdout, "\n") {
		if v, ok := strings.CutPrefix(line, "xfw_conntrack_lock_timeouts_total"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("xfw metrics: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("xfw metrics has no xfw_conntrack_lock_timeouts_total:\n%s", res.Stdout)
	return 0
}

// prMust runs a command in the test's own namespace (ip -n, ip netns exec).
func prMust(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v: %s", argv, err, out)
	}
}

// prMAC returns the MAC address of interface ifname of namespace ns.
func prMAC(t *testing.T, ns, ifname string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	err := nettest.InNamespace(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err == nil {
			mac = ifi.HardwareAddr
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// prWatcher reports the TCP segments a capture sees arrive, by port of
// the client's end, flags and payload length.
type prWatcher struct {
	segs chan prSeg
}

// prSeg is a TCP segment prWatcher saw.
type prSeg struct {
	port    uint16
	flags   uint16
	payload int
}

// prWatch starts a prWatcher on ifname of ns for the frames match accepts,
// stopped at the test's end.
func prWatch(t *testing.T, ns, ifname string, match func(nettest.Captured) bool) *prWatcher {
	t.Helper()
	w := &prWatcher{segs: make(chan prSeg, 4*prRounds)}
	filter := func(c nettest.Captured) bool {
		return !c.Outgoing && c.Protocol == unix.IPPROTO_TCP && match(c)
	}
	c, err := nettest.StartCaptureFunc(ns, ifname, 30*time.Minute, filter, func(c nettest.Captured) {
		port := c.SrcPort
		if c.Src == prServer {
			port = c.DstPort
		}
		select {
		case w.segs <- prSeg{port: port, flags: c.TCPFlags, payload: len(c.Payload)}:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	return w
}

// await waits until the watcher has seen the segment of port with flags
// and payload bytes (others it saw meanwhile are set aside for later
// waits), and fails the test after a minute.
func (w *prWatcher) await(t *testing.T, port, flags uint16, payload int) {
	t.Helper()
	want := prSeg{port: port, flags: flags, payload: payload}
	timeout := time.After(time.Minute)
	var aside []prSeg
	defer func() {
		for _, s := range aside {
			w.segs <- s
		}
	}()
	for {
		select {
		case s := <-w.segs:
			if s == want {
				return
			}
			aside = append(aside, s)
		case <-timeout:
			t.Fatalf("no TCP segment of port %d, flags %#x, %d bytes, went through fw in a minute (seen meanwhile: %v)", port, flags, payload, aside)
		}
	}
}

// prRacer sends frames from a thread pinned to one CPU in gen's
// namespace: given a frame, it reports ready, spins until go is set, and
// sends it.
type prRacer struct {
	frames chan []byte
	ready  atomic.Int32
	sent   chan error
}

// prGo is the start signal of the racers' current round.
var prGo atomic.Int32

func newPrRacer(t *testing.T, ns, ifname string, cpu int) *prRacer {
	t.Helper()
	r := &prRacer{frames: make(chan []byte), sent: make(chan error)}
	setup := make(chan error)
	go func() {
		// Never unlocked: the thread, in gen's namespace, ends with us.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			setup <- err
			return
		}
		h, err := netns.GetFromName(ns)
		if err != nil {
			setup <- err
			return
		}
		defer func() { _ = h.Close() }()
		if err := netns.Set(h); err != nil {
			setup <- err
			return
		}
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			setup <- err
			return
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			setup <- err
			return
		}
		defer func() { _ = unix.Close(fd) }()
		setup <- nil
		for f := range r.frames {
			sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: 0x0008 /* ETH_P_IP, network order */, Halen: 6}
			copy(sa.Addr[:], f[0:6])
			r.ready.Store(1)
			for prGo.Load() == 0 {
			}
			r.sent <- unix.Sendto(fd, f, 0, sa)
		}
	}()
	if err := <-setup; err != nil {
		t.Fatalf("racer on CPU %d: %v", cpu, err)
	}
	return r
}

// race sends a from CPU 0 and b from CPU 1 at the same moment.
func race(t *testing.T, racers [2]*prRacer, a, b []byte) {
	t.Helper()
	prGo.Store(0)
	for i, f := range [][]byte{a, b} {
		racers[i].ready.Store(0)
		racers[i].frames <- f
	}
	for racers[0].ready.Load() == 0 || racers[1].ready.Load() == 0 {
		runtime.Gosched()
	}
	prGo.Store(1)
	for _, r := range racers {
		if err := <-r.sent; err != nil {
			t.Fatalf("send: %v", err)
		}
	}
}
