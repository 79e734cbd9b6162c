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
// the ProbeNatAddr6 probes of its first and last address (a range's
// address is chosen as find_best_ips_proto does: bpf/nat_range.h
// xfw_natr_pick6). SNAT and MASQUERADE also translate packets without
// ports as the IPv4 side does (bpf/nat_query.h, bpf/nat6_query.h): ICMPv6
// echo with its identifier kept, other protocols without ports by the
// address alone. DNAT in nat OUTPUT translates the host's own packets
// as IPv4's does (nat_output.go, bpf/nat_out.h), REDIRECT there to ::1
// (a DNAT to [::1] with REDIRECT's ports and flags); REDIRECT in nat
// PREROUTING to the input interface's address (RedirectAddr: the first
// usable one of its list, bpf/nat.h xfw_nat_redirect_addr). What stays
// refused (checkNat6Rule): IPv4-mapped addresses; DNAT and REDIRECT
// of other protocols than TCP and UDP translate the address alone, in nat
// PREROUTING, as in IPv4 (checkDnatProto). --ctreplsrc and
// --ctrepldst name their IPv6 addresses by ProbeNatAddr6 probes too
// (ctReplProbe6).

// Nat6Addr is an IPv6 ActDNAT or ActSNAT entry's Next when the
// translation has an address: the address is its range's
// (XFW_NAT_ADDR6).
const Nat6Addr = 1

// checkNat6Rule refuses an IPv6 NAT rule the data plane cannot translate
// (checkNatRule asks it first for IPv6 rules).
func checkNat6Rule(r *ir.Rule) error {
	name := natTargetNames[r.Target.Kind]
	n := natRangeOf(r)
	switch {
	case n.Flags&ir.NatMapIPs != 0 && !nat6Addr(n.MinAddr):
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet to %s", name, n.MinAddr)
	case n.Flags&ir.NatMapIPs != 0 && !nat6Addr(n.MaxAddr):
		return fmt.Errorf("target %s is not supported by xfw's data plane for IPv6 yet to %s", name, n.MaxAddr)
	}
	return nil
}

// nat6Addr reports whether the data plane translates to IPv6 address a:
// not an IPv4-mapped one (the translated packet would carry it as IPv6),
// not ::.
func nat6Addr(a netip.Addr) bool { return a.Is6() && !a.Is4In6() && !a.IsUnspecified() }

// nat6Entry sets e's address for IPv6 rule r's translation to range n
// (e's action set): Nat6Addr and a range naming its address, KeepAddr
// without an address, MasqueradeAddr for MASQUERADE, RedirectAddr for
// REDIRECT in PREROUTING (in OUTPUT ::1's range).
func (fl *flattener) nat6Entry(e *Entry, r *ir.Rule, n *ir.NatRange) error {
	if r.Target.Kind == ir.TargetRedirect && fl.natOutput {
		n = redirectOutputRange6(n)
	}
	switch {
	case r.Target.Kind == ir.TargetRedirect && !fl.natOutput:
		e.Next = RedirectAddr // the input interface's (bpf/nat.h xfw_nat_redirect_addr)
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

// redirectOutputAddr6 is REDIRECT's address in nat OUTPUT: ::1, as
// nf_nat_redirect_ipv6 picks it for the host's own packets.
var redirectOutputAddr6 = netip.IPv6Loopback()

// redirectOutputRange6 returns REDIRECT's range n in nat OUTPUT as
// nf_nat_redirect_ipv6 makes it: its flags and ports, and the address
// ::1 (NF_NAT_RANGE_MAP_IPS).
func redirectOutputRange6(n *ir.NatRange) *ir.NatRange {
	out := *n
	out.Flags |= ir.NatMapIPs
	out.MinAddr, out.MaxAddr = redirectOutputAddr6, redirectOutputAddr6
	return &out
}

// NatAddr6Probe returns the ProbeNatAddr6 holding IPv6 address a.
func NatAddr6Probe(a netip.Addr) Probe { return addr6Probe(AddrU128(a)) }

// addr6Probe returns the ProbeNatAddr6 holding the 128-bit value w.
func addr6Probe(w U128) Probe {
	return Probe{Kind: ProbeNatAddr6, Val: uint32(w.Hi >> 32), Mask: uint32(w.Hi), Wide: w.Lo}
}

// addr6Value returns the value a ProbeNatAddr6 holds.
func addr6Value(pr Probe) U128 { return U128{Hi: uint64(pr.Val)<<32 | uint64(pr.Mask), Lo: pr.Wide} }

// ctReplProbe6 returns the probe asking m in an IPv6 ruleset: Arg as
// ctReplProbe's, Val and Mask the indexes of the ProbeNatAddr6 probes
// holding the source option's masked address and its mask, Wide the
// destination's (address index << 32 | mask index) (bpf/ctnat.h).
func (fl *flattener) ctReplProbe6(m *ctReplMatch) (Probe, error) {
	pr := ctReplProbe(&ctReplMatch{Src: ir.AddrMatch{Set: m.Src.Set, Invert: m.Src.Invert},
		Dst: ir.AddrMatch{Set: m.Dst.Set, Invert: m.Dst.Invert}})
	opt := func(a ir.AddrMatch) (uint32, uint32, error) {
		mask := AddrU128(a.Mask)
		addr := AddrU128(a.Addr)
		ka, err := fl.probeIndex(addr6Probe(U128{Hi: addr.Hi & mask.Hi, Lo: addr.Lo & mask.Lo}))
		if err != nil {
			return 0, 0, err
		}
		km, err := fl.probeIndex(addr6Probe(mask))
		return uint32(ka), uint32(km), err
	}
	if m.Src.Set {
		ka, km, err := opt(m.Src)
		if err != nil {
			return Probe{}, err
		}
		pr.Val, pr.Mask = ka, km
	}
	if m.Dst.Set {
		ka, km, err := opt(m.Dst)
		if err != nil {
			return Probe{}, err
		}
		pr.Wide = uint64(ka)<<32 | uint64(km)
	}
	return pr, nil
}

// CtReplAnswer6 is ProbeCtRepl's answer in IPv6 generation g for a packet
// whose FieldCt value is ct and whose connection's reply tuple has
// addresses src and dst (ctReplProbe6).
func CtReplAnswer6(g *Generation, pr Probe, ct uint32, src, dst U128) bool {
	state := uint8(ct & CtValStateMask)
	if state == CtsInvalid || state == CtsUntracked {
		return true
	}
	pass := func(a U128, ka, km uint64, inv bool) bool {
		if int(ka) >= len(g.Probes) || int(km) >= len(g.Probes) {
			return false
		}
		want, mask := addr6Value(g.Probes[ka]), addr6Value(g.Probes[km])
		return (U128{Hi: a.Hi & mask.Hi, Lo: a.Lo & mask.Lo} == want) != inv
	}
	if pr.Arg&CtReplSrc != 0 && !pass(src, uint64(pr.Val), uint64(pr.Mask), pr.Arg&CtReplSrcInv != 0) {
		return false
	}
	return pr.Arg&CtReplDst == 0 || pass(dst, pr.Wide>>32, pr.Wide&0xffffffff, pr.Arg&CtReplDstInv != 0)
}
