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

// Hop-by-hop options ip6_rcv_core refuses before any chain
// (ipv6_parse_hopopts), past the first 64 bytes of a long header and in a
// jumbo option (ipv6_hop_jumbo: with payload length 0 the option would
// give the packet's length, which must exceed 65535 and fit in the frame;
// a smaller one gets a parameter problem, a larger one is dropped). The
// rule matches every packet: a probe the stack drops is neither counted
// nor delivered, one it keeps is counted and dropped by the rule.

// optTypeDiscard is an unknown option type the kernel drops the packet for
// (action bits 10: discard and send a parameter problem).
const optTypeDiscard = 0x80 | optTypeUnknown

// optJumbo is the jumbo payload option (RFC 2675) giving length n.
func optJumbo(n uint32) []byte {
	return nettest.TLVOption(0xc2, []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func hopByHopCases() []matchCase {
	hbh := nettest.HopByHop
	// 2 + 72 bytes of an option the kernel skips: a 80-byte header.
	long := ext6(hbh(optTLV(optTypeUnknown, 70), nettest.PadNOption(6)))
	// The discarding option 74 bytes in.
	longBad := ext6(hbh(optTLV(optTypeUnknown, 70), optTLV(optTypeDiscard, 2)))
	// A jumbo option 70 bytes in (aligned as ipv6_hop_jumbo wants: 4n+2).
	longJumbo := ext6(hbh(optTLV(optTypeUnknown, 66), optJumbo(100)))
	// Nine options the kernel skips, the last past 64 bytes
	// (max_hbh_opts_number is 8).
	var nine [][]byte
	for i := 0; i < 9; i++ {
		nine = append(nine, optTLV(optTypeUnknown, 6))
	}
	long9 := ext6(hbh(nine...))
	// A header as long as the link's MTU lets (1296 bytes), the
	// discarding option last.
	var most [][]byte
	for i := 0; i < 5; i++ {
		most = append(most, optTLV(optTypeUnknown, 255))
	}
	mostBad := ext6(hbh(append(most, optTLV(optTypeUnknown, 3), optTLV(optTypeDiscard, 0))...))
	mostOK := ext6(hbh(append(most, optTLV(optTypeUnknown, 7))...))
	jumbo := ext6(hbh(optJumbo(100)))
	bigJumbo := ext6(hbh(optJumbo(70000)))
	return []matchCase{
		{name: "options past 64 bytes", fam: 6, rule: "-m length --length 0:65535",
			match: []probe{p("80-byte header", udp6(0x10, 1, 2, long)),
				p("80-byte header, payload length 0", zeroPayloadLen(udp6(0x10, 1, 2, long))),
				p("1296-byte header", udp6(0x10, 1, 2, mostOK))},
			hotdrop: []probe{p("discarding option 74 bytes in", udp6(0x10, 1, 2, longBad)),
				p("discarding option 74 bytes in, payload length 0", zeroPayloadLen(udp6(0x10, 1, 2, longBad))),
				p("nine options", udp6(0x10, 1, 2, long9)),
				p("discarding option 1292 bytes in", udp6(0x10, 1, 2, mostBad)),
				p("jumbo option 70 bytes in, payload length 0", zeroPayloadLen(udp6(0x10, 1, 2, longJumbo))),
				p("jumbo option 70 bytes in", udp6(0x10, 1, 2, longJumbo)),
				p("jumbo option 100, payload length 0", zeroPayloadLen(udp6(0x10, 1, 2, jumbo))),
				p("jumbo option 70000, payload length 0", zeroPayloadLen(udp6(0x10, 1, 2, bigJumbo)))}},
	}
}

func TestIPv6HopByHopAgainstKernel(t *testing.T) {
	runMatchCases(t, hopByHopCases())
}
