package e2e

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// NAT ranges against the kernel: DNAT to an address range (the address
// the kernel's hash of the client and server picks, the same for every
// client, and with --persistent the same for both servers), DNAT to a
// port range (the port kept when in range), SNAT to a port range of ten
// ports with eleven clients (the eleventh clashes and is dropped),
// MASQUERADE --random-fully (a random port per connection) and SNAT
// --random, through xfw and iptables-legacy in twin topologies; what sink
// saw, every nat rule's counter and filter's --ctstate SNAT and DNAT
// counters compared.

// natRangeRuleset is TestNatRangesAgainstKernel's ruleset (X: the
// topology's subnet; 10.X.1.100 is fw's second gen-side address, sink has
// 10.X.2.10-13 besides 10.X.2.2). The --ctrepldstport 20000:20009
// counter leaves out sink's echoes from port 9001: MASQUERADE
// --random-fully picks a port in that range too, with odds 10 in 64,512
// per connection, which differ between the twins.
const natRangeRuleset = natTableStart + `-A PREROUTING -d 10.X.1.1/32 -p udp -m udp --dport 7000 -j DNAT --to-destination 10.X.2.10-10.X.2.13
-A PREROUTING -d 10.X.1.100/32 -p udp -m udp --dport 7000 -j DNAT --to-destination 10.X.2.10-10.X.2.13
-A PREROUTING -d 10.X.1.1/32 -p udp -m udp --dport 7001 -j DNAT --to-destination 10.X.2.10-10.X.2.13 --persistent
-A PREROUTING -d 10.X.1.100/32 -p udp -m udp --dport 7001 -j DNAT --to-destination 10.X.2.10-10.X.2.13 --persistent
-A PREROUTING -d 10.X.1.1/32 -p udp -m udp --dport 7002 -j DNAT --to-destination 10.X.2.2:8000-8009
-A PREROUTING -d 10.X.1.1/32 -p udp -m udp --dport 8005 -j DNAT --to-destination 10.X.2.2:8000-8009
-A PREROUTING -d 10.X.1.1/32 -p udp -m udp --dport 7020 -j REDIRECT --to-ports 7100-7109
-A OUTPUT -d 10.X.2.2/32 -p udp -m udp --dport 7010 -j DNAT --to-destination 10.X.2.10-10.X.2.13
-A POSTROUTING -d 10.X.2.2/32 -p udp -m udp --dport 9000 -j SNAT --to-source 10.X.2.1:20000-20009
-A POSTROUTING -p udp -m udp --dport 7004 -j SNAT --to-source 10.X.2.100-10.X.2.103
-A POSTROUTING -p udp -m udp --dport 7005 -j SNAT --to-source 10.X.2.100-10.X.2.103 --persistent
-A POSTROUTING -d 10.X.2.2/32 -p udp -m udp --dport 9001 -j MASQUERADE --random-fully
-A POSTROUTING -d 10.X.2.2/32 -p udp -m udp --dport 9002 -j SNAT --to-source 10.X.2.1:20000-20009 --random
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m conntrack --ctstate DNAT
-A FORWARD -p udp -m conntrack --ctstate SNAT
-A FORWARD -p udp -m conntrack ! --ctstate SNAT,DNAT
-A FORWARD -p udp -m conntrack --ctstate NEW,DNAT
-A FORWARD -p udp -m udp ! --sport 9001 -m conntrack --ctrepldstport 20000:20009
-A FORWARD -p udp -m conntrack --ctreplsrcport 8000:8009
-A FORWARD -p udp -m conntrack --ctreplsrc 10.X.2.8/29
-A FORWARD -p udp -m conntrack ! --ctreplsrc 10.X.2.0/24
-A FORWARD -p udp -m conntrack --ctrepldst 10.X.2.1
-A FORWARD -p udp -m conntrack --ctstate ESTABLISHED -j ACCEPT
-A FORWARD -p udp -m conntrack --ctstate NEW -j ACCEPT
COMMIT
`

// natRangeClients is how many extra client addresses gen has
// (10.X.1.20 on).
const natRangeClients = 16

// natRangeSetup gives tp's gen its client addresses, fw its second
// gen-side address and its SNAT addresses (10.X.2.100-103), sink its
// backends, and makes sink silent on the DNAT ports.
func natRangeSetup(t *testing.T, tp *nettest.Topology) {
	for i := 0; i < natRangeClients; i++ {
		nettest.MustExec(t, tp.GenNS, "ip", "addr", "add", natAddr(tp, 1, byte(20+i)).String()+"/24", "dev", tp.Gen.Ifname)
	}
	nettest.MustExec(t, tp.FwNS, "ip", "addr", "add", natAddr(tp, 1, 100).String()+"/24", "dev", tp.FwIn.Ifname)
	for i := 100; i <= 103; i++ {
		nettest.MustExec(t, tp.FwNS, "ip", "addr", "add", natAddr(tp, 2, byte(i)).String()+"/24", "dev", tp.FwOut.Ifname)
	}
	for i := 10; i <= 13; i++ {
		nettest.MustExec(t, tp.SinkNS, "ip", "addr", "add", natAddr(tp, 2, byte(i)).String()+"/24", "dev", tp.Sink.Ifname)
	}
	nettest.MustExec(t, tp.SinkNS, "iptables-legacy", "-A", "INPUT", "-p", "udp", "--dport", "7000:8009", "-j", "DROP")
}

// natShort names an address of tp by its last two bytes (the twins'
// subnets differ).
func natShort(a netip.Addr) string {
	b := a.As4()
	return fmt.Sprintf("%d.%d", b[2], b[3])
}

// sinkUDP captures the UDP datagrams sink receives while send runs, until
// n arrived (or a second passed).
func sinkUDP(t *testing.T, tp *nettest.Topology, n int, send func()) []nettest.Captured {
	c := nettest.StartCapture(t, tp.SinkNS, tp.Sink.Ifname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.Protocol == nettest.ProtoUDP
	})
	send()
	deadline := time.Now().Add(time.Second)
	for len(c.Frames()) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return c.Stop()
}

// natRangeAddrStep: every client to both servers, with and without
// --persistent (from a port of its own for each: the same translated
// tuple twice is a clash); how many backends match find_best_ips_proto's
// choice (natRangePick: the twins' addresses differ, so their choices
// do), and the checks the kernel's choice passes (more than one backend
// used, --persistent one per client).
func natRangeAddrStep(t *testing.T, tp *nettest.Topology) string {
	frames := sinkUDP(t, tp, 4*natRangeClients, func() {
		for i := 0; i < natRangeClients; i++ {
			for j, dst := range natRangeDests(tp) {
				nettest.UDPSend(tp.GenNS, dst, []byte{byte(j)},
					nettest.WithSource(netip.AddrPortFrom(natAddr(tp, 1, byte(20+i)), uint16(40000+j))))
			}
		}
	})
	lo, hi := natAddr(tp, 2, 10), natAddr(tp, 2, 13)
	got := map[string]netip.Addr{} // client and destination index → backend
	used := map[netip.Addr]bool{}
	asKernel := 0
	for _, f := range frames {
		j := int(f.Payload[0])
		got[fmt.Sprintf("%s %d", f.Src, j)] = f.Dst
		used[f.Dst] = true
		dst := natRangeDests(tp)[j]
		if f.Dst == natRangePick(lo, hi, f.Src, dst.Addr(), dst.Port() == 7001) {
			asKernel++
		}
	}
	persistent := true
	for i := 0; i < natRangeClients; i++ {
		c := natAddr(tp, 1, byte(20+i))
		if got[fmt.Sprintf("%s 2", c)] != got[fmt.Sprintf("%s 3", c)] {
			persistent = false
		}
	}
	// How many of the four are used depends on the addresses (the twins'
	// differ): more than one is (16 clients on one: odds 4 in 4^16).
	return fmt.Sprintf("received %d, as find_best_ips_proto picks %d, more than one backend used %v, persistent one per client %v",
		len(frames), asKernel, len(used) > 1, persistent)
}

// natRangeDests are natRangeAddrStep's destinations: both servers without
// and with --persistent.
func natRangeDests(tp *nettest.Topology) []netip.AddrPort {
	return []netip.AddrPort{netip.AddrPortFrom(natAddr(tp, 1, 1), 7000), netip.AddrPortFrom(natAddr(tp, 1, 100), 7000),
		netip.AddrPortFrom(natAddr(tp, 1, 1), 7001), netip.AddrPortFrom(natAddr(tp, 1, 100), 7001)}
}

// natRangePick is the address find_best_ips_proto picks in lo-hi for a
// connection from src to dst: jhash2 of the source's four words (network
// order, as in memory), with the destination as initial value (0 with
// --persistent), scaled into the range.
func natRangePick(lo, hi, src, dst netip.Addr, persistent bool) netip.Addr {
	le := func(a netip.Addr) uint32 { return binary.LittleEndian.Uint32(a.AsSlice()) }
	init := le(dst)
	if persistent {
		init = 0
	}
	j := natJhash2([]uint32{le(src), 0, 0, 0}, init)
	l, h := binary.BigEndian.Uint32(lo.AsSlice()), binary.BigEndian.Uint32(hi.AsSlice())
	v := l + uint32(uint64(j)*uint64(h-l+1)>>32)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// natJhash2 is the kernel's jhash2 (include/linux/jhash.h).
func natJhash2(k []uint32, init uint32) uint32 {
	a := 0xdeadbeef + uint32(len(k))<<2 + init
	b, c := a, a
	v := [3]*uint32{&a, &b, &c}
	for len(k) > 3 {
		a, b, c = a+k[0], b+k[1], c+k[2]
		// __jhash_mix: x -= z; x ^= rol(z, r); z += y, over a, b, c
		// in turn (z the one before x, y the one after).
		for i, r := range []int{4, 6, 8, 16, 19, 4} {
			x, z, y := v[i%3], v[(i+2)%3], v[(i+1)%3]
			*x -= *z
			*x ^= bits.RotateLeft32(*z, r)
			*z += *y
		}
		k = k[3:]
	}
	if len(k) == 0 {
		return c
	}
	for i := len(k) - 1; i >= 0; i-- {
		*v[i] += k[i]
	}
	// __jhash_final: x ^= z; x -= rol(z, r), over c, a, b in turn (z the
	// one before x).
	for i, r := range []int{14, 11, 25, 16, 4, 14, 24} {
		x, z := v[(i+2)%3], v[(i+1)%3]
		*x ^= *z
		*x -= bits.RotateLeft32(*z, r)
	}
	return c
}

// natRangeSNATAddrStep: every client (its index the payload) to two
// servers, with and without --persistent; how many sources match
// find_best_ips_proto's choice, and --persistent one per client.
func natRangeSNATAddrStep(t *testing.T, tp *nettest.Topology) string {
	servers := []netip.Addr{tp.Sink.IPv4, natAddr(tp, 2, 10)}
	frames := sinkUDP(t, tp, 4*natRangeClients, func() {
		for i := 0; i < natRangeClients; i++ {
			for j, port := range []uint16{7004, 7005} {
				for k, srv := range servers {
					nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(srv, port), []byte{byte(i)},
						nettest.WithSource(netip.AddrPortFrom(natAddr(tp, 1, byte(20+i)), uint16(47000+2*j+k))))
				}
			}
		}
	})
	lo, hi := natAddr(tp, 2, 100), natAddr(tp, 2, 103)
	asKernel, used := 0, map[netip.Addr]bool{}
	persistent := map[byte]netip.Addr{}
	onePerClient := true
	for _, f := range frames {
		i := f.Payload[0]
		used[f.Src] = true
		if f.Src == natRangePick(lo, hi, natAddr(tp, 1, 20+i), f.Dst, f.DstPort == 7005) {
			asKernel++
		}
		if f.DstPort == 7005 {
			if a, ok := persistent[i]; ok && a != f.Src {
				onePerClient = false
			}
			persistent[i] = f.Src
		}
	}
	return fmt.Sprintf("received %d, as find_best_ips_proto picks %d, more than one address used %v, persistent one per client %v",
		len(frames), asKernel, len(used) > 1, onePerClient)
}

// natRangeSNATReuseStep: every client from one port to two servers
// through the range without --persistent: the second connection reuses
// the first one's mapping (find_appropriate_src), the first is the
// hash's choice.
func natRangeSNATReuseStep(t *testing.T, tp *nettest.Topology) string {
	servers := []netip.Addr{tp.Sink.IPv4, natAddr(tp, 2, 10)}
	frames := sinkUDP(t, tp, 2*natRangeClients, func() {
		for i := 0; i < natRangeClients; i++ {
			for _, srv := range servers {
				nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(srv, 7004), []byte{byte(i)},
					nettest.WithSource(netip.AddrPortFrom(natAddr(tp, 1, byte(20+i)), 47100)))
			}
		}
	})
	lo, hi := natAddr(tp, 2, 100), natAddr(tp, 2, 103)
	first := map[byte]netip.Addr{}
	hashed, reused, portKept := 0, 0, 0
	for _, f := range frames {
		i := f.Payload[0]
		if f.SrcPort == 47100 {
			portKept++
		}
		a, seen := first[i]
		if !seen {
			first[i] = f.Src
			if f.Src == natRangePick(lo, hi, natAddr(tp, 1, 20+i), f.Dst, false) {
				hashed++
			}
		} else if a == f.Src {
			reused++
		}
	}
	// The port is kept by the first client on each address, both ways
	// (the second connection takes the first's mapping, port included).
	addrs := map[netip.Addr]bool{}
	for _, a := range first {
		addrs[a] = true
	}
	return fmt.Sprintf("received %d, first as find_best_ips_proto picks %d, second on the first's address %d, "+
		"port kept by each address's first client only %v", len(frames), hashed, reused, portKept == 2*len(addrs))
}

// natRangePortStep: DNAT to a port range, from ten client ports (the
// range's first port each, as the kernel searches it), then to a port in
// the range (kept).
func natRangePortStep(t *testing.T, tp *nettest.Topology) string {
	frames := sinkUDP(t, tp, 11, func() {
		for i := 0; i < 10; i++ {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 7002), []byte("r"),
				nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, uint16(41000+i))))
		}
		nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 8005), []byte("k"),
			nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, 41100)))
	})
	inRange, kept := 0, false
	var ports []int
	for _, f := range frames {
		if f.DstPort >= 8000 && f.DstPort <= 8009 && natShort(f.Dst) == "2.2" {
			inRange++
		}
		ports = append(ports, int(f.DstPort))
		if f.SrcPort == 41100 {
			kept = f.DstPort == 8005
		}
	}
	// Without random flags the kernel searches a destination's range
	// from its first port: every client gets the first free one.
	sort.Ints(ports)
	return fmt.Sprintf("received %d, in 8000-8009 %d, 8005 kept %v, ports %v", len(frames), inRange, kept, ports)
}

// natRangeSNAT sends n datagrams from gen ports base on to sink's echo
// server on port, one after the other (each waits for its echo), and
// says how many came back and what source ports sink saw.
func natRangeSNAT(t *testing.T, tp *nettest.Topology, port uint16, base, n int) (echoed int, ports []int) {
	srv := nettest.StartUDPServer(t, tp.SinkNS, netip.AddrPortFrom(tp.Sink.IPv4, port), nettest.Echo())
	defer srv.Close()
	for i := 0; i < n; i++ {
		a := nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv4, port), []byte("s"), nettest.ExpectReply(),
			nettest.WithTimeout(time.Second), nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, uint16(base+i))))
		if a.Outcome == nettest.OK {
			echoed++
		}
	}
	for _, d := range srv.Received() {
		ports = append(ports, int(d.From.Port()))
	}
	sort.Ints(ports)
	return echoed, ports
}

// natRangeSteps are TestNatRangesAgainstKernel's steps, in order.
var natRangeSteps = []natStep{
	{"DNAT to an address range, with and without --persistent", natRangeAddrStep},
	{"DNAT to a port range", natRangePortStep},
	{"REDIRECT to a port range", func(t *testing.T, tp *nettest.Topology) string {
		var srvs []*nettest.UDPServer
		for port := uint16(7100); port <= 7109; port++ {
			srvs = append(srvs, nettest.StartUDPServer(t, tp.FwNS, netip.AddrPortFrom(natAddr(tp, 1, 1), port)))
		}
		for i := 0; i < 5; i++ {
			nettest.UDPSend(tp.GenNS, netip.AddrPortFrom(natAddr(tp, 1, 1), 7020), []byte("redir"),
				nettest.WithSource(netip.AddrPortFrom(tp.Gen.IPv4, uint16(44000+i))))
		}
		got := 0
		deadline := time.Now().Add(time.Second)
		for got < 5 && time.Now().Before(deadline) {
			got = 0
			for _, srv := range srvs {
				got += len(srv.Received())
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, srv := range srvs {
			srv.Close()
		}
		return fmt.Sprintf("received on 7100-7109: %d", got)
	}},
	{"nat OUTPUT: fw's own DNAT to an address range", func(t *testing.T, tp *nettest.Topology) string {
		frames := sinkUDP(t, tp, 4, func() {
			for i := 0; i < 4; i++ {
				nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(tp.Sink.IPv4, 7010), []byte("own"),
					nettest.WithSource(netip.AddrPortFrom(tp.FwOut.IPv4, uint16(46000+i))))
			}
		})
		asKernel := 0
		for _, f := range frames {
			if f.Dst == natRangePick(natAddr(tp, 2, 10), natAddr(tp, 2, 13), f.Src, tp.Sink.IPv4, false) {
				asKernel++
			}
		}
		return fmt.Sprintf("received %d, as find_best_ips_proto picks %d", len(frames), asKernel)
	}},
	{"SNAT to an address range, with and without --persistent", natRangeSNATAddrStep},
	{"SNAT to an address range: one client port to two servers keeps its mapping", natRangeSNATReuseStep},
	{"SNAT to ten ports: eleven clients, the last clashes", func(t *testing.T, tp *nettest.Topology) string {
		echoed, ports := natRangeSNAT(t, tp, 9000, 42000, 11)
		return fmt.Sprintf("echoed %d, sink saw ports %v", echoed, ports)
	}},
	{"MASQUERADE --random-fully: a random port per connection", func(t *testing.T, tp *nettest.Topology) string {
		echoed, ports := natRangeSNAT(t, tp, 9001, 43000, 20)
		kept, distinct, inRange := 0, map[int]bool{}, true
		for _, p := range ports {
			if p >= 43000 && p < 43020 {
				kept++
			}
			distinct[p] = true
			inRange = inRange && p >= 1024
		}
		// A random port equals the original one with odds 1 in 64512.
		return fmt.Sprintf("echoed %d, distinct %d, in 1024-65535 %v, fewer than 3 kept %v",
			echoed, len(distinct), inRange, kept < 3)
	}},
	{"SNAT --random to a port range", func(t *testing.T, tp *nettest.Topology) string {
		echoed, ports := natRangeSNAT(t, tp, 9002, 20003, 5)
		distinct, inRange := map[int]bool{}, true
		for _, p := range ports {
			distinct[p] = true
			inRange = inRange && p >= 20000 && p <= 20009
		}
		return fmt.Sprintf("echoed %d, distinct %d, in 20000-20009 %v", echoed, len(distinct), inRange)
	}},
}

// TestNatRangesAgainstKernel runs natRangeSteps through both twins and
// compares the outcomes and the counters.
func TestNatRangesAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "conntrack")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		natRangeSetup(t, tp)
		fw.restore(t, tp, 4, strings.ReplaceAll(natRangeRuleset, "10.X.", fmt.Sprintf("10.%d.", tp.Subnet)))
	})
	if t.Failed() {
		return
	}
	runNatSteps(t, tw, natRangeSteps)
	compareNatCounters(t, tw, 12)
}
