package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// IPv6 MASQUERADE in Docker's form (a source prefix, "! -o" the bridge,
// no -p) against the kernel: ICMPv6 echo (the identifier as the kernel
// maps it), a UDP and a TCP flow, and a protocol without ports (253, raw
// frames both ways), through xfw and ip6tables-legacy in twin
// topologies; what each end saw, the counters and `conntrack -L -f ipv6`
// (ICMPv6 and unknown-protocol connections included), compared.

// nat6DockerProto is the protocol without ports the test sends (RFC 3692
// experimentation).
const nat6DockerProto = 253

// nat6DockerRuleset is TestNat6DockerMasqueradeAgainstKernel's ruleset:
// the ip6tables ruleset Docker 20.10 writes with IPv6 on (fixed-cidr-v6
// gen's prefix, no published port), gen's side as its bridge, and in
// DOCKER-USER rules without a target counting what passes, as a user's;
// fw's own ICMPv6 from its sink-side address SNATed to its second. X is
// the topology's index, IN fw's gen-side interface, OUT its sink-side one.
const nat6DockerRuleset = natTableStart + `:DOCKER - [0:0]
-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
-A OUTPUT ! -d ::1/128 -m addrtype --dst-type LOCAL -j DOCKER
-A POSTROUTING -s fd00:X:1::/64 ! -o IN -j MASQUERADE
-A POSTROUTING -s fd00:X:2::1/128 -o OUT -p ipv6-icmp -j SNAT --to-source fd00:X:3::1
-A DOCKER -i IN -j RETURN
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER - [0:0]
:DOCKER-ISOLATION-STAGE-1 - [0:0]
:DOCKER-ISOLATION-STAGE-2 - [0:0]
:DOCKER-USER - [0:0]
-A FORWARD -j DOCKER-USER
-A FORWARD -j DOCKER-ISOLATION-STAGE-1
-A FORWARD -o IN -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -o IN -j DOCKER
-A FORWARD -i IN ! -o IN -j ACCEPT
-A FORWARD -i IN -o IN -j ACCEPT
-A DOCKER-ISOLATION-STAGE-1 -i IN ! -o IN -j DOCKER-ISOLATION-STAGE-2
-A DOCKER-ISOLATION-STAGE-1 -j RETURN
-A DOCKER-ISOLATION-STAGE-2 -o IN -j DROP
-A DOCKER-ISOLATION-STAGE-2 -j RETURN
-A DOCKER-USER -s fd00:X:1::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -m conntrack --ctstate NEW
-A DOCKER-USER -s fd00:X:1::2/128 -p 253 -m conntrack --ctstate NEW
-A DOCKER-USER -s fd00:X:1::2/128 -p udp -m conntrack --ctstate NEW
-A DOCKER-USER -s fd00:X:1::2/128 -p tcp -m conntrack --ctstate NEW
-A DOCKER-USER -d fd00:X:1::2/128 -p 253 -m conntrack --ctstate SNAT
-A DOCKER-USER -p ipv6-icmp -m conntrack --ctstate RELATED
-A DOCKER-USER -j RETURN
COMMIT
`

// nat6Ping pings dst from gen with echo identifier id and says whether
// the reply came and whom, with which identifier, sink saw asking.
func nat6Ping(id uint16, dst func(tp *nettest.Topology) netip.Addr) func(*testing.T, *nettest.Topology) string {
	return nat6PingFrom(false, id, dst)
}

// nat6PingFrom is nat6Ping from gen, or with fw from fw's sink-side
// address.
func nat6PingFrom(fw bool, id uint16, dst func(tp *nettest.Topology) netip.Addr) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		ns, opts := tp.GenNS, []nettest.DialOption{nettest.WithEchoID(id), nettest.WithTimeout(2 * time.Second)}
		if fw {
			ns, opts = tp.FwNS, append(opts, nettest.WithSource(netip.AddrPortFrom(tp.FwOut.IPv6, 0)))
		}
		echo := func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMPv6 && c.ICMPType == nettest.ICMPv6EchoRequest
		}
		at := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, echo)
		defer at.Stop()
		a := nettest.Ping(ns, dst(tp), opts...)
		out := fmt.Sprintf("ping %s;", a.Outcome)
		if f, ok := at.WaitFor(echo, 2*time.Second); ok {
			out += fmt.Sprintf(" sink saw %s ask %s id %#x", nat6Name(tp, f.Src), nat6Name(tp, f.Dst), f.ICMPRest>>16)
		} else {
			out += " sink saw no echo request"
		}
		return out
	}
}

// nat6Raw sends a protocol-253 packet from gen to sink, then one from
// sink back to the address it came from, and says what sink and gen
// received of that protocol (addresses and payload).
func nat6Raw(t *testing.T, tp *nettest.Topology) string {
	proto := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == nat6DockerProto }
	atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, proto)
	atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, proto)
	out := nettest.IPv6{Src: tp.Gen.IPv6, Dst: tp.Sink.IPv6, HopLimit: 64}.
		Packet(nettest.Raw{Proto: nat6DockerProto, Data: []byte("raw-out-253")})
	if err := tp.InjectFromGen(tp.GenToFw().Frame(out)); err != nil {
		return "inject from gen: " + err.Error()
	}
	seen := "sink saw nothing"
	f, ok := atSink.WaitFor(func(nettest.Captured) bool { return true }, 2*time.Second)
	if !ok {
		atSink.Stop()
		atGen.Stop()
		return seen
	}
	seen = fmt.Sprintf("sink saw %s -> %s %q", nat6Name(tp, f.Src), nat6Name(tp, f.Dst), f.Payload)
	back := nettest.IPv6{Src: tp.Sink.IPv6, Dst: f.Src, HopLimit: 64}.
		Packet(nettest.Raw{Proto: nat6DockerProto, Data: []byte("raw-back-253")})
	if err := tp.InjectFromSink(tp.SinkToFw().Frame(back)); err != nil {
		return seen + "; inject from sink: " + err.Error()
	}
	if g, ok := atGen.WaitFor(func(nettest.Captured) bool { return true }, 2*time.Second); ok {
		seen += fmt.Sprintf("; gen saw %s -> %s %q", nat6Name(tp, g.Src), nat6Name(tp, g.Dst), g.Payload)
	} else {
		seen += "; gen saw nothing"
	}
	atSink.Stop()
	atGen.Stop()
	return seen
}

// nat6DockerSteps are TestNat6DockerMasqueradeAgainstKernel's steps, in
// order.
var nat6DockerSteps = []natStep{
	{"ping6 masqueraded, the identifier kept", nat6Ping(0x1234, func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv6 })},
	{"ping6 again with the same identifier (the same connection)", nat6Ping(0x1234, func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv6 })},
	{"ping6 to sink's second address (fw's second address)", nat6Ping(0x4321, func(tp *nettest.Topology) netip.Addr { return nat6Addr(tp, 3, 2) })},
	{"udp masqueraded, a later datagram", nat6UDP(40060, 60, nat6At(2, 2, 60))},
	{"tcp masqueraded", nat6TCP("sink", nat6Any(81), nat6At(2, 2, 81))},
	{"protocol 253 masqueraded, sink's answer translated back", nat6Raw},
	{"udp masqueraded to a closed port: sink's port unreachable translated back", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.UDPSend(tp.GenNS, nat6At(2, 2, 61)(tp), []byte("q"), nettest.ExpectReply(),
			nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv6, 40061)), nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"sink's error about the masqueraded echo request translated back", nat6EchoError},
	{"ping6 of fw's own SNATed to its second address", nat6PingFrom(true, 0x2468, func(tp *nettest.Topology) netip.Addr { return tp.Sink.IPv6 })},
	{"ping6 from fw to gen: not translated (out by the bridge)", func(t *testing.T, tp *nettest.Topology) string {
		return string(nettest.Ping(tp.FwNS, tp.Gen.IPv6, nettest.WithEchoID(0x5678), nettest.WithTimeout(2*time.Second)).Outcome)
	}},
}

// TestNat6DockerMasqueradeAgainstKernel runs nat6DockerSteps through both
// twins and compares the outcomes, the counters and the connection
// tables (TCP, UDP, ICMPv6 and the unknown protocol's).
func TestNat6DockerMasqueradeAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		nat6Setup(t, tp)
		fw.restore(t, tp, 6, strings.NewReplacer("fd00:X:", fmt.Sprintf("fd00:%d:", tp.Subnet),
			" IN ", " "+tp.FwIn.Ifname+" ", " OUT ", " "+tp.FwOut.Ifname+" ").Replace(nat6DockerRuleset))
	})
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, nat6DockerSteps)
	checkNat6RawErrorNotLeaked(t, tw)
	compareNatCountersFam(t, tw, 6, 7)
	compareNatConntrackProtos(t, tw, 6, []string{"tcp", "udp", "icmpv6", "unknown"}, func(key string, p int) bool {
		return (key == "sport" || key == "dport") && p >= 32768
	}, 5)
}

// checkNat6RawErrorNotLeaked sends sink's protocol-253 packet to the
// masqueraded connection again: gen, translated the packet, answers with
// an ICMPv6 parameter problem (unknown next header) quoting it. The
// kernel forwards the error translated (from FWOUT, quoting FWOUT); xfw
// does not translate an ICMPv6 error's quoted packet and drops it
// (docs/differences.md). Neither may show sink gen's address.
func checkNat6RawErrorNotLeaked(t *testing.T, tw *twins) {
	t.Helper()
	want := map[string]string{"kernel": "error from FWOUT quoting SINK -> FWOUT", "xfw": "no error"}
	tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
		isErr := func(c nettest.Captured) bool {
			return !c.Outgoing && c.Protocol == nettest.ProtoICMPv6 && c.ICMPType == nettest.ICMPv6ParamProblem
		}
		at := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, isErr)
		back := nettest.IPv6{Src: tp.Sink.IPv6, Dst: tp.FwOut.IPv6, HopLimit: 64}.
			Packet(nettest.Raw{Proto: nat6DockerProto, Data: []byte("raw-again-253")})
		if err := tp.InjectFromSink(tp.SinkToFw().Frame(back)); err != nil {
			t.Errorf("%s: inject from sink: %v", kind, err)
		}
		got := "no error"
		if f, ok := at.WaitFor(isErr, 2*time.Second); ok {
			got = fmt.Sprintf("error from %s", nat6Name(tp, f.Src))
			if f.Inner != nil {
				got += fmt.Sprintf(" quoting %s -> %s", nat6Name(tp, f.Inner.Src), nat6Name(tp, f.Inner.Dst))
			}
		}
		at.Stop()
		if got != want[kind] {
			t.Errorf("%s: sink's protocol-253 packet to a masqueraded host: sink got %s, want %s", kind, got, want[kind])
		}
	})
}

// nat6EchoError sends from sink a destination unreachable quoting the
// echo request gen's first ping left fw with (from FWOUT, identifier
// 0x1234) and says what gen received: the error's addresses, the quoted
// packet's, and whether the ICMPv6 checksum and the quoted echo's are
// full.
func nat6EchoError(t *testing.T, tp *nettest.Topology) string {
	echo := nettest.IPv6{Src: tp.FwOut.IPv6, Dst: tp.Sink.IPv6, HopLimit: 63}.
		Packet(nettest.ICMPv6{Type: nettest.ICMPv6EchoRequest, Rest: 0x1234<<16 | 7, Payload: []byte("quoted-echo")})
	isErr := func(c nettest.Captured) bool {
		return !c.Outgoing && c.Protocol == nettest.ProtoICMPv6 && c.ICMPType == nettest.ICMPv6DestUnreachable
	}
	at := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, isErr)
	defer at.Stop()
	msg := nettest.IPv6{Src: tp.Sink.IPv6, Dst: tp.FwOut.IPv6, HopLimit: 64}.
		Packet(nettest.ICMPv6{Type: nettest.ICMPv6DestUnreachable, Code: 1, Payload: echo})
	if err := tp.InjectFromSink(tp.SinkToFw().Frame(msg)); err != nil {
		return "inject from sink: " + err.Error()
	}
	f, ok := at.WaitFor(isErr, 2*time.Second)
	if !ok {
		return "gen saw no error"
	}
	out := fmt.Sprintf("gen saw an error %s -> %s", nat6Name(tp, f.Src), nat6Name(tp, f.Dst))
	if f.Inner != nil {
		out += fmt.Sprintf(" quoting %s -> %s id %#x", nat6Name(tp, f.Inner.Src), nat6Name(tp, f.Inner.Dst), f.Inner.ICMPRest>>16)
	}
	return out + "; checksums " + icmp6ErrorChecksums(f.Raw)
}

// icmp6ErrorChecksums says whether an Ethernet frame's ICMPv6 error
// (without extension headers) and the ICMPv6 message it quotes whole
// carry full checksums ("full"), else "bad".
func icmp6ErrorChecksums(frame []byte) string {
	const ethLen, ipLen, icmpLen = 14, 40, 8
	if len(frame) < ethLen+2*ipLen+2*icmpLen {
		return "short"
	}
	ip := frame[ethLen:]
	end := ipLen + (int(ip[4])<<8 | int(ip[5]))
	if end > len(ip) || ip[6] != nettest.ProtoICMPv6 {
		return "short"
	}
	kind := func(hdr, msg []byte) string {
		pseudo := append([]byte(nil), hdr[8:40]...)
		pseudo = append(pseudo, byte(len(msg)>>24), byte(len(msg)>>16), byte(len(msg)>>8), byte(len(msg)), 0, 0, 0,
			nettest.ProtoICMPv6)
		return l4ChecksumKind(pseudo, msg, 2)
	}
	inner := ip[ipLen+icmpLen : end]
	innerEnd := ipLen + (int(inner[4])<<8 | int(inner[5]))
	if innerEnd > len(inner) {
		return kind(ip, ip[ipLen:end]) + ", quote cut short"
	}
	return kind(ip, ip[ipLen:end]) + ", quoted " + kind(inner, inner[ipLen:innerEnd])
}
