package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT replies to packets that arrived (INPUT, FORWARD) pass OUTPUT with
// the offending packet's connection attached, against the kernel: OUTPUT
// rules count the replies by connection state (RELATED, ESTABLISHED,
// INVALID, NEW), direction and protocol, then drop some of them. The
// offending packets: a new UDP datagram and a new SYN to fw and through it,
// a SYN,FIN (INVALID: its RST is tracked at OUTPUT on its own) and an
// ICMP echo request of an established echo "connection". What gen receives
// and every rule's counters are compared (bpf/reject_ct.h).

// rejectCtRules is the ruleset of one round; GEN stands for gen's address,
// ICMPP for the family's ICMP protocol.
func rejectCtRules(drop bool) string {
	rules := []string{
		"*filter", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]",
		"-A INPUT -p ICMPP -m conntrack --ctstate ESTABLISHED -j REJECT",
		"-A INPUT -p udp --dport 7200 -j REJECT",
		"-A INPUT -p tcp --dport 7201 -j REJECT --reject-with tcp-reset",
		"-A FORWARD -p udp --dport 7202 -j REJECT",
		"-A FORWARD -p tcp --dport 7203 -j REJECT --reject-with tcp-reset",
		"-A OUTPUT -d GEN -m conntrack --ctstate RELATED --ctdir ORIGINAL",
		"-A OUTPUT -d GEN -m conntrack --ctstate RELATED --ctdir REPLY",
		"-A OUTPUT -d GEN -p ICMPP -m conntrack --ctstate RELATED",
		"-A OUTPUT -d GEN -p tcp -m conntrack --ctstate RELATED",
		"-A OUTPUT -d GEN -p tcp -m conntrack --ctstate INVALID",
		"-A OUTPUT -d GEN -m conntrack --ctstate ESTABLISHED",
		"-A OUTPUT -d GEN -m conntrack --ctstate NEW",
		"-A OUTPUT -d GEN -m conntrack --ctstate UNTRACKED",
	}
	if drop {
		rules = append(rules,
			"-A OUTPUT -d GEN -p ICMPP -m state --state RELATED -j DROP",
			"-A OUTPUT -d GEN -p tcp -m conntrack --ctstate INVALID -j DROP")
	}
	return strings.Join(append(rules, "-A OUTPUT -d GEN", "COMMIT"), "\n") + "\n"
}

// rejectCtSeen is what gen received in a round.
type rejectCtSeen struct {
	unreachable, resets, echoReplies int
}

// rejectCtRound sends gen's packets and counts what gen receives. The echo
// request that opens the echo connection goes first and alone, so its
// reply is out before the second request (same identifier) arrives;
// another identifier each round i opens a new echo connection.
func rejectCtRound(t *testing.T, tp *nettest.Topology, fam, i int) rejectCtSeen {
	t.Helper()
	gen, fw, sink := familyAddrs(tp, fam)
	id := uint16(0x4200 + i)
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	open := [][]byte{eth.Frame(nettest.EchoRequest(gen, fw, id, 1, []byte("open")))}
	frames := [][]byte{
		eth.Frame(nettest.EchoRequest(gen, fw, id, 2, []byte("established"))),
		eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(gen, 5200), netip.AddrPortFrom(fw, 7200), []byte("input"))),
		eth.Frame(nettest.TCPPacket(netip.AddrPortFrom(gen, 5201), netip.AddrPortFrom(fw, 7201), nettest.TCPSyn, 1, nil)),
		eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(gen, 5202), netip.AddrPortFrom(sink, 7202), []byte("forward"))),
		eth.Frame(nettest.TCPPacket(netip.AddrPortFrom(gen, 5203), netip.AddrPortFrom(sink, 7203), nettest.TCPSyn, 1, nil)),
		eth.Frame(nettest.TCPPacket(netip.AddrPortFrom(gen, 5204), netip.AddrPortFrom(fw, 7201), nettest.TCPSyn|nettest.TCPFin, 1, nil)),
	}
	var seen rejectCtSeen
	for _, f := range genReceives(t, tp, fam, open, frames) {
		switch {
		case f.IsICMPUnreachable():
			seen.unreachable++
		case f.IsTCPReset():
			seen.resets++
		case (f.Protocol == nettest.ProtoICMP && f.ICMPType == nettest.ICMPv4EchoReply) ||
			(f.Protocol == nettest.ProtoICMPv6 && f.ICMPType == nettest.ICMPv6EchoReply):
			seen.echoReplies++
		}
	}
	return seen
}

// TestRejectConntrackAgainstKernel compares the connection state REJECT
// replies to INPUT and FORWARD packets have in OUTPUT (xfw_rjct_put_xdp,
// xfw_rjct_take_tc in bpf/reject_ct.h; xfw_rj_out_judge in bpf/xfw.c).
func TestRejectConntrackAgainstKernel(t *testing.T) {
	twinsPerFamily(t, rejectCtAgainstKernel)
}

func rejectCtAgainstKernel(t *testing.T, tw *twins, fam int) {
	icmp := "icmp"
	if fam == 6 {
		icmp = "icmpv6"
	}
	rulesets := []string{rejectCtRules(false), rejectCtRules(true)}
	for i, r := range rulesets {
		rulesets[i] = strings.ReplaceAll(r, "ICMPP", icmp)
	}
	seen, saves := twinRejectRounds(t, tw, fam, rulesets, rejectCtRound)
	if t.Failed() {
		return
	}
	for i, name := range []string{"counted", "RELATED ICMP and INVALID TCP dropped in OUTPUT"} {
		kc := compareRejectRound(t, name, seen["kernel"][i], seen["xfw"][i], saves["kernel"][i], saves["xfw"][i])
		// The comparison means something only if the kernel's
		// replies passed OUTPUT as RELATED.
		related := uint64(0)
		for key, c := range kc {
			if strings.Contains(key, "RELATED") {
				related += c.packets
			}
		}
		if related == 0 {
			t.Errorf("%s: no RELATED reply counted in the kernel's OUTPUT:\n%s", name, saves["kernel"][i])
		}
	}
}
