package e2e

import (
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Transport bytes of odd packets read as the kernel reads them: multiport
// on TCP and UDP headers cut short (multiport_mt reads the first four
// bytes, hotdropping under four), hashlimit's keys of ESP and AH packets
// (hashlimit_init_dst reads four bytes at proto_ports_offset as ports:
// the SPI's halves of ESP and AH), of short TCP and UDP headers and of
// IPv4 later fragments (their payload; IPv6 later fragments have none),
// and ecn's TCP bits of later fragments (IPv4: the payload's; IPv6: the
// IPv6 header's, at par->thoff 0).

// espSPI builds an ESP packet's first bytes: the SPI and a sequence
// number.
func espSPI(hi, lo uint16) []byte {
	return []byte{byte(hi >> 8), byte(hi), byte(lo >> 8), byte(lo), 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef}
}

// ahHdr builds an AH header (next header, payload length, reserved, SPI,
// sequence number, a 12-byte ICV).
func ahHdr(next, plen byte, reserved, spi uint16) []byte {
	b := []byte{next, plen, byte(reserved >> 8), byte(reserved), 0, 0, byte(spi >> 8), byte(spi), 0, 0, 0, 1}
	return append(b, make([]byte, 12)...)
}

// shortTCP builds a TCP header cut to n bytes (n ≥ 4), ports sport → dport.
func shortTCP(sport, dport uint16, n int) []byte {
	b := make([]byte, n)
	b[0], b[1], b[2], b[3] = byte(sport>>8), byte(sport), byte(dport>>8), byte(dport)
	return b
}

// laterTCP is a later fragment's payload whose bytes, read as a TCP
// header, have ports sport → dport and flags byte flags.
func laterTCP(sport, dport uint16, flags byte) []byte {
	b := shortTCP(sport, dport, 24)
	b[12], b[13] = 0x50, flags
	return b
}

func l4OddCases() []matchCase {
	later := nettest.IPv4{FragOffset: 4}
	later6 := nettest.IPv6{Ext: []nettest.ExtHeader{nettest.FragmentHeader(16, false, 9)}}
	const ece, cwr = 0x40, 0x80
	return []matchCase{
		// multiport on short headers.
		{name: "multiport, TCP header of 10 bytes", fam: 4, rule: "-p tcp -m multiport --dports 80",
			match:   []probe{p("10 bytes to 80", raw4(10, 6, shortTCP(1234, 80, 10), nettest.IPv4{})), p("4 bytes to 80", raw4(10, 6, shortTCP(1234, 80, 4), nettest.IPv4{}))},
			hotdrop: []probe{p("3 bytes", raw4(10, 6, []byte{0, 1, 0}, nettest.IPv4{}))},
			nomatch: []probe{p("10 bytes to 81", raw4(10, 6, shortTCP(1234, 81, 10), nettest.IPv4{}))}},
		{name: "multiport, UDP header of 6 bytes", fam: 4, rule: "-p udp -m multiport --ports 53",
			match:   []probe{p("6 bytes from 53", raw4(10, 17, shortTCP(53, 9, 6), nettest.IPv4{}))},
			hotdrop: []probe{p("2 bytes", raw4(10, 17, []byte{0, 53}, nettest.IPv4{}))},
			nomatch: []probe{p("6 bytes 9 → 9", raw4(10, 17, shortTCP(9, 9, 6), nettest.IPv4{}))}},
		{name: "multiport inverted, short TCP header", fam: 4, rule: "-p tcp -m multiport ! --sports 1234",
			match:   []probe{p("8 bytes from 99", raw4(10, 6, shortTCP(99, 80, 8), nettest.IPv4{}))},
			hotdrop: []probe{p("1 byte", raw4(10, 6, []byte{4}, nettest.IPv4{}))},
			nomatch: []probe{p("8 bytes from 1234", raw4(10, 6, shortTCP(1234, 80, 8), nettest.IPv4{}))}},
		{name: "v6 multiport, TCP header of 12 bytes", fam: 6, rule: "-p tcp -m multiport --dports 80",
			match:   []probe{p("12 bytes to 80", raw6(0x10, 6, shortTCP(1234, 80, 12), nettest.IPv6{}))},
			hotdrop: []probe{p("3 bytes", raw6(0x10, 6, []byte{0, 1, 0}, nettest.IPv6{}))},
			nomatch: []probe{p("12 bytes to 81", raw6(0x10, 6, shortTCP(1234, 81, 12), nettest.IPv6{}))}},
		{name: "multiport then tcp, short TCP header", fam: 4, rule: "-p tcp -m multiport --dports 80 -m tcp --sport 1234",
			match:   []probe{p("1234 → 80", tcp4(10, 1234, 80, nettest.TCPSyn, nettest.IPv4{}))},
			hotdrop: []probe{p("10 bytes to 80: tcp's hotdrop", raw4(10, 6, shortTCP(99, 80, 10), nettest.IPv4{})), p("3 bytes: multiport's hotdrop", raw4(10, 6, []byte{0, 1, 0}, nettest.IPv4{}))},
			nomatch: []probe{p("10 bytes to 81: multiport fails first", raw4(10, 6, shortTCP(1234, 81, 10), nettest.IPv4{})), p("99 → 80", tcp4(10, 99, 80, nettest.TCPSyn, nettest.IPv4{}))}},
		{name: "tcp then multiport, short TCP header", fam: 4, rule: "-p tcp -m tcp --sport 1234 -m multiport --dports 80",
			match:   []probe{p("1234 → 80", tcp4(10, 1234, 80, nettest.TCPSyn, nettest.IPv4{}))},
			hotdrop: []probe{p("10 bytes to 81: tcp's hotdrop", raw4(10, 6, shortTCP(1234, 81, 10), nettest.IPv4{}))},
			nomatch: []probe{p("1234 → 81", tcp4(10, 1234, 81, nettest.TCPSyn, nettest.IPv4{}))}},
		// Without multiport the port arrays have no cut-short part
		// (compiler NoShortPorts): tcp and udp still hotdrop every
		// header cut short, after its ports or before them.
		{name: "tcp without multiport, short TCP header", fam: 4, rule: "-p tcp -m tcp --dport 80",
			match:   []probe{p("1234 → 80", tcp4(10, 1234, 80, nettest.TCPSyn, nettest.IPv4{}))},
			hotdrop: []probe{p("10 bytes to 80", raw4(10, 6, shortTCP(1234, 80, 10), nettest.IPv4{})), p("10 bytes to 81", raw4(10, 6, shortTCP(1234, 81, 10), nettest.IPv4{})), p("3 bytes", raw4(10, 6, []byte{0, 1, 0}, nettest.IPv4{}))},
			nomatch: []probe{p("1234 → 81", tcp4(10, 1234, 81, nettest.TCPSyn, nettest.IPv4{}))}},
		{name: "udp without multiport, short UDP header", fam: 4, rule: "-p udp -m udp ! --sport 53",
			hotdrop: []probe{p("6 bytes from 53", raw4(10, 17, shortTCP(53, 9, 6), nettest.IPv4{})), p("6 bytes from 9", raw4(10, 17, shortTCP(9, 9, 6), nettest.IPv4{}))},
			nomatch: []probe{p("TCP 9 → 9", tcp4(10, 9, 9, nettest.TCPSyn, nettest.IPv4{}))}},
		{name: "v6 tcp without multiport, short TCP header", fam: 6, rule: "-p tcp -m tcp --sport 1234",
			hotdrop: []probe{p("12 bytes from 1234", raw6(0x10, 6, shortTCP(1234, 80, 12), nettest.IPv6{})), p("12 bytes from 99", raw6(0x10, 6, shortTCP(99, 80, 12), nettest.IPv6{}))}},
		{name: "multiport, TCP fragment at offset 8", fam: 4, rule: "-p tcp -m multiport ! --dports 80",
			nomatch: []probe{p("offset-1 fragment", raw4(10, 6, []byte("0123456789abcdef"), nettest.IPv4{FragOffset: 1})), p("to 80", tcp4(10, 1, 80, nettest.TCPSyn, nettest.IPv4{}))}},
		{name: "multiport and udp, short UDP header", fam: 4, rule: "-p udp -m udp --dport 53 -m multiport --sports 1:100",
			hotdrop: []probe{p("6 bytes 9 → 9", raw4(10, 17, shortTCP(9, 9, 6), nettest.IPv4{}))},
			match:   []probe{p("9 → 53", udp4(10, 9, 53, nettest.IPv4{}))},
			nomatch: []probe{p("200 → 53", udp4(10, 200, 53, nettest.IPv4{}))}},
		// ecn's TCP bits on later fragments.
		{name: "ecn ece, later fragment", fam: 4, rule: "-p tcp -m ecn --ecn-tcp-ece",
			match:   []probe{p("payload's ECE set", raw4(10, 6, laterTCP(1, 2, ece), later))},
			nomatch: []probe{p("payload's ECE clear", raw4(10, 6, laterTCP(1, 2, 0), later))}},
		{name: "ecn not cwr, later fragment", fam: 4, rule: "-p tcp -m ecn ! --ecn-tcp-cwr",
			match:   []probe{p("payload's CWR clear", raw4(10, 6, laterTCP(1, 2, ece), later))},
			nomatch: []probe{p("payload's CWR set", raw4(10, 6, laterTCP(1, 2, cwr), later))}},
		{name: "ecn ece, TCP fragment at offset 8", fam: 4, rule: "-p tcp -m ecn --ecn-tcp-ece",
			match:   []probe{p("payload's ECE set", raw4(10, 6, laterTCP(1, 2, ece), nettest.IPv4{FragOffset: 1}))},
			nomatch: []probe{p("payload's ECE clear", raw4(10, 6, laterTCP(1, 2, 0), nettest.IPv4{FragOffset: 1})), p("payload of 16 bytes", raw4(10, 6, laterTCP(1, 2, ece)[:16], nettest.IPv4{FragOffset: 1}))}},
		{name: "tcp flags then ecn, TCP fragment at offset 8", fam: 4, rule: "-p tcp -m tcp --tcp-flags SYN NONE -m ecn --ecn-tcp-ece",
			hotdrop: []probe{p("payload's ECE set", raw4(10, 6, laterTCP(1, 2, ece), nettest.IPv4{FragOffset: 1})), p("payload's ECE clear", raw4(10, 6, laterTCP(1, 2, 0), nettest.IPv4{FragOffset: 1}))}},
		{name: "ecn then tcp flags, TCP fragment at offset 8", fam: 4, rule: "-p tcp -m ecn --ecn-tcp-ece -m tcp --tcp-flags SYN NONE",
			hotdrop: []probe{p("payload's ECE set", raw4(10, 6, laterTCP(1, 2, ece), nettest.IPv4{FragOffset: 1}))},
			nomatch: []probe{p("payload's ECE clear", raw4(10, 6, laterTCP(1, 2, 0), nettest.IPv4{FragOffset: 1}))}},
		{name: "v6 ecn ece, later fragment", fam: 6, rule: "-p tcp -m ecn --ecn-tcp-ece",
			match:   []probe{p("source's sixth byte 0x40", later6From(netip.MustParseAddr("2001:db8:40::1")))},
			nomatch: []probe{p("source's sixth byte 0x80", later6From(netip.MustParseAddr("2001:db8:80::1")))}},
		{name: "v6 ecn not cwr, later fragment", fam: 6, rule: "-p tcp -m ecn ! --ecn-tcp-cwr",
			match:   []probe{p("source's sixth byte 0x40", later6From(netip.MustParseAddr("2001:db8:40::1")))},
			nomatch: []probe{p("source's sixth byte 0x80", later6From(netip.MustParseAddr("2001:db8:80::1")))}},
		// hashlimit keys: the first packet of a key matches (upto, burst
		// 1), the next of that key does not.
		{name: "hashlimit ESP by the SPI's halves", fam: 4,
			rule:    "-p esp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode dstport --hashlimit-name hlesp",
			match:   []probe{p("SPI 1:2", raw4(10, 50, espSPI(1, 2), nettest.IPv4{})), p("SPI 1:3", raw4(10, 50, espSPI(1, 3), nettest.IPv4{}))},
			nomatch: []probe{p("SPI 7:2", raw4(10, 50, espSPI(7, 2), nettest.IPv4{}))}},
		{name: "hashlimit AH by its SPI's halves", fam: 4,
			rule:    "-p ah -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcport,dstport --hashlimit-name hlah",
			match:   []probe{p("SPI 0:1", raw4(10, 51, ahHdr(59, 4, 0, 1), nettest.IPv4{})), p("SPI 0:2", raw4(10, 51, ahHdr(59, 4, 0, 2), nettest.IPv4{}))},
			nomatch: []probe{p("SPI 0:1 again, other first bytes", raw4(10, 51, ahHdr(6, 5, 7, 1), nettest.IPv4{}))}},
		{name: "v6 hashlimit ESP by the SPI's halves", fam: 6,
			rule:    "-p esp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcport,dstport --hashlimit-name hlesp6",
			match:   []probe{p("SPI 1:2", raw6(0x10, 50, espSPI(1, 2), nettest.IPv6{})), p("SPI 2:2", raw6(0x10, 50, espSPI(2, 2), nettest.IPv6{}))},
			nomatch: []probe{p("SPI 1:2 again", raw6(0x10, 50, espSPI(1, 2), nettest.IPv6{}))}},
		{name: "v6 hashlimit, no next header", fam: 6,
			rule:    "-m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode dstport --hashlimit-name hlnone6",
			match:   []probe{p("UDP", udp6(0x10, 1, 2, nettest.IPv6{})), p("GRE: no ports, key 0", raw6(0x10, 47, []byte{0, 0, 8, 0}, nettest.IPv6{}))},
			hotdrop: []probe{p("no next header", raw6(0x10, 59, []byte("0123456789abcdef"), nettest.IPv6{}))},
			nomatch: []probe{p("GRE again", raw6(0x10, 47, []byte{0, 0, 8, 0}, nettest.IPv6{}))}},
		{name: "v6 hashlimit, extension header cut short", fam: 6,
			rule:    "-m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcport --hashlimit-name hlbad6",
			match:   []probe{p("UDP", udp6(0x10, 1, 2, nettest.IPv6{}))},
			hotdrop: []probe{p("destination options cut to one byte", raw6(0x10, 60, []byte{17}, nettest.IPv6{})), p("destination options longer than the packet", raw6(0x10, 60, []byte{17, 4, 1, 2}, nettest.IPv6{}))},
			nomatch: []probe{p("UDP from 1 again", udp6(0x10, 1, 3, nettest.IPv6{}))}},
		{name: "hashlimit short TCP header", fam: 4,
			rule:    "-p tcp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode dstport --hashlimit-name hlshort",
			match:   []probe{p("10 bytes to 80", raw4(10, 6, shortTCP(1234, 80, 10), nettest.IPv4{})), p("4 bytes to 81", raw4(10, 6, shortTCP(1234, 81, 4), nettest.IPv4{}))},
			hotdrop: []probe{p("3 bytes", raw4(10, 6, []byte{0, 1, 0}, nettest.IPv4{}))},
			nomatch: []probe{p("6 bytes to 80 again", raw4(10, 6, shortTCP(99, 80, 6), nettest.IPv4{}))}},
		{name: "hashlimit short UDP header", fam: 4,
			rule:    "-p udp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode srcport --hashlimit-name hlshortu",
			match:   []probe{p("5 bytes from 80", raw4(10, 17, shortTCP(80, 1, 5), nettest.IPv4{}))},
			nomatch: []probe{p("5 bytes from 80 again", raw4(10, 17, shortTCP(80, 2, 5), nettest.IPv4{}))}},
		{name: "hashlimit later fragment", fam: 4,
			rule:    "-p udp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode dstport --hashlimit-name hlfrag",
			match:   []probe{p("payload to 80", raw4(10, 17, laterTCP(1, 80, 0), later)), p("payload to 81", raw4(10, 17, laterTCP(1, 81, 0), later))},
			nomatch: []probe{p("payload to 80 again", raw4(10, 17, laterTCP(2, 80, 0), later))}},
		{name: "v6 hashlimit later fragment", fam: 6,
			rule:    "-p udp -m hashlimit --hashlimit-upto 1/hour --hashlimit-burst 1 --hashlimit-mode dstport --hashlimit-name hlfrag6",
			match:   []probe{p("payload to 80", raw6(0x10, 17, laterTCP(1, 80, 0), later6))},
			nomatch: []probe{p("payload to 81: no ports either", raw6(0x10, 17, laterTCP(1, 81, 0), later6))}},
	}
}

// TestL4OddReadsAgainstKernel runs l4OddCases through xfw and the kernel.
func TestL4OddReadsAgainstKernel(t *testing.T) {
	runMatchCases(t, l4OddCases())
}
