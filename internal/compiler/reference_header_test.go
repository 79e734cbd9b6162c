package compiler

import (
	"math/rand"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The reference interpreter's dscp, tos, ecn and tcpmss: the kernel's
// xt_dscp.c, xt_ecn.c and xt_tcpmss.c written out on the packet's facts.

// refHeaderMatch evaluates a dscp, tos, ecn or tcpmss match.
func refHeaderMatch(m ir.Match, p *Packet) refResult {
	ok := true
	switch m := m.(type) {
	case *ir.DSCPMatch:
		ok = (uint8(p.TOS)>>2 == m.Value) != m.Invert
	case *ir.TOSMatch:
		ok = (uint8(p.TOS)&m.Mask == m.Value) != m.Invert
	case *ir.ECNMatch:
		if m.Ops&ir.ECNMatchIP != 0 && (uint8(p.TOS)&3 == m.IPECT) == (m.Invert&ir.ECNMatchIP != 0) {
			return refNoMatch
		}
		if m.Ops&(ir.ECNMatchECE|ir.ECNMatchCWR) != 0 {
			if p.TCPFlags > 255 { // no TCP header to read
				return refNoMatch
			}
			if m.Ops&ir.ECNMatchECE != 0 && (p.TCPFlags&0x40 != 0) == (m.Invert&ir.ECNMatchECE != 0) {
				return refNoMatch
			}
			if m.Ops&ir.ECNMatchCWR != 0 && (p.TCPFlags&0x80 != 0) == (m.Invert&ir.ECNMatchCWR != 0) {
				return refNoMatch
			}
		}
	case *ir.TCPMSSMatch:
		switch p.TCPMSS {
		case ValTrunc:
			return refHotdrop
		case ValNone:
			ok = m.Invert
		default:
			ok = (p.TCPMSS >= uint32(m.Min) && p.TCPMSS <= uint32(m.Max)) != m.Invert
		}
	}
	if !ok {
		return refNoMatch
	}
	return refMatch
}

// genHeaderMatches returns, sometimes, dscp, tos, ecn and tcpmss matches
// for rule r (the TCP ones only when r says -p tcp).
func genHeaderMatches(rng *rand.Rand, r *ir.Rule) []ir.Match {
	var out []ir.Match
	tcp := r.Proto.Num == 6 && !r.Proto.Invert
	if rng.Intn(8) == 0 {
		out = append(out, &ir.DSCPMatch{Invert: rng.Intn(3) == 0, Value: uint8(rng.Intn(4) * 8)})
	}
	if rng.Intn(8) == 0 {
		masks := []uint8{0xff, 0x3f, 0x1c, 0x03}
		mask := masks[rng.Intn(len(masks))]
		out = append(out, &ir.TOSMatch{Invert: rng.Intn(3) == 0, Mask: mask, Value: uint8(rng.Intn(256)) & mask})
	}
	if rng.Intn(8) == 0 {
		m := &ir.ECNMatch{Invert: uint8(rng.Intn(256)), IPECT: uint8(rng.Intn(4))}
		for _, op := range []uint8{ir.ECNMatchIP, ir.ECNMatchECE, ir.ECNMatchCWR} {
			if rng.Intn(2) == 0 && (op == ir.ECNMatchIP || tcp) {
				m.Ops |= op
			}
		}
		if m.Ops == 0 {
			m.Ops = ir.ECNMatchIP
		}
		m.Invert &= m.Ops
		out = append(out, m)
	}
	if tcp && rng.Intn(5) == 0 {
		lo := uint16(rng.Intn(1500))
		out = append(out, &ir.TCPMSSMatch{Invert: rng.Intn(3) == 0, Min: lo, Max: lo + uint16(rng.Intn(600))})
	}
	return out
}

// genHeaderFacts draws the packet's TOS byte and MSS option as the data
// plane computes them.
func genHeaderFacts(rng *rand.Rand, p *Packet) {
	p.TOS = uint32(rng.Intn(256))
	p.TCPMSS = ValNone
	if p.Proto != 6 {
		return
	}
	switch k := rng.Intn(6); {
	case p.Sport == ValTrunc || k == 0:
		p.TCPMSS = ValTrunc
	case k < 4:
		p.TCPMSS = uint32(rng.Intn(2100))
	}
}
