package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// clRules is TestConnlimitAgainstKernel's ruleset: per source address
// (7100), per source network (7101, the mask @M), per destination with
// --connlimit-upto (7102), and a rule without --syn whose match every
// packet of a connection meets (7103).
const clRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p tcp --syn --dport 7100 -m connlimit --connlimit-above 2 -j REJECT --reject-with tcp-reset
-A FORWARD -p tcp --syn --dport 7101 -m connlimit --connlimit-above 3 --connlimit-mask @M -j REJECT --reject-with tcp-reset
-A FORWARD -p tcp --syn --dport 7102 -m connlimit --connlimit-upto 1 --connlimit-daddr -j ACCEPT
-A FORWARD -p tcp --syn --dport 7102 -j REJECT --reject-with tcp-reset
-A FORWARD -p tcp --dport 7103 -m connlimit --connlimit-above 1 -j REJECT --reject-with tcp-reset
COMMIT
`

// clStep is one step of the scenario: open a connection from gen's
// address src (0 its own, 1 and 2 extra addresses in its subnet) to
// sink's port, or close the n-th connection opened (by FIN, or by RST
// when reset).
type clStep struct {
	open  bool
	src   int
	port  uint16
	close int
	reset bool
}

// clScenario opens connections past each limit, closes some (FIN and
// RST: TIME_WAIT and CLOSE leave the count) and opens again.
var clScenario = []clStep{
	{open: true, port: 7100}, {open: true, port: 7100}, {open: true, port: 7100}, // 2 of 3
	{open: true, src: 1, port: 7100}, // another source: its own count
	{close: 0},
	{open: true, port: 7100}, // the closed one's slot is free
	{open: true, port: 7100}, // refused again
	{close: 1, reset: true},
	{open: true, port: 7100},                                           // freed by the RST
	{open: true, src: 1, port: 7101}, {open: true, src: 2, port: 7101}, // one network…
	{open: true, src: 1, port: 7101}, {open: true, src: 2, port: 7101}, // …3 of 4
	{open: true, port: 7102}, {open: true, src: 1, port: 7102}, // per destination: 1
	{open: true, port: 7103},         // the SYN and every later packet counted once
	{open: true, port: 7103},         // a second connection from the address
	{open: true, src: 2, port: 7103}, // another address: its own count
}

// TestConnlimitAgainstKernel compares -m connlimit with the kernel's
// xt_connlimit in twin topologies: TCP connections from gen through fw to
// sink, kept open, past each limit (per address, per masked network with
// two addresses of one /24 or /64, per destination with
// --connlimit-upto), the (limit+1)-th refused; connections closed by FIN
// and by RST free their slots; both families. Every attempt's outcome and
// the rules' counters must be the kernel's, and the kernel's own outcomes
// must be the ones the limits imply.
func TestConnlimitAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	bin := xfwPath(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) { connlimitAgainstKernel(t, bin, fam) })
	}
}

// clOutcome is what a scenario run saw: each opening's result, then the
// rules' counters.
type clOutcome struct {
	results  []string
	counters map[string]counter
}

func connlimitAgainstKernel(t *testing.T, bin string, fam int) {
	out := collectTwins(newTwins(t, bin), func(kind string, tp *nettest.Topology, fw firewall) clOutcome {
		return runConnlimit(t, kind, tp, fw, fam)
	})
	k, x := out["kernel"], out["xfw"]
	r := "connection refused"
	want := []string{"ok", "ok", r, "ok", "ok", r, "ok", "ok", "ok", "ok", r, "ok", r, "ok", r, "ok"}
	if strings.Join(k.results, " ") != strings.Join(want, " ") {
		t.Errorf("kernel: %v, want %v (the test's premise)", k.results, want)
	}
	if strings.Join(x.results, " ") != strings.Join(k.results, " ") {
		t.Errorf("xfw: %v, kernel %v", x.results, k.results)
	}
	for key, kc := range k.counters {
		if key == ":OUTPUT" {
			continue // REJECT's replies pass OUTPUT in the kernel only (differences.md)
		}
		if fam == 6 && key == ":INPUT" {
			continue // fw's own link traffic (router solicitations, MLD) at times that differ between the twins
		}
		if xc := x.counters[key]; xc.packets != kc.packets {
			t.Errorf("%s: xfw %d packets, kernel %d", key, xc.packets, kc.packets)
		}
	}
	if t.Failed() {
		t.Logf("counters: kernel %v, xfw %v", k.counters, x.counters)
	}
}

// runConnlimit runs clScenario against one firewall and returns what it saw.
func runConnlimit(t *testing.T, kind string, tp *nettest.Topology, fw firewall, fam int) clOutcome {
	mask, bits := "24", 24
	gen, sink := tp.Gen.IPv4, tp.Sink.IPv4
	if fam == 6 {
		mask, bits = "64", 64
		gen, sink = tp.Gen.IPv6, tp.Sink.IPv6
	}
	srcs := []netip.Addr{gen, clHost(gen, 0x41), clHost(gen, 0x42)}
	for _, a := range srcs[1:] {
		args := []string{"ip", "addr", "add", fmt.Sprintf("%s/%d", a, bits), "dev", tp.Gen.Ifname}
		if fam == 6 {
			args = append(args, "nodad")
		}
		nettest.MustExec(t, tp.GenNS, args...)
	}
	for _, port := range []uint16{7100, 7101, 7102, 7103} {
		// sink's ACK of gen's FIN always a segment of its own, not by
		// timing carried in its FIN: the FORWARD policy counter counts it.
		nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(sink, port), nettest.AckFINFirst())
	}
	fw.restore(t, tp, fam, strings.ReplaceAll(clRules, "@M", mask))
	var conns []*net.TCPConn
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	var o clOutcome
	for _, s := range clScenario {
		if !s.open {
			c := conns[s.close]
			if s.reset {
				_ = c.SetLinger(0)
			}
			c.Close()
			conns[s.close] = nil
			// The FIN exchange (or the RST) reaches fw's tables.
			time.Sleep(300 * time.Millisecond)
			continue
		}
		c, err := clDial(tp.GenNS, srcs[s.src], netip.AddrPortFrom(sink, s.port))
		res := "ok"
		if err != nil {
			res = errText(err)
		} else if s.port == 7103 {
			// A packet after the handshake meets the match again:
			// the connection's own count, not a second one.
			if _, err := c.Write([]byte("x")); err != nil {
				res = "write: " + errText(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		o.results = append(o.results, res)
		conns = append(conns, c)
	}
	sv := fw.save(t, tp, fam)
	sv = strings.ReplaceAll(sv, "--connlimit-mask "+mask, "--connlimit-mask @M")
	o.counters = counters(t, sv)
	t.Logf("%s: %v", kind, o.results)
	return o
}

// collectTwins runs fn for both firewalls at once (twins.each) and returns
// what each run returned, by kind.
func collectTwins[T any](tw *twins, fn func(kind string, tp *nettest.Topology, fw firewall) T) map[string]T {
	var mu sync.Mutex
	out := map[string]T{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		v := fn(kind, tp, fw)
		mu.Lock()
		out[kind] = v
		mu.Unlock()
	})
	return out
}

// clHost is a's address with last byte b.
func clHost(a netip.Addr, b byte) netip.Addr {
	s := a.AsSlice()
	s[len(s)-1] = b
	h, _ := netip.AddrFromSlice(s)
	return h
}

// clDial connects from src in namespace ns to dst (bounded).
func clDial(ns string, src netip.Addr, dst netip.AddrPort) (*net.TCPConn, error) {
	var c net.Conn
	err := nettest.InNamespace(ns, func() error {
		var err error
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)),
			KeepAlive: nettest.NoKeepAlive}
		c, err = d.Dial("tcp", dst.String())
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}
