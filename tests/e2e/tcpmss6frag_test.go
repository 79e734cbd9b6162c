package e2e

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m tcpmss on IPv6 later fragments: ip6tables gives the match the IPv6
// header itself as the TCP header (ipv6_find_hdr leaves a later
// fragment's transport offset at 0), so the data offset is the source
// address's fifth byte and the options the bytes after the header's
// twentieth: below 5 the kernel hotdrops the fragment, else the source
// address's last four bytes are the options (difftest ipv6 seed 27: an
// INPUT REJECT by -m tcpmss and fragmented TCP segments to fw).

// later6From builds a TCP later fragment src → sink, its payload bytes
// that would give an MSS of 1460 if they were read as the TCP header.
func later6From(src netip.Addr) func(*nettest.Topology) []byte {
	return func(tp *nettest.Topology) []byte {
		h := nettest.IPv6{Src: src, Dst: tp.Sink.IPv6, NextHeader: nettest.ProtoTCP,
			Ext: []nettest.ExtHeader{nettest.FragmentHeader(16, false, 7)}}
		payload := []byte{0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x02, 0x02, 0x00, 0, 0, 0, 0, 2, 4, 0x05, 0xb4}
		return frame(tp, h.Packet(nettest.Raw{Proto: nettest.ProtoTCP, Data: payload}))
	}
}

func tcpmss6FragCases() []matchCase {
	// The fifth byte 0x60: a 24-byte "header" whose options are the last
	// four bytes of the source address.
	mss1460 := netip.MustParseAddr("2001:db8:6000::204:5b4")
	noMSS := netip.MustParseAddr("2001:db8:6000::1")
	short := netip.MustParseAddr("2001:db8:1::1") // fifth byte 0: data offset 0
	return []matchCase{
		{name: "later fragment read from the IPv6 header", fam: 6, rule: "-p tcp -m tcpmss --mss 1460",
			match:   []probe{p("source ending in an MSS option of 1460", later6From(mss1460))},
			hotdrop: []probe{p("source's fifth byte 0", later6From(short))},
			nomatch: []probe{p("source without an MSS option", later6From(noMSS))}},
		{name: "inverted", fam: 6, rule: "-p tcp -m tcpmss ! --mss 536",
			match:   []probe{p("MSS 1460 from the source", later6From(mss1460))},
			hotdrop: []probe{p("source's fifth byte 0", later6From(short))}},
	}
}

func TestTCPMSS6LaterFragmentsAgainstKernel(t *testing.T) {
	runMatchCases(t, tcpmss6FragCases())
}
