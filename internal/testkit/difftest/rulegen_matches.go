package difftest

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file writes the generator's matches: addresses, interfaces,
// protocols and ports, TCP flags, ICMP types, iprange, length, TTL and MAC.

// interestingAddrs returns addresses worth naming in rules.
func (g *rgen) interestingAddrs() []netip.Addr {
	p := g.plan
	out := []netip.Addr{p.Gen, p.FwIn, p.FwOut, p.Sink, p.FwVLAN, p.GenVLAN,
		p.GenNet.Addr(), p.SinkNet.Addr(), p.FarGen.Addr(), p.FarSink.Addr()}
	out = append(out, g.randomIn(p.FarGen), g.randomIn(p.FarSink), g.randomIn(p.GenNet), g.randomIn(p.SinkNet))
	return out
}

// randomIn returns a random address of prefix pr.
func (g *rgen) randomIn(pr netip.Prefix) netip.Addr {
	b := pr.Addr().AsSlice()
	for i := pr.Bits(); i < len(b)*8; i++ {
		if g.rng.Intn(2) == 1 {
			b[i/8] |= 0x80 >> uint(i%8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// randomAddr returns a completely random address of the family.
func (g *rgen) randomAddr() netip.Addr {
	b := make([]byte, g.fam.AddrBits()/8)
	g.rng.Read(b)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// prefixLen returns a prefix length, biased to the interesting ones.
func (g *rgen) prefixLen() int {
	bits := g.fam.AddrBits()
	if g.chance(40) {
		return g.rng.Intn(bits + 1) // every length, 0 included
	}
	if g.fam == ir.IPv4 {
		return pick(g.rng, []int{0, 1, 8, 16, 23, 24, 25, 30, 31, 32, 32})
	}
	return pick(g.rng, []int{0, 1, 16, 47, 48, 63, 64, 65, 120, 127, 128, 128})
}

// maxFreeMaskBits keeps non-contiguous netmasks within what xfw's compiler
// supports (16 free bits above the lowest set bit; docs/compatibility.md).
const maxFreeMaskBits = 12

// addrSpec returns an -s/-d value: an address, with a prefix length, a
// contiguous netmask or a non-contiguous one; with multi, sometimes two
// addresses (iptables refuses "!" with several).
func (g *rgen) addrSpec(multi bool) string {
	var a netip.Addr
	if g.chance(85) {
		a = pick(g.rng, g.interestingAddrs())
	} else {
		a = g.randomAddr()
	}
	switch k := g.rng.Intn(10); {
	case k < 1:
		return a.String() // a host
	case k < 6:
		return fmt.Sprintf("%s/%d", a, g.prefixLen())
	case k < 8:
		return fmt.Sprintf("%s/%s", a, maskAddr(g.fam, prefixMask(g.fam, g.prefixLen())))
	case k < 9 && multi:
		// Two addresses: iptables makes one rule per address.
		return fmt.Sprintf("%s/%d,%s", a, g.prefixLen(), pick(g.rng, g.interestingAddrs()))
	default:
		return fmt.Sprintf("%s/%s", a, maskAddr(g.fam, g.oddMask()))
	}
}

// prefixMask returns the netmask of a prefix length as bytes.
func prefixMask(fam ir.Family, n int) []byte {
	b := make([]byte, fam.AddrBits()/8)
	for i := 0; i < n; i++ {
		b[i/8] |= 0x80 >> uint(i%8)
	}
	return b
}

// maskAddr prints a netmask as an address.
func maskAddr(fam ir.Family, m []byte) string {
	a, _ := netip.AddrFromSlice(m)
	return a.String()
}

// oddMask returns a non-contiguous netmask: a prefix mask with up to
// maxFreeMaskBits of its bits cleared (its lowest set bit kept).
func (g *rgen) oddMask() []byte {
	bits := g.fam.AddrBits()
	n := 2 + g.rng.Intn(bits-1) // at least two bits set
	m := prefixMask(g.fam, n)
	clear := 1 + g.rng.Intn(maxFreeMaskBits)
	for i := 0; i < clear; i++ {
		pos := g.rng.Intn(n - 1) // never the lowest set bit (n-1)
		m[pos/8] &^= 0x80 >> uint(pos%8)
	}
	return m
}

// ifaceSpec returns an -i/-o value: names of fw's devices, wildcards, and
// names no device has.
func (g *rgen) ifaceSpec(in bool) string {
	names := []string{"in0", "out0", "lo", VLANIfname, "in+", "out+", "+", "in0.+", "i+", "eth+", "eth0", "o+", "lo+"}
	if in {
		names = append(names, "in0", "in+")
	} else {
		names = append(names, "out0", "out+")
	}
	return pick(g.rng, names)
}

// protoSpec chooses the rule's -p.
func (g *rgen) protoSpec(r *grule) protoChoice {
	icmpSpell, icmpNum := "icmp", 1
	if g.fam == ir.IPv6 {
		icmpSpell, icmpNum = pick(g.rng, []string{"ipv6-icmp", "icmpv6", "58"}), 58
	}
	switch k := g.rng.Intn(100); {
	case k < 30 && r.target != "REJECT":
		return protoChoice{num: -1}
	case k < 30:
		// REJECT with tcp-reset needs -p tcp: give it one more often.
		return protoChoice{spell: "tcp", num: 6}
	case k < 52:
		return protoChoice{spell: pick(g.rng, []string{"tcp", "tcp", "6", "TCP"}), num: 6}
	case k < 70:
		return protoChoice{spell: pick(g.rng, []string{"udp", "udp", "17"}), num: 17}
	case k < 82:
		return protoChoice{spell: icmpSpell, num: icmpNum}
	case k < 88:
		other := []protoChoice{{"gre", 47, false}, {"47", 47, false}, {"esp", 50, false}, {"ah", 51, false},
			{"sctp", 132, false}, {"udplite", 136, false}, {"dccp", 33, false}, {"255", 255, false}}
		if g.fam == ir.IPv6 {
			// ip6tables' -p icmp is protocol 1, not ICMPv6.
			other = append(other, protoChoice{"icmp", 1, false}, protoChoice{"ipv6-frag", 44, false},
				protoChoice{"ipv6-nonxt", 59, false}, protoChoice{"60", 60, false})
		} else {
			other = append(other, protoChoice{"igmp", 2, false})
		}
		return pick(g.rng, other)
	case k < 92:
		return protoChoice{spell: pick(g.rng, []string{"all", "0"}), num: 0}
	default:
		return protoChoice{spell: pick(g.rng, []string{"tcp", "udp", icmpSpell}), num: 0, invert: true}
	}
}

// interestingPorts are port values rules name.
var interestingPorts = []int{0, 1, 22, 53, 80, 443, 1023, 1024, 5000, 8080, 32768, 65534, 65535}

// port returns a port number.
func (g *rgen) port() int {
	if g.chance(75) {
		return pick(g.rng, interestingPorts)
	}
	return g.rng.Intn(65536)
}

// portSpec returns a port or range as tcp/udp spell it.
func (g *rgen) portSpec() string {
	switch k := g.rng.Intn(10); {
	case k < 4:
		return fmt.Sprint(g.port())
	case k < 5:
		return pick(g.rng, []string{"ssh", "domain", "http", "https"})
	case k < 8:
		a, b := g.port(), g.port()
		if a > b {
			a, b = b, a
		}
		return fmt.Sprintf("%d:%d", a, b)
	case k < 9:
		return fmt.Sprintf(":%d", g.port())
	default:
		return fmt.Sprintf("%d:", g.port())
	}
}

// protoMatches returns the matches that need -p: tcp, udp, multiport,
// icmp and icmp6.
func (g *rgen) protoMatches(num int) []string {
	var s []string
	add := func(xs ...string) { s = append(s, xs...) }
	switch num {
	case 6, 17:
		if g.chance(70) {
			if g.chance(70) {
				add("-m", map[int]string{6: "tcp", 17: "udp"}[num])
			}
			// Without "-m tcp/udp" iptables loads the match implicitly
			// when an option needs it.
			if g.chance(35) {
				add(g.neg(25)...)
				add(pick(g.rng, []string{"--sport", "--source-port"}), g.portSpec())
			}
			if g.chance(60) {
				add(g.neg(25)...)
				add(pick(g.rng, []string{"--dport", "--destination-port"}), g.portSpec())
			}
			if num == 6 && g.chance(40) {
				if g.chance(30) {
					add(g.neg(30)...)
					add("--syn")
				} else {
					add(g.neg(25)...)
					add("--tcp-flags", g.flagList(true), g.flagList(false))
				}
			}
		}
	case 1, 58:
		if (num == 1) != (g.fam == ir.IPv4) {
			break // ip6tables -p icmp: no icmp match applies
		}
		if g.chance(75) {
			if num == 1 {
				add("-m", "icmp")
				add(g.neg(20)...)
				add("--icmp-type", g.icmpSpec(false))
			} else {
				add("-m", "icmp6")
				add(g.neg(20)...)
				add("--icmpv6-type", g.icmpSpec(true))
			}
		}
	}
	switch num {
	case 6, 17, 132, 136, 33:
		if g.chance(25) {
			add("-m", "multiport")
			add(g.neg(25)...)
			add(pick(g.rng, []string{"--dports", "--sports", "--ports", "--destination-ports", "--source-ports"}), g.portList())
		}
	}
	return s
}

// tcpFlagNames are the names --tcp-flags takes.
var tcpFlagNames = []string{"FIN", "SYN", "RST", "PSH", "ACK", "URG"}

// flagList returns a --tcp-flags mask (mask true) or comparison list.
func (g *rgen) flagList(mask bool) string {
	if g.chance(15) {
		if mask {
			return "ALL"
		}
		return pick(g.rng, []string{"NONE", "ALL"})
	}
	var out []string
	for _, f := range tcpFlagNames {
		if g.chance(35) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		if mask {
			return "SYN,ACK,FIN,RST"
		}
		return "NONE"
	}
	return strings.Join(out, ",")
}

// portList returns a multiport list: up to 15 ports, a range counting two.
func (g *rgen) portList() string {
	var items []string
	n := 0
	for n < 15 && (len(items) == 0 || g.chance(55)) {
		if n <= 13 && g.chance(30) {
			a, b := g.port(), g.port()
			if a > b {
				a, b = b, a
			}
			if a == b { // multiport wants first < last in a range
				items = append(items, fmt.Sprint(a))
				n++
				continue
			}
			items = append(items, fmt.Sprintf("%d:%d", a, b))
			n += 2
		} else {
			items = append(items, fmt.Sprint(g.port()))
			n++
		}
	}
	return strings.Join(items, ",")
}

// icmpSpec returns an --icmp-type / --icmpv6-type value.
func (g *rgen) icmpSpec(v6 bool) string {
	names4 := []string{"echo-request", "echo-reply", "destination-unreachable", "port-unreachable", "host-unreachable",
		"fragmentation-needed", "time-exceeded", "parameter-problem", "timestamp-request", "redirect", "source-quench", "any"}
	names6 := []string{"echo-request", "echo-reply", "destination-unreachable", "port-unreachable", "packet-too-big",
		"time-exceeded", "parameter-problem", "neighbour-solicitation", "router-advertisement", "no-route"}
	// Not the MLD names, which xfw knows and iptables 1.8.9 does not (a
	// deliberate deviation, internal/iptables match_icmp.go).
	types4 := []int{0, 3, 4, 5, 8, 11, 12, 13, 14, 255}
	types6 := []int{1, 2, 3, 4, 128, 129, 133, 134, 135, 136, 255}
	names, types := names4, types4
	if v6 {
		names, types = names6, types6
	}
	switch k := g.rng.Intn(10); {
	case k < 4:
		return pick(g.rng, names)
	case k < 7:
		return fmt.Sprint(pick(g.rng, types))
	case k < 9:
		return fmt.Sprintf("%d/%d", pick(g.rng, types), pick(g.rng, []int{0, 1, 3, 4, 255}))
	default:
		a, b := g.rng.Intn(6), g.rng.Intn(6)
		if a > b {
			a, b = b, a
		}
		return fmt.Sprintf("%d/%d:%d", pick(g.rng, types), a, b)
	}
}

// iprangeSpec returns an iprange match.
func (g *rgen) iprangeSpec() []string {
	s := []string{"-m", "iprange"}
	rng := func() string {
		a := pick(g.rng, g.interestingAddrs())
		b := a
		for i := g.rng.Intn(300); i > 0; i-- {
			b = b.Next()
		}
		if g.chance(20) {
			b = g.randomIn(netip.PrefixFrom(a, a.BitLen()-8).Masked())
			if b.Less(a) {
				a, b = b, a
			}
		}
		return a.String() + "-" + b.String()
	}
	both := g.chance(25)
	if both || g.chance(50) {
		s = append(s, g.neg(25)...)
		s = append(s, "--src-range", rng())
		if !both {
			return s
		}
	}
	s = append(s, g.neg(25)...)
	return append(s, "--dst-range", rng())
}

// lengthSpec returns a --length value.
func (g *rgen) lengthSpec() string {
	edges := []int{0, 20, 28, 40, 41, 48, 60, 64, 100, 576, 1280, 1400, 1401, 1500, 65535}
	a, b := pick(g.rng, edges), pick(g.rng, edges)
	if g.chance(30) {
		a = g.rng.Intn(200)
	}
	if a > b {
		a, b = b, a
	}
	if g.chance(25) {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d:%d", a, b)
}

// ttlSpec returns a ttl (IPv4) or hl (IPv6) match.
func (g *rgen) ttlSpec() []string {
	name := "ttl"
	if g.fam == ir.IPv6 {
		name = "hl"
	}
	v := pick(g.rng, []int{0, 1, 2, 63, 64, 65, 127, 128, 254, 255, g.rng.Intn(256)})
	switch g.rng.Intn(4) {
	case 0:
		return []string{"-m", name, "--" + name + "-eq", fmt.Sprint(v)}
	case 1:
		return []string{"-m", name, "!", "--" + name + "-eq", fmt.Sprint(v)}
	case 2:
		return []string{"-m", name, "--" + name + "-lt", fmt.Sprint(v)}
	default:
		return []string{"-m", name, "--" + name + "-gt", fmt.Sprint(v)}
	}
}

// otherMACs are source MACs rules name that no interface has; the packet
// generator sends frames from them.
var otherMACs = []net.HardwareAddr{{0x02, 0, 0, 0, 0, 0x99}, {0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff}}

// macSpec returns a --mac-source value.
func (g *rgen) macSpec() string {
	m := pick(g.rng, []net.HardwareAddr{g.plan.GenMAC, g.plan.SinkMAC, otherMACs[0], otherMACs[1]})
	if g.chance(30) {
		return strings.ToUpper(m.String())
	}
	return m.String()
}
