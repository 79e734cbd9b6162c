package ir

// Matches on IPv4 / IPv6 header bytes and on TCP options: -m dscp, -m tos,
// -m ecn and -m tcpmss.

// DSCPMatch is -m dscp --dscp (or --dscp-class, stored as its value): the
// six high bits of the IPv4 TOS / IPv6 traffic class byte.
type DSCPMatch struct {
	Invert bool
	// Value is the code point, 0-63.
	Value uint8
}

// ModuleName implements Match.
func (*DSCPMatch) ModuleName() string { return "dscp" }

// CloneMatch implements Match.
func (m *DSCPMatch) CloneMatch() Match { c := *m; return &c }

// TOSMatch is -m tos --tos VALUE/MASK (revision 1): the TOS / traffic
// class byte ANDed with Mask equals Value.
type TOSMatch struct {
	Invert      bool
	Value, Mask uint8
}

// ModuleName implements Match.
func (*TOSMatch) ModuleName() string { return "tos" }

// CloneMatch implements Match.
func (m *TOSMatch) CloneMatch() Match { c := *m; return &c }

// ECN operations of -m ecn (xt_ecn.h XT_ECN_OP_MATCH_*), as bits of
// ECNMatch.Ops and ECNMatch.Invert.
const (
	ECNMatchIP  uint8 = 0x01
	ECNMatchECE uint8 = 0x10
	ECNMatchCWR uint8 = 0x20
)

// ECNMatch is -m ecn: the ECN field of the IP header (--ecn-ip-ect) and
// the ECE and CWR bits of the TCP header.
type ECNMatch struct {
	// Ops are the ECNMatch* tests given; Invert those of them inverted.
	Ops, Invert uint8
	// IPECT is --ecn-ip-ect's code point, 0-3.
	IPECT uint8
}

// ModuleName implements Match.
func (*ECNMatch) ModuleName() string { return "ecn" }

// CloneMatch implements Match.
func (m *ECNMatch) CloneMatch() Match { c := *m; return &c }

// TCPMSSMatch is -m tcpmss --mss MIN[:MAX]: the value of a TCP
// packet's maximum segment size option.
type TCPMSSMatch struct {
	Invert   bool
	Min, Max uint16
}

// ModuleName implements Match.
func (*TCPMSSMatch) ModuleName() string { return "tcpmss" }

// CloneMatch implements Match.
func (m *TCPMSSMatch) CloneMatch() Match { c := *m; return &c }

// headerMatch encodes a match of this file.
func (e *encoder) headerMatch(m Match) {
	switch m := m.(type) {
	case *DSCPMatch:
		e.u8(tagDSCP)
		e.flags(m.Invert)
		e.u8(m.Value)
	case *TOSMatch:
		e.u8(tagTOS)
		e.flags(m.Invert)
		e.u8(m.Value)
		e.u8(m.Mask)
	case *ECNMatch:
		e.u8(tagECN)
		e.u8(m.Ops)
		e.u8(m.Invert)
		e.u8(m.IPECT)
	case *TCPMSSMatch:
		e.u8(tagTCPMSS)
		e.flags(m.Invert)
		e.u16(m.Min)
		e.u16(m.Max)
	}
}

// headerMatch decodes a match of this file, its tag already read.
func (d *decoder) headerMatch(tag uint8) Match {
	switch tag {
	case tagDSCP:
		m := &DSCPMatch{}
		d.flags(&m.Invert)
		m.Value = d.u8()
		return m
	case tagTOS:
		m := &TOSMatch{}
		d.flags(&m.Invert)
		m.Value, m.Mask = d.u8(), d.u8()
		return m
	case tagECN:
		m := &ECNMatch{}
		m.Ops, m.Invert, m.IPECT = d.u8(), d.u8(), d.u8()
		return m
	default:
		m := &TCPMSSMatch{}
		d.flags(&m.Invert)
		m.Min, m.Max = d.u16(), d.u16()
		return m
	}
}
