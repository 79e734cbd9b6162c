package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT replies' TTL / hop limit and the way OUTPUT replies reach fw
// itself, against the kernel. fw's namespace gets an IPv4 default TTL and
// IPv6 hop limits of its own (in0 and lo differ, out0 differs from both):
// the kernel's replies take ip_default_ttl (IPv4) or the hop_limit of the
// device they leave by (IPv6: in0 towards gen, lo towards fw itself). INPUT
// and FORWARD REJECT answer gen; OUTPUT REJECT answers fw's own datagram
// and SYN to gen, and those replies reach fw through lo, where lo's INPUT
// counts them as RELATED (IPv6 too). What gen and fw's lo receive and
// every rule's counter are compared (bpf/reject_route.h, bpf/reject.h).

// The sysctls fw's namespace gets, none of them the default 64.
const (
	rejectTTL4      = 33 // net.ipv4.ip_default_ttl
	rejectHopIn     = 44 // net.ipv6.conf.in0.hop_limit
	rejectHopLo     = 55 // net.ipv6.conf.lo.hop_limit
	rejectHopOut    = 47 // net.ipv6.conf.out0.hop_limit: no reply leaves by it
	rejectTTLOutUDP = 7200
	rejectTTLOutTCP = 7201
)

// rejectTTLRules: GEN stands for gen's address, ICMPP for the family's
// ICMP protocol.
const rejectTTLRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -p ICMPP -m conntrack --ctstate RELATED
-A INPUT -i lo -p tcp --tcp-flags RST RST -m conntrack --ctstate RELATED
-A INPUT -i lo -m conntrack --ctstate INVALID,NEW,UNTRACKED
-A INPUT -p udp --dport 7100 -j REJECT
-A INPUT -p tcp --dport 7101 -j REJECT --reject-with tcp-reset
-A FORWARD -p udp --dport 7102 -j REJECT
-A OUTPUT -d GEN -p udp --dport 7200 -j REJECT
-A OUTPUT -d GEN -p tcp --dport 7201 -j REJECT --reject-with tcp-reset
COMMIT
`

// TestRejectTTLAgainstKernel compares REJECT replies' TTL / hop limit
// (xfw_rj_ttl4, xfw_rj_hop_limit6) and the OUTPUT replies' way to fw
// through lo (xfw_rj_tc_via_lo).
func TestRejectTTLAgainstKernel(t *testing.T) {
	twinsPerFamily(t, func(t *testing.T, tw *twins, fam int) { rejectTTLAgainstKernel(t, tw, fam, true) })
}

// TestRejectNotForwardingAgainstKernel is the same on a host that does not
// forward (ip_forward, IPv6 forwarding off; no FORWARD packet): its INPUT
// replies must leave too (bpf_fib_lookup refuses every lookup there, and
// xfw_rj_send lets bpf_redirect_neigh route them).
func TestRejectNotForwardingAgainstKernel(t *testing.T) {
	twinsPerFamily(t, func(t *testing.T, tw *twins, fam int) { rejectTTLAgainstKernel(t, tw, fam, false) })
}

func rejectTTLAgainstKernel(t *testing.T, tw *twins, fam int, forward bool) {
	icmpp := "icmp"
	if fam == 6 {
		icmpp = "ipv6-icmp"
	}
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
		rejectTTLSysctls(t, tp)
		if !forward {
			nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0")
		}
	})
	rules := strings.ReplaceAll(rejectTTLRules, "ICMPP", icmpp)
	seen, saves := twinRejectRounds(t, tw, fam, []string{rules},
		func(t *testing.T, tp *nettest.Topology, fam, _ int) string {
			return strings.Join(rejectTTLRound(t, tp, fam, forward), "\n")
		})
	if t.Failed() {
		return
	}
	if want := strings.Join(rejectTTLWant(fam, forward), "\n"); seen["kernel"][0] != want {
		t.Errorf("the kernel's replies:\n%s\nwant:\n%s", seen["kernel"][0], want)
	}
	kc := compareRejectRound(t, "replies", seen["kernel"][0], seen["xfw"][0], saves["kernel"][0], saves["xfw"][0])
	for _, key := range []string{"INPUT -i lo -p " + icmpp + " -m conntrack", "INPUT -i lo -p tcp -m tcp --tcp-flags RST RST"} {
		if c := rejectTTLCounter(kc, key); c != 1 {
			t.Errorf("the kernel's rule %q counted %d packets, want 1 (the OUTPUT reply through lo)", key, c)
		}
	}
}

// rejectTTLSysctls gives fw's namespace its own TTL and hop limits (read
// by xfw at the restore that follows) and brings lo up, the way to fw's
// own sockets.
func rejectTTLSysctls(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
	for _, kv := range []string{
		fmt.Sprintf("net.ipv4.ip_default_ttl=%d", rejectTTL4),
		fmt.Sprintf("net.ipv6.conf.%s.hop_limit=%d", nettest.FwInIfname, rejectHopIn),
		fmt.Sprintf("net.ipv6.conf.%s.hop_limit=%d", nettest.FwOutIfname, rejectHopOut),
		fmt.Sprintf("net.ipv6.conf.lo.hop_limit=%d", rejectHopLo),
	} {
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", kv)
	}
}

// rejectTTLRound sends gen's packets (UDP and TCP to fw, with forward UDP
// through fw to sink) and fw's own (UDP and a SYN to gen, REJECTed in OUTPUT) and
// returns what fw's TCP socket saw and what gen and fw's lo received: each
// ICMP error and reset as "where kind ttl", sorted.
func rejectTTLRound(t *testing.T, tp *nettest.Topology, fam int, forward bool) []string {
	t.Helper()
	gen, fw, sink := familyAddrs(tp, fam)
	replies := func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == fam && (f.IsICMPError() || f.IsTCPReset())
	}
	atGen := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, replies)
	atLo := nettest.StartCapture(t, tp.FwNS, "lo", replies)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	frames := [][]byte{
		eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(gen, 5100), netip.AddrPortFrom(fw, 7100), []byte("input"))),
		eth.Frame(nettest.TCPPacket(netip.AddrPortFrom(gen, 5101), netip.AddrPortFrom(fw, 7101), nettest.TCPSyn, 1, nil)),
	}
	if forward {
		frames = append(frames, eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(gen, 5102), netip.AddrPortFrom(sink, 7102), []byte("forward"))))
	}
	if err := nettest.Inject(tp.GenNS, nettest.GenIfname, frames...); err != nil {
		t.Fatalf("inject: %v", err)
	}
	wait := nettest.WithTimeout(300 * time.Millisecond)
	nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(gen, rejectTTLOutUDP), []byte("output"), nettest.ExpectReply(), wait)
	// What fw's socket makes of the reset through lo (refused). (The
	// datagram's outcome differs: the kernel's send fails with EPERM,
	// xfw's succeeds and the error arrives after, docs/differences.md.)
	got := []string{"fw tcp " + string(nettest.TCPConnect(tp.FwNS, netip.AddrPortFrom(gen, rejectTTLOutTCP), wait).Outcome)}
	time.Sleep(rejectOutSettle)
	for where, c := range map[string]*nettest.Capture{"gen": atGen, "lo": atLo} {
		if err := c.Err(); err != nil {
			t.Fatalf("capture at %s: %v", where, err)
		}
		for _, f := range c.Stop() {
			kind := "reset"
			if f.IsICMPError() {
				kind = "icmp-error"
			}
			got = append(got, fmt.Sprintf("%s %s ttl %d", where, kind, f.TTL))
		}
	}
	slices.Sort(got)
	return got
}

// rejectTTLWant is what the kernel sends (an error about the forwarded
// packet when forward), fw's connection refused: IPv4 replies carry
// ip_default_ttl; IPv6 ones the hop limit of in0 (to gen) or lo (to fw).
func rejectTTLWant(fam int, forward bool) []string {
	toGen, toLo := rejectTTL4, rejectTTL4
	if fam == 6 {
		toGen, toLo = rejectHopIn, rejectHopLo
	}
	want := []string{
		"fw tcp " + string(nettest.Refused),
		fmt.Sprintf("gen icmp-error ttl %d", toGen), // INPUT
		fmt.Sprintf("gen reset ttl %d", toGen),
		fmt.Sprintf("lo icmp-error ttl %d", toLo),
		fmt.Sprintf("lo reset ttl %d", toLo),
	}
	if forward {
		want = append(want, fmt.Sprintf("gen icmp-error ttl %d", toGen))
	}
	slices.Sort(want)
	return want
}

// rejectTTLCounter returns the packets of the rule whose counters key
// (counters(): "CHAIN RULE-TEXT") starts with prefix.
func rejectTTLCounter(c map[string]counter, prefix string) uint64 {
	for key, v := range c {
		if strings.HasPrefix(key, prefix) {
			return v.packets
		}
	}
	return 0
}
