package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// -m hbh, -m dst, -m ipv6header and -m mh against ip6tables-legacy: every
// option, inverted and combined, headers cut short (the kernel's hotdrops
// and its quiet "false"), counters compared rule by rule; in FORWARD
// (frames from gen) and in OUTPUT (packets fw sends through a raw socket).

// optTLV is an option of type typ with n data bytes.
func optTLV(typ uint8, n int) []byte { return nettest.TLVOption(typ, make([]byte, n)) }

// rawDst is a destination options header whose options area is data
// (padded to 8 bytes with PadN).
func rawDst(data ...byte) nettest.ExtHeader {
	return nettest.ExtHeader{Type: nettest.ProtoDestOpts, Data: data}
}

// mhHeader is a Mobility Header of type typ whose payload protocol is
// proto (59: none, as the kernel requires).
func mhHeader(proto, typ uint8) []byte { return []byte{proto, 0, typ, 0, 0, 0, 0, 0} }

// optTypeUnknown is an option type the kernel skips (action bits 00).
const optTypeUnknown = 30

func ip6hdrCases() []matchCase {
	hbh, dst := nettest.HopByHop, nettest.DestOpts
	fh := nettest.FragmentHeader
	u := func(name string, h nettest.IPv6) probe { return p(name, udp6(0x10, 1, 2, h)) }
	hbh8 := hbh(nettest.PadNOption(4))
	hbh16 := hbh(optTLV(optTypeUnknown, 8))
	return []matchCase{
		{name: "hbh length", fam: 6, rule: "-m hbh --hbh-len 8",
			match:   []probe{u("hbh 8 bytes", ext6(hbh8)), u("hbh 8 then dst", ext6(hbh8, dst(nettest.PadNOption(4))))},
			nomatch: []probe{u("hbh 16 bytes", ext6(hbh16)), u("no hbh", ext6()), u("dst only", ext6(dst(nettest.PadNOption(4))))}},
		{name: "hbh inverted length", fam: 6, rule: "-m hbh ! --hbh-len 8",
			match:   []probe{u("hbh 16 bytes", ext6(hbh16))},
			nomatch: []probe{u("hbh 8 bytes", ext6(hbh8)), u("no hbh", ext6())}},
		{name: "hbh options in order", fam: 6, rule: "-m hbh --hbh-opts 30:2,1",
			match: []probe{u("30:2 then PadN", ext6(hbh(optTLV(optTypeUnknown, 2))))},
			nomatch: []probe{u("30:3", ext6(hbh(optTLV(optTypeUnknown, 3)))), u("31:2", ext6(hbh(optTLV(optTypeUnknown+1, 2)))),
				u("PadN first", ext6(hbh(nettest.PadNOption(2), optTLV(optTypeUnknown, 2))))}},
		{name: "hbh Pad1 counts as an option", fam: 6, rule: "-m hbh --hbh-opts 0,30:1 --hbh-len 8",
			match:   []probe{u("Pad1 then 30:1", ext6(hbh(nettest.PadNOption(1), optTLV(optTypeUnknown, 1))))},
			nomatch: []probe{u("30:1 without Pad1", ext6(hbh(optTLV(optTypeUnknown, 1))))}},
		{name: "dst length and options", fam: 6, rule: "-m dst --dst-len 16 --dst-opts 30:8,1:2",
			match: []probe{u("dst 30:8 PadN", ext6(dst(optTLV(optTypeUnknown, 8))))},
			nomatch: []probe{u("dst 30:8 in hbh", ext6(hbh(optTLV(optTypeUnknown, 8)))), u("dst 30:4", ext6(dst(optTLV(optTypeUnknown, 4)))),
				u("dst 30:8 PadN of 3", ext6(dst(optTLV(optTypeUnknown, 8), nettest.PadNOption(3))))}},
		{name: "dst last option may run past the header", fam: 6, rule: "-m dst --dst-opts 1,30",
			match:   []probe{u("PadN then 30 of 200 bytes", ext6(rawDst(1, 0, optTypeUnknown, 200)))},
			nomatch: []probe{u("30 first", ext6(rawDst(optTypeUnknown, 200)))}},
		{name: "dst option overrun before the last", fam: 6, rule: "-m dst ! --dst-len 9 --dst-opts 30,1",
			match:   []probe{u("30:2 PadN", ext6(dst(optTLV(optTypeUnknown, 2))))},
			nomatch: []probe{u("30 of 200 bytes", ext6(rawDst(optTypeUnknown, 200, 1, 0)))}},
		// A header longer than the packet is dropped by the kernel before
		// FORWARD (ip6_forward's xfrm policy check decodes the chain):
		// TestIP6ExtOutputAgainstKernel sends it from fw.
		{name: "dst hotdrops", fam: 6, rule: "-m dst",
			match: []probe{u("dst", ext6(dst(nettest.PadNOption(4))))},
			hotdrop: []probe{p("dst cut to one byte", raw6(0x10, 60, []byte{17}, nettest.IPv6{})),
				p("dst behind a routing header longer than the packet", raw6(0x10, 43, []byte{60, 2, 0, 0, 0, 0, 0, 0}, nettest.IPv6{}))}},
		{name: "hbh hotdrop", fam: 6, rule: "-m hbh",
			match:   []probe{u("hbh", ext6(hbh8))},
			hotdrop: []probe{p("hbh behind a dst longer than the packet", raw6(0x10, 60, []byte{0, 2, 1, 4, 0, 0, 0, 0}, nettest.IPv6{}))}},
		{name: "ipv6header exact", fam: 6, rule: "-m ipv6header --header hop,dst,prot",
			match:   []probe{u("hbh dst udp", ext6(hbh8, dst(nettest.PadNOption(4))))},
			nomatch: []probe{u("hbh udp", ext6(hbh8)), u("dst udp", ext6(dst(nettest.PadNOption(4)))), u("udp", ext6())}},
		{name: "ipv6header soft", fam: 6, rule: "-m ipv6header --header hop-by-hop --soft",
			match:   []probe{u("hbh udp", ext6(hbh8)), u("hbh dst udp", ext6(hbh8, dst(nettest.PadNOption(4))))},
			nomatch: []probe{u("dst udp", ext6(dst(nettest.PadNOption(4)))), u("udp", ext6())}},
		{name: "ipv6header inverted exact", fam: 6, rule: "-m ipv6header ! --header hop,protocol",
			match:   []probe{u("dst udp", ext6(dst(nettest.PadNOption(4)))), u("udp", ext6())},
			nomatch: []probe{u("hbh udp", ext6(hbh8)), p("dst cut to one byte (false)", raw6(0x10, 60, []byte{17}, nettest.IPv6{}))}},
		{name: "ipv6header inverted soft", fam: 6, rule: "-m ipv6header ! --header frag,auth --soft",
			match:   []probe{u("udp", ext6()), u("hbh udp", ext6(hbh8))},
			nomatch: []probe{u("fragment", ext6(fh(0, true, 3))), u("ah", ext6(ahHeader(0, 1, 2)))}},
		{name: "ipv6header none, esp, later fragment", fam: 6, rule: "-m ipv6header --header ipv6-frag,protocol",
			match:   []probe{u("later fragment", ext6(fh(8, false, 3))), u("first fragment", ext6(fh(0, true, 3)))},
			nomatch: []probe{p("no next header", raw6(0x10, 59, nil, nettest.IPv6{})), p("esp", raw6(0x10, 50, make([]byte, 16), nettest.IPv6{}))}},
		{name: "ipv6header no next header", fam: 6, rule: "-m ipv6header --header none",
			match:   []probe{p("no next header", raw6(0x10, 59, nil, nettest.IPv6{}))},
			nomatch: []probe{p("esp", raw6(0x10, 50, make([]byte, 16), nettest.IPv6{})), u("udp", ext6())}},
		{name: "ipv6header esp", fam: 6, rule: "-m ipv6header --header esp",
			match:   []probe{p("esp", raw6(0x10, 50, make([]byte, 16), nettest.IPv6{}))},
			nomatch: []probe{p("no next header", raw6(0x10, 59, nil, nettest.IPv6{}))}},
		{name: "mh type", fam: 6, rule: "-p mh -m mh --mh-type binding-update",
			match:   []probe{p("type 5", raw6(0x10, 135, mhHeader(59, 5), nettest.IPv6{}))},
			nomatch: []probe{p("type 6", raw6(0x10, 135, mhHeader(59, 6), nettest.IPv6{}))},
			hotdrop: []probe{p("payload protocol 17", raw6(0x10, 135, mhHeader(17, 5), nettest.IPv6{})),
				p("cut to five bytes", raw6(0x10, 135, mhHeader(59, 5)[:5], nettest.IPv6{}))}},
		{name: "mh inverted range", fam: 6, rule: "-p mh -m mh ! --mh-type 1:4",
			match:   []probe{p("type 0", raw6(0x10, 135, mhHeader(59, 0), nettest.IPv6{})), p("type 7", raw6(0x10, 135, mhHeader(59, 7), nettest.IPv6{}))},
			nomatch: []probe{p("type 3", raw6(0x10, 135, mhHeader(59, 3), nettest.IPv6{}))}},
		{name: "hbh, dst and ipv6header combined", fam: 6, rule: "-m hbh --hbh-len 8 -m dst --dst-opts 30 -m ipv6header --header hop,dst --soft",
			match:   []probe{u("hbh dst", ext6(hbh8, dst(optTLV(optTypeUnknown, 4))))},
			nomatch: []probe{u("hbh only", ext6(hbh8)), u("dst first option PadN", ext6(hbh8, dst(nettest.PadNOption(4))))}},
	}
}

func TestIP6HdrAgainstKernel(t *testing.T) {
	runMatchCases(t, ip6hdrCases())
}

// outputSpecs are the matches of the OUTPUT test, two rulesets of at most
// 8 distinct extension header matches each (xfw's limit).
var outputSpecs = [][]string{
	{"-m hbh", "-m hbh --hbh-len 16", "-m hbh --hbh-opts 30:2,1", "-m dst ! --dst-len 8",
		"-m dst --dst-opts 1,30", "-m ipv6header --header hop,dst,prot", "-m ipv6header --header dst --soft",
		"-m ipv6header ! --header prot"},
	{"-m rt --rt-type 0", "-m frag --fragmore", "-m ah", "-m ipv6header --header none",
		"-p mh -m mh --mh-type 5", "-p mh -m mh ! --mh-type 1:4", "-p mh", "-m dst"},
}

// outputRuleset counts, in OUTPUT, the packets fw sends to sink (out0,
// the same name in both twins; not multicast: fw's own MLD reports carry
// a hop-by-hop header) with each match of specs.
func outputRuleset(specs []string) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "-A OUTPUT -o %s ! -d ff00::/8 %s\n", nettest.FwOutIfname, s)
	}
	fmt.Fprintf(&b, "-A OUTPUT -o %s ! -d ff00::/8\nCOMMIT\n", nettest.FwOutIfname)
	return b.String()
}

// sendFromFw sends the IPv6 packet pkt from fw through a raw socket
// (IPPROTO_RAW: the header is ours), which passes OUTPUT.
func sendFromFw(t *testing.T, tp *nettest.Topology, pkt []byte) {
	t.Helper()
	err := nettest.InNamespace(tp.FwNS, func() error {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		err = unix.Sendto(fd, pkt, 0, &unix.SockaddrInet6{Addr: tp.Sink.IPv6.As16()})
		if errors.Is(err, unix.EPERM) {
			return nil // dropped in OUTPUT
		}
		return err
	})
	if err != nil {
		t.Errorf("send from fw: %v", err)
	}
}

// TestIP6ExtOutputAgainstKernel sends packets with extension headers from
// fw (OUTPUT: xfw's TC egress program) and compares each rule's counters
// with the kernel's, packet by packet.
func TestIP6ExtOutputAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	for i, specs := range outputSpecs {
		t.Run(fmt.Sprintf("ruleset %d", i+1), func(t *testing.T) {
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
				fw.restore(t, tp, 6, outputRuleset(specs))
			})
			if !t.Failed() {
				sendOutputProbes(t, tw)
			}
		})
	}
}

// outputProbe is one packet fw sends: its extension headers, and the
// transport when the raw bytes are none.
type outputProbe struct {
	name string
	ext  []nettest.ExtHeader
	l4   nettest.Transport
}

// sendOutputProbes sends each probe from fw and compares the counters.
func sendOutputProbes(t *testing.T, tw *twins) {
	hbh, dst := nettest.HopByHop, nettest.DestOpts
	udp := nettest.UDP{SrcPort: 7, DstPort: 9, Payload: []byte("xfw-probe")}
	mh := func(proto, typ uint8) nettest.Transport { return nettest.Raw{Proto: 135, Data: mhHeader(proto, typ)} }
	short := func(next uint8, data ...byte) nettest.Transport { return nettest.Raw{Proto: next, Data: data} }
	probes := []outputProbe{
		{"udp", nil, udp},
		{"hbh 30:2", []nettest.ExtHeader{hbh(optTLV(optTypeUnknown, 2))}, udp},
		{"hbh 16 dst", []nettest.ExtHeader{hbh(optTLV(optTypeUnknown, 8)), dst(nettest.PadNOption(4))}, udp},
		{"dst overrun last", []nettest.ExtHeader{rawDst(1, 0, optTypeUnknown, 200)}, udp},
		{"dst 16", []nettest.ExtHeader{dst(optTLV(optTypeUnknown, 8))}, udp},
		{"routing type 0", []nettest.ExtHeader{nettest.RoutingHeader(0, 0)}, udp},
		{"fragment more", []nettest.ExtHeader{nettest.FragmentHeader(0, true, 9)}, udp},
		{"ah", []nettest.ExtHeader{ahHeader(0, 5, 2)}, udp},
		{"mh 5", nil, mh(59, 5)},
		{"mh 2", nil, mh(59, 2)},
		{"mh behind dst", []nettest.ExtHeader{dst(nettest.PadNOption(4))}, mh(59, 7)},
		{"mh payload protocol 6 (hotdrop)", nil, mh(6, 5)},
		{"mh cut to five bytes (hotdrop)", nil, nettest.Raw{Proto: 135, Data: mhHeader(59, 5)[:5]}},
		{"no next header", nil, short(59)},
		{"dst cut to one byte (hotdrop)", nil, short(60, 17)},
		// Headers whose length field claims more than the packet has
		// (the kernel hotdrops them since its fix "mark malformed IPv6
		// extension headers for hotdrop").
		{"dst longer than the packet (hotdrop)", nil, short(60, 17, 2, 1, 4, 0, 0, 0, 0)},
		{"hbh longer than the packet (hotdrop)", nil, short(0, 17, 2, 1, 4, 0, 0, 0, 0)},
		{"ah longer than the packet (hotdrop)", nil, short(51, 17, 4, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1)},
		{"hbh behind a dst longer than the packet (hotdrop)", nil, short(60, 0, 2, 1, 4, 0, 0, 0, 0)},
	}
	for _, pr := range probes {
		t.Run(pr.name, func(t *testing.T) {
			k := compareAfterProbe(t, tw, 6, func(t *testing.T, tp *nettest.Topology) {
				h := nettest.IPv6{Src: tp.FwOut.IPv6, Dst: tp.Sink.IPv6, HopLimit: 64, Ext: pr.ext}
				sendFromFw(t, tp, h.Packet(pr.l4))
			})
			if n := countedRules(k); n == 0 && !strings.Contains(pr.name, "hotdrop") {
				t.Errorf("no rule counted the packet in the kernel: it never passed OUTPUT")
			} else {
				t.Logf("%d rules counted the packet", n)
			}
		})
	}
}
