package e2e

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// IPv6 extension header matches (-m rt, -m frag, IPv6 -m ah) against
// ip6tables-legacy: every option, inverted and combined, headers cut
// short (the kernel's hotdrops), counters compared rule by rule.

// ext6 returns an IPv6 header template carrying hdrs.
func ext6(hdrs ...nettest.ExtHeader) nettest.IPv6 { return nettest.IPv6{Ext: hdrs} }

// ahHeader returns an authentication header with spi, a zero sequence
// number and extra bytes of ICV.
func ahHeader(reserved uint16, spi uint32, icv int) nettest.ExtHeader {
	data := []byte{byte(reserved >> 8), byte(reserved), byte(spi >> 24), byte(spi >> 16), byte(spi >> 8), byte(spi), 0, 0, 0, 1}
	return nettest.ExtHeader{Type: nettest.ProtoAH, Data: append(data, make([]byte, icv)...)}
}

// rt0Res returns a type-0 routing header with reserved set to res.
func rt0Res(res byte, addrs ...netip.Addr) nettest.ExtHeader {
	h := nettest.RoutingHeader(0, 0, addrs...)
	h.Data[5] = res
	return h
}

var (
	a1 = netip.MustParseAddr("2001:db8::1")
	a2 = netip.MustParseAddr("2001:db8::2")
	a3 = netip.MustParseAddr("2001:db8::3")
)

func ip6extCases() []matchCase {
	rt := nettest.RoutingHeader
	fh := nettest.FragmentHeader
	u := func(name string, h nettest.IPv6) probe { return p(name, udp6(0x10, 1, 2, h)) }
	return []matchCase{
		{name: "rt type 0", fam: 6, rule: "-m rt --rt-type 0",
			match:   []probe{u("type 0", ext6(rt(0, 0, a1))), u("type 0 after hop-by-hop", ext6(nettest.HopByHop(nettest.PadNOption(4)), rt(0, 0)))},
			nomatch: []probe{u("type 2", ext6(rt(2, 0, a1))), u("no routing header", ext6()), u("type 0 after a later fragment", ext6(fh(8, false, 1), rt(0, 0)))}},
		{name: "rt not type 4, segsleft range", fam: 6, rule: "-m rt ! --rt-type 4 --rt-segsleft 1:3",
			match:   []probe{u("type 0 segs 2", ext6(rt(0, 2, a1, a2)))},
			nomatch: []probe{u("type 4 segs 2", ext6(rt(4, 2, a1))), u("type 0 segs 0", ext6(rt(0, 0, a1))), u("type 0 segs 4", ext6(rt(0, 4, a1)))}},
		{name: "rt inverted segsleft and length", fam: 6, rule: "-m rt ! --rt-segsleft 2 ! --rt-len 24",
			match:   []probe{u("segs 1 len 40", ext6(rt(0, 1, a1, a2)))},
			nomatch: []probe{u("segs 2", ext6(rt(0, 2, a1, a2))), u("len 24", ext6(rt(0, 1, a1)))}},
		{name: "rt reserved and strict addresses", fam: 6, rule: "-m rt --rt-type 0 --rt-0-res --rt-0-addrs 2001:db8::1,2001:db8::2",
			match:   []probe{u("exact list", ext6(rt(0, 0, a1, a2)))},
			nomatch: []probe{u("reserved set", ext6(rt0Res(1, a1, a2))), u("longer list", ext6(rt(0, 0, a1, a2, a3))), u("other order", ext6(rt(0, 0, a2, a1)))}},
		{name: "rt not strict addresses", fam: 6, rule: "-m rt --rt-type 0 --rt-0-addrs 2001:db8::1,2001:db8::3 --rt-0-not-strict",
			match:   []probe{u("subsequence", ext6(rt(0, 0, a1, a2, a3)))},
			nomatch: []probe{u("other order", ext6(rt(0, 0, a3, a2, a1))), u("missing one", ext6(rt(0, 0, a1, a2)))}},
		{name: "rt hotdrops", fam: 6, rule: "-m rt --rt-type 0",
			match:   []probe{u("type 0", ext6(rt(0, 0)))},
			hotdrop: []probe{p("routing header cut to two bytes", raw6(0x10, 43, []byte{17, 0}, nettest.IPv6{})), p("routing header longer than the packet", raw6(0x10, 43, []byte{17, 2, 0, 0, 0, 0, 0, 0}, nettest.IPv6{}))}},
		{name: "frag id range, more", fam: 6, rule: "-m frag --fragid 5:9 --fragmore",
			match:   []probe{u("id 7 first, more", ext6(fh(0, true, 7)))},
			nomatch: []probe{u("id 10", ext6(fh(0, true, 10))), u("id 7 last", ext6(fh(0, false, 7)))}},
		{name: "frag not id, first, last", fam: 6, rule: "-m frag ! --fragid 3 --fragfirst --fraglast --fragres --fraglen 8",
			match:   []probe{u("id 4 atomic", ext6(fh(0, false, 4)))},
			nomatch: []probe{u("id 3", ext6(fh(0, false, 3))), u("later fragment", ext6(fh(8, false, 4))), u("no fragment header", ext6())}},
		{name: "frag hotdrop", fam: 6, rule: "-m frag",
			match:   []probe{u("fragment", ext6(fh(0, true, 1)))},
			hotdrop: []probe{p("fragment header cut to four bytes", raw6(0x10, 44, []byte{17, 0, 0, 1}, nettest.IPv6{}))}},
		{name: "ah spi, length, reserved", fam: 6, rule: "-m ah --ahspi 100:200 --ahlen 16 --ahres",
			match:   []probe{u("spi 150 len 16", ext6(ahHeader(0, 150, 2)))},
			nomatch: []probe{u("spi 201", ext6(ahHeader(0, 201, 2))), u("len 20", ext6(ahHeader(0, 150, 6))), u("reserved", ext6(ahHeader(1, 150, 2)))}},
		{name: "ah inverted", fam: 6, rule: "-m ah ! --ahspi 7 ! --ahlen 16",
			match:   []probe{u("spi 8 len 20", ext6(ahHeader(0, 8, 6)))},
			nomatch: []probe{u("spi 7", ext6(ahHeader(0, 7, 6))), u("len 16", ext6(ahHeader(0, 8, 2)))}},
		{name: "ah hotdrop", fam: 6, rule: "-m ah",
			match: []probe{u("ah", ext6(ahHeader(0, 1, 2)))},
			hotdrop: []probe{p("ah cut to eight bytes", raw6(0x10, 51, []byte{17, 4, 0, 0, 0, 0, 0, 1}, nettest.IPv6{})),
				p("ah longer than the packet", raw6(0x10, 51, []byte{17, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, nettest.IPv6{}))}},
		{name: "rt and frag combined", fam: 6, rule: "-m rt --rt-type 0 -m frag --fragfirst",
			match:   []probe{u("both", ext6(rt(0, 0), fh(0, true, 1)))},
			nomatch: []probe{u("rt only", ext6(rt(0, 0))), u("frag only", ext6(fh(0, true, 1)))}},
	}
}

func TestIP6ExtAgainstKernel(t *testing.T) {
	runMatchCases(t, ip6extCases())
}
