package compiler

import "github.com/xfw-dev/xfw/internal/ir"

// The physdev match (xt_physdev.c) as conditions on two interface fields:
// FieldPhysIn and FieldPhysOut, the bridge ports br_netfilter records for
// the packet. Their values (XFW_PHYS_* in bpf/common.h):
//
//   - PhysNone (0, both fields): the packet has no bridge information
//     (it did not come through a bridge with bridge-nf-call-iptables /
//     -ip6tables on): the match holds only when every option it has is
//     inverted;
//   - a port's ifindex: a frame bridged from port to port (both fields)
//     is judged at its output port (bpf/bridge.h); the input port of a
//     packet the bridge passed up to be routed or delivered, as the
//     port's TC ingress hook noted it;
//   - PhysNull: no port (the output port of a packet the bridge passed
//     up to be routed or delivered: the kernel's hooks run before the
//     bridge picks one);
//   - PhysAnyPort: the input port of such a packet when no note names
//     it (the bridge's receive ran on another CPU than the port's): a
//     port of the bridge the data plane cannot name.
//
// The match is a conjunction of a condition on the input side
// (--physdev-is-in, --physdev-in) and one on the output side
// (--physdev-is-bridged, --physdev-is-out, --physdev-out), except for
// PhysNone, which is in both sets or in neither (a packet has it in both
// fields or in none). A --physdev-in (--physdev-out) name that does not
// match every name cannot be decided for PhysAnyPort or for a device the
// compiler was not told about: the packet is dropped, uncounted, where
// the kernel would test it (a hotdrop term; docs/differences.md).

// Physdev field sentinels (XFW_PHYS_*).
const (
	// PhysNone is the value of both fields without bridge information.
	PhysNone = 0
	// PhysNull is "no port".
	PhysNull = 0xfffffffd
	// PhysAnyPort is "a port the data plane does not know".
	PhysAnyPort = 0xfffffffe
)

// physSide is one side's options of a physdev match: the is-option
// (--physdev-is-in, or --physdev-is-out and --physdev-is-bridged, which
// both ask for a port on the output side) and the name option.
type physSide struct {
	isBits  []uint8 // options requiring a port (or, inverted, none)
	nameBit uint8
	name    string
	// nullName is the name option's answer without a port: the kernel
	// skips --physdev-in then (true) and fails --physdev-out (false).
	nullName bool
}

// isHolds reports whether the side's is-options hold (port: there is a
// port on that side).
func (s physSide) isHolds(m *ir.PhysdevMatch, port bool) bool {
	for _, bit := range s.isBits {
		if m.Bitmask&bit != 0 && port == (m.Invert&bit != 0) {
			return false
		}
	}
	return true
}

// nameHolds reports whether the side's name option holds for a port
// called name (port false: no port).
func (s physSide) nameHolds(m *ir.PhysdevMatch, port bool, name string) bool {
	if m.Bitmask&s.nameBit == 0 {
		return true
	}
	if !port {
		return s.nullName
	}
	return ir.PhysdevNameMatches(s.name, name) != (m.Invert&s.nameBit != 0)
}

// nameDecided reports whether the side's answer is the same for every
// port name, so that it holds for an unnamed port too.
func (s physSide) nameDecided(m *ir.PhysdevMatch) bool {
	return m.Bitmask&s.nameBit == 0 || s.name == "" || s.name == "+"
}

// physSets are one side's values: those passing its is-options (isOK),
// those passing its name option too (holds), and the unnamed ports
// passing its is-options whose name it tests (undecided).
type physSets struct {
	isOK, holds, undecided *Set
}

// sets returns the side's physSets over the known devices, PhysNull and
// the unnamed values.
func (s physSide) sets(m *ir.PhysdevMatch, ifaces []Interface, unnamed []uint64) physSets {
	var ok, holds, und []Interval
	add := func(v uint64, port bool, name string, named bool) {
		if !s.isHolds(m, port) {
			return
		}
		iv := Interval{U64(v), U64(v)}
		ok = append(ok, iv)
		switch {
		case named || s.nameDecided(m):
			if s.nameHolds(m, port, name) {
				holds = append(holds, iv)
			}
		default:
			und = append(und, iv)
		}
	}
	add(PhysNull, false, "", true)
	for _, i := range ifaces {
		if i.Index != 0 {
			add(uint64(i.Index), true, i.Name, true)
		}
	}
	for _, v := range unnamed {
		add(v, true, "", false)
	}
	return physSets{isOK: NewSet(ok...), holds: NewSet(holds...), undecided: NewSet(und...)}
}

// physdev adds a physdev match's conditions.
func (b *termBuilder) physdev(m *ir.PhysdevMatch) {
	in := physSide{isBits: []uint8{ir.PhysdevIsIn}, nameBit: ir.PhysdevIn, name: m.In, nullName: true}
	out := physSide{isBits: []uint8{ir.PhysdevBridged, ir.PhysdevIsOut}, nameBit: ir.PhysdevOut, name: m.Out}
	is := in.sets(m, b.ifaces, []uint64{PhysAnyPort, ifaceUnknown})
	os := out.sets(m, b.ifaces, []uint64{ifaceUnknown})
	// The kernel tests the is-options first, then the input port's
	// name, then the output port's.
	b.physdevHotdrop(is.undecided, os.isOK)
	b.physdevHotdrop(is.holds, os.undecided)
	inSet, outSet := is.holds, os.holds
	if m.Bitmask&^m.Invert == 0 {
		// Every option inverted: a packet without bridge information
		// matches.
		none := Point(U64(PhysNone))
		inSet, outSet = Union(inSet, none), Union(outSet, none)
	}
	b.and(FieldPhysIn, inSet)
	b.and(FieldPhysOut, outSet)
}

// physdevHotdrop adds a term dropping the packets whose ports are in in
// and out under the rule's condition so far (the options before the
// undecided name, on the output side the is-options, passed).
func (b *termBuilder) physdevHotdrop(in, out *Set) {
	if in.Empty() || out.Empty() {
		return
	}
	h := b.c
	h[FieldPhysIn] = Intersect(h[FieldPhysIn], in)
	h[FieldPhysOut] = Intersect(h[FieldPhysOut], out)
	if h[FieldPhysIn].Empty() || h[FieldPhysOut].Empty() {
		return
	}
	b.hotdropTerms(h)
	// Not a transport header defect: the rule's own entry cannot
	// absorb it (mergeHotdrop).
	b.dirty = true
}
