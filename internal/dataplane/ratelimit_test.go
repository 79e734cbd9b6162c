package dataplane

// TestRejectRateLimit floods REJECT rules with packets and counts the ICMP
// errors that come back, from xfw and from the kernel's REJECT in a twin
// topology (reject_env_test.go), under the kernel's rate limits
// (bpf/reject_rate.h): statistically, never packet by packet. The bounds
// are the kernel's: a destination's bucket holds six messages and refills
// one per net.ipv4.icmp_ratelimit (IPv6: net.ipv6.icmp.ratelimit); the
// global bucket holds
// icmp_msgs_burst credits, refills icmp_msgs_per_sec a second, and a
// message takes 0, 1 or 2 of them (1 on average). TCP resets are never
// limited.

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// rlFlood is one flood: what fw's sysctls say, what is sent, and the
// bounds on the errors that may come back for the time it took.
type rlFlood struct {
	name    string
	fam     ir.Family
	sysctls [][2]string
	tcp     bool // tcp-reset rule (never limited) rather than port-unreachable
	rate    int  // packets per second
	secs    float64
	// bounds returns the fewest and most replies the kernel's limits allow
	// for n packets sent over elapsed seconds.
	bounds func(n int, elapsed float64) (lo, hi float64)
}

// rlSysctl writes fw's sysctls (name under /proc/sys, value).
func rlSysctl(t *testing.T, ns string, kv [][2]string) {
	t.Helper()
	err := nettest.InNamespace(ns, func() error {
		for _, s := range kv {
			if err := os.WriteFile("/proc/sys/"+s[0], []byte(s[1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s: %w", s[0], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rlKernelMasks are the kernel's default ratemasks (destination
// unreachable among the types limited), which nettest's topologies clear.
var rlKernelMasks = [][2]string{{"net/ipv4/icmp_ratemask", "6168"}, {"net/ipv6/icmp/ratemask", "0-1,3-127"}}

// rlPerDest are the per-destination limits at the kernel's default
// (1000 ms), without the global one.
var rlPerDest = append([][2]string{{"net/ipv4/icmp_ratelimit", "1000"}, {"net/ipv6/icmp/ratelimit", "1000"},
	{"net/ipv4/icmp_msgs_per_sec", "1000000"}, {"net/ipv4/icmp_msgs_burst", "1000000"}}, rlKernelMasks...)

func rlFloods() []rlFlood {
	// A destination's bucket: six messages, then one per period.
	perDest := func(period float64) func(int, float64) (float64, float64) {
		return func(n int, elapsed float64) (float64, float64) {
			return 6 + math.Floor(elapsed/period) - 2, 6 + math.Ceil(elapsed/period) + 2
		}
	}
	const perSec, burst = 100, 20
	global := func(n int, elapsed float64) (float64, float64) {
		// Credits available: the burst and what the bucket refills;
		// a message costs one on average (0, 1 or 2), so the count
		// strays from the credits by a few standard deviations of a sum
		// of uniform {0,1,2} costs (variance 2/3 each).
		credits := burst + perSec*elapsed
		spread := 4 * math.Sqrt(credits*2/3)
		return credits*0.8 - spread, credits*1.1 + spread + 5
	}
	// The global floods come first: the bucket is only capped at the
	// burst when it refills, so the per-destination floods' huge budget
	// would outlast them.
	return []rlFlood{
		{name: "ipv4 global", fam: ir.IPv4, rate: 1000, secs: 2, bounds: global,
			sysctls: append([][2]string{{"net/ipv4/icmp_ratelimit", "0"}, {"net/ipv4/icmp_msgs_per_sec", fmt.Sprint(perSec)}, {"net/ipv4/icmp_msgs_burst", fmt.Sprint(burst)}}, rlKernelMasks...)},
		{name: "ipv6 global (IPv4's bucket)", fam: ir.IPv6, rate: 1000, secs: 2, bounds: global,
			sysctls: append([][2]string{{"net/ipv6/icmp/ratelimit", "0"}, {"net/ipv4/icmp_msgs_per_sec", fmt.Sprint(perSec)}, {"net/ipv4/icmp_msgs_burst", fmt.Sprint(burst)}}, rlKernelMasks...)},
		{name: "ipv4 per destination", fam: ir.IPv4, sysctls: rlPerDest, rate: 200, secs: 3, bounds: perDest(1)},
		// gen is on fw's link: the route back is a host clone (/128),
		// which gets the whole period.
		{name: "ipv6 per destination", fam: ir.IPv6, sysctls: rlPerDest, rate: 200, secs: 3, bounds: perDest(1)},
		{name: "ipv4 resets unlimited", fam: ir.IPv4, tcp: true, rate: 200, secs: 1, sysctls: rlPerDest,
			bounds: func(n int, _ float64) (float64, float64) { return float64(n), float64(n) }},
	}
}

func TestRejectRateLimit(t *testing.T) {
	xfw := newRjEnv(t, "xfw", false)
	kern := newRjEnv(t, "kernel", true)
	xfw.load(t, rjRules(xfw.topo), XDPAuto)
	kern.load(t, rjRules(kern.topo), "")
	for i, f := range rlFloods() {
		t.Run(f.name, func(t *testing.T) {
			for _, e := range []*rjEnv{kern, xfw} {
				rlSysctl(t, e.topo.FwNS, f.sysctls)
				if !e.kernel {
					// xfw reads the sysctls at each sync.
					e.load(t, rjRules(e.topo), XDPAuto)
				}
				n, got, elapsed := rlRun(t, e, f, uint16(30000+i*1000))
				lo, hi := f.bounds(n, elapsed)
				t.Logf("%s: %d packets in %.2fs, %d replies (kernel's bounds %.0f..%.0f)", e.name, n, elapsed, got, lo, hi)
				if float64(got) < lo || float64(got) > hi {
					t.Errorf("%s: %d replies to %d packets in %.2fs, want %.0f..%.0f", e.name, got, n, elapsed, lo, hi)
				}
			}
		})
	}
}

// rlRun sends f's packets from gen to fw from source ports from sport on
// (one destination for the limiters: gen) and returns how many were sent,
// how many replies gen received and how long sending took.
func rlRun(t *testing.T, e *rjEnv, f rlFlood, sport uint16) (int, int, float64) {
	t.Helper()
	tp := e.topo
	src, dst := rjAddr(tp.Gen, f.fam), rjAddr(tp.FwIn, f.fam)
	capture := rjCapture(t, tp.GenNS, nettest.GenIfname)
	n := int(float64(f.rate) * f.secs)
	pkts := make([][]byte, n)
	for i := range pkts {
		from := netip.AddrPortFrom(src, sport+uint16(i%500))
		if f.tcp {
			pkts[i] = nettest.TCPPacket(from, netip.AddrPortFrom(dst, rjPortInReset), nettest.TCPSyn, uint32(i), nil)
		} else {
			pkts[i] = nettest.UDPPacket(from, netip.AddrPortFrom(dst, rjPortInPort), []byte("flood"))
		}
	}
	start := time.Now()
	if err := rlSend(tp.GenNS, pkts, time.Second/time.Duration(f.rate)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	// Let the last replies arrive (a count, not a latency).
	time.Sleep(500 * time.Millisecond)
	got := 0
	for _, c := range capture.Stop() {
		if c.Outgoing || c.Dst != src {
			continue
		}
		if f.tcp && c.Protocol == nettest.ProtoTCP && c.TCPFlags&nettest.TCPRst != 0 ||
			!f.tcp && (c.ICMPType == rjICMPDestUnreach && c.Protocol == nettest.ProtoICMP ||
				c.ICMPType == rjICMP6DestUnreach && c.Protocol == nettest.ProtoICMPv6) {
			got++
		}
	}
	return n, got, elapsed
}

// rlSend sends the IP packets from namespace ns through one raw socket, one
// every gap.
func rlSend(ns string, pkts [][]byte, gap time.Duration) error {
	return nettest.InNamespace(ns, func() error {
		v6 := pkts[0][0]>>4 == 6
		dom := unix.AF_INET
		if v6 {
			dom = unix.AF_INET6
		}
		fd, err := unix.Socket(dom, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		next := time.Now()
		for _, p := range pkts {
			var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: [4]byte(p[16:20])}
			if v6 {
				sa = &unix.SockaddrInet6{Addr: [16]byte(p[24:40])}
			}
			if err := unix.Sendto(fd, p, 0, sa); err != nil {
				return fmt.Errorf("send: %w", err)
			}
			next = next.Add(gap)
			time.Sleep(time.Until(next))
		}
		return nil
	})
}
