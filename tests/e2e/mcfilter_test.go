package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// Multicast from sources the group's source filter leaves out, against
// the kernel: its input routing drops multicast from a source no INCLUDE
// membership of the receiving device's group names and every EXCLUDE
// membership blocks (ip_check_mc_rcu), after PREROUTING, before INPUT.
// fw's sockets join groups on in0 with a source-specific join
// (MCAST_JOIN_SOURCE_GROUP) and with blocked sources
// (MCAST_BLOCK_SOURCE); frames from gen's address and from two others
// of its subnet are injected into twin topologies, and the counters of
// raw PREROUTING and INPUT and the datagrams fw's sockets received are
// compared.

// The groups of the source filters: each membership is fw's socket A's or
// B's, on in0.
var (
	mcfSSM      = netip.MustParseAddr("239.2.0.1") // A: INCLUDE {gen}
	mcfBlocked  = netip.MustParseAddr("239.2.0.2") // A: EXCLUDE {other}
	mcfOneOfTwo = netip.MustParseAddr("239.2.0.3") // A: EXCLUDE {other}; B: EXCLUDE {}
	mcfBoth     = netip.MustParseAddr("239.2.0.4") // A and B: EXCLUDE {other}
	mcfMixed    = netip.MustParseAddr("239.2.0.5") // A: INCLUDE {gen}; B: EXCLUDE {other}
)

// mcfSources returns gen's address and two others of its subnet, which
// fw's source filters name or leave out (rp_filter is off).
func mcfSources(tp *nettest.Topology) (gen, other, third netip.Addr) {
	b := tp.Gen.IPv4.As4()
	b[3] = 7
	other = netip.AddrFrom4(b)
	b[3] = 8
	return tp.Gen.IPv4, other, netip.AddrFrom4(b)
}

// mcfProbe is one frame injected at gen: to group, from source (gen,
// other or third), UDP or an IGMP report, and whether the kernel
// delivers it.
type mcfProbe struct {
	name      string
	group     netip.Addr
	source    string
	igmp      bool
	delivered bool
}

func mcfProbes() []mcfProbe {
	return []mcfProbe{
		{"source-specific join, its source", mcfSSM, "gen", false, true},
		{"source-specific join, another source", mcfSSM, "other", false, false},
		{"source-specific join, IGMP from another source", mcfSSM, "other", true, true},
		{"blocked source", mcfBlocked, "other", false, false},
		{"blocking membership, a source not blocked", mcfBlocked, "gen", false, true},
		{"blocked by one membership of two", mcfOneOfTwo, "other", false, true},
		{"blocked by both memberships", mcfBoth, "other", false, false},
		{"INCLUDE and EXCLUDE memberships, the blocked source", mcfMixed, "other", false, false},
		{"INCLUDE and EXCLUDE memberships, the included source", mcfMixed, "gen", false, true},
		{"INCLUDE and EXCLUDE memberships, a source neither names", mcfMixed, "third", false, true},
	}
}

// mcfAddr returns a probe source's address.
func mcfAddr(tp *nettest.Topology, source string) netip.Addr {
	gen, other, third := mcfSources(tp)
	return map[string]netip.Addr{"gen": gen, "other": other, "third": third}[source]
}

// mcfFrame is the probe's frame.
func mcfFrame(tp *nettest.Topology, pr mcfProbe) []byte {
	src := mcfAddr(tp, pr.source)
	eth := tp.GenToFw()
	eth.Dst = mcMAC(pr.group)
	if !pr.igmp {
		return eth.Frame(nettest.IPPacket(src, pr.group, nettest.UDP{SrcPort: 4000, DstPort: mcPort, Payload: []byte("xfw-mcfilter")}))
	}
	msg := make([]byte, 8)
	msg[0] = 0x16 // v2 report
	copy(msg[4:], pr.group.AsSlice())
	binary.BigEndian.PutUint16(msg[2:], nettest.Checksum(msg))
	return eth.Frame(nettest.IPv4{Src: src, Dst: pr.group, TTL: 1, Options: []byte{0x94, 4, 0, 0}}.Packet(nettest.Raw{Proto: 2, Data: msg}))
}

// mcfRuleset counts each probe's group, source and protocol in raw
// PREROUTING and in INPUT (fw's own looped-back IGMP reports have fw's
// source: not counted).
func mcfRuleset(tp *nettest.Topology) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, table := range []string{"raw", "filter"} {
		chain := map[string]string{"raw": "PREROUTING", "filter": "INPUT"}[table]
		fmt.Fprintf(&b, "*%s\n", table)
		for _, pr := range mcfProbes() {
			l4 := fmt.Sprintf("-p udp --dport %d", mcPort)
			if pr.igmp {
				l4 = "-p igmp"
			}
			rule := fmt.Sprintf("-A %s -i %s -s %s -d %s %s -m pkttype --pkt-type multicast", chain, nettest.FwInIfname, mcfAddr(tp, pr.source), pr.group, l4)
			if !seen[rule] {
				seen[rule] = true
				b.WriteString(rule + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// groupSourceReq is a struct group_source_req (linux/in.h, 64-bit: the
// interface, padding, two struct sockaddr_storage) for IPv4.
func groupSourceReq(ifindex int, group, source netip.Addr) string {
	b := make([]byte, 8+2*128)
	binary.NativeEndian.PutUint32(b, uint32(ifindex))
	for i, a := range []netip.Addr{group, source} {
		off := 8 + i*128
		binary.NativeEndian.PutUint16(b[off:], unix.AF_INET)
		a4 := a.As4()
		copy(b[off+4:], a4[:])
	}
	return string(b)
}

// mcfSetsockopt sets multicast option op (MCAST_JOIN_SOURCE_GROUP,
// MCAST_BLOCK_SOURCE, MCAST_UNBLOCK_SOURCE) of fd for group and source on
// device dev.
func mcfSetsockopt(fd, op, dev int, group, source netip.Addr) error {
	if err := unix.SetsockoptString(fd, unix.IPPROTO_IP, op, groupSourceReq(dev, group, source)); err != nil {
		return fmt.Errorf("multicast option %d for %s source %s: %w", op, group, source, err)
	}
	return nil
}

// mcfJoinAny joins fd to group on dev from any source.
func mcfJoinAny(fd, dev int, group netip.Addr) error {
	m := &unix.IPMreqn{Multiaddr: group.As4(), Ifindex: int32(dev)}
	if err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, m); err != nil {
		return fmt.Errorf("join %s: %w", group, err)
	}
	return nil
}

// mcfUDPSocket is a UDP socket of fw bound to mcPort, shared (the caller
// closes it).
func mcfUDPSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: mcPort}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// mcfSockets opens fw's sockets A and B with the memberships above.
func mcfSockets(t *testing.T, tp *nettest.Topology) [2]int {
	fds := [2]int{-1, -1}
	t.Cleanup(func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	})
	gen, other, _ := mcfSources(tp)
	dev := tp.FwIn.Ifindex
	err := nettest.InNamespace(tp.FwNS, func() error {
		for i := range fds {
			fd, err := mcfUDPSocket()
			if err != nil {
				return err
			}
			fds[i] = fd
		}
		a, b := fds[0], fds[1]
		steps := []func() error{
			func() error { return mcfSetsockopt(a, unix.MCAST_JOIN_SOURCE_GROUP, dev, mcfSSM, gen) },
			func() error { return mcfJoinAny(a, dev, mcfBlocked) },
			func() error { return mcfSetsockopt(a, unix.MCAST_BLOCK_SOURCE, dev, mcfBlocked, other) },
			func() error { return mcfJoinAny(a, dev, mcfOneOfTwo) },
			func() error { return mcfSetsockopt(a, unix.MCAST_BLOCK_SOURCE, dev, mcfOneOfTwo, other) },
			func() error { return mcfJoinAny(b, dev, mcfOneOfTwo) },
			func() error { return mcfJoinAny(a, dev, mcfBoth) },
			func() error { return mcfSetsockopt(a, unix.MCAST_BLOCK_SOURCE, dev, mcfBoth, other) },
			func() error { return mcfJoinAny(b, dev, mcfBoth) },
			func() error { return mcfSetsockopt(b, unix.MCAST_BLOCK_SOURCE, dev, mcfBoth, other) },
			func() error { return mcfSetsockopt(a, unix.MCAST_JOIN_SOURCE_GROUP, dev, mcfMixed, gen) },
			func() error { return mcfJoinAny(b, dev, mcfMixed) },
			func() error { return mcfSetsockopt(b, unix.MCAST_BLOCK_SOURCE, dev, mcfMixed, other) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("fw's multicast sockets: %v", err)
	}
	return fds
}

// TestMulticastSourceFiltersAgainstKernel sends multicast from sources
// fw's groups' source filters include, block or leave out, through xfw
// and the kernel's iptables with forwarding off and on, and compares
// the counters of raw PREROUTING and INPUT and the datagrams fw's
// sockets received.
func TestMulticastSourceFiltersAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy")
	tw := newTwins(t, xfwPath(t))
	socks := map[string][2]int{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		fw.restore(t, tp, 4, mcfRuleset(tp))
		s := mcfSockets(t, tp)
		mu.Lock()
		socks[kind] = s
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	for _, fwd := range []string{"0", "1"} {
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.ip_forward="+fwd)
			if fw.kind == "xfw" { // the filters set since the restore
				nettest.MustExec(t, tp.FwNS, fw.bin, "sync")
			}
		})
		for _, pr := range mcfProbes() {
			t.Run(fmt.Sprintf("forwarding %s/%s", fwd, pr.name), func(t *testing.T) { mcfCompare(t, tw, socks, pr) })
		}
	}
}

// mcfNormalized names the twin's gen subnet in the counters' rules the
// same in both twins ("gen-net.7/32").
func mcfNormalized(tp *nettest.Topology, c map[string]counter) map[string]counter {
	b := tp.Gen.IPv4.As4()
	prefix := fmt.Sprintf("%d.%d.%d.", b[0], b[1], b[2])
	out := map[string]counter{}
	for rule, v := range c {
		out[strings.ReplaceAll(rule, prefix, "gen-net.")] = v
	}
	return out
}

// mcfCompare sends one probe through both twins and compares.
func mcfCompare(t *testing.T, tw *twins, socks map[string][2]int, pr mcfProbe) {
	got := map[string]map[string]counter{}
	arrived := map[string]int{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		for _, table := range []string{"raw", "filter"} {
			nettest.MustExec(t, tp.FwNS, append(fw.cmd(4, ""), "-w", lockWait, "-t", table, "-Z")...)
		}
		for _, fd := range socks[kind] {
			mcDrain(fd)
		}
		if err := tp.InjectFromGen(mcfFrame(tp, pr)); err != nil {
			t.Errorf("%s: inject: %v", kind, err)
		}
		drainFw(t, tp)
		c := mcfNormalized(tp, mcCounters(t, tp, fw, 4))
		n := 0
		for _, fd := range socks[kind] {
			n += mcDrain(fd)
		}
		mu.Lock()
		got[kind], arrived[kind] = c, n
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	compareMcastProbe(t, got, arrived, pr.delivered)
}

// TestAgentFollowsSourceFilters: the agent (checking interfaces only
// hourly) mirrors a source fw's socket blocks after it started, so
// datagrams from it are dropped before INPUT as the kernel drops them,
// and the source unblocked again, so they reach INPUT and the socket.
func TestAgentFollowsSourceFilters(t *testing.T) {
	nettest.RequireRoot(t)
	bin := xfwPath(t)
	tp := nettest.New(t, nettest.WithStaticNeighbors())
	fw := firewall{kind: "xfw", bin: bin}
	t.Cleanup(func() { fw.stop(t, tp) })
	fw.restore(t, tp, 4, mcfRuleset(tp))
	startAgent(t, bin, tp, "--poll", "1h")
	_, other, _ := mcfSources(tp)
	pr := mcfProbe{group: mcfBlocked, source: "other"}
	rule := fmt.Sprintf("INPUT -s %s/32 -d %s/32 -i %s -p udp -m udp --dport %d -m pkttype --pkt-type multicast", other, mcfBlocked, nettest.FwInIfname, mcPort)
	frame := mcfFrame(tp, pr)
	// inputCount injects a datagram and returns INPUT's count of them.
	inputCount := func() uint64 {
		if err := tp.InjectFromGen(frame); err != nil {
			t.Fatalf("inject: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		c, ok := mcCounters(t, tp, fw, 4)[rule]
		if !ok {
			t.Fatalf("no rule %q in the ruleset", rule)
		}
		return c.packets
	}
	var fd int
	err := nettest.InNamespace(tp.FwNS, func() error {
		var err error
		if fd, err = mcfUDPSocket(); err != nil {
			return err
		}
		return mcfJoinAny(fd, tp.FwIn.Ifindex, mcfBlocked)
	})
	if err != nil {
		t.Fatalf("fw's socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	received := 0
	waitFor(t, fmt.Sprintf("a datagram from %s to %s, joined after the agent started, to arrive", other, mcfBlocked), func() bool {
		inputCount()
		received += mcDrain(fd)
		return received > 0
	})
	for _, op := range []int{unix.MCAST_BLOCK_SOURCE, unix.MCAST_UNBLOCK_SOURCE} {
		if err := mcfSetsockopt(fd, op, tp.FwIn.Ifindex, mcfBlocked, other); err != nil {
			t.Fatal(err)
		}
		if op == unix.MCAST_BLOCK_SOURCE {
			before := inputCount()
			waitFor(t, fmt.Sprintf("a datagram from the blocked %s to be dropped before INPUT", other), func() bool {
				n := inputCount()
				stale := n != before
				before = n
				return !stale
			})
			mcDrain(fd)
			if n := inputCount(); n != before {
				t.Errorf("a datagram from the blocked %s counted in INPUT after the agent mirrored the block", other)
			}
			continue
		}
		received = 0
		waitFor(t, fmt.Sprintf("a datagram from the unblocked %s to arrive", other), func() bool {
			inputCount()
			received += mcDrain(fd)
			return received > 0
		})
	}
}
