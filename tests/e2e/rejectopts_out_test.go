package e2e

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
	"golang.org/x/sys/unix"
)

// REJECT's ICMP errors about fw's own IPv4 packets with options, judged in
// OUTPUT, against the kernel (bpf/reject_opts.h, xfw_rj_opts4_tc): the
// error, which goes to fw itself through lo, echoes the record route and
// timestamp options a socket set (IP_OPTIONS) as its output built them
// (fw's address and the time filled in) with the entry the error's own
// output fills in, and quotes the datagram as sent, shorter by the echo's
// length; a raw socket's own header (IP_HDRINCL) gets an error without
// options. To sink (out0) and to fw's own out0 address (lo).

const (
	rejectOptsOutPort = 7104 // OUTPUT REJECT
	rejectOptsOutSrc  = 6000 // the sockets' source ports: 6000 + 10 × case + destination
)

const rejectOptsOutRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p udp --dport 7104 -j REJECT
-A OUTPUT -p icmp --icmp-type port-unreachable
COMMIT
`

// TestRejectOptionsOutputAgainstKernel compares the ICMP errors about fw's
// own datagrams with options, as they leave by lo, byte for byte but the
// ID, checksum and timestamps.
func TestRejectOptionsOutputAgainstKernel(t *testing.T) {
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, _ firewall) {
		nettest.MustExec(t, tp.FwNS, "sysctl", "-qw", "net.ipv4.icmp_ratelimit=0", "net.ipv4.icmp_msgs_burst=1000")
	})
	seen, saves := twinRejectRounds(t, tw, 4, []string{rejectOptsOutRules},
		func(t *testing.T, tp *nettest.Topology, _, _ int) string {
			return strings.Join(rejectOptsOutRound(t, tp), "\n")
		})
	if t.Failed() {
		return
	}
	k := seen["kernel"][0]
	// Every datagram gets its error: per case two from a socket, two
	// from a raw socket's header.
	cases := len(rejectOptsOutCases(netip.Addr{}, netip.Addr{}))
	if n := strings.Count(k, "opts "); n != 4*cases {
		t.Errorf("the kernel sent %d errors, want %d:\n%s", n, 4*cases, k)
	}
	// The test's own check: the sockets' record route is echoed with
	// two entries filled in (the datagram's, the error's), the raw
	// socket's header gets no options.
	if !strings.Contains(k, "opts 070f0c<FWOUT><FWOUT>") || !strings.Contains(k, "opts  type 3 code 3") {
		t.Errorf("the kernel's errors do not echo the sockets' record route, or echo a raw header's:\n%s", k)
	}
	compareRejectRound(t, "OUTPUT errors", k, seen["xfw"][0], saves["kernel"][0], saves["xfw"][0])
}

// rejectOptsOutCases are rejectOptsCases and a loose source route through
// sink: the socket's route (ip_options_get moves its first hop out, the
// pointer stays at the first entry) has nothing to reverse, and the
// kernel's error echoes none.
func rejectOptsOutCases(sink, fw netip.Addr) []rejectOptsCase {
	var b [4]byte
	if sink.IsValid() {
		b = sink.As4()
	}
	lsrr := append([]byte{optLSRR, 7, 4}, b[:]...)
	return append(rejectOptsCases(sink, fw), rejectOptsCase{"lsrr via sink", lsrr, 8})
}

// optLSRR is the loose source route option.
const optLSRR = 131

// rejectOptsOutRound sends each case's datagram from fw to sink and to
// fw's own out0 address, through a UDP socket with the options set and
// through a raw socket with its own header, and returns the errors seen on
// fw's lo, one line each, sorted.
func rejectOptsOutRound(t *testing.T, tp *nettest.Topology) []string {
	t.Helper()
	fw, sink := tp.FwOut.IPv4, tp.Sink.IPv4
	c := nettest.StartCapture(t, tp.FwNS, "lo", func(f nettest.Captured) bool {
		// As lo sends it (its receive side sees each frame again).
		return f.Outgoing && f.IPVersion == 4 && f.IsICMPError()
	})
	err := nettest.InNamespace(tp.FwNS, func() error {
		for i, cs := range rejectOptsOutCases(sink, tp.FwIn.IPv4) {
			payload := bytes.Repeat([]byte{byte('a' + i)}, cs.payload)
			for j, dst := range []netip.Addr{sink, fw} {
				port := rejectOptsOutSrc + 10*i + j
				if err := sendWithOptions(fw, port, netip.AddrPortFrom(dst, rejectOptsOutPort), cs.opts, payload); err != nil {
					return fmt.Errorf("%s: %w", cs.name, err)
				}
				udp := nettest.UDP{SrcPort: uint16(port + 5), DstPort: rejectOptsOutPort, Payload: payload}
				pkt := nettest.IPv4{Src: fw, Dst: dst, ID: uint16(200 + i), Options: cs.opts}.Packet(udp)
				if err := sendHdrincl(dst, pkt); err != nil {
					return fmt.Errorf("%s, raw: %w", cs.name, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("send from fw: %v", err)
	}
	time.Sleep(rejectOutSettle)
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	var lines []string
	for _, f := range c.Stop() {
		lines = append(lines, rejectOptsLine(tp, f.Raw))
	}
	slices.Sort(lines)
	return lines
}

// sendWithOptions sends payload from src:port to dst through a UDP socket
// with IPv4 options opts (IP_OPTIONS) and DF (a fixed IP ID of 0). The
// kernel's REJECT fails the send (EPERM): not an error here.
func sendWithOptions(src netip.Addr, port int, dst netip.AddrPort, opts, payload []byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptString(fd, unix.IPPROTO_IP, unix.IP_OPTIONS, string(opts)); err != nil {
		return fmt.Errorf("IP_OPTIONS: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO); err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4(), Port: port}); err != nil {
		return err
	}
	if err := unix.Sendto(fd, payload, 0, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}); err != nil && err != unix.EPERM {
		return err
	}
	return nil
}

// sendHdrincl sends the IPv4 packet pkt (its own header) to dst through a
// raw socket.
func sendHdrincl(dst netip.Addr, pkt []byte) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil && err != unix.EPERM {
		return err
	}
	return nil
}
