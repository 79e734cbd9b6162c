package e2e

import (
	"net"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT about IPv4 packets to a broadcast address, against the kernel:
// nf_send_reset and icmp_send send nothing about a packet whose route is
// a broadcast one (RTCF_BROADCAST), whether its frame is unicast or
// broadcast; a packet to fw's own address in a broadcast frame gets the
// kernel's reset but no ICMP error ("no replies to physical broadcast").
// gen sends a TCP segment and a UDP datagram to in0's subnet broadcast in
// a unicast and in a broadcast frame, and both to fw's address in a
// broadcast frame; what gen receives and every counter are compared
// (bpf/reject_plan.h; found by xfw difftest, ipt-save-filter.txt).

// rejectBcastRules: INPUT REJECTs, OUTPUT counts the replies.
const rejectBcastRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 7400 -j REJECT --reject-with tcp-reset
-A INPUT -p udp --dport 7401 -j REJECT
-A OUTPUT -p tcp --tcp-flags RST RST
-A OUTPUT -p icmp --icmp-type port-unreachable
COMMIT
`

// TestRejectBroadcastAgainstKernel compares REJECT about packets to an
// IPv4 broadcast address.
func TestRejectBroadcastAgainstKernel(t *testing.T) {
	tw := newTwins(t, xfwPath(t))
	seen, saves := twinRejectRounds(t, tw, 4, []string{rejectBcastRules}, rejectBcastRound)
	if t.Failed() {
		return
	}
	compareRejectRound(t, "broadcast", seen["kernel"][0], seen["xfw"][0], saves["kernel"][0], saves["xfw"][0])
	// The oracle: only the segment to fw's address is answered.
	if want := (rejectOutSeen{resets: 1}); seen["kernel"][0] != want {
		t.Errorf("the kernel's replies %+v, want %+v (fix the test)", seen["kernel"][0], want)
	}
}

// rejectBcastRound injects gen's six packets and counts the replies.
func rejectBcastRound(t *testing.T, tp *nettest.Topology, fam, _ int) rejectOutSeen {
	t.Helper()
	gen, fw, _ := familyAddrs(tp, fam)
	bcast := subnetBroadcast4(tp.GenNet4)
	unicast := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	broadcast := nettest.Ethernet{Dst: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: tp.Gen.MAC}
	packets := func(dst netip.Addr) [][]byte {
		return [][]byte{
			nettest.TCPPacket(netip.AddrPortFrom(gen, 5400), netip.AddrPortFrom(dst, 7400), nettest.TCPAck, 1, nil),
			nettest.UDPPacket(netip.AddrPortFrom(gen, 5401), netip.AddrPortFrom(dst, 7401), []byte("bcast")),
		}
	}
	var frames [][]byte
	for _, p := range packets(bcast) {
		frames = append(frames, unicast.Frame(p), broadcast.Frame(p))
	}
	for _, p := range packets(fw) {
		frames = append(frames, broadcast.Frame(p))
	}
	return countGenReplies(t, tp, fam, frames)
}

// subnetBroadcast4 returns the subnet-directed broadcast address of p.
func subnetBroadcast4(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	for i := p.Bits(); i < 32; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(a)
}
