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

// Fragments against iptables-legacy in twin topologies (bpf/frag.h):
// without connection tracking, OUTPUT judges each fragment a raw socket
// writes itself (a later one never matches ports) while the stack's
// fragments of a datagram OUTPUT judged whole follow its verdict; with
// connection tracking, a forwarded later fragment follows its datagram's
// verdict and one whose first fragment never came is not delivered.
// Compared: every rule's packet counts, and the fragments sink receives.

// Ports of the fragment tests: one the rules accept, one they drop.
const (
	fragPortOK   = 7301
	fragPortDrop = 7302
	// fragSize is the payload of each crafted fragment (3 of them: 32,
	// 32 and the rest of a 64-byte UDP payload).
	fragSize = 32
	// fragStackPayload is a datagram the stack fragments (MTU 1500).
	fragStackPayload = 3000
)

// fragOutputRules drops later fragments in OUTPUT (-f; IPv6: the last
// fragment, --fraglast: a rule that matched the fragment header of the
// stack's own first fragment would see what the kernel's OUTPUT never
// does, docs/differences.md), before dropping the other port.
func fragOutputRules(fam int) string {
	later := "-f"
	if fam == 6 {
		later = "-m frag --fraglast"
	}
	o := nettest.FwOutIfname
	return fmt.Sprintf(`*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -o %[1]s -p udp --dport %[2]d -j ACCEPT
-A OUTPUT -o %[1]s %[4]s -j DROP
-A OUTPUT -o %[1]s -p udp --dport %[3]d -j DROP
-A OUTPUT -o %[1]s -p udp
COMMIT
`, o, fragPortOK, fragPortDrop, later)
}

// fragForwardRules is a stateful FORWARD: the accepted port, the dropped
// one, the rest counted by state.
func fragForwardRules() string {
	return fmt.Sprintf(`*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp --dport %d -j ACCEPT
-A FORWARD -p udp --dport %d -j DROP
-A FORWARD -m conntrack --ctstate NEW,ESTABLISHED,INVALID
COMMIT
`, fragPortOK, fragPortDrop)
}

// fragments returns the fragments of a UDP datagram src → dst:port with a
// 64-byte payload.
func fragments(t *testing.T, fam int, src, dst netip.Addr, port uint16) [][]byte {
	t.Helper()
	pkt := nettest.UDPPacket(netip.AddrPortFrom(src, 7000), netip.AddrPortFrom(dst, port), []byte(strings.Repeat("xfw-frag", 8)))
	var fr [][]byte
	var err error
	if fam == 4 {
		fr, err = nettest.FragmentIPv4(pkt, fragSize)
	} else {
		fr, err = nettest.FragmentIPv6(pkt, fragSize, 0x5eed)
	}
	if err != nil || len(fr) < 2 {
		t.Fatalf("fragment: %v (%d fragments)", err, len(fr))
	}
	return fr
}

// sendRawFromFw sends IP packets from fw through an IPPROTO_RAW socket
// (the header is ours: OUTPUT judges each as it is).
func sendRawFromFw(t *testing.T, tp *nettest.Topology, fam int, pkts [][]byte) {
	t.Helper()
	err := nettest.InNamespace(tp.FwNS, func() error {
		domain := unix.AF_INET
		var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: tp.Sink.IPv4.As4()}
		if fam == 6 {
			domain, sa = unix.AF_INET6, &unix.SockaddrInet6{Addr: tp.Sink.IPv6.As16()}
		}
		fd, err := unix.Socket(domain, unix.SOCK_RAW, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket: %w", err)
		}
		defer unix.Close(fd)
		for _, p := range pkts {
			if err := unix.Sendto(fd, p, 0, sa); err != nil && err != unix.EPERM {
				return fmt.Errorf("send: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("send from fw: %v", err)
	}
}

// fragOutcome is what one twin did with a probe: its rule counters and the
// fragments (and whole datagrams) that reached sink.
type fragOutcome struct {
	rules     map[string]counter
	fragments int
	datagrams int
}

// fragProbe zeroes the counters of both twins, captures at sink, sends
// with send in each and returns each twin's outcome after settling.
func fragProbe(t *testing.T, tw *twins, fam int, send func(*testing.T, *nettest.Topology)) map[string]fragOutcome {
	t.Helper()
	out := map[string]fragOutcome{}
	var mu sync.Mutex
	tw.each(func(kind string, tp *nettest.Topology, fw firewall) {
		nettest.MustExec(t, tp.FwNS, append(fw.cmd(fam, ""), "-w", lockWait, "-Z")...)
		c := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, func(f nettest.Captured) bool {
			return !f.Outgoing && f.IPVersion == fam && f.Protocol != nettest.ProtoICMPv6
		})
		send(t, tp)
		time.Sleep(typeSettle)
		var o fragOutcome
		for _, f := range c.Stop() {
			if f.Fragment {
				o.fragments++
			} else {
				o.datagrams++
			}
		}
		o.rules = ruleCountersOf(t, fw.save(t, tp, fam))
		mu.Lock()
		out[kind] = o
		mu.Unlock()
	})
	return out
}

// compareFrag fails when the twins differ, or the kernel did not do what
// the case expects (the test's premise: want fragments at sink).
func compareFrag(t *testing.T, got map[string]fragOutcome, want int) {
	t.Helper()
	k, x := got["kernel"], got["xfw"]
	compareTypeCounters(t, k.rules, x.rules)
	t.Logf("at sink: kernel %d fragments, xfw %d", k.fragments, x.fragments)
	if k.fragments != want {
		t.Errorf("kernel: %d fragments reached sink, the case expects %d", k.fragments, want)
	}
	if x.fragments != k.fragments || x.datagrams != k.datagrams {
		t.Errorf("at sink: xfw %d fragments %d packets, kernel %d fragments %d packets",
			x.fragments, x.datagrams, k.fragments, k.datagrams)
	}
}

// fragCase is one probe of the fragment tests and the fragments the
// kernel delivers to sink for it.
type fragCase struct {
	name string
	want int
	send func(*testing.T, *nettest.Topology)
}

// runFragCases loads rules(fam) into both twins and compares the cases of
// each family.
func runFragCases(t *testing.T, rules func(fam int) string, cases func(fam int) []fragCase) {
	nettest.RequireRoot(t)
	requireTools(t, "iptables-legacy", "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	for _, fam := range []int{4, 6} {
		t.Run(fmt.Sprintf("IPv%d", fam), func(t *testing.T) {
			tw.each(func(_ string, tp *nettest.Topology, fw firewall) { fw.restore(t, tp, fam, rules(fam)) })
			for _, c := range cases(fam) {
				t.Run(c.name, func(t *testing.T) { compareFrag(t, fragProbe(t, tw, fam, c.send), c.want) })
			}
		})
	}
}

// TestFragmentsOutputAgainstKernel: fragments fw sends, without
// connection tracking, both families.
func TestFragmentsOutputAgainstKernel(t *testing.T) {
	runFragCases(t, fragOutputRules, func(fam int) []fragCase {
		from := func(tp *nettest.Topology) (netip.Addr, netip.Addr) {
			if fam == 4 {
				return tp.FwOut.IPv4, tp.Sink.IPv4
			}
			return tp.FwOut.IPv6, tp.Sink.IPv6
		}
		// IPv6's rule drops the last of the three crafted fragments only.
		raw6 := 0
		if fam == 6 {
			raw6 = 1
		}
		return []fragCase{
			{"raw socket's fragments: the first by its port, the later ones dropped", 1 + raw6, func(t *testing.T, tp *nettest.Topology) {
				src, dst := from(tp)
				sendRawFromFw(t, tp, fam, fragments(t, fam, src, dst, fragPortOK))
			}},
			{"raw socket's later fragments alone", raw6, func(t *testing.T, tp *nettest.Topology) {
				src, dst := from(tp)
				sendRawFromFw(t, tp, fam, fragments(t, fam, src, dst, fragPortOK)[1:])
			}},
			{"stack's fragments of an accepted datagram", 3, func(t *testing.T, tp *nettest.Topology) {
				_, dst := from(tp)
				nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(dst, fragPortOK), make([]byte, fragStackPayload))
			}},
			{"stack's fragments of a dropped datagram", 0, func(t *testing.T, tp *nettest.Topology) {
				_, dst := from(tp)
				nettest.UDPSend(tp.FwNS, netip.AddrPortFrom(dst, fragPortDrop), make([]byte, fragStackPayload))
			}},
		}
	})
}

// TestFragmentsConntrackAgainstKernel: forwarded fragments with
// connection tracking (the kernel reassembles before FORWARD and sends the
// datagram on in fragments of the sizes it came in), both families.
func TestFragmentsConntrackAgainstKernel(t *testing.T) {
	runFragCases(t, func(int) string { return fragForwardRules() }, func(fam int) []fragCase {
		inject := func(port uint16, from int) func(*testing.T, *nettest.Topology) {
			return func(t *testing.T, tp *nettest.Topology) {
				src, dst := v4(tp, 0x10), tp.Sink.IPv4
				if fam == 6 {
					src, dst = v6(tp, 0x10), tp.Sink.IPv6
				}
				var frames [][]byte
				for _, f := range fragments(t, fam, src, dst, port)[from:] {
					frames = append(frames, frame(tp, f))
				}
				if err := tp.InjectFromGen(frames...); err != nil {
					t.Errorf("inject: %v", err)
				}
			}
		}
		cases := []fragCase{
			{"fragments of an accepted datagram", 3, inject(fragPortOK, 0)},
			{"fragments of a dropped datagram", 0, inject(fragPortDrop, 0)},
			{"later fragments whose first never came", 0, inject(fragPortOK, 1)},
		}
		if fam == 6 {
			// nf_ct_frag6_queue refuses to queue a fragment with
			// "more fragments" whose end is not a multiple of 8
			// (-EPROTO) and passes it on alone, with no connection
			// (INVALID): forwarded by FORWARD's policy.
			cases = append(cases, fragCase{"a later fragment the reassembly passes alone", 1,
				func(t *testing.T, tp *nettest.Topology) {
					f := fragments(t, fam, v6(tp, 0x10), tp.Sink.IPv6, fragPortOK)[1]
					const cut = 2 // 30 of its 32 bytes
					f = f[:len(f)-cut]
					binary.BigEndian.PutUint16(f[4:], binary.BigEndian.Uint16(f[4:])-cut)
					if err := tp.InjectFromGen(frame(tp, f)); err != nil {
						t.Errorf("inject: %v", err)
					}
				}})
		}
		return cases
	})
}
