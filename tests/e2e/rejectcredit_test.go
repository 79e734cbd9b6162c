package e2e

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// REJECT's ICMP rate limits for the replies the kernel treats apart, against
// the kernel (bpf/reject_rate.h): replies to packets that arrived on lo are
// never limited and take no global credit (icmp_send skips the limits when
// the offending packet's device is loopback); IPv4 OUTPUT replies take the
// global bucket's credits (the packet has no device yet), and the
// destination's bucket too unless the reply leaves by lo (a reply for fw
// itself does; one for another host, about a packet fw sent with that
// host's source, does not); IPv6 OUTPUT replies are not limited
// (nf_send_unreach6 gives a packet without a device the loopback device)
// unless the packet had its device already: the stack's neighbour
// advertisements (the global bucket). Floods of fw's
// own datagrams, alone or beside a flood of gen's into INPUT, count the
// replies that reach fw through lo (a counting rule in lo's INPUT) and gen.
// The global bucket's costs are random (0 to 2 credits a message), so the
// counts are checked against the kernel's bounds, like TestRejectRateLimit
// (internal/dataplane), never packet for packet; both twins must stay
// within them.

const (
	creditPerSec = 100 // net.ipv4.icmp_msgs_per_sec
	creditBurst  = 20  // net.ipv4.icmp_msgs_burst
	creditRate   = 500 // datagrams a second in each flood
	creditCount  = 1000
	// creditRefill is the pause before a phase: one second of refill
	// (the most the kernel adds at once) fills the global bucket again.
	creditRefill = 1200 * time.Millisecond
	// creditPortIn, Lo and Out are the REJECTed ports: gen's datagrams to
	// fw, fw's to itself (through lo), fw's to gen.
	creditPortIn  = 7300
	creditPortLo  = 7301
	creditPortOut = 7302
)

// creditRules: ICMP-ERR stands for the family's ICMP protocol and its
// destination-unreachable type. The first rule counts the errors that
// reach fw through lo.
const creditRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -p ICMP-ERR
-A INPUT -p udp --dport 7300 -j REJECT
-A INPUT -i lo -p udp --dport 7301 -j REJECT
-A OUTPUT -p udp --dport 7302 -j REJECT
NA-REJECT
COMMIT
`

// creditFlow is what fw floods in a phase.
type creditFlow int

const (
	creditToSelf  creditFlow = iota // to its own address, through lo (INPUT -i lo)
	creditToGen                     // to gen (OUTPUT): errors for fw itself
	creditSpoofed                   // to gen with gen's source (OUTPUT): errors for gen
	creditNA                        // gen's neighbour solicitations: fw's advertisements (OUTPUT, IPv6)
)

// creditPhase is one flood of fw's, with or without gen's beside it.
type creditPhase struct {
	name      string
	ratelimit int // net.ipv4.icmp_ratelimit and net.ipv6.icmp.ratelimit (ms)
	flow      creditFlow
	gen       bool // gen floods fw's INPUT at the same time
}

// creditSeen is what a phase sent and what came back.
type creditSeen struct {
	sentFw, sentGen int
	elapsed         float64 // seconds the floods took
	atLo, atGen     int     // errors counted in lo's INPUT, received by gen
}

// creditPhases: the destination-bucket phases first, while gen's bucket
// is untouched (a phase with icmp_ratelimit 0 empties it), the global
// bucket's floods beside gen's with the destination's bucket off.
var creditPhases = []creditPhase{
	{name: "output for another host", ratelimit: 1000, flow: creditSpoofed},
	{name: "output for fw itself", ratelimit: 1000, flow: creditToGen},
	{name: "neighbour advertisements", ratelimit: 1000, flow: creditNA},
	{name: "through lo beside gen's", flow: creditToSelf, gen: true},
	{name: "output beside gen's", flow: creditToGen, gen: true},
}

// TestRejectCreditAgainstKernel compares the rate limits of OUTPUT replies
// and of replies to packets that arrived on lo (xfw_rj_tc, xfw_rj_out_dev6
// and xfw_rj_xdp in bpf/reject.h, xfw_rl_spend in bpf/reject_rate.h).
func TestRejectCreditAgainstKernel(t *testing.T) {
	twinsPerFamily(t, rejectCreditAgainstKernel)
}

func rejectCreditAgainstKernel(t *testing.T, tw *twins, fam int) {
	icmpErr := "icmp -m icmp --icmp-type 3"
	if fam == 6 {
		icmpErr = "ipv6-icmp -m icmp6 --icmpv6-type 1"
	}
	rules := strings.ReplaceAll(creditRules, "ICMP-ERR", icmpErr)
	na := "-A OUTPUT -p ipv6-icmp -m icmp6 --icmpv6-type 136 -j REJECT"
	if fam == 4 {
		na = ""
	}
	rules = strings.ReplaceAll(rules, "NA-REJECT\n", na+"\n")
	for _, kind := range []string{"kernel", "xfw"} {
		tp, fw := tw.tps[kind], tw.fws[kind]
		nettest.MustExec(t, tp.FwNS, "ip", "link", "set", "lo", "up")
		for _, ph := range creditPhases {
			if ph.flow == creditNA && fam == 4 {
				continue
			}
			seen := creditRun(t, tp, fw, fam, rules, ph)
			t.Logf("%s, %s: fw sent %d, gen %d in %.2fs; %d errors through lo, %d at gen",
				kind, ph.name, seen.sentFw, seen.sentGen, seen.elapsed, seen.atLo, seen.atGen)
			if err := creditCheck(fam, ph, seen); err != nil {
				t.Errorf("%s, %s: %v", kind, ph.name, err)
			}
		}
	}
}

// creditRun sets fw's sysctls (the kernel's default ratemasks among
// them), loads the rules (xfw reads the sysctls then), waits for the
// global bucket to refill and runs the phase.
func creditRun(t *testing.T, tp *nettest.Topology, fw firewall, fam int, rules string, ph creditPhase) creditSeen {
	t.Helper()
	nettest.MustExec(t, tp.FwNS, "sysctl", "-qw",
		fmt.Sprintf("net.ipv4.icmp_msgs_per_sec=%d", creditPerSec),
		fmt.Sprintf("net.ipv4.icmp_msgs_burst=%d", creditBurst),
		fmt.Sprintf("net.ipv4.icmp_ratelimit=%d", ph.ratelimit),
		fmt.Sprintf("net.ipv6.icmp.ratelimit=%d", ph.ratelimit),
		// The kernel's default ratemasks, which nettest's topologies
		// clear: destination unreachable among the types limited.
		"net.ipv4.icmp_ratemask=6168", "net.ipv6.icmp.ratemask=0-1,3-127")
	fw.restore(t, tp, fam, rules)
	time.Sleep(creditRefill)

	gen, fwAddr, _ := familyAddrs(tp, fam)
	fwPkts := make([][]byte, creditCount)
	for i := range fwPkts {
		sport := uint16(20000 + i%500)
		switch ph.flow {
		case creditToSelf:
			fwPkts[i] = nettest.UDPPacket(netip.AddrPortFrom(fwAddr, sport), netip.AddrPortFrom(fwAddr, creditPortLo), []byte("self"))
		case creditToGen:
			fwPkts[i] = nettest.UDPPacket(netip.AddrPortFrom(fwAddr, sport), netip.AddrPortFrom(gen, creditPortOut), []byte("out"))
		case creditSpoofed:
			fwPkts[i] = nettest.UDPPacket(netip.AddrPortFrom(gen, sport), netip.AddrPortFrom(gen, creditPortOut), []byte("spoofed"))
		case creditNA:
			fwPkts[i] = creditSolicitation(fwAddr, tp.Gen.MAC)
		}
	}
	fwDst := gen
	if ph.flow == creditToSelf || ph.flow == creditNA {
		fwDst = fwAddr
	}
	var fwSock int
	if ph.flow == creditNA {
		fwSock = creditNDSocket(t, tp.GenNS, gen)
	} else {
		fwSock = creditSocket(t, tp.FwNS, fam)
	}
	var genSock int
	var genPkts [][]byte
	if ph.gen {
		genSock = creditSocket(t, tp.GenNS, fam)
		genPkts = make([][]byte, creditCount)
		for i := range genPkts {
			genPkts[i] = nettest.UDPPacket(netip.AddrPortFrom(gen, uint16(30000+i%500)), netip.AddrPortFrom(fwAddr, creditPortIn), []byte("in"))
		}
	}
	atGen := nettest.StartCapture(t, tp.GenNS, nettest.GenIfname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == fam && f.IsICMPUnreachable()
	})

	var seen creditSeen
	start := time.Now()
	genDone := make(chan error, 1)
	go func() {
		var err error
		if ph.gen {
			seen.sentGen, err = creditFlood(genSock, genPkts, fwAddr)
		}
		genDone <- err
	}()
	sent, err := creditFlood(fwSock, fwPkts, fwDst)
	seen.sentFw = sent
	if gerr := <-genDone; err == nil {
		err = gerr
	}
	seen.elapsed = time.Since(start).Seconds()
	if err != nil {
		t.Fatal(err)
	}
	// Let the last replies arrive (a count, not a latency).
	time.Sleep(rejectOutSettle)
	if err := atGen.Err(); err != nil {
		t.Fatalf("capture at gen: %v", err)
	}
	seen.atGen = len(atGen.Stop())
	proto := "icmp"
	if fam == 6 {
		proto = "ipv6-icmp"
	}
	seen.atLo = int(rejectTTLCounter(counters(t, fw.save(t, tp, fam)), "INPUT -i lo -p "+proto+" "))
	return seen
}

// creditSocket opens a raw IP socket (the packets carry their own header)
// in namespace ns, closed at the test's end.
func creditSocket(t *testing.T, ns string, fam int) int {
	t.Helper()
	dom := unix.AF_INET
	if fam == 6 {
		dom = unix.AF_INET6
	}
	fd := -1
	err := nettest.InNamespace(ns, func() error {
		var err error
		fd, err = unix.Socket(dom, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	})
	if err != nil {
		t.Fatalf("raw socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// creditNDSocket opens a raw ICMPv6 socket in namespace ns bound to src,
// hop limit 255 as neighbour discovery requires, closed at the test's end.
func creditNDSocket(t *testing.T, ns string, src netip.Addr) int {
	t.Helper()
	fd := -1
	err := nettest.InNamespace(ns, func() error {
		var err error
		if fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, 255); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrInet6{Addr: src.As16()})
	})
	if err != nil {
		t.Fatalf("ICMPv6 socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// creditSolicitation returns a neighbour solicitation for target with the
// sender's link-layer address (the kernel's ICMPv6 socket fills in the
// checksum).
func creditSolicitation(target netip.Addr, mac net.HardwareAddr) []byte {
	const nsType, optSrcLL, optUnits = 135, 1, 1 // RFC 4861 4.3, 4.6.1
	msg := make([]byte, 8, 8+16+8)
	msg[0] = nsType
	msg = append(msg, target.AsSlice()...)
	msg = append(msg, optSrcLL, optUnits)
	return append(msg, mac...)
}

// creditFlood sends the packets (whole IP packets, or ICMPv6 messages on
// an ICMPv6 socket) to dst through fd, creditRate a second, and returns
// how many it sent. A send refused with EPERM (the kernel's OUTPUT REJECT
// drops the packet) counts as sent.
func creditFlood(fd int, pkts [][]byte, dst netip.Addr) (int, error) {
	gap := time.Second / creditRate
	next := time.Now()
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: dst.As16()}
	if dst.Is4() {
		sa = &unix.SockaddrInet4{Addr: dst.As4()}
	}
	for i, p := range pkts {
		if err := unix.Sendto(fd, p, 0, sa); err != nil && !errors.Is(err, unix.EPERM) {
			return i, fmt.Errorf("send: %w", err)
		}
		next = next.Add(gap)
		time.Sleep(time.Until(next))
	}
	return len(pkts), nil
}

// creditGlobal returns the fewest and most ICMP errors the global bucket
// lets through in elapsed seconds, starting full: its credits (the burst
// and the refill) spent at 0, 1 or 2 a message, 1 on average, strayed from
// by a few standard deviations of such a sum (variance 2/3 a message).
func creditGlobal(elapsed float64) (lo, hi float64) {
	credits := creditBurst + creditPerSec*elapsed
	spread := 4 * math.Sqrt(credits*2/3)
	return credits*0.8 - spread, credits*1.1 + spread + 5
}

// creditPerDest returns the bounds of a destination's bucket at
// icmp_ratelimit 1000 ms: six messages, then one a second.
func creditPerDest(elapsed float64) (lo, hi float64) {
	return 6 + math.Floor(elapsed) - 2, 6 + math.Ceil(elapsed) + 2
}

// creditWithin reports n outside [lo, hi] as an error.
func creditWithin(what string, n int, lo, hi float64) error {
	if float64(n) < lo || float64(n) > hi {
		return fmt.Errorf("%s: %d, want %.0f..%.0f (the kernel's bounds)", what, n, lo, hi)
	}
	return nil
}

// creditCheck compares what a phase saw with the kernel's limits.
func creditCheck(fam int, ph creditPhase, s creditSeen) error {
	glo, ghi := creditGlobal(s.elapsed)
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	exact := func(what string, n, want int) {
		if n != want {
			add(fmt.Errorf("%s: %d, want %d (not limited)", what, n, want))
		}
	}
	// The global bucket's other user: gen's flood, alone in it unless
	// fw's errors take credits too (IPv4 OUTPUT).
	if ph.gen && !(fam == 4 && ph.flow == creditToGen) {
		add(creditWithin("errors at gen", s.atGen, glo, ghi))
	}
	switch {
	case ph.flow == creditNA:
		// The stack's advertisements have their device before OUTPUT:
		// the global bucket (lo spares the destination's).
		add(creditWithin("errors through lo", s.atLo, glo, ghi))
	case ph.flow == creditToSelf || fam == 6:
		// Through lo, and IPv6 OUTPUT: never limited.
		want := s.sentFw
		if ph.flow == creditSpoofed {
			exact("errors at gen", s.atGen, want)
			want = 0
		}
		exact("errors through lo", s.atLo, want)
	case ph.flow == creditSpoofed:
		// Routed out to gen: the destination's bucket (and the global).
		lo, hi := creditPerDest(s.elapsed)
		add(creditWithin("errors at gen", s.atGen, lo, hi))
		exact("errors through lo", s.atLo, 0)
	case ph.gen:
		// IPv4 OUTPUT beside gen's flood: one global bucket for both.
		add(creditWithin("errors through lo and at gen", s.atLo+s.atGen, glo, ghi))
	default:
		// IPv4 OUTPUT for fw itself: the global bucket; lo's route spares
		// the destination's (which would let some 8 through).
		add(creditWithin("errors through lo", s.atLo, glo, ghi))
	}
	return errors.Join(errs...)
}
