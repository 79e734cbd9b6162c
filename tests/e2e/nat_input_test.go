package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// SNAT in nat INPUT against the kernel (the source of packets delivered
// to fw, translated after filter INPUT; the host's replies translated
// back and routed again): TCP, UDP (a port given), ICMP echo and a
// protocol without ports from gen to fw, SNATed to an address routed
// through sink (fw's replies first routed out of FWOUT, then to gen);
// TCP from sink SNATed to gen's address (fw's replies first routed to
// FWIN, then to sink); a connection no SNAT rule takes, through xfw and
// iptables-legacy in twin topologies; what fw's servers saw of their
// clients, what the clients got back, the counters (filter INPUT sees
// the original source, filter OUTPUT the reply translated back with its
// first route's device) and `conntrack -L`, compared. MASQUERADE in nat
// INPUT, which the kernel refuses, against iptables-legacy's message and
// exit code.

// natInputRuleset is TestNatInputAgainstKernel's ruleset: X the
// topology's subnet, FWOUT and FWIN fw's interfaces facing sink and gen.
// 10.X.9.7 is no host's address, routed through sink (natOutVIPRoutes
// routes 10.X.9.9 and .8; natInputRoutes .7).
const natInputRuleset = natTableStart + `-A INPUT -s 10.X.1.2/32 -p tcp -m tcp --dport 8080 -j SNAT --to-source 10.X.9.7
-A INPUT -s 10.X.1.2/32 -p udp -m udp --dport 5353 -j SNAT --to-source 10.X.9.7:4000
-A INPUT -s 10.X.1.2/32 -p udp -m udp --dport 5354 -j SNAT --to-source 10.X.9.7:4001
-A INPUT -s 10.X.1.2/32 -p icmp -j SNAT --to-source 10.X.9.7
-A INPUT -p 253 -j SNAT --to-source 10.X.9.7
-A INPUT -s 10.X.2.2/32 -p tcp -m tcp --dport 8081 -j SNAT --to-source 10.X.1.2
-A INPUT -d 10.X.1.1/32 -p tcp -m tcp --dport 8083 -j SNAT --to-source 10.X.9.7
-A INPUT -i lo -j SNAT --to-source 10.X.9.7
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.X.1.2/32 -p tcp -m tcp --dport 8080 -m conntrack --ctstate NEW
-A INPUT -s 10.X.9.7/32
-A INPUT -s 10.X.1.2/32 -p udp -m udp --dport 5353 -m conntrack --ctstate SNAT
-A INPUT -s 10.X.1.2/32 -p icmp -m conntrack --ctstate NEW
-A INPUT -s 10.X.1.2/32 -p 253 -m conntrack ! --ctstate SNAT
-A INPUT -s 10.X.1.2/32 -p 253 -m conntrack --ctstate SNAT --ctrepldst 10.X.9.7
-A INPUT -s 10.X.2.2/32 -p tcp -m tcp --dport 8081 -m conntrack --ctstate NEW
-A INPUT -s 10.X.1.2/32 -p icmp -m icmp --icmp-type 3 -m conntrack --ctstate RELATED --ctdir ORIGINAL
-A INPUT -i lo -p udp -m udp --dport 5355 -m conntrack --ctstate NEW
-A INPUT -i lo -m conntrack --ctstate SNAT
-A OUTPUT -d 10.X.1.2/32 -o FWOUT -p icmp -m icmp --icmp-type 3 -m conntrack --ctstate RELATED,SNAT --ctdir REPLY
-A OUTPUT -d 10.X.1.2/32 -o FWOUT -p tcp -m tcp --sport 8080 --tcp-flags SYN,ACK SYN,ACK -m conntrack --ctstate SNAT
-A OUTPUT -d 10.X.9.7/32
-A OUTPUT -d 10.X.1.2/32 -o FWOUT -p udp -m udp --sport 5353 -m conntrack --ctstate SNAT --ctrepldstport 4000
-A OUTPUT -d 10.X.1.2/32 -o FWOUT -p icmp -m conntrack --ctstate SNAT
-A OUTPUT -d 10.X.1.2/32 -o FWOUT -p 253 -m conntrack --ctstate SNAT
-A OUTPUT -d 10.X.2.2/32 -o FWIN -p tcp -m tcp --sport 8081 --tcp-flags SYN,ACK SYN,ACK -m conntrack --ctstate SNAT
-A OUTPUT -d 10.X.1.2/32 -o FWIN -p tcp -m tcp --sport 8082 --tcp-flags SYN,ACK SYN,ACK -m conntrack ! --ctstate SNAT
COMMIT
`

// natInput6Ruleset is natInputRuleset for IPv6.
const natInput6Ruleset = natTableStart + `-A INPUT -s fd00:X:1::2/128 -p tcp -m tcp --dport 8080 -j SNAT --to-source fd00:X:9::7
-A INPUT -s fd00:X:1::2/128 -p udp -m udp --dport 5353 -j SNAT --to-source [fd00:X:9::7]:4000
-A INPUT -s fd00:X:1::2/128 -p udp -m udp --dport 5354 -j SNAT --to-source [fd00:X:9::7]:4001
-A INPUT -s fd00:X:1::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j SNAT --to-source fd00:X:9::7
-A INPUT -p 253 -j SNAT --to-source fd00:X:9::7
-A INPUT -s fd00:X:2::2/128 -p tcp -m tcp --dport 8081 -j SNAT --to-source fd00:X:1::2
-A INPUT -d fd00:X:1::1/128 -p tcp -m tcp --dport 8083 -j SNAT --to-source fd00:X:9::7
-A INPUT -i lo -j SNAT --to-source fd00:X:9::7
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s fd00:X:1::2/128 -p tcp -m tcp --dport 8080 -m conntrack --ctstate NEW
-A INPUT -s fd00:X:9::7/128
-A INPUT -s fd00:X:1::2/128 -p udp -m udp --dport 5353 -m conntrack --ctstate SNAT
-A INPUT -s fd00:X:1::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 128 -m conntrack --ctstate NEW
-A INPUT -s fd00:X:1::2/128 -p 253 -m conntrack ! --ctstate SNAT
-A INPUT -s fd00:X:1::2/128 -p 253 -m conntrack --ctstate SNAT --ctrepldst fd00:X:9::7
-A INPUT -s fd00:X:2::2/128 -p tcp -m tcp --dport 8081 -m conntrack --ctstate NEW
-A INPUT -s fd00:X:1::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 1 -m conntrack --ctstate RELATED --ctdir ORIGINAL
-A INPUT -s fd00:X:1::2/128 -p ipv6-icmp -m icmp6 --icmpv6-type 4 -m conntrack --ctstate RELATED --ctdir ORIGINAL
-A INPUT -i lo -p udp -m udp --dport 5355 -m conntrack --ctstate NEW
-A INPUT -i lo -m conntrack --ctstate SNAT
-A OUTPUT -d fd00:X:1::2/128 -o FWOUT -p ipv6-icmp -m icmp6 --icmpv6-type 1 -m conntrack --ctstate RELATED,SNAT --ctdir REPLY
-A OUTPUT -d fd00:X:1::2/128 -o FWOUT -p ipv6-icmp -m icmp6 --icmpv6-type 4 -m conntrack --ctstate RELATED,SNAT --ctdir REPLY
-A OUTPUT -d fd00:X:1::2/128 -o FWOUT -p tcp -m tcp --sport 8080 --tcp-flags SYN,ACK SYN,ACK -m conntrack --ctstate SNAT
-A OUTPUT -d fd00:X:9::7/128
-A OUTPUT -d fd00:X:1::2/128 -o FWOUT -p udp -m udp --sport 5353 -m conntrack --ctstate SNAT --ctrepldstport 4000
-A OUTPUT -d fd00:X:1::2/128 -o FWOUT -p ipv6-icmp -m icmp6 --icmpv6-type 129 -m conntrack --ctstate SNAT
-A OUTPUT -d fd00:X:1::2/128 -o FWOUT -p 253 -m conntrack --ctstate SNAT
-A OUTPUT -d fd00:X:2::2/128 -o FWIN -p tcp -m tcp --sport 8081 --tcp-flags SYN,ACK SYN,ACK -m conntrack --ctstate SNAT
-A OUTPUT -d fd00:X:1::2/128 -o FWIN -p tcp -m tcp --sport 8082 --tcp-flags SYN,ACK SYN,ACK -m conntrack ! --ctstate SNAT
COMMIT
`

// natInTCP connects from ns (gen or sink) to fw's address dst:port with
// a payload echoed by fw's server on port and says what both ends saw.
func natInTCP(fam int, fromSink bool, port uint16) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		ns, dst, any := tp.GenNS, tp.FwIn.IPv4, netip.IPv4Unspecified()
		if fromSink {
			ns, dst = tp.SinkNS, tp.FwOut.IPv4
		}
		if fam == 6 {
			dst, any = tp.FwIn.IPv6, netip.IPv6Unspecified()
			if fromSink {
				dst = tp.FwOut.IPv6
			}
		}
		srv := nettest.StartTCPServer(t, tp.FwNS, netip.AddrPortFrom(any, port), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(ns, netip.AddrPortFrom(dst, port), nettest.WithPayload([]byte("to-fw")),
			nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		if a.Outcome == nettest.OK {
			for _, c := range srv.WaitFinished(1, 2*time.Second) {
				out += fmt.Sprintf("; fw's server saw %s data %q", name(tp, c.From.Addr()), c.Data)
			}
		}
		return out
	}
}

// natInUDP sends two datagrams from gen's port 40095 to fw's port 5353,
// echoed by fw's server bound to that address, and says what both ends saw (the ports fw's
// server saw included: SNAT gives one).
func natInUDP(fam int) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		dst, src := tp.FwIn.IPv4, tp.Gen.IPv4
		if fam == 6 {
			dst, src = tp.FwIn.IPv6, tp.Gen.IPv6
		}
		// Bound to the address gen asks: its replies come from there,
		// the connection's reply tuple (a wildcard socket's would take
		// the source of the route to the translated address, another
		// connection's).
		srv := nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(dst, 5353), nettest.Echo())
		defer srv.Close()
		out := ""
		for i := 0; i < 2; i++ {
			a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(dst, 5353), []byte("q"), nettest.ExpectReply(),
				nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(src, 40095)))
			out += fmt.Sprintf("datagram %d: %s reply %q; ", i, a.Outcome, a.Reply)
		}
		for _, d := range srv.Wait(2, 2*time.Second) {
			out += fmt.Sprintf("fw's server saw %s port %d; ", name(tp, d.From.Addr()), d.From.Port())
		}
		return out
	}
}

// natInPing pings fw's gen-side address from gen and says how it ended
// and where the reply came from.
func natInPing(fam int, id uint16) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		dst := tp.FwIn.IPv4
		if fam == 6 {
			dst = tp.FwIn.IPv6
		}
		a := nettest.Ping(tp.GenNS, dst, nettest.WithEchoID(id), nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("ping %s", a.Outcome)
		if a.From.IsValid() {
			out += " from " + name(tp, a.From)
		}
		return out
	}
}

// natInRaw sends a protocol-253 packet from gen to fw, where a raw socket
// answers it to the address it came from, and says where fw's socket saw
// it come from and what gen received back.
func natInRaw(fam int) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		name, _, _ := natOutNames(fam)
		network, gen, fw := fmt.Sprintf("ip4:%d", natPortlessProto), tp.Gen.IPv4, tp.FwIn.IPv4
		packet := nettest.IPv4{Src: gen, Dst: fw}.Packet(nettest.Raw{Proto: natPortlessProto, Data: []byte("in-253")})
		if fam == 6 {
			network, gen, fw = fmt.Sprintf("ip6:%d", natPortlessProto), tp.Gen.IPv6, tp.FwIn.IPv6
			packet = nettest.IPv6{Src: gen, Dst: fw, HopLimit: 64}.Packet(nettest.Raw{Proto: natPortlessProto, Data: []byte("in-253")})
		}
		var conn net.PacketConn
		if err := nettest.InNamespace(tp.FwNS, func() (err error) {
			// Bound to fw's address gen asks, as natInUDP's server.
			conn, err = net.ListenPacket(network, fw.String())
			return err
		}); err != nil {
			return "raw socket: " + err.Error()
		}
		defer func() { _ = conn.Close() }()
		is := func(c nettest.Captured) bool { return !c.Outgoing && c.Protocol == natPortlessProto }
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, is)
		defer atGen.Stop()
		if err := tp.InjectFromGen(tp.GenToFw().Frame(packet)); err != nil {
			return "inject from gen: " + err.Error()
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 2048)
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return "fw's socket got nothing"
		}
		src, _ := netip.AddrFromSlice(from.(*net.IPAddr).IP)
		out := fmt.Sprintf("fw's socket got %q from %s", buf[:n], name(tp, src.Unmap()))
		if _, err := conn.WriteTo([]byte("answer-253"), from); err != nil {
			return out + "; answer: " + err.Error()
		}
		if g, ok := atGen.WaitFor(is, 2*time.Second); ok {
			out += fmt.Sprintf("; gen saw %s -> %s %q", name(tp, g.Src), name(tp, g.Dst), g.Payload)
		} else {
			out += "; gen saw nothing"
		}
		return out
	}
}

// natInputSteps returns TestNatInput*AgainstKernel's steps for family
// fam: the ICMP errors (nat_input_icmp_test.go) after the connections
// they are about, the loopback traffic last.
func natInputSteps(fam int) []natStep {
	udpErrors, rawErrors := natInErrorSteps(fam)
	steps := []natStep{
		{"tcp from gen SNATed to a routed address: fw's reply translated back and routed again", natInTCP(fam, false, 8080)},
		{"udp from gen SNATed to the address and port 4000, twice (a later packet)", natInUDP(fam)},
	}
	steps = append(steps, udpErrors...)
	steps = append(steps,
		natStep{"ping from gen SNATed: the echo reply translated back", natInPing(fam, 0x1357)},
		natStep{"ping again, the same identifier (the same connection)", natInPing(fam, 0x1357)},
		natStep{"protocol 253 from gen SNATed, fw's answer translated back", natInRaw(fam)})
	steps = append(steps, rawErrors...)
	steps = append(steps,
		natStep{"tcp from sink SNATed to gen's address: fw's reply first routed to gen", natInTCP(fam, true, 8081)},
		natStep{"tcp from gen no SNAT rule takes", natInTCP(fam, false, 8082)})
	return append(steps, natInLoopSteps(fam)...)
}

// natInputRoutes routes fw's packets to 10.X.9.7 (fd00:X:9::7) through
// sink.
func natInputRoutes(t *testing.T, tp *nettest.Topology, fam int) {
	t.Helper()
	argv := []string{"ip", "route", "add", natAddr(tp, 9, 7).String() + "/32", "via", tp.Sink.IPv4.String()}
	if fam == 6 {
		argv = []string{"ip", "-6", "route", "add", nat6Addr(tp, 9, 7).String() + "/128", "via", tp.Sink.IPv6.String()}
	}
	if res, err := nettest.Exec(tp.FwNS, argv...); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v: %v %+v", argv, err, res)
	}
}

// natInputCase returns TestNatInput*AgainstKernel's case for family fam:
// TCP, UDP, ICMP and protocol 253 connections compared, the ephemeral
// ports of TCP clients left out.
func natInputCase(fam int, ruleset string, want, conns int) natLocalCase {
	icmp := "icmp"
	if fam == 6 {
		icmp = "icmpv6"
	}
	return natLocalCase{ruleset: ruleset, routes: natInputRoutes, steps: natInputSteps(fam),
		protos: []string{"tcp", "udp", icmp, "unknown"},
		ports: func(key string, port int) bool {
			return (key == "sport" || key == "dport") && port >= 32768
		}, want: want, conns: conns}
}

// TestNatInputAgainstKernel runs the IPv4 steps.
func TestNatInputAgainstKernel(t *testing.T) {
	natLocalAgainstKernel(t, 4, natInputCase(4, natInputRuleset, 21, 10))
}

// TestNatInput6AgainstKernel runs the IPv6 steps.
func TestNatInput6AgainstKernel(t *testing.T) {
	natLocalAgainstKernel(t, 6, natInputCase(6, natInput6Ruleset, 23, 10))
}

// natInputRefused are commands of nat INPUT the kernel refuses
// (MASQUERADE, also reached through a user chain, DNAT and REDIRECT, SNAT
// options iptables refuses) and one SNAT it takes, run in order in both
// twins, with the family.
var natInputRefused = []struct {
	fam  int
	argv []string
}{
	{4, []string{"-t", "nat", "-A", "INPUT", "-j", "MASQUERADE"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-p", "tcp", "-j", "MASQUERADE", "--to-ports", "80"}},
	{4, []string{"-t", "nat", "-N", "MQ"}},
	{4, []string{"-t", "nat", "-A", "MQ", "-j", "MASQUERADE"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-j", "MQ"}},
	{4, []string{"-t", "nat", "-I", "INPUT", "-s", "10.0.0.1", "-g", "MQ"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-j", "DNAT", "--to-destination", "10.0.0.1"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-p", "tcp", "-j", "REDIRECT"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-j", "SNAT"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-j", "SNAT", "--to-source", "10.0.0.1:80"}},
	{4, []string{"-t", "nat", "-A", "INPUT", "-p", "udp", "-j", "SNAT", "--to-source", "10.0.0.1:80-90", "--random"}},
	{4, []string{"-t", "nat", "-S", "INPUT"}},
	{6, []string{"-t", "nat", "-A", "INPUT", "-j", "MASQUERADE"}},
	{6, []string{"-t", "nat", "-A", "INPUT", "-j", "DNAT", "--to-destination", "fd00::1"}},
	{6, []string{"-t", "nat", "-A", "INPUT", "-j", "SNAT", "--to-source", "[fd00::1]:80"}},
	{6, []string{"-t", "nat", "-S", "INPUT"}},
}

// natInputRefusedRestores are restores the kernel refuses for the same
// reasons.
var natInputRefusedRestores = []struct {
	fam   int
	rules string
}{
	{4, "*nat\n-A INPUT -s 10.0.0.2/32 -j SNAT --to-source 10.0.0.1\n-A INPUT -j MASQUERADE\nCOMMIT\n"},
	{4, "*nat\n:MQ2 - [0:0]\n-A MQ2 -j MASQUERADE\n-A INPUT -j MQ2\nCOMMIT\n"},
	{6, "*nat\n-A INPUT -j MASQUERADE\nCOMMIT\n"},
}

// TestNatInputRefusedAgainstKernel runs natInputRefused's commands and
// natInputRefusedRestores in both twins and compares what they printed
// and their exit codes, and the nat tables left behind.
func TestNatInputRefusedAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	outs := map[string][]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		var lines []string
		for _, c := range natInputRefused {
			res, err := nettest.Exec(tp.FwNS, append(append(fw.cmd(c.fam, ""), "-w", lockWait), c.argv...)...)
			if res == nil {
				t.Errorf("%s %v: %v", kind, c.argv, err)
				return
			}
			lines = append(lines, fmt.Sprintf("%v: exit %d stdout %q stderr %q", c.argv, res.ExitCode, res.Stdout, res.Stderr))
		}
		for _, r := range natInputRefusedRestores {
			res, err := fw.try(tp, r.fam, "-restore", r.rules, "--noflush")
			if res == nil {
				t.Errorf("%s restore: %v", kind, err)
				return
			}
			lines = append(lines, fmt.Sprintf("restore %q: exit %d stderr %q", r.rules, res.ExitCode, res.Stderr))
		}
		for _, fam := range []int{4, 6} {
			res, err := nettest.Exec(tp.FwNS, append(fw.cmd(fam, "-save"), "-t", "nat")...)
			if res == nil || res.ExitCode != 0 {
				t.Errorf("%s save: %v %+v", kind, err, res)
				return
			}
			lines = append(lines, saveRules(res.Stdout))
		}
		mu.Lock()
		outs[kind] = lines
		mu.Unlock()
	})
	compareTwinText(t, "nat INPUT's refusals", strings.Join(outs["kernel"], "\n"), strings.Join(outs["xfw"], "\n"))
}
