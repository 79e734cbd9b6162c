package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The copy of a broadcast or multicast datagram the host sends, which the
// kernel delivers to the host itself (dev_loopback_xmit): it passes the
// copy's POSTROUTING, then PREROUTING and INPUT with the output device as
// its input device, with the connection OUTPUT opened for the original
// (NEW; nat's chains skip it), -m pkttype calling it broadcast or
// multicast, its chains' rewrites applied to it. fw sends from a socket of
// its own, through in0, to in0's subnet broadcast and to a group a socket
// of fw joined on in0 (with and without IP_MULTICAST_LOOP); the counters of
// every table and the datagrams fw's receiving socket got (with their TTL,
// which mangle PREROUTING sets) are compared between the twins, with INPUT
// accepting the copies and dropping them.

// lcPort is the probes' destination port and the receiving socket's.
const lcPort = 5454

// lcGroups are the groups fw's receiving socket joins on in0.
var (
	lcGroup4 = netip.MustParseAddr("239.1.4.4")
	lcGroup6 = netip.MustParseAddr("ff05::4454")
)

// lcTTL is the TTL (hop limit) mangle PREROUTING gives the probes.
const lcTTL = 33

// lcSends is how many datagrams each probe sends (from one socket: one
// connection).
const lcSends = 3

// lcProbe is one kind of datagram fw sends itself through in0.
type lcProbe struct {
	name string
	fam  int
	dst  func(tp *nettest.Topology) netip.Addr
	loop bool // IP_MULTICAST_LOOP / IPV6_MULTICAST_LOOP (multicast)
}

// lcBroadcast is in0's subnet broadcast address.
func lcBroadcast(tp *nettest.Topology) netip.Addr {
	b := tp.GenNet4.Masked().Addr().As4()
	for i := tp.GenNet4.Bits(); i < 32; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom4(b)
}

func lcProbes() []lcProbe {
	g4 := func(*nettest.Topology) netip.Addr { return lcGroup4 }
	g6 := func(*nettest.Topology) netip.Addr { return lcGroup6 }
	return []lcProbe{
		{"v4 subnet broadcast", 4, lcBroadcast, false},
		{"v4 multicast, loop on", 4, g4, true},
		{"v4 multicast, loop off", 4, g4, false},
		{"v6 multicast, loop on", 6, g6, true},
		{"v6 multicast, loop off", 6, g6, false},
	}
}

// lcRuleset counts the probes' datagrams in every chain they may pass:
// raw, mangle (with a mark set in PREROUTING, read in INPUT), nat and
// filter, INPUT by input device, connection state and packet type; drop,
// when set, ends filter INPUT with a DROP of them.
func lcRuleset(fam int, drop bool) string {
	m := fmt.Sprintf("-p udp -m udp --dport %d", lcPort)
	var b strings.Builder
	fmt.Fprintf(&b, "*raw\n-A PREROUTING %[1]s\n-A OUTPUT %[1]s\nCOMMIT\n", m)
	// The copy's TTL (hop limit) as its PREROUTING sets it, read by
	// fw's socket (lcTTL).
	hop := map[int]string{4: "TTL --ttl-set", 6: "HL --hl-set"}[fam]
	fmt.Fprintf(&b, "*mangle\n-A PREROUTING %[1]s\n-A PREROUTING %[1]s -j MARK --set-xmark 0x7/0xffffffff\n"+
		"-A PREROUTING %[1]s -j %[3]s %[4]d\n"+
		"-A INPUT %[1]s\n-A INPUT %[1]s -m mark --mark 0x7\n-A OUTPUT %[1]s\n-A POSTROUTING %[1]s\n"+
		"-A POSTROUTING -o %[2]s %[1]s\nCOMMIT\n", m, nettest.FwInIfname, hop, lcTTL)
	fmt.Fprintf(&b, "*nat\n-A PREROUTING %[1]s\n-A INPUT %[1]s\n-A OUTPUT %[1]s\n-A POSTROUTING %[1]s\nCOMMIT\n", m)
	fmt.Fprintf(&b, "*filter\n-A INPUT -i %[2]s %[1]s\n-A INPUT -i lo %[1]s\n-A INPUT %[1]s -m conntrack --ctstate NEW\n"+
		"-A INPUT %[1]s -m conntrack --ctstate ESTABLISHED\n-A INPUT %[1]s -m conntrack --ctstate UNTRACKED,INVALID\n"+
		"-A INPUT %[1]s -m pkttype --pkt-type broadcast\n-A INPUT %[1]s -m pkttype --pkt-type multicast\n"+
		"-A INPUT %[1]s -m mark --mark 0x7\n", m, nettest.FwInIfname)
	if drop {
		fmt.Fprintf(&b, "-A INPUT %s -j DROP\n", m)
	}
	fmt.Fprintf(&b, "-A OUTPUT %s\nCOMMIT\n", m)
	return b.String()
}

// lcReceiver is fw's socket of one family bound to lcPort, joined to the
// family's group on in0. The caller closes it.
func lcReceiver(t *testing.T, tp *nettest.Topology, fam int) int {
	fd := -1
	err := nettest.InNamespace(tp.FwNS, func() error {
		var err error
		if fam == 4 {
			if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
				return err
			}
			if err := unix.Bind(fd, &unix.SockaddrInet4{Port: lcPort}); err != nil {
				return err
			}
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTTL, 1); err != nil {
				return err
			}
			m := &unix.IPMreqn{Multiaddr: lcGroup4.As4(), Ifindex: int32(tp.FwIn.Ifindex)}
			return unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_ADD_MEMBERSHIP, m)
		}
		if fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrInet6{Port: lcPort}); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1); err != nil {
			return err
		}
		m := &unix.IPv6Mreq{Multiaddr: lcGroup6.As16(), Interface: uint32(tp.FwIn.Ifindex)}
		return unix.SetsockoptIPv6Mreq(fd, unix.IPPROTO_IPV6, unix.IPV6_JOIN_GROUP, m)
	})
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		t.Fatalf("fw's IPv%d receiving socket: %v", fam, err)
	}
	return fd
}

// lcSend sends the probe's lcSends datagrams from a new socket of fw,
// through in0.
func lcSend(tp *nettest.Topology, pr lcProbe) error {
	return nettest.InNamespace(tp.FwNS, func() error {
		dst := pr.dst(tp)
		dom := unix.AF_INET
		if pr.fam == 6 {
			dom = unix.AF_INET6
		}
		fd, err := unix.Socket(dom, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var sa unix.Sockaddr
		switch {
		case pr.fam == 6:
			err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_IF, tp.FwIn.Ifindex)
			if err == nil {
				err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_MULTICAST_LOOP, b2i(pr.loop))
			}
			sa = &unix.SockaddrInet6{Addr: dst.As16(), Port: lcPort}
		case dst.IsMulticast():
			err = unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &unix.IPMreqn{Ifindex: int32(tp.FwIn.Ifindex)})
			if err == nil {
				err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, b2i(pr.loop))
			}
			sa = &unix.SockaddrInet4{Addr: dst.As4(), Port: lcPort}
		default:
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1)
			sa = &unix.SockaddrInet4{Addr: dst.As4(), Port: lcPort}
		}
		if err != nil {
			return err
		}
		for i := 0; i < lcSends; i++ {
			if err := unix.Sendto(fd, []byte("xfw-loopcopy"), 0, sa); err != nil {
				return fmt.Errorf("sendto %s: %w", dst, err)
			}
		}
		return nil
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lcDrain reads the datagrams waiting on fd and returns their TTLs (hop
// limits) as the socket reports them, in order.
func lcDrain(fd int) []int {
	buf, oob := make([]byte, 2048), make([]byte, 256)
	var ttls []int
	for {
		_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ttls
		}
		ttl := -1
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if (m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_TTL ||
				m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_HOPLIMIT) && len(m.Data) >= 4 {
				ttl = int(binary.NativeEndian.Uint32(m.Data))
			}
		}
		ttls = append(ttls, ttl)
	}
}

// lcCounters returns the rule counters of every table, keyed by "table
// rule".
func lcCounters(t *testing.T, tp *nettest.Topology, fw firewall, fam int) map[string]counter {
	return savedTableCounters(t, tp, fw, fam, true, "raw", "mangle", "nat", "filter")
}

// TestLoopCopyAgainstKernel sends broadcast and multicast datagrams from
// fw through in0, which the kernel also delivers to fw itself, through
// xfw and the kernel's iptables, INPUT accepting and dropping them, and
// compares the counters of every table and what fw's socket received.
func TestLoopCopyAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	socks := map[string]map[int]int{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		s := map[int]int{4: lcReceiver(t, tp, 4), 6: lcReceiver(t, tp, 6)}
		t.Cleanup(func() { unix.Close(s[4]); unix.Close(s[6]) })
		mu.Lock()
		socks[kind] = s
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	for _, drop := range []bool{false, true} {
		tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
			fw.restore(t, tp, 4, lcRuleset(4, drop))
			fw.restore(t, tp, 6, lcRuleset(6, drop))
		})
		if t.Failed() {
			return
		}
		for _, pr := range lcProbes() {
			t.Run(fmt.Sprintf("drop %v/%s", drop, pr.name), func(t *testing.T) { lcCompare(t, tw, socks, pr, drop) })
		}
	}
}

// lcCompare sends one probe in both twins and compares.
func lcCompare(t *testing.T, tw *twins, socks map[string]map[int]int, pr lcProbe, drop bool) {
	got := map[string]map[string]counter{}
	arrived := map[string][]int{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		for _, table := range []string{"raw", "mangle", "nat", "filter"} {
			nettest.MustExec(t, tp.FwNS, append(fw.cmd(pr.fam, ""), "-w", lockWait, "-t", table, "-Z")...)
		}
		lcDrain(socks[kind][pr.fam])
		if err := lcSend(tp, pr); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		time.Sleep(typeSettle)
		c := lcCounters(t, tp, fw, pr.fam)
		n := lcDrain(socks[kind][pr.fam])
		mu.Lock()
		got[kind], arrived[kind] = c, n
		mu.Unlock()
	})
	if t.Failed() {
		return
	}
	k, x := got["kernel"], got["xfw"]
	compareTypeCounters(t, k, x)
	// The probe is what it claims: the kernel's copy reached INPUT by
	// in0 (or none was made), and fw's socket got it unless INPUT
	// dropped it.
	copied := pr.loop || pr.fam == 4 && !pr.dst(tw.tps["kernel"]).IsMulticast()
	in := k[fmt.Sprintf("filter INPUT -i %s -p udp -m udp --dport %d", nettest.FwInIfname, lcPort)].packets
	if want := map[bool]uint64{true: lcSends, false: 0}[copied]; in != want {
		t.Errorf("the kernel counted %d copies arriving by %s in INPUT, want %d (fix the probe)", in, nettest.FwInIfname, want)
	}
	// fw's socket got the copies unless INPUT dropped them, with the
	// TTL mangle PREROUTING set.
	var want []int
	for i := 0; copied && !drop && i < lcSends; i++ {
		want = append(want, lcTTL)
	}
	if !slices.Equal(arrived["kernel"], want) {
		t.Errorf("fw's socket received datagrams with TTLs %v through the kernel, want %v (fix the probe)", arrived["kernel"], want)
	}
	if !slices.Equal(arrived["kernel"], arrived["xfw"]) {
		t.Errorf("fw's socket received datagrams with TTLs %v through the kernel, %v through xfw", arrived["kernel"], arrived["xfw"])
	}
}
