package compiler

import (
	"errors"
	"fmt"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/xfw-dev/xfw/internal/ir"
)

// This file checks the compiler against a reference interpreter that walks
// the IR the way netfilter walks a table: rule by rule, match by match, with
// a call stack for jumps. It shares no code with conditions.go, flatten.go
// or lbvs.go.

type refVerdict struct {
	// rule is the rule whose target decided (nil: policy or hotdrop).
	rule    *ir.Rule
	hotdrop bool
	hotRule *ir.Rule
	// counted lists every rule whose counter the packet increments.
	counted []*ir.Rule
}

var testIfaces = []Interface{{1, "lo", 0}, {2, "eth0", 0}, {3, "eth1", 5}, {4, "wlan0", 0x12}}

func ifName(idx uint32) string {
	for _, i := range testIfaces {
		if i.Index == idx {
			return i.Name
		}
	}
	if idx == 0 {
		return ""
	}
	return "unknown-dev"
}

func addrOf(v U128, fam ir.Family) netip.Addr {
	if fam == ir.IPv4 {
		return netip.AddrFrom4([4]byte{byte(v.Lo >> 24), byte(v.Lo >> 16), byte(v.Lo >> 8), byte(v.Lo)})
	}
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(v.Hi >> (56 - 8*i))
		b[8+i] = byte(v.Lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

func maskMatch(a, addr, mask netip.Addr) bool {
	x, y, m := a.AsSlice(), addr.AsSlice(), mask.AsSlice()
	for i := range x {
		if x[i]&m[i] != y[i]&m[i] {
			return false
		}
	}
	return true
}

func inRange(a, from, to netip.Addr) bool {
	return a.Compare(from) >= 0 && a.Compare(to) <= 0
}

type refResult int

const (
	refNoMatch refResult = iota
	refMatch
	refHotdrop
)

// refRuleMatch evaluates r like ip_packet_match followed by the matches.
func refRuleMatch(fam ir.Family, r *ir.Rule, p *Packet) refResult {
	src, dst := addrOf(p.Src, fam), addrOf(p.Dst, fam)
	if r.Src.Set && maskMatch(src, r.Src.Addr, r.Src.Mask) == r.Src.Invert {
		return refNoMatch
	}
	if r.Dst.Set && maskMatch(dst, r.Dst.Addr, r.Dst.Mask) == r.Dst.Invert {
		return refNoMatch
	}
	if r.InIface.Set && !r.InIface.Matches(ifName(p.IIF)) {
		return refNoMatch
	}
	if r.OutIface.Set && !r.OutIface.Matches(ifName(p.OIF)) {
		return refNoMatch
	}
	if fam == ir.IPv6 && r.Proto.Set && p.Proto == ProtoErr { // any -p, "all" too
		return refHotdrop
	}
	if r.Proto.Set && (r.Proto.Num != 0 || r.Proto.Invert) {
		if (p.Proto == uint32(r.Proto.Num)) == r.Proto.Invert || p.Proto > 255 {
			return refNoMatch
		}
	}
	if r.Fragment.Set && (p.Frag == 1) == r.Fragment.Invert {
		return refNoMatch
	}
	portIn := func(v uint32, pm ir.PortMatch) bool {
		if !pm.Set {
			return true
		}
		return (v >= uint32(pm.Range.First) && v <= uint32(pm.Range.Last)) != pm.Invert
	}
	for _, m := range r.Matches {
		switch m := m.(type) {
		case *ir.TCPMatch:
			if p.Sport == ValNone {
				return refNoMatch
			}
			if p.Sport == ValTrunc || p.Sport >= ValShort {
				return refHotdrop
			}
			if !portIn(p.Sport, m.SrcPort) || !portIn(p.Dport, m.DstPort) {
				return refNoMatch
			}
			if m.Flags.Set && (uint8(p.TCPFlags)&m.Flags.Mask == m.Flags.Comp) == m.Flags.Invert {
				return refNoMatch
			}
		case *ir.UDPMatch:
			if p.Sport == ValNone {
				return refNoMatch
			}
			if p.Sport == ValTrunc || p.Sport >= ValShort {
				return refHotdrop
			}
			if !portIn(p.Sport, m.SrcPort) || !portIn(p.Dport, m.DstPort) {
				return refNoMatch
			}
		case *ir.MultiportMatch:
			// multiport_mt: nothing of a later fragment, a hotdrop
			// without four bytes, the ports of a header cut short
			// after them.
			if p.Sport == ValTrunc && p.Frag == 0 {
				return refHotdrop
			}
			if p.Sport == ValNone || p.Sport == ValTrunc {
				return refNoMatch
			}
			in := func(v uint32) bool {
				if v >= ValShort {
					v -= ValShort
				}
				for _, pr := range m.Ports {
					if v >= uint32(pr.First) && v <= uint32(pr.Last) {
						return true
					}
				}
				return false
			}
			var ok bool
			switch m.Dir {
			case ir.MultiportSource:
				ok = in(p.Sport)
			case ir.MultiportDestination:
				ok = in(p.Dport)
			default:
				ok = in(p.Sport) || in(p.Dport)
			}
			if ok == m.Invert {
				return refNoMatch
			}
		case *ir.ICMPMatch:
			if p.ICMP == ValNone {
				return refNoMatch
			}
			if p.ICMP == ValTrunc {
				return refHotdrop
			}
			t, c := uint8(p.ICMP>>8), uint8(p.ICMP)
			ok := m.Any || (t == m.Type && c >= m.CodeMin && c <= m.CodeMax)
			if ok == m.Invert {
				return refNoMatch
			}
		case *ir.IPRangeMatch:
			if m.Src.Set && inRange(src, m.Src.From, m.Src.To) == m.Src.Invert {
				return refNoMatch
			}
			if m.Dst.Set && inRange(dst, m.Dst.From, m.Dst.To) == m.Dst.Invert {
				return refNoMatch
			}
		case *ir.CommentMatch:
		case *ir.LengthMatch:
			if (p.Len >= uint32(m.Min) && p.Len <= uint32(m.Max)) == m.Invert {
				return refNoMatch
			}
		case *ir.TTLMatch:
			var ok bool
			switch m.Op {
			case ir.CmpEq:
				ok = p.TTL == uint32(m.Value)
			case ir.CmpNe:
				ok = p.TTL != uint32(m.Value)
			case ir.CmpLt:
				ok = p.TTL < uint32(m.Value)
			case ir.CmpGt:
				ok = p.TTL > uint32(m.Value)
			}
			if !ok {
				return refNoMatch
			}
		case *ir.SetMatch:
			if refSetMember(m.Name, m.Dirs, m.ReturnNomatch, p) == m.Invert {
				return refNoMatch
			}
		case *ir.MACMatch:
			if p.MAC == MACNone { // not an Ethernet device: never
				return refNoMatch
			}
			var v uint64
			for _, b := range m.Addr {
				v = v<<8 | uint64(b)
			}
			if (p.MAC == v) == m.Invert {
				return refNoMatch
			}
		case *ir.ConntrackMatch:
			if !refConntrack(m, p, fam) {
				return refNoMatch
			}
		case *ir.AddrTypeMatch, *ir.PktTypeMatch:
			if !refTypeMatch(fam, m, p) {
				return refNoMatch
			}
		case *ir.DSCPMatch, *ir.TOSMatch, *ir.ECNMatch, *ir.TCPMSSMatch:
			if res := refHeaderMatch(m, p); res != refMatch {
				return res
			}
		}
	}
	return refMatch
}

// refTypeMatch evaluates an addrtype or pkttype match.
func refTypeMatch(fam ir.Family, m ir.Match, p *Packet) bool {
	if pm, ok := m.(*ir.PktTypeMatch); ok {
		return (p.PktType == uint32(pm.Type)) != pm.Invert
	}
	return refAddrType(fam, m.(*ir.AddrTypeMatch), p.AddrType)
}

// refAddrType is addrtype_mt_v1 on the facts packed in a packet's
// FieldAddrType value, written out from xt_addrtype.c: the source's five
// bits, then the destination's; IPv4 a route type (bits 0-2) and whether
// the route goes through the input (bit 3) and output (bit 4) device;
// IPv6 the address class (bits 0-1: 1 unicast, 2 multicast, 3 ::), a
// local route (bit 2), an anycast route (bit 3).
func refAddrType(fam ir.Family, m *ir.AddrTypeMatch, v uint32) bool {
	matchType := func(facts uint32, mask uint16) bool {
		if fam == ir.IPv4 {
			typ := facts & 7
			if m.LimitIn && facts&8 == 0 || m.LimitOut && facts&16 == 0 {
				typ = 1 // another device's route: RTN_UNICAST
			}
			return mask&(1<<typ) != 0
		}
		class := facts & 3
		if mask&ir.AddrTypeMulticast != 0 && class != 2 {
			return false
		}
		if mask&ir.AddrTypeUnicast != 0 && class != 1 {
			return false
		}
		if mask&ir.AddrTypeUnspec != 0 && class != 3 {
			return false
		}
		if mask&(ir.AddrTypeLocal|ir.AddrTypeAnycast|ir.AddrTypeUnreachable) == 0 {
			return true
		}
		return mask&ir.AddrTypeLocal != 0 && facts&4 != 0 || mask&ir.AddrTypeAnycast != 0 && facts&8 != 0
	}
	ret := true
	if m.Src != 0 {
		ret = matchType(v&31, m.Src) != m.InvSrc
	}
	if ret && m.Dst != 0 {
		ret = matchType(v>>5&31, m.Dst) != m.InvDst
	}
	return ret
}

// genTypeMatches returns, sometimes, an addrtype and a pkttype match for a
// rule of chain (the device limits only in FORWARD, where the kernel
// allows both; none in IPv6, where xfw refuses them, nor UNREACHABLE).
func genTypeMatches(rng *rand.Rand, fam ir.Family, chain string) []ir.Match {
	var out []ir.Match
	if rng.Intn(6) == 0 {
		types := []uint16{ir.AddrTypeUnicast, ir.AddrTypeLocal, ir.AddrTypeBroadcast, ir.AddrTypeMulticast,
			ir.AddrTypeAnycast, ir.AddrTypeUnspec, ir.AddrTypeBlackhole}
		if fam == ir.IPv6 {
			types = []uint16{ir.AddrTypeUnicast, ir.AddrTypeLocal, ir.AddrTypeMulticast, ir.AddrTypeAnycast, ir.AddrTypeUnspec}
		}
		mask := func() uint16 {
			v := types[rng.Intn(len(types))]
			if rng.Intn(3) == 0 {
				v |= types[rng.Intn(len(types))]
			}
			return v
		}
		m := &ir.AddrTypeMatch{}
		if rng.Intn(3) != 0 {
			m.Src, m.InvSrc = mask(), rng.Intn(3) == 0
		}
		if m.Src == 0 || rng.Intn(2) == 0 {
			m.Dst, m.InvDst = mask(), rng.Intn(3) == 0
		}
		if fam == ir.IPv4 && chain == "FORWARD" && rng.Intn(3) == 0 {
			m.LimitIn = rng.Intn(2) == 0
			m.LimitOut = !m.LimitIn
		}
		out = append(out, m)
	}
	if rng.Intn(8) == 0 {
		out = append(out, &ir.PktTypeMatch{Invert: rng.Intn(3) == 0, Type: uint8(rng.Intn(3))})
	}
	return out
}

// refConntrack is conntrack_mt (xt_conntrack.c, revision 3) on the facts
// packed in a packet's FieldCt value (bpf/common.h: bits 0-2 the state,
// INVALID 0, NEW 1, ESTABLISHED 2, RELATED 3, UNTRACKED 4; bit 3 the reply
// direction; bits 4-7 the status; bits 8-15 the protocol).
func refConntrack(m *ir.ConntrackMatch, p *Packet, fam ir.Family) bool {
	ct := p.Ct
	state := ct & 7
	reply := ct&8 != 0
	status := uint16(ct>>4) & 0xf
	proto := uint8(ct >> 8)
	var statebit uint16
	tracked := false // nf_ct_get returned a connection
	switch state {
	case 0:
		statebit = ir.CtStateInvalid
	case 1:
		statebit, tracked = ir.CtStateNew, true
	case 2:
		statebit, tracked = ir.CtStateEstablished, true
	case 3:
		statebit, tracked = ir.CtStateRelated, true
	case 4:
		statebit = ir.CtStateUntracked
	default:
		panic(fmt.Sprintf("packet with conntrack state %d", state))
	}
	if m.States.Set {
		in := m.States.Bits&statebit != 0
		if m.States.Invert {
			in = !in
		}
		if !in {
			return false
		}
	}
	if !tracked {
		return m.States.Set
	}
	if m.Dir == ir.CtDirOriginal && reply {
		return false
	}
	if m.Dir == ir.CtDirReply && !reply {
		return false
	}
	// The tuple: no NAT, so the reply tuple is the original inverted.
	osrc, odst := addrOf(p.CtOrigSrc, fam), addrOf(p.CtOrigDst, fam)
	for _, c := range []struct {
		a    ir.AddrMatch
		addr netip.Addr
	}{{m.OrigSrc, osrc}, {m.OrigDst, odst}, {m.ReplSrc, odst}, {m.ReplDst, osrc}} {
		if c.a.Set && maskMatch(c.addr, c.a.Addr, c.a.Mask) == c.a.Invert {
			return false
		}
	}
	if m.Proto.Set {
		same := proto == m.Proto.Num
		if m.Proto.Invert {
			same = !same
		}
		if !same {
			return false
		}
	}
	for _, c := range []struct {
		pm   ir.PortMatch
		port uint32
	}{{m.OrigSrcPort, p.CtOrigSport}, {m.OrigDstPort, p.CtOrigDport}, {m.ReplSrcPort, p.CtReplSport}, {m.ReplDstPort, p.CtReplDport}} {
		in := c.port >= uint32(c.pm.Range.First) && c.port <= uint32(c.pm.Range.Last)
		if c.pm.Set && in == c.pm.Invert {
			return false
		}
	}
	if m.Status.Set {
		some := status&m.Status.Bits != 0
		if m.Status.Invert {
			some = !some
		}
		if !some {
			return false
		}
	}
	return true
}

// genConntrack builds a random -m state or -m conntrack match with the
// options the data plane supports, "!" forms, --ctstatus NONE and
// never-matching SNAT/DNAT included.
func genConntrack(rng *rand.Rand, fam ir.Family) *ir.ConntrackMatch {
	states := func(names []uint16) uint16 {
		var bits uint16
		for bits == 0 {
			for _, b := range names {
				if rng.Intn(3) == 0 {
					bits |= b
				}
			}
		}
		return bits
	}
	plain := []uint16{ir.CtStateInvalid, ir.CtStateNew, ir.CtStateEstablished, ir.CtStateRelated, ir.CtStateUntracked}
	if rng.Intn(4) == 0 {
		return &ir.ConntrackMatch{StateAlias: true, States: ir.CtBitsMatch{Set: true, Invert: rng.Intn(3) == 0, Bits: states(plain)}}
	}
	m := &ir.ConntrackMatch{}
	if rng.Intn(3) != 0 {
		names := plain
		if rng.Intn(6) == 0 {
			names = append(names[:len(names):len(names)], ir.CtStateSNAT, ir.CtStateDNAT)
		}
		m.States = ir.CtBitsMatch{Set: true, Invert: rng.Intn(3) == 0, Bits: states(names)}
	}
	if rng.Intn(3) == 0 {
		m.Proto = ir.CtProtoMatch{Set: true, Invert: rng.Intn(3) == 0, Num: []uint8{6, 17, 1, 58}[rng.Intn(4)]}
	}
	if rng.Intn(3) == 0 {
		m.Status = ir.CtBitsMatch{Set: true, Invert: rng.Intn(2) == 0, Bits: uint16(rng.Intn(16))} // 0 is NONE
	}
	if rng.Intn(4) == 0 {
		m.Dir = ir.CtDirection(1 + rng.Intn(2))
	}
	if rng.Intn(3) == 0 {
		genCtTuple(rng, fam, m)
	}
	if !m.States.Set && !m.Proto.Set && !m.Status.Set && m.Dir == ir.CtDirAny && !ctHasTuple(m) {
		m.States = ir.CtBitsMatch{Set: true, Bits: states(plain)}
	}
	return m
}

// genCtTuple adds random tuple options to m: addresses with prefix or
// odd masks (kept unmasked, as iptables keeps them), port ranges, "!".
func genCtTuple(rng *rand.Rand, fam ir.Family, m *ir.ConntrackMatch) {
	addr := func() ir.AddrMatch {
		a := addrOf(ctTupleAddr(rng), fam)
		bits := fam.AddrBits()
		var mask netip.Addr
		switch rng.Intn(4) {
		case 0:
			mask = addrOf(U128{}, fam) // /0
		case 1: // a non-contiguous mask, 255.0.255.0 style
			v := U128{Lo: 0xff00ff00}
			if fam == ir.IPv6 {
				v = U128{Hi: 0xffff0000ffff0000}
			}
			mask = addrOf(v, fam)
		default:
			mask = addrOf(prefixMask(rng.Intn(bits+1), bits), fam)
		}
		return ir.AddrMatch{Set: true, Invert: rng.Intn(3) == 0, Addr: a, Mask: mask}
	}
	port := func() ir.PortMatch {
		lo := uint16(rng.Intn(3) * 1000)
		return ir.PortMatch{Set: true, Invert: rng.Intn(3) == 0, Range: ir.PortRange{First: lo, Last: lo + uint16(rng.Intn(1500))}}
	}
	for n := 0; n == 0 || rng.Intn(2) == 0; n++ {
		switch rng.Intn(8) {
		case 0:
			m.OrigSrc = addr()
		case 1:
			m.OrigDst = addr()
		case 2:
			m.ReplSrc = addr()
		case 3:
			m.ReplDst = addr()
		case 4:
			m.OrigSrcPort = port()
		case 5:
			m.OrigDstPort = port()
		case 6:
			m.ReplSrcPort = port()
		default:
			m.ReplDstPort = port()
		}
	}
}

// ctTupleAddr is an address of a connection's tuple: few distinct values,
// so rules and packets meet.
func ctTupleAddr(rng *rand.Rand) U128 {
	return U128{Lo: 0x0a000000 | uint64(rng.Intn(4))<<8 | uint64(rng.Intn(4))}
}

// prefixMask returns the mask of a /n prefix of an address of bits bits.
func prefixMask(n, bits int) U128 {
	var v U128
	for i := 0; i < n; i++ {
		b := bits - 1 - i
		if b >= 64 {
			v.Hi |= 1 << uint(b-64)
		} else {
			v.Lo |= 1 << uint(b)
		}
	}
	return v
}

// refRun walks chain with netfilter's semantics (jump pushes a return
// point, goto does not, RETURN pops, end of a base chain = policy).
func refRun(rs *ir.Ruleset, chain string, p *Packet) refVerdict {
	return refRunWith(rs, chain, p, refRuleMatch)
}

// refRunWith is refRun with the rules matched by match.
func refRunWith(rs *ir.Ruleset, chain string, p *Packet, match func(ir.Family, *ir.Rule, *Packet) refResult) refVerdict {
	type frame struct {
		c *ir.Chain
		i int
	}
	var v refVerdict
	var stack []frame
	cur := frame{rs.Chain(chain), 0}
	for steps := 0; steps < 1_000_000; steps++ {
		if cur.i >= len(cur.c.Rules) {
			if len(stack) == 0 {
				return v
			}
			cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
			continue
		}
		r := cur.c.Rules[cur.i]
		cur.i++
		switch match(rs.Family, r, p) {
		case refNoMatch:
			continue
		case refHotdrop:
			v.hotdrop = true
			v.hotRule = r
			return v
		}
		v.counted = append(v.counted, r)
		switch r.Target.Kind {
		case ir.TargetAccept, ir.TargetDrop, ir.TargetReject:
			v.rule = r
			return v
		case ir.TargetReturn:
			if len(stack) == 0 {
				return v
			}
			cur, stack = stack[len(stack)-1], stack[:len(stack)-1]
		case ir.TargetJump:
			stack = append(stack, cur)
			cur = frame{rs.Chain(r.Target.Chain), 0}
		case ir.TargetGoto:
			cur = frame{rs.Chain(r.Target.Chain), 0}
		}
	}
	panic("reference interpreter did not terminate")
}

// genRuleset builds a random ruleset over small value spaces so that rules
// overlap often.
func genRuleset(rng *rand.Rand, fam ir.Family, nrules, nuser int) *ir.Ruleset {
	rs := ir.NewRuleset(fam)
	// The header matches draw from their own stream, so the rest of the
	// ruleset is what it was before they existed.
	hdrRng := rand.New(rand.NewSource(int64(nrules)<<8 | int64(nuser)<<1 | int64(fam)))
	for i := 0; i < nuser; i++ {
		rs.Chains = append(rs.Chains, &ir.Chain{Name: string(rune('A' + i))})
	}
	for _, c := range rs.Chains {
		if c.Builtin && rng.Intn(2) == 0 {
			c.Policy = ir.VerdictDrop
		}
	}
	addr := func() netip.Addr {
		if fam == ir.IPv4 {
			return netip.AddrFrom4([4]byte{10, 0, byte(rng.Intn(4)), byte(rng.Intn(8) * 32)})
		}
		var b [16]byte
		b[0], b[1], b[14], b[15] = 0xfd, 0, byte(rng.Intn(4)), byte(rng.Intn(8)*32)
		return netip.AddrFrom16(b)
	}
	mask := func() netip.Addr {
		bitsN := fam.AddrBits()
		var plen int
		switch rng.Intn(4) {
		case 0:
			plen = bitsN
		case 1:
			plen = bitsN - 5
		case 2:
			plen = bitsN - 10
		default:
			plen = bitsN - 16
		}
		b := make([]byte, bitsN/8)
		for i := 0; i < plen; i++ {
			b[i/8] |= 0x80 >> uint(i%8)
		}
		if rng.Intn(8) == 0 { // a non-contiguous mask
			b[len(b)-2] = 0
			b[len(b)-1] = 0xe0
		}
		a, _ := netip.AddrFromSlice(b)
		return a
	}
	masked := func(a, m netip.Addr) netip.Addr {
		x, y := a.AsSlice(), m.AsSlice()
		for i := range x {
			x[i] &= y[i]
		}
		r, _ := netip.AddrFromSlice(x)
		return r
	}
	port := func() ir.PortMatch {
		f := uint16(rng.Intn(8) * 10)
		l := f
		if rng.Intn(2) == 0 {
			l = f + uint16(rng.Intn(30))
		}
		return ir.PortMatch{Set: true, Invert: rng.Intn(4) == 0, Range: ir.PortRange{First: f, Last: l}}
	}
	ifm := func() ir.IfaceMatch {
		names := []string{"eth0", "eth+", "lo", "wlan0", "+", "nothere"}
		return ir.IfaceMatch{Set: true, Invert: rng.Intn(3) == 0, Name: names[rng.Intn(len(names))]}
	}
	for n := 0; n < nrules; n++ {
		c := rs.Chains[rng.Intn(len(rs.Chains))]
		r := &ir.Rule{}
		if rng.Intn(2) == 0 {
			m := mask()
			r.Src = ir.AddrMatch{Set: true, Invert: rng.Intn(4) == 0, Addr: masked(addr(), m), Mask: m}
		}
		if rng.Intn(3) == 0 {
			m := mask()
			r.Dst = ir.AddrMatch{Set: true, Invert: rng.Intn(4) == 0, Addr: masked(addr(), m), Mask: m}
		}
		if rng.Intn(4) == 0 && c.Name != "OUTPUT" {
			r.InIface = ifm()
		}
		if rng.Intn(4) == 0 && c.Name != "INPUT" {
			r.OutIface = ifm()
		}
		if fam == ir.IPv4 && rng.Intn(8) == 0 {
			r.Fragment = ir.FlagMatch{Set: true, Invert: rng.Intn(2) == 0}
		}
		switch rng.Intn(6) {
		case 0:
			r.Proto = ir.ProtoMatch{Set: true, Num: 6}
			tm := &ir.TCPMatch{}
			if rng.Intn(2) == 0 {
				tm.DstPort = port()
			}
			if rng.Intn(3) == 0 {
				tm.SrcPort = port()
			}
			if rng.Intn(3) == 0 {
				tm.Flags = ir.TCPFlagsMatch{Set: true, Invert: rng.Intn(3) == 0, Mask: 0x17, Comp: 0x02}
			}
			r.Matches = append(r.Matches, tm)
		case 1:
			r.Proto = ir.ProtoMatch{Set: true, Num: 17}
			r.Matches = append(r.Matches, &ir.UDPMatch{DstPort: port()})
		case 2:
			r.Proto = ir.ProtoMatch{Set: true, Num: []uint8{6, 17}[rng.Intn(2)]}
			mp := &ir.MultiportMatch{Dir: ir.MultiportDir(1 + rng.Intn(3)), Invert: rng.Intn(3) == 0}
			for k := 0; k < 1+rng.Intn(3); k++ {
				pm := port()
				mp.Ports = append(mp.Ports, pm.Range)
			}
			r.Matches = append(r.Matches, mp)
		case 3:
			num := uint8(1)
			if fam == ir.IPv6 {
				num = 58
			}
			r.Proto = ir.ProtoMatch{Set: true, Num: num}
			im := &ir.ICMPMatch{V6: fam == ir.IPv6, Invert: rng.Intn(4) == 0, Type: uint8(rng.Intn(4)), CodeMin: 0, CodeMax: 255}
			if rng.Intn(2) == 0 {
				im.CodeMin, im.CodeMax = 1, 1
			}
			r.Matches = append(r.Matches, im)
		case 4:
			r.Proto = ir.ProtoMatch{Set: true, Invert: rng.Intn(2) == 0, Num: 6}
		case 5:
			if rng.Intn(2) == 0 {
				r.Proto = ir.ProtoMatch{Set: true, Num: 0} // -p all
			}
		}
		if rng.Intn(6) == 0 {
			r.Matches = append(r.Matches, &ir.LengthMatch{Invert: rng.Intn(3) == 0, Min: 40, Max: uint16(40 + rng.Intn(100))})
		}
		if rng.Intn(6) == 0 {
			r.Matches = append(r.Matches, &ir.TTLMatch{HL: fam == ir.IPv6, Op: ir.CmpOp(rng.Intn(4)), Value: uint8(rng.Intn(4) * 32)})
		}
		if rng.Intn(8) == 0 {
			from := addr()
			r.Matches = append(r.Matches, &ir.IPRangeMatch{Src: ir.AddrRange{Set: true, Invert: rng.Intn(3) == 0, From: from, To: from.Next().Next().Next()}})
		}
		if rng.Intn(8) == 0 {
			// 2 names × 2 direction lists × --return-nomatch: at most
			// MaxSetConds distinct conditions.
			dirs := ir.SetDirs{Dim: 1, Src: 1}
			if rng.Intn(2) == 0 {
				dirs = ir.SetDirs{Dim: 2, Src: 2}
			}
			r.Matches = append(r.Matches, &ir.SetMatch{Invert: rng.Intn(3) == 0, Name: []string{"a", "b"}[rng.Intn(2)], Dirs: dirs, ReturnNomatch: rng.Intn(4) == 0})
		}
		if rng.Intn(6) == 0 {
			r.Matches = append(r.Matches, genConntrack(rng, fam))
			if rng.Intn(4) == 0 { // two conntrack matches: both must hold
				m2 := genConntrack(rng, fam)
				if ctHasTuple(m2) && ctHasTuple(r.Matches[len(r.Matches)-1].(*ir.ConntrackMatch)) {
					// One match per rule may test the tuple.
					m2 = &ir.ConntrackMatch{States: m2.States, Proto: m2.Proto, Status: m2.Status, Dir: m2.Dir}
					if !m2.States.Set {
						m2.States = ir.CtBitsMatch{Set: true, Bits: ir.CtStateEstablished}
					}
				}
				r.Matches = append(r.Matches, m2)
			}
		}
		if rng.Intn(10) == 0 && c.Name != "OUTPUT" && nuser == 0 {
			r.Matches = append(r.Matches, &ir.MACMatch{Invert: rng.Intn(2) == 0, Addr: [6]byte{2, 0, 0, 0, 0, byte(rng.Intn(3))}})
		}
		r.Matches = append(r.Matches, genTypeMatches(rng, fam, c.Name)...)
		r.Matches = append(r.Matches, genHeaderMatches(hdrRng, r)...)
		// Targets: jumps only to chains later in the list, so no loops.
		idx := 0
		for i, cc := range rs.Chains {
			if cc == c {
				idx = i
			}
		}
		switch k := rng.Intn(10); {
		case k < 3:
			r.Target.Kind = ir.TargetAccept
		case k < 5:
			r.Target.Kind = ir.TargetDrop
		case k < 6:
			r.Target = ir.Target{Kind: ir.TargetReject, RejectWith: "icmp-port-unreachable"}
		case k < 7:
			r.Target.Kind = ir.TargetReturn
		case k < 8:
			r.Target = ir.Target{Kind: ir.TargetLog, Log: &ir.LogOptions{Prefix: "x"}}
		default:
			var later []*ir.Chain
			for _, cc := range rs.Chains[idx+1:] {
				if !cc.Builtin {
					later = append(later, cc)
				}
			}
			if len(later) == 0 {
				r.Target.Kind = ir.TargetNone
				break
			}
			kind := ir.TargetJump
			if rng.Intn(3) == 0 {
				kind = ir.TargetGoto
			}
			r.Target = ir.Target{Kind: kind, Chain: later[rng.Intn(len(later))].Name}
		}
		c.Rules = append(c.Rules, r)
	}
	return rs
}

// genPacket builds packets aimed at the same small value spaces, sentinels
// included.
func genPacket(rng *rand.Rand, fam ir.Family) *Packet {
	p := &Packet{}
	a := func() U128 {
		if fam == ir.IPv4 {
			return U64(10<<24 | uint64(rng.Intn(4))<<8 | uint64(rng.Intn(256)))
		}
		return U128{Hi: 0xfd00 << 48, Lo: uint64(rng.Intn(4))<<8 | uint64(rng.Intn(256))}
	}
	p.Src, p.Dst = a(), a()
	if rng.Intn(10) == 0 {
		p.Src = U64(uint64(rng.Uint32()))
	}
	protos := []uint32{6, 17, 1, 58, 47, 0}
	p.Proto = protos[rng.Intn(len(protos))]
	p.Sport, p.Dport, p.TCPFlags, p.ICMP = ValNone, ValNone, FlagsNone, ValNone
	switch p.Proto {
	case 6, 17:
		p.Sport, p.Dport = uint32(rng.Intn(100)), uint32(rng.Intn(100))
		if p.Proto == 6 {
			p.TCPFlags = uint32(rng.Intn(256))
		}
	case 1, 58:
		p.ICMP = uint32(rng.Intn(4))<<8 | uint32(rng.Intn(3))
	}
	switch rng.Intn(12) {
	case 3:
		if fam == ir.IPv6 { // a later fragment the kernel cannot place
			p.Proto = ProtoNoMatch
			p.Sport, p.Dport, p.TCPFlags, p.ICMP = ValNone, ValNone, FlagsNone, ValNone
		}
	case 0: // later fragment
		if fam == ir.IPv4 {
			p.Frag = 1
		}
		p.Sport, p.Dport, p.TCPFlags, p.ICMP = ValNone, ValNone, FlagsNone, ValNone
	case 4: // TCP or UDP header cut short after its ports (classify.h's view)
		if p.Proto == 6 || p.Proto == 17 {
			p.Sport, p.Dport = p.Sport+ValShort, p.Dport+ValShort
			if p.Proto == 6 {
				p.TCPFlags = FlagsTrunc
			}
		}
	case 1: // truncated transport header
		if p.Proto == 6 || p.Proto == 17 || p.Proto == 1 || p.Proto == 58 {
			if p.Sport != ValNone {
				p.Sport, p.Dport = ValTrunc, ValTrunc
			}
			if p.Proto == 6 {
				p.TCPFlags = FlagsTrunc
			}
			if p.ICMP != ValNone {
				p.ICMP = ValTrunc
			}
		}
	case 2:
		if fam == ir.IPv6 {
			p.Proto = ProtoErr
			p.Sport, p.Dport, p.TCPFlags, p.ICMP = ValTrunc, ValTrunc, FlagsTrunc, ValTrunc
		}
	}
	p.Len = uint32(20 + rng.Intn(200))
	p.TTL = uint32(rng.Intn(4) * 32)
	if rng.Intn(3) == 0 {
		p.TTL++
	}
	p.IIF = uint32(rng.Intn(6))
	p.OIF = uint32(rng.Intn(6))
	p.MAC = 2<<40 | uint64(rng.Intn(3))
	if rng.Intn(20) == 0 {
		p.MAC = MACNone // received on loopback
	}
	p.AddrType = uint32(rng.Intn(1 << 10))
	p.PktType = uint32(rng.Intn(3))
	genHeaderFacts(rng, p)
	p.Ct = genCt(rng, p.Proto)
	if p.Ct&7 != 0 && p.Ct&7 != 4 { // a connection: its original tuple
		p.CtOrigSrc, p.CtOrigDst = ctTupleAddr(rng), ctTupleAddr(rng)
		p.CtOrigSport, p.CtOrigDport = uint32(rng.Intn(4000)), uint32(rng.Intn(4000))
		if rng.Intn(4) == 0 {
			p.CtOrigSport, p.CtOrigDport = p.Sport&0xffff, p.Dport&0xffff
		}
		p.CtReplSport, p.CtReplDport = p.CtOrigDport, p.CtOrigSport
		if rng.Intn(4) == 0 { // ICMP: the identifier, the reply's type and code
			p.CtReplSport, p.CtReplDport = p.CtOrigSport, uint32(rng.Intn(4000))
		}
	}
	return p
}

// genCt builds a packet's FieldCt value (bpf/common.h's layout, written
// out here rather than with CtValue): INVALID (0) or UNTRACKED (4), which
// carry nothing else, or NEW, ESTABLISHED or RELATED (1-3) in a random
// direction (bit 3) with random status bits (4-7) and a protocol (bits
// 8-15) mostly the packet's own.
func genCt(rng *rand.Rand, proto uint32) uint32 {
	switch rng.Intn(8) {
	case 0:
		return 0 // INVALID
	case 1:
		return 4 // UNTRACKED
	}
	ct := uint32(1 + rng.Intn(3))
	if rng.Intn(2) == 0 {
		ct |= 1 << 3 // reply direction
	}
	ct |= uint32(rng.Intn(16)) << 4
	if proto > 255 || rng.Intn(4) == 0 {
		proto = []uint32{6, 17, 1, 58, 47}[rng.Intn(5)]
	}
	return ct | proto<<8
}

// refSetMember is the reference's stand-in for an ipset lookup: whether
// the packet matches the set condition (name, dirs, --return-nomatch),
// before "!", derived from its addresses so that packets differ.
func refSetMember(name string, dirs ir.SetDirs, returnNomatch bool, p *Packet) bool {
	v := p.Src.Lo
	if dirs.Src&1 == 0 {
		v = p.Dst.Lo
	}
	v += uint64(len(name)+int(name[0])) + uint64(dirs.Dim)
	if returnNomatch {
		v += 5
	}
	return v%3 == 0
}

func TestCompilerMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 1000; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, 1+rng.Intn(60), rng.Intn(4))
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		checkPackets(t, rng, iter, rs, g, 300)
	}
}

func checkSame(t *testing.T, iter int, chain string, rs *ir.Ruleset, g *Generation, p *Packet, want refVerdict, got Result) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("ruleset %d chain %s packet %+v: "+format, append([]any{iter, chain, *p}, args...)...)
	}
	hot := got.Hotdrop || got.Entry >= 0 && g.Entries[got.Entry].Rule == NoRule && g.Entries[got.Entry].Action == ActDrop
	if want.hotdrop != hot {
		fail("hotdrop: reference %v (decided %s), compiled %v (entry %d)", want.hotdrop, describe(rs, want.hotRule), hot, got.Entry)
	}
	ruleOf := func(e int) *ir.Rule {
		id := g.Entries[e].Rule
		if id == NoRule {
			return nil
		}
		ref := g.Rules[id-NumChains]
		return rs.Chain(ref.Chain).Rules[ref.Index]
	}
	var counted []*ir.Rule
	for _, e := range got.Path {
		if r := ruleOf(e); r != nil {
			counted = append(counted, r)
		}
	}
	var decided *ir.Rule
	if got.Entry >= 0 && !hot {
		decided = ruleOf(got.Entry)
		counted = append(counted, decided)
	}
	if decided != want.rule {
		fail("decided by %s, reference %s", describe(rs, decided), describe(rs, want.rule))
	}
	if !want.hotdrop {
		if len(counted) != len(want.counted) {
			fail("counted %d rules, reference %d", len(counted), len(want.counted))
		}
		for i := range counted {
			if counted[i] != want.counted[i] {
				fail("counted rule %d differs", i)
			}
		}
	}
}

func describe(rs *ir.Ruleset, r *ir.Rule) string {
	if r == nil {
		return "policy"
	}
	for _, c := range rs.Chains {
		for i, x := range c.Rules {
			if x == r {
				s := fmt.Sprintf("%s#%d %+v", c.Name, i+1, *r)
				for _, m := range r.Matches {
					s += fmt.Sprintf(" %T%+v", m, m)
				}
				return s
			}
		}
	}
	return "?"
}

// TestAppendRuleMatchesReference appends random rules to base chains of
// random rulesets with AppendRule, several in a row, and requires every
// resulting generation to judge random packets as the reference interpreter
// judges the ruleset with the rules appended (the same decisions and
// counted rules). Appends AppendRule refuses are compiled in full, as the
// control plane does; most must be done in place.
func TestAppendRuleMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	tally := &changeTally{}
	for iter := 0; iter < 300; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, rng.Intn(40), rng.Intn(3))
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		for step := 0; step < 1+rng.Intn(AppendSlack+8); step++ {
			// A one-rule ruleset gives a random rule; keep those of base
			// chains.
			one := genRuleset(rng, fam, 1, 0)
			var r *ir.Rule
			hook := -1
			for h, name := range ir.BuiltinChains {
				if c := one.Chain(name); c != nil && len(c.Rules) == 1 {
					r, hook = c.Rules[0], h
				}
			}
			if r == nil {
				continue
			}
			chain := rs.Chain(ir.BuiltinChains[hook])
			chain.Rules = append(chain.Rules, r)
			counter := uint32(NumChains)
			for _, c := range rs.Chains {
				counter += uint32(len(c.Rules))
				if c == chain {
					break
				}
			}
			counter--
			ng, err := AppendRule(g, r, hook, counter, RuleRef{Chain: chain.Name, Index: len(chain.Rules) - 1}, testIfaces)
			g = tally.outcome(t, rs, ng, err, iter, step)
			checkPackets(t, rng, iter*1000+step, rs, g, 100)
		}
	}
	tally.check(t, 1000)
}

// TestDeleteRuleMatchesReference deletes random rules of base chains from
// random rulesets with DeleteRule, several in a row (interleaved with
// AppendRule and InsertRule at the chains' heads), and requires every resulting generation to judge random
// packets as the reference interpreter judges the ruleset without them.
// Deletions DeleteRule refuses are compiled in full; most must be done in
// place.
func TestDeleteRuleMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	tally := &changeTally{}
	for iter := 0; iter < 200; iter++ {
		fam := ir.IPv4
		if iter%2 == 1 {
			fam = ir.IPv6
		}
		rs := genRuleset(rng, fam, 10+rng.Intn(40), rng.Intn(3))
		g, err := Compile(rs, Options{Interfaces: testIfaces})
		if err != nil {
			t.Fatalf("ruleset %d: %v", iter, err)
		}
		for step := 0; step < 1+rng.Intn(16); step++ {
			ng, ok, err := randomChange(rng, rs, g, 4)
			if !ok {
				continue
			}
			g = tally.outcome(t, rs, ng, err, iter, step)
			// RuleRefs follow the ruleset (AppendRule and DeleteRule keep
			// them in step; Compile makes them afresh).
			checkPackets(t, rng, iter*1000+step, rs, g, 100)
		}
	}
	tally.check(t, 500)
}

// randomChange changes rs by one random rule of a base chain, and g by
// the same change in place: with odds 1 - 1/deleteOdds it deletes one of
// the chain's rules (DeleteRule), else it adds a random rule at the
// chain's head or end (InsertRule, AppendRule). ok is false when no rule
// was changed. g must not be used afterwards.
func randomChange(rng *rand.Rand, rs *ir.Ruleset, g *Generation, deleteOdds int) (ng *Generation, ok bool, err error) {
	// A change that makes the nat table walked, or leaves it out, is
	// compiled in full, as the control plane does (NatWalkChanges).
	walked := natWalked(rs)
	defer func() {
		if ok && err == nil && natWalked(rs) != walked {
			ng, err = nil, fmt.Errorf("%w: the nat table's walk changes", ErrNotAppendable)
		}
	}()
	hook := rng.Intn(NumChains)
	chain := rs.Chain(ir.BuiltinChains[hook])
	if len(chain.Rules) > 0 && rng.Intn(deleteOdds) != 0 {
		k := rng.Intn(len(chain.Rules))
		r := chain.Rules[k]
		counter := counterIn(rs, chain, k)
		chain.Rules = append(chain.Rules[:k:k], chain.Rules[k+1:]...)
		ng, err = DeleteRule(g, r, hook, counter, testIfaces)
		return ng, true, err
	}
	// A one-rule ruleset gives a random rule valid in its chain.
	one := genRuleset(rng, rs.Family, 1, 0)
	var r *ir.Rule
	for h, name := range ir.BuiltinChains {
		if c := one.Chain(name); c != nil && len(c.Rules) == 1 {
			r, hook = c.Rules[0], h
		}
	}
	if r == nil {
		return nil, false, nil
	}
	chain = rs.Chain(ir.BuiltinChains[hook])
	if rng.Intn(2) == 0 {
		chain.Rules = append([]*ir.Rule{r}, chain.Rules...)
		ng, err = InsertRule(g, r, hook, counterIn(rs, chain, 0), RuleRef{Chain: chain.Name, Index: 0}, testIfaces)
	} else {
		chain.Rules = append(chain.Rules, r)
		k := len(chain.Rules) - 1
		ng, err = AppendRule(g, r, hook, counterIn(rs, chain, k), RuleRef{Chain: chain.Name, Index: k}, testIfaces)
	}
	return ng, true, err
}

// counterIn is the counter index of rule k of chain in rs.
func counterIn(rs *ir.Ruleset, chain *ir.Chain, k int) uint32 {
	n := uint32(NumChains)
	for _, c := range rs.Chains {
		if c == chain {
			break
		}
		n += uint32(len(c.Rules))
	}
	return n + uint32(k)
}

// changeTally counts the in-place changes of a test and why others were
// compiled in full.
type changeTally struct {
	inPlace, refused int
	reasons          map[string]int
}

// outcome returns the generation after a change: ng when it was made in
// place, else rs compiled in full (err being ErrNotAppendable); any other
// error fails the test.
func (c *changeTally) outcome(t *testing.T, rs *ir.Ruleset, ng *Generation, err error, iter, step int) *Generation {
	t.Helper()
	if errors.Is(err, ErrNotAppendable) {
		c.refused++
		if c.reasons == nil {
			c.reasons = map[string]int{}
		}
		c.reasons[err.Error()]++
		ng, err = Compile(rs, Options{Interfaces: testIfaces})
	} else if err == nil {
		c.inPlace++
	}
	if err != nil {
		t.Fatalf("ruleset %d step %d: %v", iter, step, err)
	}
	return ng
}

// check requires at least min changes in place, and at least a third.
func (c *changeTally) check(t *testing.T, min int) {
	t.Helper()
	t.Logf("%d changes in place, %d compiled in full: %v", c.inPlace, c.refused, c.reasons)
	if c.inPlace < min || 2*c.inPlace < c.refused {
		t.Errorf("only %d of %d changes were done in place", c.inPlace, c.inPlace+c.refused)
	}
}

// checkPackets judges n random packets in every base chain with g and
// with the reference interpreter on rs, and requires the same outcome.
func checkPackets(t *testing.T, rng *rand.Rand, id int, rs *ir.Ruleset, g *Generation, n int) {
	t.Helper()
	for k := 0; k < n; k++ {
		p := genPacket(rng, rs.Family)
		for ch, name := range ir.BuiltinChains {
			q := *p
			if ch == ChainInput {
				q.OIF = 0
			}
			if ch == ChainOutput {
				q.IIF = 0
			}
			q.Sets = g.SetBits(func(c SetCond) bool { return refSetMember(c.Name, c.Dirs, c.ReturnNomatch, &q) })
			checkSame(t, id, name, rs, g, &q, refRun(rs, name, &q), g.Classify(&q, ch))
		}
	}
}
