package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// natRejectRuleset is TestNatRejectAfterDNATAgainstKernel's ruleset for
// a family: gen's UDP and TCP to VIP (an address on sink's link no host
// holds, not fw's) DNATed to sink and rejected in FORWARD. VIP, SINK and
// the REJECT types are filled in per family.
const natRejectRuleset = natTableStart + `-A PREROUTING -d VIP -p udp -m udp --dport 5357 -j DNAT --to-destination SINKPORT57
-A PREROUTING -d VIP -p tcp -m tcp --dport 8084 -j DNAT --to-destination SINKPORT84
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -d SINK -p udp -m udp --dport 57 -j REJECT --reject-with PORTUNREACH
-A FORWARD -d SINK -p tcp -m tcp --dport 84 -j REJECT --reject-with tcp-reset
COMMIT
`

// natRejectVIP is the DNATed address of family fam: host 9 of sink's link.
func natRejectVIP(tp *nettest.Topology, fam int) netip.Addr {
	if fam == 6 {
		return nat6Addr(tp, 2, 9)
	}
	return natAddr(tp, 2, 9)
}

// natRejectText returns natRejectRuleset for tp and family fam.
func natRejectText(tp *nettest.Topology, fam int) string {
	sink, port := tp.Sink.IPv4.String(), func(p string) string { return tp.Sink.IPv4.String() + ":" + p }
	unreach := "icmp-port-unreachable"
	if fam == 6 {
		sink, port = tp.Sink.IPv6.String(), func(p string) string { return "[" + tp.Sink.IPv6.String() + "]:" + p }
		unreach = "icmp6-port-unreachable"
	}
	return strings.NewReplacer("VIP", natRejectVIP(tp, fam).String(), "SINKPORT57", port("57"), "SINKPORT84", port("84"),
		"SINK", sink, "PORTUNREACH", unreach).Replace(natRejectRuleset)
}

// natRejectName names an address for the twins' comparison.
func natRejectName(tp *nettest.Topology, fam int, a netip.Addr) string {
	switch a {
	case natRejectVIP(tp, fam):
		return "VIP"
	case tp.Gen.IPv4, tp.Gen.IPv6:
		return "GEN"
	case tp.FwIn.IPv4, tp.FwIn.IPv6:
		return "FWIN"
	case tp.FwOut.IPv4, tp.FwOut.IPv6:
		return "FWOUT"
	case tp.Sink.IPv4, tp.Sink.IPv6:
		return "SINK"
	}
	return a.String()
}

// natRejectProbe sends from gen a UDP datagram (tcp: a TCP SYN) to VIP's
// port and says what came back to gen: the reply's addresses and, for an
// ICMP error, the quoted packet's.
func natRejectProbe(fam int, tcp bool) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		var l4 nettest.Transport = nettest.UDP{SrcPort: 40057, DstPort: 5357, Payload: []byte("rejected")}
		if tcp {
			l4 = nettest.TCP{SrcPort: 40084, DstPort: 8084, Seq: 1000, Flags: nettest.TCPSyn}
		}
		var pkt []byte
		if fam == 6 {
			pkt = nettest.IPv6{Src: tp.Gen.IPv6, Dst: natRejectVIP(tp, fam), HopLimit: 64}.Packet(l4)
		} else {
			pkt = nettest.IPv4{Src: tp.Gen.IPv4, Dst: natRejectVIP(tp, fam), TTL: 64}.Packet(l4)
		}
		// A reply is the probe's family's ICMP error or TCP segment;
		// not the neighbour discovery and MLD traffic of the link
		// (ICMPv6 types 130 and up), which arrives at any time.
		isReply := func(c nettest.Captured) bool {
			if c.Outgoing || c.IPVersion != fam {
				return false
			}
			return c.Protocol == nettest.ProtoICMP || c.Protocol == nettest.ProtoTCP ||
				(c.Protocol == nettest.ProtoICMPv6 && c.ICMPType < 128)
		}
		f, out, ok := natRejectAnswer(t, tp, fam, pkt, isReply, "reply")
		if !ok {
			return out
		}
		if f.Inner != nil {
			out += fmt.Sprintf(" quoting %s -> %s port %d", natRejectName(tp, fam, f.Inner.Src),
				natRejectName(tp, fam, f.Inner.Dst), f.Inner.DstPort)
		}
		if f.Protocol == nettest.ProtoTCP {
			out += fmt.Sprintf(" ports %d -> %d flags %#x", f.SrcPort, f.DstPort, f.TCPFlags)
		}
		return out
	}
}

// TestNatRejectAfterDNATAgainstKernel checks, in both families against
// iptables-legacy in twins, REJECT in FORWARD of a connection's first
// packet a DNAT translated from an address that is not fw's: the kernel's
// ICMP error comes from the original destination (its nat translates the
// error's source back, nf_nat_icmp_reply_translation), quoting the packet
// as it came; a TCP RST likewise. (difftest nat6 seed 4: xfw's ICMPv6
// error came from the route back's address.)
func TestNatRejectAfterDNATAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) {
			tw := newTwins(t, xfwPath(t))
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
				fw.restore(t, tp, fam, natRejectText(tp, fam))
			})
			if t.Failed() {
				return
			}
			want := map[bool]string{false: "gen got protocol 1 type 3 VIP -> GEN quoting GEN -> VIP port 5357",
				true: "gen got protocol 6 type 0 VIP -> GEN ports 8084 -> 40084 flags 0x14"}
			if fam == 6 {
				want[false] = "gen got protocol 58 type 1 VIP -> GEN quoting GEN -> VIP port 5357"
			}
			for _, tcp := range []bool{false, true} {
				probe := natRejectProbe(fam, tcp)
				runNatSteps(t, tw, []natStep{{fmt.Sprintf("REJECT after DNAT (tcp %v)", tcp), func(t *testing.T, tp *nettest.Topology) string {
					got := probe(t, tp)
					if got != want[tcp] {
						t.Errorf("subnet %d: %s, want %s", tp.Subnet, got, want[tcp])
					}
					return got
				}}})
			}
		})
	}
}

// natErrorRuleset is TestNatForwardedErrorAfterDNATAgainstKernel's
// ruleset: gen's UDP to VIP DNATed to a port of sink's nobody listens
// on; sink's stack answers with a port unreachable.
const natErrorRuleset = natTableStart + `-A PREROUTING -d VIP -p udp -m udp --dport 5357 -j DNAT --to-destination SINKPORT57
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
`

// inetSum returns the Internet checksum of the pseudo-header of src, dst
// and proto followed by b (0 when b holds a correct checksum).
func inetSum(src, dst netip.Addr, proto uint8, b []byte) uint16 {
	var ph []byte
	if src.Is4() {
		ph = append(append(ph, src.AsSlice()...), dst.AsSlice()...)
		ph = append(ph, 0, proto, byte(len(b)>>8), byte(len(b)))
	} else {
		ph = append(append(ph, src.AsSlice()...), dst.AsSlice()...)
		ph = append(ph, byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b)), 0, 0, 0, proto)
	}
	return nettest.Checksum(append(ph, b...))
}

// natErrorProbe sends from gen a UDP datagram to VIP's port 5357 and
// says what came back to gen: the error's addresses, the quoted packet's
// and whether the error's checksum and the quoted UDP checksum hold.
func natErrorProbe(fam int) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		l4 := nettest.UDP{SrcPort: 40058, DstPort: 5357, Payload: []byte("nobody listens")}
		var pkt []byte
		if fam == 6 {
			pkt = nettest.IPv6{Src: tp.Gen.IPv6, Dst: natRejectVIP(tp, fam), HopLimit: 64}.Packet(l4)
		} else {
			pkt = nettest.IPv4{Src: tp.Gen.IPv4, Dst: natRejectVIP(tp, fam), TTL: 64}.Packet(l4)
		}
		// Errors only (not fw's multicast listener reports).
		isError := func(c nettest.Captured) bool {
			return !c.Outgoing && (c.Protocol == nettest.ProtoICMP && c.ICMPType == 3 ||
				c.Protocol == nettest.ProtoICMPv6 && c.ICMPType < 128)
		}
		f, out, ok := natRejectAnswer(t, tp, fam, pkt, isError, "error")
		if !ok {
			return out
		}
		// The error's transport bytes: after Ethernet and the IP header.
		l3 := f.Raw[14:]
		hlen, icmpProto := 40, nettest.ProtoICMPv6
		if fam == 4 {
			hlen, icmpProto = int(l3[0]&0xf)*4, 0
		}
		msg := l3[hlen:]
		sum := nettest.Checksum(msg)
		if fam == 6 {
			sum = inetSum(f.Src, f.Dst, icmpProto, msg)
		}
		out += fmt.Sprintf(", checksum ok %v", sum == 0)
		if f.Inner == nil {
			return out + ", no quote"
		}
		out += fmt.Sprintf(" quoting %s -> %s port %d", natRejectName(tp, fam, f.Inner.Src),
			natRejectName(tp, fam, f.Inner.Dst), f.Inner.DstPort)
		// The quoted datagram, whole: its UDP checksum over GEN -> VIP.
		quote := msg[8:]
		qh := 40
		if fam == 4 {
			qh = int(quote[0]&0xf) * 4
		}
		return out + fmt.Sprintf(", quoted checksum ok %v", inetSum(f.Inner.Src, f.Inner.Dst, nettest.ProtoUDP, quote[qh:]) == 0)
	}
}

// natRejectAnswer injects pkt from gen towards fw and waits for gen to
// capture an answer that want accepts (what names it): the answer and its
// description (protocol, ICMP type, addresses by name), or ok false and
// what went wrong.
func natRejectAnswer(t *testing.T, tp *nettest.Topology, fam int, pkt []byte, want func(nettest.Captured) bool,
	what string) (f nettest.Captured, out string, ok bool) {
	t.Helper()
	at := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, want)
	defer at.Stop()
	if err := tp.InjectFromGen(tp.GenToFw().Frame(pkt)); err != nil {
		return f, "inject from gen: " + err.Error(), false
	}
	if f, ok = at.WaitFor(want, 2*time.Second); !ok {
		return f, "gen got no " + what, false
	}
	return f, fmt.Sprintf("gen got protocol %d type %d %s -> %s", f.Protocol, f.ICMPType,
		natRejectName(tp, fam, f.Src), natRejectName(tp, fam, f.Dst)), true
}

// TestNatForwardedErrorAfterDNATAgainstKernel checks, in both families
// against iptables-legacy in twins, the ICMP error a DNATed server (sink)
// sends about a connection's packet to the client (gen): the kernel
// translates it back (nf_nat_icmp_reply_translation,
// nf_nat_icmpv6_reply_translation): it comes from the original
// destination, quoting the packet as the client sent it, its checksums
// right. xfw dropped the ICMPv6 one (docs/differences.md).
func TestNatForwardedErrorAfterDNATAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) {
			tw := newTwins(t, xfwPath(t))
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
				sinkPort := tp.Sink.IPv4.String() + ":57"
				if fam == 6 {
					sinkPort = "[" + tp.Sink.IPv6.String() + "]:57"
				}
				fw.restore(t, tp, fam, strings.NewReplacer("VIP", natRejectVIP(tp, fam).String(),
					"SINKPORT57", sinkPort).Replace(natErrorRuleset))
			})
			if t.Failed() {
				return
			}
			want := "gen got protocol 1 type 3 VIP -> GEN, checksum ok true quoting GEN -> VIP port 5357, quoted checksum ok true"
			if fam == 6 {
				want = "gen got protocol 58 type 1 VIP -> GEN, checksum ok true quoting GEN -> VIP port 5357, quoted checksum ok true"
			}
			runNatSteps(t, tw, []natStep{{"the DNATed server's port unreachable", func(t *testing.T, tp *nettest.Topology) string {
				got := natErrorProbe(fam)(t, tp)
				if got != want {
					t.Errorf("subnet %d: %s, want %s", tp.Subnet, got, want)
				}
				return got
			}}})
		})
	}
}
