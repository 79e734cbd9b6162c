package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT replies to packets from gen with a (spoofed) source of fw's own,
// IPv6 (IPv4 drops such a packet as a martian before INPUT and FORWARD,
// with accept_local off), against
// the kernel. gen sends a datagram and a SYN from fw's out0 address to its
// in0 address, which INPUT on in0 REJECTs, and a datagram from that
// address to sink, which FORWARD REJECTs (its error comes from out0's
// address: the route back is local, whose source selection picks the
// destination itself). The kernel's reply is for fw itself: it leaves by lo through raw, mangle and filter OUTPUT and mangle
// POSTROUTING, then comes back through raw and mangle PREROUTING, mangle
// and filter INPUT; when OUTPUT drops it, nothing passes lo. xfw sent
// none (bpf/reject_send.h: xfw_rj_send now leaves it to xfw_tc_ingress,
// which judges it in OUTPUT with output device lo and delivers it through
// lo). Every rule's counter, what passes lo and what fw's raw sockets
// receive are compared.

// The ports of gen's packets, REJECTed in INPUT on in0 (UDP, TCP).
const (
	rejectOwnSrcUDP = 7330
	rejectOwnSrcTCP = 7331
	// rejectOwnSrcFwd is the port of gen's datagram to sink, REJECTed
	// in FORWARD.
	rejectOwnSrcFwd = 7332
)

// rejectOwnSrcRules is the ruleset of a round; with drop, OUTPUT drops the
// replies leaving by lo (after counting them).
func rejectOwnSrcRules(drop bool) string {
	reply := []string{"-p ipv6-icmp -m icmp6 --icmpv6-type port-unreachable", "-p tcp --tcp-flags RST RST"}
	var rules []string
	add := func(chains, suffix string) {
		for _, c := range strings.Fields(chains) {
			for _, m := range reply {
				rules = append(rules, "-A "+c+" "+m+suffix)
			}
		}
	}
	rules = append(rules, "*raw")
	add("PREROUTING OUTPUT", "")
	rules = append(rules, "COMMIT", "*mangle")
	add("PREROUTING INPUT FORWARD OUTPUT POSTROUTING", "")
	rules = append(rules, "COMMIT", "*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]")
	add("INPUT FORWARD OUTPUT", "")
	add("INPUT", " -i lo")
	add("OUTPUT", " -o lo")
	if drop {
		add("OUTPUT", " -o lo -j DROP")
	}
	rules = append(rules,
		fmt.Sprintf("-A INPUT -i in0 -p udp --dport %d -j REJECT", rejectOwnSrcUDP),
		fmt.Sprintf("-A INPUT -i in0 -p tcp --dport %d -j REJECT --reject-with tcp-reset", rejectOwnSrcTCP),
		fmt.Sprintf("-A FORWARD -p udp --dport %d -j REJECT", rejectOwnSrcFwd),
		"COMMIT")
	return strings.Join(rules, "\n") + "\n"
}

// TestRejectOwnSourceAgainstKernel compares REJECT replies to gen's
// packets from fw's own address (see above), counted, then dropped in
// OUTPUT.
func TestRejectOwnSourceAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	tw := newTwins(t, xfwPath(t))
	// The third round watches no packets on lo: with a packet socket
	// on lo (holding a clone of each frame lo sends, so that generic
	// XDP on lo's receive side likely works on a copy) the reply's stale
	// mark in the metadata never reached lo's TCX ingress, which took
	// it for a reply still to send out of in0 (found by xfw difftest,
	// ufw.v6.rules; this round fails without the fix, the others pass).
	names := []string{"replies counted", "replies dropped in OUTPUT", "replies counted, lo not watched"}
	var mu sync.Mutex // guards seen and saves
	seen, saves := map[string][]string{}, map[string][]map[string]counter{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		for i := range names {
			fw.restore(t, tp, 6, rejectOwnSrcRules(i == 1))
			got := rejectOwnSrcRound(t, tp, tp.FwOut.IPv6, false, i != 2)
			c := rejectLoCounters(t, tp, fw, 6)
			mu.Lock()
			seen[kind] = append(seen[kind], got)
			saves[kind] = append(saves[kind], c)
			mu.Unlock()
		}
	})
	if t.Failed() {
		return
	}
	wants := []string{"port-unreachable in0>out0 hop limit 64, 120 bytes; reset in0>out0 hop limit 64, 74 bytes; " +
		"port-unreachable out0>out0 hop limit 64, 119 bytes; 2 errors and 1 reset at fw's sockets", "nothing",
		"lo not watched; 2 errors and 1 reset at fw's sockets"}
	for i, name := range names {
		kc := compareOwnSrcRound(t, name, wants[i], seen, saves, i)
		// The oracle's own check (two ICMPv6 errors, one reset): each
		// counted once by every counting rule of the chains it passes
		// (OUTPUT: raw, mangle, filter and filter -o lo; POSTROUTING:
		// mangle; PREROUTING: raw and mangle; INPUT: mangle, filter
		// and filter -i lo), by none of FORWARD's, only by OUTPUT's
		// when OUTPUT drops them.
		chains := map[string]uint64{"OUTPUT": 4, "POSTROUTING": 1, "PREROUTING": 2, "INPUT": 3, "FORWARD": 0}
		for chain, n := range chains {
			if i == 1 && chain != "OUTPUT" {
				n = 0
			}
			for reply, per := range map[string]uint64{"icmp": 2, "RST RST": 1} {
				if c := rejectLoCount(kc, chain, reply); c != per*n {
					t.Errorf("%s: the kernel's %s rules for %q counted %d packets, want %d (fix the test)", name, chain, reply, c, per*n)
				}
			}
		}
	}
}

// TestRejectOwnLinkLocalSourceAgainstKernel compares REJECT's replies to
// gen's datagram and SYN from fw's own in0 link-local address (spoofed) to
// its in0 address, REJECTed in INPUT: the kernel's ICMPv6 error and reset
// leave by lo (the local route of that address) through OUTPUT and
// POSTROUTING and come back through PREROUTING and INPUT to fw's sockets.
// xfw judged them in OUTPUT, but bpf_redirect_neigh's route lookup bound
// to lo found no route to a link-local destination, and nothing passed lo.
// The same packets from sink, REJECTed in INPUT on out0: the kernel's
// reset (routed bound to no device) is delivered the same way, its ICMPv6
// error (icmp6_send binds a link-local destination's route to the input
// device, where no local route holds in0's address) leaves by out0,
// counted in OUTPUT and POSTROUTING, to a neighbour that never answers;
// xfw delivered both.
func TestRejectOwnLinkLocalSourceAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	tw := newTwins(t, xfwPath(t))
	names := []string{"replies counted", "replies dropped in OUTPUT", "from sink, replies counted"}
	var mu sync.Mutex // guards seen and saves
	seen, saves := map[string][]string{}, map[string][]map[string]counter{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		for i := range names {
			rules := rejectOwnSrcRules(i == 1)
			if i == 2 {
				rules = strings.ReplaceAll(rules, "-i in0", "-i out0")
			}
			fw.restore(t, tp, 6, rules)
			got := rejectOwnSrcRound(t, tp, tp.FwIn.LinkLocal, i == 2, true)
			c := rejectLoCounters(t, tp, fw, 6)
			mu.Lock()
			seen[kind] = append(seen[kind], got)
			saves[kind] = append(saves[kind], c)
			mu.Unlock()
		}
	})
	if t.Failed() {
		return
	}
	wants := []string{"port-unreachable in0>in0's link-local hop limit 64, 120 bytes; " +
		"reset in0>in0's link-local hop limit 64, 74 bytes; 1 errors and 1 reset at fw's sockets", "nothing",
		"reset in0>in0's link-local hop limit 64, 74 bytes; 0 errors and 1 reset at fw's sockets"}
	for i, name := range names {
		kc := compareOwnSrcRound(t, name, wants[i], seen, saves, i)
		// The oracle's own check, as TestRejectOwnSourceAgainstKernel's:
		// one error and one reset, each counted by every counting rule
		// of the chains it passes; from sink, the error leaves by out0
		// (OUTPUT but for -o lo, and POSTROUTING), never delivered.
		chains := map[string]uint64{"OUTPUT": 4, "POSTROUTING": 1, "PREROUTING": 2, "INPUT": 3, "FORWARD": 0}
		for chain, n := range chains {
			if i == 1 && chain != "OUTPUT" {
				n = 0
			}
			for _, reply := range []string{"icmp", "RST RST"} {
				n := n
				if i == 2 && reply == "icmp" {
					n = map[string]uint64{"OUTPUT": 3, "POSTROUTING": 1}[chain]
				}
				if c := rejectLoCount(kc, chain, reply); c != n {
					t.Errorf("%s: the kernel's %s rules for %q counted %d packets, want %d (fix the test)", name, chain, reply, c, n)
				}
			}
		}
	}
}

// rejectOwnSrcRound injects gen's datagram and SYN from src, an address
// of fw's own, to its in0 address (and, src not link-local, a datagram
// from src to sink, for FORWARD: the kernel forwards no packet from a
// link-local source) and describes the frames fw's lo sends meanwhile
// (with watchLo) and what reaches fw's sockets.
func rejectOwnSrcRound(t *testing.T, tp *nettest.Topology, src netip.Addr, fromSink, watchLo bool) string {
	t.Helper()
	in0, out0, ll := tp.FwIn.IPv6, tp.FwOut.IPv6, tp.FwIn.LinkLocal
	var c *nettest.Capture
	if watchLo {
		c = nettest.StartCapture(t, tp.FwNS, "lo", func(f nettest.Captured) bool {
			// As lo sends it (its receive side sees each frame again).
			return f.Outgoing && f.IPVersion == 6
		})
	}
	// fw's sockets: a raw ICMPv6 socket sees each error delivered, a
	// raw TCP socket each reset.
	icmp := rejectOwnSrcRawSocket(t, tp, unix.IPPROTO_ICMPV6)
	defer unix.Close(icmp)
	tcp := rejectOwnSrcRawSocket(t, tp, unix.IPPROTO_TCP)
	defer unix.Close(tcp)
	eth, ns, ifname := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}, tp.GenNS, nettest.GenIfname
	if fromSink {
		eth, ns, ifname = nettest.Ethernet{Dst: tp.FwOut.MAC, Src: tp.Sink.MAC}, tp.SinkNS, nettest.SinkIfname
	}
	frames := [][]byte{
		eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(src, 5330), netip.AddrPortFrom(in0, rejectOwnSrcUDP), []byte("own source"))),
		eth.Frame(nettest.TCPPacket(netip.AddrPortFrom(src, 5331), netip.AddrPortFrom(in0, rejectOwnSrcTCP), nettest.TCPSyn, 1, nil)),
	}
	if !src.IsLinkLocalUnicast() {
		frames = append(frames, eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(src, 5332), netip.AddrPortFrom(tp.Sink.IPv6, rejectOwnSrcFwd), []byte("forwarded"))))
	}
	if err := nettest.Inject(ns, ifname, frames...); err != nil {
		t.Fatalf("inject: %v", err)
	}
	time.Sleep(rejectOutSettle)
	// ICMPv6 destination unreachable (type 1); a TCP header with RST.
	errs := rejectOwnSrcReceived(icmp, func(b []byte) bool { return b[0] == 1 })
	resets := rejectOwnSrcReceived(tcp, func(b []byte) bool { return len(b) >= 20 && b[13]&0x04 != 0 })
	at := fmt.Sprintf("%d errors and %d reset at fw's sockets", errs, resets)
	if !watchLo {
		return "lo not watched; " + at
	}
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	name := func(a netip.Addr) string {
		switch a {
		case in0:
			return "in0"
		case out0:
			return "out0"
		case ll:
			return "in0's link-local"
		}
		return a.String()
	}
	var got []string
	for _, f := range c.Stop() {
		kind := "other"
		switch {
		case f.IsICMPUnreachable():
			kind = "port-unreachable"
		case f.IsTCPReset():
			kind = "reset"
		}
		got = append(got, fmt.Sprintf("%s %s>%s hop limit %d, %d bytes", kind, name(f.Src), name(f.Dst), f.TTL, len(f.Raw)))
	}
	if len(got) == 0 {
		return "nothing"
	}
	return strings.Join(got, "; ") + "; " + at
}

// rejectOwnSrcRawSocket opens a non-blocking raw IPv6 socket of protocol
// proto in fw (it receives what the stack delivers of that protocol,
// without the IPv6 header).
func rejectOwnSrcRawSocket(t *testing.T, tp *nettest.Topology, proto int) int {
	t.Helper()
	var fd int
	err := nettest.InNamespace(tp.FwNS, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
		return err
	})
	if err != nil {
		t.Fatalf("raw socket (protocol %d) in fw: %v", proto, err)
	}
	return fd
}

// rejectOwnSrcReceived reads everything queued on fd and counts the
// payloads match accepts.
func rejectOwnSrcReceived(fd int, match func([]byte) bool) int {
	n := 0
	buf := make([]byte, 2048)
	for {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return n
		}
		if m > 0 && match(buf[:m]) {
			n++
		}
	}
}

// compareOwnSrcRound checks round i (name) of an own-source REJECT test:
// what passed lo with the kernel must be want (the test's expectation of
// the oracle) and the same with xfw, and every counter the kernel's.
// It returns the kernel's counters, for the oracle's own check.
func compareOwnSrcRound(t *testing.T, name, want string, seen map[string][]string,
	saves map[string][]map[string]counter, i int) map[string]counter {
	t.Helper()
	k, x := seen["kernel"][i], seen["xfw"][i]
	t.Logf("%s: lo passed: kernel %q; xfw %q", name, k, x)
	if k != want {
		t.Errorf("%s: lo passed %q with the kernel, want %q (fix the test)", name, k, want)
	}
	if k != x {
		t.Errorf("%s: lo passed %q with the kernel, %q with xfw", name, k, x)
	}
	kc, xc := saves["kernel"][i], saves["xfw"][i]
	for key, c := range kc {
		if key[0] != ':' && !strings.Contains(key, " :") && xc[key] != c {
			t.Errorf("%s: counter %q: kernel %v, xfw %v", name, key, c, xc[key])
		}
	}
	return kc
}
