package iptables

import (
	"net/netip"
	"reflect"

	"github.com/xfw-dev/xfw/internal/ir"
)

// RulesEqual reports whether two rules are the same rule for the kernel,
// which is how iptables -D and -C find the rule to delete or check: the
// same conditions, matches (in order) and target. Counters and spellings do
// not count.
func RulesEqual(fam ir.Family, a, b *ir.Rule) bool {
	if addrKey(a.Src) != addrKey(b.Src) || addrKey(a.Dst) != addrKey(b.Dst) {
		return false
	}
	if ifaceKey(a.InIface) != ifaceKey(b.InIface) || ifaceKey(a.OutIface) != ifaceKey(b.OutIface) {
		return false
	}
	if a.Proto.Num != b.Proto.Num || a.Proto.Invert != b.Proto.Invert {
		return false
	}
	// ip6tables marks "-p" with a flag even for protocol 0 ("all").
	if fam == ir.IPv6 && a.Proto.Set != b.Proto.Set {
		return false
	}
	if a.Fragment != b.Fragment {
		return false
	}
	if len(a.Matches) != len(b.Matches) {
		return false
	}
	for i := range a.Matches {
		if !reflect.DeepEqual(matchKey(a.Matches[i]), matchKey(b.Matches[i])) {
			return false
		}
	}
	return targetKey(a.Target) == targetKey(b.Target)
}

// addrCmp is the comparable form of an address condition.
type addrCmp struct {
	addr, mask netip.Addr
	invert     bool
}

// addrKey normalises an address condition: "anywhere" in any spelling is
// the zero value.
func addrKey(a ir.AddrMatch) addrCmp {
	if !a.Set || (!a.Invert && zeroMask(a.Mask)) {
		return addrCmp{}
	}
	return addrCmp{a.Addr, a.Mask, a.Invert}
}

// zeroMask reports whether maskBits(m) is 0 (the zero Addr, 0.0.0.0 or
// ::) without counting bits: -D and -C compare every rule's addresses of
// the chain with it.
func zeroMask(m netip.Addr) bool {
	switch {
	case m.Is4():
		return m.As4() == [4]byte{}
	case m.Is6():
		return m.As16() == [16]byte{}
	}
	return true
}

// ifaceKey normalises an interface condition.
func ifaceKey(m ir.IfaceMatch) ir.IfaceMatch {
	if !m.Set || (m.Name == "+" && !m.Invert) {
		return ir.IfaceMatch{}
	}
	return m
}

// matchKey returns a copy of the match without the fields that only record
// which options were spelled out.
func matchKey(m ir.Match) ir.Match {
	switch m := m.(type) {
	case *ir.TCPMatch:
		c := *m
		c.SrcPort, c.DstPort = portKey(m.SrcPort), portKey(m.DstPort)
		c.Flags.Set, c.Option.Set = false, false
		return &c
	case *ir.UDPMatch:
		c := *m
		c.SrcPort, c.DstPort = portKey(m.SrcPort), portKey(m.DstPort)
		return &c
	case *ir.ConntrackMatch:
		// Every field is part of the kernel's match data (the state
		// alias flag included: -m state never equals -m conntrack
		// --ctstate), and spellings are already normalised ("3:3" and
		// "3", "tcp" and "6", a dotted mask and its prefix length).
		return m
	}
	return m
}

// portKey normalises a port condition: an absent one is the full range.
func portKey(p ir.PortMatch) ir.PortMatch {
	if !p.Set {
		return ir.PortMatch{Range: fullPortRange}
	}
	p.Set = false
	return p
}

// targetCmp is the comparable form of a target.
type targetCmp struct {
	kind       ir.TargetKind
	chain      string
	rejectWith string
	log        ir.LogOptions
	nat        ir.NatRange
	mark       ir.MarkTarget
	connmark   ir.ConnmarkTarget
	mangle     ir.MangleTarget
	nflog      ir.NFLogOptions
	set        ir.SetTarget
}

// targetKey normalises a target.
func targetKey(t ir.Target) targetCmp {
	k := targetCmp{kind: t.Kind, chain: t.Chain, rejectWith: t.RejectWith, mark: t.Mark}
	if t.Log != nil {
		k.log = *t.Log
		k.log.LevelSet = false
	}
	if t.Nat != nil {
		k.nat = *t.Nat
	}
	if t.Connmark != nil {
		k.connmark = *t.Connmark
	}
	if t.Mangle != nil {
		k.mangle = *t.Mangle
	}
	if t.NFLog != nil {
		k.nflog = *t.NFLog
	}
	if t.Set != nil {
		k.set = *t.Set
	}
	return k
}
