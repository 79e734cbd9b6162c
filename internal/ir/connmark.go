package ir

// The connmark match (xt_connmark revision 1) and the CONNMARK target
// (xt_connmark revision 2), with what the kernel's structures keep of them.

// ConnmarkMatch is -m connmark [!] --mark VALUE[/MASK]: (ctmark & Mask) ==
// Value, false for a packet without a connection whatever the inversion.
type ConnmarkMatch struct {
	Value, Mask uint32
	Invert      bool
}

// ModuleName implements Match.
func (*ConnmarkMatch) ModuleName() string { return "connmark" }

// CloneMatch implements Match.
func (m *ConnmarkMatch) CloneMatch() Match { c := *m; return &c }

// ConnmarkMode is the CONNMARK target's mode (XT_CONNMARK_*).
type ConnmarkMode uint8

// The CONNMARK modes, as the kernel numbers them.
const (
	// ConnmarkSet: ctmark = ((ctmark & ^CtMask) ^ CtMark) shifted.
	ConnmarkSet ConnmarkMode = iota
	// ConnmarkSave: ctmark = (ctmark & ^CtMask) ^ ((mark & NfMask) shifted).
	ConnmarkSave
	// ConnmarkRestore: mark = (mark & ^NfMask) ^ ((ctmark & CtMask) shifted).
	ConnmarkRestore
)

// ConnmarkTarget is the CONNMARK target's xt_connmark_tginfo2: every
// spelling (--set-mark, --and-mark, --mask, ...) is one of these.
type ConnmarkTarget struct {
	Mode                   ConnmarkMode
	CtMark, CtMask, NfMask uint32
	// ShiftRight selects --right-shift-mark (else left); ShiftBits is the
	// shift, 0 for none.
	ShiftRight bool
	ShiftBits  uint8
}

// Tags of the binary form (codec.go), away from the tags numbered there.
const tagConnmark = 120

// connmarkMatch encodes a connmark match; false for other matches.
func (e *encoder) connmarkMatch(m Match) bool {
	cm, ok := m.(*ConnmarkMatch)
	if !ok {
		return false
	}
	e.u8(tagConnmark)
	e.flags(cm.Invert)
	e.uv(uint64(cm.Value))
	e.uv(uint64(cm.Mask))
	return true
}

// connmarkMatch decodes what encoder.connmarkMatch wrote after tag; nil for
// other tags.
func (d *decoder) connmarkMatch(tag uint8) Match {
	if tag != tagConnmark {
		return nil
	}
	m := &ConnmarkMatch{}
	d.flags(&m.Invert)
	m.Value = d.u32()
	m.Mask = d.u32()
	return m
}

// connmarkTarget encodes the CONNMARK target's values: a presence byte,
// then the fields.
func (e *encoder) connmarkTarget(t *ConnmarkTarget) {
	if t == nil {
		e.u8(0)
		return
	}
	e.u8(1)
	e.u8(uint8(t.Mode))
	e.uv(uint64(t.CtMark))
	e.uv(uint64(t.CtMask))
	e.uv(uint64(t.NfMask))
	e.flags(t.ShiftRight)
	e.u8(t.ShiftBits)
}

// connmarkTarget decodes what encoder.connmarkTarget wrote.
func (d *decoder) connmarkTarget() *ConnmarkTarget {
	if d.u8() == 0 {
		return nil
	}
	t := &ConnmarkTarget{Mode: ConnmarkMode(d.u8())}
	t.CtMark = d.u32()
	t.CtMask = d.u32()
	t.NfMask = d.u32()
	d.flags(&t.ShiftRight)
	t.ShiftBits = d.u8()
	return t
}
