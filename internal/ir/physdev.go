package ir

// The physdev match (xt_physdev), with what the kernel's structure
// (xt_physdev_info) keeps of it.

// Physdev option bits (XT_PHYSDEV_OP_*), in PhysdevMatch.Bitmask and
// PhysdevMatch.Invert.
const (
	PhysdevIn      uint8 = 0x01
	PhysdevOut     uint8 = 0x02
	PhysdevBridged uint8 = 0x04
	PhysdevIsIn    uint8 = 0x08
	PhysdevIsOut   uint8 = 0x10
)

// PhysdevMatch is -m physdev: the bridge ports a bridged packet came in
// by (--physdev-in) and leaves by (--physdev-out), names with a trailing
// "+" matching a prefix, and whether it has them (--physdev-is-in,
// --physdev-is-out, --physdev-is-bridged).
type PhysdevMatch struct {
	// In and Out are the names as given, a trailing "+" included; ""
	// matches every name (its mask is empty).
	In, Out string
	// Bitmask says which options are given, Invert which are inverted.
	Bitmask, Invert uint8
}

// ModuleName implements Match.
func (*PhysdevMatch) ModuleName() string { return "physdev" }

// CloneMatch implements Match.
func (m *PhysdevMatch) CloneMatch() Match { c := *m; return &c }

// PhysdevNameMatches is ifname_compare_aligned with the mask
// xtables_parse_interface builds from pattern: a trailing "+" compares
// the prefix before it, "" compares nothing, any other name the whole
// name.
func PhysdevNameMatches(pattern, ifname string) bool {
	n := len(pattern)
	switch {
	case n == 0:
		return true
	case pattern[n-1] == '+':
		return len(ifname) >= n-1 && ifname[:n-1] == pattern[:n-1]
	}
	return ifname == pattern
}

// tagPhysdev is the physdev match's tag of the binary form (codec.go).
const tagPhysdev = 123

// physdevMatch encodes a physdev match; false for other matches.
func (e *encoder) physdevMatch(m Match) bool {
	pm, ok := m.(*PhysdevMatch)
	if !ok {
		return false
	}
	e.u8(tagPhysdev)
	e.u8(pm.Bitmask)
	e.u8(pm.Invert)
	e.str(pm.In)
	e.str(pm.Out)
	return true
}

// physdevMatch decodes what encoder.physdevMatch wrote after tag; nil for
// other tags.
func (d *decoder) physdevMatch(tag uint8) Match {
	if tag != tagPhysdev {
		return nil
	}
	m := &PhysdevMatch{Bitmask: d.u8(), Invert: d.u8()}
	m.In = d.str()
	m.Out = d.str()
	return m
}
