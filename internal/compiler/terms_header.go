package compiler

import (
	"github.com/xfw-dev/xfw/internal/ir"
)

// Header bytes and TCP options: -m dscp, -m tos and -m ecn test the
// TOS / traffic class byte (FieldTOS) and, for ecn's TCP tests, the TCP
// flags byte (FieldTCPFlags); -m tcpmss tests FieldTCPMSS, which the data
// plane computes by scanning the TCP options as xt_tcpmss.c does
// (bpf/tcpopt.h), only for generations that use it.

const (
	// tosDomain is the values of the TOS byte.
	tosDomain = 256
	// dscpShift is XT_DSCP_SHIFT: the code point is the byte's six high
	// bits.
	dscpShift = 2
	// ecnIPMask is XT_ECN_IP_MASK: the byte's two low bits.
	ecnIPMask = 0x03
)

// tosValues returns the TOS byte values for which ok holds.
func tosValues(ok func(tos uint8) bool) *Set {
	var ivs []Interval
	for v := 0; v < tosDomain; v++ {
		if ok(uint8(v)) {
			ivs = append(ivs, Interval{U64(uint64(v)), U64(uint64(v))})
		}
	}
	return NewSet(ivs...)
}

// headerMatch adds a dscp, tos, ecn or tcpmss match.
func (b *termBuilder) headerMatch(m ir.Match) {
	switch m := m.(type) {
	case *ir.DSCPMatch: // dscp_mt
		b.and(FieldTOS, tosValues(func(t uint8) bool { return (t>>dscpShift == m.Value) != m.Invert }))
	case *ir.TOSMatch: // tos_mt
		b.and(FieldTOS, tosValues(func(t uint8) bool { return (t&m.Mask == m.Value) != m.Invert }))
	case *ir.ECNMatch:
		b.ecn(m)
	case *ir.TCPMSSMatch:
		b.tcpMSS(m)
	}
}

// ecn adds an ecn match (ecn_mt4, ecn_mt6): the IP test on the TOS byte,
// the TCP tests on the flags byte, a later fragment's too (FlagsLater:
// match_tcp reads it at par->thoff). A TCP header too short to read fails
// the TCP tests, inverted or not, without a hotdrop: the flags set leaves
// out FlagsTrunc and FlagsNone, and a later tcp match's hotdrop cannot be
// merged into the rule's entry (which would hotdrop such a packet here).
func (b *termBuilder) ecn(m *ir.ECNMatch) {
	if m.Ops&ir.ECNMatchIP != 0 {
		inv := m.Invert&ir.ECNMatchIP != 0
		b.and(FieldTOS, tosValues(func(t uint8) bool { return (t&ecnIPMask == m.IPECT) != inv }))
	}
	tcpOps := m.Ops & (ir.ECNMatchECE | ir.ECNMatchCWR)
	if tcpOps == 0 {
		return
	}
	var ivs []Interval
	for _, base := range []uint64{0, FlagsLater} {
		for f := 0; f < 256; f++ {
			if ecnTCPMatches(m, uint8(f)) {
				ivs = append(ivs, Interval{U64(base + uint64(f)), U64(base + uint64(f))})
			}
		}
	}
	b.and(FieldTCPFlags, NewSet(ivs...))
	b.dirty = true
}

// laterFlagsAll is every flags value of a TCP later fragment (FlagsLater
// + byte).
var laterFlagsAll = Range(U64(FlagsLater), U64(FlagsLater+255))

// ecnTCPMatches is match_tcp on the flags byte.
func ecnTCPMatches(m *ir.ECNMatch, flags uint8) bool {
	for _, t := range []struct {
		op, bit uint8
	}{{ir.ECNMatchECE, ir.TCPFlagECE}, {ir.ECNMatchCWR, ir.TCPFlagCWR}} {
		if m.Ops&t.op != 0 && (flags&t.bit != 0) == (m.Invert&t.op != 0) {
			return false
		}
	}
	return true
}

// tcpMSS adds a tcpmss match (tcpmss_mt): a cut-short header or option
// list hotdrops; a packet without the option matches only inverted. The
// hotdrop terms are entries of their own (FieldTCPMSS is no transport
// field a rule entry's flags could cover); under an earlier --ports
// match they are split as the rule's own term is.
func (b *termBuilder) tcpMSS(m *ir.TCPMSSMatch) {
	h := b.c
	h[FieldTCPMSS] = Intersect(h[FieldTCPMSS], Point(U64(ValTrunc)))
	if !h[FieldTCPMSS].Empty() {
		b.hotdropTerms(h)
	}
	in := Range(U64(uint64(m.Min)), U64(uint64(m.Max)))
	b.and(FieldTCPMSS, invertIf(in, m.Invert, U64(0), U64(ValNone)))
}
