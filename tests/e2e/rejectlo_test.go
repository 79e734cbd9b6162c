package e2e

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT replies to packets fw sends itself (to its own in0 address,
// through lo), against the kernel. The kernel's reply, whether the packet
// was rejected in INPUT or in OUTPUT, leaves by lo through raw, mangle and
// filter OUTPUT and mangle POSTROUTING, then comes back through raw and
// mangle PREROUTING, mangle and filter INPUT, RELATED to the packet's
// connection, and the sender sees ECONNREFUSED; when OUTPUT drops it,
// nothing arrives (bpf/reject_send.h: lo's XDP hook hands the reply to
// lo's TCX ingress, which judges it in OUTPUT and sends it back through
// lo). Every rule's counter and what fw's sockets see are compared.

// The ports fw's own packets go to: REJECTed in INPUT (UDP, TCP) and in
// OUTPUT (UDP, TCP).
const (
	rejectLoInUDP  = 7300
	rejectLoInTCP  = 7301
	rejectLoOutUDP = 7302
	rejectLoOutTCP = 7303
)

// rejectLoRules is the ruleset of a round: ICMP-type stands for the
// family's ICMP protocol and type option; with drop, OUTPUT drops the
// replies (after counting them).
func rejectLoRules(drop bool) string {
	reply := []string{"-p ICMP-type port-unreachable", "-p tcp --tcp-flags RST RST"}
	var rules []string
	add := func(chains string, suffix string) {
		for _, c := range strings.Fields(chains) {
			for _, r := range reply {
				rules = append(rules, "-A "+c+" "+r+suffix)
			}
		}
	}
	rules = append(rules, "*raw")
	add("PREROUTING OUTPUT", "")
	rules = append(rules, "COMMIT", "*mangle")
	add("PREROUTING INPUT OUTPUT POSTROUTING", "")
	rules = append(rules, "COMMIT", "*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]")
	add("INPUT OUTPUT", " -m conntrack --ctstate RELATED")
	if drop {
		add("OUTPUT", " -j DROP")
	}
	rules = append(rules,
		"-A INPUT -i lo -p udp --dport 7300 -j REJECT",
		"-A INPUT -i lo -p tcp --dport 7301 -j REJECT --reject-with tcp-reset",
		"-A OUTPUT -o lo -p udp --dport 7302 -j REJECT",
		"-A OUTPUT -o lo -p tcp --dport 7303 -j REJECT --reject-with tcp-reset",
		"COMMIT")
	return strings.Join(rules, "\n") + "\n"
}

// TestRejectLoopbackAgainstKernel compares REJECT replies to packets fw
// sent itself through lo, REJECTed in INPUT and in OUTPUT, with OUTPUT
// counting the replies, then dropping them.
func TestRejectLoopbackAgainstKernel(t *testing.T) {
	twinsPerFamily(t, rejectLoAgainstKernel)
}

func rejectLoAgainstKernel(t *testing.T, tw *twins, fam int) {
	icmp := "icmp -m icmp --icmp-type"
	if fam == 6 {
		icmp = "ipv6-icmp -m icmp6 --icmpv6-type"
	}
	names := []string{"replies counted", "replies dropped in OUTPUT"}
	wants := []string{"in udp refused, in tcp refused, out udp refused, out tcp refused",
		"in udp timed-out, in tcp timed-out, out udp timed-out, out tcp timed-out"}
	var mu sync.Mutex // guards seen and saves
	seen, saves := map[string][]string{}, map[string][]map[string]counter{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		for i := range names {
			fw.restore(t, tp, fam, strings.ReplaceAll(rejectLoRules(i == 1), "ICMP-type", icmp))
			got := rejectLoRound(t, tp, fam)
			c := rejectLoCounters(t, tp, fw, fam)
			mu.Lock()
			seen[kind] = append(seen[kind], got)
			saves[kind] = append(saves[kind], c)
			mu.Unlock()
		}
	})
	if t.Failed() {
		return
	}
	for i, name := range names {
		k, x := seen["kernel"][i], seen["xfw"][i]
		t.Logf("%s: kernel %s; xfw %s", name, k, x)
		if k != wants[i] {
			t.Errorf("%s: fw's sockets saw %q with the kernel, want %q (fix the test)", name, k, wants[i])
		}
		if k != x {
			t.Errorf("%s: fw's sockets saw %q with the kernel, %q with xfw", name, k, x)
		}
		kc, xc := saves["kernel"][i], saves["xfw"][i]
		for key, c := range kc {
			if key[0] != ':' && !strings.Contains(key, " :") && xc[key] != c {
				t.Errorf("%s: counter %q: kernel %v, xfw %v", name, key, c, xc[key])
			}
		}
		// The oracle's own check that the rules see the replies (two
		// ICMP errors, two resets): each counted once by every
		// counting rule of the chains it passes (PREROUTING: raw and
		// mangle; INPUT: mangle and filter; OUTPUT: raw, mangle and
		// filter; POSTROUTING: mangle), only by OUTPUT's when OUTPUT
		// drops them.
		rules := map[string]uint64{"PREROUTING": 2, "INPUT": 2, "OUTPUT": 3, "POSTROUTING": 1}
		for chain, n := range rules {
			if i == 1 && chain != "OUTPUT" {
				n = 0
			}
			for _, reply := range []string{"icmp", "RST RST"} {
				if c := rejectLoCount(kc, chain, reply); c != 2*n {
					t.Errorf("%s: the kernel's %s rules for %q counted %d packets, want %d (fix the test)", name, chain, reply, c, 2*n)
				}
			}
		}
	}
}

// rejectLoCounters returns fw's counters of the raw, mangle and filter
// tables, each key prefixed with its table ("raw OUTPUT -p ...").
func rejectLoCounters(t *testing.T, tp *nettest.Topology, fw firewall, fam int) map[string]counter {
	t.Helper()
	all := map[string]counter{}
	for _, table := range []string{"raw", "mangle", "filter"} {
		argv := append(fw.cmd(fam, "-save"), "-c", "-t", table)
		res, err := nettest.Exec(tp.FwNS, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s save -t %s failed (%v): %s", fw.kind, table, err, res.Stderr)
		}
		for key, c := range counters(t, res.Stdout) {
			all[table+" "+key] = c
		}
	}
	return all
}

// rejectLoCount sums the packets of the counting rules (no target) of
// chain, any table, whose text holds reply.
func rejectLoCount(c map[string]counter, chain, reply string) uint64 {
	var n uint64
	for key, v := range c {
		f := strings.SplitN(key, " ", 3)
		if len(f) == 3 && f[1] == chain && strings.Contains(f[2], reply) && !strings.Contains(f[2], "-j ") {
			n += v.packets
		}
	}
	return n
}

// rejectLoRound sends fw's four packets to its own in0 address and
// returns what its sockets saw.
func rejectLoRound(t *testing.T, tp *nettest.Topology, fam int) string {
	t.Helper()
	_, fw, _ := familyAddrs(tp, fam)
	wait := nettest.WithTimeout(500 * time.Millisecond)
	got := []string{
		"in udp " + string(nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(fw, rejectLoInUDP), []byte("in"), nettest.ExpectReply(), wait).Outcome),
		"in tcp " + string(nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(fw, rejectLoInTCP), wait).Outcome),
		"out udp " + rejectLoUDPError(t, tp.FwNS, netip.AddrPortFrom(fw, rejectLoOutUDP)),
		"out tcp " + string(nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(fw, rejectLoOutTCP), wait).Outcome),
	}
	return strings.Join(got, ", ")
}

// rejectLoUDPError sends a datagram to dst from a connected socket in ns
// and reports whether an ICMP error refused it ("refused") or nothing came
// ("timed-out"). The send's own result is not looked at: the kernel's
// OUTPUT REJECT fails it with EPERM, xfw's lets it succeed (the error
// arrives all the same, docs/differences.md).
func rejectLoUDPError(t *testing.T, ns string, dst netip.AddrPort) string {
	t.Helper()
	var res string
	err := nettest.InNamespace(ns, func() error {
		conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		_, _ = conn.Write([]byte("out"))
		if err := conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
			return err
		}
		_, err = conn.Read(make([]byte, 64))
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			res = "refused"
		case errors.As(err, &ne) && ne.Timeout():
			res = "timed-out"
		default:
			res = "unexpected: " + errString(err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("udp in %s: %v", ns, err)
	}
	return res
}

// errString is err's text, "nil" for none.
func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
