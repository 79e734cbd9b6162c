package ir

// The owner match (xt_owner revision 1), with what the kernel's
// structure (xt_owner_match_info) keeps of it.

// Owner option bits (XT_OWNER_*), in OwnerMatch.Match and .Invert.
const (
	OwnerUID         uint8 = 1 << 0
	OwnerGID         uint8 = 1 << 1
	OwnerSocket      uint8 = 1 << 2
	OwnerSupplGroups uint8 = 1 << 3
)

// OwnerMatch is -m owner [!] --uid-owner U[-U] [!] --gid-owner G[-G]
// [--suppl-groups] [!] --socket-exists: the options given (Match) and
// those inverted (Invert), with the inclusive ranges.
type OwnerMatch struct {
	UIDMin, UIDMax uint32
	GIDMin, GIDMax uint32
	Match, Invert  uint8
}

// ModuleName implements Match.
func (*OwnerMatch) ModuleName() string { return "owner" }

// CloneMatch implements Match.
func (m *OwnerMatch) CloneMatch() Match { c := *m; return &c }

// tagOwner is the owner match's tag of the binary form (codec.go).
const tagOwner = 121

// ownerMatch encodes an owner match; false for other matches.
func (e *encoder) ownerMatch(m Match) bool {
	om, ok := m.(*OwnerMatch)
	if !ok {
		return false
	}
	e.u8(tagOwner)
	e.u8(om.Match)
	e.u8(om.Invert)
	e.uv(uint64(om.UIDMin))
	e.uv(uint64(om.UIDMax))
	e.uv(uint64(om.GIDMin))
	e.uv(uint64(om.GIDMax))
	return true
}

// ownerMatch decodes what encoder.ownerMatch wrote after tag; nil for
// other tags.
func (d *decoder) ownerMatch(tag uint8) Match {
	if tag != tagOwner {
		return nil
	}
	m := &OwnerMatch{Match: d.u8(), Invert: d.u8()}
	m.UIDMin = d.u32()
	m.UIDMax = d.u32()
	m.GIDMin = d.u32()
	m.GIDMax = d.u32()
	return m
}
