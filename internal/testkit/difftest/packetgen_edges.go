package difftest

import (
	"net"
	"net/netip"
	"sort"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file collects the edges of a ruleset: the addresses, ports, TTLs,
// lengths, flags and protocols its rules compare with, and the values just
// inside and outside them.

// edges are the values worth sending, taken from a ruleset.
type edges struct {
	addrs  []netip.Addr
	ports  []uint16
	icmp   [][2]uint8 // type, code
	ttls   []uint8
	lens   []int
	macs   []net.HardwareAddr
	flags  []uint8
	protos []uint8
}

// collectEdges gathers the interesting values of rs and of the topology.
func collectEdges(rs *ir.Ruleset, plan Plan) edges {
	var e edges
	addAddr := func(as ...netip.Addr) {
		for _, a := range as {
			if a.IsValid() {
				e.addrs = append(e.addrs, a)
			}
		}
	}
	addPort := func(v int) {
		if v >= 0 && v <= 65535 {
			e.ports = append(e.ports, uint16(v))
		}
	}
	addRange := func(r ir.PortRange) {
		for _, v := range []int{int(r.First) - 1, int(r.First), int(r.Last), int(r.Last) + 1} {
			addPort(v)
		}
	}
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			for _, am := range []ir.AddrMatch{r.Src, r.Dst} {
				if am.Set {
					addAddr(maskEdges(am.Addr, am.Mask)...)
				}
			}
			if r.Proto.Set {
				e.protos = append(e.protos, r.Proto.Num)
			}
			for _, m := range r.Matches {
				switch m := m.(type) {
				case *ir.TCPMatch:
					for _, pm := range []ir.PortMatch{m.SrcPort, m.DstPort} {
						if pm.Set {
							addRange(pm.Range)
						}
					}
					if m.Flags.Set {
						e.flags = append(e.flags, m.Flags.Comp, m.Flags.Comp^m.Flags.Mask)
						for bit := uint8(1); bit != 0; bit <<= 1 {
							if m.Flags.Mask&bit != 0 {
								e.flags = append(e.flags, m.Flags.Comp^bit)
							}
						}
					}
				case *ir.UDPMatch:
					for _, pm := range []ir.PortMatch{m.SrcPort, m.DstPort} {
						if pm.Set {
							addRange(pm.Range)
						}
					}
				case *ir.MultiportMatch:
					for _, pr := range m.Ports {
						addRange(pr)
					}
				case *ir.ICMPMatch:
					t := m.Type
					e.icmp = append(e.icmp, [2]uint8{t, m.CodeMin}, [2]uint8{t, m.CodeMax}, [2]uint8{t + 1, 0}, [2]uint8{t - 1, 0})
					if m.CodeMin > 0 {
						e.icmp = append(e.icmp, [2]uint8{t, m.CodeMin - 1})
					}
					if m.CodeMax < 255 {
						e.icmp = append(e.icmp, [2]uint8{t, m.CodeMax + 1})
					}
				case *ir.IPRangeMatch:
					for _, ar := range []ir.AddrRange{m.Src, m.Dst} {
						if ar.Set {
							addAddr(ar.From.Prev(), ar.From, ar.To, ar.To.Next())
						}
					}
				case *ir.LengthMatch:
					e.lens = append(e.lens, int(m.Min)-1, int(m.Min), int(m.Max), int(m.Max)+1)
				case *ir.TTLMatch:
					v := int(m.Value)
					for _, t := range []int{v - 1, v, v + 1, v + 2} {
						if t >= 0 && t <= 255 {
							e.ttls = append(e.ttls, uint8(t))
						}
					}
				case *ir.MACMatch:
					e.macs = append(e.macs, net.HardwareAddr(m.Addr[:]))
				}
			}
		}
	}
	// The topology's own values, always.
	addAddr(plan.Gen, plan.Sink, plan.FwIn, plan.FwOut, plan.GenVLAN, plan.FwVLAN)
	for _, p := range interestingPorts {
		addPort(p)
	}
	e.ttls = append(e.ttls, 0, 1, 2, 63, 64, 65, 254, 255)
	e.macs = append(e.macs, otherMACs...)
	e.ports, e.ttls, e.lens = sortedUnique(e.ports), sortedUnique(e.ttls), sortedUnique(e.lens)
	e.flags, e.protos = sortedUnique(e.flags), sortedUnique(e.protos)
	return e
}

// maskEdges returns the addresses at the edges of {a : a & mask == addr}:
// first and last, their outer neighbours, and for a non-contiguous mask the
// addresses one free bit away.
func maskEdges(addr, mask netip.Addr) []netip.Addr {
	if !addr.IsValid() || !mask.IsValid() {
		return nil
	}
	a, m := addr.AsSlice(), mask.AsSlice()
	first := make([]byte, len(a))
	last := make([]byte, len(a))
	for i := range a {
		first[i] = a[i] & m[i]
		last[i] = a[i]&m[i] | ^m[i]
	}
	f, _ := netip.AddrFromSlice(first)
	l, _ := netip.AddrFromSlice(last)
	out := []netip.Addr{f, l, f.Prev(), l.Next()}
	// One free bit set, and the lowest mask bit flipped (just outside).
	lowest := -1
	for i := len(m)*8 - 1; i >= 0; i-- {
		if m[i/8]&(0x80>>uint(i%8)) != 0 {
			lowest = i
			break
		}
	}
	for i := 0; i < lowest; i++ {
		if m[i/8]&(0x80>>uint(i%8)) == 0 {
			x := append([]byte(nil), first...)
			x[i/8] |= 0x80 >> uint(i%8)
			xa, _ := netip.AddrFromSlice(x)
			out = append(out, xa)
			break
		}
	}
	if lowest >= 0 {
		x := append([]byte(nil), first...)
		x[lowest/8] ^= 0x80 >> uint(lowest%8)
		xa, _ := netip.AddrFromSlice(x)
		out = append(out, xa)
	}
	return out
}

// sortedUnique sorts and deduplicates a slice (for stable edge lists).
func sortedUnique[T interface{ ~uint8 | ~uint16 | ~int }](xs []T) []T {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
