package e2e

import (
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m length on IPv6 packets whose payload length is 0 with a hop-by-hop
// header next (a jumbogram without its jumbo option, which ip6_rcv_core
// lets through whole): the kernel's length_mt6 compares skb->len (since
// Linux 6.3), the packet's real length, not the payload length field plus
// 40 (difftest ipv6 seed 37: `! --length 100:576` and a 104-byte packet).

// ipv6PayloadLenOff is the payload length field's offset in an Ethernet
// frame carrying IPv6.
const ipv6PayloadLenOff = 14 + 4

// zeroPayloadLen gives the frame b builds a payload length of 0.
func zeroPayloadLen(b func(*nettest.Topology) []byte) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		f := b(tp)
		f[ipv6PayloadLenOff], f[ipv6PayloadLenOff+1] = 0, 0
		return f
	}
}

func length6Cases() []matchCase {
	hbh := ext6(nettest.HopByHop(nettest.PadNOption(4)))
	ra := ext6(nettest.HopByHop(nettest.RouterAlertOption(0)))
	// 40 + 8 (hop-by-hop) + 8 (UDP) + 9 ("xfw-probe") bytes.
	jumbo := p("payload length 0, 65 bytes", zeroPayloadLen(udp6(0x10, 1, 2, hbh)))
	jumboRA := p("payload length 0, router alert, 65 bytes", zeroPayloadLen(udp6(0x10, 1, 2, ra)))
	whole := p("payload length 25, 65 bytes", udp6(0x10, 1, 2, hbh))
	return []matchCase{
		{name: "length of a jumbogram without jumbo option", fam: 6, rule: "-m length --length 60:70",
			match: []probe{jumbo, jumboRA, whole}},
		{name: "not 40 bytes", fam: 6, rule: "-m length --length 0:40",
			nomatch: []probe{jumbo, jumboRA, whole}},
		{name: "inverted range", fam: 6, rule: "-m length ! --length 41:99",
			nomatch: []probe{jumbo, jumboRA, whole}},
	}
}

func TestLength6JumboAgainstKernel(t *testing.T) {
	runMatchCases(t, length6Cases())
}
