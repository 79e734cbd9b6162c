package compiler

import (
	"fmt"
	"net/netip"

	"github.com/xfw-dev/xfw/internal/ir"
)

// NAT in IPv6 (bpf/nat.h, bpf/nat6.h). The data plane translates IPv6
// TCP and UDP with the IPv4 tables widened to 128-bit addresses: DNAT in
// nat PREROUTING, SNAT and MASQUERADE in nat POSTROUTING, with ports,
// port ranges and the random flags. An entry's 32-bit Next cannot hold an
// IPv6 address: an IPv6 NAT entry with an address is always a ranged one
// (EFNatRange), Next Nat6Addr, and its ProbeNatRange's Val and Mask name
// the ProbeNatAddr6 probes of its first and last address. What stays
// refused (checkNat6Rule): REDIRECT, nat OUTPUT, address ranges, a source
// translation of other protocols than TCP and UDP.

// Nat6Addr is an IPv6 ActDNAT or ActSNAT entry's Next when the
// translation has an address: the address is its range's
// (XFW_NAT_ADDR6).
const Nat6Addr = 1

// checkNat6Rule refuses an IPv6 NAT rule the data plane cannot translate
// (checkNatRule asks it first for IPv6 rules).
func checkNat6Rule(at natContext, r *ir.Rule) error {
	name := natTargetNames[r.Target.Kind]
	n := natRangeOf(r)
	switch {
	case r.Target.Kind == ir.TargetRedirect:
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet", name)
	case at.output:
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 in nat OUTPUT yet", name)
	case !r.Proto.Set || r.Proto.Invert || (r.Proto.Num != protoTCP && r.Proto.Num != protoUDP):
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet in a rule not restricted to -p tcp or -p udp", name)
	case n.Flags&ir.NatMapIPs != 0 && n.MinAddr != n.MaxAddr:
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet with an address range", name)
	case n.Flags&ir.NatMapIPs != 0 && (!n.MinAddr.Is6() || n.MinAddr.Is4In6() || n.MinAddr.IsUnspecified()):
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet to %s", name, n.MinAddr)
	}
	return nil
}

// checkNat6Repl refuses --ctreplsrc and --ctrepldst in an IPv6 ruleset
// with NAT: the reply tuple's translated addresses are asked by an IPv4
// probe only (ctrepl.go); the classification fields answer the original
// tuple's.
func checkNat6Repl(rs *ir.Ruleset) error {
	if rs.Family == ir.IPv4 || !usesNAT(rs) {
		return nil
	}
	if anyRule(rs, func(r *ir.Rule) bool {
		for _, m := range r.Matches {
			if hasCtReplAddr(m) {
				return true
			}
		}
		return false
	}) {
		return fmt.Errorf("conntrack --ctreplsrc and --ctrepldst are not supported by xfw for IPv6 with NAT targets yet")
	}
	return nil
}

// nat6Entry sets e's address for IPv6 rule r's translation to range n
// (e's action set): Nat6Addr and a range naming its address, KeepAddr
// without an address, MasqueradeAddr for MASQUERADE.
func (fl *flattener) nat6Entry(e *Entry, r *ir.Rule, n *ir.NatRange) error {
	switch {
	case r.Target.Kind == ir.TargetMasquerade:
		e.Next = MasqueradeAddr
	case n.Flags&ir.NatMapIPs == 0:
		e.Next = KeepAddr
	default:
		e.Next = Nat6Addr
	}
	if e.Next != Nat6Addr && !natRanged(n) {
		if n.Flags&ir.NatProtoSpecified != 0 {
			e.Aux = n.MinPort
		}
		return nil
	}
	pr := NatRangeProbe(n)
	if n.Flags&ir.NatMapIPs != 0 {
		lo, err := fl.probeIndex(NatAddr6Probe(n.MinAddr))
		if err != nil {
			return err
		}
		hi, err := fl.probeIndex(NatAddr6Probe(n.MaxAddr))
		if err != nil {
			return err
		}
		pr.Val, pr.Mask = uint32(lo), uint32(hi)
	}
	k, err := fl.probeIndex(pr)
	if err != nil {
		return err
	}
	e.Aux = k
	e.Flags |= EFNatRange
	return nil
}

// NatAddr6Probe returns the ProbeNatAddr6 holding IPv6 address a.
func NatAddr6Probe(a netip.Addr) Probe {
	w := AddrU128(a)
	return Probe{Kind: ProbeNatAddr6, Val: uint32(w.Hi >> 32), Mask: uint32(w.Hi), Wide: w.Lo}
}
