package e2e

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT replies to packets that arrived pass OUTPUT, against the kernel:
// INPUT and FORWARD REJECT (an ICMP error and a TCP reset) with counting
// rules in OUTPUT for the replies, then with a DROP in OUTPUT for the ICMP
// errors. What gen receives and every rule's counters are compared.

// rejectOutSettle is how long a round waits for the replies to arrive.
const rejectOutSettle = 500 * time.Millisecond

// rejectOutRules is the ruleset of one round; GEN stands for gen's
// address, ICMP-type the family's ICMP protocol and type option. The last
// rule counts every reply to gen.
func rejectOutRules(dropICMP bool) string {
	rules := []string{
		"*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
		"-A INPUT -p udp --dport 7100 -j REJECT",
		"-A INPUT -p tcp --dport 7101 -j REJECT --reject-with tcp-reset",
		"-A FORWARD -p udp --dport 7102 -j REJECT",
		"-A OUTPUT -o in0 -p ICMP-type port-unreachable",
		"-A OUTPUT -o in0 -p tcp --tcp-flags RST RST",
	}
	if dropICMP {
		rules = append(rules, "-A OUTPUT -d GEN -p ICMP-type port-unreachable -j DROP")
	}
	return strings.Join(append(rules, "-A OUTPUT -d GEN", "COMMIT"), "\n") + "\n"
}

// rejectOutSeen is what gen received in a round.
type rejectOutSeen struct {
	unreachable, resets int
}

// countGenReplies injects frames at fw and counts the ICMP unreachables
// and TCP resets gen receives back.
func countGenReplies(t *testing.T, tp *nettest.Topology, fam int, frames [][]byte) rejectOutSeen {
	t.Helper()
	var seen rejectOutSeen
	for _, f := range genReceives(t, tp, fam, frames) {
		switch {
		case f.IsICMPUnreachable():
			seen.unreachable++
		case f.IsTCPReset():
			seen.resets++
		}
	}
	return seen
}

// rejectOutRound injects gen's three packets (UDP and TCP to fw, UDP
// through fw to sink) and counts the replies gen receives.
func rejectOutRound(t *testing.T, tp *nettest.Topology, fam int, _ int) rejectOutSeen {
	t.Helper()
	gen, fw, sink := familyAddrs(tp, fam)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	frames := [][]byte{
		eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(gen, 5100), netip.AddrPortFrom(fw, 7100), []byte("input"))),
		eth.Frame(nettest.TCPPacket(netip.AddrPortFrom(gen, 5101), netip.AddrPortFrom(fw, 7101), nettest.TCPSyn, 1, nil)),
		eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(gen, 5102), netip.AddrPortFrom(sink, 7102), []byte("forward"))),
	}
	return countGenReplies(t, tp, fam, frames)
}

// familyAddrs returns gen's, fw's (in0) and sink's addresses of family fam.
func familyAddrs(tp *nettest.Topology, fam int) (gen, fw, sink netip.Addr) {
	if fam == 6 {
		return tp.Gen.IPv6, tp.FwIn.IPv6, tp.Sink.IPv6
	}
	return tp.Gen.IPv4, tp.FwIn.IPv4, tp.Sink.IPv4
}

// genReceives injects each batch of frames at gen (waiting rejectOutSettle
// after each, so a batch's replies are out before the next one) and
// returns the frames of family fam gen received meanwhile.
func genReceives(t *testing.T, tp *nettest.Topology, fam int, batches ...[][]byte) []nettest.Captured {
	t.Helper()
	c := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == fam
	})
	for _, frames := range batches {
		if err := nettest.Inject(tp.GenNS, nettest.GenIfname, frames...); err != nil {
			t.Fatalf("inject: %v", err)
		}
		time.Sleep(rejectOutSettle)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	return c.Stop()
}

// TestRejectOutputAgainstKernel compares REJECT replies passing OUTPUT
// (xfw_rj_out_judge in bpf/xfw.c, called by xfw_tc_ingress).
func TestRejectOutputAgainstKernel(t *testing.T) {
	twinsPerFamily(t, rejectOutAgainstKernel)
}

func rejectOutAgainstKernel(t *testing.T, tw *twins, fam int) {
	icmp := "icmp --icmp-type"
	if fam == 6 {
		icmp = "icmpv6 --icmpv6-type"
	}
	rulesets := []string{rejectOutRules(false), rejectOutRules(true)}
	for i, r := range rulesets {
		rulesets[i] = strings.ReplaceAll(r, "ICMP-type", icmp)
	}
	seen, saves := twinRejectRounds(t, tw, fam, rulesets, rejectOutRound)
	if t.Failed() {
		return
	}
	for i, name := range []string{"counted", "ICMP errors dropped in OUTPUT"} {
		compareRejectRound(t, name, seen["kernel"][i], seen["xfw"][i], saves["kernel"][i], saves["xfw"][i])
		if want := (rejectOutSeen{unreachable: 2 * (1 - i), resets: 1}); seen["kernel"][i] != want {
			t.Errorf("%s: the kernel's replies %+v, want %+v", name, seen["kernel"][i], want)
		}
	}
}

// twinRejectRounds loads each ruleset (GEN standing for gen's address) on
// both twins in turn and runs round (i: the ruleset's index) after each;
// it returns, per firewall, what each round saw and the save after it
// (gen's address as GEN).
func twinRejectRounds[S any](t *testing.T, tw *twins, fam int, rulesets []string,
	round func(t *testing.T, tp *nettest.Topology, fam, i int) S) (seen map[string][]S, saves map[string][]string) {
	var mu sync.Mutex // guards seen and saves
	seen, saves = map[string][]S{}, map[string][]string{}
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		gen, _, _ := familyAddrs(tp, fam)
		for i, rules := range rulesets {
			fw.restore(t, tp, fam, strings.ReplaceAll(rules, "GEN", gen.String()))
			got := round(t, tp, fam, i)
			save := strings.ReplaceAll(fw.save(t, tp, fam), gen.String(), "GEN")
			mu.Lock()
			seen[kind] = append(seen[kind], got)
			saves[kind] = append(saves[kind], save)
			mu.Unlock()
		}
	})
	return seen, saves
}

// compareRejectRound fails the test when the kernel's and xfw's round
// name differ in what gen received (k, x) or in any rule's counter
// (ksave, xsave); it returns the kernel's counters.
func compareRejectRound[S comparable](t *testing.T, name string, k, x S, ksave, xsave string) map[string]counter {
	t.Helper()
	t.Logf("%s: kernel %+v, xfw %+v", name, k, x)
	if k != x {
		t.Errorf("%s: gen received %+v from the kernel, %+v from xfw", name, k, x)
	}
	kc, xc := counters(t, ksave), counters(t, xsave)
	// Not the policy: xfw's restore makes fw re-send its IPv6
	// listener reports (docs/differences.md), which it counts.
	for key, c := range kc {
		if key[0] != ':' && xc[key] != c {
			t.Errorf("%s: counter %q: kernel %v, xfw %v", name, key, c, xc[key])
		}
	}
	return kc
}
