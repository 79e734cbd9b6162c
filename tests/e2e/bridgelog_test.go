package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// bridgeLogRules logs bridged datagrams to 9810 in PREROUTING, FORWARD
// and POSTROUTING and datagrams for br0 (9811) in PREROUTING and INPUT
// (PFX: the run's prefix); 9819 is the datagrams that wait for xfw log.
const bridgeLogRules = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p udp --dport 9810 -j LOG --log-prefix "PFX-p "
-A PREROUTING -p udp --dport 9811 -j LOG --log-prefix "PFX-q "
-A POSTROUTING -p udp --dport 9810 -j LOG --log-prefix "PFX-o "
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p udp --dport 9811 -j LOG --log-prefix "PFX-i "
-A FORWARD -p udp --dport 9810 -j LOG --log-prefix "PFX-f "
-A FORWARD -p udp --dport 9819 -j LOG --log-prefix "PFX-r "
COMMIT
`

// bridgeLogWant is the head of each prefix's line (devices, ports, the
// TTL or hop limit; bridgeLogHead): the kernel prints the input port
// wherever it knows it, the output port from FORWARD on, and the TTL of
// a bridged frame as received.
var bridgeLogWant = map[string]string{
	"p": "IN=br0 OUT= PHYSIN=in0 TTL=64",
	"f": "IN=br0 OUT=br0 PHYSIN=in0 PHYSOUT=out0 TTL=64",
	"o": "IN= OUT=br0 PHYSIN=in0 PHYSOUT=out0 TTL=64",
	"q": "IN=br0 OUT= PHYSIN=in0 TTL=64",
	"i": "IN=br0 OUT= PHYSIN=in0 TTL=64",
}

// logMACField and logTTLField are a LOG line's MAC header (each twin's
// hosts have their own addresses) and its TTL or hop limit.
var (
	logMACField = regexp.MustCompile(`MAC=\S* `)
	logTTLField = regexp.MustCompile(`(TTL|HOPLIMIT)=\d+`)
)

// bridgeLogHead is what TestBridgedLogAgainstKernel compares of a LOG
// line's fields (after its prefix): the devices and ports before SRC=,
// without MAC=, and the TTL (IPv6: the hop limit, named TTL=); then the
// MAC header's EtherType as MACTYPE= when it is not IPv4's or IPv6's (a
// PPPoE frame's).
func bridgeLogHead(fields string) string {
	head, _, _ := strings.Cut(fields, "SRC=")
	mac := strings.TrimSuffix(strings.TrimPrefix(logMACField.FindString(head), "MAC="), " ")
	head = logMACField.ReplaceAllString(head, "")
	ttl := strings.Replace(logTTLField.FindString(fields), "HOPLIMIT=", "TTL=", 1)
	if len(mac) >= 5 && mac[len(mac)-5:] != "08:00" && mac[len(mac)-5:] != "86:dd" {
		ttl += " MACTYPE=" + mac[len(mac)-5:]
	}
	return head + ttl
}

// addBridgeLogLine keeps line's head (bridgeLogHead) under its prefix's
// key ("p" of PFX-p, "p6" of PFX6-p) when it is one of want's keys and
// has no line yet.
func addBridgeLogLine(line, pfx string, want, into map[string]string) {
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
	if _, wanted := want[key]; wanted {
		into[key] = bridgeLogHead(fields)
	}
}

// readBridgeLogLines reads the kernel log records there are into into
// (addBridgeLogLine).
func readBridgeLogLines(fd int, pfx string, want, into map[string]string) {
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
		addBridgeLogLine(text, pfx, want, into)
	}
}

// bridgeLogSend injects the round's frames at gen: bridged to sink's
// port 9810 and to br0's port 9811, in both families, each as wrap makes
// it of the datagram of its family.
func bridgeLogSend(t *testing.T, tp *nettest.Topology, wrap frameWrap) {
	t.Helper()
	for _, fam := range []int{4, 6} {
		for _, f := range []func(*nettest.Topology) []byte{
			bridgedUDP(fam, 9810, false, false), bridgedUDP(fam, 9811, false, true),
		} {
			if err := tp.InjectFromGen(wrap(fam, f)(tp)); err != nil {
				t.Fatalf("inject: %v", err)
			}
		}
	}
}

// frameWrap turns a frame's builder for a datagram of family fam into
// another frame's (plainFrame: the same).
type frameWrap func(fam int, f func(*nettest.Topology) []byte) func(*nettest.Topology) []byte

// plainFrame is the frameWrap that leaves frames as they are.
func plainFrame(_ int, f func(*nettest.Topology) []byte) func(*nettest.Topology) []byte { return f }

// TestBridgedLogAgainstKernel compares the LOG lines of bridged frames
// and of frames a bridge passes up (br_netfilter) with the kernel's: the
// PHYSIN= and PHYSOUT= the kernel prints after OUT=, and the TTL of a
// bridged frame (not routed: not decremented), in both families.
func TestBridgedLogAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy", "sysctl")
	bin := xfwPath(t)
	netnsLogging(t)
	pfx := fmt.Sprintf("xfwbrlog%d", time.Now().UnixNano()%1000000)
	rules := strings.ReplaceAll(bridgeLogRules, "PFX", pfx)
	tw := newTwins(t, bin)
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		bridgeSetup(t, tp, true)
		fw.restore(t, tp, 4, rules)
		fw.restore(t, tp, 6, strings.ReplaceAll(rules, pfx+"-", pfx+"6-"))
	})
	if t.Failed() {
		return
	}
	want := bothFamilies(bridgeLogWant)
	kmsg, err := openKmsgEnd()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(kmsg)
	bridgeLogSend(t, tw.tps["kernel"], plainFrame)
	kernel := map[string]string{}
	waitUntil(func() bool {
		readBridgeLogLines(kmsg, pfx, want, kernel)
		return len(kernel) == len(want)
	})
	got := xfwBridgeLogLines(t, tw.tps["xfw"], bin, pfx, want, plainFrame)
	for k, w := range want {
		if kernel[k] != w {
			t.Errorf("kernel: %s-%s line %q, want %q (premise)", pfx, k, kernel[k], w)
		}
		if got[k] != kernel[k] {
			t.Errorf("xfw: %s-%s line %q, the kernel's %q", pfx, k, got[k], kernel[k])
		}
	}
}

// xfwBridgeLogLines starts `xfw log` in tp's fw, injects bridged frames
// to port 9819 until it prints one (it reads), then the round's frames,
// (as wrap makes them) and returns their lines' heads by key; waits are
// bounded.
func xfwBridgeLogLines(t *testing.T, tp *nettest.Topology, bin, pfx string, want map[string]string,
	wrap frameWrap) map[string]string {
	t.Helper()
	var out lockedBuffer
	cmd := exec.Command("ip", "netns", "exec", tp.FwNS, bin, "log")
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start xfw log: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for end := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), pfx+"-r "); {
		if time.Now().After(end) {
			t.Fatalf("xfw log printed no line for the bridged frames to port 9819:\n%s", out.String())
		}
		if err := tp.InjectFromGen(bridgedUDP(4, 9819, false, false)(tp)); err != nil {
			t.Fatalf("inject: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	bridgeLogSend(t, tp, wrap)
	got := map[string]string{}
	waitUntil(func() bool {
		for _, l := range strings.Split(out.String(), "\n") {
			addBridgeLogLine(l, pfx, want, got)
		}
		return len(got) == len(want)
	})
	return got
}
