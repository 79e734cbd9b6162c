package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// An OUTPUT REJECT's reply for fw itself that OUTPUT REJECTs in turn,
// against the kernel. fw's raw socket sends a SYN from its out0 address to
// sink, which OUTPUT answers with a reset (for fw itself: from sink's
// address to fw's). The reset passes OUTPUT, where another REJECT answers
// it with an ICMP error (ipt_REJECT answers any packet but an ICMP error,
// and sends no reset for a reset): the kernel's, from fw's out0 address
// (the reset's destination, fw's own), routed to sink, passes OUTPUT and
// POSTROUTING with output device out0 and reaches sink unless OUTPUT drops
// it. xfw dropped the reset without an answer (bpf/xfw.c: its REJECT
// verdict on a reply ended it; found by xfw difftest, IPv4 seed 16, the
// errors counted in the kernel's OUTPUT only). Every rule's counter and
// what sink receives are compared.

// rejectReplyPort is the destination port of fw's SYN; each round adds
// its index.
const rejectReplyPort = 7340

// rejectReplyRules is a round's ruleset (ICMP-type stands for the
// family's ICMP protocol and its destination-unreachable type, UNREACH
// for its no-route REJECT type); with drop, OUTPUT drops the errors
// leaving by out0 (after counting them).
func rejectReplyRules(i int, drop bool) string {
	reply := []string{"-p ICMP-type", "-p tcp --tcp-flags RST RST"}
	var rules []string
	add := func(chains, suffix string) {
		for _, c := range strings.Fields(chains) {
			for _, m := range reply {
				rules = append(rules, "-A "+c+" "+m+suffix)
			}
		}
	}
	rules = append(rules, "*raw")
	add("OUTPUT", "")
	rules = append(rules, "COMMIT", "*mangle")
	add("OUTPUT POSTROUTING", "")
	add("OUTPUT POSTROUTING", " -o out0")
	rules = append(rules, "COMMIT", "*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]")
	add("INPUT FORWARD OUTPUT", "")
	add("OUTPUT", " -o out0")
	add("OUTPUT", " -o lo")
	if drop {
		rules = append(rules, "-A OUTPUT -p ICMP-type -o out0 -j DROP")
	}
	rules = append(rules,
		"-A OUTPUT -p tcp --tcp-flags RST RST -j REJECT --reject-with UNREACH",
		fmt.Sprintf("-A OUTPUT -o out0 -p tcp --dport %d -j REJECT --reject-with tcp-reset", rejectReplyPort+i),
		"COMMIT")
	return strings.Join(rules, "\n") + "\n"
}

// TestRejectReplyRejectedAgainstKernel compares the answer to an OUTPUT
// REJECT's reset for fw itself that OUTPUT REJECTs (see above), sent and
// dropped in OUTPUT, both families.
func TestRejectReplyRejectedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("ipv%d", fam), func(t *testing.T) {
			icmp, unreach := "icmp --icmp-type destination-unreachable", "icmp-net-unreachable"
			if fam == 6 {
				icmp, unreach = "ipv6-icmp --icmpv6-type destination-unreachable", "icmp6-no-route"
			}
			tw := newTwins(t, xfwPath(t))
			names := []string{"errors sent", "errors dropped in OUTPUT"}
			var mu sync.Mutex // guards seen and saves
			seen, saves := map[string][]string{}, map[string][]map[string]counter{}
			tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
				nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
				for i := range names {
					rules := strings.NewReplacer("ICMP-type", icmp, "UNREACH", unreach).Replace(rejectReplyRules(i, i == 1))
					fw.restore(t, tp, fam, rules)
					got := rejectReplySend(t, tp, fam, i)
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
			wants := map[int]string{4: "destination-unreachable from fw's out0 address, by out0, ttl 64, 82 bytes",
				6: "destination-unreachable from fw's out0 address, by out0, ttl 64, 122 bytes"}
			for i, name := range names {
				k, x := seen["kernel"][i], seen["xfw"][i]
				t.Logf("%s: sink received: kernel %q; xfw %q", name, k, x)
				want := wants[fam]
				if i == 1 {
					want = "nothing"
				}
				if k != want {
					t.Errorf("%s: sink received %q with the kernel, want %q (fix the test)", name, k, want)
				}
				if k != x {
					t.Errorf("%s: sink received %q with the kernel, %q with xfw", name, k, x)
				}
				kc, xc := saves["kernel"][i], saves["xfw"][i]
				for key, c := range kc {
					if key[0] != ':' && !strings.Contains(key, " :") && xc[key] != c {
						t.Errorf("%s: counter %q: kernel %v, xfw %v", name, key, c, xc[key])
					}
				}
				// The oracle's own check: the reset counted by
				// OUTPUT's counting rules (raw, mangle, filter,
				// filter -o lo), the error by OUTPUT's (raw,
				// mangle, mangle -o out0, filter, filter -o out0)
				// and, when sent, POSTROUTING's (mangle, mangle -o
				// out0).
				post := uint64(2)
				if i == 1 {
					post = 0
				}
				for chain, n := range map[string]map[string]uint64{
					"OUTPUT":      {"RST RST": 4, "icmp": 5},
					"POSTROUTING": {"RST RST": 0, "icmp": post},
				} {
					for reply, per := range n {
						if c := rejectLoCount(kc, chain, reply); c != per {
							t.Errorf("%s: the kernel's %s rules for %q counted %d packets, want %d (fix the test)", name, chain, reply, c, per)
						}
					}
				}
			}
		})
	}
}

// rejectReplySend sends, through fw's raw socket, round i's SYN from fw's
// out0 address to sink and describes what sink receives from fw: each
// packet's kind, source, sending device, TTL (hop limit) and length, or
// "nothing".
func rejectReplySend(t *testing.T, tp *nettest.Topology, fam, i int) string {
	t.Helper()
	_, _, sink := familyAddrs(tp, fam)
	out0 := tp.FwOut.IPv4
	if fam == 6 {
		out0 = tp.FwOut.IPv6
	}
	c := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == fam && !icmp6LinkChatter(f)
	})
	syn := nettest.TCPPacket(netip.AddrPortFrom(out0, uint16(5340+i)), netip.AddrPortFrom(sink, uint16(rejectReplyPort+i)), nettest.TCPSyn, 1, nil)
	// The kernel's REJECT fails the send (EPERM: NF_DROP), xfw's does
	// not (docs/differences.md); the reply comes all the same.
	if err := nettest.InNamespace(tp.FwNS, func() error { return sendRawIP(sink, syn) }); err != nil && !errors.Is(err, unix.EPERM) {
		t.Fatalf("send from fw: %v", err)
	}
	time.Sleep(rejectOutSettle)
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	var got []string
	for _, f := range c.Stop() {
		kind := "other"
		switch {
		case f.IsICMPUnreachable():
			kind = "destination-unreachable"
		case f.IsTCPReset():
			kind = "reset"
		}
		from := f.Src.String()
		if f.Src == out0 {
			from = "fw's out0 address"
		}
		by := f.SrcMAC.String()
		if by == tp.FwOut.MAC.String() {
			by = "out0"
		}
		got = append(got, fmt.Sprintf("%s from %s, by %s, ttl %d, %d bytes", kind, from, by, f.TTL, len(f.Raw)))
	}
	if len(got) == 0 {
		return "nothing"
	}
	return strings.Join(got, "; ")
}
