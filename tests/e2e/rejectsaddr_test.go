package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// The source of REJECT's ICMPv6 error about a forwarded packet whose
// (spoofed) source lies behind fw's other interface, against the kernel.
// icmp6_send, the route back having no preferred source, picks it on the
// INPUT device (ipv6_dev_get_saddr: RFC 6724's rules over every address,
// the input device's first), not on the route's device, as
// bpf_fib_lookup's BPF_FIB_LOOKUP_SRC does (xfw's source before
// bpf/reject_saddr.h: out0's address in every round). gen sends a
// datagram from a source routed through sink to sink, which FORWARD
// REJECTs; sink captures the error. Each round changes fw's addresses to
// exercise one rule:
//
//   - rule 5 (the input device's): in0's address, not out0's;
//   - rule 8 (longest matching prefix): a /128 on in0 next to the source;
//   - rule 3 (preferred): that address deprecated, in0's address again;
//   - rule 6 (label): a 6to4 source (label 2); on in0 a 6to4 address
//     whose /8 prefix caps its matched length at 8, and an address
//     outside 2002::/16 sharing 15 bits with the source (label 1);
//   - a route back with a preferred source (out0's address): that
//     source (icmpv6_rt_has_prefsrc), no selection;
//   - rule 2 (scope): in0 left with its link-local address alone:
//     out0's global address beats it (scope before device).
//
// The error's source, sending device, hop limit, length and checksum are
// compared.

// rejectSaddrPort is the port of gen's datagram, REJECTed in FORWARD.
const rejectSaddrPort = 7350

// rejectSaddrRound is one round: its name, the commands that change fw's
// addresses and routes first (ip arguments, X standing for the
// topology's subnet number), the spoofed source (X too) and what sink
// should see from the kernel (names of fw's addresses: "in0", "out0", or
// the address itself).
type rejectSaddrRound struct {
	name string
	ip   [][]string
	src  string
	want string
}

// rejectSaddrRounds are the rounds, in order (each builds on the last).
var rejectSaddrRounds = []rejectSaddrRound{
	{"rule 5: the input device's address",
		[][]string{{"-6", "route", "add", "fd00:77::/64", "via", "fd00:X:2::2", "dev", "out0"},
			{"-6", "route", "add", "2002:8000::/64", "via", "fd00:X:2::2", "dev", "out0"}},
		"fd00:77::99", "in0"},
	{"rule 8: the longest matching prefix",
		[][]string{{"-6", "addr", "add", "fd00:77::7/128", "dev", "in0", "nodad"}},
		"fd00:77::99", "fd00:77::7"},
	{"rule 3: not deprecated",
		[][]string{{"-6", "addr", "change", "fd00:77::7/128", "dev", "in0", "preferred_lft", "0"}},
		"fd00:77::99", "in0"},
	{"rule 6: the destination's label",
		[][]string{{"-6", "addr", "del", "fd00:77::7/128", "dev", "in0"},
			{"-6", "addr", "add", "2002::1/8", "dev", "in0", "nodad"},
			{"-6", "addr", "add", "2003::1/64", "dev", "in0", "nodad"}},
		"2002:8000::99", "2002::1"},
	{"the route back's preferred source",
		[][]string{{"-6", "route", "add", "fd00:88::/64", "via", "fd00:X:2::2", "dev", "out0", "src", "fd00:X:2::1"}},
		"fd00:88::99", "out0"},
	{"rule 2: the scope, before the device",
		[][]string{{"-6", "addr", "del", "2002::1/8", "dev", "in0"},
			{"-6", "addr", "del", "2003::1/64", "dev", "in0"},
			{"-6", "addr", "del", "fd00:X:1::1/64", "dev", "in0"}},
		"fd00:77::99", "out0"},
}

// rejectSaddrRules REJECTs gen's datagram in FORWARD.
func rejectSaddrRules() string {
	return fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"+
		"-A FORWARD -p udp --dport %d -j REJECT\nCOMMIT\n", rejectSaddrPort)
}

// TestRejectSourceSelectionAgainstKernel compares the sources of the
// ICMPv6 errors (see above).
func TestRejectSourceSelectionAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	tw := newTwins(t, xfwPath(t))
	got := tw.collect(func(kind string, tp *nettest.Topology, fw firewall) string {
		var seen []string
		for _, r := range rejectSaddrRounds {
			x := fmt.Sprint(tp.Subnet)
			for _, args := range r.ip {
				a := make([]string, len(args))
				for i, s := range args {
					a[i] = strings.ReplaceAll(s, "X", x)
				}
				nettest.MustExec(t, tp.FwNS, append([]string{"ip"}, a...)...)
			}
			// xfw copies the addresses at each sync.
			fw.restore(t, tp, 6, rejectSaddrRules())
			src := netip.MustParseAddr(strings.ReplaceAll(r.src, "X", x))
			seen = append(seen, rejectSaddrSend(t, tp, src))
		}
		return strings.Join(seen, "\n")
	})
	if t.Failed() {
		return
	}
	k, x := strings.Split(got["kernel"], "\n"), strings.Split(got["xfw"], "\n")
	for i, r := range rejectSaddrRounds {
		t.Logf("%s: kernel %q, xfw %q", r.name, k[i], x[i])
		want := fmt.Sprintf("port-unreachable from %s, by out0, hop limit 64, 117 bytes, checksum good", r.want)
		if k[i] != want {
			t.Errorf("%s: sink received %q from the kernel, want %q (fix the test)", r.name, k[i], want)
		}
		if x[i] != k[i] {
			t.Errorf("%s: sink received %q from the kernel, %q from xfw", r.name, k[i], x[i])
		}
	}
}

// rejectSaddrSend injects gen's datagram from src to sink and describes
// the errors sink receives: source (in0 and out0 named), sending device,
// hop limit, length and whether the ICMPv6 checksum holds.
func rejectSaddrSend(t *testing.T, tp *nettest.Topology, src netip.Addr) string {
	t.Helper()
	c := nettest.StartCapture(t, tp.SinkNS, nettest.SinkIfname, func(f nettest.Captured) bool {
		return !f.Outgoing && f.IPVersion == 6 && f.Protocol == unix.IPPROTO_ICMPV6 && !icmp6LinkChatter(f)
	})
	eth := nettest.Ethernet{Dst: tp.FwIn.MAC, Src: tp.Gen.MAC}
	frame := eth.Frame(nettest.UDPPacket(netip.AddrPortFrom(src, 5350), netip.AddrPortFrom(tp.Sink.IPv6, rejectSaddrPort), []byte("spoofed")))
	if err := nettest.Inject(tp.GenNS, nettest.GenIfname, frame); err != nil {
		t.Fatalf("inject: %v", err)
	}
	time.Sleep(rejectOutSettle)
	if err := c.Err(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	var got []string
	for _, f := range c.Stop() {
		kind := "other"
		if f.IsICMPUnreachable() {
			kind = "port-unreachable"
		}
		from := f.Src.String()
		switch f.Src {
		case tp.FwIn.IPv6:
			from = "in0"
		case tp.FwOut.IPv6:
			from = "out0"
		}
		by := f.SrcMAC.String()
		if by == tp.FwOut.MAC.String() {
			by = "out0"
		}
		sum := "checksum bad"
		if icmp6ChecksumOK(f.Raw) {
			sum = "checksum good"
		}
		got = append(got, fmt.Sprintf("%s from %s, by %s, hop limit %d, %d bytes, %s", kind, from, by, f.TTL, len(f.Raw), sum))
	}
	if len(got) == 0 {
		return "nothing"
	}
	return strings.Join(got, "; ")
}

// icmp6ChecksumOK reports whether the ICMPv6 message in frame (untagged
// Ethernet, an IPv6 header without extensions) has a good checksum: the
// sum over the pseudo-header and the message folds to zero.
func icmp6ChecksumOK(frame []byte) bool {
	const l3, hlen = 14, 40
	if len(frame) < l3+hlen {
		return false
	}
	ip := frame[l3:]
	plen := int(binary.BigEndian.Uint16(ip[4:6]))
	if len(ip) < hlen+plen {
		return false
	}
	b := append([]byte{}, ip[8:40]...)
	b = binary.BigEndian.AppendUint32(b, uint32(plen))
	b = append(b, 0, 0, 0, unix.IPPROTO_ICMPV6)
	b = append(b, ip[hlen:hlen+plen]...)
	return nettest.Checksum(b) == 0
}
