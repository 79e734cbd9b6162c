package ir

import (
	"errors"
	"fmt"
)

// The matches' binary form: encoder.match and decoder.match dispatch on
// the match type and tag (codec.go lists the tags).

func (e *encoder) match(m Match) error {
	switch m := m.(type) {
	case *LimitMatch:
		e.limit(m)
	case *RecentMatch:
		e.recent(m)
	case *HashLimitMatch:
		e.hashLimit(m)
	case *ConnlimitMatch:
		e.connlimit(m)
	case *CPUMatch:
		e.cpu(m)
	case *TCPMatch:
		e.u8(tagTCP)
		e.port(m.SrcPort)
		e.port(m.DstPort)
		e.flags(m.Flags.Set, m.Flags.Invert, m.Option.Set, m.Option.Invert)
		e.u8(m.Flags.Mask)
		e.u8(m.Flags.Comp)
		e.u8(m.Option.Kind)
	case *UDPMatch:
		e.u8(tagUDP)
		e.port(m.SrcPort)
		e.port(m.DstPort)
	case *MultiportMatch:
		e.u8(tagMultiport)
		e.u8(uint8(m.Dir))
		e.flags(m.Invert)
		e.uv(uint64(len(m.Ports)))
		for _, p := range m.Ports {
			e.u16(p.First)
			e.u16(p.Last)
		}
	case *ICMPMatch:
		e.u8(tagICMP)
		e.flags(m.V6, m.Invert, m.Any)
		e.u8(m.Type)
		e.u8(m.CodeMin)
		e.u8(m.CodeMax)
	case *IPRangeMatch:
		e.u8(tagIPRange)
		for _, r := range []AddrRange{m.Src, m.Dst} {
			e.flags(r.Set, r.Invert)
			if err := e.addr(r.From); err != nil {
				return err
			}
			if err := e.addr(r.To); err != nil {
				return err
			}
		}
	case *CommentMatch:
		e.u8(tagComment)
		e.str(m.Text)
	case *LengthMatch:
		e.u8(tagLength)
		e.flags(m.Invert)
		e.u16(m.Min)
		e.u16(m.Max)
	case *TTLMatch:
		e.u8(tagTTL)
		e.flags(m.HL)
		e.u8(uint8(m.Op))
		e.u8(m.Value)
	case *MACMatch:
		e.u8(tagMAC)
		e.flags(m.Invert)
		e.buf = append(e.buf, m.Addr[:]...)
	case *SetMatch:
		e.u8(tagSet)
		e.flags(m.Invert, m.ReturnNomatch, m.SkipCounterUpdate, m.SkipSubcounterUpdate)
		e.str(m.Name)
		e.u8(m.Dirs.Dim)
		e.u8(m.Dirs.Src)
		for _, c := range []SetCounterMatch{m.Packets, m.Bytes} {
			e.u8(uint8(c.Op))
			e.uv(c.Value)
		}
	case *ConntrackMatch:
		e.u8(tagConntrack)
		if err := e.conntrack(m); err != nil {
			return err
		}
	case *AddrTypeMatch:
		e.u8(tagAddrType)
		e.flags(m.InvSrc, m.InvDst, m.LimitIn, m.LimitOut)
		e.u16(m.Src)
		e.u16(m.Dst)
	case *PktTypeMatch:
		e.u8(tagPktType)
		e.flags(m.Invert)
		e.u8(m.Type)
	case *DSCPMatch, *TOSMatch, *ECNMatch, *TCPMSSMatch:
		e.headerMatch(m)
	default:
		if e.ip6ext(m) || e.predMatch(m) || e.hdr4(m) || e.markMatch(m) || e.connmarkMatch(m) || e.ownerMatch(m) || e.devGroupMatch(m) ||
			e.physdevMatch(m) {
			return nil
		}
		return fmt.Errorf("match %T (-m %s) has no binary form", m, m.ModuleName())
	}
	return nil
}

// errTruncated reports a binary ruleset that ends early.
var errTruncated = errors.New("truncated")

// decoder reads the binary form; the first error sticks and later reads
// return zero values.
type decoder struct {
	buf []byte
	err error
	// strs interns the strings decoded so far (chain names, protocol
	// spellings, set names repeat across rules).
	strs map[string]string
	// Slabs the rules' match lists and their most common matches are
	// cut from: one allocation per slabSize instead of one each.
	matchSlab   []Match
	udpSlab     []UDPMatch
	tcpSlab     []TCPMatch
	commentSlab []CommentMatch
	// recentStr holds strings decoded lately by a hash of their length and
	// end bytes (str): consecutive rules repeat their comment, protocol
	// and jump target, which it finds without a lookup in strs.
	recentStr [recentStrs]string
	// skip, when not nil, says which tables' rules are stepped over
	// (Skip.Tables); skipping is set while they are.
	skip     func(table string) bool
	skipping bool
	// rulesOf, when not nil, says which user chains' rules of a table
	// not skipped whole are stepped over (Skip.Rules); flushTable is the
	// table flushes was asked for, flushes its answer (asked once per
	// table, at its first user chain with rules).
	rulesOf    func(table string) func(chain string) bool
	flushTable string
	flushAsked bool
	flushes    func(chain string) bool
	// scratch holds the rule skipped rules are decoded into.
	scratch *skipScratch
}

// recentStrs is the size of decoder.recentStr, a power of two.
const recentStrs = 64

// slabSize is how many elements a decoder's slab holds.
const slabSize = 1024

func (d *decoder) match() Match {
	switch tag := d.u8(); tag {
	case tagLimit:
		return d.limit()
	case tagRecent:
		return d.recent()
	case tagHashLimit:
		return d.hashLimit()
	case tagConnlimit:
		return d.connlimit()
	case tagCPU:
		return d.cpu()
	case tagTCP:
		m := d.newTCP()
		d.port(&m.SrcPort)
		d.port(&m.DstPort)
		d.flags(&m.Flags.Set, &m.Flags.Invert, &m.Option.Set, &m.Option.Invert)
		m.Flags.Mask = d.u8()
		m.Flags.Comp = d.u8()
		m.Option.Kind = d.u8()
		return m
	case tagUDP:
		m := d.newUDP()
		d.port(&m.SrcPort)
		d.port(&m.DstPort)
		return m
	case tagMultiport:
		m := &MultiportMatch{Dir: MultiportDir(d.u8())}
		d.flags(&m.Invert)
		n := d.uv()
		if n > uint64(len(d.buf)) {
			d.fail(errTruncated)
			return m
		}
		m.Ports = make([]PortRange, n)
		for i := range m.Ports {
			m.Ports[i] = PortRange{First: d.u16(), Last: d.u16()}
		}
		return m
	case tagICMP:
		m := &ICMPMatch{}
		d.flags(&m.V6, &m.Invert, &m.Any)
		m.Type, m.CodeMin, m.CodeMax = d.u8(), d.u8(), d.u8()
		return m
	case tagIPRange:
		m := &IPRangeMatch{}
		for _, r := range []*AddrRange{&m.Src, &m.Dst} {
			d.flags(&r.Set, &r.Invert)
			r.From = d.addr()
			r.To = d.addr()
		}
		return m
	case tagComment:
		m := cutOne(&d.commentSlab)
		m.Text = d.str()
		return m
	case tagLength:
		m := &LengthMatch{}
		d.flags(&m.Invert)
		m.Min, m.Max = d.u16(), d.u16()
		return m
	case tagTTL:
		m := &TTLMatch{}
		d.flags(&m.HL)
		m.Op = CmpOp(d.u8())
		m.Value = d.u8()
		return m
	case tagMAC:
		m := &MACMatch{}
		d.flags(&m.Invert)
		copy(m.Addr[:], d.bytes(6))
		return m
	case tagSet:
		m := &SetMatch{}
		d.flags(&m.Invert, &m.ReturnNomatch, &m.SkipCounterUpdate, &m.SkipSubcounterUpdate)
		m.Name = d.str()
		m.Dirs.Dim, m.Dirs.Src = d.u8(), d.u8()
		for _, c := range []*SetCounterMatch{&m.Packets, &m.Bytes} {
			c.Op = SetCounterOp(d.u8())
			c.Value = d.uv()
		}
		return m
	case tagConntrack:
		return d.conntrack()
	case tagAddrType:
		m := &AddrTypeMatch{}
		d.flags(&m.InvSrc, &m.InvDst, &m.LimitIn, &m.LimitOut)
		m.Src, m.Dst = d.u16(), d.u16()
		return m
	case tagPktType:
		m := &PktTypeMatch{}
		d.flags(&m.Invert)
		m.Type = d.u8()
		return m
	case tagDSCP, tagTOS, tagECN, tagTCPMSS:
		return d.headerMatch(tag)
	default:
		if m := d.ip6ext(tag); m != nil {
			return m
		}
		if m := d.predMatch(tag); m != nil {
			return m
		}
		if m := d.hdr4(tag); m != nil {
			return m
		}
		if m := d.markMatch(tag); m != nil {
			return m
		}
		if m := d.connmarkMatch(tag); m != nil {
			return m
		}
		if m := d.ownerMatch(tag); m != nil {
			return m
		}
		if m := d.devGroupMatch(tag); m != nil {
			return m
		}
		if m := d.physdevMatch(tag); m != nil {
			return m
		}
		d.fail(fmt.Errorf("unknown match tag %d", tag))
		return &CommentMatch{}
	}
}

// conntrack encodes a conntrack (or state) match.
func (e *encoder) conntrack(m *ConntrackMatch) error {
	e.flags(m.StateAlias, m.States.Set, m.States.Invert, m.Status.Set, m.Status.Invert,
		m.Proto.Set, m.Proto.Invert)
	e.u16(m.States.Bits)
	e.u16(m.Status.Bits)
	e.u8(m.Proto.Num)
	for _, a := range []AddrMatch{m.OrigSrc, m.OrigDst, m.ReplSrc, m.ReplDst} {
		e.flags(a.Set, a.Invert)
		if err := e.addr(a.Addr); err != nil {
			return fmt.Errorf("conntrack address: %w", err)
		}
		if err := e.addr(a.Mask); err != nil {
			return fmt.Errorf("conntrack mask: %w", err)
		}
	}
	for _, p := range []PortMatch{m.OrigSrcPort, m.OrigDstPort, m.ReplSrcPort, m.ReplDstPort} {
		e.port(p)
	}
	e.flags(m.Expire.Set, m.Expire.Invert)
	e.uv(uint64(m.Expire.Min))
	e.uv(uint64(m.Expire.Max))
	e.u8(uint8(m.Dir))
	return nil
}

// conntrack decodes what encoder.conntrack wrote.
func (d *decoder) conntrack() *ConntrackMatch {
	m := &ConntrackMatch{}
	d.flags(&m.StateAlias, &m.States.Set, &m.States.Invert, &m.Status.Set, &m.Status.Invert,
		&m.Proto.Set, &m.Proto.Invert)
	m.States.Bits = d.u16()
	m.Status.Bits = d.u16()
	m.Proto.Num = d.u8()
	for _, a := range []*AddrMatch{&m.OrigSrc, &m.OrigDst, &m.ReplSrc, &m.ReplDst} {
		d.flags(&a.Set, &a.Invert)
		a.Addr = d.addr()
		a.Mask = d.addr()
	}
	for _, p := range []*PortMatch{&m.OrigSrcPort, &m.OrigDstPort, &m.ReplSrcPort, &m.ReplDstPort} {
		d.port(p)
	}
	d.flags(&m.Expire.Set, &m.Expire.Invert)
	m.Expire.Min = d.u32()
	m.Expire.Max = d.u32()
	m.Dir = CtDirection(d.u8())
	return m
}
