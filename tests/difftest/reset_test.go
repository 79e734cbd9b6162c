package difftest_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/difftest"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// TestRejectOutputResetToFw compares the TCP reset REJECT sends in OUTPUT
// about fw's own SYN, as fw's sockets see it. The kernel's IPv4 reset
// (nf_send_reset) leaves its checksum to the device (CHECKSUM_PARTIAL:
// the field holds the pseudo-header sum) and goes to fw through lo, whose
// checksum offload cannot be turned off, so fw's sockets see the
// pseudo-header sum; xfw's carried the complete checksum (difftest
// conntrack seed 14, `-A OUTPUT -p tcp -j REJECT --reject-with
// tcp-reset`). A SYN to a host beyond gen and one to fw's other address
// (over lo); each firewall must deliver each reset to fw's sockets, byte
// for byte the same. Then the kernel's reset passes lo's INPUT, whose rule
// drops it; xfw's entered fw's device and passed no INPUT (difftest
// conntrack seed 19, where the kernel's INPUT dropped resets of INVALID
// state): neither may reach fw's sockets. (IPv6's reset carries a complete
// checksum, and xfw's still passes no INPUT: docs/differences.md.)
func TestRejectOutputResetToFw(t *testing.T) {
	s := session(t, ir.IPv4)
	p := s.Plan()
	rules := func(input string) string {
		return "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + input +
			"-A OUTPUT -p tcp --syn -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	}
	var probes []difftest.Probe
	for i, to := range []netip.Addr{p.FarGen.Addr().Next(), p.FwIn} {
		syn := nettest.TCPPacket(netip.AddrPortFrom(p.FwOut, 80), netip.AddrPortFrom(to, uint16(1023+i)),
			nettest.TCPSyn, 0, []byte("ab"))
		probes = append(probes, difftest.Probe{From: difftest.FromFw, Path: difftest.PathOutput,
			Frames: [][]byte{syn}, Note: fmt.Sprintf("fw's syn to %s", to)})
	}
	corpus := &difftest.Corpus{Probes: probes}
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's reset to fw", Ruleset: rules(""), Corpus: corpus},
		[2]int{2, 2}, "each reset at fw's sockets")
	checkObserved(t, s, difftest.Case{Name: "OUTPUT REJECT's reset to fw dropped in lo's INPUT",
		Ruleset: rules("-A INPUT -i lo -p tcp --tcp-flags RST RST -j DROP\n"), Corpus: corpus},
		[2]int{0, 0}, "no reset at fw's sockets")
}
