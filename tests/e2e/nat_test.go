package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// oneSYNTimeout bounds a connection attempt meant to time out with one
// SYN sent: shorter than TCP's initial retransmission timeout (1 s), so
// that a loaded machine cannot make one twin retransmit where the other
// did not (the twins' counters are compared).
const oneSYNTimeout = 500 * time.Millisecond

// DNAT against the kernel: port forwards from gen to sink (TCP and UDP),
// to an address of fw itself, and REDIRECT, through xfw and through iptables-legacy
// in twin topologies; what the clients and servers saw, every rule's
// counter of the nat table (only first packets count there) and of
// filter's rules that see the translated destination, and `conntrack -L`
// with both tuples, compared.

// natRuleset is TestDNATAgainstKernel's ruleset; X is the topology's
// subnet. FORWARD drops what it does not accept: a packet reaches sink
// only through the translation (--ctorigdst) or as an established reply.
// nat POSTROUTING counts SYNs: the kernel's REJECT reset of a forwarded
// packet passes it too, xfw's does not (docs/differences.md).
const natRuleset = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:FWD - [0:0]
-A PREROUTING -d 10.X.1.1/32 -j FWD
-A PREROUTING -p tcp -m tcp --dport 2223 -j REDIRECT --to-ports 7023
-A PREROUTING -p tcp
-A INPUT -p tcp
-A POSTROUTING -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN
-A POSTROUTING -p udp
-A FWD -p tcp -m tcp --dport 8080 -j DNAT --to-destination 10.X.2.2:80
-A FWD -p udp -m udp --dport 5353 -j DNAT --to-destination 10.X.2.2:53
-A FWD -p tcp -m tcp --dport 2222 -j DNAT --to-destination 10.X.2.1:7022
-A FWD -p tcp -m tcp --dport 8081 -j DNAT --to-destination 10.X.2.2
-A FWD -p udp -m udp --dport 5354 -j DNAT --to-destination 10.X.2.2:54
-A FWD -p tcp -m tcp --dport 8082 -j DNAT --to-destination 10.X.2.2:82
-A FWD -p tcp -m tcp --dport 8083 -j DNAT --to-destination 10.X.2.2:83
-A FWD -p udp -m udp --dport 5355 -j DNAT --to-destination 10.X.2.2:55
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -d 10.X.2.1/32 -p tcp -m tcp --dport 7022 -m conntrack --ctstate NEW --ctorigdst 10.X.1.1 --ctorigdstport 2222
-A INPUT -d 10.X.1.1/32 -p tcp -m tcp --dport 7023 -m conntrack --ctstate NEW --ctorigdst 10.X.2.2 --ctorigdstport 2223
-A FORWARD -d 10.X.2.2/32 -p tcp -m tcp --dport 80 -m conntrack --ctstate NEW --ctorigdst 10.X.1.1 --ctorigdstport 8080 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p tcp -m tcp --dport 8081 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p udp -m udp --dport 53 -m conntrack --ctstate NEW --ctreplsrcport 53 -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p udp -m udp --dport 54 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p tcp -m tcp --dport 82 -m conntrack --ctstate NEW -j ACCEPT
-A FORWARD -d 10.X.2.2/32 -p tcp -m tcp --dport 83 -j REJECT --reject-with tcp-reset
-A FORWARD -d 10.X.2.2/32 -p udp -m udp --dport 55 -j REJECT --reject-with icmp-port-unreachable
-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p icmp -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// natStep is traffic both twins see; its outcome must be the same.
type natStep struct {
	name string
	run  func(t *testing.T, tp *nettest.Topology) string
}

// natAddr is the address 10.X.net.host of tp.
func natAddr(tp *nettest.Topology, net, host byte) netip.Addr {
	return netip.AddrFrom4([4]byte{10, tp.Subnet, net, host})
}

// natTCP connects from gen to fw's gen-side address port with a payload
// echoed by a server at server (in ns) and says what both ends saw.
func natTCP(ns string, server func(tp *nettest.Topology) netip.AddrPort, port uint16) func(*testing.T, *nettest.Topology) string {
	return func(t *testing.T, tp *nettest.Topology) string {
		srvNS := tp.SinkNS
		if ns == "fw" {
			srvNS = tp.FwNS
		}
		srv := nettest.StartTCPServer(t, srvNS, server(tp), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), port),
			nettest.WithPayload([]byte("through-nat")), nettest.WithTimeout(2*time.Second))
		out := fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
		if a.Outcome == nettest.OK {
			conns := srv.WaitFinished(1, 2*time.Second)
			for _, c := range conns {
				out += fmt.Sprintf("; server saw %s data %q", natName(tp, c.From.Addr()),
					c.Data)
			}
		}
		return out
	}
}

// natName names an address of tp for comparisons between the twins.
func natName(tp *nettest.Topology, a netip.Addr) string {
	switch a {
	case tp.Gen.IPv4:
		return "GEN"
	case tp.FwIn.IPv4:
		return "FWIN"
	case tp.FwOut.IPv4:
		return "FWOUT"
	case tp.Sink.IPv4:
		return "SINK"
	}
	// Another address of the topology's subnet: the same in both twins.
	if b := a.As4(); a.Is4() && b[0] == 10 && b[1] == tp.Subnet {
		return fmt.Sprintf("10.X.%d.%d", b[2], b[3])
	}
	return a.String()
}

// natSteps are TestDNATAgainstKernel's steps, in order.
var natSteps = []natStep{
	{"tcp port forward to sink", natTCP("sink", func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(natAddr(tp, 2, 2), 80)
	}, 8080)},
	{"tcp forward keeping the port", natTCP("sink", func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(natAddr(tp, 2, 2), 8081)
	}, 8081)},
	{"tcp to fw's other address", natTCP("fw", func(tp *nettest.Topology) netip.AddrPort {
		return netip.AddrPortFrom(natAddr(tp, 2, 1), 7022)
	}, 2222)},
	{"tcp to sink redirected to fw (the input interface's address)", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartTCPServer(t, tp.FwNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 7023), nettest.Echo())
		defer srv.Close()
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 2, 2), 2223),
			nettest.WithPayload([]byte("redirected")), nettest.WithTimeout(2*time.Second))
		return fmt.Sprintf("client %s reply %q", a.Outcome, a.Reply)
	}},
	{"udp port forward, the reply from the original address", natUDPEcho(
		func(tp *nettest.Topology) (string, netip.AddrPort) {
			return tp.GenNS, netip.AddrPortFrom(tp.Gen.IPv4, 31053)
		}, natAt(1, 1, 5353))},
	{"udp forwarded to a closed port: the ICMP error translated back", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 5354), []byte("q"),
			nettest.ExpectReply(), nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"tcp forwarded to a closed port: the reset translated back", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 8082), nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"tcp forwarded, then rejected with a reset: the reset from the original destination", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 8083), nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"udp forwarded, then rejected: the error about the original destination", func(t *testing.T, tp *nettest.Topology) string {
		a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 5355), []byte("q"),
			nettest.ExpectReply(), nettest.WithTimeout(2*time.Second))
		return string(a.Outcome)
	}},
	{"tcp straight to sink: not translated, dropped", func(t *testing.T, tp *nettest.Topology) string {
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(natAddr(tp, 2, 2), 80))
		defer srv.Close()
		// Shorter than the SYN retransmission timeout (1 s): one SYN in
		// both twins, whatever the load (the counters compare them).
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 2, 2), 80),
			nettest.WithTimeout(oneSYNTimeout))
		return string(a.Outcome)
	}},
}

// TestDNATAgainstKernel runs natSteps through both twins and compares the
// outcomes, the counters and the connection tables.
func TestDNATAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, strings.ReplaceAll(natRuleset, "10.X.", fmt.Sprintf("10.%d.", tp.Subnet)))
	})
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, natSteps)
	compareNatCounters(t, tw, 6)
	// The fixed client ports lie below the ephemeral range: every port
	// from 32768 up is a client's ephemeral one, compared as "P".
	compareNatConntrack(t, tw, func(key string, port int) bool {
		return (key == "sport" || key == "dport") && port >= 32768
	}, 5)
}

// runNatSteps runs steps through both twins, in order, and compares their
// outcomes.
func runNatSteps(t *testing.T, tw *twins, steps []natStep) {
	t.Helper()
	for _, st := range steps {
		outs := map[string]string{}
		var mu sync.Mutex
		tw.each(func(kind string, tp *nettest.Topology, _ firewall) {
			out := st.run(t, tp)
			mu.Lock()
			outs[kind] = out
			mu.Unlock()
		})
		compareTwinText(t, st.name, outs["kernel"], outs["xfw"])
	}
}

// compareTwinText fails when the kernel's and xfw's text of what differ,
// and logs it when they agree.
func compareTwinText(t *testing.T, what, kernel, xfw string) {
	t.Helper()
	if kernel != xfw {
		t.Errorf("%s differs:\nkernel:\n%s\nxfw:\n%s", what, kernel, xfw)
	} else {
		t.Logf("%s:\n%s", what, kernel)
	}
}

// compareNatCounters compares the nat table's counters and filter's rules
// that see translated packets of the IPv4 twins (compareNatCountersFam).
func compareNatCounters(t *testing.T, tw *twins, want int) {
	t.Helper()
	compareNatCountersFam(t, tw, 4, want)
}

// natSubnetText returns the text of tp's subnet in addresses of family fam
// ("10.X." or "fd00:X:" with X its index) and what comparisons put for it.
func natSubnetText(tp *nettest.Topology, fam int) (string, string) {
	if fam == 6 {
		return fmt.Sprintf("fd00:%d:", tp.Subnet), "fd00:X:"
	}
	return fmt.Sprintf("10.%d.", tp.Subnet), "10.X."
}

// compareNatCountersFam compares the nat table's counters and filter's
// rules that see translated packets (not the ESTABLISHED rules: their
// segment counts depend on timing) of family fam; the kernel must have
// counted at least want.
func compareNatCountersFam(t *testing.T, tw *twins, fam, want int) {
	t.Helper()
	saves := map[string]map[string]uint64{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		res, err := nettest.Exec(tp.FwNS, append(fw.cmd(fam, "-save"), "-c")...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s save: %v", kind, err)
			return
		}
		subnet, named := natSubnetText(tp, fam)
		text := strings.ReplaceAll(res.Stdout, subnet, named)
		text = strings.NewReplacer(" "+tp.FwOut.Ifname+" ", " FWOUT ", " "+tp.FwIn.Ifname+" ", " FWIN ").Replace(text)
		mu.Lock()
		saves[kind] = tableCounters(text)
		mu.Unlock()
	})
	k, x := saves["kernel"], saves["xfw"]
	var keys []string
	for key := range k {
		if (strings.HasPrefix(key, "nat ") && !strings.HasPrefix(key, "nat :")) ||
			(strings.HasPrefix(key, "filter -A") && !strings.Contains(key, "ESTABLISHED")) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	counted := 0
	for _, key := range keys {
		if k[key] > 0 {
			counted++
		}
		if x[key] != k[key] {
			t.Errorf("%s: kernel %d, xfw %d", key, k[key], x[key])
		}
	}
	if counted < want {
		t.Errorf("the kernel counted %d of %d rules (fix the steps)", counted, len(keys))
	}
	for _, key := range keys {
		t.Logf("%d %s", k[key], key)
	}
}

// compareNatConntrack compares `conntrack -L` of the IPv4 twins
// (compareNatConntrackFam).
func compareNatConntrack(t *testing.T, tw *twins, anon func(key string, port int) bool, want int) {
	t.Helper()
	compareNatConntrackFam(t, tw, 4, anon, want)
}

// compareNatConntrackFam compares `conntrack -L` of both twins for family
// fam (IPv6: its TCP and UDP connections), addresses named (natName,
// nat6Name), the timeouts dropped and the ports anon says vary named P;
// the kernel must list at least want connections.
func compareNatConntrackFam(t *testing.T, tw *twins, fam int, anon func(key string, port int) bool, want int) {
	t.Helper()
	var protos []string
	if fam == 6 {
		protos = []string{"tcp", "udp"}
	}
	compareNatConntrackProtos(t, tw, fam, protos, anon, want)
}

// compareNatConntrackProtos is compareNatConntrackFam of the connections
// whose protocol (conntrack's name: tcp, udp, icmpv6, unknown) is in
// protos (nil: all).
func compareNatConntrackProtos(t *testing.T, tw *twins, fam int, protos []string, anon func(key string, port int) bool,
	want int) {
	t.Helper()
	compareNatConntrackMapped(t, tw, fam, protos, func(key string, port int, _ bool) bool { return anon(key, port) }, want)
}

// compareNatConntrackMapped is compareNatConntrackProtos whose anon also
// hears whether the port is a translated one: the reply tuple's sport or
// dport that differs from the original tuple's dport or sport it mirrors
// (a port the translation chose, at random for a source port).
func compareNatConntrackMapped(t *testing.T, tw *twins, fam int, protos []string,
	anon func(key string, port int, translated bool) bool, want int) {
	t.Helper()
	lists := map[string][]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		argv := []string{"conntrack", "-L"}
		name := natName
		if fam == 6 {
			argv, name = append(argv, "-f", "ipv6"), nat6Name
		}
		if kind == "xfw" {
			argv = append([]string{fw.bin}, argv...)
		}
		res, err := nettest.Exec(tp.FwNS, argv...)
		if err != nil || res.ExitCode != 0 {
			t.Errorf("%s conntrack -L: %v %v", kind, err, res)
			return
		}
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 || protos != nil && !slices.Contains(protos, f[0]) {
				continue
			}
			f = append(f[:2], f[3:]...) // the timeout ticks
			orig := map[string]string{} // the original tuple's ports
			reply := false              // past the original tuple
			for i, w := range f {
				k, v, ok := strings.Cut(w, "=")
				if !ok {
					continue
				}
				if k == "src" && orig["sport"] != "" {
					reply = true
				}
				translated := false
				switch {
				case !reply && (k == "sport" || k == "dport"):
					orig[k] = v
				case reply && k == "sport":
					translated = v != orig["dport"]
				case reply && k == "dport":
					translated = v != orig["sport"]
				}
				if a, err := netip.ParseAddr(v); err == nil {
					f[i] = k + "=" + name(tp, a)
				} else if p, err := strconv.Atoi(v); err == nil && anon(k, p, translated) {
					f[i] = k + "=P"
				}
			}
			lines = append(lines, strings.Join(f, " "))
		}
		sort.Strings(lines)
		mu.Lock()
		lists[kind] = lines
		mu.Unlock()
	})
	compareTwinText(t, "conntrack -L", strings.Join(lists["kernel"], "\n"), strings.Join(lists["xfw"], "\n"))
	if len(lists["kernel"]) < want {
		t.Errorf("the kernel lists %d connections, want %d", len(lists["kernel"]), want)
	}
}

// TestDNATChecksums checks the checksums of translated packets through
// both twins: a socket's segments from gen (a partial checksum on veth:
// the field holds the pseudo-header sum), raw frames with full checksums
// (translated at XDP), sink's replies with full checksums (sink's
// transmit checksumming off; translated back at TC egress) and sink's
// port unreachable errors (the quoted packet translated back). Every TCP
// and UDP frame gen and sink receive must carry a consistent checksum,
// full or partial, and the kinds must be the kernel's.
func TestDNATChecksums(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ethtool")
	tw := newTwins(t, xfwPath(t))
	kinds := map[string][]string{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, strings.ReplaceAll(natRuleset, "10.X.", fmt.Sprintf("10.%d.", tp.Subnet)))
		if res, err := nettest.Exec(tp.SinkNS, "ethtool", "-K", tp.Sink.Ifname, "tx", "off"); err != nil || res.ExitCode != 0 {
			t.Errorf("%s: ethtool: %v %v", kind, err, res)
			return
		}
		l4 := func(c nettest.Captured) bool {
			return !c.Outgoing && (c.Protocol == nettest.ProtoTCP || c.Protocol == nettest.ProtoUDP ||
				c.Protocol == nettest.ProtoICMP)
		}
		atSink := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, l4)
		atGen := nettest.StartCapture(t, tp.GenNS, tp.Gen.Ifname, l4)
		natTCP("sink", func(tp *nettest.Topology) netip.AddrPort {
			return netip.AddrPortFrom(natAddr(tp, 2, 2), 80)
		}, 8080)(t, tp)
		srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(natAddr(tp, 2, 2), 8081))
		defer srv.Close()
		fwin := natAddr(tp, 1, 1)
		syn := nettest.TCPPacket(netip.AddrPortFrom(tp.Gen.IPv4, 31000), netip.AddrPortFrom(fwin, 8081),
			nettest.TCPSyn, 7, nil)
		udp := nettest.UDPPacket(netip.AddrPortFrom(tp.Gen.IPv4, 31001), netip.AddrPortFrom(fwin, 5353),
			[]byte("full-checksum"))
		// To a closed port: sink's port unreachable comes back translated.
		closed := nettest.UDPPacket(netip.AddrPortFrom(tp.Gen.IPv4, 31002), netip.AddrPortFrom(fwin, 5354),
			[]byte("closed"))
		if err := tp.InjectFromGen(tp.GenToFw().Frame(syn), tp.GenToFw().Frame(udp), tp.GenToFw().Frame(closed)); err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
		if _, ok := atGen.WaitFor(func(c nettest.Captured) bool { return c.DstPort == 31000 }, 2*time.Second); !ok {
			t.Errorf("%s: no SYN-ACK for the raw SYN", kind)
		}
		if _, ok := atSink.WaitFor(func(c nettest.Captured) bool { return c.SrcPort == 31001 }, 2*time.Second); !ok {
			t.Errorf("%s: the raw datagram did not reach sink", kind)
		}
		if _, ok := atGen.WaitFor(func(c nettest.Captured) bool { return c.Protocol == nettest.ProtoICMP }, 2*time.Second); !ok {
			t.Errorf("%s: no port unreachable for the datagram to a closed port", kind)
		}
		got := frameKinds(map[string]*nettest.Capture{"sink": atSink, "gen": atGen}, func(f nettest.Captured) string {
			if f.Protocol == nettest.ProtoICMP {
				return fmt.Sprintf("icmp from %s %s", natName(tp, f.Src), icmpErrorKind(tp, f.Raw))
			}
			return fmt.Sprintf("%s %s", natFrameName(tp, f), checksumKind(f.Raw))
		})
		mu.Lock()
		kinds[kind] = got
		mu.Unlock()
	})
	compareChecksumKinds(t, kinds)
}

// frameKinds stops the captures (named by where they listen) and returns
// "WHERE DESCRIPTION" for each frame, sorted, without repeats.
func frameKinds(caps map[string]*nettest.Capture, describe func(nettest.Captured) string) []string {
	var got []string
	for where, c := range caps {
		for _, f := range c.Stop() {
			got = append(got, where+" "+describe(f))
		}
	}
	sort.Strings(got)
	return slicesCompact(got)
}

// compareChecksumKinds compares the twins' frame kinds (frameKinds): the
// same as the kernel's, none of xfw's bad, full and partial checksums
// both seen.
func compareChecksumKinds(t *testing.T, kinds map[string][]string) {
	t.Helper()
	x := strings.Join(kinds["xfw"], "\n")
	compareTwinText(t, "checksums", strings.Join(kinds["kernel"], "\n"), x)
	for _, line := range kinds["xfw"] {
		if strings.Contains(line, " bad") {
			t.Errorf("xfw: %s", line)
		}
	}
	if !strings.Contains(x, "full") || !strings.Contains(x, "partial") {
		t.Errorf("xfw: want both full and partial checksums checked, got:\n%s", x)
	}
}

// natFrameName names a captured frame's protocol and endpoints for
// comparisons between the twins (ephemeral ports dropped).
func natFrameName(tp *nettest.Topology, f nettest.Captured) string {
	return frameName(f, func(a netip.Addr) string { return natName(tp, a) })
}

// frameName names a captured frame's protocol and endpoints (addresses by
// name), ephemeral ports dropped: the raw frames' ports lie below the
// ephemeral range (32768-60999), so a client's ephemeral port, which may
// be any port of that range, cannot equal one of them.
func frameName(f nettest.Captured, name func(netip.Addr) string) string {
	port := func(p uint16) string {
		if p >= 32768 {
			return "EPHEMERAL"
		}
		return strconv.Itoa(int(p))
	}
	return fmt.Sprintf("proto %d %s:%s>%s:%s", f.Protocol, name(f.Src), port(f.SrcPort), name(f.Dst), port(f.DstPort))
}

// checksumKind says whether an Ethernet frame's IPv4 header checksum and
// transport checksum are a valid full checksum ("full"), a partial one
// (the field holds the pseudo-header sum: "partial"), or neither ("bad").
func checksumKind(frame []byte) string {
	const ethLen = 14
	if len(frame) < ethLen+20 {
		return "bad"
	}
	ip := frame[ethLen:]
	ihl := int(ip[0]&0xf) * 4
	total := int(ip[2])<<8 | int(ip[3])
	if total > len(ip) || ihl < 20 || total < ihl {
		return "bad"
	}
	if nettest.Checksum(ip[:ihl]) != 0 {
		return "bad"
	}
	seg := ip[ihl:total]
	csoff := 16
	if ip[9] == nettest.ProtoUDP {
		csoff = 6
	}
	if len(seg) < csoff+2 {
		return "bad"
	}
	var pseudo []byte
	pseudo = append(pseudo, ip[12:20]...)
	pseudo = append(pseudo, 0, ip[9], byte(len(seg)>>8), byte(len(seg)))
	return l4ChecksumKind(pseudo, seg, csoff)
}

// l4ChecksumKind says whether transport segment seg, whose checksum is at
// csoff, carries a valid full checksum over pseudo-header pseudo and
// itself ("full"), a partial one (the field holds the pseudo-header sum:
// "partial"), or neither ("bad").
func l4ChecksumKind(pseudo, seg []byte, csoff int) string {
	if nettest.Checksum(append(append([]byte(nil), pseudo...), seg...)) == 0 {
		return "full"
	}
	field := uint16(seg[csoff])<<8 | uint16(seg[csoff+1])
	if field == ^nettest.Checksum(pseudo) {
		return "partial"
	}
	return "bad"
}

// icmpErrorKind describes an Ethernet frame holding an ICMP error: the
// quoted packet's destination and whether the outer IPv4 checksum, the
// ICMP checksum and the quoted IPv4 and transport checksums are valid.
func icmpErrorKind(tp *nettest.Topology, frame []byte) string {
	const ethLen, icmpLen = 14, 8
	ip := frame[ethLen:]
	if len(ip) < 20 {
		return "short"
	}
	ihl := int(ip[0]&0xf) * 4
	total := int(ip[2])<<8 | int(ip[3])
	if total > len(ip) || total < ihl+icmpLen+20 {
		return "short"
	}
	icmp := ip[ihl:total]
	inner := icmp[icmpLen:]
	dst, _ := netip.AddrFromSlice(inner[16:20])
	innerIHL := int(inner[0]&0xf) * 4
	port := 0
	if len(inner) >= innerIHL+4 {
		port = int(inner[innerIHL+2])<<8 | int(inner[innerIHL+3])
	}
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "bad"
	}
	return fmt.Sprintf("type %d quoting %s:%d ip %s icmp %s quoted-ip %s quoted-l4 %s", icmp[0], natName(tp, dst),
		port, ok(nettest.Checksum(ip[:ihl]) == 0), ok(nettest.Checksum(icmp) == 0),
		ok(nettest.Checksum(inner[:innerIHL]) == 0), checksumKind(append(make([]byte, ethLen), inner...)))
}

// slicesCompact drops adjacent duplicates of a sorted slice.
func slicesCompact(s []string) []string {
	var out []string
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
