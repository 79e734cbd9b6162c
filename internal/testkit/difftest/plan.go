package difftest

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
	"github.com/xfw-dev/xfw/internal/testkit/nettest"
)

// DefaultSubnet is X in the addresses of both topologies (10.X.… and
// fd00:X:…). Namespaces isolate them, so every session may use the same one;
// fixing it makes a seed reproduce the same rulesets and packets everywhere,
// and lets hand-written rulesets name the topology's addresses.
const DefaultSubnet = 42

// VLANID is the 802.1Q VLAN fw has a device for (in0.100); frames tagged
// with it reach fw on that device.
const VLANID = 100

// VLANIfname is fw's VLAN device on in0.
const VLANIfname = "in0.100"

// vlanSubnet is the third address byte of the VLAN's IPv4 subnet (and the
// third group of its IPv6 prefix).
const vlanSubnet = 100

// outMTU is the MTU of the fw—sink link: smaller than gen's 1500, so that
// forwarded packets can be too big (DF: "fragmentation needed" before the
// FORWARD hook; else fragmented after it).
const outMTU = 1400

// Plan is the addressing of one family in both topologies. nettest builds
// the links and addresses (with subnet X); a session adds the VLAN device,
// the far networks' routes and the static neighbours described here.
type Plan struct {
	// Family is the family the addresses below belong to.
	Family ir.Family
	// Subnet is X.
	Subnet uint8
	// Gen, FwIn, FwOut and Sink are the four interfaces' addresses.
	Gen, FwIn, FwOut, Sink netip.Addr
	// FwVLAN is fw's address on in0.100; GenVLAN is a neighbour there
	// (gen's MAC answers for it: gen sends tagged frames raw).
	FwVLAN, GenVLAN netip.Addr
	// GenNet, SinkNet and VLANNet are the links' prefixes.
	GenNet, SinkNet, VLANNet netip.Prefix
	// FarGen is a network fw routes through gen; every other destination
	// fw routes through sink (its default route).
	FarGen netip.Prefix
	// FarSink is a network beyond sink, for rules and packets.
	FarSink netip.Prefix
	// ViaSink are the prefixes fw routes through sink (FarSink among
	// them): a large part of the address space, not all of it.
	ViaSink []netip.Prefix
	// Unrouted is a network fw has no route to (the kernel answers
	// "unreachable" before any chain).
	Unrouted netip.Prefix
	// GenMAC, FwInMAC, FwOutMAC and SinkMAC are the interfaces' MACs.
	GenMAC, FwInMAC, FwOutMAC, SinkMAC net.HardwareAddr
	// FwInLL is fw's in0 link-local address (IPv6; the EUI-64 of its MAC).
	FwInLL netip.Addr
	// Joined are multicast groups fw has joined on in0 (all hosts; for
	// IPv6 also all routers and in0's solicited-node group).
	Joined []netip.Addr
	// Unjoined are multicast groups no device of fw joined: a link-local
	// one and a wider one (the kernel drops both before INPUT).
	Unjoined []netip.Addr
}

// NewPlan returns the plan of family fam with subnet x (the same formulas as
// nettest's topologies; Session checks them against the real ones).
func NewPlan(fam ir.Family, x uint8) Plan {
	mac := func(subnet, host byte) net.HardwareAddr {
		return net.HardwareAddr{0x02, 'x', 't', x, subnet, host}
	}
	p := Plan{Family: fam, Subnet: x,
		GenMAC: mac(1, 2), FwInMAC: mac(1, 1), FwOutMAC: mac(2, 1), SinkMAC: mac(2, 2)}
	if fam == ir.IPv4 {
		a := func(s, h byte) netip.Addr { return netip.AddrFrom4([4]byte{10, x, s, h}) }
		p.Gen, p.FwIn, p.FwOut, p.Sink = a(1, 2), a(1, 1), a(2, 1), a(2, 2)
		p.FwVLAN, p.GenVLAN = a(vlanSubnet, 1), a(vlanSubnet, 2)
		p.GenNet = netip.PrefixFrom(a(1, 0), 24)
		p.SinkNet = netip.PrefixFrom(a(2, 0), 24)
		p.VLANNet = netip.PrefixFrom(a(vlanSubnet, 0), 24)
		p.FarGen = netip.MustParsePrefix("198.51.100.0/24") // TEST-NET-2
		p.FarSink = netip.MustParsePrefix("203.0.113.0/24") // TEST-NET-3
		p.Joined = []netip.Addr{netip.MustParseAddr("224.0.0.1")}
		p.Unjoined = []netip.Addr{netip.MustParseAddr("224.0.0.99"), netip.MustParseAddr("239.1.2.3")}
		p.ViaSink = []netip.Prefix{p.FarSink, netip.MustParsePrefix("0.0.0.0/1"),
			netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16")}
		p.Unrouted = netip.MustParsePrefix("198.18.0.0/15") // benchmarking
		return p
	}
	a := func(s, h int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fd00:%d:%d::%d", x, s, h)) }
	p.Gen, p.FwIn, p.FwOut, p.Sink = a(1, 2), a(1, 1), a(2, 1), a(2, 2)
	p.FwVLAN, p.GenVLAN = a(vlanSubnet, 1), a(vlanSubnet, 2)
	p.GenNet = netip.MustParsePrefix(fmt.Sprintf("fd00:%d:1::/64", x))
	p.SinkNet = netip.MustParsePrefix(fmt.Sprintf("fd00:%d:2::/64", x))
	p.VLANNet = netip.MustParsePrefix(fmt.Sprintf("fd00:%d:%d::/64", x, vlanSubnet))
	p.FarGen = netip.MustParsePrefix("2001:db8:1::/48")
	p.FarSink = netip.MustParsePrefix("2001:db8:2::/48")
	p.ViaSink = []netip.Prefix{p.FarSink, netip.MustParsePrefix("2000::/3")}
	p.Unrouted = netip.MustParsePrefix("fd99::/16")
	m := p.FwInMAC
	p.FwInLL = netip.AddrFrom16([16]byte{0: 0xfe, 1: 0x80, 8: m[0] ^ 0x02, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]})
	in := p.FwIn.As16()
	p.Joined = []netip.Addr{netip.MustParseAddr("ff02::1"), netip.MustParseAddr("ff02::2"),
		netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: in[13], 14: in[14], 15: in[15]})}
	p.Unjoined = []netip.Addr{netip.MustParseAddr("ff02::99"), netip.MustParseAddr("ff05::1:3")}
	return p
}

// FwAddrs returns fw's own addresses (INPUT destinations), loopback
// included.
func (p Plan) FwAddrs() []netip.Addr {
	lo := netip.MustParseAddr("127.0.0.1")
	if p.Family == ir.IPv6 {
		lo = netip.IPv6Loopback()
	}
	return []netip.Addr{p.FwIn, p.FwOut, p.FwVLAN, lo}
}

// isLocal reports whether fw's stack delivers packets to a locally: its
// addresses, loopback, broadcast, and multicast groups it joined.
func (p Plan) isLocal(a netip.Addr) bool {
	for _, l := range p.FwAddrs() {
		if a == l {
			return true
		}
	}
	for _, j := range p.Joined {
		if a == j {
			return true
		}
	}
	if p.Family == ir.IPv4 {
		for _, n := range []netip.Prefix{p.GenNet, p.SinkNet, p.VLANNet} {
			if a == lastAddr(n) {
				return true
			}
		}
		return a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || a.IsLoopback()
	}
	return a == p.FwInLL || a.IsLoopback()
}

// via returns where fw routes a destination: FromGen or FromSink for the
// routes through gen or sink (and their links), "" for fw itself or no
// route.
func (p Plan) via(a netip.Addr) Origin {
	if p.isLocal(a) || a.IsMulticast() {
		return ""
	}
	best, to := -1, Origin("")
	try := func(n netip.Prefix, o Origin) {
		if n.IsValid() && n.Contains(a) && n.Bits() > best {
			best, to = n.Bits(), o
		}
	}
	try(p.GenNet, FromGen)
	try(p.FarGen, FromGen)
	try(p.VLANNet, FromGen)
	try(p.SinkNet, FromSink)
	for _, n := range p.ViaSink {
		try(n, FromSink)
	}
	return to
}

// isGroup reports whether a is a broadcast or multicast address of fw's
// links (a group of hosts: fw's own packets to it come back to fw).
func (p Plan) isGroup(a netip.Addr) bool {
	if a.IsMulticast() {
		return true
	}
	if p.Family == ir.IPv4 {
		for _, n := range []netip.Prefix{p.GenNet, p.SinkNet, p.VLANNet} {
			if a == lastAddr(n) {
				return true
			}
		}
		return a == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	return false
}

// lastAddr returns the last address of a prefix (an IPv4 subnet's
// broadcast address).
func lastAddr(n netip.Prefix) netip.Addr {
	b := n.Masked().Addr().AsSlice()
	for i := n.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> uint(i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// check verifies the plan against a topology nettest built.
func (p Plan) check(tp *nettest.Topology) error {
	type pair struct {
		name      string
		want, got any
	}
	gotAddr := func(e nettest.Endpoint) netip.Addr {
		if p.Family == ir.IPv6 {
			return e.IPv6
		}
		return e.IPv4
	}
	for _, c := range []pair{
		{"gen address", p.Gen, gotAddr(tp.Gen)}, {"fw in0 address", p.FwIn, gotAddr(tp.FwIn)},
		{"fw out0 address", p.FwOut, gotAddr(tp.FwOut)}, {"sink address", p.Sink, gotAddr(tp.Sink)},
		{"gen MAC", p.GenMAC.String(), tp.Gen.MAC.String()}, {"fw in0 MAC", p.FwInMAC.String(), tp.FwIn.MAC.String()},
		{"fw out0 MAC", p.FwOutMAC.String(), tp.FwOut.MAC.String()}, {"sink MAC", p.SinkMAC.String(), tp.Sink.MAC.String()},
	} {
		if c.want != c.got {
			return fmt.Errorf("topology %s: %s is %v, the plan says %v", tp.Prefix, c.name, c.got, c.want)
		}
	}
	return nil
}
