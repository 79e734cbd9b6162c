package e2e

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m owner in OUTPUT (and mangle POSTROUTING) for REJECT's replies,
// against the kernel: icmp_send and icmp6_send send an ICMP error from the
// namespace's ICMP socket, a kernel socket without a file (--socket-exists
// and ! --uid-owner match it, --uid-owner and --gid-owner do not),
// nf_send_reset and nf_send_reset6 a TCP reset without a socket. Replies
// to packets REJECTed in INPUT (from gen, and from fw itself through lo),
// in FORWARD, and in OUTPUT (for fw itself, and for another host: a raw
// packet with sink's source, whose reply is routed out of out0), next to
// the stack's own errors (a closed port's), every rule's counters
// compared after each (bpf/owner.h xfw_owner_reply).

// The ports REJECTed in each chain (UDP: an ICMP error, TCP: a reset) and
// the closed ports the stack answers itself.
const (
	ownerRjInUDP      = 7400
	ownerRjInTCP      = 7401
	ownerRjFwdUDP     = 7402
	ownerRjFwdTCP     = 7403
	ownerRjOutUDP     = 7404
	ownerRjOutTCP     = 7405
	ownerRjClosedUDP  = 7409
	ownerRjClosedTCP  = 7410
	ownerRjTCPSrcPort = 4010
)

// ownerRejectRules returns the ruleset of TestOwnerRejectAgainstKernel
// for family fam: counting rules for the replies (ICMP port unreachable,
// TCP RST) with every owner test, then the REJECT rules.
func ownerRejectRules(fam int) string {
	icmp := "-p icmp -m icmp --icmp-type 3"
	if fam == 6 {
		icmp = "-p ipv6-icmp -m icmp6 --icmpv6-type 1"
	}
	owners := []string{"--socket-exists", "! --socket-exists", "--uid-owner 0", "! --uid-owner 0",
		"--gid-owner 0", "! --gid-owner 0", "--uid-owner 1000-2000", "! --socket-exists ! --uid-owner 0",
		"--socket-exists ! --gid-owner 0"}
	rules := []string{"*mangle"}
	for _, sel := range []string{icmp, "-p tcp -m tcp --tcp-flags RST RST"} {
		for _, o := range []string{"--socket-exists", "! --socket-exists", "! --uid-owner 0"} {
			rules = append(rules, "-A POSTROUTING "+sel+" -m owner "+o)
		}
	}
	rules = append(rules, "COMMIT", "*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]")
	for _, sel := range []string{icmp, "-p tcp -m tcp --tcp-flags RST RST"} {
		for _, o := range owners {
			rules = append(rules, "-A OUTPUT "+sel+" -m owner "+o)
		}
	}
	rules = append(rules,
		fmt.Sprintf("-A INPUT -p udp -m udp --dport %d -j REJECT", ownerRjInUDP),
		fmt.Sprintf("-A INPUT -p tcp -m tcp --dport %d -j REJECT --reject-with tcp-reset", ownerRjInTCP),
		fmt.Sprintf("-A FORWARD -p udp -m udp --dport %d -j REJECT", ownerRjFwdUDP),
		fmt.Sprintf("-A FORWARD -p tcp -m tcp --dport %d -j REJECT --reject-with tcp-reset", ownerRjFwdTCP),
		fmt.Sprintf("-A OUTPUT -p udp -m udp --dport %d -j REJECT", ownerRjOutUDP),
		fmt.Sprintf("-A OUTPUT -p tcp -m tcp --dport %d -j REJECT --reject-with tcp-reset", ownerRjOutTCP),
		"COMMIT")
	return strings.Join(rules, "\n") + "\n"
}

// ownerRjFrame returns a frame from gen to dst (fw's in0 address, or
// sink's) of family fam: a datagram, or a SYN when tcp, to port.
func ownerRjFrame(fam int, toSink, tcp bool, port uint16) func(tp *nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		gen, fw, sink := familyAddrs(tp, fam)
		dst := fw
		if toSink {
			dst = sink
		}
		return tp.GenToFw().Frame(ownerRjPacket(gen, dst, tcp, port))
	}
}

// ownerRjPacket is a datagram, or a SYN when tcp, from src to dst port.
func ownerRjPacket(src, dst netip.Addr, tcp bool, port uint16) []byte {
	if tcp {
		return nettest.IPPacket(src, dst, nettest.TCP{SrcPort: ownerRjTCPSrcPort, DstPort: port, Seq: 1000,
			Flags: nettest.TCPSyn, Window: 512})
	}
	return nettest.IPPacket(src, dst, nettest.UDP{SrcPort: 4011, DstPort: port, Payload: []byte("xfw-owner-reject")})
}

// ownerRjFromFw returns a probe run sending, from a socket of fw, a
// datagram (or a connection attempt when tcp) to port of gen's address or
// (self) fw's own in0 address, through lo.
func ownerRjFromFw(fam int, self, tcp bool, port uint16) func(t *testing.T, tp *nettest.Topology) {
	return func(t *testing.T, tp *nettest.Topology) {
		gen, fw, _ := familyAddrs(tp, fam)
		dst := gen
		if self {
			dst = fw
		}
		wait := nettest.WithTimeout(300 * time.Millisecond)
		if tcp {
			nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(dst, port), wait)
			return
		}
		nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(dst, port), []byte("xfw-owner-reject"), wait)
	}
}

// ownerRjSpoofed returns a probe run sending, through a raw socket of fw,
// a datagram (or a SYN when tcp) to gen port with sink's address as its
// source: REJECTed in OUTPUT, its reply goes to sink, routed out of out0.
func ownerRjSpoofed(fam int, tcp bool, port uint16) func(t *testing.T, tp *nettest.Topology) {
	return func(t *testing.T, tp *nettest.Topology) {
		gen, _, sink := familyAddrs(tp, fam)
		pkt := ownerRjPacket(sink, gen, tcp, port)
		err := nettest.InNamespace(tp.FwNS, func() error {
			domain := unix.AF_INET6
			var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: gen.As16()}
			if fam == 4 {
				domain, sa = unix.AF_INET, &unix.SockaddrInet4{Addr: gen.As4()}
			}
			fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
			if err != nil {
				return fmt.Errorf("raw socket: %w", err)
			}
			defer unix.Close(fd)
			// The kernel's OUTPUT REJECT fails the send (EPERM).
			if err := unix.Sendto(fd, pkt, 0, sa); err != nil && err != unix.EPERM {
				return fmt.Errorf("send: %w", err)
			}
			return nil
		})
		if err != nil {
			t.Errorf("send from fw: %v", err)
		}
	}
}

// TestOwnerRejectAgainstKernel checks -m owner in OUTPUT and POSTROUTING
// for REJECT's ICMP errors and resets (INPUT, FORWARD, OUTPUT, through lo)
// and the stack's own errors, against the kernel, in both families.
func TestOwnerRejectAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		silenceSink(t, tp)
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		fw.restore(t, tp, 4, ownerRejectRules(4))
		fw.restore(t, tp, 6, ownerRejectRules(6))
	})
	if t.Failed() {
		return
	}
	for _, fam := range []int{4, 6} {
		probes := []typeProbe{
			{name: "INPUT REJECT: port unreachable", fam: fam, frame: ownerRjFrame(fam, false, false, ownerRjInUDP)},
			{name: "INPUT REJECT: reset", fam: fam, frame: ownerRjFrame(fam, false, true, ownerRjInTCP)},
			{name: "FORWARD REJECT: port unreachable", fam: fam, frame: ownerRjFrame(fam, true, false, ownerRjFwdUDP)},
			{name: "FORWARD REJECT: reset", fam: fam, frame: ownerRjFrame(fam, true, true, ownerRjFwdTCP)},
			{name: "OUTPUT REJECT: port unreachable for fw", fam: fam, run: ownerRjFromFw(fam, false, false, ownerRjOutUDP)},
			{name: "OUTPUT REJECT: reset for fw", fam: fam, run: ownerRjFromFw(fam, false, true, ownerRjOutTCP)},
			{name: "INPUT REJECT through lo: port unreachable", fam: fam, run: ownerRjFromFw(fam, true, false, ownerRjInUDP)},
			{name: "INPUT REJECT through lo: reset", fam: fam, run: ownerRjFromFw(fam, true, true, ownerRjInTCP)},
			{name: "OUTPUT REJECT: port unreachable routed to sink", fam: fam, run: ownerRjSpoofed(fam, false, ownerRjOutUDP)},
			{name: "OUTPUT REJECT: reset routed to sink", fam: fam, run: ownerRjSpoofed(fam, true, ownerRjOutTCP)},
			{name: "the stack's port unreachable", fam: fam, frame: ownerRjFrame(fam, false, false, ownerRjClosedUDP)},
			{name: "the stack's reset", fam: fam, frame: ownerRjFrame(fam, false, true, ownerRjClosedTCP)},
		}
		before := ownerRjCounters(t, tw, fam)
		for _, pr := range probes {
			before = ownerRjCompare(t, tw, pr, before)
		}
	}
}

// ownerRjCounters returns each twin's counters (tableCounters) of family
// fam's tables.
func ownerRjCounters(t *testing.T, tw *twins, fam int) map[string]map[string]uint64 {
	t.Helper()
	out := map[string]map[string]uint64{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		drainFw(t, tp)
		res, err := nettest.Exec(tp.FwNS, append(fw.cmd(fam, "-save"), "-c")...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s save: %v %s", kind, err, res.Stderr)
			return
		}
		mu.Lock()
		out[kind] = tableCounters(res.Stdout)
		mu.Unlock()
	})
	return out
}

// ownerRjCompare sends probe pr in both twins and compares what each rule
// counted of it (the counters' growth since before); it returns the new
// counters. The oracle's own check: the probe's one reply passed the
// kernel's filter OUTPUT (it has a socket or none).
func ownerRjCompare(t *testing.T, tw *twins, pr typeProbe, before map[string]map[string]uint64) map[string]map[string]uint64 {
	t.Helper()
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) { sendTypeProbe(t, tp, pr) })
	after := ownerRjCounters(t, tw, pr.fam)
	k, x := after["kernel"], after["xfw"]
	var keys []string
	for key := range k {
		if !strings.Contains(key, " :") {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	var replies uint64
	for _, key := range keys {
		dk, dx := k[key]-before["kernel"][key], x[key]-before["xfw"][key]
		if dk != dx {
			t.Errorf("IPv%d %s: %s: kernel %d, xfw %d", pr.fam, pr.name, key, dk, dx)
		}
		if strings.HasPrefix(key, "filter -A OUTPUT ") &&
			(strings.HasSuffix(key, "-m owner --socket-exists") || strings.HasSuffix(key, "-m owner ! --socket-exists")) {
			replies += dk
		}
	}
	if replies != 1 {
		t.Errorf("IPv%d %s: the kernel's OUTPUT counted %d replies, want 1 (fix the test)", pr.fam, pr.name, replies)
	}
	return after
}
