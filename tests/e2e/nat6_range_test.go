package e2e

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// nat6RangeRuleset is TestNat6RangesAgainstKernel's ruleset; X is the
// topology's index, OUT fw's sink-side interface.
const nat6RangeRuleset = natTableStart + `-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 8092 -j DNAT --to-destination [fd00:X:2::2-fd00:X:2::3]:85
-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 8093 -j DNAT --to-destination [fd00:X:2::2-fd00:X:2::3]:85 --persistent
-A PREROUTING -d fd00:X:1::1/128 -p tcp -m tcp --dport 8094 -j DNAT --to-destination [fd00:X:2:80::2-fd00:X:2:80::3]:85
-A POSTROUTING -o OUT -p tcp -m tcp --dport 86 -j SNAT --to-source fd00:X:4::4-fd00:X:4::7
-A POSTROUTING -o OUT -p tcp -m tcp --dport 87 -j SNAT --to-source fd00:X:4::1:fffe-fd00:X:4::2:1 --persistent
-A POSTROUTING -o OUT -p tcp -m tcp --dport 88 -j SNAT --to-source fd00:X:4::ffff:fffe-fd00:X:4:0:1::1
COMMIT
`

// nat6Clients is how many addresses gen connects from.
const nat6Clients = 16

// nat6Client is gen's i-th client address, fd00:X:1::10+i.
func nat6Client(tp *nettest.Topology, i int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:%d:1::%x", tp.Subnet, 0x10+i))
}

// nat6FarBackend is sink's backend address fd00:X:2:80::host, in a /64 fw
// routes through sink: its second word's last byte (0x80) is the high
// byte of the word as jhash2 reads it (memory order), so a hash XORed
// with it rather than with the original destination's word picks the
// other backend.
func nat6FarBackend(tp *nettest.Topology, host int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:%d:2:80::%d", tp.Subnet, host))
}

// nat6RangeSetup gives gen its client addresses, sink a second backend
// address (fd00:X:2::3), two in fd00:X:2:80::/64 (routed by fw through
// sink) and a route to the SNAT ranges' fd00:X:4::/64 by fw.
func nat6RangeSetup(t *testing.T, tp *nettest.Topology) {
	t.Helper()
	cmds := [][]string{
		{tp.SinkNS, "ip", "-6", "addr", "add", nat6Addr(tp, 2, 3).String() + "/64", "dev", tp.Sink.Ifname, "nodad"},
		{tp.SinkNS, "ip", "-6", "addr", "add", nat6FarBackend(tp, 2).String() + "/128", "dev", tp.Sink.Ifname, "nodad"},
		{tp.SinkNS, "ip", "-6", "addr", "add", nat6FarBackend(tp, 3).String() + "/128", "dev", tp.Sink.Ifname, "nodad"},
		{tp.FwNS, "ip", "-6", "route", "add", nat6FarBackend(tp, 0).String() + "/64", "via", tp.Sink.IPv6.String()},
		{tp.SinkNS, "ip", "-6", "route", "add", nat6Addr(tp, 4, 0).String() + "/64", "via", tp.FwOut.IPv6.String()},
	}
	for i := 0; i < nat6Clients; i++ {
		cmds = append(cmds, []string{tp.GenNS, "ip", "-6", "addr", "add", nat6Client(tp, i).String() + "/64",
			"dev", tp.Gen.Ifname, "nodad"})
	}
	for _, c := range cmds {
		if res, err := nettest.Exec(c[0], c[1:]...); err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v %+v", c, err, res)
		}
	}
}

// nat6RangePick is the address find_best_ips_proto picks in lo-hi for an
// IPv6 connection from src to dst: jhash2 of the source's four words
// (network order, as in memory), the destination's last word as initial
// value (0 with --persistent); word by word the range's first word plus
// the hash scaled into the distance to its last (all 32 bits once a word
// before is below the last's), the hash XORed with the destination's word
// after each (not with --persistent): a DNAT's (dnat) the word just
// chosen, written into the tuple's destination the hash reads.
func nat6RangePick(lo, hi, src, dst netip.Addr, persistent, dnat bool) netip.Addr {
	words := func(a netip.Addr, order binary.ByteOrder) []uint32 {
		b := a.As16()
		return []uint32{order.Uint32(b[0:]), order.Uint32(b[4:]), order.Uint32(b[8:]), order.Uint32(b[12:])}
	}
	mem, dmem := words(src, binary.LittleEndian), words(dst, binary.LittleEndian)
	init := dmem[3]
	if persistent {
		init = 0
	}
	j := natJhash2(mem, init)
	l, h := words(lo, binary.BigEndian), words(hi, binary.BigEndian)
	var out [16]byte
	full := false
	for i := 0; i < 4; i++ {
		minw, dist := l[i], h[i]-l[i]+1
		if full {
			minw, dist = 0, ^uint32(0)
		}
		w := minw + uint32(uint64(j)*uint64(dist)>>32)
		if w != h[i] {
			full = true
		}
		binary.BigEndian.PutUint32(out[4*i:], w)
		if dnat {
			dmem[i] = binary.LittleEndian.Uint32(out[4*i:])
		}
		if !persistent {
			j ^= dmem[i]
		}
	}
	return netip.AddrFrom16(out)
}

// nat6DNATRange connects from each client to fw's port, DNATed to a
// backend of sink's two, backends[0]-backends[1] (servers on both), and
// says how many reached the backend find_best_ips_proto picks and how
// many backends were used.
func nat6DNATRange(t *testing.T, tp *nettest.Topology, port uint16, backends [2]netip.Addr, persistent bool) string {
	var srvs []*nettest.TCPServer
	for _, b := range backends {
		srvs = append(srvs, nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(b, 85), nettest.Echo()))
	}
	ok := 0
	for i := 0; i < nat6Clients; i++ {
		a := nettest.TCPConnect(tp.GenNS, nat6At(1, 1, port)(tp), nettest.WithPayload([]byte("r")),
			nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(nat6Client(tp, i), 0)))
		if a.Outcome == nettest.OK {
			ok++
		}
	}
	asKernel, used := 0, 0
	for k, srv := range srvs {
		conns := srv.WaitFinished(nat6Clients, time.Second)
		if len(conns) > 0 {
			used++
		}
		for _, c := range conns {
			want := nat6RangePick(backends[0], backends[1], c.From.Addr(), nat6Addr(tp, 1, 1), persistent, true)
			if want == backends[k] {
				asKernel++
			}
		}
		srv.Close()
	}
	return fmt.Sprintf("connected %d, as find_best_ips_proto picks %d, more than one used %v", ok, asKernel, used > 1)
}

// nat6SNATRange connects from each client to sink's port, SNATed into
// lo-hi, and says how many sources sink saw as find_best_ips_proto picks
// them and how many addresses were used.
func nat6SNATRange(t *testing.T, tp *nettest.Topology, port uint16, lo, hi netip.Addr, persistent bool) string {
	srv := nettest.StartTCPServer(t, tp.SinkNS, netip.AddrPortFrom(netip.IPv6Unspecified(), port), nettest.Echo())
	defer srv.Close()
	ok := 0
	for i := 0; i < nat6Clients; i++ {
		a := nettest.TCPConnect(tp.GenNS, netip.AddrPortFrom(tp.Sink.IPv6, port), nettest.WithPayload([]byte{byte(i)}),
			nettest.WithTimeout(2*time.Second), nettest.WithSource(netip.AddrPortFrom(nat6Client(tp, i), 0)))
		if a.Outcome == nettest.OK {
			ok++
		}
	}
	asKernel, used := 0, map[netip.Addr]bool{}
	for _, c := range srv.WaitFinished(nat6Clients, 2*time.Second) {
		used[c.From.Addr()] = true
		if len(c.Data) == 1 && c.From.Addr() == nat6RangePick(lo, hi, nat6Client(tp, int(c.Data[0])), tp.Sink.IPv6, persistent, false) {
			asKernel++
		}
	}
	return fmt.Sprintf("connected %d, as find_best_ips_proto picks %d, more than one used %v", ok, asKernel, len(used) > 1)
}

// TestNat6RangesAgainstKernel checks IPv6 NAT address ranges against
// ip6tables-legacy in twins: DNAT to two backends from 16 client
// addresses, with and without --persistent, and to two in another /64
// (the hash XORed with the chosen destination words, not the original's:
// difftest nat6 seed 1), SNAT into four addresses,
// into a range across a 16-bit boundary (with --persistent) and into one
// across a 32-bit word (the later word's choice then the whole word): every
// client's backend or source the one find_best_ips_proto's jhash2, word
// by word, picks (a Go model of it, which the kernel twin checks), more
// than one used.
func TestNat6RangesAgainstKernel(t *testing.T) {
	nettest.RequireRoot(t)
	requireTools(t, "ip6tables-legacy")
	tw := newTwins(t, xfwPath(t))
	tw.each(func(_ string, tp *nettest.Topology, fw firewall) {
		nat6RangeSetup(t, tp)
		fw.restore(t, tp, 6, strings.NewReplacer("fd00:X:", fmt.Sprintf("fd00:%d:", tp.Subnet),
			" OUT ", " "+tp.FwOut.Ifname+" ").Replace(nat6RangeRuleset))
	})
	if t.Failed() {
		return
	}
	snat := func(port uint16, lo, hi string, persistent bool) func(*testing.T, *nettest.Topology) string {
		return func(t *testing.T, tp *nettest.Topology) string {
			at := func(s string) netip.Addr {
				return netip.MustParseAddr(strings.Replace(s, "X", fmt.Sprint(tp.Subnet), 1))
			}
			return nat6SNATRange(t, tp, port, at(lo), at(hi), persistent)
		}
	}
	// Each twin's outcome is also the model's: the kernel's checks it.
	want := fmt.Sprintf("connected %d, as find_best_ips_proto picks %d, more than one used true", nat6Clients, nat6Clients)
	modelled := func(f func(*testing.T, *nettest.Topology) string) func(*testing.T, *nettest.Topology) string {
		return func(t *testing.T, tp *nettest.Topology) string {
			out := f(t, tp)
			if out != want {
				t.Errorf("subnet %d: %q, want %q", tp.Subnet, out, want)
			}
			return out
		}
	}
	runNatSteps(t, tw, []natStep{
		{"DNAT to an address range", modelled(func(t *testing.T, tp *nettest.Topology) string {
			return nat6DNATRange(t, tp, 8092, [2]netip.Addr{nat6Addr(tp, 2, 2), nat6Addr(tp, 2, 3)}, false)
		})},
		{"DNAT to an address range, --persistent", modelled(func(t *testing.T, tp *nettest.Topology) string {
			return nat6DNATRange(t, tp, 8093, [2]netip.Addr{nat6Addr(tp, 2, 2), nat6Addr(tp, 2, 3)}, true)
		})},
		{"DNAT to an address range in another /64", modelled(func(t *testing.T, tp *nettest.Topology) string {
			return nat6DNATRange(t, tp, 8094, [2]netip.Addr{nat6FarBackend(tp, 2), nat6FarBackend(tp, 3)}, false)
		})},
		{"SNAT to an address range", modelled(snat(86, "fd00:X:4::4", "fd00:X:4::7", false))},
		{"SNAT to a range across a 16-bit boundary, --persistent", modelled(snat(87, "fd00:X:4::1:fffe", "fd00:X:4::2:1", true))},
		// The third word's choice below its last: the fourth word's
		// from all 32 bits.
		{"SNAT to a range across a 32-bit word", modelled(snat(88, "fd00:X:4::ffff:fffe", "fd00:X:4:0:1::1", false))},
	})
	compareNatCountersFam(t, tw, 6, 6)
}
