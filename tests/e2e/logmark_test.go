package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// logMarkRules is TestLogMarkAgainstKernel's ruleset (PFX: the run's
// prefix): mangle PREROUTING marks datagrams to 5301 (0x1) and 5303 (0x7);
// filter INPUT logs 5301 before and after a MARK that changes its low
// byte, and 5302 unmarked (5304: the datagrams that wait for xfw log);
// FORWARD logs 5303.
const logMarkRules = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p udp --dport 5301 -j MARK --set-mark 0x1
-A PREROUTING -p udp --dport 5303 -j MARK --set-mark 0x7
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 5301 -j LOG --log-prefix "PFX-a "
-A INPUT -p udp --dport 5301 -j MARK --set-xmark 0x2a/0xff
-A INPUT -p udp --dport 5301 -j LOG --log-prefix "PFX-b "
-A INPUT -p udp --dport 5302 -j LOG --log-prefix "PFX-c "
-A INPUT -p udp --dport 5304 -j LOG --log-prefix "PFX-r "
-A FORWARD -p udp --dport 5303 -j LOG --log-prefix "PFX-d "
COMMIT
`

// logMarkWant is the end of each prefix's line, from PROTO= on (the
// source port masked): the kernel prints skb->mark as it is at the LOG
// rule, and nothing for mark 0.
var logMarkWant = map[string]string{
	"a": "PROTO=UDP SPT=* DPT=5301 LEN=12 MARK=0x1 ",
	"b": "PROTO=UDP SPT=* DPT=5301 LEN=12 MARK=0x2a ",
	"c": "PROTO=UDP SPT=* DPT=5302 LEN=12 ",
	"d": "PROTO=UDP SPT=* DPT=5303 LEN=12 MARK=0x7 ",
}

// sptField masks a LOG line's source port (each twin's socket picks its
// own).
var sptField = regexp.MustCompile(`SPT=\d+`)

// TestLogMarkAgainstKernel sends the same IPv4 and IPv6 datagrams
// through twin topologies whose rules mark and log them, and compares
// the end of each LOG line — where the kernel prints MARK=0x… when the
// packet's mark at the rule is not 0 — between the kernel's lines (the
// kernel log) and xfw's (`xfw log`).
func TestLogMarkAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	tw, pfx := logTwins(t, bin, "xfwmark", logMarkRules)
	want := bothFamilies(logMarkWant)
	kernel, got := logLinesOfTwins(t, tw, bin, pfx, 5304, want, func(tp *nettest.Topology) { logMarkSend(t, tp) })
	for k, w := range want {
		if kernel[k] != w {
			t.Errorf("kernel: %s-%s line ends %q, want %q (premise)", pfx, k, kernel[k], w)
		}
		if got[k] != kernel[k] {
			t.Errorf("xfw: %s-%s line ends %q, the kernel's %q", pfx, k, got[k], kernel[k])
		}
	}
}

// logMarkSend sends the round's datagrams from gen: to fw's port 5301 and
// 5302 and through fw to sink's port 5303, in both families.
func logMarkSend(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	for _, d := range []netip.AddrPort{
		netip.AddrPortFrom(tp.FwIn.IPv4, 5301), netip.AddrPortFrom(tp.FwIn.IPv4, 5302),
		netip.AddrPortFrom(tp.Sink.IPv4, 5303),
		netip.AddrPortFrom(tp.FwIn.IPv6, 5301), netip.AddrPortFrom(tp.FwIn.IPv6, 5302),
		netip.AddrPortFrom(tp.Sink.IPv6, 5303),
	} {
		if a := nettest.UDPSend(tp.GenNS, d, []byte("mark")); a.Outcome != nettest.OK {
			t.Fatalf("send to %s: %v", d, a)
		}
	}
}

// openKmsgEnd opens /dev/kmsg after its last record.
func openKmsgEnd() (int, error) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/kmsg: %w", err)
	}
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seek /dev/kmsg: %w", err)
	}
	return fd, nil
}

// readLogMarkLines reads the kernel log records there are and keeps the
// first line of each of the run's prefixes.
func readLogMarkLines(fd int, pfx string, want, into map[string]string) {
	buf := make([]byte, 8192)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EPIPE) {
			continue // records were overwritten
		}
		if err != nil || n <= 0 {
			return
		}
		_, text, _ := strings.Cut(string(buf[:n]), ";")
		text, _, _ = strings.Cut(text, "\n")
		addLogMarkLine(text, pfx, want, into)
	}
}

// addLogMarkLine keeps line's end (from PROTO= on, the source port
// masked) under its prefix's key ("a" of PFX-a, "a6" of PFX6-a), when it
// has one of the run's prefixes, its key is one of want's and has no line
// yet.
func addLogMarkLine(line, pfx string, want, into map[string]string) {
	rest, ok := strings.CutPrefix(line, pfx)
	if !ok {
		return
	}
	v6 := strings.HasPrefix(rest, "6-")
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "6"), "-")
	key, fields, ok := strings.Cut(rest, " ")
	if !ok {
		return
	}
	if v6 {
		key += "6"
	}
	if _, seen := into[key]; seen {
		return
	}
	if _, wanted := want[key]; !wanted {
		return
	}
	if i := strings.Index(fields, "PROTO="); i >= 0 {
		into[key] = sptField.ReplaceAllString(fields[i:], "SPT=*")
	}
}

// logUIDRules logs with --log-uid the datagrams fw sends to gen's port
// 5311 (OUTPUT: the sending socket's ids) and those gen sends to fw's
// port 5312 (INPUT: no socket, nothing printed); 5313 is the datagrams
// that wait for xfw log.
const logUIDRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p udp --dport 5311 -j LOG --log-uid --log-prefix "PFX-o "
-A INPUT -p udp --dport 5312 -j LOG --log-uid --log-prefix "PFX-i "
-A INPUT -p udp --dport 5313 -j LOG --log-prefix "PFX-r "
COMMIT
`

// TestLogUIDAgainstKernel compares --log-uid's UID= and GID= with the
// kernel's: a datagram fw sends from a process of uid 4321 and gid 4322
// gets them in OUTPUT, a received one gets none in INPUT; both families.
func TestLogUIDAgainstKernel(t *testing.T) {
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "setpriv", "/usr/bin/python3")
	bin := xfwPath(t)
	tw, pfx := logTwins(t, bin, "xfwuid", logUIDRules)
	want := map[string]string{
		"o":  "PROTO=UDP SPT=* DPT=5311 LEN=12 UID=4321 GID=4322 ",
		"i":  "PROTO=UDP SPT=* DPT=5312 LEN=12 ",
		"o6": "PROTO=UDP SPT=* DPT=5311 LEN=12 UID=4321 GID=4322 ",
		"i6": "PROTO=UDP SPT=* DPT=5312 LEN=12 ",
	}
	send := func(tp *nettest.Topology) {
		t.Helper()
		for _, dst := range []netip.Addr{tp.Gen.IPv4, tp.Gen.IPv6} {
			fam := "AF_INET"
			if dst.Is6() {
				fam = "AF_INET6"
			}
			script := fmt.Sprintf("import socket\ns = socket.socket(socket.%s, socket.SOCK_DGRAM)\ns.sendto(b'uid!', (%q, 5311))\n", fam, dst.String())
			cmd := exec.Command("ip", "netns", "exec", tp.FwNS, "setpriv", "--reuid", "4321", "--regid", "4322", "--clear-groups", "/usr/bin/python3", "-c", script) // a system python the uid may run
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("send from fw as uid 4321: %v: %s", err, out)
			}
			src := tp.FwIn.IPv4
			if dst.Is6() {
				src = tp.FwIn.IPv6
			}
			if a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(src, 5312), []byte("uid!")); a.Outcome != nettest.OK {
				t.Fatalf("send to fw:5312: %v", a)
			}
		}
	}
	kernel, got := logLinesOfTwins(t, tw, bin, pfx, 5313, want, send)
	for k, w := range want {
		if kernel[k] != w {
			t.Errorf("kernel: %s-%s line ends %q, want %q (premise)", pfx, k, kernel[k], w)
		}
		if got[k] != kernel[k] {
			t.Errorf("xfw: %s-%s line ends %q, the kernel's %q", pfx, k, got[k], kernel[k])
		}
	}
}

// netnsLogging makes the kernel log netfilter's LOG lines of network
// namespaces other than the initial one until the test ends
// (nettest.EnableNetnsLogging).
func netnsLogging(t *testing.T) {
	t.Helper()
	restore, err := nettest.EnableNetnsLogging()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	})
}

// logTwins turns netns logging on (netnsLogging), builds twin topologies
// and loads rules into both firewalls, both families, PFX replaced by a
// prefix of the run made from base (IPv6's lines PFX6-); it returns the
// twins and the prefix.
func logTwins(t *testing.T, bin, base, rules string) (*twins, string) {
	t.Helper()
	netnsLogging(t)
	pfx := fmt.Sprintf("%s%d", base, time.Now().UnixNano()%1000000)
	rules = strings.ReplaceAll(rules, "PFX", pfx)
	tw := newTwins(t, bin)
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, rules)
		fw.restore(t, tp, 6, strings.ReplaceAll(rules, pfx+"-", pfx+"6-"))
	})
	return tw, pfx
}

// bothFamilies is want with IPv6's keys added (each key and key+"6").
func bothFamilies(want map[string]string) map[string]string {
	both := map[string]string{}
	for k, v := range want {
		both[k] = v
		both[k+"6"] = v
	}
	return both
}

// logLinesOfTwins runs send in the kernel's twin and reads its lines for
// want's keys from the kernel log, then starts `xfw log` in xfw's twin,
// sends datagrams to fw's port readyPort until it prints one (the rule
// logging them as PFX-r: it reads), runs send there and reads its lines.
// Each side's lines are addLogMarkLine's ends, by key; waits are bounded.
func logLinesOfTwins(t *testing.T, tw *twins, bin, pfx string, readyPort uint16, want map[string]string,
	send func(tp *nettest.Topology)) (kernel, xfw map[string]string) {
	t.Helper()
	kmsg, err := openKmsgEnd()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kmsg)
	send(tw.tps["kernel"])
	kernel = map[string]string{}
	waitUntil(func() bool {
		readLogMarkLines(kmsg, pfx, want, kernel)
		return len(kernel) == len(want)
	})

	xtp := tw.tps["xfw"]
	var out lockedBuffer
	cmd := exec.Command("ip", "netns", "exec", xtp.FwNS, bin, "log")
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start xfw log: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for end := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), pfx+"-r "); {
		if time.Now().After(end) {
			t.Fatalf("xfw log printed no line for the datagrams to %s:%d:\n%s", xtp.FwIn.IPv4, readyPort, out.String())
		}
		nettest.UDPSend(xtp.GenNS, netip.AddrPortFrom(xtp.FwIn.IPv4, readyPort), []byte("ready"))
		time.Sleep(200 * time.Millisecond)
	}
	send(xtp)
	xfw = map[string]string{}
	waitUntil(func() bool {
		for _, l := range strings.Split(out.String(), "\n") {
			addLogMarkLine(l, pfx, want, xfw)
		}
		return len(xfw) == len(want)
	})
	return kernel, xfw
}
