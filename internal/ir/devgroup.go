package ir

// The devgroup match (xt_devgroup), with what the kernel's structure
// (xt_devgroup_info) keeps of it.

// Devgroup flags (XT_DEVGROUP_*), in DevGroupMatch.Flags.
const (
	DevGroupMatchSrc  uint8 = 0x1
	DevGroupInvertSrc uint8 = 0x2
	DevGroupMatchDst  uint8 = 0x4
	DevGroupInvertDst uint8 = 0x8
)

// DevGroupMatch is -m devgroup [!] --src-group G[/M] [!] --dst-group
// G[/M]: the input (output) device's group g matches when (g ^ G) & M is
// 0.
type DevGroupMatch struct {
	SrcGroup, SrcMask uint32
	DstGroup, DstMask uint32
	Flags             uint8
}

// ModuleName implements Match.
func (*DevGroupMatch) ModuleName() string { return "devgroup" }

// CloneMatch implements Match.
func (m *DevGroupMatch) CloneMatch() Match { c := *m; return &c }

// tagDevGroup is the devgroup match's tag of the binary form (codec.go).
const tagDevGroup = 122

// devGroupMatch encodes a devgroup match; false for other matches.
func (e *encoder) devGroupMatch(m Match) bool {
	dm, ok := m.(*DevGroupMatch)
	if !ok {
		return false
	}
	e.u8(tagDevGroup)
	e.u8(dm.Flags)
	e.uv(uint64(dm.SrcGroup))
	e.uv(uint64(dm.SrcMask))
	e.uv(uint64(dm.DstGroup))
	e.uv(uint64(dm.DstMask))
	return true
}

// devGroupMatch decodes what encoder.devGroupMatch wrote after tag; nil
// for other tags.
func (d *decoder) devGroupMatch(tag uint8) Match {
	if tag != tagDevGroup {
		return nil
	}
	m := &DevGroupMatch{Flags: d.u8()}
	m.SrcGroup = d.u32()
	m.SrcMask = d.u32()
	m.DstGroup = d.u32()
	m.DstMask = d.u32()
	return m
}
