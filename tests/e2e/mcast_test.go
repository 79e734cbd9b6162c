package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Multicast to groups fw has joined and groups it has not, against the
// kernel: the kernel's input routing drops multicast to a group the
// receiving device has not joined after PREROUTING, before INPUT
// (ip_check_mc_rcu, ip6_mc_input). The same frames are injected at gen
// into twin topologies; the counters of raw PREROUTING and INPUT and the
// datagrams fw's sockets receive are compared.

// mcPort is the UDP port of the probes and of fw's sockets.
const mcPort = 5353

// The groups fw joins: on in0 (where the probes arrive) and on out0 only.
var (
	mcJoinedIn4  = netip.MustParseAddr("239.1.1.2")
	mcJoinedOut4 = netip.MustParseAddr("239.1.1.3")
	mcJoinedIn6  = netip.MustParseAddr("ff05::98")
	mcJoinedOut6 = netip.MustParseAddr("ff05::97")
)

// mcProbe is one frame injected at gen, and whether the kernel delivers
// it (counted in INPUT; a UDP datagram reaches fw's socket).
type mcProbe struct {
	name      string
	fam       int
	group     netip.Addr
	l4        func(tp *nettest.Topology, group netip.Addr) []byte
	delivered bool
}

// mcMAC returns a group's Ethernet address (RFC 1112, RFC 2464).
func mcMAC(g netip.Addr) net.HardwareAddr {
	b := g.AsSlice()
	if g.Is4() {
		return net.HardwareAddr{0x01, 0x00, 0x5e, b[1] & 0x7f, b[2], b[3]}
	}
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// mcUDP is a datagram to the group's mcPort.
func mcUDP(tp *nettest.Topology, g netip.Addr) []byte {
	src := tp.Gen.IPv4
	if g.Is6() {
		src = tp.Gen.IPv6
	}
	return nettest.IPPacket(src, g, nettest.UDP{SrcPort: 4000, DstPort: mcPort, Payload: []byte("xfw-mcast")})
}

// mcIGMP is an IGMPv2 membership report for the group, sent to it; to
// 224.0.0.1, a general query.
func mcIGMP(tp *nettest.Topology, g netip.Addr) []byte {
	msg := make([]byte, 8)
	msg[0] = 0x16 // v2 report
	if g == netip.MustParseAddr("224.0.0.1") {
		msg[0], msg[1] = 0x11, 100 // query, 10 s
	} else {
		copy(msg[4:], g.AsSlice())
	}
	binary.BigEndian.PutUint16(msg[2:], nettest.Checksum(msg))
	return nettest.IPv4{Src: tp.Gen.IPv4, Dst: g, TTL: 1, Options: []byte{0x94, 4, 0, 0}}.Packet(nettest.Raw{Proto: 2, Data: msg})
}

// mcMLD is an MLDv1 listener report for the group, sent to it with the
// router alert, as hosts send them.
func mcMLD(tp *nettest.Topology, g netip.Addr) []byte {
	grp := g.As16()
	return nettest.IPv6{Src: tp.Gen.IPv6, Dst: g, HopLimit: 1, Ext: []nettest.ExtHeader{nettest.HopByHop(nettest.RouterAlertOption(0))}}.
		Packet(nettest.ICMPv6{Type: 131, Payload: grp[:]})
}

func mcProbes() []mcProbe {
	a := netip.MustParseAddr
	return []mcProbe{
		{"v4 joined on in0", 4, mcJoinedIn4, mcUDP, true},
		{"v4 joined on out0 only", 4, mcJoinedOut4, mcUDP, false},
		{"v4 joined by no device", 4, a("239.1.1.1"), mcUDP, false},
		{"v4 all hosts", 4, a("224.0.0.1"), mcUDP, true},
		{"v4 link-local, not joined", 4, a("224.0.0.99"), mcUDP, false},
		{"v4 IGMP report, joined", 4, mcJoinedIn4, mcIGMP, true},
		{"v4 IGMP report, not joined", 4, a("239.1.1.1"), mcIGMP, false},
		{"v4 IGMP query to all hosts", 4, a("224.0.0.1"), mcIGMP, true},
		{"v6 joined on in0", 6, mcJoinedIn6, mcUDP, true},
		{"v6 joined on out0 only", 6, mcJoinedOut6, mcUDP, false},
		{"v6 joined by no device", 6, a("ff05::99"), mcUDP, false},
		{"v6 all nodes", 6, a("ff02::1"), mcUDP, true},
		{"v6 link-local, not joined", 6, a("ff02::99"), mcUDP, false},
		{"v6 MLD report, joined", 6, mcJoinedIn6, mcMLD, true},
		{"v6 MLD report, not joined", 6, a("ff05::99"), mcMLD, false},
	}
}

// mcRuleset counts each probe's group and protocol in raw PREROUTING and
// in INPUT, as it arrives on in0 in a multicast frame from another host:
// fw's own IGMP and MLD reports for the groups it joined (repeated at
// random within a second of each join, and sent at random within the
// query's delay in answer to a query probe) reach PREROUTING and INPUT as
// a looped-back copy (pkt_type PACKET_LOOPBACK, which -m pkttype calls
// multicast, the device they leave by as the input device), judged by
// both twins at their own random times, and would count beside a probe:
// their source is one of fw's addresses.
func mcRuleset(fam int) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, table := range []string{"raw", "filter"} {
		chain := map[string]string{"raw": "PREROUTING", "filter": "INPUT"}[table]
		fmt.Fprintf(&b, "*%s\n", table)
		for _, pr := range mcProbes() {
			proto := map[int]string{4: "igmp", 6: "ipv6-icmp"}[fam]
			if pr.fam != fam {
				continue
			}
			rule := fmt.Sprintf("-A %s -i %s -d %s -p udp --dport %d -m pkttype --pkt-type multicast -m addrtype ! --src-type LOCAL", chain, nettest.FwInIfname, pr.group, mcPort)
			if !seen[rule] {
				seen[rule] = true
				b.WriteString(rule + "\n")
			}
			rule = fmt.Sprintf("-A %s -i %s -d %s -p %s -m pkttype --pkt-type multicast -m addrtype ! --src-type LOCAL", chain, nettest.FwInIfname, pr.group, proto)
			if !seen[rule] {
				seen[rule] = true
				b.WriteString(rule + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// mcSocket is fw's UDP socket of one family, bound to mcPort on every
// address and joined to the family's groups (it receives what the host
// delivers to any group it joined, IP_MULTICAST_ALL being on). The caller
// closes it.
func mcSocket(t *testing.T, tp *nettest.Topology, fam int) int {
	fd := -1
	err := nettest.InNamespace(tp.FwNS, func() error {
		var err error
		if fam == 4 {
			if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
				return err
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Port: mcPort}); err != nil {
				return err
			}
			for g, dev := range map[netip.Addr]int{mcJoinedIn4: tp.FwIn.Ifindex, mcJoinedOut4: tp.FwOut.Ifindex} {
				m := &unix.IPMreqn{Multiaddr: g.As4(), Ifindex: int32(dev)}
				if err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, m); err != nil {
					return fmt.Errorf("join %s: %w", g, err)
				}
			}
			return nil
		}
		if fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet6{Port: mcPort}); err != nil {
			return err
		}
		for g, dev := range map[netip.Addr]int{mcJoinedIn6: tp.FwIn.Ifindex, mcJoinedOut6: tp.FwOut.Ifindex} {
			m := &unix.IPv6Mreq{Multiaddr: g.As16(), Interface: uint32(dev)}
			if err := unix.SetsockoptIPv6Mreq(fd, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, m); err != nil {
				return fmt.Errorf("join %s: %w", g, err)
			}
		}
		return nil
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		t.Fatalf("fw's IPv%d multicast socket: %v", fam, err)
	}
	return fd
}

// mcDrain returns how many datagrams wait on fd, reading them.
func mcDrain(fd int) int {
	buf := make([]byte, 2048)
	n := 0
	for {
		_, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n
		}
		n++
	}
}

// mcCounters returns the rule counters of raw PREROUTING and INPUT, keyed
// by rule (the two tables' chains have different names).
func mcCounters(t *testing.T, tp *nettest.Topology, fw firewall, fam int) map[string]counter {
	return savedTableCounters(t, tp, fw, fam, false, "raw", "filter")
}

// savedTableCounters returns the rule counters of tables, keyed by rule, or by
// "table rule" when byTable is set.
func savedTableCounters(t *testing.T, tp *nettest.Topology, fw firewall, fam int, byTable bool, tables ...string) map[string]counter {
	out := map[string]counter{}
	for _, table := range tables {
		res, err := nettest.Exec(tp.FwNS, append(fw.cmd(fam, "-save"), "-c", "-t", table)...)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s save of %s failed (%v): %v", fw.kind, table, err, res)
		}
		for k, v := range ruleCountersOf(t, res.Stdout) {
			if byTable {
				k = table + " " + k
			}
			out[k] = v
		}
	}
	return out
}

// TestMulticastGroupsAgainstKernel sends multicast to groups fw's in0
// joined, groups only out0 joined and groups no device joined (UDP,
// IGMP and MLD reports, IPv4 link-local groups and all nodes) through
// xfw and the kernel's iptables with forwarding off and on, and compares
// the counters of raw PREROUTING and INPUT and the datagrams fw's sockets
// received.
func TestMulticastGroupsAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	socks := map[string]map[int]int{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, mcRuleset(4))
		fw.restore(t, tp, 6, mcRuleset(6))
		s := map[int]int{4: mcSocket(t, tp, 4), 6: mcSocket(t, tp, 6)}
		t.Cleanup(func() { unix.Close(s[4]); unix.Close(s[6]) })
		mu.Lock()
		socks[kind] = s
		mu.Unlock()
		if kind == "xfw" { // the groups joined since the restore
			nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
		}
	})
	if t.Failed() {
		return
	}
	for _, fwd := range []string{"0", "1"} {
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.ip_forward="+fwd, "net.ipv6.conf.all.forwarding="+fwd)
			if fw.kind == "xfw" {
				nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
			}
		})
		for _, pr := range mcProbes() {
			t.Run(fmt.Sprintf("forwarding %s/%s", fwd, pr.name), func(t *testing.T) { mcCompare(t, tw, socks, pr) })
		}
	}
	// XFW_MCAST_GROUPS=off at a sync: no groups mirrored, multicast to
	// any group judged in INPUT (the way out for macvlan devices of other
	// namespaces); back on at the next sync.
	tp, fw := tw.tps["xfw"], tw.fws["xfw"]
	unjoined := netip.MustParseAddr("239.1.1.1")
	rule := fmt.Sprintf("INPUT -d %s/32 -i %s -p udp -m udp --dport %d -m pkttype --pkt-type multicast -m addrtype ! --src-type LOCAL", unjoined, nettest.FwInIfname, mcPort)
	eth := tp.GenToFw()
	eth.Dst = mcMAC(unjoined)
	for _, env := range []string{"off", "on"} {
		nettest.MustExec(t, tp.FwNS, "env", "XFW_MCAST_GROUPS="+env, fw.bin, "sync")
		nettest.MustExec(t, tp.FwNS, append(fw.cmd(4, ""), "-w", lockWait, "-Z")...)
		if err := tp.InjectFromGen(eth.Frame(mcUDP(tp, unjoined))); err != nil {
			t.Fatalf("inject: %v", err)
		}
		drainFw(t, tp)
		n := mcCounters(t, tp, fw, 4)[rule].packets
		if want := map[string]uint64{"off": 1, "on": 0}[env]; n != want {
			t.Errorf("XFW_MCAST_GROUPS=%s: INPUT counted %d datagrams to the unjoined %s, want %d", env, n, unjoined, want)
		}
	}
}

// mcCompare sends one probe through both twins and compares.
func mcCompare(t *testing.T, tw *twins, socks map[string]map[int]int, pr mcProbe) {
	got := map[string]map[string]counter{}
	arrived := map[string]int{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		for _, table := range []string{"raw", "filter"} {
			nettest.MustExec(t, tp.FwNS, append(fw.cmd(pr.fam, ""), "-w", lockWait, "-t", table, "-Z")...)
		}
		mcDrain(socks[kind][pr.fam])
		eth := tp.GenToFw()
		eth.Dst = mcMAC(pr.group)
		if err := tp.InjectFromGen(eth.Frame(pr.l4(tp, pr.group))); err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
		drainFw(t, tp)
		c := mcCounters(t, tp, fw, pr.fam)
		n := mcDrain(socks[kind][pr.fam])
		mu.Lock()
		got[kind], arrived[kind] = c, n
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	compareMcastProbe(t, got, arrived, pr.delivered)
}

// compareMcastProbe compares the twins' counters of one multicast probe
// (got and arrived: per twin, the rules' counters and the datagrams fw's
// sockets received), and checks that the probe is what it claims: the
// kernel counted it in one PREROUTING rule, and in one INPUT rule when it
// delivers it.
func compareMcastProbe(t *testing.T, got map[string]map[string]counter, arrived map[string]int, delivered bool) {
	t.Helper()
	k := got["kernel"]
	compareTypeCounters(t, k, got["xfw"])
	pre, in := 0, 0
	for rule, c := range k {
		if c.packets == 0 {
			continue
		}
		if strings.HasPrefix(rule, "PREROUTING ") {
			pre++
		} else if strings.HasPrefix(rule, "INPUT ") {
			in++
		}
	}
	if pre != 1 || (in == 1) != delivered || in > 1 {
		t.Errorf("the kernel counted the probe in %d PREROUTING and %d INPUT rules, want 1 and delivered=%v (fix the probe)", pre, in, delivered)
	}
	if arrived["kernel"] != arrived["xfw"] {
		t.Errorf("fw's sockets received %d datagrams through the kernel, %d through xfw", arrived["kernel"], arrived["xfw"])
	}
}

// TestAgentFollowsMulticastGroups: the agent (checking only hourly, so
// that only the kernel's notifications can tell it) mirrors a group fw
// joins after it started, so datagrams to it reach INPUT and the socket,
// and one fw left, which is then dropped before INPUT as the kernel drops
// it.
func TestAgentFollowsMulticastGroups(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, mcRuleset(4))
	fw.restore(t, tp, 6, mcRuleset(6))
	startAgent(t, bin, tp, "--poll", "1h")
	for _, fam := range []int{4, 6} {
		group := map[int]netip.Addr{4: mcJoinedIn4, 6: mcJoinedIn6}[fam]
		rule := fmt.Sprintf("INPUT -d %s/%d -i %s -p udp -m udp --dport %d -m pkttype --pkt-type multicast -m addrtype ! --src-type LOCAL", group, group.BitLen(), nettest.FwInIfname, mcPort)
		eth := tp.GenToFw()
		eth.Dst = mcMAC(group)
		frame := eth.Frame(mcUDP(tp, group))
		// inputCount injects a datagram and returns INPUT's count of them.
		inputCount := func() uint64 {
			if err := tp.InjectFromGen(frame); err != nil {
				t.Fatalf("inject: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
			c, ok := mcCounters(t, tp, fw, fam)[rule]
			if !ok {
				t.Fatalf("no rule %q in the ruleset", rule)
			}
			return c.packets
		}
		if n := inputCount(); n != 0 {
			t.Fatalf("IPv%d: a datagram to %s, joined by nobody, counted in INPUT (%d)", fam, group, n)
		}
		fd := mcSocket(t, tp, fam)
		closed := false
		t.Cleanup(func() {
			if !closed {
				unix.Close(fd)
			}
		})
		received := 0
		waitFor(t, fmt.Sprintf("a datagram to %s, joined after the agent started, to arrive", group), func() bool {
			inputCount()
			received += mcDrain(fd)
			return received > 0
		})
		if n := inputCount(); n == 0 {
			t.Errorf("IPv%d: datagrams to the joined group %s arrived but INPUT counted none", fam, group)
		}
		unix.Close(fd) // leaves the groups
		closed = true
		before := inputCount()
		waitFor(t, fmt.Sprintf("a datagram to %s, left, to be dropped before INPUT", group), func() bool {
			n := inputCount()
			stale := n != before
			before = n
			return !stale
		})
	}
}
