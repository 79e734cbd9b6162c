package iptables

import (
	"fmt"
	"strings"

	"github.com/xfw-dev/xfw/internal/ir"
)

// The matches on the IP header's TOS / traffic class byte and on TCP
// options: -m dscp (libxt_dscp.c), -m tos (libxt_tos.c, revision 1, both
// families), -m ecn (libxt_ecn.c) and -m tcpmss (libxt_tcpmss.c).

// dscp guided option ids.
const (
	dscpOptValue = iota
	dscpOptClass
)

// dscpMax is XT_DSCP_MAX: the six bits of a code point.
const dscpMax = 0x3f

// dscpExt is the dscp match module.
var dscpExt = registerMatch(&extension{
	name: "dscp",
	x6: []x6opt{
		{name: "dscp", id: dscpOptValue, typ: xtUint8, flags: xtInvert, max: dscpMax, excl: 1 << dscpOptClass},
		{name: "dscp-class", id: dscpOptClass, typ: xtString, flags: xtInvert, excl: 1 << dscpOptValue},
	},
	newMatch: func(*parseCtx) matchState { return &dscpState{} },
})

// dscpClasses are dscp_helper.c's class names, in its order (the first
// a word starts with wins).
var dscpClasses = []struct {
	name  string
	value uint8
}{
	{"CS0", 0x00}, {"CS1", 0x08}, {"CS2", 0x10}, {"CS3", 0x18}, {"CS4", 0x20},
	{"CS5", 0x28}, {"CS6", 0x30}, {"CS7", 0x38}, {"BE", 0x00},
	{"AF11", 0x0a}, {"AF12", 0x0c}, {"AF13", 0x0e}, {"AF21", 0x12}, {"AF22", 0x14},
	{"AF23", 0x16}, {"AF31", 0x1a}, {"AF32", 0x1c}, {"AF33", 0x1e}, {"AF41", 0x22},
	{"AF42", 0x24}, {"AF43", 0x26}, {"EF", 0x2e},
}

// dscpClassValue is class_to_dscp: the first class whose name starts the
// word, case-insensitively (strncasecmp over the class name's length).
func dscpClassValue(word string) (uint8, *failure) {
	for _, c := range dscpClasses {
		if len(word) >= len(c.name) && strings.EqualFold(word[:len(c.name)], c.name) {
			return c.value, nil
		}
	}
	return 0, paramErr("Invalid DSCP value `%s'", word)
}

// dscpState is one dscp match being parsed.
type dscpState struct {
	m     ir.DSCPMatch
	flags x6flags
}

// parse implements matchState (dscp_parse).
func (s *dscpState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(dscpExt, o.id, invert)
	if f != nil {
		return f
	}
	if o.id == dscpOptValue {
		s.m.Value, f = x.parseUint8(dscpExt.name, arg)
	} else {
		s.m.Value, f = dscpClassValue(arg)
	}
	if f != nil {
		return f
	}
	s.m.Invert = s.m.Invert || invert
	s.flags.done(o.id)
	return nil
}

// final implements matchState (dscp_check, then the exclusions).
func (s *dscpState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("DSCP match: Parameter --dscp is required")
	}
	return s.flags.fcheck(dscpExt)
}

// build implements matchState.
func (s *dscpState) build() ir.Match { m := s.m; return &m }

// writeDSCP prints the match as dscp_save does.
func writeDSCP(b *strings.Builder, m *ir.DSCPMatch) {
	fmt.Fprintf(b, "%s --dscp 0x%02x", invSpace(m.Invert), m.Value)
}

// listDSCP prints the match as dscp_print does (-L).
func listDSCP(b *strings.Builder, m *ir.DSCPMatch) {
	fmt.Fprintf(b, " DSCP match %s0x%02x", invString(m.Invert), m.Value)
}

// invSpace is " !" for an inverted option of a save line.
func invSpace(inverted bool) string {
	if inverted {
		return " !"
	}
	return ""
}

// tosExt is the tos match module (revision 1).
var tosExt = registerMatch(&extension{
	name: "tos",
	x6: []x6opt{
		{name: "tos", id: 0, typ: xtString, flags: xtInvert | xtMand},
	},
	newMatch: func(*parseCtx) matchState { return &tosState{} },
})

// tosSymbols are tos_values.c's names of TOS values (IPTOS_*).
var tosSymbols = []struct {
	name  string
	value uint8
}{
	{"Minimize-Delay", 0x10}, {"Maximize-Throughput", 0x08}, {"Maximize-Reliability", 0x04},
	{"Minimize-Cost", 0x02}, {"Normal-Service", 0x00},
}

// tosSymbolMask is the mask a symbolic name gets in revision 1: the ECN
// bits are left out.
const tosSymbolMask = 0x3f

// parseTOSMask is xtopt_parse_tosmask for revision 1: VALUE[/MASK] when
// the argument starts with a number of 0-255 (the mask 0xff when none is
// given), else a symbolic name with the mask 0x3f.
func parseTOSMask(arg string) (value, mask uint8, f *failure) {
	v, end, ok := xtStrtouiPrefix(arg, 0, maxUint8)
	if !ok {
		for _, sym := range tosSymbols {
			if strings.EqualFold(arg, sym.name) {
				return sym.value, tosSymbolMask, nil
			}
		}
		return 0, 0, paramErr("Symbolic name \"%s\" is unknown", arg)
	}
	value, mask = uint8(v), maxUint8
	rest := arg[end:]
	if strings.HasPrefix(rest, "/") {
		mv, mend, ok := xtStrtouiPrefix(rest[1:], 0, maxUint8)
		if !ok {
			return 0, 0, paramErr("Illegal value: \"%s\"", arg)
		}
		mask, rest = uint8(mv), rest[1+mend:]
	}
	if rest != "" {
		return 0, 0, paramErr("Illegal value: \"%s\"", arg)
	}
	return value, mask, nil
}

// tosState is one tos match being parsed.
type tosState struct {
	m     ir.TOSMatch
	flags x6flags
}

// parse implements matchState (tos_mt_parse).
func (s *tosState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	if _, f := s.flags.begin(tosExt, o.id, invert); f != nil {
		return f
	}
	v, mask, f := parseTOSMask(arg)
	if f != nil {
		return f
	}
	s.m.Value, s.m.Mask = v, mask
	s.m.Invert = s.m.Invert || invert
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *tosState) final(*parseCtx) *failure { return s.flags.fcheck(tosExt) }

// build implements matchState.
func (s *tosState) build() ir.Match { m := s.m; return &m }

// writeTOS prints the match as tos_mt_save does.
func writeTOS(b *strings.Builder, m *ir.TOSMatch) {
	fmt.Fprintf(b, "%s --tos 0x%02x/0x%02x", invSpace(m.Invert), m.Value, m.Mask)
}

// listTOS prints the match as tos_mt_print does (-L): the symbolic name
// of a value with mask 0x3f unless numeric.
func listTOS(b *strings.Builder, m *ir.TOSMatch, numeric bool) {
	b.WriteString(" tos match" + invString(m.Invert))
	if !numeric && m.Mask == tosSymbolMask {
		for _, sym := range tosSymbols {
			if sym.value == m.Value {
				b.WriteString(" " + sym.name)
				return
			}
		}
	}
	fmt.Fprintf(b, "0x%02x/0x%02x", m.Value, m.Mask)
}

// ecn guided option ids.
const (
	ecnOptCWR = iota
	ecnOptECE
	ecnOptIPECT
)

// ecnExt is the ecn match module.
var ecnExt = registerMatch(&extension{
	name: "ecn",
	x6: []x6opt{
		{name: "ecn-tcp-cwr", id: ecnOptCWR, typ: xtNone, flags: xtInvert},
		{name: "ecn-tcp-ece", id: ecnOptECE, typ: xtNone, flags: xtInvert},
		// The ECN field's four code points.
		{name: "ecn-ip-ect", id: ecnOptIPECT, typ: xtUint8, flags: xtInvert, max: 3},
	},
	newMatch: func(*parseCtx) matchState { return &ecnState{} },
})

// ecnState is one ecn match being parsed.
type ecnState struct {
	m     ir.ECNMatch
	flags x6flags
}

// parse implements matchState (ecn_parse).
func (s *ecnState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(ecnExt, o.id, invert)
	if f != nil {
		return f
	}
	op := ir.ECNMatchCWR
	switch o.id {
	case ecnOptECE:
		op = ir.ECNMatchECE
	case ecnOptIPECT:
		op = ir.ECNMatchIP
		if s.m.IPECT, f = x.parseUint8(ecnExt.name, arg); f != nil {
			return f
		}
	}
	s.m.Ops |= op
	if invert {
		s.m.Invert |= op
	}
	s.flags.done(o.id)
	return nil
}

// final implements matchState (ecn_check).
func (s *ecnState) final(*parseCtx) *failure {
	if s.flags == 0 {
		return paramErr("ECN match: some option required")
	}
	return nil
}

// build implements matchState.
func (s *ecnState) build() ir.Match { m := s.m; return &m }

// ecnTests are the match's tests in the order iptables prints them.
var ecnTests = []struct {
	op         uint8
	save, list string
}{
	{ir.ECNMatchECE, "--ecn-tcp-ece", "ECE"},
	{ir.ECNMatchCWR, "--ecn-tcp-cwr", "CWR"},
	{ir.ECNMatchIP, "--ecn-ip-ect", "ECT="},
}

// writeECN prints the match as ecn_save does.
func writeECN(b *strings.Builder, m *ir.ECNMatch) {
	for _, t := range ecnTests {
		if m.Ops&t.op == 0 {
			continue
		}
		b.WriteString(invSpace(m.Invert&t.op != 0) + " " + t.save)
		if t.op == ir.ECNMatchIP {
			fmt.Fprintf(b, " %d", m.IPECT)
		}
	}
}

// listECN prints the match as ecn_print does (-L).
func listECN(b *strings.Builder, m *ir.ECNMatch) {
	b.WriteString(" ECN match")
	for _, t := range ecnTests {
		if m.Ops&t.op == 0 {
			continue
		}
		b.WriteString(" " + invString(m.Invert&t.op != 0) + t.list)
		if t.op == ir.ECNMatchIP {
			fmt.Fprintf(b, "%d", m.IPECT)
		}
	}
}

// ecnProtoOK is ecn_mt_check's protocol test: the TCP tests need -p tcp,
// not inverted.
func ecnProtoOK(r *ir.Rule, m *ir.ECNMatch) bool {
	return m.Ops&(ir.ECNMatchECE|ir.ECNMatchCWR) == 0 || needsProto(r, protoTCP)
}

// tcpmssExt is the tcpmss match module.
var tcpmssExt = registerMatch(&extension{
	name: "tcpmss",
	x6: []x6opt{
		{name: "mss", id: 0, typ: xtUint16RC, flags: xtInvert | xtMand, keepMin: true},
	},
	newMatch: func(*parseCtx) matchState { return &tcpmssState{} },
})

// tcpmssState is one tcpmss match being parsed.
type tcpmssState struct {
	m     ir.TCPMSSMatch
	flags x6flags
}

// parse implements matchState (tcpmss_parse).
func (s *tcpmssState) parse(c *parseCtx, o *optDef, arg string, invert bool) *failure {
	x, f := s.flags.begin(tcpmssExt, o.id, invert)
	if f != nil {
		return f
	}
	lo, hi, n, f := x.parseUint16Range(tcpmssExt.name, arg)
	if f != nil {
		return f
	}
	if n == 1 {
		hi = lo
	}
	if lo > hi {
		return paramErr("tcpmss: invalid range given")
	}
	s.m = ir.TCPMSSMatch{Invert: invert, Min: lo, Max: hi}
	s.flags.done(o.id)
	return nil
}

// final implements matchState.
func (s *tcpmssState) final(*parseCtx) *failure { return s.flags.fcheck(tcpmssExt) }

// build implements matchState.
func (s *tcpmssState) build() ir.Match { m := s.m; return &m }

// mssRange is the range as tcpmss_print and tcpmss_save write it.
func mssRange(m *ir.TCPMSSMatch) string {
	if m.Min == m.Max {
		return fmt.Sprint(m.Min)
	}
	return fmt.Sprintf("%d:%d", m.Min, m.Max)
}

// writeTCPMSS prints the match as tcpmss_save does.
func writeTCPMSS(b *strings.Builder, m *ir.TCPMSSMatch) {
	b.WriteString(invSpace(m.Invert) + " --mss " + mssRange(m))
}

// listTCPMSS prints the match as tcpmss_print does (-L).
func listTCPMSS(b *strings.Builder, m *ir.TCPMSSMatch) {
	b.WriteString(" tcpmss match " + invString(m.Invert) + mssRange(m))
}
