package compiler

import (
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
)

// NAT ranges (bpf/nat_range.h). A NAT target with an address range, a
// port range, --random, --random-fully or --persistent is an entry like
// the others (ActDNAT, ActSNAT; Next the first address, or the interface's
// for REDIRECT and MASQUERADE) flagged EFNatRange, whose Aux names a
// ProbeNatRange of the generation: Arg the range's NatFlags (the kernel's
// NF_NAT_RANGE_* values), Val and Mask the first and last address (host
// order; with NatMapIPs), Wide the first port << 16 | the last (with
// NatProtoSpecified), and a shifted port map's base (DNAT's /BASE, with
// NatProtoOffset) in Wide's bits 32-47. The data plane chooses in it as
// the kernel's get_unique_tuple does. One address and at most one port without flags
// stay the plain entry (Next, Aux the port).

// natRangeFlags are the NatFlags the data plane reads from a range.
const natRangeFlags = ir.NatMapIPs | ir.NatProtoSpecified | ir.NatRandom | ir.NatPersistent | ir.NatRandomFully |
	ir.NatProtoOffset

// natRangeBaseShift is where a ProbeNatRange's Wide holds a port map's
// base.
const natRangeBaseShift = 32

// natRanged reports whether n needs a range probe: more than one address
// or port, a random or persistent flag, or a port map.
func natRanged(n *ir.NatRange) bool {
	if n.Flags&(ir.NatRandom|ir.NatPersistent|ir.NatRandomFully|ir.NatProtoOffset) != 0 {
		return true
	}
	if n.Flags&ir.NatMapIPs != 0 && n.MinAddr != n.MaxAddr {
		return true
	}
	return n.Flags&ir.NatProtoSpecified != 0 && n.MinPort != n.MaxPort
}

// NatRangeProbe returns the ProbeNatRange of range n (ports in order, as
// nf_nat_l4proto_unique_tuple swaps them).
func NatRangeProbe(n *ir.NatRange) Probe {
	pr := Probe{Kind: ProbeNatRange, Arg: uint32(n.Flags & natRangeFlags)}
	if n.Flags&ir.NatMapIPs != 0 {
		pr.Val, pr.Mask = addr4(n.MinAddr), addr4(n.MaxAddr)
		if pr.Val > pr.Mask {
			pr.Val, pr.Mask = pr.Mask, pr.Val
		}
	}
	if n.Flags&ir.NatProtoSpecified != 0 {
		lo, hi := min(n.MinPort, n.MaxPort), max(n.MinPort, n.MaxPort)
		pr.Wide = uint64(lo)<<16 | uint64(hi)
	}
	if n.Flags&ir.NatProtoOffset != 0 {
		pr.Wide |= uint64(n.BasePort) << natRangeBaseShift
	}
	return pr
}

// natRangeEntry makes e (its action and address set) name range n.
func (fl *flattener) natRangeEntry(e *Entry, n *ir.NatRange) error {
	k, err := fl.probeIndex(NatRangeProbe(n))
	if err != nil {
		return err
	}
	e.Aux = k
	e.Flags |= EFNatRange
	return nil
}

// addr4 returns IPv4 address a in host order (0 for another family).
func addr4(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
